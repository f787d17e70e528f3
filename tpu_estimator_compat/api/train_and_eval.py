"""`train_and_evaluate`, with `TrainSpec`, `EvalSpec` and exporters, on one machine or a cluster.

Legacy's local mode trained once and evaluated from a CheckpointSaverListener: after every
checkpoint except the first (the untrained model), if `EvalSpec.throttle_secs` had passed
since the last evaluation, it evaluated that checkpoint and ran the exporters; at the end it
evaluated the final checkpoint if that had not been evaluated yet. On a `TF_CONFIG` cluster
each task played its role (`_TrainingExecutor.run_<task type>`): the chief and the workers
trained (only the chief with `TrainSpec.saving_listeners`), ps tasks served, the `evaluator`
task evaluated each new checkpoint (`evaluator.py`), and the call returned None. This module
does the same on top of `TPUEstimator.train/evaluate/export_saved_model`; it knows nothing
else about them, and leaves strategies and serving to the estimator.
"""

from __future__ import annotations

import collections
import os
import time
from typing import Any, Callable, Sequence

import tensorflow as tf

from tpu_estimator_compat.v1_state import eager_scope
from tpu_estimator_compat.api import evaluator as evaluator_lib
from tpu_estimator_compat import log as logging


class TrainSpec(collections.namedtuple("TrainSpec", [
        "input_fn", "max_steps", "hooks", "saving_listeners"])):
    """Legacy `tf.estimator.TrainSpec`."""

    def __new__(cls, input_fn: Callable[..., Any], max_steps: int | None = None,
                hooks: Sequence[Any] | None = None,
                saving_listeners: Sequence[Any] | None = None) -> "TrainSpec":
        if not callable(input_fn):
            raise TypeError(f"`input_fn` must be callable, given: {input_fn!r}.")
        if max_steps is not None and max_steps <= 0:
            raise ValueError(f"Must specify max_steps > 0, given: {max_steps}")
        return super().__new__(cls, input_fn, max_steps, tuple(hooks or ()),
                               tuple(saving_listeners or ()))


class EvalSpec(collections.namedtuple("EvalSpec", [
        "input_fn", "steps", "name", "hooks", "exporters", "start_delay_secs",
        "throttle_secs"])):
    """Legacy `tf.estimator.EvalSpec`."""

    def __new__(cls, input_fn: Callable[..., Any], steps: int | None = 100,
                name: str | None = None, hooks: Sequence[Any] | None = None,
                exporters: Any = None, start_delay_secs: int = 120,
                throttle_secs: int = 600) -> "EvalSpec":
        if not callable(input_fn):
            raise TypeError(f"`input_fn` must be callable, given: {input_fn!r}.")
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        if throttle_secs < 0:
            raise ValueError(f"Must specify throttle_secs >= 0, given: {throttle_secs}")
        if exporters is None:
            exporters = ()
        elif not isinstance(exporters, (list, tuple)):
            exporters = (exporters,)
        names = [e.name for e in exporters]
        if len(set(names)) != len(names):
            raise ValueError(f"`exporters` must have unique names. Given names: {names}.")
        return super().__new__(cls, input_fn, steps, name, tuple(hooks or ()),
                               tuple(exporters), start_delay_secs, throttle_secs)


class Exporter:
    """Legacy `tf.estimator.Exporter` interface."""

    @property
    def name(self) -> str:
        raise NotImplementedError

    def export(self, estimator: Any, export_path: str, checkpoint_path: str,
               eval_result: dict[str, Any], is_the_final_export: bool) -> bytes | None:
        raise NotImplementedError


