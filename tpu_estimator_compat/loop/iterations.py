"""How many steps the next device loop runs: a step count, or as many as fit a time budget.

Synopsis::

    sizer = LoopSizer(tpu_config.parse_iterations_per_loop("30s"))
    n = sizer.next_count(remaining=target - step)    # 1 before any loop was timed
    ...run n steps, taking `seconds`...
    sizer.record(seconds, n)

Legacy `TPUConfig(iterations_per_loop=...)` took a step count or a time budget (`"30s"`,
`"5m"`, `"1h"`); with a budget, legacy TPUEstimator learnt the seconds per step from the
loops it had run and sized the next loop to fill the budget (`IterationCountEstimator`,
driven by `_TPUStopAtStepHook`). `IterationCountEstimator` keeps legacy's contract (its
tests read its fields); `LoopSizer` is the one rule both a count and a budget follow, and
`TPUStopAtStepHook` is that rule as the SessionRunHook legacy's code and tests build in a
TF1 graph. This module knows nothing of models, datasets or strategies.
"""

from __future__ import annotations

import collections
import time
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from tpu_estimator_compat import log as logging

COUNT = "count"
SECONDS = "seconds"


class RuntimeCounter(NamedTuple):
    """One timed loop: its wall time, its steps, and their quotient."""
    runtime_secs: float
    steps: int
    step_time_secs: float


class IterationCountEstimator:
    """Estimates how many steps fit a time budget from the last `capacity` timed loops.

    Legacy `tpu.iteration_count_estimator.IterationCountEstimator`. Each `update` adds a
    loop's time and step count to a ring of at most `capacity` samples; `get(total_secs)`
    moves the previous estimate to `total_secs / mean seconds per step`, and keeps it once
    a recent loop's time is within 10% (or the mean within 5%) of the budget and the step
    time has settled (standard deviation under 0.03 s after more than `capacity` samples).
    With no sample yet it answers the minimum, 1 step. A larger ring smooths out noisy step
    times and converges more slowly.
    """

    def __init__(self, capacity: int = 20) -> None:
        self._reset(capacity=capacity)

    def _reset(self, capacity: int = 20) -> None:
        if capacity <= 0:
            raise ValueError(f"IterationCountEstimator `capacity` must be positive. "
                             f"Actual:{capacity}.")
        self._buffer_wheel: collections.deque[RuntimeCounter] = collections.deque()
        self._capacity = capacity
        self._min_iterations = 1
        self._last_iterations: float = self._min_iterations
        self._sample_count = 0

    def _column(self, field: str) -> np.ndarray:
        return np.array([getattr(sample, field) for sample in self._buffer_wheel], np.float64)

    def _mean_runtime_secs(self) -> float:
        return float(np.mean(self._column("runtime_secs"))) if self._buffer_wheel else 0.0

    def _mean_step_time_secs(self) -> float:
        return float(np.mean(self._column("step_time_secs"))) if self._buffer_wheel else 0.0

    def _std_step_time_secs(self) -> float:
        return float(np.std(self._column("step_time_secs"))) if self._buffer_wheel else 0.0

    def _diff_less_than_percentage(self, actual: float, target: float,
                                   percentage: float) -> bool:
        """Whether `actual` lies within `percentage` percent of `target`."""
        if actual == 0:
            raise ValueError("Invalid `actual` value. Value must not be zero.")
        if target == 0:
            raise ValueError("Invalid `target` value. Value must not be zero.")
        return float(abs(target - actual)) / target <= percentage * 0.01

    def _is_step_time_stable(self) -> bool:
        return self._std_step_time_secs() < 0.03 and self._sample_count > self._capacity

    def update(self, runtime_secs: float, count: int) -> None:
        """Records one loop of `count` steps that took `runtime_secs` (others are ignored)."""
        if runtime_secs <= 0.0 or count <= 0:
            logging.debug("IterationCountEstimator: sample ignored (runtime_secs=%s, count=%s; "
                          "both must be positive).", runtime_secs, count)
            return
        if len(self._buffer_wheel) >= self._capacity:
            self._buffer_wheel.popleft()
        self._buffer_wheel.append(
            RuntimeCounter(runtime_secs, count, float(runtime_secs) / count))
        self._sample_count += 1

    def get(self, total_secs: float) -> int:
        """The number of steps estimated to take `total_secs` seconds (at least 1)."""
        if total_secs <= 0:
            raise ValueError(
                f"Invalid `total_secs`. It must be positive number. Actual:{total_secs}")
        if not self._buffer_wheel:
            return self._min_iterations
        mean_runtime = self._mean_runtime_secs()
        projected = total_secs / self._mean_step_time_secs()
        last = self._buffer_wheel[-1]
        delta = projected - self._last_iterations
        near_budget = (self._diff_less_than_percentage(last.runtime_secs, total_secs, 10)
                       or self._diff_less_than_percentage(mean_runtime, total_secs, 5))
        if near_budget and self._is_step_time_stable():
            delta = 0  # Settled: keep the estimate.
        self._last_iterations = max(self._last_iterations + delta, self._min_iterations)
        logging.debug("IterationCountEstimator: target %.3fs, last loop %.3fs (%d steps), "
                      "mean %.3fs, mean step %.4fs, next %.2f steps.", total_secs,
                      last.runtime_secs, last.steps, mean_runtime,
                      self._mean_step_time_secs(), self._last_iterations)
        return int(self._last_iterations + 0.5)


