"""Training progress: legacy's own log lines at legacy's steps, an optional bar, or quiet.

Chosen by the environment variable `TPU_ESTIMATOR_COMPAT_PROGRESS` (`log`, the default;
`bar` for interactive runs; `quiet` for CI and tests) or `set_mode()`.

In `log` mode training prints what legacy TPUEstimator printed, through TensorFlow's logger
(`log.legacy`): `global_step/sec: ...` and `examples/sec: ...` (its `ExamplesPerSecondHook`)
and, with `use_tpu=True`, `loss = ..., step = ...` (its `LoggingTensorHook`), at the global
steps its hooks logged them (`TrainLog`). Users watch these lines and tools scrape them. `bar`
redraws one line per loop instead; `quiet` prints neither. This module knows nothing else.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from typing import Any, Callable, TextIO

import numpy as np

from tpu_estimator_compat import log

ENV_VAR = "TPU_ESTIMATOR_COMPAT_PROGRESS"
MODES = ("log", "bar", "quiet")
_mode: str | None = None


def set_mode(mode: str | None) -> None:
    """Overrides the environment variable for this process (None: back to it)."""
    global _mode
    if mode is not None and mode not in MODES:
        raise ValueError(f"progress mode must be one of {MODES}; received {mode!r}.")
    _mode = mode


def mode() -> str:
    chosen = _mode or os.environ.get(ENV_VAR, "log")
    if chosen not in MODES:
        raise ValueError(f"{ENV_VAR} must be one of {MODES}; received {chosen!r}. Unset it "
                         "or pick one.")
    return chosen


def report(*, step: int, target: int | None, loss: float | None, steps_per_sec: float,
           stream: TextIO | None = None) -> None:
    """One loop's progress in `bar` mode: the bar, redrawn (other modes: nothing)."""
    if mode() != "bar":
        return
    stream = stream or sys.stderr
    if target:
        done = min(1.0, step / target)
        bar = "#" * int(30 * done) + "." * (30 - int(30 * done))
        line = f"\r[{bar}] {step}/{target} loss {loss:.4g} {steps_per_sec:.3g} steps/s"
    else:
        line = f"\rstep {step} loss {loss:.4g} {steps_per_sec:.3g} steps/s"
    stream.write(line)
    if target and step >= target:
        stream.write("\n")
    stream.flush()


