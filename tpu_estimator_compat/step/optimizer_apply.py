"""How a v1 optimizer's update runs on a multi-device strategy: one device at a time.

Synopsis::

    optimizer_apply.install()            # once, at estimator construction
    with optimizer_apply.per_device():   # around every trace of a replica step
        ...  # model_fn's optimizer.minimize(loss, global_step) on N replicas

`tf.compat.v1.train.Optimizer.apply_gradients` under MirroredStrategy merges into its
`_distributed_apply`, which ties every device to every other after the all-reduce: each
device's `_finish` waits for the variable updates of all N devices, and each device's
global-step increment waits for all N finishes. Traced into one multi-device function that is
~N*N*4 cross-device control edges per step (224 on 8 devices), each a Send/Recv pair and a
barrier; on 8 logical CPUs it made an MLP step ~25% slower than a hand-written TF2 loop,
whose Keras optimizer has none.

The barrier buys nothing: after the all-reduce every device holds the same summed gradients
and updates only its own copy of each mirrored variable, and a replica reads only its own
copies. So `per_device()` makes the same ops with each device's `_finish` depending on that
device's updates and each device's global-step increment on that device's `_finish`, and
hands each replica its own device's train op. Same ops, same values (bit for bit, see
tests/test_optimizer_apply.py); ordering per device as before.

An optimizer that overrides `apply_gradients` and assigns variables itself in replica
context (BERT's AdamWeightDecay, under `CrossShardOptimizer`) is run once per step trace by
`apply_once`, on replica 0, and its writes go to every device's copy (see there). Everything
else, and every optimizer that overrides `_distributed_apply`, runs TensorFlow's own code.
The patch itself is `_tf_patches`' `optimizer_apply.distributed_apply`; this module builds
its replacement. It knows nothing about estimators, loops or model_fns, nor how a patch is
installed; the writes reach it through `variables.routed_writes`.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any, Callable, Iterator

import tensorflow as tf

from tpu_estimator_compat._tf import patches as _tf_patches
from tpu_estimator_compat._tf import private as _tf_private
from tpu_estimator_compat._tf import strategies as _tf_strategies
from tpu_estimator_compat.cluster import workers as cluster_lib
from tpu_estimator_compat.v1_state import variables as variables_lib

_active = [0]  # Entered per_device() scopes. merge_call runs the merge on the calling thread.

_PER_DEVICE_STRATEGIES = (tf.distribute.MirroredStrategy,
                          tf.distribute.MultiWorkerMirroredStrategy,
                          tf.compat.v1.distribute.MirroredStrategy)


def install() -> None:
    """Wraps `tf.compat.v1.train.Optimizer._distributed_apply` once; idempotent."""
    _tf_patches.install("optimizer_apply")


@contextlib.contextmanager
def per_device() -> Iterator[None]:
    """Inside, v1 optimizers on a mirrored strategy update each device independently."""
    _active[0] += 1
    try:
        yield
    finally:
        _active[0] -= 1


def _applies(distribution: tf.distribute.Strategy) -> bool:
    return (_active[0] > 0 and isinstance(distribution, _PER_DEVICE_STRATEGIES)
            and len(distribution.extended.worker_devices) > 1)


def patched_distributed_apply(original: Callable[..., Any]) -> Callable[..., Any]:
    """Builds the `Optimizer._distributed_apply` of patch `optimizer_apply.distributed_apply`."""

    def _distributed_apply(self, distribution, grads_and_vars, global_step=None, name=None):
        """`Optimizer._distributed_apply` without the all-device barrier (see module doc)."""
        if not _applies(distribution):
            return original(self, distribution, grads_and_vars, global_step, name)
        return _per_device_apply(self, distribution, grads_and_vars, global_step, name)

    return _distributed_apply


def _per_device_apply(optimizer: Any, distribution: tf.distribute.Strategy,
                      grads_and_vars: Any, global_step: Any, name: str | None) -> Any:
    """The updates of `optimizer._distributed_apply`, each device's ordered on its own."""
    extended = distribution.extended
    devices = tuple(extended.worker_devices)
    grads_and_vars = list(grads_and_vars)
    with tf.control_dependencies(None):  # Summing waits for no one's update ops (see below).
        reduced = _sum_by_dtype(distribution, grads_and_vars)
    var_list = [v for _, v in grads_and_vars]
    with tf.init_scope():
        _tf_private.optimizer_create_slots(optimizer, var_list)
    own = _OwnDeviceControl()

    def update(v: Any, g: Any) -> Any:
        # As TensorFlow's own `update`: the variable's processor picks dense/sparse/resource.
        if not isinstance(g, tf.IndexedSlices):
            g = tf.convert_to_tensor(g)
        with tf.name_scope("update_" + v.name.split(":")[0]), own.on(v.device):
            return _tf_private.optimizer_processor(v).update_op(optimizer, g)

    def finish(updates: list[Any]) -> Any:
        with own.on(updates[0].device if updates else ""):
            return _tf_private.optimizer_finish(optimizer, updates, "update")

    def increment(step: Any, finish: Any) -> Any:
        with own.on(step.device):
            return _increment_after(step, finish)

    with tf.compat.v1.name_scope(name, _tf_private.optimizer_name(optimizer)) as name:
        _tf_private.optimizer_prepare(optimizer)
        by_device: list[list[Any]] = [[] for _ in devices]
        for grad, var in zip(reduced, var_list):
            for index, op in enumerate(extended.update(var, update, args=(grad,), group=False)):
                by_device[index].append(op)
        own_updates = _per_replica(distribution, by_device)
        finishes = extended.update_non_slot(devices, finish, args=(own_updates,), group=False)
        if global_step is None:
            results = finishes
        else:
            results = extended.update(global_step, increment,
                                      args=(_per_replica(distribution, finishes),),
                                      group=False)
        # merge_call hands each replica its own element: its device's train op.
        apply_updates = _per_replica(distribution, results)
        tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.TRAIN_OP, apply_updates)
        return apply_updates


