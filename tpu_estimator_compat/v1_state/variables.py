"""The v1 variable and collection layer: TF1 variable semantics inside TF2 traced steps.

A TF1 `model_fn` creates its variables every time it is called, and expects them in graph
collections (`GLOBAL_VARIABLES`, `TRAINABLE_VARIABLES`, `GLOBAL_STEP`, ...). Under
`tf.function` the model_fn is called once per trace and once per replica, so this module
owns three things:

* `VariableRegistry`: one variable per v1 name for the life of an estimator. The first request
  for a name creates the variable eagerly (under `tf.init_scope`, through the strategy's own
  creator, so it is mirrored/replicated as the strategy requires); every later request, from
  any trace, any mode or any replica, gets the same object back.
* `replica_scope`: entered at the top of every replica step. It gives the replica what a TPU
  core saw when legacy TPUEstimator built its graph: a fresh v1 variable store and variable
  scope of its own for the whole step (MirroredStrategy's replica threads interleave at every
  all-reduce), fresh Keras layer-name counters, collections of its own under every key
  (`replica_state.own_collections`), and the global step in `GLOBAL_STEP`.
* `global_step`: created eagerly before any model_fn runs, as Estimator did.

It knows nothing of modes, specs, input pipelines or checkpoint files;
`checkpoint/checkpoints.py` saves `VariableRegistry.by_name()` under the names recorded here.
The TensorFlow methods it replaces during a replica step
(`ExponentialMovingAverage.variables_to_restore`, and `Graph.name_scope`, whose reset to the
root returns a later replica to its own root scope) are swapped by `_tf_patches`; this module
only builds the replacements. What TF1 code reads off names (`v.op.name`, scope-filtered
collections) is `tf1_names`'; how each replica thread of one traced graph gets its own v1 store
and collections is `replica_state`'s.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

import tensorflow as tf

from tpu_estimator_compat._tf import patches as _tf_patches
from tpu_estimator_compat._tf import private as _tf_private
from tpu_estimator_compat.v1_state import graph_names
from tpu_estimator_compat.v1_state import one_part
from tpu_estimator_compat.v1_state import replica_state
from tpu_estimator_compat.v1_state import tf1_names
from tpu_estimator_compat.v1_state import write_order

_v1 = tf.compat.v1

GLOBAL_STEP_NAME = "global_step"

# The names legacy's graph held when model_fn began: Estimator created the global step first.
# (The input pipeline's op names, `IteratorGetNext`, `batch_size`, ..., are not reproduced.)
NAMES_BEFORE_MODEL_FN = graph_names.NameTable({GLOBAL_STEP_NAME: 1})


class VariableCreationError(ValueError):
    """A model_fn created a variable in a way the shim cannot hold across traces."""


class VariableRegistry:
    """Creates each v1-named variable once and hands it back on every later request.

    Why a registry and not `tf.function`'s own variable lifting: a TF1 model_fn is traced
    many times (train loop, eval loop, predict loop, every retrace, every replica), and
    `tf.function` forbids creating variables after its first trace. Keying by the v1 name a
    TF1 graph would have given the variable makes the variables independent of how often
    the model_fn is traced, and makes those names available for legacy checkpoints.
    """

    def __init__(self, drops_partitioners: bool = False) -> None:
        self._drops_partitioners = drops_partitioners  # `one_part.dropping_partitioners`.
        self._lock = threading.RLock()
        self._by_name: dict[str, tf.Variable] = {}
        self._local = threading.local()
        self._step_prefix = ""
        self._local_init: dict[str, Any] = {}
        self._trainable: set[str] = set()
        self._cross_replica_used: set[str] = set()
        self._replicas_inside = 0  # Replica threads inside a step's creator_scope now.
        self._unsaved: set[str] = set()
        self._optional_prefixes: set[str] = set()
        self._one_part: set[str] = set()  # Legacy partitioned these in one part.

    # ----------------------------------------------------------------------------------
    # Public queries.

    def by_name(self) -> dict[str, tf.Variable]:
        """Returns {v1 name: variable} for the global variables, in creation order.

        Local variables (metric accumulators) are left out, as a TF1 Saver left them out.
        """
        with self._lock:
            return {name: v for name, v in self._by_name.items()
                    if name not in self._local_init and name not in self._unsaved}

    def trainable_names(self) -> set[str]:
        """v1 names of the variables created trainable (TRAINABLE_VARIABLES in TF1)."""
        with self._lock:
            return set(self._trainable)

    def reset_local_variables(self) -> None:
        """Re-initialises every local variable, as `local_variables_initializer` did.

        Metric accumulators of `tf.compat.v1.metrics` start from zero at every evaluate.
        """
        with self._lock:
            for name, value in self._local_init.items():
                self._by_name[name].assign(value)

    def get(self, name: str) -> tf.Variable | None:
        return self._by_name.get(name)

    @contextlib.contextmanager
    def in_collections(self) -> Iterator[None]:
        """Inside: the default graph's v1 variable collections list these variables.

        Legacy called scaffold_fn in model_fn's graph after model_fn, so
        `tf.compat.v1.global_variables(scope)` there saw every variable, optimizer slots
        included (SimCLR builds its init_from_checkpoint map from it). scaffold_fn runs on
        the host here, outside any trace, where the collections are empty; they hold these
        variables, in creation order, while the block runs, and what they held afterwards.
        """
        with self._lock:
            local = [v for n, v in self._by_name.items() if n in self._local_init]
            contents = {
                _v1.GraphKeys.GLOBAL_VARIABLES: list(self.by_name().values()),
                _v1.GraphKeys.TRAINABLE_VARIABLES: [
                    v for n, v in self._by_name.items() if n in self._trainable],
                _v1.GraphKeys.LOCAL_VARIABLES: local,
            }
            step = self._by_name.get(GLOBAL_STEP_NAME)
            if step is not None:
                contents[_v1.GraphKeys.GLOBAL_STEP] = [step]
        graph = _v1.get_default_graph()
        saved = {}
        for key, values in contents.items():
            ref = graph.get_collection_ref(key)
            saved[key] = list(ref)
            ref[:] = values
        try:
            yield
        finally:
            for key, values in saved.items():
                graph.get_collection_ref(key)[:] = values

    def add(self, name: str, variable: tf.Variable) -> None:
        """Registers a variable created outside a model_fn (e.g. the global step)."""
        with self._lock:
            if name in self._by_name and self._by_name[name] is not variable:
                raise VariableCreationError(
                    f"A different variable is already registered as `{name}`.")
            self._by_name[name] = variable

    def rename(self, old: str, new: str) -> None:
        """Registers the variable known as `old` under the v1 name `new` instead.

        For variables whose TF1 name is only known after model_fn ran: legacy named TPU
        embedding tables after the variable scope their feature column recorded.
        """
        with self._lock:
            variable = self._by_name.pop(old)
            existing = self._by_name.get(new)
            if existing is not None and existing is not variable:
                self._by_name[old] = variable
                raise VariableCreationError(
                    f"Cannot name `{old}` `{new}`: model_fn already created a different "
                    f"variable `{new}`.")
            self._by_name[new] = variable
            for names in (self._trainable, self._unsaved):
                if old in names:
                    names.discard(old)
                    names.add(new)

    def mark_unsaved(self, name: str) -> None:
        """Leaves `name` out of `by_name()` (checkpoints), as TF1 code that created it
        outside `GLOBAL_VARIABLES` left it out of a Saver's."""
        with self._lock:
            self._unsaved.add(name)

    def mark_optional_on_restore(self, prefix: str) -> None:
        """Variables named `prefix...` keep their initial value when a checkpoint lacks them."""
        with self._lock:
            self._optional_prefixes.add(prefix)

    def optional_names(self) -> frozenset[str]:
        """Names of saved variables a restore may find missing (`mark_optional_on_restore`)."""
        with self._lock:
            return frozenset(name for name in self._by_name
                             if name.startswith(tuple(self._optional_prefixes)))

    @contextlib.contextmanager
    def local_variables(self) -> Iterator[None]:
        """Inside (this thread): every variable created is a local variable.

        For `metric_fn` called in the step: legacy put a tf.keras Metric's variables in
        LOCAL_VARIABLES (EstimatorSpec did), so, like the v1 metrics' own, they are left
        out of checkpoints, not looked for in one, and reset at every evaluate.
        """
        previous = getattr(self._local, "all_local", False)
        self._local.all_local = True
        try:
            yield
        finally:
            self._local.all_local = previous

    # ----------------------------------------------------------------------------------
    # Creation.

    def partitioner_check(self, get_variable: Callable[..., Any]) -> Callable[..., Any]:
        """Wraps a v1 store's `get_variable`: a one-part partitioner is dropped and its
        variable's slots get legacy's keys (`one_part`); any other partitioner refused.
        Every partitioner is dropped when the registry `drops_partitioners`."""
        if self._drops_partitioners:
            return one_part.dropping_partitioners(get_variable)

        def note(name: str) -> None:
            with self._lock:
                self._one_part.add(name)
        return one_part.refusing_partitioners(get_variable, note, VariableCreationError)

    @contextlib.contextmanager
    def creator_scope(self, strip_prefix: str | None = None,
                      step_prefix: str | None = None) -> Iterator[None]:
        """Routes every variable created inside through this registry.

        Args:
          strip_prefix: the name scope the replica step runs under (e.g. `while/replica_1`),
            which TF1 would not have had and which must not reach checkpoint names. None
            outside a replica step (around a traced call, where merge_call code such as
            optimizer slot creation runs with explicit names).
          step_prefix: the name scope of the step itself, which code in merge_call (Adam's
            `beta1_power`) runs under; recorded from replica 0.
        """
        if step_prefix is not None and not tf.distribute.in_cross_replica_context():
            context = tf.distribute.get_replica_context()
            if tf.get_static_value(context.replica_id_in_sync_group) == 0:
                self._step_prefix = step_prefix
                self._cross_replica_used = set()  # A new trace of the step begins.
        previous = (getattr(self._local, "strip_prefix", None),
                    getattr(self._local, "used_names", None))
        self._local.strip_prefix = strip_prefix
        self._local.used_names = set() if strip_prefix is not None else None
        inside = int(strip_prefix is not None)
        with self._lock:
            self._replicas_inside += inside
        try:
            with tf.variable_creator_scope(self._creator):
                yield
        finally:
            self._local.strip_prefix, self._local.used_names = previous
            with self._lock:
                self._replicas_inside -= inside

    def _v1_name(self, requested: str | None) -> str:
        # The current name scope of whatever builds the variable: the traced graph's, or
        # the eager context's under `tf.init_scope` (Keras builds layers there).
        scope = tf.get_current_name_scope()
        base = (requested or "Variable").rstrip("/")  # v1 slot names end with '/'.
        full = f"{scope}/{base}" if scope else base
        prefix = getattr(self._local, "strip_prefix", None)
        if prefix is None:
            # Cross-replica code inside the step (merge_call: Adam's `beta1_power`) runs in
            # the step's name scope without a replica suffix.
            prefix = self._step_prefix
        if prefix and (full == prefix or full.startswith(prefix + "/")):
            full = full[len(prefix) + 1:]
        if prefix and getattr(self._local, "strip_prefix", None):
            # A name taken from the replica's scope inside another (canned v2 DNN: a Keras
            # layer named `replica_1/hiddenlayer_0`, built under `dnn/`): legacy's creator
            # matched it to the first replica's variable too (by its last name and order).
            full = full.replace("/" + prefix + "/", "/")
        used = getattr(self._local, "used_names", None)
        if used is None and self._replicas_inside:
            # merge_call code of a step being traced, run on MirroredStrategy's main thread
            # while the replica threads wait: a second AdamOptimizer's `beta1_power` must
            # become `beta1_power_1` as in a TF1 graph, not share the first optimizer's.
            # One set per step trace.
            used = self._cross_replica_used
        if used is not None:
            # Uniquify within this replica's trace the way a TF1 graph did, so a second
            # `tf.Variable(name='v')` becomes `v_1`. Per replica, not per graph: all
            # MirroredStrategy replicas trace into one graph but must get the same names.
            # (get_variable never asks twice: its variable store raises first.)
            unique, i = full, 0
            while unique in used:
                i += 1
                unique = f"{full}_{i}"
            used.add(unique)
            full = unique
        return full

    def _creator(self, next_creator: Callable[..., tf.Variable], **kwargs: Any) -> tf.Variable:
        if getattr(self._local, "creating", False):
            # Re-entered from our own `next_creator` call: the scope is entered both around
            # the traced call (for merge_call code such as optimizer slots) and per replica.
            return next_creator(**kwargs)
        local = _is_local(kwargs)
        collected = kwargs
        if not local and getattr(self._local, "all_local", False):
            kwargs = dict(kwargs, trainable=False)
            collected = dict(kwargs, collections=[_v1.GraphKeys.LOCAL_VARIABLES])
            local = True
        name = self._v1_name(kwargs.get("name"))
        with self._lock:
            name = one_part.legacy_slot_name(name, self._one_part, kwargs.get("shape"))
            variable = self._by_name.get(name)
            if variable is None:
                self._local.creating = True
                try:
                    variable = self._create(next_creator, name, kwargs)
                finally:
                    self._local.creating = False
                self._by_name[name] = variable
                if local:
                    self._local_init[name] = _initial_value_of(variable)
                if _is_trainable(kwargs):
                    self._trainable.add(name)
            else:
                _check_compatible(name, variable, kwargs)
        _register_in_collections(variable, collected)
        _mark_name_taken(name)
        return variable

    def _create(self, next_creator: Callable[..., tf.Variable], name: str,
                kwargs: dict[str, Any]) -> tf.Variable:
        kwargs = dict(kwargs)
        kwargs["name"] = name
        # `dynamic_rnn` and friends set `caching_device=lambda op: op.device` on their
        # variable scope: a TF1 graph placement hint that eager creation refuses ("tf.device
        # does not support functions"). The strategy places variables; drop the hint.
        kwargs.pop("caching_device", None)
        initial_value = kwargs.get("initial_value")
        if isinstance(initial_value, tf.Tensor) and not _is_eager_tensor(initial_value):
            kwargs["initial_value"] = _input_free_value(name, initial_value)
        elif callable(initial_value):
            kwargs["initial_value"] = _as_in_a_graph(initial_value)
        if (kwargs.get("synchronization") != tf.VariableSynchronization.ON_READ and
                kwargs.get("aggregation") in (None, tf.VariableAggregation.NONE)):
            # On a TPU each core applied the same (cross-replica summed) update to its own
            # copy. ONLY_FIRST_REPLICA lets a replica-context assign (a custom optimizer's
            # apply_gradients, `global_step.assign_add`) do the same on mirrored variables.
            kwargs["aggregation"] = tf.VariableAggregation.ONLY_FIRST_REPLICA
        # Created eagerly, outside every trace, so the variable outlives the trace that asked
        # for it. Lifting off: tf.function must not also track it as its own.
        kwargs["experimental_enable_variable_lifting"] = False
        with tf.init_scope(), tf.name_scope(""):  # `name` is already the full v1 name.
            return next_creator(**kwargs)


