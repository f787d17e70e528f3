"""The loop driver: `iterations_per_loop` steps per host round trip, and the outer loop.

Synopsis::

    run_n = make_multi_step_train_fn(strategy, train_step)
    driver = TrainDriver(run_steps=lambda n: run_n(iterator, tf.constant(n)),
                         read_step=lambda: int(global_step.numpy()), ...)
    driver.run(target_step=100, iterations_per_loop=10)

Two layers, as in Orbit. `make_multi_step_train_fn` compiles ONE `tf.function` holding a
`tf.range` loop around `strategy.run`; the step count is a tensor, so chunks of different
lengths never retrace, and no Python runs per step. `TrainDriver` is the outer loop:
`while step < target: n = min(target - step, per_loop); run n; maybe checkpoint; report`.
The driver gets a step-runner, a global-step reader, a checkpoint policy and listeners; it
never sees a model, a dataset or a strategy.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Protocol, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from tpu_estimator_compat import inputs as inputs_lib


@dataclasses.dataclass(frozen=True)
class LoopResult:
    """What one compiled multi-step call reports back to the host."""

    steps_run: int
    losses: np.ndarray  # One global loss per step run, float32.

    @property
    def last_loss(self) -> float | None:
        return float(self.losses[-1]) if self.steps_run else None


def make_multi_step_train_fn(
        strategy: tf.distribute.Strategy,
        train_step: Callable[[Any, Any], tf.Tensor]) -> Callable[[Any, tf.Tensor], Any]:
    """Compiles `train_step` into one function running up to `n` steps per call.

    The function stops early when the iterator is exhausted (legacy Estimator ended
    training cleanly at the end of input) and returns (steps_run, per-step losses), each
    loss the mean over replicas of the replica losses, i.e. the global-batch loss.
    """

    # The model_fn is graph-building Python written for TF1: it must run as written, never
    # rewritten by AutoGraph (which would turn its Python control flow into tf.cond/while).
    replica_fn = tf.autograph.experimental.do_not_convert(train_step)

    @tf.function
    def run_steps(iterator: Any, n: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        losses = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        steps = tf.constant(0, tf.int32)
        for _ in tf.range(n):
            optional = iterator.get_next_as_optional()
            if not optional.has_value():
                break
            features, labels = inputs_lib.split_element(optional.get_value())
            per_replica = strategy.run(replica_fn, args=(features, labels))
            loss = strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica, axis=None)
            losses = losses.write(steps, loss)
            steps += 1
        return steps, losses.stack()

    return run_steps


class CheckpointPolicy(Protocol):
    """What the driver needs from checkpointing (see `checkpoints.py`)."""

    def should_save(self, step: int) -> bool: ...

    def save(self, step: int) -> str: ...


class LoopListener(Protocol):
    """Called by the driver at loop granularity; hooks and progress reporting plug in here."""

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
    last_loss: float | None = None

    def run(self, *, target_step: int, iterations_per_loop: int) -> int:
        """Trains until the global step reaches `target_step` or input runs out.

        Returns the final global step.
        """
        step = self.read_step()
        while step < target_step:
            n = min(target_step - step, iterations_per_loop)
            start = self.clock()
            result = self.run_steps(n)
            seconds = max(self.clock() - start, 1e-9)
            step = self.read_step()
            self._report(step, result, seconds)
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
        rate = result.steps_run / seconds
        examples = (f", examples/sec = {rate * self.examples_per_step:.4g}"
                    if self.examples_per_step else "")
        logging.info("global_step = %d, loss = %.6g, global_step/sec = %.4g%s", step,
                     result.last_loss, rate, examples)
