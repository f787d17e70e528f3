"""Each replica's own TF1 graph state inside the one graph MirroredStrategy traces.

MirroredStrategy traces every replica into one FuncGraph, on threads that interleave at
every all-reduce. A TF1 model_fn keeps state in that graph: the v1 variable store and
variable scope store (themselves graph collections), and its collections, the standard ones
(LOSSES, UPDATE_OPS, SUMMARIES, the variable lists) and any key the script invents
(`tf.add_to_collection('head_vars', v)`, SimCLR's `trainable_variables_inblock_5`). On a
TPU each core built its own graph (or legacy traced model_fn once for all cores), so each
saw only its own. This module gives each replica thread its own store and lists for the
length of its step (`own_v1_stores`, `own_collections`), and puts the graph's own back when
the last replica leaves. It knows nothing of variables' names or creation (`variables.py`)
nor of models.

How every key, not a list of known ones, becomes per replica: for the step the graph's
collections dict is replaced by a `_StepCollections`, whose values are per-replica views
(`_PerReplicaCollection`). A key created mid-step is seen where `tf.Graph` stores the new
list under it, and the branch and loop graphs of `tf.cond`/`tf.while_loop` share the dict,
so one object covers every way model code reaches a collection (`add_to_collection(s)`,
`get_collection(_ref)`, `clear_collection`, a `FuncGraph` copying them). The alternative,
patching those `tf.Graph` methods for the step, would need three patches on every graph of
every thread, a test at each call of whether the graph belongs to a replica's step (branch
graphs are other graphs with the same dict), and still the per-replica views. What stays
shared is `SHARED_COLLECTIONS`, kept by the library per graph. After the step, per-step keys
hold what they held before; the others also keep the first replica's entries, as legacy's
graph kept model_fn's for hooks and export to read (replica 0 is legacy's one trace; with one
replica, the graph ends holding what it would have without this module).
"""
from __future__ import annotations

import collections.abc
import contextlib
import threading
from typing import Any, Callable, Iterator

import tensorflow as tf

from tpu_estimator_compat._tf import private as _tf_private

_v1 = tf.compat.v1

# Every collection is each replica's own during its step (`own_collections`). These are
# also emptied again when the step ends: they hold per-step ops or tensors that TF1 filled
# once per graph build, and nothing after the step reads them from the graph.
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

# The collections every replica shares: the library keeps one of each per graph, not per
# replica. The v1 variable stores hold a `_PerReplicaStore` (`own_v1_stores`); the global
# step is the estimator's one variable; the TPU embedding columns record their variable
# scopes once, for the tables' legacy names (`embedding.legacy_table_names`).
SHARED_COLLECTIONS = frozenset((
    *_tf_private.VARIABLE_STORE_COLLECTIONS,
    _v1.GraphKeys.GLOBAL_STEP,
    _tf_private.TPU_COLUMN_SCOPE_COLLECTION,
))


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


def new_v1_stores() -> tuple[Any, Any]:
    """A new v1 variable store and scope store, as a new TF1 graph had (`own_v1_stores`)."""
    return _tf_private.new_variable_store(), _tf_private.new_variable_scope_store()


@contextlib.contextmanager
def own_v1_stores(graph: tf.Graph,
                  wrap_get_variable: Callable[[Any], Any] | None = None,
                  stores: tuple[Any, Any] | None = None) -> Iterator[None]:
    """Gives the calling replica thread a fresh v1 variable store and scope store.

    `wrap_get_variable` wraps the stores' `get_variable` (the variable layer's own checks).
    `stores` (`new_v1_stores()`): these instead of fresh ones, for a caller that enters the
    same stores several times (the hooks of one run).

    What a new TF1 graph gave each TPU core's model_fn. The stores stay the thread's own
    while other replica threads of the same graph run in between (see `_PerReplicaStore`);
    after the last replica leaves, the collections hold what they held before.
    """
    fresh = stores or new_v1_stores()
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
    `merge_call`. With one shared list per collection, a replica would see what the others
    added: a second replica's `tf.trainable_variables() + tf.moving_average_variables()`
    before `ema.apply`, resumed after an all-reduce, would list the first replica's averaged
    variables twice; a script's own `tf.add_to_collection('head_vars', v)` would hand the
    second replica both replicas' variables (one more all-reduce each) and
    `tf.add_n(tf.get_collection('my_losses'))` both replicas' losses. Each TPU core's
    model_fn saw its own graph's collections; each replica thread gets its own list here,
    empty when it first asks, as each replica's TF1 graph began. Threads with no replica of
    their own (merge_fn code on the main thread) see the first replica's list.
    """

    def __init__(self, step: "_StepCollections", key: Any) -> None:
        self._step = step
        self._key = key

    def _list(self) -> list[Any]:
        return self._step.list_for(self._key)

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
    def __iter__(self) -> Iterator[Any]:
        return iter(self._list())

    def __contains__(self, value: Any) -> bool:
        return value in self._list()

    def insert(self, index: int, value: Any) -> None:
        self._list().insert(index, value)

    # What TF1 code also does with the list `get_collection_ref` returns.
    def __eq__(self, other: Any) -> bool:
        return self._list() == (list(other) if isinstance(other, _PerReplicaCollection)
                                else other)

    __hash__ = None  # type: ignore[assignment]  # A list is unhashable too.

    def __add__(self, other: Any) -> list[Any]:
        return self._list() + list(other)

    def __radd__(self, other: Any) -> list[Any]:
        return list(other) + self._list()

    def __repr__(self) -> str:
        return repr(self._list())

    def __getattr__(self, name: str) -> Any:
        """Any other list method (`sort`, `copy`) acts on the caller's list."""
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._list(), name)