class LatestExporter(Exporter):
    """Exports every evaluated checkpoint, keeping the newest `exports_to_keep`."""

    def __init__(self, name: str, serving_input_receiver_fn: Callable[[], Any],
                 assets_extra: dict[str, str] | None = None, as_text: bool = False,
                 exports_to_keep: int | None = 5) -> None:
        if not name:
            raise ValueError("`name` must be a non-empty string.")
        self._name = name
        self._receiver_fn = serving_input_receiver_fn
        self._assets_extra = assets_extra
        self._as_text = as_text
        self._keep = exports_to_keep

    @property
    def name(self) -> str:
        return self._name

    def export(self, estimator: Any, export_path: str, checkpoint_path: str,
               eval_result: dict[str, Any], is_the_final_export: bool) -> bytes:
        path = estimator.export_saved_model(export_path, self._receiver_fn,
                                            assets_extra=self._assets_extra,
                                            as_text=self._as_text,
                                            checkpoint_path=checkpoint_path)
        _garbage_collect(export_path, self._keep)
        return path


class BestExporter(LatestExporter):
    """Exports only when the evaluation beats every earlier one (default: lower `loss`)."""

    def __init__(self, name: str = "best_exporter",
                 serving_input_receiver_fn: Callable[[], Any] | None = None,
                 event_file_pattern: str = "eval/*.tfevents.*",
                 compare_fn: Callable[[dict, dict], bool] | None = None,
                 assets_extra: dict[str, str] | None = None, as_text: bool = False,
                 exports_to_keep: int | None = 5) -> None:
        if serving_input_receiver_fn is None:
            raise ValueError("`serving_input_receiver_fn` must be given to BestExporter.")
        super().__init__(name, serving_input_receiver_fn, assets_extra, as_text,
                         exports_to_keep)
        self._compare = compare_fn or _loss_smaller
        self._best: dict[str, Any] | None = None
        del event_file_pattern  # Legacy re-read past results from events; we keep them.

    def export(self, estimator: Any, export_path: str, checkpoint_path: str,
               eval_result: dict[str, Any], is_the_final_export: bool) -> bytes | None:
        if self._best is not None and not self._compare(self._best, eval_result):
            return None
        self._best = dict(eval_result)
        return super().export(estimator, export_path, checkpoint_path, eval_result,
                              is_the_final_export)


def _loss_smaller(best_eval_result: dict[str, Any], current_eval_result: dict[str, Any]) -> bool:
    if "loss" not in best_eval_result or "loss" not in current_eval_result:
        raise ValueError("best_eval_result and current_eval_result cannot be empty or no "
                         "loss is found in it.")
    return best_eval_result["loss"] > current_eval_result["loss"]


def _garbage_collect(export_path: str, keep: int | None) -> None:
    if not keep or not tf.io.gfile.exists(export_path):
        return
    stamps = sorted(d for d in tf.io.gfile.listdir(export_path) if d.strip("/").isdigit())
    for stale in stamps[:-keep]:
        tf.io.gfile.rmtree(os.path.join(export_path, stale))


