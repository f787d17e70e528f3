"""evaluate and predict: restore, run the compiled inference loop in chunks, consume results.

`evaluate(...)` and `predict(...)` are one call each. They open an `InferenceSession` in
named steps: build and trace the eval or predict loop for a runtime, creating its variables
(`_Loops`, `_build_loop`: where metric_fn runs), restore the checkpoint to use (`_restore`:
or, when there is none, keep fresh variables, set by any `init_from_checkpoint` of model_fn
or scaffold_fn, as legacy initialised a new graph), and wire the hooks (`_hook_runner`);
`prepare` calls input_fn and traces once, `Prepared.open` does the rest, so a built evaluation
runs again on the same input (`session/live_eval.py`). The session's `chunks` run loops of up to `iterations_per_loop` steps (off TPU: evaluate up to
`CPU_EVAL_LOOP_STEPS`, predict up to `CPU_PREDICT_LOOP_STEPS`, as their tensors allow, never
fewer than iterations_per_loop) until `steps` or the end of input, with hooks around each
loop. `evaluate_session` and `_predictions` are the only places that unpack a loop's results on
the host: padding rows dropped, metric_fn updated (overlapped with the next loop), host_call
run, predictions yielded one example at a time. The input is let go when the call ends. This
module never sees the facade, only `settings.RunSettings`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np
import tensorflow as tf

from tpu_estimator_compat.summary import background as background_lib
from tpu_estimator_compat.checkpoint import checkpoints as checkpoints_lib
from tpu_estimator_compat.checkpoint import object_based
from tpu_estimator_compat.checkpoint import scaffold_parts
from tpu_estimator_compat.cluster import workers as cluster_lib
from tpu_estimator_compat.v1_state import graph_names
from tpu_estimator_compat.loop import hooks as hooks_lib
from tpu_estimator_compat.inputs import context as context_lib
from tpu_estimator_compat.inputs import distribute as inputs_lib
from tpu_estimator_compat.loop import inference_loop as inference_loop_lib
from tpu_estimator_compat import log as logging
from tpu_estimator_compat.step import metrics as metrics_lib
from tpu_estimator_compat.summary import progress
from tpu_estimator_compat.step import replica_step
from tpu_estimator_compat.session import settings as settings_lib
from tpu_estimator_compat.session import strategy_state as runtime_lib
from tpu_estimator_compat import shapes as shapes_lib
from tpu_estimator_compat import spec as spec_lib
from tpu_estimator_compat.summary import summaries as summaries_lib
from tpu_estimator_compat.checkpoint import warm_start as warm_start_lib

ModeKeys = spec_lib.ModeKeys
HookTensors = tuple[tuple[str, tf.DType], ...]


@dataclasses.dataclass
class InferenceSession:
    """One evaluate/predict call: a restored runtime, its compiled loop and its iterator."""

    runtime: runtime_lib.Runtime
    loop: inference_loop_lib.InferenceLoop
    record: replica_step.TraceRecord
    iterator: Any
    iterations_per_loop: int
    hooks: hooks_lib.HookRunner | None
    # EVAL with eval_metrics on TPU or several replicas: metric_fn's host graph. None when
    # metric_fn is built in the step (one device off TPU, or it uses model_fn's objects).
    host_metrics: metrics_lib.HostMetrics | None = None
    # predict() off TPU: the first loop's steps; each next loop runs twice as many, up to
    # iterations_per_loop (see CPU_PREDICT_LOOP_STEPS). None: every loop that size.
    first_loop_steps: int | None = None
    # Which of legacy's paths the session follows (TPU: the loop runs on TPU cores).
    on_tpu: bool = False
    # evaluate(): when legacy's "Starting evaluation at" line was logged (time.time()).
    started: float | None = None

    def release_input(self) -> None:
        """Lets go of the iterator, deleted off this thread
        (`inputs.distribute.release_off_thread`)."""
        inputs_lib.release_off_thread(self.iterator)
        self.iterator = None

    def chunks(self, steps: int | None) -> Iterator[inference_loop_lib.InferenceResult]:
        """Runs loops of up to iterations_per_loop steps until `steps` or end of input.

        Hooks see one before_run/after_run per loop, as on legacy TPU; on legacy's CPU path
        (`use_tpu=False` or `eval_on_tpu=False`) they ran around every step, so while hooks
        are present a loop is one step there. With `first_loop_steps` loops start that size
        and double: a consumer that stops early left at most the last loop's unread steps
        run.
        """
        done = 0
        step = int(self.runtime.global_step.numpy())
        self.hooks.begin(step)
        most = 1 if self.hooks.per_step else self.iterations_per_loop
        per_loop = min(most, self.first_loop_steps or most)
        while steps is None or done < steps:
            n = per_loop if steps is None else min(per_loop, steps - done)
            per_loop = min(most, 2 * per_loop)
            self.hooks.before_loop(step)  # May swap in a loop returning hooks' tensors.
            if self.loop.ready(self.iterator, n):  # Traced: the scopes only matter to a trace.
                result = self.loop(self.iterator, n)
            else:
                with self.runtime.scope():
                    result = self.loop(self.iterator, n)
            done += result.steps_run
            stop = self.hooks.after_loop(step, result.losses, result.hook_tensors,
                                         steps_run=result.steps_run)
            yield result
            if result.steps_run < n or stop:
                break
        self.hooks.end()


# Steps per loop of evaluate() off TPU, at most (iterations_per_loop, if larger, wins;
# see `_cpu_loop_steps`). Legacy's CPU path (use_tpu=False or
# eval_on_tpu=False) ran one step per session.run whatever iterations_per_loop said, and
# without hooks nothing there saw a step boundary: the results are the same for any loop
# size. One step per call left two costs legacy did not pay in full: TF 2.21's function
# call (a ResNet's serial eval step, `bench.probe_serial_step`: 7.3-7.8 ms a batch in a
# tf.function, 6.9-7.2 in a TF 2.21 Session, 6.4-6.7 in TF 2.15's), and consecutive steps
# never overlapping on the core a step leaves idle (5.7 ms a batch in a loop). A loop keeps
# every step's metric_fn (and eval host_call) tensors to its end, so it is shortened to
# hold at most CPU_EVAL_LOOP_BYTES of them, and left at iterations_per_loop when their size
# is not known from the traced shapes. With hooks (`HookRunner.per_step`) a loop is still
# one step.
CPU_EVAL_LOOP_STEPS = 32
CPU_EVAL_LOOP_BYTES = 64 << 20
# predict() off TPU, the same way, but its consumer may stop reading early, and every step
# a loop ran ahead of it is wasted: loops start at iterations_per_loop steps and double up
# to 4 (predictions' bytes allowing), so a consumer that stops early had at most 3 batches
# run that it never read (legacy's TPU loops ran up to iterations_per_loop - 1). A
# ResNet's predict at loops of 1, 2, 4, 8 and 32 steps: 7.4, 6.7, 6.0, 6.0 and 5.8 ms a
# batch (/tmp script, best of 3); legacy's one step per session.run 6.5-6.7.
CPU_PREDICT_LOOP_STEPS = 4


def _cpu_loop_steps(structure: dict[str, Any], keys: Sequence[str], most_steps: int,
                    global_batch_size: int | None, replicas: int,
                    iterations_per_loop: int) -> int:
    """Steps per evaluate() or predict() loop off TPU: see CPU_EVAL_LOOP_STEPS.

    `structure` is replica 0's step outputs; every replica's `keys` are kept (gathered).
    """
    batch = global_batch_size // replicas if global_batch_size else None
    step_bytes = 0
    for spec in tf.nest.flatten([structure.get(key) for key in keys]):
        if spec is None:
            continue
        dims = shapes_lib.static_dims(spec.shape)
        if (dims is None or dims.count(None) > 1 or (None in dims and not batch)
                or spec.dtype in (tf.string, tf.variant, tf.resource)):
            return iterations_per_loop  # Unknown size: the loop the user asked for.
        step_bytes += int(np.prod([batch if d is None else d for d in dims],
                                  dtype=np.int64)) * spec.dtype.size * replicas
    fit = CPU_EVAL_LOOP_BYTES // max(step_bytes, 1)
    return max(iterations_per_loop, min(most_steps, fit))


def evaluate(settings: settings_lib.RunSettings, runtime: runtime_lib.Runtime,
             plan: context_lib.BatchPlan, input_fn: Callable[..., Any], *,
             checkpoint: str | None, on_tpu: bool, hooks: Sequence[Any] | None,
             steps: int | None, name: str | None) -> dict[str, Any]:
    """One evaluate() call: `steps` batches or the whole input; legacy's results dict.

    Opens the session (traces the step, restores `checkpoint`, opens the input), runs it and
    lets go of its input, whatever happens.
    """
    # Off TPU, legacy's session ran input_fn's tensors at every step: the same batch `steps`
    # times. Without `steps` that never ended; here such tensors are evaluated once.
    session = _open(settings, runtime, plan, ModeKeys.EVAL, input_fn, checkpoint, on_tpu,
                    hooks, repeat_tensors=not on_tpu and steps is not None)
    try:
        return evaluate_session(session, model_dir=settings.model_dir, steps=steps, name=name,
                         checkpoint=checkpoint)
    finally:
        session.release_input()


def predict(settings: settings_lib.RunSettings, runtime: runtime_lib.Runtime,
            plan: context_lib.BatchPlan, input_fn: Callable[..., Any], *,
            checkpoint: str | None, on_tpu: bool, hooks: Sequence[Any] | None,
            predict_keys: Sequence[str] | None,
            yield_single_examples: bool) -> Iterator[Iterable[Any]]:
    """One predict() call: yields, per step, the list of its real examples' predictions.

    Opens the session when the first prediction is asked for, and lets go of its input when
    the caller stops reading.
    """
    # Off TPU input_fn's tensors are the same batch at every step, as legacy's session ran
    # them: predictions are yielded for as long as they are read (legacy warned of that).
    session = _open(settings, runtime, plan, ModeKeys.PREDICT, input_fn, checkpoint, on_tpu,
                    hooks, repeat_tensors=not on_tpu)
    try:
        yield from _predictions(session, predict_keys, yield_single_examples)
    finally:
        session.release_input()


def _open(settings: settings_lib.RunSettings, runtime: runtime_lib.Runtime,
          plan: context_lib.BatchPlan, mode: str, input_fn: Callable[..., Any],
          checkpoint: str | None, on_tpu: bool, hooks: Sequence[Any] | None,
          repeat_tensors: bool = False) -> InferenceSession:
    """Traces `mode`'s step for `runtime`, opens the input and restores `checkpoint`."""
    prepared = prepare(settings, runtime, plan, mode, input_fn, on_tpu, repeat_tensors)
    return prepared.open(hooks, lambda: _restore(
        runtime, prepared.built.record, checkpoint, prepared.loops.init_plan,
        settings.warm_start_from))


