"""Each replica's own TF1 graph state inside the one graph MirroredStrategy traces.

MirroredStrategy traces every replica into one FuncGraph, on threads that interleave at
every all-reduce. A TF1 model_fn keeps state in that graph: the v1 variable store and
variable scope store (themselves graph collections), and the per-step collections (LOSSES,
UPDATE_OPS, SUMMARIES, the variable lists). On a TPU each core built its own graph, so each
saw only its own. This module gives each replica thread its own store and lists for the
length of its step (`own_v1_stores`, `own_collections`), and puts the graph's own back when
the last replica leaves. It knows nothing of variables' names or creation (`variables.py`)
nor of models.
"""

from __future__ import annotations

import collections.abc
import contextlib
import threading
from typing import Any, Callable, Iterator

import tensorflow as tf

from tpu_estimator_compat import _tf_private

_v1 = tf.compat.v1

# Collections that hold per-step ops or tensors. TF1 filled them once per graph build; here
# every replica of every trace must start with them empty, or replica 2 would see replica 1's
# losses (MirroredStrategy traces all replicas into one graph).
PER_STEP_COLLECTIONS = (
    _v1.GraphKeys.LOSSES,
    _v1.GraphKeys.REGULARIZATION_LOSSES,
    _v1.GraphKeys.UPDATE_OPS,
    _v1.GraphKeys.SUMMARIES,
    _tf_private.SUMMARY_V2_COLLECTION,
    # A FuncGraph writes the variable collections through to the outermost graph, which
    # lives as long as the process: without clearing, `tf.compat.v1.trainable_variables()`
    # would list every model ever traced in it. Each trace re-registers its own variables.
    _v1.GraphKeys.GLOBAL_VARIABLES,
    _v1.GraphKeys.TRAINABLE_VARIABLES,
    _v1.GraphKeys.LOCAL_VARIABLES,
    _v1.GraphKeys.MODEL_VARIABLES,
    _v1.GraphKeys.METRIC_VARIABLES,
    _v1.GraphKeys.MOVING_AVERAGE_VARIABLES,
)



class _PerReplicaStore:
    """Stands in a v1 store collection for the store of whichever replica thread asks.

    `tf.compat.v1.get_variable` finds its variable store, and `variable_scope` its scope
    store, as the single element of a graph collection. MirroredStrategy runs each replica
    in its own thread, all tracing into one graph, and switches threads at every
    `merge_call` (each all-reduce, each assign to a mirrored variable). Were one store in
    the collection, every replica would resume after an all-reduce with the store of the
    replica that entered last: replica 1 would find the `w/adam_m` that replica 0 created
    in `apply_gradients` and fail, as a TF1 graph failed on a second
    `get_variable('w/adam_m')`. This object resolves every attribute to the store of the
    asking thread's replica, so each replica keeps its own store across merge_calls, as
    each TPU core did.

    A thread with no replica of its own (the main thread running a merge_fn, e.g. a v1
    optimizer creating its slots) gets the store of the first replica to enter: replica 0,
    under whose variable scope MirroredStrategy runs merge_fn, and whose store is the
    single replica's own on one replica.
    """

    def __init__(self, saved: list[Any],
                 wrap_get_variable: Callable[[Any], Any] | None = None) -> None:
        # The collection's contents before any replica entered, put back after the last.
        object.__setattr__(self, "saved", saved)
        object.__setattr__(self, "_wrap_get_variable", wrap_get_variable)
        object.__setattr__(self, "_by_thread", {})
        object.__setattr__(self, "_first", None)

    def enter(self, store: Any) -> Any:
        """Gives the calling thread `store`; returns its previous one (None) for `exit`."""
        previous = self._by_thread.get(threading.get_ident())
        self._by_thread[threading.get_ident()] = store
        if self._first is None:
            object.__setattr__(self, "_first", store)
        return previous

    def exit(self, previous: Any) -> bool:
        """Undoes `enter` for the calling thread; True when no replica thread is left."""
        if previous is None:
            del self._by_thread[threading.get_ident()]
        else:
            self._by_thread[threading.get_ident()] = previous
        return not self._by_thread

    def _store(self) -> Any:
        return self._by_thread.get(threading.get_ident(), self._first)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._store(), name)
        if name == "get_variable" and self._wrap_get_variable is not None:
            return self._wrap_get_variable(attribute)
        return attribute

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._store(), name, value)  # `variable_scope` sets `current_scope`.


_STORES_LOCK = threading.Lock()


