"""Evaluating a model_dir's newest checkpoint, once or continuously, and exporting it.

Synopsis::

    evaluator = Evaluator(estimator, eval_spec, max_training_steps=1000)
    result, exports = evaluator.evaluate_and_export()   # result.status: EvalStatus.*
    ContinuousEvaluation(estimator, eval_spec, max_steps=1000).run()   # the evaluator task

`Evaluator` is one evaluation pass as legacy's `train_and_evaluate` made it: take
`estimator.latest_checkpoint()`; when there is none, or it is the one evaluated last time,
say so (a warning at most every 10 minutes) and return that status; otherwise evaluate it
(`EvalSpec.steps`, `name`, `hooks`; events under `model_dir/eval[_name]`), check the result
(a non-empty dict with `global_step`), and run the exporters into
`model_dir/export/<exporter name>` (`is_the_final_export` once `global_step` reached the
training's `max_steps`). The local run calls it from a saving listener after checkpoints;
the `evaluator` task of a cluster runs `ContinuousEvaluation`: wait `start_delay_secs`, then
pass after pass, each at least `throttle_secs` from the start of the one before, until a
pass evaluated a checkpoint of step >= `max_steps` (never, without `max_steps`). A
`ContinuousEvalListener` hears each pass and may stop the loop (`before_eval`/`after_eval`
returning False). Checkpoints written between two passes are skipped, as in legacy.

Unlike legacy, a checkpoint the trainer deleted (`keep_checkpoint_max`) between the moment
it was found and the moment it was read is skipped with a warning instead of ending the job.

This module knows the estimator's public `evaluate`/`latest_checkpoint`/`model_dir` only.
Its clock and sleep are `time.time`/`time.sleep`, looked up at each call as legacy did (a
test replaces them with `mock.patch.object(time, ...)`), or passed in.
"""

from __future__ import annotations

import collections
import os
import time
from typing import Any, Callable

import tensorflow as tf

from tpu_estimator_compat.api import train_specs
from tpu_estimator_compat import log as logging

_WARN_EVERY_SECS = 600  # Legacy repeated "no checkpoint yet" warnings at most every 10 min.
_GLOBAL_STEP = "global_step"


def _now() -> float:
    return time.time()


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


class EvalStatus:
    """What one evaluation pass found (legacy `training._EvalStatus`)."""

    EVALUATED = "evaluated"
    MISSING_CHECKPOINT = "missing checkpoint"
    NO_NEW_CHECKPOINT = "no new checkpoint"


class EvalResult(collections.namedtuple("EvalResult",
                                        ["status", "metrics", "checkpoint_path"])):
    """One pass's status, and for an evaluated checkpoint its metrics and path, checked."""

    def __new__(cls, status: str, metrics: dict[str, Any] | None = None,
                checkpoint_path: str | None = None) -> "EvalResult":
        if status != EvalStatus.EVALUATED:
            if metrics:
                raise ValueError(f"metrics must be `None` if status is not "
                                 f"{EvalStatus.EVALUATED}; got status {status}, metrics "
                                 f"{metrics}")
            if checkpoint_path:
                raise ValueError(f"checkpoint must be `None` if status is not "
                                 f"{EvalStatus.EVALUATED}; got status {status}, "
                                 f"checkpoint_path {checkpoint_path}")
            return super().__new__(cls, status, metrics, checkpoint_path)
        if not metrics:
            raise ValueError("Internal error: `Estimator.evaluate` should never return empty "
                             "metrics.")
        if not isinstance(metrics, dict):
            raise TypeError(f"`Estimator.evaluate` should return dict. Given {type(metrics)}.")
        if _GLOBAL_STEP not in metrics:
            raise ValueError("Internal error: `Estimator.evaluate` result should have "
                             f"`global_step` in result. Given {metrics}")
        if not checkpoint_path:
            raise ValueError("Internal error: `checkpoint_path` should never be empty.")
        return super().__new__(cls, status, metrics, checkpoint_path)


class ContinuousEvalListener:
    """Hears every evaluation pass (legacy `training._ContinuousEvalListener`)."""

    def before_eval(self) -> bool:
        """Called before a pass; False skips it and stops evaluating."""
        return True

    def after_eval(self, eval_result: EvalResult) -> bool:
        """Called after a pass with its `EvalResult`; False stops evaluating."""
        del eval_result
        return True


