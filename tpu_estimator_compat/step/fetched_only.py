"""Evaluation and prediction steps change no variable beyond what legacy fetched.

Legacy evaluated and predicted with `session.run` of what the spec asked for (the loss, the
metric update ops, the predictions, hooks' and host_call's tensors): an op model_fn made
that none of those depended on never ran. A model_fn that builds
`optimizer.minimize(loss)` in every mode (or assigns a variable beside its outputs) left the
variables as the checkpoint had them. In a `tf.function` every stateful op runs (automatic
control dependencies), so such a step would apply an update per batch, and later batches
would be evaluated on other weights. An op cannot be removed from a graph; instead each
variable update no fetched tensor depends on is pointed at a scratch copy of its variable,
made on its device just before it and destroyed after: it computes what it computed, and
the variable is unchanged. Other stateful ops (prints, summaries) run as before.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterable

import tensorflow as tf

from tpu_estimator_compat._tf import private as _tf_private

# Op types that write a resource variable's value (tf.raw_ops), by name or prefix.
_WRITES = frozenset(("AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp"))
_WRITE_PREFIXES = ("ResourceApply", "ResourceSparseApply", "ResourceScatter",
                   "ResourceStridedSliceAssign")
_scratch_ids = itertools.count()


def updates_variable(op: tf.Operation) -> bool:
    """Whether `op` writes a resource variable (an assign, an optimizer apply, a scatter)."""
    return op.type in _WRITES or op.type.startswith(_WRITE_PREFIXES)


def _needed(fetches: Iterable[Any]) -> set[tf.Operation]:
    """Every op the `fetches` (tensors or ops) depend on, through data and control inputs."""
    pending = [f.op if isinstance(f, tf.Tensor) else f for f in fetches
               if isinstance(f, (tf.Tensor, tf.Operation))]
    seen: set[tf.Operation] = set()
    while pending:
        op = pending.pop()
        if op in seen:
            continue
        seen.add(op)
        pending.extend(t.op for t in op.inputs)
        pending.extend(op.control_inputs)
    return seen


def _value_dtype(op: tf.Operation) -> tf.DType:
    for attr in ("dtype", "T"):
        try:
            return tf.as_dtype(op.get_attr(attr))
        except ValueError:
            continue
    raise ValueError(f"{op.type} {op.name!r} names no value dtype")


def _to_scratch(op: tf.Operation) -> None:
    """Points each variable `op` writes at a scratch copy made on its device just before it.

    The copy is reached through a handle of its own for each of its three ops, so the
    function's automatic control dependencies, which order ops by the handle tensor they
    take, order none of them by it: the copy, the update and the release are ordered by the
    control edges added here.
    """
    dtype = _value_dtype(op)
    with tf.compat.v1.colocate_with(op), tf.control_dependencies(None):
        for index, tensor in enumerate(list(op.inputs)):
            if tensor.dtype != tf.resource:
                continue
            name = f"{op.name}_scratch{index}_{next(_scratch_ids)}"

            def handle() -> tf.Tensor:
                return tf.raw_ops.VarHandleOp(dtype=dtype, shape=tf.TensorShape(None),
                                              shared_name=name)

            copy = tf.raw_ops.AssignVariableOp(
                resource=handle(), value=tf.raw_ops.ReadVariableOp(resource=tensor,
                                                                   dtype=dtype))
            _tf_private.replace_input(op, index, handle())
            _tf_private.add_control_input(op, copy)
            with tf.control_dependencies([op]):
                tf.raw_ops.DestroyResourceOp(resource=handle(), ignore_lookup_error=True)


def keep_variables(graph: tf.Graph, since: int, fetches: Iterable[Any]) -> list[str]:
    """Points the variable updates made in `graph` after its first `since` ops that no
    fetched tensor depends on at scratch copies (see the module doc); returns their names."""
    made = graph.get_operations()[since:]
    needed = _needed(fetches)
    unfetched = [op for op in made if updates_variable(op) and op not in needed]
    for op in unfetched:
        _to_scratch(op)
    return [op.name for op in unfetched]
