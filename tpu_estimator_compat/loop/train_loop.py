"""The compiled train loop: up to `n` steps of `strategy.run` in one `tf.function` call.

Synopsis::

    train_loop = make_multi_step_train_fn(strategy, train_step)
    result = train_loop(iterator, 10)     # a LoopResult: steps run, losses, host_call, ...

`make_multi_step_train_fn` compiles ONE `tf.function` holding a `tf.while_loop` around
`strategy.run`, as Orbit does; the step count is a tensor, so chunks of different lengths
never retrace, no Python runs per step, and the host calls the traced function through its
flat signature (`plumbing.Dispatch`), so a loop costs about one C++ function call. The step
inside is `TracedTrainStep`, traced once for every loop built around it (model_fn runs once)
and inlined by TensorFlow when a loop runs. The outer loop that calls it is `driver.py`'s; the evaluate/predict loop, built on the same pieces
(`plumbing.py`), is `inference_loop.py`'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import weakref
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import tensorflow as tf

from tpu_estimator_compat._tf import strategies as _tf_strategies
from tpu_estimator_compat.cluster import workers as cluster_lib
from tpu_estimator_compat.inputs import call as call_lib
from tpu_estimator_compat.loop.plumbing import Dispatch, FixedBatches, gather_replicas
from tpu_estimator_compat.loop.plumbing import stack_steps
from tpu_estimator_compat.v1_state import eager_scope

# Legacy `tpu_estimator._WRAP_INPUT_FN_INTO_WHILE_LOOP` (False there) chose whether an input_fn
# returning tensors was called inside the device loop. Here every step draws its batch from
# the dataset's iterator inside the compiled while_loop, whatever input_fn returned: always
# true, and setting the legacy flag changes nothing.
WRAP_INPUT_FN_INTO_WHILE_LOOP = True


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
        train_step: "Callable[[Any, Any], dict[str, Any]] | TracedTrainStep", *,
        host_call_specs: list[tf.TensorSpec] | None = None,
        host_call_every_n: int = 1,
        global_step: tf.Variable | None = None,
        endless: bool = False,
        hook_tensor_dtypes: Sequence[tf.DType] = (),
        input_spec: Any = None,
        emit_summaries: bool = False,
        legacy_loss_reporting: bool = False) -> "TrainLoop":
    """Compiles `train_step` into one function running up to `n` steps per call.

    The function stops early when the iterator is exhausted (legacy Estimator ended
    training cleanly at the end of input) and returns (steps_run, per-step losses, host_call
    tensors, global step, hook tensors, step starts), each loss the mean over replicas of
    the replica losses, i.e. the global-batch loss; when `train_step` returns the global step
    it started from (`step`), every step's value comes back too. With `host_call_specs`, the
    step's host_call tensors are gathered from every replica on the loop steps i with
    i % host_call_every_n == 0, as legacy's outfeed did. With `global_step`, its value after the last step comes back with the losses, so
    the host needs no separate read per loop. With `hook_tensor_dtypes`, the step's
    `hook_tensors` (model_fn tensors SessionRunHooks fetch) come back for every step, replica
    0's value: what legacy's one-device CPU path fetched. With `emit_summaries`, the step's
    `summaries` (model_fn's v1 summary ops merged, `replica_step.make_train_step`) come back
    for every step, replica 0's value, for the host to write at legacy's summary steps.
    With `legacy_loss_reporting` (legacy's Estimator path, off TPU) a step's loss is the
    replicas' SUM unless a v1 optimizer scaled the loss by 1/replicas (then their mean), as
    legacy's distributed Estimator reported it (a SUM-reduced loss, a Keras optimizer).

    `train_step` is a replica step, or a `TracedTrainStep` around one (then `endless`,
    `input_spec` and `legacy_loss_reporting` are the ones it was made with): loops built
    for different outputs around one `TracedTrainStep` share its trace, so model_fn runs
    once however many loops are built (see `TracedTrainStep`).

    With `endless` (the input is known to be infinite, as `repeat()`ed training input is)
    each step takes the next element directly. Otherwise each step first asks whether
    there is one (`get_next_as_optional`) and the step runs inside a `tf.cond` on the
    answer: on several replicas that waits for every replica's input before any replica
    starts, and cost the 8-replica MLP ~20% of its step. There, when `input_spec` (one
    replica's element spec, `DistributedInput.replica_spec`) says batches have a
    fixed size, model_fn still gets their static shapes and a step runs only when every
    replica has a batch (see `FixedBatches`).
    """
    traced = (train_step if isinstance(train_step, TracedTrainStep) else TracedTrainStep(
        strategy, train_step, endless=endless, input_spec=input_spec,
        legacy_loss_reporting=legacy_loss_reporting))
    one_step = _OneStep(
        traced, list(host_call_specs or []), host_call_every_n,
        list(hook_tensor_dtypes) + ([tf.string] if emit_summaries else []), emit_summaries)
    return TrainLoop(_compiled_loop(one_step, global_step, traced.endless, traced.fixed),
                     emit_summaries)


class TracedTrainStep:
    """One train step over every replica, as the host reads it: a `tf.function` that the
    loop body calls, traced once whatever loops are built around it.

    What a loop returns (host_call tensors, model_fn's v1 summaries) is known only once
    model_fn has been traced, so `session/train_session.py` builds a second loop around a
    first trace that found them. Both call this one function: its trace is cached (the
    call's arguments are the same input element), so model_fn's Python runs once per
    `train()` as legacy built its graph once, and a model_fn that counts, logs or prints
    does so once (once per replica on several, as legacy's distributed Estimator called
    it). The step always returns what model_fn made (`host_call`, `summaries`, fetched
    `hook_tensors`); a loop that does not write one leaves it unused, and TensorFlow prunes
    it when it instantiates the loop, where it also inlines this call into the loop body.

    Calling it returns `{loss, step?, host_call?, hook_tensors?, summaries?}`: the
    global loss (see `make_multi_step_train_fn`'s `legacy_loss_reporting`), the global
    step the step started from, host_call's leaves gathered from every replica, and
    replica 0's hook tensors and serialized summaries.
    """

    def __init__(self, strategy: tf.distribute.Strategy,
                 train_step: Callable[[Any, Any], dict[str, Any]], *, endless: bool = False,
                 input_spec: Any = None, legacy_loss_reporting: bool = False) -> None:
        # The model_fn is graph-building Python written for TF1: it must run as written,
        # never rewritten by AutoGraph (which would turn its Python control flow into
        # tf.cond/while).
        replica_fn = _same_structure_on_every_replica(
            tf.autograph.experimental.do_not_convert(train_step))
        self.strategy = strategy
        self.endless = endless
        self.fixed = None if endless else FixedBatches.of(strategy, input_spec)
        if self.fixed is not None:
            replica_fn = self.fixed.with_static_shapes(replica_fn,
                                                       call_lib.split_element(self.fixed.spec))
        self._replica_fn = replica_fn
        self._legacy_loss_reporting = legacy_loss_reporting
        self._function = tf.function(self._outputs, autograph=False)

    def __call__(self, features: Any, labels: Any) -> dict[str, Any]:
        """The step's outputs, called from the loop's control flow."""
        return _tf_strategies.call_in_control_flow(self._function, features, labels)

    def _outputs(self, features: Any, labels: Any) -> dict[str, Any]:
        strategy = self.strategy
        out = strategy.run(self._replica_fn, args=(features, labels))
        reduce_op = tf.distribute.ReduceOp.MEAN
        # The graph model_fn was built in (this function's): a v1 optimizer marks it.
        if self._legacy_loss_reporting and not _tf_strategies.loss_scaled_by_optimizer(
                tf.compat.v1.get_default_graph()):
            reduce_op = tf.distribute.ReduceOp.SUM
        first = lambda value: strategy.experimental_local_results(value)[0]  # noqa: E731
        result: dict[str, Any] = {
            "loss": cluster_lib.reduce_to_host(strategy, reduce_op, out["loss"])}
        if "step" in out:
            result["step"] = tf.cast(first(out["step"]), tf.int64)
        if "host_call" in out:
            result["host_call"] = [gather_replicas(strategy, leaf)
                                   for leaf in tf.nest.flatten(out["host_call"])]
        if "hook_tensors" in out:
            result["hook_tensors"] = [first(value) for value in out["hook_tensors"]]
        if "summaries" in out:
            result["summaries"] = first(out["summaries"])
        return result


@dataclasses.dataclass(frozen=True, eq=False)
class _OneStep:
    """One step of the compiled loop: the traced step on one input element, its outputs
    written into the loop's TensorArrays (losses, step starts, host_call, fetched tensors)."""

    traced: TracedTrainStep
    specs: list[tf.TensorSpec]  # host_call's.
    host_call_every_n: int
    fetch_dtypes: list[tf.DType]  # Hook tensors, then the summaries when emitted.
    emit_summaries: bool

    def __call__(self, i: tf.Tensor, outfed: tf.Tensor, losses: tf.TensorArray,
                 starts: tf.TensorArray, calls: list[tf.TensorArray],
                 fetched: list[tf.TensorArray], element: Any) -> tuple:
        out = self.traced(*call_lib.split_element(element))
        start = out["step"] if "step" in out else tf.constant(-1, tf.int64)
        if self.specs:
            leaves = out["host_call"]
            calls, outfed = tf.cond(
                tf.equal(i % self.host_call_every_n, 0),  # `==` is identity under TF1 equality.
                lambda: ([ta.write(outfed, leaf) for ta, leaf in zip(calls, leaves)],
                         outfed + 1),
                lambda: (calls, outfed))
        if self.fetch_dtypes:
            values = list(out.get("hook_tensors", [])) + (
                [out["summaries"]] if self.emit_summaries else [])
            fetched = [ta.write(i, value) for ta, value in zip(fetched, values)]
        return (tf.constant(True), i + 1, outfed, losses.write(i, out["loss"]),
                starts.write(i, start), calls, fetched)


def _compiled_loop(one_step: _OneStep, global_step: tf.Variable | None, endless: bool,
                   fixed: FixedBatches | None) -> Any:
    """The `tf.function` `run_steps(iterator, n)`: a while_loop of up to `n` `one_step`s,
    ending early at the end of input (unless `endless`), as `make_multi_step_train_fn` says."""
    specs, fetch_dtypes = one_step.specs, one_step.fetch_dtypes

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
                return one_step(i, outfed, losses, starts, calls, fetched, iterator.get_next())
            optional = iterator.get_next_as_optional()
            stop = lambda: (tf.constant(False), i, outfed, losses, starts, calls,  # noqa: E731
                            fetched)

            def has_value() -> tuple:
                element = optional.get_value()
                run = lambda: one_step(i, outfed, losses, starts, calls, fetched,  # noqa: E731
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

    return run_steps


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
    on BERT-base ~5 s on one replica and ~30 s on 8 (bench/results/HISTORY.md). A fresh model_dir's
    step-0 checkpoint, which legacy wrote before the first step too, takes seconds of its
    own (BERT-base: 1.3 GB), and a later call's restore takes time too; none of them needs
    the graph, nor it them, so they overlap: a call of zero steps
    runs on this thread while the body (the checkpoint) runs, reading no input and writing
    no variable, and leaves the optimised graph for the first real call. The step-0 values
    saved are the ones training starts from, as before. The thread's error, if any, is
    raised once the body has finished; an error of the body wins.

    The concrete function is looked up here, in the caller's context (where the loop was
    traced: the lookup is keyed by it), and the thread only executes it, so it enters none
    of `strategy_state.RuntimeScope`'s parts, some of which are process-wide, not per thread (the
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