@contextlib.contextmanager
def own_v1_stores(graph: tf.Graph,
                  wrap_get_variable: Callable[[Any], Any] | None = None) -> Iterator[None]:
    """Gives the calling replica thread a fresh v1 variable store and scope store.

    `wrap_get_variable` wraps the stores' `get_variable` (the variable layer's own checks).

    What a new TF1 graph gave each TPU core's model_fn. The stores stay the thread's own
    while other replica threads of the same graph run in between (see `_PerReplicaStore`);
    after the last replica leaves, the collections hold what they held before.
    """
    fresh = (_tf_private.new_variable_store(), _tf_private.new_variable_scope_store())
    entered = []
    with _STORES_LOCK:
        for key, store in zip(_tf_private.VARIABLE_STORE_COLLECTIONS, fresh):
            # Both keys are shared by every FuncGraph with its outer graph: one list per process.
            ref = graph.get_collection_ref(key)
            if len(ref) == 1 and isinstance(ref[0], _PerReplicaStore):
                proxy = ref[0]
            else:
                proxy = _PerReplicaStore(saved=list(ref), wrap_get_variable=wrap_get_variable)
                ref[:] = [proxy]
            entered.append((ref, proxy, proxy.enter(store)))
    try:
        yield
    finally:
        with _STORES_LOCK:
            for ref, proxy, previous in entered:
                if proxy.exit(previous) and len(ref) == 1 and ref[0] is proxy:
                    ref[:] = proxy.saved


class _PerReplicaCollection(collections.abc.MutableSequence):
    """A v1 graph collection whose contents belong to whichever replica thread asks.

    MirroredStrategy traces every replica into one graph and switches threads at each
    `merge_call`. With one shared list per collection, a replica resuming after an
    all-reduce would see what the replicas after it added meanwhile: a second replica's
    `tf.trainable_variables() + tf.moving_average_variables()` before `ema.apply` would list
    the first replica's averaged variables twice and make twice its merge_calls. Each TPU
    core's model_fn saw its own graph's collections; each replica thread gets its own list
    here, fresh (empty) when it enters, as each replica's TF1 graph began. Threads with no
    replica of their own (merge_fn code on the main thread) see the first replica's list.
    """

    def __init__(self, saved: list[Any]) -> None:
        self.saved = saved  # The collection's own list before any replica entered.
        self._by_thread: dict[int, list[Any]] = {}
        self._first: list[Any] | None = None

    def enter(self) -> list[Any] | None:
        previous = self._by_thread.get(threading.get_ident())
        fresh: list[Any] = []
        self._by_thread[threading.get_ident()] = fresh
        if self._first is None:
            self._first = fresh
        return previous

    def exit(self, previous: list[Any] | None) -> bool:
        """Undoes `enter` for the calling thread; True when no replica thread is left."""
        if previous is None:
            del self._by_thread[threading.get_ident()]
        else:
            self._by_thread[threading.get_ident()] = previous
        return not self._by_thread

    def _list(self) -> list[Any]:
        found = self._by_thread.get(threading.get_ident(), self._first)
        return self.saved if found is None else found

    def __getitem__(self, index: Any) -> Any:
        return self._list()[index]

    def __setitem__(self, index: Any, value: Any) -> None:
        self._list()[index] = value

    def __delitem__(self, index: Any) -> None:
        del self._list()[index]

    def __len__(self) -> int:
        return len(self._list())

    # Iteration and membership straight from the list: the MutableSequence defaults index
    # one element at a time through `__getitem__`, ~730k calls in BERT-base's 2-replica trace.
    def __iter__(self) -> Any:
        return iter(self._list())

    def __contains__(self, value: Any) -> bool:
        return value in self._list()

    def insert(self, index: int, value: Any) -> None:
        self._list().insert(index, value)


@contextlib.contextmanager
def own_collections(graph: tf.Graph) -> Iterator[None]:
    """Gives the calling replica thread empty per-step collections of its own in `graph`.

    TF1 began each core's model_fn with an empty graph; here every replica of a trace shares
    one, so each replica thread gets its own lists (see `_PerReplicaCollection`); after the
    last replica leaves, the collections hold what they held before.
    """
    entered = []
    with _STORES_LOCK:
        for key in PER_STEP_COLLECTIONS:
            ref = graph.get_collection_ref(key)
            if not isinstance(ref, _PerReplicaCollection):
                ref = _PerReplicaCollection(saved=ref)  # The list itself: put back as it was.
                _tf_private.replace_collection(graph, key, ref)
            entered.append((key, ref, ref.enter()))
    try:
        yield
    finally:
        with _STORES_LOCK:
            for key, ref, previous in entered:
                if ref.exit(previous):
                    _tf_private.replace_collection(graph, key, ref.saved)
