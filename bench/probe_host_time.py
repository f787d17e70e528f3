"""How much of a shim call is host work: wall time minus the time inside compiled calls.

`python -m bench.probe_host_time {train,evaluate,predict} WORKLOAD K [LOOPS]` (from the
repository root, nothing else running) builds the bench's WORKLOAD model_fn on the shim (one
replica, `iterations_per_loop=K`), trains one step, then times three calls:

* train: `train(steps=LOOPS*K)`;
* evaluate / predict: a 1-batch call and a call of 1 + LOOPS batches (predict consumed to its
  end, one example at a time, as `bench.estimator_bench` does).

For each it prints the wall time, the time spent inside the shim's compiled-function calls
(`_tf_private.call_flat`, which returns when a CPU function has run) and the difference: the
Python work around the compiled loops (input set-up, step bookkeeping, logging, summaries,
checkpoints, splitting predictions). Issue 20 asked where per-call and per-loop costs go; a
train row whose wall ratio straddles its target while its CPU per step does not is told
apart from the shim's host work this way. A development probe, not a contender: it prints no
BENCH_RESULT.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _CompiledClock:
    """Sums the time spent in `_tf_private.call_flat`, which it wraps for the rest of the
    process (the shim's loops look the function up on the module at each call)."""

    def __init__(self) -> None:
        from tpu_estimator_compat._tf import private as _tf_private

        self.seconds, self.calls = 0.0, 0
        self._original = _tf_private.call_flat

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return self._original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start
                self.calls += 1

        _tf_private.call_flat = timed

    def measure(self, label: str, run: Callable[[], Any]) -> None:
        self.seconds, self.calls = 0.0, 0
        start = time.perf_counter()
        run()
        wall = time.perf_counter() - start
        print(f"{label:28s} wall {wall:8.3f} s  compiled {self.seconds:8.3f} s "
              f"({self.calls:5d} calls)  host {wall - self.seconds:7.3f} s", flush=True)


def main(argv: list[str]) -> None:
    if len(argv) not in (4, 5) or argv[1] not in ("train", "evaluate", "predict"):
        raise SystemExit(f"usage: {argv[0]} {{train,evaluate,predict}} WORKLOAD K [LOOPS]")
    mode, workload_name, k = argv[1], argv[2], int(argv[3])
    loops = int(argv[4]) if len(argv) == 5 else 10
    work = tempfile.mkdtemp(prefix="probe_host_time_")
    data = os.path.join(work, "digits.npz")
    subprocess.run([sys.executable, "-m", "bench.data", data, REPO], check=True, cwd=REPO,
                   stdout=subprocess.DEVNULL)

    import tpu_estimator_compat as shim
    from bench import models_v1

    workload = models_v1.WORKLOADS[workload_name]
    batch = workload.batch_size
    clock = _CompiledClock()
    config = shim.RunConfig(model_dir=os.path.join(work, "model"), tf_random_seed=1,
                            tpu_config=shim.TPUConfig(k, 1))
    estimator = shim.TPUEstimator(
        model_fn=models_v1.make_model_fn(workload_name, shim.TPUEstimatorSpec), config=config,
        params={"workload": workload_name, "data": data}, use_tpu=False,
        train_batch_size=batch, eval_batch_size=batch, predict_batch_size=batch)
    estimator.train(models_v1.train_input_fn, steps=1)

    def call(batches: int) -> None:
        if mode == "train":
            estimator.train(models_v1.train_input_fn, steps=batches)
        elif mode == "evaluate":
            estimator.evaluate(models_v1.eval_input_fn, steps=batches)
        else:
            for _ in estimator.predict(models_v1.finite_predict_input_fn(batches)):
                pass

    if mode == "train":
        call(k)  # Traced and warm.
        for _ in range(3):
            clock.measure(f"train {loops} loops of {k}", lambda: call(loops * k))
    else:
        call(1)
        for _ in range(3):
            clock.measure(f"{mode} 1 batch", lambda: call(1))
            clock.measure(f"{mode} {1 + loops} batches", lambda: call(1 + loops))


if __name__ == "__main__":
    main(sys.argv)
