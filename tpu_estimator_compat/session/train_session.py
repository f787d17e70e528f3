"""One `train()` run: restore or initialise, then drive the compiled loop to the target.

`TrainSession.run` traces the train loop (which creates the variables), restores the latest
checkpoint or applies scaffold_fn / init_from_checkpoint / warm start to a fresh model_dir,
then hands `loop.driver.TrainDriver` the loop and its listeners: the hooks
(`loop/hooks.py`), the save policy (`checkpoint/save_policy.py`), the stop signals and the
legacy training summaries and host_call (`summary/summaries.py`). The driver never sees the
model; this module never sees the facade, only `settings.RunSettings`.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Sequence

import tensorflow as tf

from tpu_estimator_compat._tf import private as _tf_private
from tpu_estimator_compat.checkpoint import checkpoints as checkpoints_lib
from tpu_estimator_compat.checkpoint import scaffold_parts
from tpu_estimator_compat.cluster import workers as cluster_lib
from tpu_estimator_compat.loop import hooks as hooks_lib
from tpu_estimator_compat.inputs import context as context_lib
from tpu_estimator_compat.inputs import distribute as inputs_lib
from tpu_estimator_compat import log as logging
from tpu_estimator_compat.loop import driver as driver_lib
from tpu_estimator_compat.loop import train_loop as loop_lib
from tpu_estimator_compat.session import parameter_servers
from tpu_estimator_compat.cluster import preemption
from tpu_estimator_compat.summary import progress
from tpu_estimator_compat.step import replica_step
from tpu_estimator_compat.session import settings as settings_lib
from tpu_estimator_compat.session import strategy_state as runtime_lib
from tpu_estimator_compat.checkpoint import safety
from tpu_estimator_compat.checkpoint import save_policy as save_policy_lib
from tpu_estimator_compat import spec as spec_lib
from tpu_estimator_compat.summary import summaries as summaries_lib
from tpu_estimator_compat.checkpoint import warm_start as warm_start_lib

ModeKeys = spec_lib.ModeKeys
HookTensors = tuple[tuple[str, tf.DType], ...]


class TrainSession:
    """Trains one runtime on one batch plan; `run` is one `train()` call's body."""

    def __init__(self, settings: settings_lib.RunSettings, runtime: runtime_lib.Runtime,
                 plan: context_lib.BatchPlan) -> None:
        self._settings = settings
        self._runtime = runtime
        self._plan = plan

    def run(self, input_fn: Callable[..., Any], hooks: list[Any], target: int | None,
            saving_listeners: Sequence[Any] | None,
            signals: safety.StopSignals,
            steps: int | None = None) -> preemption.StopOutcome | None:
        """Trains to `target` (None: until input ends), with model_dir locked and the
        runtime's scopes entered.

        `steps` (train's `steps=`, when it set `target`) counts from the global step that
        training starts at: in a fresh model_dir init_from_checkpoint may have set it (a map
        naming `global_step`), and legacy's stop hooks read it only once the session existed.

        Returns what stopped a multi-worker job early, as all its workers agreed (a signal
        on one of them), or None.
        """
        settings, runtime = self._settings, self._runtime
        iterator, source = self._input(input_fn)
        init_plan = warm_start_lib.InitPlan()
        logging.legacy_info("Calling model_fn.")  # Tracing makes the variables; restore after.
        with warm_start_lib.capture_init_from_checkpoint(init_plan):
            train_loop, record = self._train_loop(iterator, source)
        logging.legacy_info("Done calling model_fn.")
        current = {"loop": train_loop}

        def fetch_tensors(tensors: HookTensors) -> None:
            # Hooks fetch model_fn tensors (legacy's CPU path): a loop that returns them.
            with warm_start_lib.capture_init_from_checkpoint(warm_start_lib.InitPlan()):
                current["loop"], _ = self._train_loop(iterator, source, tensors)

        hook_runner = hooks_lib.HookRunner(
            hooks + list(record.hooks), runtime.global_step, registry=runtime.registry,
            tensors_per_step=not settings.use_tpu, graph=record.model_graph,
            loss_name=record.loss_name, fetch_tensors=fetch_tensors,
            summary_names=record.summary_names, loss_summary=not record.loss_summary_made,
            first_replica_loss=self._plan.plain)
        if not hook_runner.checkpoint_hooks() and settings.saves_checkpoints:
            logging.legacy_info("Create CheckpointSaverHook.")  # Legacy's default saver hook.
        ps = parameter_servers.is_parameter_server_strategy(runtime.strategy)
        if ps:
            parameter_servers.log_placement(runtime.registry.by_name())
        with self._compiling(train_loop, iterator):
            checkpoints, target = self._restore_or_initialize(record, init_plan, target, steps)
            policy = self._save_policy(hook_runner, saving_listeners, checkpoints)
            step = self._read_step()
            policy.begin(step)  # Legacy's session start: the checkpoint of the first step.
        hook_runner.begin(step)
        target = hook_runner.limit_target(target) if target is not None else None
        listeners = [_HookListener(hook_runner), policy, signals,
                     self._train_reporting(record, cluster_lib.is_chief(runtime.strategy))]
        agreed = preemption.agreed_listeners(runtime.strategy, listeners, signals)
        steps_per_loop = self._steps_per_loop(hook_runner)

        def run_steps(n: int) -> loop_lib.LoopResult:
            if ps:  # n steps as closures of up to steps_per_loop steps on the workers.
                return parameter_servers.ScheduledSteps(
                    runtime.strategy, current["loop"].function, iterator, steps_per_loop,
                    runtime.scope)(n)
            with runtime.scope():
                return current["loop"](iterator, n)

        driver = self._driver(run_steps, policy, agreed)
        try:
            # On parameter servers a loop is one closure per worker.
            final = driver.run(target_step=target if target is not None else 2**62,
                               iterations_per_loop=steps_per_loop * (
                                   parameter_servers.num_workers(runtime.strategy) if ps
                                   else 1))
            policy.end(final)
            hook_runner.end()
        except KeyboardInterrupt:
            self._save_on_interrupt(policy)
            raise
        finally:
            for listener in listeners:
                listener.close()
            inputs_lib.release_off_thread(iterator)
            iterator = None  # (Also what run_steps and fetch_tensors see.)
        logging.legacy_info("Loss for final step: %s.", driver.last_loss)
        return preemption.outcome_of(agreed)

    def _restore_or_initialize(self, record: replica_step.TraceRecord,
                               init_plan: warm_start_lib.InitPlan, target: int | None,
                               steps: int | None
                               ) -> tuple[checkpoints_lib.CheckpointManager, int | None]:
        """Restores model_dir's latest checkpoint, else initialises the fresh model from
        elsewhere; returns model_dir's checkpoints and the step to train to.

        scaffold_fn runs at every call, as legacy called it whenever it built the graph
        (its init_from_checkpoint calls count for a fresh model only); its Scaffold's, or
        model_fn's, `saver` writes the checkpoints and its `init_fn` ends a fresh start.
        """
        if record.scaffold_fn is not None:
            with self._runtime.registry.in_collections():
                parts = scaffold_parts.ScaffoldParts.of(
                    warm_start_lib.call_scaffold_fn(record.scaffold_fn, init_plan))
        else:
            parts = scaffold_parts.ScaffoldParts.of(record.scaffold)
        parts.warn_unrun()
        registry = self._runtime.registry
        writer = scaffold_parts.training_saver(
            parts.saver, registry.by_name(), registry.optional_names(),
            self._settings.config.keep_checkpoint_max,
            self._settings.config.keep_checkpoint_every_n_hours)
        checkpoints = checkpoints_lib.CheckpointManager(
            self._settings.model_dir, writer.saver,
            keep_checkpoint_max=writer.keep_checkpoint_max,
            keep_checkpoint_every_n_hours=writer.keep_checkpoint_every_n_hours,
            sync=cluster_lib.checkpoint_sync(self._runtime.strategy),
            pad_step_number=writer.pad_step_number)
        if checkpoints.restore_latest() is None:
            self._initialize_from_elsewhere(init_plan, parts.init_fn_scaffold)
            if steps is not None:  # (A restored step is the one `target` counted from.)
                target = self._read_step() + steps
        else:
            scaffold_parts.check_restored_all(writer, registry.by_name(),
                                              registry.optional_names(),
                                              checkpoints.latest_checkpoint())
        # Legacy's new session ran the Scaffold's local_init_op: v1 metrics made in TRAIN
        # mode (`train_accuracy`) count each train() call afresh.
        self._runtime.registry.reset_local_variables()
        return checkpoints, target

    def _driver(self, run_steps: Callable[[int], loop_lib.LoopResult],
                policy: save_policy_lib.SavePolicy, listeners: Sequence[Any]
                ) -> driver_lib.TrainDriver:
        """The outer loop, with legacy's progress lines for this run's settings."""
        settings = self._settings
        return driver_lib.TrainDriver(
            run_steps=run_steps, read_step=self._read_step, checkpoint=policy,
            listeners=listeners, stop_on_nan_loss=settings.config.stop_on_nan_loss,
            train_log=progress.TrainLog(
                log_step_count_steps=settings.config.log_step_count_steps,
                iterations_per_loop=settings.iterations_per_loop,
                use_tpu=settings.use_tpu, examples_per_step=self._plan.global_batch_size))

    def _read_step(self) -> int:
        return int(self._runtime.global_step.numpy())

    def _compiling(self, train_loop: loop_lib.TrainLoop,
                   iterator: Any) -> contextlib.AbstractContextManager:
        """Inside: the train function is prepared for this call's iterator on another thread.

        A model whose loop holds stateful random ops with no twin (RandomShuffle,
        Multinomial, ...; dropout's are twins whose streams a call sets back) gets new
        kernels for it at every seeded call, so its streams start afresh as in legacy's new
        graph (`_tf/random_streams.py`), and TensorFlow instantiates the function again,
        Grappler included; so does a call that initialises variables. That overlaps what the call
        does before its first step and needs no input: the restore (or a fresh model's
        initialisation) and the first checkpoint (`loop.train_loop.compiling`). Not on parameter servers or several clients, where
        a call is not one local function.
        """
        strategy = self._runtime.strategy
        if (parameter_servers.is_parameter_server_strategy(strategy)
                or cluster_lib.is_multi_client(strategy)):
            return contextlib.nullcontext()
        return loop_lib.compiling(train_loop, iterator)

    def _save_on_interrupt(self, policy: save_policy_lib.SavePolicy) -> None:
        """Ctrl-C: a checkpoint of the last completed loop, where this worker can write one."""
        if cluster_lib.is_multi_client(self._runtime.strategy):
            # A second Ctrl-C (the first was an agreed stop): saving is a collective this
            # worker cannot run alone, so it leaves now; the others fail within the peer
            # timeout and the job resumes from the last checkpoint.
            logging.warning("Interrupted again: leaving without a checkpoint.")
            return
        # Reaches Python between loops, so the variables hold a completed loop's state.
        logging.warning("Interrupted: writing a checkpoint at global step %d.",
                        self._read_step())
        policy.end(self._read_step())

    def _input(self, input_fn: Callable[..., Any]
               ) -> tuple[Any, inputs_lib.DistributedInput]:
        """(iterator, source): every host's input, or every worker's on parameter servers."""
        settings, runtime, plan = self._settings, self._runtime, self._plan
        if parameter_servers.is_parameter_server_strategy(runtime.strategy):
            iterator, endless = parameter_servers.per_worker_input(
                runtime.strategy, inputs_lib.worker_dataset_fn(
                    input_fn, params=settings.params, config=settings.config,
                    mode=ModeKeys.TRAIN, plan=plan, use_tpu=settings.use_tpu,
                    batch_axis=settings.batch_axis))
            return iterator, inputs_lib.DistributedInput(None, None, known_endless=endless)
        source = inputs_lib.distribute_input(
            runtime.strategy, input_fn, params=settings.params, config=settings.config,
            mode=ModeKeys.TRAIN, plan=plan, use_tpu=settings.use_tpu,
            batch_axis=settings.batch_axis)
        return inputs_lib.iterate(source.dataset, runtime.device_generators), source

    def _steps_per_loop(self, hook_runner: hooks_lib.HookRunner) -> int:
        """iterations_per_loop, or 1 while hooks run around every step (legacy's CPU path).

        The plain Estimator (`train_steps_per_call`) observes one step per run and runs
        several per call while no hook needs each step: its progress lines, summaries and
        step-based checkpoints are written for the steps legacy wrote them at, from the
        loop's per-step losses and step counts. Not on parameter servers, where a loop is
        a closure each worker runs when it is free, as legacy's workers each ran steps.
        """
        settings = self._settings
        if settings.train_steps_per_call is not None:
            if hook_runner.per_step or parameter_servers.is_parameter_server_strategy(
                    self._runtime.strategy):
                return 1
            return settings.train_steps_per_call
        steps = settings.iterations_per_loop
        if hook_runner.per_step and steps > 1:
            logging.info(
                "use_tpu=False: SessionRunHooks run around every step, as on legacy's CPU "
                "path, so training runs one step per loop while they are present "
                "(iterations_per_loop=%d applies without them).", steps)
            return 1
        return steps

    def _save_policy(self, hook_runner: hooks_lib.HookRunner,
                     saving_listeners: Sequence[Any] | None,
                     checkpoints: checkpoints_lib.CheckpointManager
                     ) -> save_policy_lib.SavePolicy:
        """Legacy: a CheckpointSaverHook among the hooks replaces the default saver hook,
        and the default one (`checkpoints`) saved with the Saver of model_fn's Scaffold when
        it had one (`Scaffold(saver=Saver(max_to_keep=...))`: its retention)."""
        settings, runtime = self._settings, self._runtime
        listeners = list(saving_listeners or ())
        custom = hook_runner.checkpoint_hooks()
        if custom:
            directory, save_steps, save_secs, hook_listeners = (
                _tf_private.checkpoint_saver_hook_settings(custom[0]))
            writer = checkpoints_lib.CheckpointManager(
                directory, checkpoints_lib.V1Saver(runtime.registry.by_name(),
                                                  runtime.registry.optional_names()),
                keep_checkpoint_max=settings.config.keep_checkpoint_max,
                sync=cluster_lib.checkpoint_sync(runtime.strategy))
            listeners += hook_listeners
        else:
            if listeners and not settings.saves_checkpoints:
                raise ValueError(
                    "There should be a CheckpointSaverHook to use saving_listeners: "
                    f"saving_listeners={listeners!r} were given, but RunConfig saves no "
                    "checkpoints (save_checkpoints_steps and save_checkpoints_secs are None) "
                    "and no hook is a CheckpointSaverHook. Please set one of the "
                    "RunConfig.save_checkpoints_steps or RunConfig.save_checkpoints_secs.")
            writer = checkpoints
            save_steps = settings.config.save_checkpoints_steps
            save_secs = settings.config.save_checkpoints_secs
        # On a cluster the chief decides when to save, and only its listeners hear of it
        # (legacy ran the saver hook on the chief only).
        chief = cluster_lib.is_chief(runtime.strategy)
        return save_policy_lib.SavePolicy(
            writer, save_steps=save_steps, save_secs=save_secs,
            listeners=listeners if chief else [], announce=chief,
            agree=cluster_lib.chief_decides(runtime.strategy),
            per_step=not settings.use_tpu)

    def _train_reporting(self, record: replica_step.TraceRecord,
                         chief: bool) -> "_TrainReporting":
        """host_call and legacy's training summaries; only the chief writes them."""
        settings = self._settings
        # Legacy built host_call's fn, then its own loss summary, in the graph model_fn's
        # names were in (or not: `host_graph_names`); their tags are suffixed as there.
        taken = record.host_graph_names(use_tpu=settings.use_tpu,
                                        variable_names=self._runtime.registry.by_name())
        host_call = (summaries_lib.HostCallRunner(record.host_call[0], record.host_call[1],
                                                  settings.model_dir, taken)
                     if record.host_call is not None and chief else None)
        if host_call is not None and settings.config.save_summary_steps:
            taken = taken + host_call.names_taken()
        loss_tags = summaries_lib.legacy_loss_tags(taken, use_tpu=settings.use_tpu)
        if record.loss_summary_made and not settings.use_tpu:
            loss_tags = ()  # Legacy's Estimator added none: model_fn's `loss` is written.
        rules = summaries_lib.TrainSummaryRules.legacy(
            use_tpu=settings.use_tpu,
            on_tpu=isinstance(self._runtime.strategy, tf.distribute.TPUStrategy),
            save_summary_steps=settings.config.save_summary_steps,
            log_step_count_steps=settings.config.log_step_count_steps,
            iterations_per_loop=settings.iterations_per_loop,
            examples_per_step=self._plan.global_batch_size,
            loss_tags=loss_tags)
        return _TrainReporting(
            summaries_lib.TrainSummaries(settings.model_dir if chief else None, rules),
            host_call, self._host_call_every_n())

    def _host_call_every_n(self) -> int:
        """Steps between host_call outfeeds within a loop.

        Legacy's TPU outfeed honoured `experimental_host_call_every_n_steps`; its CPU path
        (use_tpu=False, `_OutfeedHostCallHook`) ran the host_call with every step.
        """
        if not self._settings.use_tpu:
            return 1
        return self._settings.config.tpu_config.experimental_host_call_every_n_steps or 1

    def _train_loop(self, iterator: Any, source: inputs_lib.DistributedInput,
                    hook_tensors: HookTensors = ()
                    ) -> tuple[loop_lib.TrainLoop, replica_step.TraceRecord]:
        """The compiled train loop for this runtime, batch plan and kind of input, traced.

        A model_fn's host_call is only known once it has been traced; when it has one, the
        loop is built and traced again with the host_call tensors as outputs. An endless
        input gets a loop without end-of-input checks (`make_multi_step_train_fn`); other
        input keeps its fixed batch shapes through them (`plumbing.FixedBatches`).
        `hook_tensors` ((name, dtype) pairs) are model_fn tensors SessionRunHooks fetch,
        returned for every step. With `use_tpu=False` model_fn's v1 summary ops are written
        as legacy's CPU path wrote them (with the loss summary, every `save_summary_steps`):
        when the trace made some, the loop is built and traced again returning them per step.
        Both loops call one `loop.train_loop.TracedTrainStep`, traced once: model_fn runs
        once per call of this method, as legacy built one graph per `train()` (a loop for
        new `hook_tensors` is a new step, traced again).
        """
        runtime, plan = self._runtime, self._plan
        endless = source.endless
        key = (ModeKeys.TRAIN, plan, endless, hook_tensors, source.spec_key)
        if key in runtime.functions:
            return runtime.functions[key]
        record = replica_step.TraceRecord()
        caller = self._settings.caller(plan)
        traced = loop_lib.TracedTrainStep(
            runtime.strategy, source.wrap_step(replica_step.make_train_step(
                caller, runtime.registry, runtime.global_step, plan.for_model_fn,
                record=record, hook_tensor_names=tuple(name for name, _ in hook_tensors),
                write_summaries=not self._settings.use_tpu)),
            endless=endless, input_spec=source.replica_spec,
            legacy_loss_reporting=self._plan.plain and not self._settings.use_tpu)

        def build(specs: list[tf.TensorSpec] | None, emit_summaries: bool = False) -> Any:
            return loop_lib.make_multi_step_train_fn(
                runtime.strategy, traced, host_call_specs=specs,
                host_call_every_n=self._host_call_every_n(), global_step=runtime.global_step,
                hook_tensor_dtypes=[dtype for _, dtype in hook_tensors],
                emit_summaries=emit_summaries)

        train_loop = build(None)
        train_loop.trace(iterator)
        emit_summaries = (record.model_summaries
                          and bool(self._settings.config.save_summary_steps))
        if record.host_call is not None or emit_summaries:
            specs = ([tf.TensorSpec([None] + t.shape[1:].as_list(), t.dtype)
                      for t in tf.nest.flatten(record.host_call[1])]
                     if record.host_call is not None else None)
            train_loop = build(specs, emit_summaries)
            train_loop.trace(iterator)
        runtime.functions[key] = (train_loop, record)
        return runtime.functions[key]

    def _initialize_from_elsewhere(self, init_plan: warm_start_lib.InitPlan,
                                   init_fn_scaffold: Any) -> None:
        """No checkpoint in model_dir: apply init_from_checkpoint (model_fn's and
        scaffold_fn's), warm start, then the Scaffold's init_fn.

        In TF1 the first two were initializers and init_fn ran after the init op, so they
        only ever mattered for a fresh model_dir.
        """
        variables = self._runtime.registry.by_name()
        init_plan.apply(variables)
        if self._settings.warm_start_from is not None:
            warm_start_lib.warm_start(self._settings.warm_start_from, variables,
                                      self._runtime.registry.trainable_names())
        scaffold_parts.run_init_fn(init_fn_scaffold, variables)


