"""Where one `evaluate()` step goes at iterations_per_loop=1: per-step time and a cProfile.

`python -m bench.profile_eval [WORKLOAD] [STEPS]` (from the repository root; defaults mlp
400) trains one step of the bench's v1 model_fn on one replica, warms evaluate up, prints
the per-step time from a 1-step and a STEPS-step call, then the top of a cProfile of a
STEPS-step call sorted by own time. `TFE_Py_Execute` is the compiled step itself; the rest
is the shim's and `tf.function`'s Python. A development probe, not a contender: it prints
no BENCH_RESULT and the harness never runs it.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import sys
import tempfile
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def set_env() -> None:
    """The bench's pinned env; must run before TensorFlow is imported."""
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def trained_estimator(workload: str, iterations_per_loop: int, model_dir: str,
                      model_fn: Any = None) -> Any:
    """A one-replica shim TPUEstimator (`use_tpu=False`) of the bench's v1 model_fn for
    `workload` (or `model_fn`), trained one step on the bench's digits. Shared by the
    development probes."""
    set_env()
    from bench import data, models_v1

    import tpu_estimator_compat as shim

    npz = os.path.join(os.path.dirname(model_dir), "digits.npz")
    if not os.path.exists(npz):
        data.generate(npz, REPO)
    batch = models_v1.WORKLOADS[workload].batch_size
    estimator = shim.TPUEstimator(
        model_fn=model_fn or models_v1.make_model_fn(workload, shim.TPUEstimatorSpec),
        config=shim.RunConfig(model_dir=model_dir, tf_random_seed=1,
                              tpu_config=shim.TPUConfig(iterations_per_loop, 1)),
        params={"data": npz, "workload": workload}, use_tpu=False,
        train_batch_size=batch, eval_batch_size=batch, predict_batch_size=batch)
    estimator.train(models_v1.train_input_fn, steps=1)
    return estimator


def main(argv: list[str]) -> None:
    workload = argv[1] if len(argv) > 1 else "mlp"
    steps = int(argv[2]) if len(argv) > 2 else 400
    estimator = trained_estimator(workload, 1, os.path.join(tempfile.mkdtemp(), "model"))
    from bench import models_v1

    def seconds(n: int) -> float:
        start = time.perf_counter()
        estimator.evaluate(models_v1.eval_input_fn, steps=n)
        return time.perf_counter() - start

    for _ in range(2):  # Warm-up: traces, restore, the metric graph.
        seconds(1), seconds(steps)
    one, many = seconds(1), seconds(steps)
    print(f"{workload}: evaluate {(many - one) / (steps - 1) * 1000:.3f} ms a step "
          f"(iterations_per_loop=1, {steps} steps)")
    profile = cProfile.Profile()
    profile.enable()
    estimator.evaluate(models_v1.eval_input_fn, steps=steps)
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main(sys.argv)
