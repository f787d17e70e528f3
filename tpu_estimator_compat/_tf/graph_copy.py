"""Recompute a small graph value from variable reads made after a given op.

Legacy evaluation ran the metrics' update ops once per batch and their value tensors in a
session run of their own after the last batch, so a value was always computed from the final
variables. A traced eval step computes a value where it was created instead: a composite
metric whose value model_fn derived from other metrics' values before their updates ran (an
F1 from `tf.compat.v1.metrics.precision` and `recall`, with `tf.group` of their updates as its
update op) came out one batch stale. `recompute_after(value, update)` copies the ops between
`value` and the variable reads it depends on, the reads made under a control dependency on
`update`, so the copy sees every update of the step. No public API copies an op with new
inputs: `Graph._create_op_internal` (tensorflow/python/framework/ops.py) is what
`tf.Graph.create_op` (deprecated) calls, without the shape-check argument it warns about.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tpu_estimator_compat._tf import private as _private

_READ = "ReadVariableOp"
_WRITES = ("AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp")
# Copying more than this many ops means the value depends on more than metric accumulators
# (a model's forward pass): not what this helper is for.
_MAX_OPS = 256


def read_after(value: Any, update: Any) -> tf.Tensor:
    """`value` as it reads once `update` ran: recomputed when it can be, else an identity of
    it under a control dependency on `update` (right for a value made after the update)."""
    value = tf.convert_to_tensor(value)
    again = recompute_after(value, update)
    if again is not None:
        return again
    with tf.control_dependencies([update]):
        return tf.identity(value)


class _Unsupported(Exception):
    """The value's subgraph holds an op that must not run twice (stateful, control flow)."""


def recompute_after(value: tf.Tensor, update: Any) -> tf.Tensor | None:
    """`value` computed again from variable reads ordered after `update`, in the same graph.

    Returns None when `value` reads no variable, its subgraph holds a stateful op other than
    a variable read (or a function call, or control flow), or is larger than a metric's
    arithmetic; the caller then keeps its own reading.
    """
    graph = value.graph
    reads: dict[int, bool] = {}
    try:
        if not _reads_variables(value.op, reads) or not _stale(value.op, update):
            return None
        with graph.as_default():
            return _copy(value, update, graph, reads, {})
    except _Unsupported:
        return None


def _read_ops(op: tf.Operation, seen: dict[int, tf.Operation]) -> None:
    if id(op) not in seen:
        seen[id(op)] = op
        for t in op.inputs:
            _read_ops(t.op, seen)


def _stale(value_op: tf.Operation, update: Any) -> bool:
    """Whether a variable read under `value_op` was made before a write `update` waits for.

    Ops are numbered as they are made; a write made after the read runs after it in a traced
    function, so that read is the value before the write. Only ops made after the earliest
    read can be such writes, which bounds the walk back from `update`.
    """
    ops: dict[int, tf.Operation] = {}
    _read_ops(value_op, ops)
    read_ops = [op for op in ops.values() if op.type == _READ]
    first = min(_private.op_creation_index(op) for op in read_ops)
    written: dict[Any, int] = {}
    stack, seen = [getattr(update, "op", update)], set()
    while stack:
        op = stack.pop()
        if id(op) in seen or _private.op_creation_index(op) < first:
            continue
        seen.add(id(op))
        if op.type in _WRITES or op.type.startswith("ResourceScatter"):
            key = op.inputs[0].ref()
            written[key] = max(written.get(key, -1), _private.op_creation_index(op))
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return any(written.get(op.inputs[0].ref(), -1) > _private.op_creation_index(op)
               for op in read_ops)


def _reads_variables(op: tf.Operation, memo: dict[int, bool]) -> bool:
    key = id(op)
    if key not in memo:
        memo[key] = False  # Cycles cannot occur in a graph; this bounds re-entry.
        if len(memo) > _MAX_OPS * 4:
            raise _Unsupported(op.name)
        found = [_reads_variables(t.op, memo) for t in op.inputs]  # Each input: no any().
        memo[key] = op.type == _READ or any(found)
    return memo[key]


def _copy(tensor: tf.Tensor, update: Any, graph: tf.Graph, reads: dict[int, bool],
          copies: dict[Any, tf.Tensor]) -> tf.Tensor:
    key = tensor.ref()
    if key in copies:
        return copies[key]
    op = tensor.op
    if not reads.get(id(op), False):
        result = tensor  # Independent of every variable: the same tensor serves.
    elif op.type == _READ:
        with graph.control_dependencies([update]):
            result = tf.raw_ops.ReadVariableOp(resource=op.inputs[0],
                                               dtype=op.get_attr("dtype"))
    else:
        if op.op_def.is_stateful or op.type in ("If", "While", "StatelessIf",
                                                 "StatelessWhile", "PartitionedCall"):
            raise _Unsupported(op.name)
        if len(copies) > _MAX_OPS:
            raise _Unsupported(op.name)
        inputs = [_copy(t, update, graph, reads, copies) for t in op.inputs]
        new_op = graph._create_op_internal(  # pylint: disable=protected-access
            op.type, inputs, [t.dtype for t in op.outputs],
            attrs={name: op.node_def.attr[name] for name in op.node_def.attr},
            op_def=op.op_def)
        result = new_op.outputs[tensor.value_index]
    copies[key] = result
    return result