class Evaluator:
    """Evaluates and exports the newest checkpoint of one estimator's model_dir, if new."""

    def __init__(self, estimator: Any, eval_spec: train_specs.EvalSpec,
                 max_training_steps: int | None, *,
                 clock: Callable[[], float] = _now) -> None:
        train_specs.assert_eval_spec(eval_spec)
        self._estimator = estimator
        self._spec = eval_spec
        self._max_steps = max_training_steps
        self._clock = clock
        self._previous: str | None = None
        self._last_warning: float | None = None
        self.is_final_export_triggered = False

    def evaluate_and_export(self) -> tuple[EvalResult, list[Any]]:
        """One pass: the result (its status says whether it evaluated) and the exports."""
        latest = self._estimator.latest_checkpoint()
        if not latest:
            self._warn("Estimator is not trained yet. Will start an evaluation when a "
                       "checkpoint is ready.")
            return EvalResult(EvalStatus.MISSING_CHECKPOINT), []
        if latest == self._previous:
            self._warn("No new checkpoint ready for evaluation. Skip the current evaluation "
                       "pass as evaluation results are expected to be same for the same "
                       "checkpoint.")
            return EvalResult(EvalStatus.NO_NEW_CHECKPOINT), []
        logging.info("Found new checkpoint to evaluate: %s", latest)
        metrics = self._evaluate(latest)
        if metrics is None:
            return EvalResult(EvalStatus.NO_NEW_CHECKPOINT), []
        result = EvalResult(EvalStatus.EVALUATED, metrics=metrics, checkpoint_path=latest)
        final = bool(self._max_steps) and metrics[_GLOBAL_STEP] >= self._max_steps
        exports = self._export(result, final)
        self.is_final_export_triggered |= final
        self._last_warning = None
        self._previous = latest
        return result, exports

    def _evaluate(self, checkpoint: str) -> Any:
        try:
            return self._estimator.evaluate(input_fn=self._spec.input_fn, steps=self._spec.steps,
                                            name=self._spec.name, checkpoint_path=checkpoint,
                                            hooks=self._spec.hooks)
        except (tf.errors.NotFoundError, ValueError) as e:
            if tf.io.gfile.exists(checkpoint + ".index"):
                raise
            logging.warning("Checkpoint %s was deleted by the trainer before it could be "
                            "evaluated (it keeps only `keep_checkpoint_max` checkpoints); "
                            "evaluating the next one instead. (%s)", checkpoint, e)
            self._previous = checkpoint
            return None

    def _export(self, result: EvalResult, is_the_final_export: bool) -> list[Any]:
        base = os.path.join(tf.compat.as_str_any(self._estimator.model_dir), "export")
        return [exporter.export(estimator=self._estimator,
                                export_path=os.path.join(base,
                                                         tf.compat.as_str_any(exporter.name)),
                                checkpoint_path=result.checkpoint_path,
                                eval_result=result.metrics,
                                is_the_final_export=is_the_final_export)
                for exporter in self._spec.exporters]

    def _warn(self, message: str) -> None:
        now = self._clock()
        if self._last_warning is None or now - self._last_warning > _WARN_EVERY_SECS:
            logging.legacy_warning(message)
            self._last_warning = now


class ContinuousEvaluation:
    """The `evaluator` task's loop over one estimator's model_dir (see the module doc)."""

    def __init__(self, estimator: Any, eval_spec: Any, max_steps: int | None,
                 listener: ContinuousEvalListener | None = None, *,
                 clock: Callable[[], float] = _now,
                 sleep: Callable[[float], None] = _sleep) -> None:
        self._estimator = estimator
        self._spec = eval_spec
        self._max_steps = max_steps
        self._listener = listener or ContinuousEvalListener()
        self._clock = clock
        self._sleep = sleep
        self.results: list[EvalResult] = []  # Every pass's result, in order.

    def run(self) -> EvalResult | None:
        """Evaluates until a pass reaches max_steps or the listener stops; the last result."""
        train_specs.assert_eval_spec(self._spec)
        if self._spec.start_delay_secs:
            logging.legacy_info("Waiting %f secs before starting eval.",
                                self._spec.start_delay_secs)
            self._sleep(self._spec.start_delay_secs)
        evaluator = Evaluator(self._estimator, self._spec, self._max_steps, clock=self._clock)
        latest: EvalResult | None = None
        while True:
            if latest is not None and latest.status == EvalStatus.EVALUATED:
                step = latest.metrics.get(_GLOBAL_STEP)
                if step and self._max_steps and step >= self._max_steps:
                    logging.legacy_info("Exiting evaluation, global_step=%s >= train "
                                        "max_steps=%s", step, self._max_steps)
                    return latest
            result, stop = self._pass(evaluator)
            latest = result or latest
            if stop:
                return latest

    def _pass(self, evaluator: Evaluator) -> tuple[EvalResult | None, bool]:
        """One pass and the wait after it: (its result, whether to stop)."""
        start = self._clock()
        if not self._listener.before_eval():
            logging.legacy_info("Exiting evaluation, as requested by "
                                "_ContinuousEvalListener.before_eval.")
            return None, True
        result, _ = evaluator.evaluate_and_export()
        self.results.append(result)
        if not self._listener.after_eval(result):
            logging.legacy_info("Exiting evaluation, as requested by "
                                "_ContinuousEvalListener.after_eval.")
            return result, True
        remaining = self._spec.throttle_secs - (self._clock() - start)
        if remaining > 0:
            logging.legacy_info("Waiting %f secs before starting next eval run.", remaining)
            self._sleep(remaining)
        elif self._spec.throttle_secs == 0 and result.status != EvalStatus.EVALUATED:
            logging.legacy_warning(
                "EvalSpec.throttle_secs is set as 0. This might overload the job before "
                "finding (next) new checkpoint. Please consider to increase it.")
        return result, False
