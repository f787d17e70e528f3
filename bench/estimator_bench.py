"""One measurement procedure for both estimator contenders: the shim and legacy TPUEstimator.

The shim (`run_shim.py`, TF 2.21) and legacy (`run_legacy.py`, TF 2.15) differ only in how
an estimator is built and how train-call ends are observed; `measure()` does the rest
identically, so the two stacks run the same model_fn, the same input_fns and the same
timing code. Legacy exposes per-step `SessionRunHook`s; the shim rejects hooks, so its
per-loop ends come from its own `global_step = N, ...` DEBUG log line. Both are
(cumulative steps, clock) stamps for `common.steady_rate`.

Imported on TF 2.15 too: `tf.compat.v1` only.
"""

from __future__ import annotations

import tempfile
from typing import Any, Protocol

from bench import common
from bench import models_v1


class Stack(Protocol):
    """The stack-specific half of an estimator contender."""

    def make_estimator(self, model_fn: Any, model_dir: str, params: dict[str, Any]) -> Any:
        ...

    def train(self, estimator: Any, input_fn: Any,
              steps: int) -> list[tuple[int, float, float]]:
        """Runs `steps` train steps; returns `common.stamp`s at each call's end."""


def _consume_predictions(estimator: Any, batches: int, batch_size: int) -> None:
    """Iterates predict() over an input of `batches` batches to its end, one example at a
    time, as a user predicting a test set does.

    The input ends rather than the consumer stopping early: a stack that computes a batch
    or more ahead of its consumer (the shim off TPU, up to 3; legacy on TPU, up to
    iterations_per_loop - 1) would otherwise be timed for batches nobody reads, and the
    larger of the two timed calls stops partway through a loop that the smaller does not.
    """
    count = sum(1 for _ in estimator.predict(models_v1.finite_predict_input_fn(batches)))
    if count != batches * batch_size:
        raise RuntimeError(f"predict() gave {count} examples for {batches} batches of "
                           f"{batch_size}")


def measure(spec: dict[str, Any], stack: Stack) -> dict[str, Any]:
    """Train, eval and predict figures for one (workload, steps per call, replicas).

    Train: a 1-step call first (time to first step: graph build or trace, restore, initial
    checkpoint, one step), then a throughput call continuing from that checkpoint.
    """
    workload = models_v1.WORKLOADS[spec["workload"]]
    warm, measured = common.train_plan(spec)
    params = {"workload": workload.name, "data": spec["data"]}
    model_dir = tempfile.mkdtemp(prefix=f"bench_{spec['contender']}_", dir=spec["tmp"])
    estimator = stack.make_estimator(
        models_v1.make_model_fn(workload.name, stack.spec_cls), model_dir, params)

    t_call = common.clock()
    first = stack.train(estimator, models_v1.train_input_fn, 1)
    stamps = stack.train(estimator, models_v1.train_input_fn, warm + measured)
    result: dict[str, Any] = common.train_figures(t_call, first, stamps, warm)

    batch = workload.batch_size
    common.add_inference_figures(
        spec, result, batch,
        evaluate=lambda steps: estimator.evaluate(models_v1.eval_input_fn, steps=steps),
        predict=lambda steps: _consume_predictions(estimator, steps, batch))
    return result
