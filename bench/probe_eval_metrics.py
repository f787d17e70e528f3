"""What an in-step `eval_metrics` costs one replica's evaluate(), against predict().

`python -m bench.probe_eval_metrics [WORKLOAD] [K]` (from the repository root; defaults
resnet 100) trains one step of the bench's v1 model_fn on one replica (`use_tpu=False`,
iterations_per_loop K), then times evaluate() and predict() per batch, as the difference
between calls of 1 and 1 + 2K batches (each the fastest of 3), twice: with the model_fn's
`eval_metrics` (mnist_tpu's accuracy, built in the eval step on one replica) and with the
same model_fn returning only the loss in EVAL. At 8f1becb (results/HISTORY.md, "Reading the
8f1becb table") the ResNet's eval was 0.9-1.2 ms a batch slower than its predict at K=100
with the metric and level without it, where legacy's eval and predict cost the same:
metric_fn's updates, built in the step, kept consecutive steps from overlapping. Since
fe328f4 they run after the steps (5.73 against 5.58 ms). A development probe, not a
contender: it prints no BENCH_RESULT and the harness never runs it.
"""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
import time
from typing import Any, Callable

from bench import profile_eval


def _model_fn(workload: str, with_metrics: bool) -> Callable[..., Any]:
    """The bench's v1 model_fn; in EVAL without its `eval_metrics` unless `with_metrics`."""
    from bench import models_v1

    import tpu_estimator_compat as shim

    base = models_v1.make_model_fn(workload, shim.TPUEstimatorSpec)

    def model_fn(features: Any, labels: Any, mode: str, params: dict[str, Any]) -> Any:
        spec = base(features, labels, mode, params)
        if mode == "eval" and not with_metrics:
            return shim.TPUEstimatorSpec(mode, loss=spec.loss)
        return spec

    return model_fn


def _per_batch_ms(call: Callable[[int], None], k: int) -> float:
    """Milliseconds a batch: (fastest 1 + 2k-batch call - fastest 1-batch call) / 2k."""
    def seconds(batches: int) -> float:
        start = time.perf_counter()
        call(batches)
        return time.perf_counter() - start

    seconds(1), seconds(k)  # Warm-up: traces, restore, the metric graph.
    one = min(seconds(1) for _ in range(3))
    many = min(seconds(1 + 2 * k) for _ in range(3))
    return (many - one) / (2 * k) * 1000


def main(argv: list[str]) -> None:
    workload = argv[1] if len(argv) > 1 else "resnet"
    k = int(argv[2]) if len(argv) > 2 else 100
    profile_eval.set_env()
    tmp = tempfile.mkdtemp()
    for with_metrics in (True, False):
        estimator = profile_eval.trained_estimator(
            workload, k, os.path.join(tmp, f"model_{with_metrics}"),
            model_fn=_model_fn(workload, with_metrics))
        from bench import models_v1

        batch = models_v1.WORKLOADS[workload].batch_size

        def evaluate(batches: int) -> None:
            estimator.evaluate(models_v1.eval_input_fn, steps=batches)

        def predict(batches: int) -> None:
            for _ in itertools.islice(estimator.predict(models_v1.predict_input_fn),
                                      batches * batch):
                pass

        print(f"{workload}, iterations_per_loop={k}, eval_metrics "
              f"{'in the step' if with_metrics else 'none'}: evaluate "
              f"{_per_batch_ms(evaluate, k):.2f} ms a batch, predict "
              f"{_per_batch_ms(predict, k):.2f} ms a batch", flush=True)


if __name__ == "__main__":
    main(sys.argv)
