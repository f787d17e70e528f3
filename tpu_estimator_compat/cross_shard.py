"""Maps TPU cross-replica primitives onto the active tf.distribute strategy.

Legacy TPU models wrap their optimizer in `tf.compat.v1.tpu.CrossShardOptimizer` and some call
`tf.compat.v1.tpu.cross_replica_sum` directly. Both emit the `CrossReplicaSum` op, which has no
CPU or GPU kernel. This module keeps their TPU semantics on any strategy:

* `CrossShardOptimizer.compute_gradients` scales the loss by 1/replicas for its default MEAN
  reduction (and not at all for SUM), exactly once;
* `CrossShardOptimizer.apply_gradients` SUMS gradients over replicas, so a model that calls
  `tf.gradients` and `apply_gradients` itself (BERT, ALBERT) gets the TPU's summed update;
* `cross_replica_sum(x)` becomes the replica context's all-reduce.

`install()` patches the methods on the original class in place (rebinding the module
attribute would break the class's own `super()` calls) and is idempotent. Inside a real
legacy TPU shard context the original TPU behaviour runs unchanged. This module knows
nothing about estimators or model_fns.
"""

from __future__ import annotations

import threading
from typing import Any

import tensorflow as tf

from tpu_estimator_compat import _tf_private

_lock = threading.Lock()
_originals: dict[str, Any] = {}


def _replica_count() -> int:
    return tf.distribute.get_strategy().num_replicas_in_sync


class _EstimatorLossScalingOff:
    """Turns off the strategy's v1-optimizer loss scaling for one `compute_gradients` call.

    CrossShardOptimizer does its own scaling; the wrapped optimizer must not scale again.
    MirroredStrategy replica threads only switch at merge_call points, and
    `compute_gradients` makes none, so the flag cannot leak into another replica.
    """

    def __enter__(self) -> None:
        self._strategy = tf.distribute.get_strategy()
        self._previous = getattr(self._strategy, "_scale_loss_for_estimator", False)
        self._strategy._scale_loss_for_estimator = False  # pylint: disable=protected-access

    def __exit__(self, *exc: Any) -> None:
        self._strategy._scale_loss_for_estimator = self._previous  # pylint: disable=protected-access


def _compute_gradients(self, loss, var_list=None, **kwargs):
    if _tf_private.in_legacy_tpu_shard_context():
        return _originals["compute_gradients"](self, loss, var_list=var_list, **kwargs)
    replicas = _replica_count()
    if replicas > 1 and self._reduction == tf.compat.v1.losses.Reduction.MEAN:  # pylint: disable=protected-access
        loss *= 1.0 / replicas
    with _EstimatorLossScalingOff():
        return self._opt.compute_gradients(loss, var_list=var_list, **kwargs)  # pylint: disable=protected-access


def _uses_base_apply(optimizer: Any) -> bool:
    return type(optimizer).apply_gradients is tf.compat.v1.train.Optimizer.apply_gradients


def _apply_gradients(self, grads_and_vars, global_step=None, name=None):
    if _tf_private.in_legacy_tpu_shard_context():
        return _originals["apply_gradients"](self, grads_and_vars, global_step, name)
    inner = self._opt  # pylint: disable=protected-access
    if _uses_base_apply(inner):
        # The base v1 apply merges into cross-replica context and SUMs the gradients.
        return inner.apply_gradients(grads_and_vars, global_step=global_step, name=name)
    # A custom optimizer (BERT's AdamWeightDecayOptimizer) updates variables itself in
    # replica context: sum the gradients first so every replica applies the TPU update.
    grads_and_vars = list(grads_and_vars)
    summed = [(cross_replica_sum(g) if g is not None else None, v) for g, v in grads_and_vars]
    return inner.apply_gradients(summed, global_step=global_step, name=name)


def cross_replica_sum(x: Any, group_assignment: Any = None, name: str | None = None) -> Any:
    """`tf.compat.v1.tpu.cross_replica_sum` on any strategy: a SUM all-reduce over replicas."""
    if _tf_private.in_legacy_tpu_shard_context():
        return _originals["cross_replica_sum"](x, group_assignment, name)
    if group_assignment is not None:
        raise NotImplementedError(
            "`cross_replica_sum(group_assignment=...)` is only supported on a real TPU "
            f"shard; received group_assignment={group_assignment!r}. Off TPU all replicas "
            "form one group: drop `group_assignment`.")
    context = tf.distribute.get_replica_context()
    if context is None:
        raise RuntimeError(
            "`cross_replica_sum` was called outside a replica step (cross-replica context). "
            "Call it inside model_fn.")
    if context.num_replicas_in_sync == 1:
        return tf.identity(x, name=name)
    return context.all_reduce(tf.distribute.ReduceOp.SUM, x)


def install() -> None:
    """Patches CrossShardOptimizer and cross_replica_sum. Safe to call many times."""
    with _lock:
        if _originals:
            return
        cls = tf.compat.v1.tpu.CrossShardOptimizer
        _originals["compute_gradients"] = cls.compute_gradients
        _originals["apply_gradients"] = cls.apply_gradients
        _originals["cross_replica_sum"] = tf.compat.v1.tpu.cross_replica_sum
        cls.compute_gradients = _compute_gradients
        cls.apply_gradients = _apply_gradients
        tf.compat.v1.tpu.cross_replica_sum = cross_replica_sum