class _StepTimer:
    """The step rule of legacy's `SecondOrStepTimer(every_steps=n)`, with the time passed in."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.last: tuple[int, float] | None = None  # The last trigger's (step, time).

    def should_trigger(self, step: int) -> bool:
        if self.last is None:
            return True
        if self.last[0] == step:
            return False
        return step >= self.last[0] + self.every

    def update(self, step: int, now: float) -> tuple[int, float] | None:
        """Marks `step` triggered; returns (steps, seconds) since the last trigger, if any."""
        previous, self.last = self.last, (step, now)
        if previous is None:
            return None
        return step - previous[0], now - previous[1]


@dataclasses.dataclass(frozen=True)
class Line:
    """A legacy log line due after the legacy `session.run` that ended at global step `at`."""

    at: int
    msg: str
    args: tuple[Any, ...]

    def emit(self) -> None:
        log.legacy_info(self.msg, *self.args)


class TrainLog:
    """Which progress lines legacy TPUEstimator's hooks logged in one `train()` call.

    Legacy decided once per `session.run`: one step with `use_tpu=False` (its CPU path), one
    loop of `iterations_per_loop` steps with `use_tpu=True`. Its `ExamplesPerSecondHook`, a
    `StepCounterHook` with `every_n_steps = ceil(log_step_count_steps / iterations_per_loop)`
    (tpu_estimator.py, `__init__`), took its first run as the baseline and then logged
    `global_step/sec` and `examples/sec` at the first run ending `every_n_steps` or more
    global steps after the last. With `use_tpu=True` a `LoggingTensorHook` with
    `every_n_iter` of the same value logged `loss = <the loop's last loss>, step = <the global
    step after the loop>` on the first run and every `every_n_iter` runs after it, with the
    seconds since its last line. The host learns every step's loss and start after each of
    this library's loops, so the runs are replayed per loop (`lines`); step times inside a
    loop are interpolated from the loop's duration.

    Args:
      log_step_count_steps: RunConfig's; None: no progress lines (as legacy).
      iterations_per_loop: TPUConfig's.
      use_tpu: the estimator's `use_tpu`: which of legacy's paths to follow.
      examples_per_step: the global batch size, for `examples/sec`.
    """

    def __init__(self, *, log_step_count_steps: int | None, iterations_per_loop: int,
                 use_tpu: bool, examples_per_step: int | None) -> None:
        every = (None if log_step_count_steps is None
                 else math.ceil(log_step_count_steps / iterations_per_loop))
        self._steps_per_run = iterations_per_loop if use_tpu else 1
        self._examples_per_step = examples_per_step
        self._rate = _StepTimer(every) if every is not None else None
        self._loss = _StepTimer(every) if every is not None and use_tpu else None
        self._runs = 0

    def lines(self, end: int, losses: Any, starts: Any, end_time: float, seconds: float,
              collect: bool = True) -> list[Line]:
        """The lines of the legacy runs in the loop that ended at global step `end`.

        `losses[k]`: step k's loss; `starts[k]`: the global step step k started from;
        `end_time`: when the loop ended; `seconds`: how long it ran. `collect=False` only
        keeps the schedule (nothing would print): no lines are made.
        """
        count = len(losses)
        if self._rate is None or not count:
            return []
        if self._steps_per_run != 1:
            return self._after_run(int(starts[0]), end, losses[-1], end_time)
        begin = int(starts[0])
        first, each = end_time - seconds, seconds / count
        if end - begin == count and int(starts[count - 1]) == end - 1:
            return self._contiguous(begin, end, first, each, collect)
        begins = np.asarray(starts[:count]).tolist()
        ends = begins[1:] + [end]
        out: list[Line] = []
        for k, (start, stop) in enumerate(zip(begins, ends)):
            out += self._after_run(start, stop, losses[k], first + each * (k + 1))
        return out

    def _contiguous(self, begin: int, end: int, first: float, each: float,
                    collect: bool) -> list[Line]:
        """`lines` for a loop whose steps each advanced the global step by one: legacy's
        per-step rule then fires at every `every`-th step, computed without a per-step walk
        (one loop of 100 steps was ~0.75 ms that way, on every loop of a fast model)."""
        rate = self._rate
        assert rate is not None
        last = rate.last
        step = begin + 1 if last is None else max(last[0] + rate.every, begin + 1)
        out: list[Line] = []
        for at in range(step, end + 1, rate.every):
            when = first + each * (at - begin)
            if last is not None and collect:
                per_sec = (at - last[0]) / max(when - last[1], 1e-9)
                out.append(Line(at, "global_step/sec: %g", (per_sec,)))
                if self._examples_per_step:
                    out.append(Line(at, "examples/sec: %g", (per_sec * self._examples_per_step,)))
            last = (at, when)
        rate.last = last
        return out

    def _after_run(self, start: int, end: int, loss: Any, when: float) -> list[Line]:
        out = []
        if self._loss is not None:
            if self._loss.should_trigger(self._runs):
                elapsed = self._loss.update(self._runs, when)
                values = "loss = %s, step = %d" % (np.float32(loss), end)
                out.append(Line(end, "%s", (values,)) if elapsed is None else
                           Line(end, "%s (%.3f sec)", (values, elapsed[1])))
            self._runs += 1
        rate = self._rate
        if rate is not None and rate.should_trigger(start + self._steps_per_run) and (
                rate.should_trigger(end)):
            elapsed = rate.update(end, when)
            if elapsed is not None:
                per_sec = elapsed[0] / max(elapsed[1], 1e-9)
                out.append(Line(end, "global_step/sec: %g", (per_sec,)))
                if self._examples_per_step:
                    out.append(Line(end, "examples/sec: %g",
                                    (per_sec * self._examples_per_step,)))
        return out


def after_loop(train_log: TrainLog | None, *, end: int, target: int | None, losses: Any,
               starts: Any, end_time: float, seconds: float) -> Callable[[], None]:
    """Prints one loop's progress as the mode says, up to the loop's last run.

    Returns what prints at the last run itself: legacy's saver hook wrote its checkpoint line
    before the other hooks logged that run (the caller saves in between).
    """
    chosen = mode()
    if chosen == "bar" and len(losses):
        report(step=end, target=target, loss=float(losses[-1]),
               steps_per_sec=len(losses) / max(seconds, 1e-9))
    if chosen != "log" or train_log is None:
        return lambda: None
    printing = log.legacy_enabled(log.INFO)
    lines = train_log.lines(end, losses, starts, end_time, seconds, collect=printing)
    for line in lines:
        if line.at != end:
            line.emit()

    def rest() -> None:
        for line in lines:
            if line.at == end:
                line.emit()
    return rest


class EvalLog:
    """Legacy's `Evaluation [k/N]` lines (evaluation.py, `_StopAfterNEvalsHook`).

    Legacy logged them only for `evaluate(steps=N)` (with `steps=None` it had no such hook).
    On its CPU path (`use_tpu=False` or `eval_on_tpu=False`) a `session.run` was one batch,
    and the hook logged after each k that was a multiple of `floor(N / 10)` (every k below
    20 steps) or N. On a TPU one run evaluated all N batches (`_SetEvalIterationsHook`): one
    line, at the end (`finish`).
    """

    def __init__(self, steps: int | None, *, on_tpu: bool) -> None:
        self._steps = steps
        self._on_tpu = on_tpu
        self._every = 1 if steps is None or steps < 20 else math.floor(steps / 10.0)
        self._done = 0

    def after_loop(self, steps_run: int) -> None:
        """Logs the lines of a loop's `steps_run` batches."""
        first, self._done = self._done, self._done + steps_run
        if self._steps is None or self._on_tpu or mode() != "log":
            return
        for k in range(first + 1, self._done + 1):
            if k % self._every == 0 or k == self._steps:
                log.legacy_info("Evaluation [%d/%d]", k, self._steps)

    def finish(self) -> None:
        if self._steps is not None and self._on_tpu and mode() == "log":
            log.legacy_info("Evaluation [%d/%d]", self._done, self._steps)
