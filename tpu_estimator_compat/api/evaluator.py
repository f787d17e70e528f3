"""The evaluator task: evaluate each new checkpoint of model_dir until training's last one.

Synopsis::

    results, exports = ContinuousEvaluation(estimator, eval_spec, max_steps=1000).run()

Legacy `train_and_evaluate` ran this on the `evaluator` task of a cluster
(`_TrainingExecutor.run_evaluator`): wait `EvalSpec.start_delay_secs`, then over and over
take the latest checkpoint of model_dir; if it is new, evaluate it (`EvalSpec.steps`, `name`,
`hooks`; events under `model_dir/eval[_name]`) and run the exporters with it
(`is_the_final_export` once its global step reached `TrainSpec.max_steps`); stop after
evaluating a checkpoint of step >= max_steps (never, without max_steps); and wait out
`EvalSpec.throttle_secs` from the start of one pass to the next. Checkpoints written between
two passes are skipped, as in legacy: the evaluator follows training, it does not replay it.

Unlike legacy, a checkpoint the trainer deleted (`keep_checkpoint_max`) between the moment
it was found and the moment it was read is skipped with a warning instead of ending the job.

This module knows the estimator's public `evaluate`/`latest_checkpoint`/`model_dir` only, a
clock and a sleep (passed in, so the loop is tested without waiting).
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import tensorflow as tf

from tpu_estimator_compat.checkpoint import checkpoints as checkpoints_lib
from tpu_estimator_compat import log as logging

_WARN_EVERY_SECS = 600  # Legacy repeated "no checkpoint yet" warnings at most every 10 min.


def run_exporters(estimator: Any, eval_spec: Any, checkpoint: str, eval_result: dict[str, Any],
                  is_the_final_export: bool) -> list[Any]:
    """Runs each of `eval_spec.exporters` on one evaluated checkpoint, as legacy did after
    every evaluation, each into `model_dir/export/<exporter name>`; their results in order."""
    return [exporter.export(estimator, os.path.join(estimator.model_dir, "export", exporter.name),
                            checkpoint, eval_result, is_the_final_export)
            for exporter in eval_spec.exporters]


class ContinuousEvaluation:
    """Legacy's continuous evaluation loop over one estimator's model_dir."""

    def __init__(self, estimator: Any, eval_spec: Any, max_steps: int | None, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._estimator = estimator
        self._spec = eval_spec
        self._max_steps = max_steps
        self._clock = clock
        self._sleep = sleep
        self._previous: str | None = None
        self._last_warning: float | None = None
        self.evaluated: list[str] = []  # The checkpoints evaluated, in order.
        self.eval_result: dict[str, Any] | None = None
        self.export_results: list[Any] = []

    def run(self) -> tuple[dict[str, Any] | None, list[Any]]:
        """Evaluates new checkpoints until one reaches max_steps; returns the last result."""
        if self._spec.start_delay_secs:
            logging.legacy_info("Waiting %f secs before starting eval.",
                                self._spec.start_delay_secs)
            self._sleep(self._spec.start_delay_secs)
        while True:
            start = self._clock()
            step = self.evaluate_once()
            if step is not None and self._max_steps and step >= self._max_steps:
                logging.legacy_info("Exiting evaluation, global_step=%s >= train max_steps=%s",
                                    step, self._max_steps)
                return self.eval_result, self.export_results
            remaining = self._spec.throttle_secs - (self._clock() - start)
            if remaining > 0:
                logging.legacy_info("Waiting %f secs before starting next eval run.", remaining)
                self._sleep(remaining)
            elif self._spec.throttle_secs == 0 and step is None:
                logging.legacy_warning(
                    "EvalSpec.throttle_secs is set as 0. This might overload the job before "
                    "finding (next) new checkpoint. Please consider to increase it.")

    def evaluate_once(self) -> int | None:
        """Evaluates and exports the latest checkpoint if it is new; returns its global step.

        None when there was nothing new to evaluate (no checkpoint yet, the same one as last
        time, or it vanished before it could be read).
        """
        latest = self._estimator.latest_checkpoint()
        if not latest:
            self._warn("Estimator is not trained yet. Will start an evaluation when a "
                       "checkpoint is ready.")
            return None
        if latest == self._previous:
            self._warn("No new checkpoint ready for evaluation. Skip the current evaluation "
                       "pass as evaluation results are expected to be same for the same "
                       "checkpoint.")
            return None
        logging.info("Found new checkpoint to evaluate: %s", latest)
        try:
            result = self._estimator.evaluate(self._spec.input_fn, steps=self._spec.steps,
                                              name=self._spec.name, checkpoint_path=latest,
                                              hooks=self._spec.hooks)
        except (tf.errors.NotFoundError, ValueError) as e:
            if tf.io.gfile.exists(latest + ".index"):
                raise
            logging.warning("Checkpoint %s was deleted by the trainer before it could be "
                            "evaluated (it keeps only `keep_checkpoint_max` checkpoints); "
                            "evaluating the next one instead. (%s)", latest, e)
            self._previous = latest
            return None
        self._previous = latest
        self._last_warning = None
        self.evaluated.append(latest)
        self.eval_result = result
        step = int(result.get("global_step", checkpoints_lib.checkpoint_step(latest)))
        final = bool(self._max_steps) and step >= self._max_steps
        self.export_results = run_exporters(self._estimator, self._spec, latest, result, final)
        return step

    def _warn(self, message: str) -> None:
        now = self._clock()
        if self._last_warning is None or now - self._last_warning > _WARN_EVERY_SECS:
            logging.warning(message)
            self._last_warning = now