def prepare(settings: settings_lib.RunSettings, runtime: runtime_lib.Runtime,
            plan: context_lib.BatchPlan, mode: str, input_fn: Callable[..., Any],
            on_tpu: bool, repeat_tensors: bool = False) -> "Prepared":
    """Calls input_fn and traces `mode`'s step for `runtime` (creating its variables)."""
    # Legacy on TPU padded a partial last batch to the full batch (model_fns may reshape
    # by params['batch_size']); legacy on CPU did not. On N replicas every replica needs
    # its static share, so padding is needed there whatever use_tpu says.
    padded = on_tpu or runtime.strategy.num_replicas_in_sync > 1
    with runtime.scope():
        source = inputs_lib.distribute_input(
            runtime.strategy, input_fn, params=settings.params, config=settings.config,
            mode=mode, plan=plan, use_tpu=on_tpu, repeat_tensors=repeat_tensors, pad=padded,
            batch_axis=settings.batch_axis)
        iterator = inputs_lib.iterate(source.dataset, runtime.device_generators)
        loops = _Loops(settings, runtime, plan, mode, on_tpu, padded, source,
                       warm_start_lib.InitPlan())
        # Legacy called model_fn once per evaluate() or predict(), building its graph.
        logging.legacy_info("Calling model_fn.")
        built = _build_loop(loops, iterator)
        logging.legacy_info("Done calling model_fn.")
    return Prepared(loops, built, iterator)