_LOCAL_COLLECTIONS = (_v1.GraphKeys.LOCAL_VARIABLES, _v1.GraphKeys.METRIC_VARIABLES)


def _mark_name_taken(name: str) -> None:
    """In the replica step being traced, the variable's name is taken, as in a TF1 graph.

    There creating `w` named an op `w`: a later `tf.identity(x, name='w')`, or a summary
    `w`, became `w_1`. Created eagerly, the shim's variable names nothing in the trace.
    """
    graph = replica_graph()
    if graph is not None:
        graph_names.mark(graph, graph_names.NameTable({name: 1}), replica_root_name())


def _is_trainable(kwargs: dict[str, Any]) -> bool:
    trainable = kwargs.get("trainable")
    if trainable is None:
        trainable = kwargs.get("synchronization") != tf.VariableSynchronization.ON_READ
    return bool(trainable) and not _is_local(kwargs)


def _is_local(kwargs: dict[str, Any]) -> bool:
    collections = kwargs.get("collections")
    # A tf_keras Metric's accumulators: ON_READ in no collection (`collections=[]`). In TF1
    # no Saver saw them, and EstimatorSpec put them in LOCAL_VARIABLES (reset at evaluate).
    return any(key in _LOCAL_COLLECTIONS for key in (collections or ())) or (
        collections == [] and
        kwargs.get("synchronization") == tf.VariableSynchronization.ON_READ)


