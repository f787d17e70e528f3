"""Stack-agnostic helpers for contender processes: result lines, peak RSS and rate windows.

Every contender runs in its own process (so peak RSS is its own) and prints exactly one
`BENCH_RESULT {json}` line on stdout for the harness. This module is imported under both
TF 2.21 (`.venv`) and TF 2.15 (`.venv-legacy`), so it uses only the standard library.
"""

from __future__ import annotations

import json
import math
import os
import resource
import sys
import time
from typing import Any, Callable, Sequence

RESULT_PREFIX = "BENCH_RESULT "

clock: Callable[[], float] = time.perf_counter
cpu_clock: Callable[[], float] = time.process_time  # All threads of this process.


def stamp(steps: int) -> tuple[int, float, float]:
    """(steps finished, wall clock, process CPU seconds) at the end of a call."""
    return steps, clock(), cpu_clock()


def emit(result: dict[str, Any]) -> None:
    """Prints the one line the harness parses, then ends the process at once.

    Everything else a contender prints is noise. Skipping interpreter teardown matters:
    processes holding MirroredStrategy input pipelines over 8 logical CPUs took 2-3 minutes
    to shut down under load, after their result was already measured.
    """
    sys.stdout.write(RESULT_PREFIX + json.dumps(result, sort_keys=True) + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def parse_spec(argv: Sequence[str]) -> dict[str, Any]:
    """The run spec the harness passes as one JSON argument."""
    if len(argv) != 2:
        raise SystemExit(f"usage: {argv[0]} '<json spec>'")
    return json.loads(argv[1])


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def round_up(value: int, multiple: int) -> int:
    return int(math.ceil(value / multiple) * multiple)


# At least this many measured calls, so `steady_rate` has windows to choose from: with one
# 100-step call, a ResNet run that hit one of the machine's slow phases (a call taking 4.3 s
# instead of 3.2 s, seen in shim and TF2 loop alike) had no faster window to fall back on.
MIN_MEASURED_CALLS = 2


def train_plan(spec: dict[str, Any]) -> tuple[int, int]:
    """(warm-up steps, measured steps) of the throughput call, both whole k-step calls.

    Warm-up covers at least one call and at least `warmup_steps` steps, so one-step-per-call
    contenders also skip their first, allocation-heavy steps. The measured part is at least
    `MIN_MEASURED_CALLS` calls.
    """
    k = spec["steps_per_call"]
    warm = round_up(max(spec["warmup_steps"], k), k)
    return warm, round_up(max(spec["measure_steps"], MIN_MEASURED_CALLS * k), k)


def steady_rate(stamps: Sequence[tuple[int, float, float]], warmup_steps: int,
                windows: int = 5) -> tuple[float, float]:
    """(best-window steps/sec, whole-span steps/sec) after the warm-up.

    `stamps` are (cumulative steps finished, clock, CPU) at the end of each call. The measured
    span starts at the stamp where `warmup_steps` steps had finished, so every host round trip
    and everything the contender does between calls falls inside it. The span is cut into up
    to `windows` runs of whole calls; on a shared machine other processes only ever slow a
    window down, so the fastest window is the most faithful figure, and every contender is
    treated the same way.
    """
    start = next(i for i, s in enumerate(stamps) if s[0] >= warmup_steps)
    span = list(stamps[start:])
    if len(span) < 2:
        raise ValueError(f"no measured calls after warm-up {warmup_steps}: {stamps}")
    calls = len(span) - 1
    parts = min(windows, calls)
    edges = sorted({round(i * calls / parts) for i in range(parts + 1)})
    rates = [(span[b][0] - span[a][0]) / (span[b][1] - span[a][1])
             for a, b in zip(edges, edges[1:])]
    whole = (span[-1][0] - span[0][0]) / (span[-1][1] - span[0][1])
    return max(rates), whole


def train_figures(t_call: float, first: Sequence[tuple[int, float, float]],
                  stamps: Sequence[tuple[int, float, float]],
                  warmup_steps: int) -> dict[str, float]:
    """The train figures from a 1-step first call and a separate throughput call.

    The first call of a fresh process carries the trace/compile or graph build; its end is
    the time to first step, exactly, whatever the steps per call. CPU milliseconds per step
    (all threads, over the whole measured span) barely move with other processes' load, so
    they cross-check wall-clock ratios on a shared machine.
    """
    best, whole = steady_rate(stamps, warmup_steps)
    start = next(s for s in stamps if s[0] >= warmup_steps)
    cpu_ms = 1000 * (stamps[-1][2] - start[2]) / (stamps[-1][0] - start[0])
    return {"time_to_first_step": first[0][1] - t_call, "train_steps_per_sec": best,
            "train_steps_per_sec_whole": whole, "train_cpu_ms_per_step": cpu_ms,
            "train_steps": stamps[-1][0]}


def loop_train_figures(spec: dict[str, Any], t_call: float,
                       train_call: Callable[[Any, int, int], tuple[int, float, float]],
                       fresh_iterator: Callable[[], Any]) -> dict[str, float]:
    """`train_figures` of a hand-written loop (the TF2 and raw contenders), timed alike.

    `train_call(iterator, n, steps_before)` runs n steps and returns their stamp. A 1-step
    first call (the trace: time to first step), then whole k-step calls on a fresh iterator,
    as a second `train()` makes, until the warm-up and measured steps of `train_plan` are run.
    """
    k = spec["steps_per_call"]
    first = [train_call(fresh_iterator(), 1, 0)]
    warm, measured = train_plan(spec)
    iterator = fresh_iterator()
    stamps: list[tuple[int, float, float]] = []
    while not stamps or stamps[-1][0] < warm + measured:
        stamps.append(train_call(iterator, k, len(stamps) * k))
    return train_figures(t_call, first, stamps, warm)


def timed(fn: Callable[[], Any]) -> float:
    start = clock()
    fn()
    return clock() - start


def call_sizes(spec: dict[str, Any], batch_size: int) -> dict[str, int]:
    """`marginal_rate` arguments: a 1-batch call vs one with whole k-batch loops added.

    With k batches per loop, a call of 1 + m*k batches runs one 1-batch loop plus m full
    loops, so the difference between the two calls is exactly m full loops.
    """
    k = spec["steps_per_call"]
    return {"small": 1, "big": 1 + round_up(spec["eval_steps"], k), "batch_size": batch_size,
            "repeats": spec["timing_repeats"]}


NO_INFERENCE = {"eval_examples_per_sec": float("nan"), "eval_call_overhead": float("nan"),
                "predict_examples_per_sec": float("nan"), "predict_call_overhead": float("nan")}


def add_inference_figures(spec: dict[str, Any], result: dict[str, Any], batch_size: int,
                          evaluate: Callable[[int], Any], predict: Callable[[int], Any]) -> None:
    """Adds eval and predict ex/s (NaN when `spec` turns inference off) and peak RSS to the
    train figures in `result`. Every contender measures them this way: `evaluate(steps)` /
    `predict(steps)` run that many batches, and each runs one untimed batch first, so its
    trace or graph build is not timed."""
    if spec["inference"]:
        sizes = call_sizes(spec, batch_size)
        evaluate(1)
        result["eval_examples_per_sec"], result["eval_call_overhead"] = marginal_rate(
            evaluate, **sizes)
        predict(1)
        result["predict_examples_per_sec"], result["predict_call_overhead"] = (
            marginal_rate(predict, **sizes))
    else:
        result.update(NO_INFERENCE)
    result["peak_rss_mb"] = peak_rss_mb()


def marginal_rate(call: Callable[[int], Any], *, small: int, big: int, batch_size: int,
                  repeats: int = 1) -> tuple[float, float]:
    """(examples/sec, fixed seconds per call) of `call(steps)`, from calls of two sizes.

    Eval and predict calls carry fixed costs (graph build, restore, trace lookup, metric
    graph) that differ per contender; the difference between a `big` and a `small` call is
    the steady per-batch cost, and the intercept the per-call overhead. Sizes alternate and
    each keeps its fastest time, since noise from other processes only ever adds time.
    """
    times: dict[int, list[float]] = {small: [], big: []}
    for _ in range(repeats):
        for steps in (small, big):
            times[steps].append(timed(lambda: call(steps)))
    t_small, t_big = min(times[small]), min(times[big])
    if t_big <= t_small:  # Noise swamped the difference: report no figure, not a wrong one.
        sys.stderr.write(f"marginal_rate: {big} steps no slower than {small}: {times}\n")
        return float("nan"), float("nan")
    rate = (big - small) * batch_size / (t_big - t_small)
    return rate, t_small - small * batch_size / rate
