"""Legacy contender: `tf.compat.v1.estimator.tpu.TPUEstimator(use_tpu=False)` on TF 2.15.1.

Run by the harness with `.venv-legacy/bin/python -m bench.run_legacy '<json spec>'`; prints
one BENCH_RESULT line. use_tpu=False is how legacy TPUEstimator ran without a TPU: one step
per `session.run`, so `iterations_per_loop` does not apply and the harness runs it once per
workload. Train-step ends are stamped by a SessionRunHook after every step.
"""

from __future__ import annotations

import sys
from typing import Any

import tensorflow as tf

from bench import common
from bench import estimator_bench

_tpu = tf.compat.v1.estimator.tpu


class _StepClock(tf.compat.v1.train.SessionRunHook):
    """Stamps (steps finished, clock) after every training session.run."""

    def __init__(self) -> None:
        self.stamps: list[tuple[int, float, float]] = []

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self.stamps.append(common.stamp(len(self.stamps) + 1))


class LegacyStack:
    spec_cls = _tpu.TPUEstimatorSpec

    def __init__(self, spec: dict[str, Any]) -> None:
        self._spec = spec

    def make_estimator(self, model_fn: Any, model_dir: str, params: dict[str, Any]) -> Any:
        batch = estimator_bench.models_v1.WORKLOADS[self._spec["workload"]].batch_size
        config = _tpu.RunConfig(model_dir=model_dir, tf_random_seed=1,
                                tpu_config=_tpu.TPUConfig(self._spec["steps_per_call"]))
        return _tpu.TPUEstimator(model_fn=model_fn, config=config, params=params,
                                 use_tpu=False, train_batch_size=batch,
                                 eval_batch_size=batch, predict_batch_size=batch)

    def train(self, estimator: Any, input_fn: Any,
              steps: int) -> list[tuple[int, float, float]]:
        step_clock = _StepClock()
        estimator.train(input_fn, steps=steps, hooks=[step_clock])
        return step_clock.stamps


def main(argv: list[str]) -> None:
    spec = common.parse_spec(argv)
    if spec["replicas"] != 1:
        raise SystemExit("legacy TPUEstimator(use_tpu=False) runs on one replica only")
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
    result = estimator_bench.measure(spec, LegacyStack(spec))
    common.emit({**spec, **result, "tf_version": tf.__version__})


if __name__ == "__main__":
    main(sys.argv)