class _OwnDeviceControl:
    """The control dependencies around the merge_call, each device's update under its own.

    A v1 model_fn writes `with tf.control_dependencies(UPDATE_OPS): minimize(loss)` (batch
    norm's moving averages). MirroredStrategy runs the merged `_distributed_apply` under the
    union of every replica thread's control dependencies, so each op it makes without an
    input from inside (every constant of every device's update) waited for every replica's
    update ops: on the 8-replica ResNet 105,000 control edges, 730 constants x 144, which
    TensorFlow's graph optimiser then spent seconds removing before the first step. Each
    device's update now waits for the dependencies on its own device (and those on none),
    through one no-op per device: what each replica's (and each TPU core's) train op waited
    for.
    """

    def __init__(self) -> None:
        self._inputs = _tf_private.active_control_inputs(tf.compat.v1.get_default_graph())
        self._groups: dict[str, Any] = {}

    @contextlib.contextmanager
    def on(self, device: str) -> Iterator[None]:
        """Inside: new ops wait for the dependencies on `device` only."""
        if not self._inputs:
            yield
            return
        key = _canonical_device(device)
        with tf.control_dependencies(None):
            if key not in self._groups:
                own = [op for op in self._inputs
                       if not op.device or _canonical_device(op.device) == key]
                self._groups[key] = tf.group(*own) if own else None
            group = self._groups[key]
            with tf.control_dependencies([group] if group is not None else []):
                yield


def _canonical_device(device: str) -> str:
    return tf.DeviceSpec.from_string(device or "").to_string()


def _sum_by_dtype(distribution: tf.distribute.Strategy,
                  grads_and_vars: list[tuple[Any, Any]]) -> list[Any]:
    """`batch_reduce_to(SUM, grads_and_vars)`, one batch per variable dtype.

    TensorFlow's collective all-reduce concatenates every dense value of a batch into one
    tensor, which fails ("Tensors in list passed to 'values' of 'ConcatV2' Op have types
    [float32, float64, ...]") when the variables have mixed dtypes, e.g. the float64 Keras
    layers of tf_keras's v1 dtype behaviour after `tf.compat.v1.disable_v2_behavior()`.
    With one dtype this is the single batch TensorFlow's own `_distributed_apply` makes.
    Sparse gradients of one machine are concatenated directly (`_concat_sparse`).
    """
    extended = distribution.extended
    reduced: list[Any] = [None] * len(grads_and_vars)
    by_dtype: dict[Any, list[int]] = {}
    local = not cluster_lib.is_multi_client(distribution)
    for index, (grad, var) in enumerate(grads_and_vars):
        if local and _is_sparse(distribution, grad):
            reduced[index] = _concat_sparse(distribution, grad)
        else:
            by_dtype.setdefault(var.dtype.base_dtype, []).append(index)
    for indices in by_dtype.values():
        batch = extended.batch_reduce_to(tf.distribute.ReduceOp.SUM,
                                         [grads_and_vars[i] for i in indices])
        for index, value in zip(indices, batch):
            reduced[index] = value
    return reduced