class _EvaluateAfterSave(tf.compat.v1.train.CheckpointSaverListener):
    """Evaluates and exports after checkpoints, throttled, as legacy's local executor did."""

    def __init__(self, estimator: Any, eval_spec: EvalSpec, max_steps: int | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._estimator = estimator
        self._spec = eval_spec
        self._max_steps = max_steps
        self._clock = clock
        self._first = True
        self._last_eval_time: float | None = None
        self._last_step: int | None = None
        self.eval_result: dict[str, Any] | None = None
        self.export_results: list[Any] = []

    def after_save(self, session: Any, global_step_value: int) -> None:
        if self._first:  # The first checkpoint is the untrained model.
            self._first = False
            return
        now = self._clock()
        if (self._last_eval_time is not None and
                now - self._last_eval_time < self._spec.throttle_secs):
            logging.legacy_info("Skip the current checkpoint eval due to throttle secs (%s secs).",
                                self._spec.throttle_secs)
            return
        self._evaluate(global_step_value)

    def end(self, session: Any, global_step_value: int) -> None:
        if self._last_step != global_step_value:
            self._evaluate(global_step_value)

    def _evaluate(self, step: int) -> None:
        checkpoint = self._estimator.latest_checkpoint()
        self.eval_result = self._estimator.evaluate(
            self._spec.input_fn, steps=self._spec.steps, checkpoint_path=checkpoint,
            name=self._spec.name, hooks=self._spec.hooks)
        self._last_eval_time = self._clock()
        self._last_step = step
        final = self._max_steps is not None and step >= self._max_steps
        # Legacy's listener kept the last evaluation's exports only, not every one's.
        self.export_results = evaluator_lib.run_exporters(
            self._estimator, self._spec, checkpoint, self.eval_result, final)


@eager_scope.eager_entry_point
def train_and_evaluate(estimator: Any, train_spec: TrainSpec,
                       eval_spec: EvalSpec) -> tuple[dict[str, Any] | None, list[Any]] | None:
    """Trains and evaluates as this task's role says; see the module docstring.

    Returns (last eval result, export results) on one machine, None on a cluster (legacy:
    "the return value is undefined for distributed training mode").
    """
    if not isinstance(train_spec, TrainSpec):
        raise TypeError(f"`train_spec` must have type `TrainSpec`. Got: {type(train_spec)}")
    if not isinstance(eval_spec, EvalSpec):
        raise TypeError(f"`eval_spec` must have type `EvalSpec`. Got: {type(eval_spec)}")
    config = estimator.config
    if config.task_type == "evaluator" and config.task_id > 0:
        raise ValueError(
            "For distributed training, there can only be one `evaluator` task (with task id "
            f"0).  Given task id {config.task_id}")
    if not config.cluster_spec and config.task_type != "evaluator":
        logging.legacy_info("Running training and evaluation locally (non-distributed).")
        return _run_local(estimator, train_spec, eval_spec)
    role = config.task_type
    logging.info("Running train_and_evaluate as task %s/%s of a cluster.", role, config.task_id)
    if role == "evaluator":
        evaluator_lib.ContinuousEvaluation(estimator, eval_spec, train_spec.max_steps).run()
        return None
    if role == "master":
        # Legacy's run_master evaluated inside training, from a saving listener. With ps tasks
        # training runs in ParameterServerStrategy's scope, where the evaluation's own
        # strategy cannot be entered; without them the other workers would wait in the
        # collectives of an evaluation they do not run.
        raise NotImplementedError(
            "train_and_evaluate on a `master` task (legacy's run_master: train, and evaluate "
            "after each checkpoint in the same process) is not supported. Rename the job "
            "`master` to `chief` in TF_CONFIG and evaluate in an `evaluator` task, or call "
            "estimator.train() and then estimator.evaluate() (both work on a master task).")
    if role not in ("chief", "worker", "ps"):
        raise ValueError(f"Task type {role} is not supported. Supported task types are "
                         "['chief', 'evaluator', 'master', 'ps', 'worker']")
    # A ps task (and a worker of a cluster with ps tasks) serves inside train() until the
    # chief has finished. Legacy delayed each async worker's start by (task_id + 1) * 5 s;
    # workers here either run synchronously (all wait for each other anyway) or are driven by
    # the chief, so none is delayed.
    estimator.train(train_spec.input_fn, max_steps=train_spec.max_steps,
                    hooks=list(train_spec.hooks),
                    saving_listeners=list(train_spec.saving_listeners)
                    if config.is_chief else None)
    return None


def _run_local(estimator: Any, train_spec: TrainSpec,
               eval_spec: EvalSpec) -> tuple[dict[str, Any] | None, list[Any]]:
    config = estimator.config
    logging.legacy_info("Start train and evaluate loop. The evaluate will happen after every "
                        "checkpoint. Checkpoint frequency is determined based on RunConfig "
                        "arguments: save_checkpoints_steps %s or save_checkpoints_secs %s.",
                        config.save_checkpoints_steps, config.save_checkpoints_secs)
    listener = _EvaluateAfterSave(estimator, eval_spec, train_spec.max_steps)
    estimator.train(train_spec.input_fn, max_steps=train_spec.max_steps,
                    hooks=list(train_spec.hooks),
                    saving_listeners=list(train_spec.saving_listeners) + [listener])
    if listener.eval_result is None:
        listener.end(None, int(estimator.get_variable_value("global_step")))
    return listener.eval_result, listener.export_results