@dataclasses.dataclass(eq=False)
class Prepared:
    """One evaluate/predict call's input and traced loop, before its variables are set.

    Legacy's `InMemoryEvaluatorHook` built an evaluation graph once and ran it in a new
    session at each trigger (`session/live_eval.py`): each `open` reads the input from its
    start, the first one through the iterator the trace used.
    """

    loops: "_Loops"
    built: "_Built"
    iterator: Any

    def open(self, hooks: Sequence[Any] | None,
             set_variables: Callable[[], None]) -> InferenceSession:
        """A session; `set_variables` (the restore) runs first, in the runtime's scopes."""
        loops, built, runtime = self.loops, self.built, self.loops.runtime
        with runtime.scope():
            iterator, self.iterator = self.iterator, None
            if iterator is None:
                iterator = inputs_lib.iterate(loops.source.dataset, runtime.device_generators)
            started = _start(loops.mode)
            set_variables()
        loop_steps, first_loop = _loop_sizes(loops.settings, runtime, loops.plan, loops.mode,
                                             loops.on_tpu, lambda: built.loop.trace(iterator))
        session = InferenceSession(runtime, built.loop, built.record, iterator, loop_steps,
                                   None, built.host_metrics, first_loop, on_tpu=loops.on_tpu,
                                   started=started)
        session.hooks = _hook_runner(session, loops, hooks, loops.on_tpu,
                                     built.metrics_in_step)
        return session

    def release_input(self) -> None:
        """Lets go of the traced iterator if no session took it."""
        if self.iterator is not None:
            inputs_lib.release_off_thread(self.iterator)
            self.iterator = None