class LoopSizer:
    """The steps of the next loop for a parsed `iterations_per_loop` (`value`, `unit`).

    A count gives `value` steps per loop; a time budget gives the steps an
    `IterationCountEstimator` expects to take `value` seconds, learnt from `record`. Either
    is capped by the steps remaining.
    """

    def __init__(self, iterations_per_loop: Any) -> None:
        if iterations_per_loop.unit not in (COUNT, SECONDS):
            raise ValueError(
                "Only `count` or `seconds` are accepted as the "
                f"`iterations_per_loop_counter.unit`; got {iterations_per_loop.unit!r}. Parse "
                "the value with tpu.util.parse_iterations_per_loop.")
        self.iterations_per_loop = iterations_per_loop
        self.estimator = (IterationCountEstimator()
                          if iterations_per_loop.unit == SECONDS else None)

    def next_count(self, remaining: int) -> int:
        """Steps the next loop runs when `remaining` steps are left to the target."""
        if self.estimator is None:
            return min(remaining, self.iterations_per_loop.value)
        return min(remaining, self.estimator.get(self.iterations_per_loop.value))

    def record(self, seconds: float, steps: int) -> None:
        """A loop of `steps` steps took `seconds`: what a time budget learns from."""
        if self.estimator is not None:
            self.estimator.update(seconds, steps)


class TPUStopAtStepHook(tf.compat.v1.train.SessionRunHook):
    """Sizes each loop with `LoopSizer` and stops at the final step: legacy
    `tpu_estimator._TPUStopAtStepHook`, as a SessionRunHook of a TF1 session.

    `_next_iteration_count` is the step count of the next loop: 1 until the first loop was
    timed with a time budget, then capped by the steps left; 0 at the final step, where the
    hook requests the stop. The global step is read from the session after each run.
    """

    def __init__(self, iterations_per_loop_counter: Any, num_steps: int | None = None,
                 final_step: int | None = None) -> None:
        if num_steps is None and final_step is None:
            raise ValueError("One of `num_steps` or `final_step` must be specified.")
        if num_steps is not None and final_step is not None:
            raise ValueError("Only one of `num_steps` or `final_step` can be specified.")
        self._sizer = LoopSizer(iterations_per_loop_counter)
        self._iterations_per_loop_counter = iterations_per_loop_counter
        self._num_steps = num_steps
        self._final_step = final_step
        self._next_iteration_count = 1
        self._global_step_tensor: Any = None
        self._start_time = time.time()

    @property
    def _iteration_count_estimator(self) -> IterationCountEstimator | None:
        return self._sizer.estimator

    def _next_iterations(self, global_step: int, final_step: int) -> int:
        self._next_iteration_count = self._sizer.next_count(final_step - global_step)
        return self._next_iteration_count

    def begin(self) -> None:
        self._global_step_tensor = tf.compat.v1.train.get_global_step()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created.")

    def after_create_session(self, session: Any, coord: Any) -> None:
        del coord
        global_step = session.run(self._global_step_tensor)
        if self._final_step is None:
            self._final_step = global_step + self._num_steps
        self._next_iterations(global_step, self._final_step)

    def before_run(self, run_context: Any) -> None:
        self._start_time = time.time()

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self._sizer.record(time.time() - self._start_time, self._next_iteration_count)
        global_step = run_context.session.run(self._global_step_tensor)
        if global_step >= self._final_step:
            run_context.request_stop()
        else:
            self._next_iterations(global_step, self._final_step)