class _StepCollections(dict):
    """A graph's collections dict while replica steps trace into the graph.

    `{key: list}` as TensorFlow keeps it, except that the value of every key outside
    `SHARED_COLLECTIONS` is a `_PerReplicaCollection`, and each replica thread holds its own
    `{key: list}` behind them. `tf.Graph` creates a key by storing a new list under it
    (`add_to_collection`, `get_collection_ref`); `__setitem__` makes that very list the
    calling replica's own and stores the per-replica view, so a key the script invents
    mid-step is per replica like the others. `clear_collection` (`__delitem__`) clears only
    the caller's list.
    """

    def __init__(self, graph: tf.Graph, own: dict[Any, Any]) -> None:
        super().__init__()
        self.graph = graph
        self.own = own  # The graph's own dict, shared with the graphs around it.
        self._frames: dict[int, list[dict[Any, list[Any]]]] = {}  # Thread -> its steps.
        self._first: dict[Any, list[Any]] = {}  # The first replica's lists.
        self._entered = False
        self._kept: dict[Any, list[Any]] | None = None  # Replica 0's lists, for `close`.
        for key, value in own.items():
            dict.__setitem__(self, key, value if key in SHARED_COLLECTIONS
                             else _PerReplicaCollection(self, key))

    def enter(self, keep: bool) -> None:
        """Gives the calling thread empty lists of its own until the matching `exit`.

        `keep`: the caller is replica 0, whose lists `close` leaves in the graph.
        """
        lists: dict[Any, list[Any]] = {}
        self._frames.setdefault(threading.get_ident(), []).append(lists)
        if not self._entered:
            self._entered, self._first = True, lists
        if keep and self._kept is None:
            self._kept = lists

    def exit(self) -> bool:
        """Undoes `enter` for the calling thread; True when no replica thread is left."""
        frames = self._frames[threading.get_ident()]
        frames.pop()
        if not frames:
            del self._frames[threading.get_ident()]
        return not self._frames

    def _lists(self) -> dict[Any, list[Any]]:
        frames = self._frames.get(threading.get_ident())
        return frames[-1] if frames else self._first

    def list_for(self, key: Any) -> list[Any]:
        """The calling replica's list under `key` (the first replica's for other threads)."""
        return self._lists().setdefault(key, [])

    def __setitem__(self, key: Any, value: Any) -> None:
        if key in SHARED_COLLECTIONS or not isinstance(value, list):
            dict.__setitem__(self, key, value)
            return
        self._lists()[key] = value  # The list `get_collection_ref` hands out: the caller's.
        if not isinstance(dict.get(self, key), _PerReplicaCollection):
            dict.__setitem__(self, key, _PerReplicaCollection(self, key))

    def __delitem__(self, key: Any) -> None:
        if isinstance(dict.get(self, key), _PerReplicaCollection):
            self._lists().pop(key, None)
        else:
            dict.__delitem__(self, key)

    def close(self) -> dict[Any, Any]:
        """The graph's own dict again, holding what a TF1 graph held after model_fn.

        Per-step keys are left as they were before the step (see `PER_STEP_COLLECTIONS`);
        every other key gets replica 0's entries after its earlier ones, as legacy's one
        trace of model_fn left them in its graph, where hooks and export read them. Only
        replica 0's: a replica step with no all-reduce runs to its end before the next
        replica's begins, so each replica may have had a step of its own.
        """
        kept_lists = self._kept or {}
        for key, value in dict.items(self):
            if not isinstance(value, _PerReplicaCollection):
                self.own[key] = value
            elif key not in PER_STEP_COLLECTIONS and key in kept_lists:
                kept = kept_lists[key]
                kept[:0] = list(self.own.get(key, ()))
                self.own[key] = kept
        return self.own


@contextlib.contextmanager
def own_collections(graph: tf.Graph, keep: bool = True) -> Iterator[None]:
    """Gives the calling replica thread collections of its own in `graph`, whatever the key.

    `keep`: the caller is replica 0 (or the only one), whose entries stay in the graph.

    TF1 began each core's model_fn with an empty graph; here every replica of a trace shares
    one, so each replica thread gets its own lists, empty until it adds to them (see
    `_StepCollections`), in `graph` and in the branch and loop graphs built inside it (they
    share its dict). After the last replica leaves, the graph's own dict is back (`close`).
    """
    with _STORES_LOCK:
        current = _tf_private.graph_collections(graph)
        if isinstance(current, _StepCollections):
            step = current
        else:
            step = _StepCollections(graph, current)
            _tf_private.set_graph_collections(graph, step)
        step.enter(keep)
    try:
        yield
    finally:
        with _STORES_LOCK:
            if step.exit():
                _tf_private.set_graph_collections(step.graph, step.close())
