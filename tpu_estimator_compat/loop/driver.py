"""The outer training loop: `iterations_per_loop` steps per host round trip, to the target.

Synopsis::

    driver = TrainDriver(run_steps=lambda n: train_loop(iterator, n),
                         read_step=lambda: int(global_step.numpy()), checkpoint=policy)
    driver.run(target_step=100, iterations_per_loop=10)

`while step < target: n = min(target - step, per_loop); run n; report; maybe checkpoint`.
The driver gets a step-runner, a global-step reader, a checkpoint policy and listeners; it
never sees a model, a dataset or a strategy (the compiled loop is `train_loop.py`'s).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Protocol, Sequence

import numpy as np

from tpu_estimator_compat import log as logging
from tpu_estimator_compat.loop import nan_loss
from tpu_estimator_compat.loop.train_loop import LoopResult
from tpu_estimator_compat.summary import progress


def _raise_on_nan_loss(step: int, result: LoopResult, listeners: Sequence["LoopListener"],
                       seconds: float) -> None:
    """Raises before anything is saved when a step of the loop that ended at `step` diverged.

    Listeners that observe runs as the user's hooks did (`observes_diverged_runs`) see the
    loop first: legacy Estimator's NanTensorHook came after the user's hooks, whose
    `after_run` saw the diverged step.
    """
    error = nan_loss.first_nan_loss(result.losses, result.starts(step))
    if error is not None:
        for listener in listeners:
            if getattr(listener, "observes_diverged_runs", False):
                listener.after_loop(step, result, seconds)
        raise error


class CheckpointPolicy(Protocol):
    """What the driver needs from checkpointing (see `checkpoint/checkpoints.py`)."""

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
            rest = self._report(step, result, seconds)
            if self.stop_on_nan_loss:
                _raise_on_nan_loss(step, result, self.listeners, seconds)
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

    def _report(self, step: int, result: LoopResult, seconds: float) -> Callable[[], None]:
        """Logs the loop's progress lines up to its last run; returns those of that run.

        Legacy's saver hook wrote a run's checkpoint line before the other hooks logged that
        run, so the caller saves between the two (`progress.after_loop`).
        """
        if result.steps_run:
            self.last_loss = np.float32(result.losses[result.steps_run - 1])
            # The library's own line per loop (legacy's progress lines follow legacy's
            # steps); bench/run_shim.py stamps loop ends with it.
            logging.debug("global_step = %d, loss = %s, global_step/sec = %.4g", step,
                          self.last_loss, result.steps_run / seconds)
        return progress.after_loop(
            self.train_log, end=step, target=self._target,
            losses=result.losses[:result.steps_run], starts=result.starts(step),
            end_time=time.time(), seconds=seconds)