def _as_in_a_graph(initial_value: Callable[[], Any]) -> Callable[[], Any]:
    """An initializer call that draws what it drew in a TF1 graph.

    There each random op had its own generator, so one seeded initializer used for two
    variables gave both the same draw; run eagerly, the second would continue the first's
    stream (the eager kernel is cached per seed). Clearing TensorFlow's kernel cache costs
    every eager op after it a new kernel (the copies of each mirrored variable to every
    device: 3-4 s of BERT-base's 95 s start-up on 8 replicas), so it is done only before an
    initializer that may draw with an explicit seed.
    """
    if not _may_draw_with_explicit_seed(initial_value):
        return initial_value

    def value() -> Any:
        _tf_private.fresh_random_kernels()
        return initial_value()

    return value


def _may_draw_with_explicit_seed(initial_value: Callable[[], Any]) -> bool:
    """False only for a TensorFlow or Keras initializer object (as v1 `get_variable` and
    Keras layers bind it, `functools.partial(initializer, shape, ...)`) whose `seed` is None
    or which has none (zeros, ones, constant): its eager draws never continue a stream."""
    initializer = getattr(initial_value, "func", None)
    module = type(initializer).__module__ or ""
    if initializer is None or not module.startswith(("tensorflow.", "tf_keras.", "keras.")):
        return True
    return getattr(initializer, "seed", None) is not None


