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
in the step's own graph is recorded with the ops made for its value since the previous write
of any variable (its update). When the trace leaves `chained`, each update's first ops are made
to start after the previous update's last large write: about one variable's temporaries exist
at a time. When the updates are independent of each other (`_by_size`) they run smallest
first, so the largest meets the fewest gradients still alive; otherwise in the order they were
made. Only control edges are added, between independent updates or from an older op to newer
ones (no cycle can form), so values are unchanged. Small variables stay unordered (chaining
them would only serialise a small model's update), and so does a value whose newly made ops
are more than a per-variable update (`MAX_CHAINED_OPS`: a large write in the forward pass,
whose next large write is far away).

The patches are `_tf_patches`' `write_order.*` (the op wrappers every variable write in a
graph goes through); this module builds the replacement. It knows nothing about optimizers,
estimators or strategies.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from typing import Any, Callable, Iterator

import tensorflow as tf

from tpu_estimator_compat._tf import patches as _tf_patches
from tpu_estimator_compat._tf import private as _tf_private

# Writes of at least this many elements are chained (1 MiB of float32).
CHAINED_WRITE_ELEMENTS = 1 << 18
# A value computed by more new ops than this is not one variable's update: left unordered.
MAX_CHAINED_OPS = 256

_PATCHES = ("write_order.assign_variable_op", "write_order.assign_add_variable_op",
            "write_order.assign_sub_variable_op")
_local = threading.local()


@dataclasses.dataclass
class _Write:
    """One large write of a chain: its op, what it wrote, and the ops newly made for it."""

    op: Any
    value: Any
    elements: int
    mark: int  # Creation index of the write (of any variable) before this one.
    # The ops made after `mark` that compute `value`, and of those the ones with no such
    # input (which take the wait); None: more than one update's ops.
    window: set[Any] | None
    entries: list[Any] | None


class _Chain:
    """One replica step trace's large writes on one thread, ordered when the trace ends.

    Smallest update first when the updates are independent (see `_by_size`), else in the
    order the writes were made.
    """

    def __init__(self, graph: tf.Graph) -> None:
        self.graph = graph
        self.writes: list[_Write] = []
        self.mark = -1  # Creation index of the previous write (of any variable).

    def after_write(self, op: Any, value: Any) -> None:
        """Records the write `op` of `value` with the ops newly made for it (its update: no
        op made with or after the write can be an input of `value`)."""
        if _is_large(value):
            window, entries = _window(value, self.mark)
            self.writes.append(_Write(op, value, tf.TensorShape(value.shape).num_elements(),
                                      self.mark, window, entries))
        self.mark = _tf_private.op_creation_index(op)

    def finish(self) -> None:
        """Adds the waits: each update's entry ops start after the previous update's last
        large write (the first update waits for nothing)."""
        units = _by_size(self.writes) or [[write] for write in self.writes]
        previous = None
        for unit in units:
            if previous is not None:
                entries = {op for write in unit for op in write.entries or ()}
                for op in sorted(entries, key=_tf_private.op_creation_index):
                    _tf_private.add_control_input(op, previous)
            previous = unit[-1].op


def _window(value: Any, mark: int) -> tuple[set[Any] | None, list[Any] | None]:
    """(ops made after creation index `mark` that `value` needs, those without such an
    input), or (None, None) when there are more than `MAX_CHAINED_OPS`."""
    index = _tf_private.op_creation_index
    stack, window, entries = [value.op], set(), []
    while stack:
        op = stack.pop()
        if index(op) <= mark or op in window:
            continue
        window.add(op)
        if len(window) > MAX_CHAINED_OPS:
            return None, None
        # A function input (a newly captured variable handle) takes no control input: the
        # op reading it does.
        newer = [t.op for t in op.inputs if index(t.op) > mark and t.op.type != "Placeholder"]
        if not newer:
            entries.append(op)
        stack.extend(newer)
    return window, entries


