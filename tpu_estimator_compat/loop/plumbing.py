"""What the compiled train and inference loops share: fast calls, fixed batches, gathering.

`Dispatch` calls a compiled `fn(iterator, n)` through its flat signature, so a loop costs
about one C++ function call; `FixedBatches` keeps fixed-size batches' static shapes through
an end-of-input check on several replicas; `gather_replicas` and `stack_steps` bring a loop's
per-replica, per-step values to the host. It knows nothing of model_fns, hooks or files.
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import Any, Callable, Sequence

import tensorflow as tf

from tpu_estimator_compat import shapes as shapes_lib
from tpu_estimator_compat._tf import private as _tf_private
from tpu_estimator_compat._tf import random_streams
from tpu_estimator_compat.cluster import workers as cluster_lib


class Dispatch:
    """Calls a compiled `fn(iterator, n)` with as little Python per call as possible.

    A `tf.function` call looks its trace up from the arguments' types and flattens them
    (for a distributed iterator: hashing and walking its whole type spec), ~0.3 ms per call,
    about an MLP step. One train/evaluate/predict call keeps one iterator, so the concrete
    function and its flat inputs are found once per (iterator, n) and the flat signature is
    called directly. The iterator's lifetime stays its owner's: it is held weakly, and its
    flat inputs (which hold its resources) are dropped as soon as it is garbage collected,
    so its buffers and threads are released when the caller's train/evaluate/predict ends,
    not at the next call. With `counted=False`, `fn(iterator)` takes no step count (`n` is
    then ignored).
    """

    def __init__(self, fn: Any, counted: bool = True) -> None:
        self._fn = fn
        self._counted = counted
        self._iterator: Callable[[], Any] = lambda: None
        self._concrete: Any = None
        self._flat: dict[int, list[tf.Tensor]] = {}

    @property
    def function(self) -> Any:
        return self._fn

    def traced_for(self, iterator: Any) -> bool:
        """Whether `iterator`'s concrete function exists (a call would not trace)."""
        return self._concrete is not None and self._iterator() is iterator

    def concrete(self, iterator: Any) -> Any:
        """The concrete function for `iterator` (tracing it on first use)."""
        if self._concrete is None or self._iterator() is not iterator:
            args = (iterator, COUNT_SPEC) if self._counted else (iterator,)
            # Seeded random ops keep their streams in variables a call can set back.
            with random_streams.random_op_twins():
                self._concrete = self._fn.get_concrete_function(*args)
            self._iterator = weakref.ref(iterator)
            self._flat = {}
            weakref.finalize(iterator, self._flat.clear)
        return self._concrete

    def __call__(self, iterator: Any, n: int = 1) -> Any:
        concrete, flat = self._lookup(iterator, n)
        return _tf_private.call_flat(concrete, flat)

    def prepared(self, iterator: Any, n: int = 1) -> Callable[[], Any]:
        """`lambda: self(iterator, n)`, with the function and its inputs found now: the
        call itself then needs none of the scopes a lookup (or trace) is keyed by."""
        concrete, flat = self._lookup(iterator, n)
        return lambda: _tf_private.call_flat(concrete, flat)

    def _lookup(self, iterator: Any, n: int) -> tuple[Any, list[tf.Tensor]]:
        concrete = self.concrete(iterator)
        # A seeded call restarts the random streams this function's kernels keep, if any.
        random_streams.note_function(concrete)
        n = n if self._counted else 1
        flat = self._flat.get(n)
        if flat is None:
            args = (iterator, tf.constant(n, tf.int32)) if self._counted else (iterator,)
            flat = self._flat[n] = _tf_private.flat_inputs(concrete, args)
        return concrete, flat


COUNT_SPEC = tf.TensorSpec([], tf.int32)