@dataclasses.dataclass(frozen=True, eq=False)
class _Loops:
    """Builds and traces one evaluate/predict call's compiled loops, kept in the runtime.

    A loop is kept per (mode, batch plan, kind of input, hook tensors, where metric_fn is
    built). Tracing creates the variables; a model_fn's own init_from_checkpoint (BERT's
    use_tpu=False path) only set initializers in TF1, so the trace records it in `init_plan`,
    applied only when there is no checkpoint (`_restore`). The loops never hold the
    iterator: they take it per call, so it is deleted by `release_off_thread`, not
    wherever the garbage collector runs (the session's hooks reach the loops).
    """

    settings: settings_lib.RunSettings
    runtime: runtime_lib.Runtime
    plan: context_lib.BatchPlan
    mode: str
    on_tpu: bool
    padded: bool
    source: inputs_lib.DistributedInput
    init_plan: warm_start_lib.InitPlan

    def get(self, iterator: Any, hook_tensors: HookTensors = (), metrics_in_step: bool = False
            ) -> tuple[inference_loop_lib.InferenceLoop, replica_step.TraceRecord]:
        """The traced loop (and its trace record) for `iterator`'s input.

        One device: a metric_fn that reaches a tensor model_fn made besides its tensors
        cannot be built after the step; it is then built in the step, as legacy's CPU path
        did, and that loop is kept for this key too.
        """
        key = self._key(hook_tensors, metrics_in_step)
        loop, record = self._built(key, hook_tensors, metrics_in_step)
        try:
            self._trace(loop, iterator)
        except ValueError as e:
            if (metrics_in_step or record.deferred_metrics is None
                    or not metrics_lib.uses_another_graph(e)):
                raise
            logging.info("metric_fn uses a tensor model_fn made; it is built in the "
                         "evaluation step (%s)", str(e).splitlines()[0])
            loop, record = self._built(self._key(hook_tensors, True), hook_tensors, True)
            self._trace(loop, iterator)
            self.runtime.functions[key] = (loop, record)
        return loop, record

    def _key(self, hook_tensors: HookTensors, metrics_in_step: bool) -> tuple:
        return (self.mode, self.plan, self.padded, self.on_tpu, self.source.spec_key,
                self.source.endless, hook_tensors, metrics_in_step)

    def _trace(self, loop: inference_loop_lib.InferenceLoop, iterator: Any) -> None:
        with warm_start_lib.capture_init_from_checkpoint(self.init_plan):
            loop.trace(iterator)

    def _built(self, key: tuple, hook_tensors: HookTensors, metrics_in_step: bool
               ) -> tuple[inference_loop_lib.InferenceLoop, replica_step.TraceRecord]:
        functions = self.runtime.functions
        if key not in functions:
            runtime, record = self.runtime, replica_step.TraceRecord()
            names = tuple(name for name, _ in hook_tensors)
            caller = self.settings.caller(self.plan, self.on_tpu)
            args = (caller, runtime.registry, runtime.global_step, self.plan.for_model_fn)
            if self.mode == ModeKeys.EVAL:
                step = replica_step.make_eval_step(*args, record=record,
                                                   hook_tensor_names=names,
                                                   metrics_in_step=metrics_in_step)
                update = replica_step.make_metric_update(runtime.registry,
                                                         runtime.global_step, record)
            else:
                predict = replica_step.make_predict_step(*args, record=record,
                                                         hook_tensor_names=names)
                # Legacy's predict off TPU gave model_fn input_fn's features alone.
                step = predict if self.on_tpu else lambda features, _: predict(features, None)
                update = None
            functions[key] = (inference_loop_lib.InferenceLoop(
                runtime.strategy, self.source.wrap_step(step), padded=self.padded,
                input_spec=self.source.replica_spec,
                # Off TPU the loop size is chosen after the trace (see CPU_EVAL_LOOP_STEPS):
                # one traced loop for any size.
                steps_per_call=None if not self.on_tpu else self.settings.iterations_per_loop,
                endless=self.source.endless, step_takes_mask=self.mode == ModeKeys.EVAL,
                metric_update=update, batch_major_predictions=self.on_tpu), record)
        return functions[key]


