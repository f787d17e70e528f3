"""The outer training loop: `iterations_per_loop` steps per host round trip, to the target.

Synopsis::

    driver = TrainDriver(run_steps=lambda n: train_loop(iterator, n),
                         read_step=lambda: int(global_step.numpy()), checkpoint=policy)
    driver.run(target_step=100, iterations_per_loop=10)

`while step < target: n = min(target - step, per_loop); run n; maybe checkpoint; report`.
The driver gets a step-runner, a global-step reader, a checkpoint policy and listeners; it
never sees a model, a dataset or a strategy (the compiled loop is `train_loop.py`'s).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Protocol, Sequence

from absl import logging

from tpu_estimator_compat.loop import nan_loss
from tpu_estimator_compat.loop.train_loop import LoopResult
from tpu_estimator_compat.summary import progress


def _raise_on_nan_loss(step: int, result: LoopResult) -> None:
    """Raises before anything is saved when a step of the loop that ended at `step` diverged."""
    error = nan_loss.first_nan_loss(result.losses, result.starts(step))
    if error is not None:
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
    examples_per_step: int | None = None
    clock: Callable[[], float] = time.monotonic
    stop_on_nan_loss: bool = False
    # Progress lines at most every this many steps (one-step loops would log every step).
    report_every_steps: int = 1
    last_loss: float | None = None
    _target: int | None = None
    _reported: int | None = None

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
            self._report(step, result, seconds)
            if self.stop_on_nan_loss:
                _raise_on_nan_loss(step, result)
            if self.checkpoint.should_save(step):
                self.checkpoint.save(step)
            stop = [listener.after_loop(step, result, seconds) for listener in self.listeners]
            if result.steps_run < n:
                logging.info("input_fn is exhausted: training stopped at global step %d after "
                             "%d of %d steps of the last loop.", step, result.steps_run, n)
                break
            if any(stop):
                break
        return step

    def _report(self, step: int, result: LoopResult, seconds: float) -> None:
        if not result.steps_run:
            return
        self.last_loss = result.last_loss
        if self._reported is None:
            self._reported = step - result.steps_run
        if step - self._reported < self.report_every_steps and step != self._target:
            return
        self._reported = step
        rate = result.steps_run / seconds
        progress.report(step=step, target=self._target, loss=result.last_loss,
                        steps_per_sec=rate,
                        examples_per_sec=rate * self.examples_per_step
                        if self.examples_per_step else None)