class _HookListener:
    """Adapts the hook runner to the driver's loop listener interface."""

    observes_diverged_runs = True  # Hooks see a diverged loop before the NaN error.

    def __init__(self, runner: hooks_lib.HookRunner) -> None:
        self._runner = runner

    def before_loop(self, step: int) -> None:
        self._runner.before_loop(step)

    def after_loop(self, step: int, result: loop_lib.LoopResult, seconds: float) -> bool:
        del seconds
        return self._runner.after_loop(step, result.losses, result.hook_tensors,
                                       starts=result.starts(step))

    def close(self) -> None:
        pass


class _TrainReporting:
    """Per-loop host work during train: legacy summaries and host_call.

    host_call runs once per outfed step, at the global step that step started from (the
    value its own global-step tensors carry, as in legacy).
    """

    def __init__(self, summaries: summaries_lib.TrainSummaries,
                 host_call: summaries_lib.HostCallRunner | None, every_n: int) -> None:
        self._summaries = summaries
        self._host_call = host_call
        self._every_n = every_n

    def after_loop(self, step: int, result: loop_lib.LoopResult, seconds: float) -> None:
        starts = result.starts(step)
        if self._host_call is not None:
            for k, values in enumerate(result.host_calls):
                self._host_call.run(values, int(starts[k * self._every_n]))
        self._summaries.after_loop(step, result.losses, time.time(), seconds,
                                   starts=starts, summaries=result.summaries)

    def close(self) -> None:
        self._summaries.close()
        if self._host_call is not None:
            self._host_call.close()