@dataclasses.dataclass(frozen=True, eq=False)
class _Built:
    loop: inference_loop_lib.InferenceLoop
    record: replica_step.TraceRecord
    host_metrics: metrics_lib.HostMetrics | None
    metrics_in_step: bool


def _build_loop(loops: _Loops, iterator: Any) -> _Built:
    """The loop to run, and where metric_fn runs: on the host (`HostMetrics`), or in the step.

    metric_fn's host graph is built on every worker, so that all of them take the same
    decision; a metric_fn that uses objects model_fn made is built in the step, over every
    replica's rows, as legacy on real TPU ran it in the TPU computation's graph, where
    model_fn's host-side objects were reachable.
    """
    loop, record = loops.get(iterator)
    if record.metric_fn is None:
        return _Built(loop, record, None, False)
    try:
        return _Built(loop, record, _host_metrics(record, loop.trace(iterator)["metrics"],
                                                  loops.runtime.strategy.num_replicas_in_sync),
                      False)
    except metrics_lib.ModelFnObjectsError as e:
        logging.info("metric_fn uses objects model_fn made; it is built in the evaluation "
                     "step, over every replica's rows (%s)", str(e).splitlines()[0])
        loop, record = loops.get(iterator, (), metrics_in_step=True)
        return _Built(loop, record, None, True)


def _restore(runtime: runtime_lib.Runtime, record: replica_step.TraceRecord,
             checkpoint: str | None, init_plan: warm_start_lib.InitPlan,
             warm_start_from: Any = None) -> None:
    """Sets the variables the loop reads, as legacy's new evaluation graph was set.

    From `checkpoint` through the variable map of scaffold_fn's or the spec's Scaffold Saver
    when there is one (the EMA values into the model's variables: tensorflow/tpu QANet's
    evaluation), else by name; without a checkpoint, from the initializers, which
    init_from_checkpoint had set to the mapped checkpoint's values (canine/tydiqa predicts
    from --init_checkpoint this way), then from `warm_start_from` (legacy's
    `_maybe_warm_start` in evaluate and predict: `model_to_estimator` evaluates the Keras
    weights before any training), then the Scaffold's init_fn: the runtime is new, its
    variables fresh. Local variables (metric accumulators) start at zero.
    """
    saver_map = None
    parts = scaffold_parts.ScaffoldParts.of(record.scaffold)
    if record.scaffold_fn is not None:  # Its Scaffold's parts, as legacy passed them on.
        with runtime.registry.in_collections():
            scaffold, saver_map = warm_start_lib.run_scaffold_fn(record.scaffold_fn, init_plan)
        parts = scaffold_parts.ScaffoldParts.of(scaffold)
    parts.warn_unrun()
    object_saver = object_based.object_saver(parts.saver)
    if saver_map is None and record.saver is not None and object_saver is None:
        # An EstimatorSpec's `Scaffold(saver=Saver(var_list))` (legacy's CPU path).
        saver_map = warm_start_lib.saver_var_map(record.saver.var_list or [])
    if checkpoint is not None and saver_map:
        warm_start_lib.restore_through_map(checkpoint, saver_map)
    elif checkpoint is not None and object_saver is not None:
        object_saver.restore(checkpoint)  # By the object-graph keys legacy's Saver froze.
    elif checkpoint is not None and warm_start_lib.is_saver_like(parts.saver):
        # Another object as the Scaffold's saver: legacy's session manager called its
        # `restore(sess, path)`; there is no TF1 session here.
        parts.saver.restore(None, checkpoint)
    elif checkpoint is not None:
        checkpoints_lib.V1Saver(runtime.registry.by_name(),
                                runtime.registry.optional_names()).restore(checkpoint)
    else:
        variables = runtime.registry.by_name()
        init_plan.apply(variables)
        if warm_start_from is not None:
            warm_start_lib.warm_start(warm_start_from, variables,
                                      runtime.registry.trainable_names())
        scaffold_parts.run_init_fn(parts.init_fn_scaffold, variables)  # After init_op.
    runtime.registry.reset_local_variables()