def _initial_value_of(variable: tf.Variable) -> Any:
    with tf.init_scope():
        return tf.convert_to_tensor(variable).numpy()


def _is_eager_tensor(value: Any) -> bool:
    return hasattr(value, "numpy") and not hasattr(value, "graph")


def _input_free_value(name: str, initial_value: tf.Tensor) -> Any:
    """The numpy value of an initial value computed inside model_fn.

    TF1 ran such initializers once, at session start; here they run once, when the variable
    is first created, in a scratch graph. A value that depends on `features`, `labels` or
    another per-step tensor has no such value.
    """
    static = tf.get_static_value(initial_value)
    if static is not None:
        return static
    try:
        return _tf_private.evaluate_input_free_tensor(initial_value)
    except _tf_private.UnliftableError as e:
        raise VariableCreationError(
            f"`tf.Variable` `{name}` has an initial value computed inside model_fn that "
            f"depends on `features`, `labels` or another per-step tensor ({initial_value!r}), "
            f"so it has no value before the first step. Use an initializer instead, e.g. "
            f"`tf.compat.v1.get_variable('{name.split('/')[-1]}', shape, "
            f"initializer=...)`.") from e


def _check_compatible(name: str, variable: tf.Variable, kwargs: dict[str, Any]) -> None:
    shape = kwargs.get("shape")
    if shape is None:
        init = kwargs.get("initial_value")
        shape = getattr(init, "shape", None) if not callable(init) else None
    if shape is None:
        return
    shape = tf.TensorShape(shape)
    if shape.rank is not None and variable.shape.rank is not None and not shape.is_compatible_with(
            variable.shape):
        raise VariableCreationError(
            f"model_fn asked for variable `{name}` with shape {shape}, but the variable "
            f"created earlier under that name has shape {variable.shape}. A model_fn must "
            f"create the same variables, with the same shapes, in every mode and every call.")