def _is_sparse(distribution: tf.distribute.Strategy, grad: Any) -> bool:
    return isinstance(distribution.experimental_local_results(grad)[0], tf.IndexedSlices)


def _concat_sparse(distribution: tf.distribute.Strategy, grad: Any) -> tf.IndexedSlices:
    """The SUM of per-replica IndexedSlices on one machine: all their rows, concatenated.

    What the collective all-gather computes (the optimizer sums duplicate indices), without
    it: the gather pads replicas with different row counts inside a `tf.cond`, and on TF 2.21
    those conds inside the train loop's `while` make the devices disagree on the collective's
    shape ("Shape mismatch in the collective instance ...": sparse ids, e.g. embedding
    lookups of SparseTensor features, give each replica its own row count). Every device
    reads the concatenation directly.
    """
    parts = distribution.experimental_local_results(grad)
    return tf.IndexedSlices(tf.concat([p.values for p in parts], 0),
                            tf.concat([p.indices for p in parts], 0), parts[0].dense_shape)


def _per_replica(distribution: tf.distribute.Strategy, local_values: Any) -> Any:
    """A per-replica value whose i-th local replica holds `local_values[i]`.

    `experimental_distribute_values_from_function` (through the seam: a TF1 script's v1
    MirroredStrategy lacks the public method) calls its function once per local replica,
    in local replica order (its context carries the global replica id, which on a
    multi-worker strategy is not the local index).
    """
    values = iter(local_values)
    return _tf_strategies.distribute_values_from_function(distribution, lambda _: next(values))


def _increment_after(step: Any, finish: Any) -> Any:
    """One device's global step + 1, after that device's variables are updated.

    Unnamed: one op per device, so TensorFlow's absolute `name` would clash N-1 times.
    """
    with tf.control_dependencies([finish]):
        return step.assign_add(1)


# -- A custom optimizer's update, computed once and written to every replica's copy. --------

# Stateful ops that only read: replica 0's update may make them and still stand for every
# replica's (they change nothing a later replica would have changed itself).
_READ_ONLY_STATEFUL = frozenset({"ReadVariableOp", "VarIsInitializedOp", "VariableShape",
                                 "ResourceGather", "ResourceGatherNd"})


class _Window:
    """One custom `apply_gradients` call of one step trace, as replica 0 made it.

    `writes[(id(var), k)]` holds, per local device, the update of the k-th write replica 0
    made to `var` in the call; `skippable` says whether those writes are everything the call
    changed, so later replicas may take them instead of running the call themselves.
    """

    def __init__(self, devices: int) -> None:
        self.devices = devices
        self.waiting = devices - 1  # Later replicas yet to take the window.
        self.done = False
        self.skippable = True
        self.writes: dict[tuple[int, int], list[Any]] = {}
        self.ops: set[Any] = set()
        self.order: list[list[Any]] = []


# {traced graph: {index: window}}. A window is dropped once every later replica has taken
# it: the ops it holds would otherwise keep its graph alive past the trace.
_WINDOWS: "weakref.WeakKeyDictionary[Any, dict[int, _Window]]" = weakref.WeakKeyDictionary()
_WINDOWS_LOCK = threading.Lock()
_thread = threading.local()


