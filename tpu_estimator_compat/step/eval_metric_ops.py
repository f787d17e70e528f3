"""An EstimatorSpec's `eval_metric_ops` in the traced eval step, on one replica or several.

Legacy Estimator ran every metric's update op in every `session.run` and read the values once,
after the last update. The eval step here returns each metric's value after its own update,
and the last step's values are the evaluation's (`metrics.values_after_update`); a value
that read its variables before a write its update waits for is read again (`read_after`).

On several replicas (`RunConfig(eval_distribute=...)`) legacy's distributed Estimator called
model_fn once per replica, each on its own batch. `tf.compat.v1.metrics` and tf_keras
`Metric`s made in a replica keep replica-local accumulators (SyncOnRead variables, summed
when read across replicas), so every replica's update counts its own rows; legacy grouped
the replicas' update ops and read each value once, from the summed accumulators. The value
tensor a v1 metric returns was read when the metric was made, before this step's updates,
and its update op holds this replica's value only; so here each value is read again once
every replica's update ran (`values_across_replicas`): the reads of the variables those
updates write, and the ops between them and the value, are made again after the updates.
A tf_keras Metric's `result()` is made after its `update_state`, and its merge_call sums
its variables across replicas, so it already reads the merged state.

Legacy's distributed input gave each replica the batch the input had for it, a partial one
or an empty one at the end, never padding rows; so does the eval loop for a plain Estimator
(`inputs/pad.py` with no batch size). A TPUEstimator's model_fn gets padded batches, and a
step that has padding rows fails rather than count them (`replica_step`).
"""

from __future__ import annotations

import contextlib
from typing import Any

import tensorflow as tf

from tpu_estimator_compat._tf import private as _tf_private

# Ops that read a resource variable's current value, and ops that change it.
_READS = frozenset({"ReadVariableOp", "ResourceGather", "ResourceGatherNd"})
_WRITE_PREFIXES = ("Assign", "ResourceScatter", "ResourceApply", "ResourceSparseApply",
                   "ResourceStridedSliceAssign")


def values_across_replicas(value_ops: dict[str, Any], update_ops: dict[str, Any],
                           ) -> dict[str, tf.Tensor]:
    """name -> the value once every replica ran this step's update, in every replica.

    Called in replica context, by every replica, with that replica's `(value, update)` of
    each metric (as `metrics._split_metric_ops` gives them). Each replica gets the same
    tensors back; the loop reports replica 0's.
    """
    names = sorted(value_ops)
    context = tf.distribute.get_replica_context()

    def merge(strategy: tf.distribute.Strategy, values: dict[str, Any],
              updates: dict[str, Any]) -> dict[str, tf.Tensor]:
        every_update = {name: list(strategy.experimental_local_results(updates[name]))
                        for name in names}
        written = set(_last_writes([u for name in names for u in every_update[name]]))
        memo: dict[Any, Any] = {}
        merged = {}
        for name in names:
            value = strategy.experimental_local_results(values[name])[0]
            with tf.control_dependencies(every_update[name]):
                fresh = _read_again(tf.convert_to_tensor(value), written, memo, name)
                merged[name] = tf.identity(fresh)
        return merged

    values = {name: value_ops[name] for name in names}
    updates = {name: update_ops[name] for name in names}
    return context.merge_call(merge, args=(values, updates))


def read_after(value: Any, update: Any, name: str) -> tf.Tensor:
    """One replica: `value` as legacy's final session run read it, once `update` ran.

    A value model_fn made from other metrics' values before their updates (an F1 from
    `precision` and `recall` values, with `tf.group` of their updates) read its variables
    before this step's writes: those reads, and the ops between them and the value, are made
    again after `update`. A value whose reads already follow the writes is kept as it is (bit
    for bit), and so is one that passes through another stateful op.
    """
    value = tf.convert_to_tensor(value)
    stale = _stale_handles(value, update)
    with tf.control_dependencies([update]):
        if stale:
            try:
                return tf.identity(_read_again(value, stale, {}, name))
            except NotImplementedError:
                pass
        return tf.identity(value)