def _register_in_collections(variable: tf.Variable, kwargs: dict[str, Any]) -> None:
    """Adds the variable to the v1 collections TF1 would have put it in."""
    collections = kwargs.get("collections")
    if collections is None:
        collections = [_v1.GraphKeys.GLOBAL_VARIABLES]
    collections = list(collections)
    if _is_trainable(kwargs) and _v1.GraphKeys.TRAINABLE_VARIABLES not in collections:
        collections.append(_v1.GraphKeys.TRAINABLE_VARIABLES)
    for graph in _graphs_to_register_in():
        for key in collections:
            ref = graph.get_collection_ref(key)
            if not any(item is variable for item in ref):
                ref.append(variable)


_REPLICA_GRAPH = threading.local()


def in_replica_step() -> bool:
    """True while this thread runs a replica step's model code (inside `replica_scope`)."""
    return getattr(_REPLICA_GRAPH, "graph", None) is not None


def _graphs_to_register_in() -> list[tf.Graph]:
    # Keras builds layers under `tf.init_scope`; the default graph there is still the traced
    # graph, but be explicit: the replica's traced graph is where `minimize()` looks.
    graphs = [_v1.get_default_graph()]
    replica_graph = getattr(_REPLICA_GRAPH, "graph", None)
    if replica_graph is not None and replica_graph is not graphs[0]:
        graphs.append(replica_graph)
    return graphs


