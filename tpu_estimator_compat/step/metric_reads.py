"""Metric variables read in an eval step see the step's starting value, as in legacy's session.

Synopsis (replica_step, around an EVAL or PREDICT model_fn on one replica)::

    with metric_reads.outside_training(global_step):     # or first_reads()
        spec = model_fn(...)     # eval_dict["auc_mean"] = tf.metrics.mean(values=auc_values)

Legacy ran all of an evaluation step's update ops in one `session.run`. A v1 metric's value
tensor reads its accumulators with no edge to their `assign_add`s, and those reads need
nothing but the variable, so they ran first: a metric whose *update* took other metrics'
values (google-research/goemotions averages the per-label `tf.compat.v1.metrics.auc` values
with `tf.compat.v1.metrics.mean`) averaged the values as they were before that batch. A
traced function orders the reads and writes of one variable as they were made instead, and
`auc` makes its value after its update, so the average took the values after the batch.

Inside `first_reads`, each variable `tf.compat.v1.metrics` makes (`metrics_impl.
metric_variable`, patch `metric_reads.metric_variable`) is read once when it is made, before
any update of it exists, and the metric code's later unordered reads of that variable object
return that read (`global_step_reads.step_start_reads`, the same redirect the global step's
reads take in a train step). Writes, their results (`assign_add` returns its own read) and
reads under `tf.control_dependencies` are untouched; the values an evaluation reports are
read again after the step's updates (`eval_metric_ops.read_after`, `metrics.values_after_
update`). Only on one replica: across replicas the values are merged from every replica's
accumulators (`eval_metric_ops.values_across_replicas`).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

import tensorflow as tf

from tpu_estimator_compat._tf import patches as _tf_patches
from tpu_estimator_compat.step import global_step_reads

_ACTIVE = threading.local()  # .stack: the ExitStack of this thread's `first_reads`


@contextlib.contextmanager
def outside_training(global_step: tf.Variable) -> Iterator[None]:
    """Around an EVAL or PREDICT model_fn: the global step is not written
    (`global_step_reads.frozen`) and v1 metric accumulators read as at step start."""
    with global_step_reads.frozen(global_step), first_reads():
        yield


@contextlib.contextmanager
def first_reads() -> Iterator[None]:
    """Inside, on one replica: v1 metric variables made in this thread read as at step start."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync != 1:
        yield
        return
    previous = getattr(_ACTIVE, "stack", None)
    with contextlib.ExitStack() as stack, _tf_patches.applied("metric_reads.metric_variable"):
        _ACTIVE.stack = stack
        try:
            yield
        finally:
            _ACTIVE.stack = previous


def metric_variable(original: Callable[..., Any]) -> Callable[..., Any]:
    """`metrics_impl.metric_variable`, whose variable is read once when it is made."""

    def make(*args: Any, **kwargs: Any) -> Any:
        variable = original(*args, **kwargs)
        stack = getattr(_ACTIVE, "stack", None)
        if (stack is not None and not tf.executing_eagerly()
                and not isinstance(variable, tf.distribute.DistributedValues)):
            stack.enter_context(global_step_reads.step_start_reads(variable, "at_step_start"))
        return variable

    return make
