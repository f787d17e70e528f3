"""The loop driver: `iterations_per_loop` steps per host round trip, and the outer loop.

Synopsis::

    run_n = make_multi_step_train_fn(strategy, train_step)
    driver = TrainDriver(run_steps=lambda n: run_n(iterator, n),
                         read_step=lambda: int(global_step.numpy()), ...)
    driver.run(target_step=100, iterations_per_loop=10)

Two layers, as in Orbit. `make_multi_step_train_fn` compiles ONE `tf.function` holding a
`tf.while_loop` around `strategy.run`; the step count is a tensor, so chunks of different
lengths never retrace, no Python runs per step, and the host calls the traced function
through its flat signature (`Dispatch`), so a loop costs about one C++ function call.
`TrainDriver` is the outer loop:
`while step < target: n = min(target - step, per_loop); run n; report; maybe checkpoint`.
The driver gets a step-runner, a global-step reader, a checkpoint policy and listeners; it
never sees a model, a dataset or a strategy. The evaluate/predict loop, built on the same
pieces (`Dispatch`, `FixedBatches`), is `inference_loop.py`'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
import weakref
from typing import Any, Callable, Iterator, Protocol, Sequence

import numpy as np
import tensorflow as tf

from tpu_estimator_compat._tf import private as _tf_private
from tpu_estimator_compat.cluster import workers as cluster_lib
from tpu_estimator_compat.v1_state import eager_scope
from tpu_estimator_compat.inputs import distribute as inputs_lib
from tpu_estimator_compat import log as logging
from tpu_estimator_compat.summary import progress
from tpu_estimator_compat import shapes as shapes_lib


@dataclasses.dataclass(frozen=True)
class LoopResult:
    """What one compiled multi-step call reports back to the host."""

    steps_run: int
    losses: np.ndarray  # One global loss per step run, float32.
    host_calls: list[list[np.ndarray]] = dataclasses.field(default_factory=list)
    # host_calls[k]: the flattened host_call tensors of the k-th step that outfed them
    # (every `every_n` steps of the loop), concatenated over replicas.
    global_step: int | None = None  # After the loop's last step, when the loop returns it.
    hook_tensors: list[np.ndarray] = dataclasses.field(default_factory=list)
    # hook_tensors[j][k]: the j-th tensor SessionRunHooks fetched, at the loop's k-th step
    # (replica 0's value).
    step_starts: np.ndarray | None = None
    # step_starts[k]: the global step the loop's k-th step started from (the value its
    # model_fn read), when the loop reports it.
    summaries: np.ndarray | None = None
    # summaries[k]: the serialized `Summary` of model_fn's v1 summary ops at the loop's k-th
    # step (replica 0's), when the loop returns them (`emit_summaries`, legacy's CPU path).

    @property
    def last_loss(self) -> float | None:
        return float(self.losses[-1]) if self.steps_run else None

    def starts(self, end: int) -> np.ndarray:
        """The global step each step of this loop started from; the loop ended at `end`."""
        return step_starts(self.step_starts, end, self.steps_run)


def step_starts(reported: np.ndarray | None, end: int, count: int) -> np.ndarray:
    """The global step each of a loop's `count` steps started from; it ended at `end`.

    `reported` (one value per step, as the train loop returns them) when given; otherwise
    each step is assumed to have advanced the global step by one. A model_fn that does not
    (gradient accumulation increments it on every k-th step only) is why the loop reports
    them.
    """
    if reported is not None and len(reported) == count:
        return reported
    return np.arange(end - count, end, dtype=np.int64)


def make_multi_step_train_fn(
        strategy: tf.distribute.Strategy,
        train_step: Callable[[Any, Any], dict[str, Any]], *,
        host_call_specs: list[tf.TensorSpec] | None = None,
        host_call_every_n: int = 1,
        global_step: tf.Variable | None = None,
        endless: bool = False,
        hook_tensor_dtypes: Sequence[tf.DType] = (),
        input_spec: Any = None,
        emit_summaries: bool = False) -> "TrainLoop":
    """Compiles `train_step` into one function running up to `n` steps per call.

    The function stops early when the iterator is exhausted (legacy Estimator ended
    training cleanly at the end of input) and returns (steps_run, per-step losses, host_call
    tensors, global step, hook tensors, step starts), each loss the mean over replicas of
    the replica losses, i.e. the global-batch loss; when `train_step` returns the global step
    it started from (`step`), every step's value comes back too. With `host_call_specs`, the step's host_call tensors are gathered from
    every replica on the loop steps i with i % host_call_every_n == 0, as legacy's outfeed
    did. With `global_step`, its value after the last step comes back with the losses, so
    the host needs no separate read per loop. With `hook_tensor_dtypes`, the step's
    `hook_tensors` (model_fn tensors SessionRunHooks fetch) come back for every step, replica
    0's value: what legacy's one-device CPU path fetched. With `emit_summaries`, the step's
    `summaries` (model_fn's v1 summary ops merged, `replica_step.make_train_step`) come back
    for every step, replica 0's value, for the host to write at legacy's summary steps.

    With `endless` (the input is known to be infinite, as `repeat()`ed training input is)
    each step takes the next element directly. Otherwise each step first asks whether
    there is one (`get_next_as_optional`) and the step runs inside a `tf.cond` on the
    answer: on several replicas that waits for every replica's input before any replica
    starts, and cost the 8-replica MLP ~20% of its step. There, when `input_spec` (one
    replica's element spec, `inputs.DistributedInput.replica_spec`) says batches have a
    fixed size, model_fn still gets their static shapes and a step runs only when every
    replica has a batch (see `FixedBatches`).
    """

    # The model_fn is graph-building Python written for TF1: it must run as written, never
    # rewritten by AutoGraph (which would turn its Python control flow into tf.cond/while).
    replica_fn = _same_structure_on_every_replica(
        tf.autograph.experimental.do_not_convert(train_step))
    specs = list(host_call_specs or [])
    fetch_dtypes = list(hook_tensor_dtypes) + ([tf.string] if emit_summaries else [])
    fixed = None if endless else FixedBatches.of(strategy, input_spec)
    if fixed is not None:
        replica_fn = fixed.with_static_shapes(replica_fn,
                                              inputs_lib.split_element(fixed.spec))

    def run_one(i: tf.Tensor, outfed: tf.Tensor, losses: tf.TensorArray,
                starts: tf.TensorArray, calls: list[tf.TensorArray],
                fetched: list[tf.TensorArray], element: Any) -> tuple:
        features, labels = inputs_lib.split_element(element)
        out = strategy.run(replica_fn, args=(features, labels))
        loss = cluster_lib.reduce_to_host(strategy, tf.distribute.ReduceOp.MEAN, out["loss"])
        start = (tf.cast(strategy.experimental_local_results(out["step"])[0], tf.int64)
                 if "step" in out else tf.constant(-1, tf.int64))
        if specs:
            leaves = [gather_replicas(strategy, leaf)
                      for leaf in tf.nest.flatten(out["host_call"])]
            calls, outfed = tf.cond(
                tf.equal(i % host_call_every_n, 0),  # `==` is identity under TF1 equality.
                lambda: ([ta.write(outfed, leaf) for ta, leaf in zip(calls, leaves)],
                         outfed + 1),
                lambda: (calls, outfed))
        if fetch_dtypes:
            values = list(out.get("hook_tensors", [])) + (
                [out["summaries"]] if emit_summaries else [])
            fetched = [ta.write(i, strategy.experimental_local_results(value)[0])
                       for ta, value in zip(fetched, values)]
        return (tf.constant(True), i + 1, outfed, losses.write(i, loss), starts.write(i, start),
                calls, fetched)

    # Written as an explicit while_loop, not AutoGraph: converting this function from source
    # cost ~0.3 s of CPU in every fresh process (most of the MLP's time to first step).
    @tf.function(autograph=False)
    def run_steps(iterator: Any, n: tf.Tensor) -> Any:
        losses = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=[])
        starts = tf.TensorArray(tf.int64, size=0, dynamic_size=True, element_shape=[])
        calls = [tf.TensorArray(s.dtype, size=0, dynamic_size=True, infer_shape=False)
                 for s in specs]
        fetched = [tf.TensorArray(d, size=0, dynamic_size=True, infer_shape=False)
                   for d in fetch_dtypes]

        def body(more: tf.Tensor, i: tf.Tensor, outfed: tf.Tensor, losses: tf.TensorArray,
                 starts: tf.TensorArray, calls: list[tf.TensorArray],
                 fetched: list[tf.TensorArray]) -> tuple:
            if endless:
                return run_one(i, outfed, losses, starts, calls, fetched, iterator.get_next())
            optional = iterator.get_next_as_optional()
            stop = lambda: (tf.constant(False), i, outfed, losses, starts, calls,  # noqa: E731
                            fetched)

            def has_value() -> tuple:
                element = optional.get_value()
                run = lambda: run_one(i, outfed, losses, starts, calls, fetched,  # noqa: E731
                                      element)
                if fixed is not None:
                    run = fixed.guard(element, run, stop)
                return run()

            return tf.cond(optional.has_value(), has_value, stop)

        _, steps, outfed, losses, starts, calls, fetched = tf.while_loop(
            lambda more, i, *_: tf.logical_and(more, i < n), body,
            (tf.constant(True), tf.constant(0, tf.int32), tf.constant(0, tf.int32), losses,
             starts, calls, fetched))
        step = (global_step.read_value() if global_step is not None
                else tf.constant(-1, tf.int64))
        return (steps, stack_steps(losses, steps, tf.TensorShape([])),
                [stack_steps(ta, outfed, s.shape) for ta, s in zip(calls, specs)],
                tf.cast(step, tf.int64),
                [stack_steps(ta, steps, tf.TensorShape(None)) for ta in fetched],
                stack_steps(starts, steps, tf.TensorShape([])))

    return TrainLoop(run_steps, emit_summaries)


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


class ReplicaStructureError(ValueError):
    """The replicas' model_fn calls returned different structures (see the message)."""


def _same_structure_on_every_replica(replica_fn: Callable[..., Any]) -> Callable[..., Any]:
    """`replica_fn`, raising `ReplicaStructureError` when replicas return different nests.

    Legacy TPU traced model_fn once for every core; MirroredStrategy traces it once per
    replica, in threads that take turns at every all-reduce. Python state that model_fn keeps
    on a shared object between its own statements (google/compare_gan: `self._tpu_summary =
    TpuSummaries(...)` at the top of model_fn, entries added after each optimizer step) is
    then overwritten by the next replica, and one replica's host_call gets every replica's
    entries. TensorFlow's own check fails with a bare `AssertionError: len(v) == 9, len(v0)
    == 5`; this says why.
    """
    first: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Traced graph -> nest.

    def checked(*args: Any) -> Any:
        out = replica_fn(*args)
        seen = first.setdefault(tf.compat.v1.get_default_graph(), out)
        if seen is not out:
            try:
                tf.nest.assert_same_structure(seen, out, check_types=False)
            except (ValueError, TypeError):
                shape_of = lambda nest: tf.nest.map_structure(lambda _: ".", nest)  # noqa: E731
                raise ReplicaStructureError(
                    "model_fn returned a different structure on two replicas (host_call "
                    f"tensors: {len(tf.nest.flatten(seen.get('host_call', ())))} and "
                    f"{len(tf.nest.flatten(out.get('host_call', ())))}; "
                    f"{shape_of(seen)} and {shape_of(out)}). "
                    "tpu_estimator_compat calls model_fn once per replica, and "
                    "MirroredStrategy switches between the replicas' calls at every "
                    "all-reduce (an optimizer step with use_tpu=True), where legacy TPU "
                    "called model_fn once for all cores. Python state that model_fn keeps on "
                    "a shared object across an optimizer step (`self.summaries = []` at its "
                    "top, appended to after `minimize`; `self.loss` set before and read "
                    "after) is then overwritten by the next replica's call. Keep such state "
                    "in model_fn's local variables (or thread-local storage), or run on one "
                    "replica.") from None
        return out

    return checked


class NanLossError(tf.compat.v1.train.NanLossDuringTrainingError):
    """Legacy's NanLossDuringTrainingError, saying at which global step the loss went bad."""

    def __init__(self, step: int, value: float) -> None:
        super().__init__()
        self.step = step
        self.value = value

    def __str__(self) -> str:
        return (f"NaN loss during training: the loss of global step {self.step} is "
                f"{self.value}. Lower the learning rate or check the inputs; the last "
                "checkpoint before it is in model_dir. (RunConfig(stop_on_nan_loss=False) "
                "trains on.)")


def first_nan_loss(losses: np.ndarray, starts: np.ndarray) -> NanLossError | None:
    """The error for a loop's first NaN/Inf loss; `starts[k]`: the global step its k-th step
    started from (`step_starts`)."""
    bad = np.flatnonzero(~np.isfinite(losses))
    if not bad.size:
        return None
    first = int(bad[0])
    return NanLossError(int(starts[first]) + 1, float(losses[first]))


def _raise_on_nan_loss(step: int, result: LoopResult) -> None:
    """Raises before anything is saved when a step of the loop that ended at `step` diverged."""
    error = first_nan_loss(result.losses, result.starts(step))
    if error is not None:
        raise error


class TrainLoop:
    """The compiled train function, host side: trace once, then run chunks of n steps."""

    def __init__(self, run_steps: Any, emit_summaries: bool = False) -> None:
        self._run_steps = Dispatch(run_steps)
        self._emit_summaries = emit_summaries

    def trace(self, iterator: Any) -> None:
        """Traces the step (creating its variables) without running it."""
        self._run_steps.concrete(iterator)

    def prepared(self, iterator: Any, n: int) -> Callable[[], Any]:
        """A call of `n` steps, its function found now; it returns the raw outputs."""
        return self._run_steps.prepared(iterator, n)

    @property
    def function(self) -> Any:
        """The compiled `fn(iterator, n)`, for callers that dispatch it themselves (a
        ClusterCoordinator schedules it on parameter-server workers)."""
        return self._run_steps.function

    def __call__(self, iterator: Any, n: int) -> LoopResult:
        steps, losses, calls, step, fetched, starts = self._run_steps(iterator, n)
        arrays = [c.numpy() for c in calls]
        per_step = [[a[k] for a in arrays] for k in range(len(arrays[0]))] if arrays else []
        step = int(step)
        starts = starts.numpy()
        fetched = [f.numpy() for f in fetched]
        summaries = fetched.pop() if self._emit_summaries else None
        return LoopResult(int(steps), losses.numpy(), per_step, step if step >= 0 else None,
                          fetched, starts if len(starts) and starts[0] >= 0 else None,
                          summaries)


@contextlib.contextmanager
def compiling(train_loop: TrainLoop, iterator: Any) -> Iterator[None]:
    """Inside: TensorFlow prepares `train_loop`'s graph for running, on a thread of its own.

    A compiled function's first call optimises its graph (Grappler) before the first step:
    on BERT-base ~5 s on one replica and ~30 s on 8 (bench/RESULTS.md). A fresh model_dir's
    step-0 checkpoint, which legacy wrote before the first step too, takes seconds of its
    own (BERT-base: 1.3 GB). Neither needs the other, so they overlap: a call of zero steps
    runs on this thread while the body (the checkpoint) runs, reading no input and writing
    no variable, and leaves the optimised graph for the first real call. The step-0 values
    saved are the ones training starts from, as before. The thread's error, if any, is
    raised once the body has finished; an error of the body wins.

    The concrete function is looked up here, in the caller's context (where the loop was
    traced: the lookup is keyed by it), and the thread only executes it, so it enters none
    of `runtime.RuntimeScope`'s parts, some of which are process-wide, not per thread (the
    strategy's v1 loss scaling, `optimizer_apply`'s switch).

    Args:
        train_loop: The traced loop, not called yet.
        iterator: The iterator it is called with.
    """
    run = train_loop.prepared(iterator, 0)
    errors: list[BaseException] = []

    def compile_graph() -> None:
        try:
            # Eagerly, as train() runs: a thread starts in the process-wide mode, which a
            # TF1 script's disable_eager_execution() made graph mode.
            with eager_scope.running_eagerly("TPUEstimator.train"):
                run()
        except BaseException as e:  # pylint: disable=broad-except  # Raised below.
            errors.append(e)

    thread = threading.Thread(target=compile_graph, name="train_compile", daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()
    if errors:
        raise errors[0]


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
        n = n if self._counted else 1
        flat = self._flat.get(n)
        if flat is None:
            args = (iterator, tf.constant(n, tf.int32)) if self._counted else (iterator,)
            flat = self._flat[n] = _tf_private.flat_inputs(concrete, args)
        return concrete, flat


COUNT_SPEC = tf.TensorSpec([], tf.int32)


class CheckpointPolicy(Protocol):
    """What the driver needs from checkpointing (see `checkpoints.py`)."""

    def should_save(self, step: int) -> bool: ...

    def save(self, step: int) -> str: ...

    def steps_until_due(self, step: int) -> int | None:
        """Steps the next loop may run before a save falls due inside it (None: any)."""


class LoopListener(Protocol):
    """Called by the driver at loop granularity; hooks and progress reporting plug in here.

    A listener may also define `before_loop(step)`, called before each loop runs.
    """

    def after_loop(self, step: int, result: LoopResult, seconds: float) -> bool | None:
        """Returns True to request a stop."""


@dataclasses.dataclass
class TrainDriver:
    """The outer training loop. Knows steps, time and files; nothing about models."""

    run_steps: Callable[[int], LoopResult]
    read_step: Callable[[], int]
    checkpoint: CheckpointPolicy
    listeners: Sequence[LoopListener] = ()
    clock: Callable[[], float] = time.monotonic
    stop_on_nan_loss: bool = False
    # Legacy's progress lines (`progress.TrainLog`); None: none.
    train_log: progress.TrainLog | None = None
    last_loss: np.float32 | None = None
    _target: int | None = None

    def run(self, *, target_step: int, iterations_per_loop: int) -> int:
        """Trains until the global step reaches `target_step` or input runs out.

        Returns the final global step.
        """
        step = self.read_step()
        self._target = target_step if target_step < 2**61 else None
        while step < target_step:
            n = min(target_step - step, iterations_per_loop)
            until_save = self.checkpoint.steps_until_due(step)
            if until_save is not None:
                n = max(1, min(n, until_save))
            for listener in self.listeners:
                before = getattr(listener, "before_loop", None)
                if before is not None:
                    before(step)
            start = self.clock()
            result = self.run_steps(n)
            seconds = max(self.clock() - start, 1e-9)
            step = result.global_step if result.global_step is not None else self.read_step()
            if result.steps_run:
                self.last_loss = np.float32(result.losses[result.steps_run - 1])
                # The library's own line per loop (legacy's progress lines follow legacy's
                # steps); bench/run_shim.py stamps loop ends with it.
                logging.debug("global_step = %d, loss = %s, global_step/sec = %.4g", step,
                              self.last_loss, result.steps_run / seconds)
            rest = progress.after_loop(
                self.train_log, end=step, target=self._target,
                losses=result.losses[:result.steps_run], starts=result.starts(step),
                end_time=time.time(), seconds=seconds)
            if self.stop_on_nan_loss:
                _raise_on_nan_loss(step, result)
            if self.checkpoint.should_save(step):
                self.checkpoint.save(step)
            rest()
            stop = [listener.after_loop(step, result, seconds) for listener in self.listeners]
            if result.steps_run < n:
                logging.info("input_fn is exhausted: training stopped at global step %d after "
                             "%d of %d steps of the last loop.", step, result.steps_run, n)
                break
            if any(stop):
                break
        return step


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