def _loop_sizes(settings: settings_lib.RunSettings, runtime: runtime_lib.Runtime,
                plan: context_lib.BatchPlan, mode: str, on_tpu: bool,
                structure: Callable[[], dict[str, Any]]) -> tuple[int, int | None]:
    """(steps per loop, the first loop's steps when loops grow: predict off TPU).

    `structure()` is replica 0's traced step outputs, read only off TPU.
    """
    loop_steps = settings.iterations_per_loop
    if on_tpu:
        return loop_steps, None
    evaluating = mode == ModeKeys.EVAL
    steps = _cpu_loop_steps(
        structure(), ("metrics", "metric_inputs", "host_call") if evaluating else ("predictions",),
        CPU_EVAL_LOOP_STEPS if evaluating else CPU_PREDICT_LOOP_STEPS,
        plan.global_batch_size, runtime.strategy.num_replicas_in_sync, loop_steps)
    return steps, None if evaluating else loop_steps


def _hook_runner(session: InferenceSession, loops: _Loops, hooks: Sequence[Any] | None,
                 on_tpu: bool, metrics_in_step: bool) -> hooks_lib.HookRunner:
    """The session's hooks: the caller's and model_fn's, around each loop.

    Legacy's CPU path ran evaluation and prediction hooks around every step (one
    session.run per batch), where they could fetch any model_fn tensor: then the session
    swaps in a loop that returns the tensors they fetch.
    """
    runtime, record = session.runtime, session.record

    def fetch_tensors(tensors: HookTensors) -> None:
        with runtime.scope():
            session.loop, _ = loops.get(session.iterator, tensors, metrics_in_step)

    return hooks_lib.HookRunner(
        list(hooks or ()) + list(record.hooks), runtime.global_step,
        tensors_per_step=not on_tpu, graph=record.model_graph, loss_name=record.loss_name,
        fetch_tensors=fetch_tensors, training=False, registry=runtime.registry,
        first_replica_loss=loops.plan.plain)


def _host_call_names(session: InferenceSession) -> graph_names.NameTable:
    """The names legacy's graph held when it built an eval host_call's fn.

    As in training (`TraceRecord.host_graph_names`), and metric_fn's: legacy built the
    `eval_metrics` before the `host_call`, in the same graph, on the CPU and on a TPU.
    """
    record = session.record
    taken = record.host_graph_names(use_tpu=session.on_tpu,
                                    variable_names=session.runtime.registry.by_name())
    if record.eval_metrics is not None:
        taken = taken + graph_names.names_taken_by(*record.eval_metrics, taken)
    return taken


