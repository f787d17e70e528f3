"""Global-step reads inside a train step see the step's starting value, as in a TF1 graph.

Synopsis::

    install(global_step)                    # once per variable; idempotent
    with step_start_reads(global_step):     # around model_fn, inside the replica step
        spec = model_fn(...)                # tf.reshape(get_global_step(), [1]): the start value

In the graph legacy TPUEstimator built, nothing ordered a read of the global step in model_fn
against the optimizer's `assign_add`: the read has no inputs and can run as soon as the step
starts, the increment runs after every gradient update. So host_call tensors such as
`tf.reshape(tf.compat.v1.train.get_global_step(), [1])` carried the step's starting value,
the value the session hooks call the "stale" global step (the resnet golden: host_call
summaries at steps 0..29), unless the increment won the race (recorded for a one-layer model:
about one step in four). Inside `tf.function`, automatic control dependencies order every
read after every earlier write of the same variable in program order, so the same read
written after `minimize(global_step=...)` would always see the incremented value.

`step_start_reads` gives the TF1 outcome without the race: it reads the global step once when
the step starts (ordered before the increment, being first) and makes every later read in that
replica trace return that value, whichever order model_fn wrote them in. The increment itself
is untouched. A read the model_fn explicitly orders after other ops with
`tf.control_dependencies` (`with tf.control_dependencies([train_op]): ema.apply(...)` with
`ExponentialMovingAverage(num_updates=global_step)`) is a real, program-ordered read, because
in TF1 it waited for those ops too and so saw the incremented value. (On a TPU, legacy's
outfeed waited for the train op, but the read feeding it had no edge to the increment either;
the order XLA chose cannot be recorded without a TPU, so both placements behave alike here.)

Reads are redirected per variable object (its `value`/`read_value`, and those of its
per-replica components, are the single path every read takes: conversion to a tensor,
operators, `read_value()`), and only in the thread and graph of an active
`step_start_reads`. Host code, checkpoints, eval and predict read the variable as usual.

The redirect is `_tf_patches`' per-object patches `global_step_reads.value`/`.read_value`;
this module builds the replacement reads. Outside TRAIN (`frozen`, around an EVAL or PREDICT
model_fn) the global step's writes (`global_step_reads.assign*`) do nothing in the trace:
legacy never ran there the train_op that incremented it, and a traced step runs every write. It knows nothing of models, specs, loops or
strategies beyond the variable it is given, nor how a patch is installed.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

import tensorflow as tf

from tpu_estimator_compat._tf import patches as _tf_patches
from tpu_estimator_compat._tf import private as _tf_private

_ACTIVE = threading.local()  # .frames: {id(variable): _Frame} of this thread


class _Frame:
    """One active step: the starting value and the context it was read in."""

    def __init__(self, value: tf.Tensor, graph: Any, control_inputs: frozenset[Any]) -> None:
        self.value = value
        self.graph = graph
        self.control_inputs = control_inputs


def install(variable: tf.Variable) -> None:
    """Lets `step_start_reads(variable)` redirect reads of `variable`. Idempotent.

    Installed once per variable rather than around each step: replica threads of a
    MirroredStrategy trace concurrently, and a patch restored by one thread would vanish
    under another (which is why the redirect itself is thread-local).
    """
    targets = [variable, *(getattr(variable, "values", None) or ())]
    for target in targets:
        for patch in ("global_step_reads.value", "global_step_reads.read_value"):
            _tf_patches.install_on(patch, target, id(variable))


@contextlib.contextmanager
def step_start_reads(variable: tf.Variable, scope: str = "global_step_at_step_start"
                     ) -> Iterator[tf.Tensor]:
    """Inside: reads of `variable` in this thread's current graph return its value now.

    Yields the starting value. Call inside the replica step's graph, before model_fn.
    """
    install(variable)
    frames = _frames()
    key = id(variable)
    previous = frames.get(key)
    frames.pop(key, None)  # The starting value itself is a real read.
    graph = tf.compat.v1.get_default_graph()
    # A scope of its own: a root-level `Read` would rename a model_fn scope of that name.
    with tf.name_scope(scope):
        value = variable.read_value()
    frames[key] = _Frame(value, graph, _tf_private.active_control_inputs(graph))
    try:
        yield value
    finally:
        if previous is None:
            frames.pop(key, None)
        else:
            frames[key] = previous


@contextlib.contextmanager
def frozen(variable: tf.Variable) -> Iterator[None]:
    """Inside (an EVAL or PREDICT model_fn): writes of `variable` in this thread's traced
    graphs do nothing; `assign*` returns its value (or a no-op with `read_value=False`)."""
    targets = [variable, *(getattr(variable, "values", None) or ())]
    for target in targets:
        for patch in ("global_step_reads.assign", "global_step_reads.assign_add",
                      "global_step_reads.assign_sub"):
            _tf_patches.install_on(patch, target, id(variable))
    keys = _frozen()
    added = id(variable) not in keys
    keys.add(id(variable))
    try:
        yield
    finally:
        if added:
            keys.discard(id(variable))


def _frozen() -> set[int]:
    keys = getattr(_ACTIVE, "frozen", None)
    if keys is None:
        keys = _ACTIVE.frozen = set()
    return keys


def frozen_write(original: Callable[..., Any], key: int) -> Callable[..., Any]:
    """`original` (a bound `assign`/`assign_add`/`assign_sub`), a no-op while `frozen`."""

    def write(value: Any, use_locking: Any = None, name: Any = None,
              read_value: bool = True) -> Any:
        if key not in _frozen() or tf.executing_eagerly():
            return original(value, use_locking=use_locking, name=name, read_value=read_value)
        del value, use_locking
        variable = getattr(original, "__self__", None)
        if not read_value or variable is None:
            return tf.no_op(name=name or "global_step_not_written")
        return variable.read_value()

    return write


def _frames() -> dict[int, _Frame]:
    frames = getattr(_ACTIVE, "frames", None)
    if frames is None:
        frames = _ACTIVE.frames = {}
    return frames


def redirected_read(original: Callable[..., Any], key: int) -> Callable[..., Any]:
    """`original` (a bound `value`/`read_value`), answering from the active frame of `key`."""

    def read(*args: Any, **kwargs: Any) -> Any:
        frame = _frames().get(key)
        if frame is None or not _applies(frame):
            return original(*args, **kwargs)
        return frame.value

    return read


def _applies(frame: _Frame) -> bool:
    """True for an unordered read in the step's graph (or a function nested in it)."""
    if tf.executing_eagerly():
        return False  # Under tf.init_scope (Keras builds layers there): a real value.
    graph = tf.compat.v1.get_default_graph()
    baseline = frame.control_inputs if graph is frame.graph else frozenset()
    if _tf_private.active_control_inputs(graph) - baseline:
        return False  # Explicitly ordered after other ops: TF1 ran it after them.
    while graph is not None:
        if graph is frame.graph:
            return True
        graph = getattr(graph, "outer_graph", None)
    return False
