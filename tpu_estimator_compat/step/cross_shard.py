"""Maps TPU cross-replica primitives onto the active tf.distribute strategy.

Legacy TPU models wrap their optimizer in `tf.compat.v1.tpu.CrossShardOptimizer` and some call
`tf.compat.v1.tpu.cross_replica_sum` directly. Both emit the `CrossReplicaSum` op, which has no
CPU or GPU kernel. This module keeps their TPU semantics on any strategy:

* `CrossShardOptimizer.compute_gradients` scales the loss by 1/replicas for its default MEAN
  reduction (and not at all for SUM), exactly once;
* `CrossShardOptimizer.apply_gradients` SUMS gradients over replicas, so a model that calls
  `tf.gradients` and `apply_gradients` itself (BERT, ALBERT) gets the TPU's summed update;
* `cross_replica_sum(x[, group_assignment])` becomes the replica context's all-reduce (over
  each replica's group when groups are given), whichever path code reaches it through: the
  public `tf.compat.v1.tpu` name, the private `tensorflow.python.tpu.ops.tpu_ops` module
  (and the contrib paths that alias them), or `tf.raw_ops.CrossReplicaSum`.
* `tpu_function.get_tpu_context().number_of_shards`, which model code reads to decide on
  cross-replica batch norm, is the replica count inside model_fn with `use_tpu=True`
  (`shard_count`), as inside legacy's TPU shard; TensorFlow's own readers still see none.
  Likewise `control_flow_util.GetContainingXLAContext` / `IsInXLAContext`, which model code
  reads to choose its TPU form (tensor2tensor's `is_xla_compiled()`), answer as inside
  legacy's `tpu.rewrite` for model code only.

`install()` asks `_tf_patches` for these patches (the methods are replaced on the original
class in place: rebinding the module attribute would break the class's own `super()` calls);
`xla.replica_id()` (`tensorflow.compiler.tf2xla.python.xla`), the TPU's replica index, is
the replica's index in the strategy inside a replica step. This module only builds the
replacements. `install_aliases()` installs them too, before a
script runs, so `from ...tpu_ops import cross_replica_sum` at a script's top binds the mapped
function. Inside a real legacy TPU shard context the original
TPU behaviour runs unchanged. This module knows nothing about estimators or model_fns, nor how
a patch is installed.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any, Callable, Iterator

import numpy as np
import tensorflow as tf

from tpu_estimator_compat._tf import patches as _tf_patches
from tpu_estimator_compat._tf import private as _tf_private
from tpu_estimator_compat.step import optimizer_apply
from tpu_estimator_compat.v1_state import variables


def _replica_count() -> int:
    return tf.distribute.get_strategy().num_replicas_in_sync


def patched_compute_gradients(original: Callable[..., Any]) -> Callable[..., Any]:
    """Builds `CrossShardOptimizer.compute_gradients` for patch `cross_shard.compute_gradients`.

    Off TPU it scales the loss by 1/replicas for the MEAN reduction and turns off the
    strategy's own v1-optimizer loss scaling for the wrapped optimizer (CrossShardOptimizer
    does its own scaling; it must not happen twice). MirroredStrategy replica threads only
    switch at merge_call points, and `compute_gradients` makes none, so that switch cannot
    leak into another replica.
    """

    def compute_gradients(self, loss, var_list=None, **kwargs):
        if _tf_private.in_legacy_tpu_shard_context():
            return original(self, loss, var_list=var_list, **kwargs)
        replicas = _replica_count()
        if (replicas > 1 and _tf_private.cross_shard_reduction(self)
                == tf.compat.v1.losses.Reduction.MEAN):
            loss *= 1.0 / replicas
        with _tf_private.estimator_loss_scaling_off(tf.distribute.get_strategy()):
            return _tf_private.cross_shard_inner_optimizer(self).compute_gradients(
                loss, var_list=var_list, **kwargs)

    return compute_gradients


def _uses_base_apply(optimizer: Any) -> bool:
    """Whether `optimizer`'s update is the base v1 apply (which sums over replicas itself).

    Wrappers that only transform gradients and hand them on (`applies_through`:
    `tf.contrib.estimator.clip_gradients_by_norm`) are seen through: summing before them
    too would sum twice.
    """
    while getattr(optimizer, "applies_through", None) is not None:
        optimizer = optimizer.applies_through
    return type(optimizer).apply_gradients is tf.compat.v1.train.Optimizer.apply_gradients


def patched_apply_gradients(original: Callable[..., Any]) -> Callable[..., Any]:
    """Builds `CrossShardOptimizer.apply_gradients` for patch `cross_shard.apply_gradients`."""

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        if _tf_private.in_legacy_tpu_shard_context():
            return original(self, grads_and_vars, global_step, name)
        inner = _tf_private.cross_shard_inner_optimizer(self)
        if _uses_base_apply(inner):
            # The base v1 apply merges into cross-replica context and SUMs the gradients.
            return inner.apply_gradients(grads_and_vars, global_step=global_step, name=name)
        # A custom optimizer (BERT's AdamWeightDecayOptimizer) updates variables itself in
        # replica context: sum the gradients first so every replica applies the TPU update.
        grads_and_vars = list(grads_and_vars)
        summed = _summed_gradients([g for g, _ in grads_and_vars])
        apply = lambda: inner.apply_gradients(  # noqa: E731
            [(g, v) for g, (_, v) in zip(summed, grads_and_vars)],
            global_step=global_step, name=name)
        if all(g is None for g in summed):
            return apply()
        # The all-reduce just brought every replica thread to this point: the update is
        # computed once and written to every replica's copy (`optimizer_apply.apply_once`).
        return optimizer_apply.apply_once(apply, name)

    return apply_gradients


def _summed_gradients(grads: list[Any]) -> list[Any]:
    """`cross_replica_sum` of each gradient (None stays None), in few all-reduces.

    One all-reduce per gradient made BERT-base's 201 gradients 201 merge_calls per replica
    step trace, each waiting for every replica thread (10 s of a 2-replica trace). Here the
    dense gradients of one dtype go in one all-reduce (TensorFlow's collective batch
    all-reduce concatenates a batch, so dtypes are not mixed), as the v1 optimizers'
    `batch_reduce_to` already does; sparse gradients keep one each.
    """
    context = tf.distribute.get_replica_context()
    if (context is None or context.num_replicas_in_sync == 1
            or _tf_private.in_legacy_tpu_shard_context()):
        return [cross_replica_sum(g) if g is not None else None for g in grads]
    summed: list[Any] = list(grads)
    by_dtype: dict[Any, list[int]] = {}
    for index, grad in enumerate(grads):
        if isinstance(grad, tf.IndexedSlices):
            summed[index] = cross_replica_sum(grad)
        elif grad is not None:
            by_dtype.setdefault(tf.as_dtype(grad.dtype), []).append(index)
    for indices in by_dtype.values():
        values = context.all_reduce(tf.distribute.ReduceOp.SUM, [grads[i] for i in indices])
        for index, value in zip(indices, values):
            summed[index] = value
    return summed


def patched_cross_replica_sum(original: Callable[..., Any]) -> Callable[..., Any]:
    """The replacement of patch `cross_shard.cross_replica_sum`: `cross_replica_sum` itself."""
    del original  # Read through `_tf_patches.original` inside a real TPU shard.
    return cross_replica_sum


def patched_raw_cross_replica_sum(original: Callable[..., Any]) -> Callable[..., Any]:
    """The replacement of patch `cross_shard.raw_cross_replica_sum` (`tf.raw_ops`).

    Keyword-only, like every raw op wrapper (positional arguments get TensorFlow's own
    TypeError from the original); inside a TPU computation the real op runs.
    """

    def CrossReplicaSum(*args, **kwargs):  # noqa: N802 pylint: disable=invalid-name
        if args or _tf_private.in_legacy_tpu_shard_context():
            return original(*args, **kwargs)
        try:
            x, group_assignment = kwargs.pop("input"), kwargs.pop("group_assignment")
            name = kwargs.pop("name", None)
        except KeyError as e:
            raise TypeError(f"CrossReplicaSum missing required keyword argument {e}.") from None
        if kwargs:
            raise TypeError(f"CrossReplicaSum got unexpected keyword arguments {sorted(kwargs)}.")
        return cross_replica_sum(x, group_assignment, name)

    CrossReplicaSum.__doc__ = original.__doc__
    return CrossReplicaSum


def _static_groups(group_assignment: Any) -> np.ndarray:
    """`group_assignment` as a 2-D int array, which must be known when the step is traced."""
    value = group_assignment
    if isinstance(value, (tf.Tensor, tf.Variable)):
        value = tf.get_static_value(value)
        if value is None:
            raise ValueError(
                "`cross_replica_sum(group_assignment=...)` must be known when the step is "
                f"traced off TPU; received the computed tensor {group_assignment!r}. Pass a "
                "Python list such as [[0, 1], [2, 3]].")
    try:
        groups = np.asarray(value, dtype=np.int64)
    except (TypeError, ValueError):
        groups = np.empty((0,))  # Ragged lists: refused below.
    return groups


def _group_index_of_replicas(group_assignment: Any, num_replicas: int) -> np.ndarray:
    """For each replica id, the index of its group in `group_assignment`.

    A TPU accepts only equal-size groups that hold every replica exactly once; the same rule
    holds here, checked against the strategy's replicas.
    """
    groups = _static_groups(group_assignment)
    valid = (groups.ndim == 2 and groups.size == num_replicas and groups.shape[1] > 0
             and sorted(groups.ravel().tolist()) == list(range(num_replicas)))
    if not valid:
        raise ValueError(
            "`cross_replica_sum(group_assignment=...)` must list every replica id from 0 to "
            f"{num_replicas - 1} exactly once, in groups of equal size, as a TPU requires; "
            f"received {group_assignment!r} for the strategy's {num_replicas} replica(s). "
            "Off TPU the replicas are the strategy's: compute the groups from "
            "`params['context'].num_replicas` or the replica count you run with "
            "(`--cpu_replicas`), not from a TPU core count.")
    index = np.empty(num_replicas, dtype=np.int32)
    for group, members in enumerate(groups):
        index[members] = group
    return index


def _grouped_sum(context: Any, x: tf.Tensor, group_of: np.ndarray) -> tf.Tensor:
    """Each replica gets the sum of `x` over its own group (TPU grouped CrossReplicaSum).

    One all-reduce of a [groups, ...] tensor in which each replica fills only its group's
    row: the sum's row g is group g's sum. Differentiable, as the TPU op is.
    """
    num_groups = int(group_of.max()) + 1
    group = tf.gather(tf.constant(group_of), context.replica_id_in_sync_group)
    if x.shape.rank is not None:
        mask_shape: Any = [num_groups] + [1] * x.shape.rank
    else:
        mask_shape = tf.concat([[num_groups], tf.ones([tf.rank(x)], tf.int32)], axis=0)
    mask = tf.reshape(tf.one_hot(group, num_groups, dtype=x.dtype), mask_shape)
    summed = context.all_reduce(tf.distribute.ReduceOp.SUM, mask * x[tf.newaxis])
    return tf.gather(summed, group)


def cross_replica_sum(x: Any, group_assignment: Any = None, name: str | None = None) -> Any:
    """`tf.compat.v1.tpu.cross_replica_sum` on any strategy: a SUM all-reduce over replicas.

    With `group_assignment` (e.g. [[0, 1], [2, 3]]: cross-replica batch norm over groups of
    cores, tensorflow/tpu amoeba_net and SSD), each replica gets the sum over its group, as
    on a TPU.
    """
    if _tf_private.in_legacy_tpu_shard_context():
        tpu_sum = _tf_patches.original("cross_shard.cross_replica_sum")
        return tpu_sum(x, group_assignment, name)
    context = tf.distribute.get_replica_context()
    if context is None:
        raise RuntimeError(
            "`cross_replica_sum` was called outside a replica step (cross-replica context). "
            "Call it inside model_fn.")
    replicas = context.num_replicas_in_sync
    group_of = (None if group_assignment is None
                else _group_index_of_replicas(group_assignment, replicas))
    if replicas == 1:
        return tf.identity(x, name=name)
    if group_of is None or group_of.max() == 0:
        return context.all_reduce(tf.distribute.ReduceOp.SUM, x)
    return _grouped_sum(context, tf.convert_to_tensor(x), group_of)


def patched_replica_id(original: Callable[..., Any]) -> Callable[..., Any]:
    """Builds `xla.replica_id` for patch `cross_shard.xla_replica_id`.

    SimCLR's contrastive loss (objective.py) scatters each core's batch into row
    `xla.replica_id()` before a `cross_replica_sum`. The XlaReplicaId op only has a meaning
    on a TPU; compiled for the CPU it crashes the process (segfault, no message). Inside a
    replica step off TPU it is the replica's index in the strategy's sync group, as int32
    like the op; inside a TPU computation and anywhere outside a replica step, TensorFlow's
    op is left to do what it does.
    """

    def replica_id(name=None):
        context = tf.distribute.get_replica_context()
        if (context is None or _tf_private.in_legacy_tpu_shard_context()
                or not variables.in_replica_step()):
            return original(name=name)
        index = tf.cast(context.replica_id_in_sync_group, tf.int32)
        return tf.identity(index, name=name or "replica_id")

    replica_id.__doc__ = original.__doc__
    return replica_id


# Code that reads the shard count for the shim itself or as TensorFlow's machinery (TPU
# feature columns choose their CPU lookup by `number_of_shards is None`; TF's TPU ops build
# their groups from it): it keeps TensorFlow's answer, None outside a real TPU shard.
_REAL_COUNT_READERS = ("tensorflow.", "tf_keras.", "keras.", "tpu_estimator_compat.")
_SHARDS = threading.local()


@contextlib.contextmanager
def shard_count(num_replicas: int) -> Iterator[None]:
    """Inside (this thread): model code reads `number_of_shards` as `num_replicas`.

    Legacy TPUEstimator built a `use_tpu=True` model_fn inside a TPU shard context, where
    `tpu_function.get_tpu_context().number_of_shards` was the replica count. Models read it to
    decide on cross-replica batch norm (SimCLR's global BN, efficientnet/mnasnet/mask_rcnn's
    TpuBatchNormalization: `cross_replica_sum(mean) / num_shards`); left None, they silently
    normalised per replica. `cross_replica_sum` itself maps onto the strategy's all-reduce.
    """
    previous = getattr(_SHARDS, "count", None)
    _SHARDS.count = num_replicas
    try:
        with _tf_patches.applied("cross_shard.number_of_shards"), \
                _tf_patches.applied("cross_shard.xla_context"), \
                _tf_patches.applied("cross_shard.in_xla_context"):
            yield
    finally:
        _SHARDS.count = previous


def patched_number_of_shards(original: property) -> property:
    """The replacement of patch `cross_shard.number_of_shards` (`TpuContext.number_of_shards`).

    A real shard count (inside `tpu.shard`, or another marker of the shim) wins; otherwise
    model code inside `shard_count` gets the replica count and everything else None.
    """

    def number_of_shards(self: Any) -> Any:
        real = original.fget(self)
        count = getattr(_SHARDS, "count", None)
        if real is not None or count is None:
            return real
        # sys._getframe is CPython's documented frame API: the one caller frame is read.
        caller = sys._getframe(1).f_globals.get("__name__", "")  # pylint: disable=protected-access
        return real if caller.startswith(_REAL_COUNT_READERS) else count

    return property(number_of_shards, original.fset, original.fdel, original.__doc__)


def _model_code_in_shard(depth: int) -> bool:
    """Whether the caller `depth` frames up is model code inside `shard_count`."""
    if getattr(_SHARDS, "count", None) is None:
        return False
    # sys._getframe is CPython's documented frame API: the one caller frame is read.
    caller = sys._getframe(depth + 1).f_globals.get("__name__", "")  # pylint: disable=protected-access
    return not caller.startswith(_REAL_COUNT_READERS)


def patched_containing_xla_context(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The replacement of patch `cross_shard.xla_context` (`GetContainingXLAContext`).

    A real XLA context wins; otherwise model code inside `shard_count` (a use_tpu=True
    model_fn, which legacy built inside `tpu.rewrite`) gets an XLA context and everything
    else, TensorFlow's own control flow included, the real answer.
    """

    def get_containing_xla_context(ctxt: Any) -> Any:
        real = original(ctxt)
        if real is not None or not _model_code_in_shard(1):
            return real
        return _tf_private.xla_control_flow_context()

    get_containing_xla_context.__doc__ = original.__doc__
    return get_containing_xla_context


def patched_in_xla_context(original: Callable[[Any], bool]) -> Callable[[Any], bool]:
    """The replacement of patch `cross_shard.in_xla_context` (`IsInXLAContext(op)`): True for
    model code asking about an op of the graph model_fn is being built in (see
    `patched_containing_xla_context`)."""

    def is_in_xla_context(op: Any) -> bool:
        if original(op):
            return True
        return (_model_code_in_shard(1)
                and getattr(op, "graph", None) is tf.compat.v1.get_default_graph())

    is_in_xla_context.__doc__ = original.__doc__
    return is_in_xla_context


def install() -> None:
    """Puts the CrossShardOptimizer and cross_replica_sum patches in place. Idempotent."""
    _tf_patches.install("cross_shard")