def evaluate_session(session: InferenceSession, *, model_dir: str, steps: int | None,
              name: str | None, checkpoint: str | None) -> dict[str, Any]:
    """Runs the session to `steps` or end of input; returns legacy's results dict.

    On a cluster every worker runs the loop (the tensors are all-gathered), but only the
    chief computes metrics and writes events; the others return loss and step.
    """
    record = session.record
    chief = cluster_lib.is_chief(session.runtime.strategy)
    metrics = session.host_metrics if chief else None
    if metrics is not None:
        metrics.reset()
    mean_loss = metrics_lib.MeanLoss()
    last_values: list[Any] = []
    slices = session.loop.leaf_slices()
    per_example = session.loop.per_example()
    host_call = (summaries_lib.HostCallRunner(record.host_call[0], record.host_call[1],
                                              model_dir, _host_call_names(session))
                 if record.host_call is not None and chief else None)
    global_step = int(session.runtime.global_step.numpy())

    def update_metrics(per_step: list[tuple[list[Any], Any]]) -> None:
        for leaves, mask in per_step:
            _check_unpadded(record.metric_structure, per_example[slices["metrics"]], mask)
            metrics.update(_unflatten_rows(record.metric_structure,
                                           leaves[slices["metrics"]], mask,
                                           per_example[slices["metrics"]]))

    # metric_fn's updates of one loop run while the device runs the next; the steps of short
    # loops are handed over together (one hand-over cost more than a 1-step MLP update).
    background = background_lib.InOrder(name="host_metrics")
    pending: list[tuple[list[Any], Any]] = []
    eval_log = progress.EvalLog(steps, on_tpu=session.on_tpu)
    try:
        for result in session.chunks(steps):
            eval_log.after_loop(result.steps_run)
            per_step = (result.per_step()
                        if metrics is not None or host_call is not None else [])
            if metrics is not None:
                pending += per_step
                if len(pending) >= _UPDATES_PER_HANDOVER:
                    background.submit(update_metrics, pending)
                    pending = []
            for loss in result.losses:
                mean_loss.update(loss)
            if host_call is not None:
                for leaves, mask in per_step:
                    host_call.run(_real_rows(leaves[slices["host_call"]], mask,
                                             per_example[slices["host_call"]]),
                                  global_step)
            if result.steps_run and result.last:
                last_values = [leaf[-1] for leaf in result.last]
        if pending:
            background.submit(update_metrics, pending)
        background.drain()
    finally:
        background.close()
        if host_call is not None:
            host_call.close()
    values = metrics.result() if metrics is not None else {}
    if record.metric_op_names and chief:
        # name -> value, each a nest as metric_fn or eval_metric_ops gave it.
        structure = session.loop.trace(session.iterator).get("metric_values", {})
        values.update(tf.nest.pack_sequence_as(structure,
                                               last_values or _initial_values(session)))
    results = metrics_lib.finalize_eval_dict(values, mean_loss.result(), global_step)
    _log_finished(eval_log, session.started, global_step, results, checkpoint)
    if chief:
        summaries_lib.write_eval_summaries(
            os.path.join(model_dir, "eval" if not name else f"eval_{name}"),
            results, global_step, checkpoint)
    return results


def _start(mode: str) -> float:
    """The time evaluate() or predict() starts restoring; for evaluate() legacy's line, which it
    logged before its session restored the checkpoint."""
    started = time.time()
    if mode == ModeKeys.EVAL:
        logging.legacy_info("Starting evaluation at %s",
                            time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)))
    return started


def _log_finished(eval_log: progress.EvalLog, started: float | None, global_step: int,
                  results: dict[str, Any], checkpoint: str | None) -> None:
    """Legacy's lines at the end of an evaluation (evaluation.py, estimator.py), in order.

    The results print as legacy's `_dict_to_str` printed them (`summaries.dict_to_str`):
    numpy scalars as `0.6929308`, not the float64 digits an f-string gives.
    """
    eval_log.finish()
    if started is not None:
        logging.legacy_info("Inference Time : %.5fs", time.time() - started)
    logging.legacy_info("Finished evaluation at %s",
                        time.strftime("%Y-%m-%d-%H:%M:%S", time.localtime()))
    logging.legacy_info("Saving dict for global step %d: %s", global_step,
                        summaries_lib.dict_to_str(results))
    if checkpoint:
        logging.legacy_info("Saving '%s' summary for global step %d: %s", "checkpoint_path",
                            global_step, checkpoint)


def _predictions(session: InferenceSession, predict_keys: Sequence[str] | None,
                 yield_single_examples: bool) -> Iterator[Iterable[Any]]:
    """Yields, per step, the list of its real examples' predictions, in order (padding dropped).

    Lists, not single examples: `eager_scope.eager_generator` hands them out one by one.
    """
    keys = list(session.record.prediction_keys)
    wanted = inference_loop_lib.select_prediction_keys(keys, predict_keys, session.record.predictions_are_dict)
    where = session.loop.leaf_slices()["predictions"]
    for result in session.chunks(None):
        for leaves, mask in result.per_step():
            real = (lambda leaf: leaf) if bool(np.all(mask)) else (lambda leaf: leaf[mask])
            batch = {k: real(leaf) for k, leaf in zip(keys, leaves[where]) if k in wanted}
            if not session.record.predictions_are_dict:
                batch = batch[""]
            if not yield_single_examples:
                yield (batch,)
            elif not isinstance(batch, dict):
                yield batch  # Its rows, as `v[i]` gives them.
            else:
                inference_loop_lib.check_prediction_rows(batch)
                # Row by row over every key at once: row i of each array, as `v[i]` gives it.
                names = list(batch)
                yield [dict(zip(names, row)) for row in zip(*batch.values())]