def _by_size(writes: list[_Write]) -> list[list[_Write]] | None:
    """The updates, smallest first, when reordering them is safe; else None.

    An update (a unit) is a large write with ops of its own, followed by the large writes
    of values made with it, before it was written (an optimizer's slots: BERT writes param,
    m, v). Why smallest first: every gradient is alive until its update consumes it, so the
    largest update's temporaries (BERT's word embeddings: 94 MB, several copies) then meet
    the fewest other gradients. On BERT-base's first step this took the peak from 4.28-4.37
    to 3.91 GB (`python -m bench.bert_startup shim 1`).

    Safe means the updates are independent, so that waits between them in any order cannot
    form a cycle and leave values unchanged: every op an update needs from outside its own
    ops was made before the first update (gradients, the learning rate; captured handles),
    no two updates touch one resource (automatic control dependencies order those by
    creation), and an update's ops have no side effect but reading its variables.
    """
    if len(writes) < 2:
        return None
    # Copies: windows are redrawn below, and a refusal must leave the order-made plan intact.
    writes = [dataclasses.replace(write) for write in writes]
    # The first update's ops reach back to the model's first op (no write came before it):
    # its start is found below, once the other updates say what they take from before.
    units: list[list[_Write]] = [writes[:1]]
    for write in writes[1:]:
        if write.entries:
            units.append([write])
        elif write.window is None or (len(units) > 1 and not _join(units[-1], write)):
            return None
        else:
            units[-1].append(write)
    if len(units) < 2:
        return None
    index = _tf_private.op_creation_index
    outside = [op for unit in units[1:] for op in _inputs_from_outside(unit)]
    start = max((index(op) for op in outside), default=-1)
    first = units[0][0]
    first.mark = start
    first.window, first.entries = _window(first.value, start)
    if not first.entries or not all(_join(units[0], write) for write in units[0][1:]):
        return None
    resources: set[Any] = set()
    for unit in units:
        own = _resources(unit)
        if own is None or own & resources:
            return None
        resources |= own
    return [units[i] for i in sorted(range(len(units)),
                                     key=lambda i: (sum(w.elements for w in units[i]), i))]


def _join(unit: list[_Write], write: _Write) -> bool:
    """Makes `write` (of a value made before the previous write) part of `unit` if its value
    was made with the unit, after the unit's first write's mark."""
    write.window, write.entries = _window(write.value, unit[0].mark)
    return bool(write.window)


def _inputs_from_outside(unit: list[_Write]) -> list[Any]:
    """The ops (not captured function inputs) `unit`'s ops take a value or a wait from."""
    own = set().union(*(write.window for write in unit)) | {write.op for write in unit}
    return [source for op in own
            for source in [t.op for t in op.inputs] + list(op.control_inputs)
            if source not in own and source.type != "Placeholder"]


_READS = frozenset({"ReadVariableOp"})


def _stateful(op: Any) -> bool:
    try:
        return bool(op.op_def.is_stateful)
    except (AttributeError, ValueError):  # No registered definition: assume the worst.
        return True


def _resources(unit: list[_Write]) -> set[Any] | None:
    """The resource handles `unit` reads or writes; None if an op of it has another effect."""
    handles: set[Any] = set()
    for write in unit:
        for op in list(write.window) + [write.op]:
            if op is not write.op and op.type not in _READS and _stateful(op):
                return None
            handles.update(t.ref() for t in op.inputs if t.dtype == tf.resource)
    return handles


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
        _local.chain.finish()
    finally:
        _local.chain = previous


def patched_write(original: Callable[..., Any]) -> Callable[..., Any]:
    """Builds a `gen_resource_variable_ops` write wrapper for the `write_order.*` patches."""

    def write(resource, value, *args, **kwargs):
        chain = getattr(_local, "chain", None)
        if (chain is None or tf.executing_eagerly()
                or tf.compat.v1.get_default_graph() is not chain.graph):
            return original(resource, value, *args, **kwargs)
        op = original(resource, value, *args, **kwargs)
        chain.after_write(op, value)
        return op

    return write