def apply_once(apply: Callable[[], Any], name: str | None = None) -> Any:
    """Runs a custom optimizer's `apply` (its replica-context update) once for all replicas.

    A custom v1 optimizer (BERT's `AdamWeightDecayOptimizer`, LAMB) under
    `CrossShardOptimizer` assigns each variable and slot itself, after the gradients were
    summed over replicas: every TPU core computed the same update. Here the variables are
    mirrored and ONLY_FIRST_REPLICA, so each assign in each replica thread was a merge_call
    (all replicas stop, replica 0's value is copied to every device): for BERT-base 604
    rendezvous, ~30 graph ops per variable, and the update traced once per replica though
    only replica 0's value is kept.

    Called right after the gradient all-reduce, where MirroredStrategy's replica threads
    are all at the same point (they run one at a time between merge_calls, replica 0
    first), replica 0 runs `apply` and each of its writes goes directly to every device's
    copy. When its call made nothing else stateful and no merge_call, the other replicas
    do not run `apply`: each gets its device's writes, grouped, as its train op. Otherwise
    they run it, and each of their writes takes replica 0's write of the same variable
    (the k-th write of a variable matches replica 0's k-th), or updates the replica's own
    copy when replica 0 made none. Values are the same as with a merge_call per write
    (replica 0's, on every device).

    Anywhere else (one replica, no static replica id such as on a TPU, several workers,
    outside a replica step's own graph) `apply()` runs as it is.
    """
    graph = tf.compat.v1.get_default_graph()
    replica = _local_replica(graph)
    if replica is None:
        return apply()
    index = _next_index(graph)
    with _WINDOWS_LOCK:
        windows = _WINDOWS.setdefault(graph, {})
        if replica == 0:
            window = windows[index] = _Window(
                len(tf.distribute.get_strategy().extended.worker_devices))
        else:
            window = windows.get(index)
            if window is not None:
                window.waiting -= 1
                if not window.waiting:
                    del windows[index]
    if window is None:
        return apply()
    if replica == 0:
        return _write_everywhere(graph, window, apply)
    if window.done and window.skippable:
        return tf.group(*[ops[replica] for ops in window.order], name=name)
    # Replica 0 met a merge_call inside `apply` (this replica now runs while it waits there),
    # or made more than variable writes: run it here too, taking replica 0's writes.
    window.skippable = False
    return _take_writes(window, replica, apply)


def _local_replica(graph: Any) -> int | None:
    """This replica thread's local index when `apply_once` applies here, else None."""
    if variables_lib.replica_graph() is not graph or not tf.distribute.has_strategy():
        return None
    strategy = tf.distribute.get_strategy()
    if (tf.distribute.in_cross_replica_context()
            or not isinstance(strategy, _PER_DEVICE_STRATEGIES)
            or cluster_lib.is_multi_client(strategy)):
        return None
    devices = strategy.extended.worker_devices
    if len(devices) < 2 or strategy.num_replicas_in_sync != len(devices):
        return None
    replica = tf.get_static_value(tf.distribute.get_replica_context().replica_id_in_sync_group)
    return None if replica is None else int(replica)


def _next_index(graph: Any) -> int:
    """This thread's count of `apply_once` calls in `graph` (replicas call in one order)."""
    counts = getattr(_thread, "counts", None)
    if counts is None:
        counts = _thread.counts = weakref.WeakKeyDictionary()
    index = counts.get(graph, 0)
    counts[graph] = index + 1
    return index


def _write_everywhere(graph: Any, window: _Window, apply: Callable[[], Any]) -> Any:
    """Replica 0: runs `apply`, each ONLY_FIRST_REPLICA write going to every device's copy.

    The call stands for the other replicas' too only if nothing else it made changes state:
    stateful ops besides its writes and plain reads (a replica-local or SUM variable, a
    fused `ResourceApply*` on replica 0's handle, random draws) mean each replica runs it.
    """
    seen: dict[int, int] = {}

    def route(var: Any, update_fn: Callable[..., Any], value: Any, kwargs: dict[str, Any]) -> Any:
        components = list(var.values)
        if len(components) != window.devices:
            window.skippable = False
            return update_fn(_tf_private.own_component(var), value, **kwargs)
        occurrence = seen.get(id(var), 0)
        seen[id(var)] = occurrence + 1
        results = []
        for component in components:
            with tf.device(component.device):
                results.append(update_fn(component, value, **kwargs))
        ops = [getattr(r, "op", r) for r in results]
        window.ops.update(ops)
        window.writes[(id(var), occurrence)] = results
        window.order.append(ops)
        return results[0]

    first = len(graph.get_operations())
    with variables_lib.routed_writes(route):
        result = apply()
    if window.skippable:
        window.skippable = not any(
            op.op_def.is_stateful and op.type not in _READ_ONLY_STATEFUL
            and op not in window.ops for op in graph.get_operations()[first:])
    window.done = True
    return result


