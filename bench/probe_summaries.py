"""`python -m bench.probe_summaries`: what legacy's training summaries cost the shim per loop.

With `use_tpu=False` legacy's summary hooks decided once per `session.run`, i.e. per step,
and the shim replays those decisions (summaries.py). At `iterations_per_loop=100` and the
default `log_step_count_steps=100`, `ExamplesPerSecondHook` fires every
`ceil(100 / 100) = 1` run: two events per step, ~200 per loop. On an overhead-bound model
that is a visible share of the loop, and the hand-written TF2 loop the benchmark compares
against writes none (bench/results/HISTORY.md, finding 13).

This probe trains the benchmark's MLP with the shim at k=100 under a few RunConfigs, one
fresh process per (config, repeat), configs interleaved and reversed on odd repeats, and
prints each process's median loop time (loop ends stamped from the shim's per-loop progress
line, the first 3 loops dropped). Not part of `python -m bench`: it measures the shim
against itself.

    .venv/bin/python -m bench.probe_summaries --repeats 3 --steps 6000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from typing import Any

from bench import common
from bench import harness

# name: RunConfig overrides. The default is legacy's: save_summary_steps=100,
# log_step_count_steps=100.
CONFIGS: dict[str, dict[str, Any]] = {
    "default (save 100, log 100)": {},
    "log_step_count_steps=None": {"log_step_count_steps": None},
    "log_step_count_steps=10000": {"log_step_count_steps": 10000},
    "save_summary_steps=0": {"save_summary_steps": 0},
}
_DROPPED_LOOPS = 3


def child(spec: dict[str, Any]) -> None:
    """One process: the MLP at k=100 under `spec['overrides']`; emits its loop times."""
    from bench import models_v1
    from bench import run_shim

    import tpu_estimator_compat as shim

    class Stack(run_shim.ShimStack):
        def make_estimator(self, model_fn: Any, model_dir: str, params: dict[str, Any]) -> Any:
            config = shim.RunConfig(model_dir=model_dir, tf_random_seed=1,
                                    tpu_config=shim.TPUConfig(spec["steps_per_call"], 1),
                                    **spec["overrides"])
            return shim.TPUEstimator(model_fn=model_fn, config=config, params=params,
                                     use_tpu=False, train_batch_size=128)

    stack = Stack(spec)
    params = {"workload": "mlp", "data": spec["data"]}
    estimator = stack.make_estimator(models_v1.make_model_fn("mlp", stack.spec_cls),
                                     tempfile.mkdtemp(dir=spec["tmp"]), params)
    stack.train(estimator, models_v1.train_input_fn, 1)
    stamps = stack.train(estimator, models_v1.train_input_fn, spec["steps"])
    ends = [t for _, t, _ in stamps]
    loop_ms = [1000 * (b - a) for a, b in zip(ends, ends[1:])][_DROPPED_LOOPS:]
    common.emit({"loop_ms": loop_ms})


def _run(name: str, spec: dict[str, Any], log_path: str) -> float:
    """One child process (through the harness, so the env is the bench's and a failure
    shows its log); returns its median loop time."""
    argv = [harness.PYTHON["new"], "-m", "bench.probe_summaries", "--child", json.dumps(spec)]
    out = harness._run_process(argv, "new", log_path, 600, harness.REPO)  # pylint: disable=protected-access
    line = next(l for l in out.splitlines() if l.startswith(common.RESULT_PREFIX))
    loop_ms = json.loads(line[len(common.RESULT_PREFIX):])["loop_ms"]
    median = statistics.median(loop_ms)
    print(f"  {name}: median {median:.2f} ms over {len(loop_ms)} loops", flush=True)
    return median


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=6000, help="steps of the measured call")
    parser.add_argument("--configs", default=";".join(CONFIGS),
                        help="names of CONFIGS to run, separated by ';', e.g. "
                             "'default (save 100, log 100);save_summary_steps=0'")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv[1:])
    if args.child:
        child(json.loads(args.child))
        return
    unknown = set(args.configs.split(";")) - set(CONFIGS)
    if unknown:
        parser.error(f"--configs: unknown {sorted(unknown)}; choose from {list(CONFIGS)}")
    configs = {name: CONFIGS[name] for name in args.configs.split(";")}
    tmp = tempfile.mkdtemp(prefix="probe_summaries_")
    data = harness.make_data(tmp, harness.REPO)
    medians: dict[str, list[float]] = {name: [] for name in configs}
    for repeat in range(args.repeats):
        names = list(configs) if repeat % 2 == 0 else list(reversed(configs))
        print(f"repeat {repeat + 1}/{args.repeats}", flush=True)
        for name in names:
            spec = {"overrides": configs[name], "steps_per_call": 100, "steps": args.steps,
                    "data": data, "tmp": tmp}
            log_path = os.path.join(tmp, f"config{list(CONFIGS).index(name)}_rep{repeat}.log")
            medians[name].append(_run(name, spec, log_path))
    print(f"\nshim MLP, use_tpu=False, iterations_per_loop=100, global batch 128, "
          f"{args.steps} steps; median loop ms per process, median [min..max] over "
          f"{args.repeats} processes:")
    for name, values in medians.items():
        print(f"| {name} | {statistics.median(values):.2f} [{min(values):.2f}.."
              f"{max(values):.2f}] |")


if __name__ == "__main__":
    main(sys.argv)