def local_update_in_control_flow(original: Callable[..., Any]) -> Callable[..., Any]:
    """The replacement of patch `variables.local_update_in_control_flow`.

    Variables this library makes are ONLY_FIRST_REPLICA (see `VariableRegistry._create`), so
    a replica-context `assign` goes through merge_call and every copy gets replica 0's value.
    Inside a cond branch or while body of a replica step (the default graph is not the
    step's own graph) merge_call is refused; there the replica assigns its own component, as
    each TPU core did. Replicas that apply the same (cross-replica summed) update, the TPU
    contract, end with the same values either way.
    """

    def on_write_update_replica(var, update_fn, value, **kwargs):
        replica_graph = getattr(_REPLICA_GRAPH, "graph", None)
        if (replica_graph is not None
                and var.aggregation == tf.VariableAggregation.ONLY_FIRST_REPLICA
                and tf.distribute.in_cross_replica_context() is False):
            if _v1.get_default_graph() is not replica_graph:
                return update_fn(_tf_private.own_component(var), value, **kwargs)
            writes = getattr(_REPLICA_GRAPH, "writes", None)
            if writes is not None:
                return writes(var, update_fn, value, kwargs)
        return original(var, update_fn, value, **kwargs)

    return on_write_update_replica


@contextlib.contextmanager
def routed_writes(route: Callable[[Any, Callable[..., Any], Any, dict[str, Any]], Any]
                  ) -> Iterator[None]:
    """Inside (this thread, in a replica step): replica-context updates of ONLY_FIRST_REPLICA
    variables in the step's own graph go to `route(var, update_fn, value, kwargs)` instead of
    a merge_call. `optimizer_apply.apply_once` routes a custom optimizer's writes."""
    previous = getattr(_REPLICA_GRAPH, "writes", None)
    _REPLICA_GRAPH.writes = route
    try:
        yield
    finally:
        _REPLICA_GRAPH.writes = previous


def replica_graph() -> tf.Graph | None:
    """The graph of the replica step this thread is tracing (None outside one)."""
    return getattr(_REPLICA_GRAPH, "graph", None)


def replica_root_name_scope(original: Callable[..., Any]) -> Callable[..., Any]:
    """The replacement of patch `variables.replica_root_name_scope`: `Graph.name_scope`.

    In the graph of a replica step after the first (`replica_scope` with a root scope such as
    `replica_1/`), a reset to the root (`name_scope('')` or `name_scope(None)`) enters that
    replica's root scope instead of the graph's. A Keras layer named '' (automl efficientdet's
    `EfficientDetNet`) enters `name_scope('')` and its sub-layers then open `efficientnet-b0/`
    relative to it: at the graph's root, where the first replica had already opened it, they
    became `efficientnet-b0_1/`, and the registry gave the replica variables of that name
    (which MirroredStrategy's own creator then mapped onto the first replica's by creation
    order: extra checkpoint entries, restores that missed them, and, when the orders differ,
    another layer's weights). Under `replica_1/` the names are the first replica's, as each
    TPU core's graph had them. Everywhere else (other threads, other graphs, the first
    replica) the original runs unchanged.
    """

    def name_scope(self: Any, name: Any) -> Any:
        if not name and self is getattr(_REPLICA_GRAPH, "graph", None):
            root = getattr(_REPLICA_GRAPH, "root_scope", None)
            if root:
                name = root
        return original(self, name)

    return name_scope


@contextlib.contextmanager
def _root_name_scope(scope: str) -> Iterator[None]:
    """Inside (this thread): a root reset of the replica graph's name scope enters `scope`."""
    previous = getattr(_REPLICA_GRAPH, "root_scope", None)
    _REPLICA_GRAPH.root_scope = scope
    try:
        with _tf_patches.applied("variables.replica_root_name_scope"):
            yield
    finally:
        _REPLICA_GRAPH.root_scope = previous


def ema_restore_by_name() -> contextlib.AbstractContextManager[Any]:
    """Inside: `ExponentialMovingAverage.variables_to_restore` works for eager variables."""
    return _tf_patches.applied("variables.ema_variables_to_restore")


def variables_to_restore_by_name(original: Callable[..., Any]) -> Callable[..., Any]:
    """`ExponentialMovingAverage.variables_to_restore` for variables created eagerly.

    The replacement of patch `variables.ema_variables_to_restore`. TF's version names
    non-averaged variables by `v.op.name`, which an eager variable does not have; the shim's
    variables carry their v1 name in `v.name`, which gives the same map
    (`{'dense/kernel/ExponentialMovingAverage': kernel, 'global_step': global_step, ...}`).
    """
    del original  # Replaced whole: only its signature is kept.

    def variables_to_restore(self: Any, moving_avg_variables: Any = None) -> dict[str, Any]:
        if moving_avg_variables is None:
            moving_avg_variables = (_v1.trainable_variables() +
                                    _v1.moving_average_variables())
        name_map = {self.average_name(v): v for v in moving_avg_variables}
        averaged = {v.name for v in moving_avg_variables}
        for v in _v1.global_variables():
            name = v.name.split(":")[0]
            if v.name not in averaged and name not in name_map:
                name_map[name] = v
        return name_map

    return variables_to_restore