def _stale_handles(value: tf.Tensor, update: Any) -> set[Any]:
    """The variables (`Tensor.ref()` of their handles) that `value` reads before a write
    `update` runs after: ops are numbered as they are made, and a function runs the stateful
    ops on one variable in that order. Only ops made after the earliest read can be such
    writes, which bounds the walk back from `update` (a model's graph lies before it)."""
    if value.graph is not tf.compat.v1.get_default_graph():
        return set()
    reads = [op for op in _post_order(value.op) if op.type in _READS]
    if not reads:
        return set()
    first = min(_tf_private.op_creation_index(op) for op in reads)
    last_write = _last_writes([update], since=first)
    return {op.inputs[0].ref() for op in reads
            if last_write.get(op.inputs[0].ref(), -1) > _tf_private.op_creation_index(op)}


def _last_writes(updates: list[Any], since: int = -1) -> dict[Any, int]:
    """{resource handle (`Tensor.ref()`): creation index of its latest write} over the
    writes any op `updates` run after; ops made before `since` are not walked."""
    last: dict[Any, int] = {}
    seen: set[Any] = set()
    stack = [u if isinstance(u, tf.Operation) else u.op for u in updates]
    while stack:
        op = stack.pop()
        if op in seen or _tf_private.op_creation_index(op) < since:
            continue
        seen.add(op)
        if op.type.startswith(_WRITE_PREFIXES) and op.inputs:
            key = op.inputs[0].ref()
            last[key] = max(last.get(key, -1), _tf_private.op_creation_index(op))
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return last


def _read_again(value: tf.Tensor, written: set[Any], memo: dict[Any, Any],
                name: str) -> tf.Tensor:
    """`value` made again from new reads of the `written` variables it reads.

    Ops between those reads and `value` are copied (same type, attributes and device) onto
    the new reads; everything else `value` depends on is used as it is. Made now, after the
    updates, the copies run after them: a function orders the stateful ops on one variable
    in the order they were made.
    """
    if value.graph is not tf.compat.v1.get_default_graph():
        return value  # A constant or a captured value: nothing of this step's to read.
    order = _post_order(value.op)
    for op in order:
        if op in memo:
            continue
        inputs = [memo[t.op].outputs[t.value_index] if t.op in memo else t
                  for t in op.inputs]
        stale = op.type in _READS and op.inputs[0].ref() in written
        changed = any(new is not old for new, old in zip(inputs, op.inputs))
        if not (stale or changed):
            continue
        if not stale and op.op_def.is_stateful:
            raise NotImplementedError(
                f"eval_metric_ops[{name!r}] cannot be read once every replica's update "
                f"ran: its value passes through the stateful op {op.name} ({op.type}), "
                "which cannot be run again. Build the value from the metric's variables "
                "with plain math, as tf.compat.v1.metrics and tf_keras Metrics do, or "
                "evaluate on one replica (no eval_distribute).")
        memo[op] = _copy(op, inputs, memo)
    return memo[value.op].outputs[value.value_index] if value.op in memo else value


def _post_order(root: tf.Operation) -> list[tf.Operation]:
    """`root` and the ops it depends on through data inputs, inputs first (no recursion:
    a model's graph can be deeper than Python's stack)."""
    order, seen, stack = [], set(), [(root, False)]
    while stack:
        op, expanded = stack.pop()
        if expanded:
            order.append(op)
            continue
        if op in seen:
            continue
        seen.add(op)
        stack.append((op, True))
        stack.extend((t.op, False) for t in op.inputs if t.op not in seen)
    return order


def _copy(op: tf.Operation, inputs: list[tf.Tensor], memo: dict[Any, Any]) -> tf.Operation:
    control = [memo.get(c, c) for c in op.control_inputs]
    device = tf.device(op.device) if op.device else contextlib.nullcontext()
    with device, tf.control_dependencies(control):
        return op.graph.create_op(
            op.type, inputs, [t.dtype for t in op.outputs],
            name=op.name.rsplit("/", 1)[-1] + "_after_update",
            attrs=dict(op.node_def.attr), op_def=op.op_def)