@dataclasses.dataclass(frozen=True)
class FixedBatches:
    """Fixed-size batches taken through an end-of-input check keep their static shapes.

    On several replicas `get_next_as_optional` hands each replica that found no batch an
    empty dummy, so every value it returns has an unknown batch size, and model_fn would see
    `(None, ...)` where legacy's TPU infeed (fixed shapes, per core) gave `(batch, ...)`;
    code such as `bs, w = x.get_shape().as_list(); tf.reshape(x, [bs, w, -1])` then fails.
    When input_fn's batches have a fixed size (`drop_remainder=True`), a step runs only if
    every replica got a batch (legacy's infeed never ran a step some cores had no input
    for; running it would average the loss over an empty batch), and inside it each input
    tensor gets its static shape back. Input that is known to be endless never needs this.

    `spec` is one replica's element spec; `witness` indexes the flattened tensor whose
    emptiness tells a dummy from a batch (a dummy of a fully defined shape is empty).
    """

    strategy: tf.distribute.Strategy
    spec: Any
    witness: int

    @classmethod
    def of(cls, strategy: tf.distribute.Strategy, spec: Any) -> "FixedBatches | None":
        """The rule for input of this element spec, or None (one replica; no fixed size)."""
        if spec is None or strategy.num_replicas_in_sync == 1:
            return None
        for index, leaf in enumerate(tf.nest.flatten(spec)):
            if (isinstance(leaf, tf.TensorSpec) and leaf.shape.rank
                    and leaf.shape.is_fully_defined() and leaf.shape.num_elements()):
                return cls(strategy, spec, index)
        return None

    def guard(self, element: Any, run: Callable[[], tuple],
              stop: Callable[[], tuple]) -> Callable[[], tuple]:
        """`run` if every replica (of every worker) got a batch of `element`, else `stop`."""

        def guarded() -> tuple:
            witness = tf.nest.flatten(element)[self.witness]
            fed = cluster_lib.count_fed_replicas(self.strategy, witness)
            return tf.cond(tf.equal(fed, self.strategy.num_replicas_in_sync), run, stop)

        return guarded

    def with_static_shapes(self, replica_fn: Callable[..., Any],
                           specs: Sequence[Any]) -> Callable[..., Any]:
        """`replica_fn` whose positional arguments get the static shapes of `specs`."""

        def restored(*args: Any) -> Any:
            return replica_fn(*[_ensure_shapes(arg, spec) for arg, spec in zip(args, specs)])

        return restored


def _ensure_shapes(value: Any, spec: Any) -> Any:
    """`value` (one replica's input nest) with the static shapes its `spec` declares.

    A static annotation (`set_shape` on an identity), not `tf.ensure_shape`: the step only
    runs when every replica got a real batch, but TensorFlow evaluated an `EnsureShape` in
    the branch that was not taken (on a replica's empty dummy) and failed the call.
    """
    if value is None or spec is None:
        return value

    def annotated(tensor: Any, leaf: Any) -> Any:
        if not isinstance(leaf, tf.TensorSpec) or not isinstance(tensor, tf.Tensor):
            return tensor
        tensor = tf.identity(tensor)
        tensor.set_shape(leaf.shape)
        return tensor

    return tf.nest.map_structure(annotated, value, spec)


def gather_replicas(strategy: tf.distribute.Strategy, value: Any) -> tf.Tensor:
    """Concatenates a per-replica value over all replicas on axis 0, in replica order.

    On one machine the local copies are copied to the host (any dtype, no collective); on
    several workers they are all-gathered, numeric dtypes only (see `cluster.gather`).
    """
    return cluster_lib.gather(strategy, value,
                              "tensor of eval_metrics, predictions or host_call")


def empty_batch(shape: tf.TensorShape, dtype: tf.DType) -> tf.Tensor:
    dims = [0] + [d or 0 for d in shapes_lib.static_dims(shape)[1:]] if shape.rank else [0]
    return tf.zeros(dims, dtype) if dtype != tf.string else tf.fill(dims, "")


def stack_steps(ta: tf.TensorArray, steps: tf.Tensor, shape: tf.TensorShape) -> tf.Tensor:
    return tf.cond(steps > 0, ta.stack,
                   lambda: empty_batch(tf.TensorShape([None]).concatenate(shape), ta.dtype))
