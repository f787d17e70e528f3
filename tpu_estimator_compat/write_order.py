"""Orders a replica step's large variable writes one after another, to bound temporaries.

Synopsis::

    with write_order.chained(graph):   # entered by `variables.replica_scope`
        ...  # model_fn, e.g. BERT's AdamWeightDecayOptimizer assigning 603 variables

A custom optimizer written with plain ops (BERT's `next_m`, `next_v`, `update`, `next_param`
per variable, LAMB) makes several temporaries the size of each variable it updates. All the
gradients are ready at about the same time (after clipping, after the all-reduce), so
TensorFlow's executor computes every variable's temporaries before it writes any: on
BERT-base three extra copies of the model in memory, where a fused `ResourceApplyAdam` makes
none. Legacy's TF1 graph did the same (its peak is the shim's without this module).

Inside `chained`, each write of a large variable (at least `CHAINED_WRITE_ELEMENTS` elements)
in the step's own graph makes the ops computing its value, among those made since the
previous write of any variable, start after the previous large write: about one variable's
temporaries exist at a time. Only control edges are added, from an older op to newer ones
(no cycle can form), so values are unchanged. Small variables stay unordered (chaining them
would only serialise a small model's update), and so does a value whose newly made ops are
more than a per-variable update (`MAX_CHAINED_OPS`: a large write in the forward pass, whose
next large write is far away).

The patches are `_tf_patches`' `write_order.*` (the op wrappers every variable write in a
graph goes through); this module builds the replacement. It knows nothing about optimizers,
estimators or strategies.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

import tensorflow as tf

from tpu_estimator_compat import _tf_patches, _tf_private

# Writes of at least this many elements are chained (1 MiB of float32).
CHAINED_WRITE_ELEMENTS = 1 << 18
# A value computed by more new ops than this is not one variable's update: left unordered.
MAX_CHAINED_OPS = 256

_PATCHES = ("write_order.assign_variable_op", "write_order.assign_add_variable_op",
            "write_order.assign_sub_variable_op")
_local = threading.local()


class _Chain:
    """One replica step trace's writes on one thread: the previous write and large write."""

    def __init__(self, graph: tf.Graph) -> None:
        self.graph = graph
        self.last: Any = None  # The previous large write.
        self.mark = -1  # Creation index of the previous write (of any variable).

    def before_write(self, value: Any) -> None:
        """Makes the ops newly made for `value` wait for the previous large write."""
        if self.last is None or not _is_large(value):
            return
        index = _tf_private.op_creation_index
        stack, window, entries = [value.op], set(), []  # Entries: ops without a newer input.
        while stack:
            op = stack.pop()
            if index(op) <= self.mark or op in window:
                continue
            window.add(op)
            if len(window) > MAX_CHAINED_OPS:
                return
            # A function input (a newly captured variable handle) takes no control input:
            # the op reading it does.
            newer = [t.op for t in op.inputs
                     if index(t.op) > self.mark and t.op.type != "Placeholder"]
            if not newer:
                entries.append(op)
            stack.extend(newer)
        for op in entries:
            _tf_private.add_control_input(op, self.last)

    def after_write(self, op: Any, value: Any) -> None:
        self.mark = _tf_private.op_creation_index(op)
        if _is_large(value):
            self.last = op


def _is_large(value: Any) -> bool:
    shape = getattr(value, "shape", None)
    if not hasattr(value, "op") or shape is None:
        return False
    elements = tf.TensorShape(shape).num_elements()
    return elements is not None and elements >= CHAINED_WRITE_ELEMENTS


@contextlib.contextmanager
def chained(graph: tf.Graph) -> Iterator[None]:
    """Inside (this thread): large writes in `graph` are chained (see the module doc)."""
    previous = getattr(_local, "chain", None)
    _local.chain = _Chain(graph)
    try:
        with contextlib.ExitStack() as stack:
            for name in _PATCHES:
                stack.enter_context(_tf_patches.applied(name))
            yield
    finally:
        _local.chain = previous


def patched_write(original: Callable[..., Any]) -> Callable[..., Any]:
    """Builds a `gen_resource_variable_ops` write wrapper for the `write_order.*` patches."""

    def write(resource, value, *args, **kwargs):
        chain = getattr(_local, "chain", None)
        if (chain is None or tf.executing_eagerly()
                or tf.compat.v1.get_default_graph() is not chain.graph):
            return original(resource, value, *args, **kwargs)
        chain.before_write(value)
        op = original(resource, value, *args, **kwargs)
        chain.after_write(op, value)
        return op

    return write