def create_global_step(registry: VariableRegistry) -> tf.Variable:
    """Creates (or returns) the int64 global step, eagerly, as Estimator did before model_fn.

    Call inside `strategy.scope()` so the strategy places it; it is aggregated with
    ONLY_FIRST_REPLICA so that increments inside replica steps apply once per step.
    """
    existing = registry.get(GLOBAL_STEP_NAME)
    if existing is not None:
        return existing
    variable = tf.Variable(
        0, dtype=tf.int64, name=GLOBAL_STEP_NAME, trainable=False,
        aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    registry.add(GLOBAL_STEP_NAME, variable)
    return variable


def replica_root_name() -> str:
    """`replica_<k>/` while this thread traces a later replica's step, '' otherwise."""
    root = getattr(_REPLICA_GRAPH, "root_scope", None) or ""
    return root if not root or root.endswith("/") else root + "/"


def _replica_root_scope() -> str:
    """'' for the first replica (and outside a strategy), `replica_<k>` for the others."""
    if tf.distribute.in_cross_replica_context():
        return ""
    replica = tf.get_static_value(
        tf.distribute.get_replica_context().replica_id_in_sync_group)
    return f"replica_{replica}" if replica else ""


def current_registry() -> VariableRegistry | None:
    """The registry of the replica step this thread is tracing (None outside one)."""
    return getattr(_REPLICA_GRAPH, "registry", None)


@contextlib.contextmanager
def replica_scope(registry: VariableRegistry, global_step: tf.Variable) -> Iterator[None]:
    """Makes the current replica's trace look like a fresh TF1 graph to the model_fn.

    That includes TF1's tensor identity semantics: variables hash, `==` compares identity.
    """
    graph = _v1.get_default_graph()
    previous_registry = getattr(_REPLICA_GRAPH, "registry", None)
    _REPLICA_GRAPH.registry = registry
    strip_prefix = graph.get_name_scope()
    tf.compat.v1.keras.backend.reset_uids()
    previous_graph = getattr(_REPLICA_GRAPH, "graph", None)
    _REPLICA_GRAPH.graph = graph
    root = _v1.VariableScope(reuse=False, name="")
    replica_root = _replica_root_scope()
    try:
        # The model_fn runs at the graph's root name scope, as in TF1 graph construction:
        # names it derives from the scope (`ExponentialMovingAverage.average_name`,
        # `unique_name`) then match a TF1 graph's whatever loop it is traced in. Replicas after
        # the first run under a root scope of their own (`replica_1/`), which the registry
        # strips: all replicas trace into one graph, and a name scope the first replica used
        # (`dense/`) would come back uniquified (`dense_1/`) for the next, in the variables
        # that TF1-style code names after its name scope (Keras layers built in a graph).
        # A reset to the root inside (a Keras layer named '') returns to `replica_1/`.
        with replica_state.own_collections(graph, keep=not replica_root), \
                graph.name_scope(None), graph.name_scope(replica_root or None) as entered, \
                _root_name_scope(entered or ""), \
                registry.creator_scope((entered or "").rstrip("/"), step_prefix=strip_prefix), \
                replica_state.own_v1_stores(graph, registry.partitioner_check), \
                _v1.variable_scope(root, auxiliary_name_scope=False), \
                _tf_private.tf1_tensor_equality(), ema_restore_by_name(), \
                _tf_patches.applied("variables.local_update_in_control_flow"), \
                write_order.chained(graph), \
                tf1_names.replica_scoped_collections(replica_root):
            for key in (_v1.GraphKeys.GLOBAL_STEP, _v1.GraphKeys.GLOBAL_VARIABLES):
                ref = graph.get_collection_ref(key)
                if not any(item is global_step for item in ref):
                    ref.append(global_step)
            graph_names.mark(graph, NAMES_BEFORE_MODEL_FN, entered or "")
            yield
    finally:
        _REPLICA_GRAPH.graph = previous_graph
        _REPLICA_GRAPH.registry = previous_registry
