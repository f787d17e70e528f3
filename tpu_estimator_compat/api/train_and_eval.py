"""`train_and_evaluate`: each task of a job plays its role, through one `TrainingExecutor`.

Synopsis::

    metrics, exports = train_and_evaluate(estimator, TrainSpec(...), EvalSpec(...))  # local
    TrainingExecutor(estimator, train_spec, eval_spec).run()   # what it runs on every task

Legacy's `training._TrainingExecutor` decided, from `RunConfig`, what this process does, and
this module keeps its contract (tensorflow-estimator's own tests drive it at
`tensorflow_estimator.python.estimator.training._TrainingExecutor`):

* no cluster (`run_local`): train once, with a saving listener that evaluates and exports
  after every checkpoint but the first (the untrained model), at most once per
  `EvalSpec.throttle_secs`, and evaluates the final checkpoint at the end if that was not
  evaluated yet; returns (the last evaluation's metrics, its export results);
* `chief` / `worker`: train (only the chief with `TrainSpec.saving_listeners`);
* `master`: train as the chief, evaluating from a saving listener as locally;
* `evaluator`: `evaluator.ContinuousEvaluation`, until training's last checkpoint;
* `ps`: serve the training.
On a cluster the call returns None (legacy: "undefined for distributed training mode").

Training, evaluating and exporting are `estimator.train/evaluate/export_saved_model` and
the exporters; this module knows nothing else about them. Servers are the engine's: legacy
started a `tf.distribute.Server` here before training, whereas the strategy that
`estimator.train` runs on a cluster (MultiWorkerMirroredStrategy, or ParameterServerStrategy
whose workers and ps tasks serve inside `train()` until the chief is done) starts its own.
So the executor only checks what legacy's server start checked (a cluster, a task type and
id, a master address unless the cluster is this one trainer) with legacy's messages, and
does not delay workers: legacy staggered the start of asynchronous workers' own training
loops by (task id + 1) * 5 s, after their servers were up; here a ps cluster's worker runs no
loop of its own (the chief schedules its steps), so a sleep would only hold back its server
and the chief with it, and a synchronous worker waits for all others anyway (legacy's
collective path, the distribute coordinator, did not delay workers either).
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import tensorflow as tf

from tpu_estimator_compat.api import estimator as estimator_lib
from tpu_estimator_compat.api import evaluator as evaluator_lib
from tpu_estimator_compat.api import exporters as exporters_lib
from tpu_estimator_compat.api import train_specs
from tpu_estimator_compat.v1_state import eager_scope
from tpu_estimator_compat import log as logging

# The public names of legacy's `training` module, defined in their own modules.
TrainSpec = train_specs.TrainSpec
EvalSpec = train_specs.EvalSpec
Exporter = exporters_lib.Exporter
LatestExporter = exporters_lib.LatestExporter
BestExporter = exporters_lib.BestExporter

_TRAINER_JOBS = ("chief", "master", "worker")
_GLOBAL_STEP = "global_step"


class StopAtSecsHook(tf.compat.v1.train.SessionRunHook):
    """Requests a stop once `stop_after_secs` have passed since `begin`."""

    def __init__(self, stop_after_secs: float) -> None:
        self._stop_after_secs = stop_after_secs
        self._start_time: float | None = None

    def begin(self) -> None:
        self._start_time = time.time()

    def after_run(self, run_context: Any, run_values: Any) -> None:
        del run_values
        if time.time() - self._start_time >= self._stop_after_secs:
            run_context.request_stop()


class NewCheckpointListenerForEvaluate(tf.compat.v1.train.CheckpointSaverListener):
    """Evaluates and exports after checkpoints while training, throttled (legacy's listener).

    `after_save` returning True stops training: when the `ContinuousEvalListener` says so.
    """

    def __init__(self, evaluator: evaluator_lib.Evaluator, eval_throttle_secs: float,
                 continuous_eval_listener: evaluator_lib.ContinuousEvalListener) -> None:
        self._evaluator = evaluator
        self._eval_throttle_secs = eval_throttle_secs
        self._continuous_eval_listener = continuous_eval_listener
        self.eval_result: evaluator_lib.EvalResult | None = None
        self.export_results: list[Any] | None = None
        self._timer: Any = None
        self._is_first_run = True

    def begin(self) -> None:
        self._timer = tf.compat.v1.train.SecondOrStepTimer(every_secs=self._eval_throttle_secs)
        self._is_first_run = True

    def after_save(self, session: Any, global_step_value: int) -> bool | None:
        del session
        if self._is_first_run:  # The first checkpoint is the untrained model.
            self._is_first_run = False
            return None
        if not self._continuous_eval_listener.before_eval():
            logging.legacy_info("Exiting training and evaluation loop, as requested by "
                                "_ContinuousEvalListener.before_eval.")
            return True
        if not self._timer.should_trigger_for_step(global_step_value):
            logging.legacy_info("Skip the current checkpoint eval due to throttle secs "
                                "(%s secs).", self._eval_throttle_secs)
            return None
        self._evaluate(global_step_value)
        if not self._continuous_eval_listener.after_eval(self.eval_result):
            logging.legacy_info("Exiting evaluation, as requested by "
                                "_ContinuousEvalListener.after_eval.")
            return True
        return None

    def end(self, session: Any, global_step_value: int) -> None:
        del session
        if global_step_value == self._timer.last_triggered_step():
            return  # The last checkpoint was evaluated already.
        if self._continuous_eval_listener.before_eval():
            self._evaluate(global_step_value)
            self._continuous_eval_listener.after_eval(self.eval_result)

    def _evaluate(self, global_step_value: int) -> None:
        self._timer.update_last_triggered_step(global_step_value)
        self.eval_result, self.export_results = self._evaluator.evaluate_and_export()
        if self.eval_result.status != evaluator_lib.EvalStatus.EVALUATED:
            # Training always ends with a new checkpoint, so this cannot happen.
            raise RuntimeError("There was no new checkpoint after the training. Eval status: "
                               f"{self.eval_result.status}")


class TrainingExecutor:
    """Runs this task's part of `train_and_evaluate` (see the module docstring)."""

    def __init__(self, estimator: Any, train_spec: TrainSpec, eval_spec: EvalSpec | None,
                 train_hooks: Sequence[Any] | None = None,
                 continuous_eval_listener: evaluator_lib.ContinuousEvalListener | None = None
                 ) -> None:
        if not isinstance(estimator, estimator_lib.Estimator):
            raise TypeError("`estimator` must have type `tf.estimator.Estimator`. "
                            f"Got: {type(estimator)}")
        if not isinstance(train_spec, TrainSpec):
            raise TypeError("`train_spec` must have type `tf.estimator.TrainSpec`. "
                            f"Got: {type(train_spec)}")
        if eval_spec and not isinstance(eval_spec, EvalSpec):
            raise TypeError("`eval_spec` must be either `None` or have type "
                            f"`tf.estimator.EvalSpec`. Got: {type(eval_spec)}")
        if continuous_eval_listener and not isinstance(
                continuous_eval_listener, evaluator_lib.ContinuousEvalListener):
            raise TypeError("`continuous_eval_listener` must have type "
                            "`_ContinuousEvalListener`.")
        self._estimator = estimator
        self._train_spec = train_spec
        self._eval_spec = eval_spec
        self._train_hooks = train_specs.validate_hooks(train_hooks)
        self._continuous_eval_listener = (continuous_eval_listener
                                          or evaluator_lib.ContinuousEvalListener())

    @property
    def estimator(self) -> Any:
        return self._estimator

    def run(self) -> tuple[dict[str, Any] | None, list[Any] | None] | None:
        """Runs `run_<task type>` (`run_local` without a cluster); see the module doc."""
        config = self._estimator.config
        if not config.cluster_spec and config.task_type != "evaluator":
            logging.legacy_info("Running training and evaluation locally (non-distributed).")
            return self.run_local()
        if not config.task_type:
            raise ValueError("`estimator.config` must have task_type set. This usually means "
                             "TF_CONFIG environment is not set correctly.")
        if config.task_type == "local":
            raise ValueError(
                "`task.type` in TF_CONFIG cannot be `local`. Leaving `cluster` and `task` "
                "properties in TF_CONFIG absent triggers train and evaluate `Estimator` "
                "locally (non-distributed).")
        tasks = [name for name in dir(self) if name.startswith("run_") and name != "run_local"
                 and callable(getattr(self, name))]
        if f"run_{config.task_type}" not in tasks:
            raise ValueError(f"Task type {config.task_type} is not supported. Supported task "
                             f"types are {[name[len('run_'):] for name in tasks]}")
        getattr(self, f"run_{config.task_type}")()
        return None

    def run_chief(self) -> None:
        """Trains, with the saving listeners (only the chief saves checkpoints)."""
        self._train_on_cluster(saving_listeners=self._train_spec.saving_listeners)

    def run_worker(self) -> None:
        """Trains with the chief."""
        self._train_on_cluster()

    def run_master(self) -> None:
        """Trains as the chief and evaluates after its checkpoints, as `run_local` does."""
        train_specs.assert_eval_spec(self._eval_spec)
        config = self._estimator.config
        _check_cluster(config)
        if _training_tasks(config.cluster_spec) > 1:
            # With ps tasks training runs in ParameterServerStrategy's scope, where the
            # evaluation's own strategy cannot be entered; without them the other workers
            # would wait in the collectives of an evaluation they do not run.
            raise NotImplementedError(
                "train_and_evaluate on a `master` task of a cluster with other tasks "
                "(legacy's run_master: train, and evaluate after each checkpoint in the same "
                "process) is not supported. Rename the job `master` to `chief` in TF_CONFIG "
                "and evaluate in an `evaluator` task, or call estimator.train() and then "
                "estimator.evaluate() (both work on a master task).")
        listener = NewCheckpointListenerForEvaluate(
            evaluator_lib.Evaluator(self._estimator, self._eval_spec,
                                    self._train_spec.max_steps),
            self._eval_spec.throttle_secs, evaluator_lib.ContinuousEvalListener())
        self._train_on_cluster(
            saving_listeners=tuple(self._train_spec.saving_listeners) + (listener,))

    def run_evaluator(self) -> None:
        """Evaluates each new checkpoint until training's last (`ContinuousEvaluation`)."""
        evaluator_lib.ContinuousEvaluation(self._estimator, self._eval_spec,
                                           self._train_spec.max_steps,
                                           self._continuous_eval_listener).run()

    def run_ps(self) -> None:
        """Serves the training: the engine's `train()` serves on a ps task until it ends."""
        _check_cluster(self._estimator.config)
        # No hooks or listeners: a ps task runs no training step of its own.
        self._estimator.train(input_fn=self._train_spec.input_fn,
                              max_steps=self._train_spec.max_steps)

    def run_local(self) -> tuple[dict[str, Any] | None, list[Any] | None]:
        """Trains once, evaluating after checkpoints; (last metrics, last export results)."""
        train_specs.assert_eval_spec(self._eval_spec)
        config = self._estimator.config
        logging.legacy_info(
            "Start train and evaluate loop. The evaluate will happen after every checkpoint. "
            "Checkpoint frequency is determined based on RunConfig arguments: "
            "save_checkpoints_steps %s or save_checkpoints_secs %s.",
            config.save_checkpoints_steps, config.save_checkpoints_secs)
        listener = NewCheckpointListenerForEvaluate(
            evaluator_lib.Evaluator(self._estimator, self._eval_spec,
                                    self._train_spec.max_steps),
            self._eval_spec.throttle_secs, self._continuous_eval_listener)
        self._estimator.train(
            input_fn=self._train_spec.input_fn, max_steps=self._train_spec.max_steps,
            hooks=list(self._train_spec.hooks) + list(self._train_hooks),
            saving_listeners=tuple(self._train_spec.saving_listeners) + (listener,))
        result = listener.eval_result or evaluator_lib.EvalResult(
            evaluator_lib.EvalStatus.MISSING_CHECKPOINT)
        return result.metrics, listener.export_results

    def _train_on_cluster(self, saving_listeners: Sequence[Any] | None = None) -> None:
        _check_cluster(self._estimator.config)
        self._estimator.train(
            input_fn=self._train_spec.input_fn, max_steps=self._train_spec.max_steps,
            hooks=list(self._train_spec.hooks) + list(self._train_hooks),
            saving_listeners=saving_listeners)


def _training_tasks(cluster_spec: tf.train.ClusterSpec) -> int:
    return sum(len(cluster_spec.job_tasks(job)) for job in cluster_spec.jobs
               if job != "evaluator")


def _check_cluster(config: Any) -> None:
    """What this task's server needs, checked as legacy did before starting one."""
    if not config.cluster_spec or not config.task_type or config.task_id is None:
        raise RuntimeError("Could not start server; be sure to specify cluster_spec, "
                           "task_type, and task in RunConfig or set the TF_CONFIG environment "
                           "variable.")
    if config.master:
        return
    jobs = config.cluster_spec.jobs
    if (len(jobs) == 1 and len(config.cluster_spec.job_tasks(jobs[0])) == 1
            and config.task_type in _TRAINER_JOBS):
        return  # A cluster of this one trainer: no server, as legacy.
    raise RuntimeError("Could not start server; be sure to specify master in RunConfig or "
                       "set the TF_CONFIG environment variable.")


@eager_scope.eager_entry_point
def train_and_evaluate(estimator: Any, train_spec: TrainSpec,
                       eval_spec: EvalSpec) -> tuple[dict[str, Any] | None, Any] | None:
    """Trains and evaluates as this task's role says; see the module docstring.

    Returns (the last evaluation's metrics, its export results) on one machine, None on a
    cluster.
    """
    train_specs.assert_eval_spec(eval_spec)  # Fail fast, before anything is built.
    executor = TrainingExecutor(estimator=estimator, train_spec=train_spec,
                                eval_spec=eval_spec)
    config = estimator.config
    if config.task_type == "evaluator" and config.task_id > 0:
        raise ValueError(
            "For distributed training, there can only be one `evaluator` task (with task id "
            f"0).  Given task id {config.task_id}")
    return executor.run()