def _take_writes(window: _Window, replica: int, apply: Callable[[], Any]) -> Any:
    """A later replica runs `apply`; each write takes replica 0's write of the same variable
    on this replica's device (made before, in `_write_everywhere`), or updates this replica's
    own copy when replica 0 made no such write."""
    seen: dict[int, int] = {}

    def route(var: Any, update_fn: Callable[..., Any], value: Any, kwargs: dict[str, Any]) -> Any:
        occurrence = seen.get(id(var), 0)
        seen[id(var)] = occurrence + 1
        results = window.writes.get((id(var), occurrence))
        if results is None:
            return update_fn(_tf_private.own_component(var), value, **kwargs)
        return results[replica]

    with variables_lib.routed_writes(route):
        return apply()



def inference_apply_gradients(original: Callable[..., Any]) -> Callable[..., Any]:
    """Builds the `Optimizer.apply_gradients` of patch
    `optimizer_apply.inference_apply_gradients`, in place while model_fn builds an EVAL or
    PREDICT step: the train_op is a no-op, as legacy never ran it outside TRAIN."""

    def apply_gradients(self, grads_and_vars, global_step=None, name=None,
                        skip_gradients_aggregation=False):
        del self, grads_and_vars, global_step, skip_gradients_aggregation
        return tf.no_op(name=name or "train_op_not_run")

    apply_gradients.__doc__ = original.__doc__
    return apply_gradients


def inference_keras_apply_gradients(original: Callable[..., Any]) -> Callable[..., Any]:
    """Builds the `OptimizerV2.apply_gradients` of patch
    `optimizer_apply.inference_keras_apply_gradients`: tf_keras's legacy optimizer (a canned
    head's) makes no update, slot or step increment while an EVAL or PREDICT step is built."""

    def apply_gradients(self, grads_and_vars, name=None, experimental_aggregate_gradients=True):
        del self, grads_and_vars, experimental_aggregate_gradients
        return tf.no_op(name=name or "train_op_not_run")

    apply_gradients.__doc__ = original.__doc__
    return apply_gradients


def inference_keras_v2_apply_gradients(original: Callable[..., Any]) -> Callable[..., Any]:
    """Builds the `Optimizer.apply_gradients` of patch
    `optimizer_apply.inference_keras_v2_apply_gradients`: tf_keras's current optimizer makes
    no update and no step increment while an EVAL or PREDICT step is built; it returns its
    `iterations`, as the original does."""

    def apply_gradients(self, grads_and_vars, name=None, skip_gradients_aggregation=False,
                        **kwargs):
        del grads_and_vars, name, skip_gradients_aggregation, kwargs
        return self.iterations

    apply_gradients.__doc__ = original.__doc__
    return apply_gradients


def retraceable_keras_iterations(original: property) -> property:
    """Builds the `OptimizerV2.iterations` property of patch
    `optimizer_apply.keras_iterations_retrace`: assigning the variable it already holds (a
    retrace of the same model_fn setting the same global step) is a no-op; anything else goes
    to tf_keras's own setter, which refuses it with tf_keras's error."""

    def set_iterations(self: Any, variable: Any) -> None:
        try:
            original.fset(self, variable)
        except RuntimeError:
            # The setter refuses once `iterations` holds a variable, which the getter then
            # returns as it is (it only creates one when none is held).
            if original.fget(self) is not variable:
                raise

    return property(original.fget, set_iterations, original.fdel, original.__doc__)


@contextlib.contextmanager
def not_training() -> Iterator[None]:
    """Inside (while model_fn builds an EVAL or PREDICT step): every optimizer's
    `apply_gradients`, v1 or tf_keras's (legacy OptimizerV2 or current), updates nothing."""
    with _tf_patches.applied("optimizer_apply.inference_apply_gradients"), \
            _tf_patches.applied("optimizer_apply.inference_keras_apply_gradients"), \
            _tf_patches.applied("optimizer_apply.inference_keras_v2_apply_gradients"):
        yield