def _initial_values(session: InferenceSession) -> list[Any]:
    """The values of metrics built in the step when no step ran: zeros of their specs.

    Legacy read its metrics once after the last update, so an empty evaluation reported
    them as initialised (0 for the v1 and tf.keras metrics: their accumulators start at 0
    and their values divide with `div_no_nan`). The step's values exist only once it ran.
    """
    specs = tf.nest.flatten(session.loop.trace(session.iterator).get("metric_values", {}))
    return [np.zeros(shapes_lib.static_dims(spec.shape), spec.dtype.as_numpy_dtype)[()]
            for spec in specs]


# Steps whose metric updates go to the background thread at once (see `evaluate_session`).
_UPDATES_PER_HANDOVER = 16


def _host_metrics(record: Any, specs: Any, replicas: int) -> metrics_lib.HostMetrics:
    """metric_fn on the host, with the static batch axis legacy TPU gave it when known.

    Legacy TPU concatenated fixed-shape outfeeds, so metric_fn saw axis 0 as the global
    batch. Some metric_fns need that: tensorflow/tpu unet3d reshapes `[batch, -1]` tensors
    back with a `-1` and calls `tf.size(x, out_type=tf.float32)`, which only a fully defined
    shape allows; google/automl efficientdet's `batch_map_fn` takes another code path for an
    unknown axis, which fails when run. So when every replica's axis 0 is static, metric_fn
    is built with the gathered size (each replica's axis 0 times replicas), and a padded
    last batch's real rows get it built again for their count (`HostMetrics`). A metric_fn
    that fails on the static axis is built with an unknown one.
    """
    if any(not spec.shape.rank or shapes_lib.static_dim(spec.shape, 0) is None
           for spec in tf.nest.flatten(specs)):
        return metrics_lib.HostMetrics(record.metric_fn, record.metric_structure, specs)
    try:
        return metrics_lib.HostMetrics(record.metric_fn, record.metric_structure, specs,
                                       static_replicas=replicas)
    except metrics_lib.ModelFnObjectsError:
        raise
    except (TypeError, ValueError) as e:
        try:
            host_metrics = metrics_lib.HostMetrics(record.metric_fn, record.metric_structure,
                                                   specs)
        except metrics_lib.ModelFnObjectsError:
            raise
        except Exception:  # The unknown axis does not help: report the first failure.
            raise metrics_lib.metric_fn_error(e, record.metric_fn, specs, replicas) from e
        logging.warning("metric_fn (eval_metrics[0]) fails on a static batch axis of %d "
                        "replicas' rows (%s: %s); it is built with an unknown one, and "
                        "every metric is kept", replicas, type(e).__name__,
                        str(e).splitlines()[0] if str(e) else "")
        return host_metrics


def _check_unpadded(structure: Any, per_example: Sequence[bool], mask: Any) -> None:
    """Refuses a step whose padding rows sit in a leaf that is not batch-major.

    Legacy never padded eval batches (on TPU the input had to give full batches), so a
    `[batch * k]` or one-value-per-step tensor is fine until a step is padded; the rows can
    then only be removed by axis 0.
    """
    if bool(np.all(mask)) or all(per_example):
        return
    names = inference_loop_lib.leaf_names(structure, "eval_metrics[1]")
    where = ", ".join(f"`{name}`" for name, batch in zip(names, per_example) if not batch)
    raise ValueError(
        f"`eval_metrics` tensor(s) {where}: axis 0 is not the per-replica batch, and this "
        "evaluation step "
        "had padding rows (the last batch was partial, padded because use_tpu=True or "
        "several replicas evaluate), which can only be removed along the batch axis. Give "
        "full batches (`batch(..., drop_remainder=True)`, as legacy TPU evaluation "
        "required), pass one row per example, or evaluate with use_tpu=False on one "
        "replica.")


def _unflatten_rows(structure: Any, leaves: list[Any], mask: Any,
                    per_example: Sequence[bool]) -> Any:
    """One step's gathered metric tensors, padding rows removed, in the user's structure."""
    return tf.nest.pack_sequence_as(structure, _real_rows(leaves, mask, per_example))


def _real_rows(leaves: list[Any], mask: Any, per_example: Sequence[bool]) -> list[Any]:
    """Drops padding rows from batch-major leaves; passes the others (one value per step,
    which the loop refuses in eval_metrics when batches are padded) as they are, as legacy's
    CPU path passed them to metric_fn."""
    if bool(np.all(mask)):  # No padding (the usual step): the rows as they are, uncopied.
        return list(leaves)
    return [leaf[mask] if batch else leaf for leaf, batch in zip(leaves, per_example)]
