"""Shim contender: `tpu_estimator_compat.TPUEstimator` on TF 2.21, as a ported script runs it.

`python -m bench.run_shim '<json spec>'` prints one BENCH_RESULT line. On one replica it is
built exactly like the legacy contender (`use_tpu=False`); on 8 it runs the way the README
documents a TPU script on a CPU host: the CPU split into 8 logical devices and `use_tpu=True`,
which falls back to MirroredStrategy over them (and wraps CrossShardOptimizer).

As contender `shim_nosum` it runs with `RunConfig(save_summary_steps=0)`: none of legacy's
training summaries, the setting the raw loop (which writes none) is compared with.

The shim rejects hooks, so loop ends are stamped from its own DEBUG log line
`global_step = N, loss = ..., global_step/sec = ...`, written once per loop right after the
compiled loop returns (`loop.TrainDriver`).
"""

from __future__ import annotations

import logging
import os
import re
import sys
from typing import Any

from bench import common
from bench import devices
from bench import estimator_bench

_STEP_LINE = re.compile(r"global_step = (\d+), loss = ")


class _LoopClock(logging.Handler):
    """Stamps (global step, clock) when the shim reports a finished loop."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.stamps: list[tuple[int, float, float]] = []

    def emit(self, record: logging.LogRecord) -> None:
        match = _STEP_LINE.match(record.getMessage())
        if match:
            self.stamps.append(common.stamp(int(match.group(1))))


class ShimStack:
    def __init__(self, spec: dict[str, Any]) -> None:
        import tpu_estimator_compat as shim
        from absl import logging as absl_logging

        self._spec = spec
        self._shim = shim
        self.spec_cls = shim.TPUEstimatorSpec
        absl_logging.set_verbosity(absl_logging.DEBUG)
        self._clock = _LoopClock()
        absl_logging.get_absl_logger().addHandler(self._clock)

    def make_estimator(self, model_fn: Any, model_dir: str, params: dict[str, Any]) -> Any:
        shim, spec = self._shim, self._spec
        batch = estimator_bench.models_v1.WORKLOADS[spec["workload"]].batch_size
        replicas = spec["replicas"]
        # shim_nosum: legacy's training summaries off (the loss and the step-rate events).
        quiet = {"save_summary_steps": 0} if spec["contender"] == "shim_nosum" else {}
        config = shim.RunConfig(model_dir=model_dir, tf_random_seed=1,
                                tpu_config=shim.TPUConfig(spec["steps_per_call"], replicas),
                                **quiet)
        return shim.TPUEstimator(model_fn=model_fn, config=config, params=params,
                                 use_tpu=replicas > 1, train_batch_size=batch,
                                 eval_batch_size=batch, predict_batch_size=batch)

    def train(self, estimator: Any, input_fn: Any,
              steps: int) -> list[tuple[int, float, float]]:
        """Stamps count steps of this call: the log line gives the global step."""
        base = (int(estimator.get_variable_value("global_step"))
                if estimator.latest_checkpoint() else 0)
        del self._clock.stamps[:]
        estimator.train(input_fn, steps=steps)
        return [(step - base, t, cpu) for step, t, cpu in self._clock.stamps]


def main(argv: list[str]) -> None:
    spec = common.parse_spec(argv)
    devices.split_cpu(spec["replicas"])
    import tensorflow as tf

    result = estimator_bench.measure(spec, ShimStack(spec))
    import tpu_estimator_compat

    common.emit({**spec, **result, "tf_version": tf.__version__,
                 "shim_path": os.path.dirname(tpu_estimator_compat.__file__)})


if __name__ == "__main__":
    main(sys.argv)
