"""`python -m bench`: one command, one machine, one table of ratios with PASS/FAIL.

    .venv/bin/python -m bench --write-results   # full matrix, 3 interleaved repeats
    .venv/bin/python -m bench --quick           # < 3 min: shim, tf2, legacy; 1 replica, k=10

Filters (`--workloads mlp --contenders shim,tf2 --replicas 1 ...`) narrow the matrix for
profiling one row. `--json F` appends each result to F as it lands (keep raw runs in
bench/results/); `--from-json F` renders the tables from such a file without running anything.
`--write-results` puts the rows with a target into bench/RESULTS.md between its markers; the
printed report has every row, the absolute figures and the CNN's compute efficiency. Exits 1
when a contender process failed; targets that FAIL do not change the exit code (they are
measurements, in the table).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

from bench import harness
from bench import report
from bench.workloads import WORKLOADS

RESULTS_MD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")
MACHINE = "Machine: "
QUICK = {"steps_per_call": (10,), "replicas": (1,), "contenders": ("shim", "tf2", "legacy"),
         "repeats": 1, "scale": 0.25, "workloads": ("cnn", "mlp", "resnet"),
         "peak_flops": False}


def _csv(kind: type) -> Callable[[str], tuple]:
    return lambda text: tuple(kind(part) for part in text.split(",") if part)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help=f"development run, < 3 min: {QUICK}")
    p.add_argument("--workloads", type=_csv(str), help="subset of " + ",".join(WORKLOADS))
    p.add_argument("--contenders", type=_csv(str),
                   help="subset of " + ",".join(harness.CONTENDERS))
    p.add_argument("--steps-per-call", type=_csv(int), help="default 1,10,100")
    p.add_argument("--replicas", type=_csv(int), help="default 1,8")
    p.add_argument("--repeats", type=int, help="interleaved repeats (default 3)")
    p.add_argument("--scale", type=float, help="multiplies measured steps (default 1.0)")
    p.add_argument("--timing-repeats", type=int, help="timed calls per size, eval/predict")
    p.add_argument("--no-replica-inference", dest="replica_inference", action="store_false",
                   default=None, help="skip eval/predict on 8 replicas (no target uses it)")
    p.add_argument("--shim-rev", help="measure tpu_estimator_compat as committed at this "
                                      "git revision (default: the working tree)")
    p.add_argument("--cpu-allocator", choices=harness.ALLOCATOR_MODES,
                   help="TensorFlow's CPU allocator: malloc (TF's default, the default "
                        "here) or bfc (TF_CPU_ALLOCATOR_USE_BFC=true) for every contender; "
                        "launcher: each as its user gets it by default, the shim as its "
                        "launcher picks (BFC on 2 or more CPU replicas, malloc on one), "
                        "every other contender on malloc")
    p.add_argument("--no-peak-flops", dest="peak_flops", action="store_false", default=None,
                   help="skip the peak matmul FLOP/s measurement (CNN compute efficiency)")
    p.add_argument("--json", help="append every raw result to this JSON-lines file")
    p.add_argument("--from-json", help="render the tables from a --json file; run nothing")
    p.add_argument("--write-results", action="store_true",
                   help="rewrite the generated part of bench/RESULTS.md")
    return p.parse_args(argv)


def options_from(args: argparse.Namespace) -> harness.Options:
    values: dict[str, Any] = dict(QUICK) if args.quick else {}
    for name in ("workloads", "contenders", "steps_per_call", "replicas", "repeats", "scale",
                 "timing_repeats", "shim_rev", "replica_inference", "cpu_allocator",
                 "peak_flops"):
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    for name, allowed in (("workloads", WORKLOADS), ("contenders", harness.CONTENDERS)):
        unknown = set(values.get(name, ())) - set(allowed)
        if unknown:
            raise SystemExit(f"--{name}: unknown {sorted(unknown)}; choose from {list(allowed)}")
    return harness.Options(**values)


def _append(path: str | None) -> Callable[[dict[str, Any]], None]:
    def record(result: dict[str, Any]) -> None:
        if path:
            with open(path, "a") as f:
                f.write(json.dumps(result) + "\n")
    return record


def _timing_repeats(results: list[dict[str, Any]]) -> str:
    """How many timed calls per size the recorded eval/predict figures took the best of."""
    counts = sorted({int(r.get("timing_repeats", 1)) for r in results})
    return " or ".join(str(c) for c in counts) or "1"


def _allocators(results: list[dict[str, Any]]) -> str:
    """Which CPU allocator each contender ran on (the same for all, or per contender)."""
    # Results recorded before the option existed all ran on TF's default allocator.
    by_contender: dict[str, set[str]] = {}
    for r in results:
        if r.get("kind") != "peak":
            by_contender.setdefault(r["contender"], set()).add(r.get("cpu_allocator", "malloc"))
    allocators = sorted(set().union(*by_contender.values()))
    if len(allocators) == 1:
        text = (f"CPU allocator {allocators[0]} (`TF_CPU_ALLOCATOR_USE_BFC`="
                f"{harness.CPU_ALLOCATORS[allocators[0]]}, all contenders)")
    else:
        text = ("CPU allocator per contender (`--cpu-allocator launcher`: as each user gets "
                "it by default): " + ", ".join(f"{c} {' and '.join(sorted(a))}"
                                               for c, a in sorted(by_contender.items())))
    # Results recorded before the launcher set it ran with TF's default (on).
    tfg_off = sorted({r["contender"] for r in results if r.get("tfg_optimizer") == "off"})
    if tfg_off:
        text += (f"; Grappler's TFG pass pipeline off (the launcher's default, "
                 f"`{harness.TFG_ENV}=off`) for {', '.join(tfg_off)}, on for the others")
    return text


def _machine(context: list[str]) -> tuple[str, list[str]]:
    """The machine the results were measured on, and the context without its line.

    Runs record it with their context; older files did not, and rendering them on another
    machine must not claim that machine as theirs.
    """
    recorded = [line for line in context if line.startswith(MACHINE)]
    if recorded:
        return recorded[0][len(MACHINE):].rstrip("."), [l for l in context if l not in recorded]
    return f"not recorded with these results (rendered on {report.machine()})", context


def render(results: list[dict[str, Any]], context: list[str], *, full: bool = True,
           source: str | None = None) -> str:
    """The tables of a run. `full=False` is RESULTS.md's part: the rows with a target.

    The rows without one, the absolute figures and the compute efficiency stay in the
    printed report and in the raw file, which `--from-json` renders whole.
    """
    table_rows = report.rows(results)
    shown = table_rows if full else [r for r in table_rows if r.verdict != "info"]
    loads = [r["load1_before"] for r in results]
    tf_versions = sorted({r["tf_version"] for r in results if "tf_version" in r})
    repeats = len({r["repeat"] for r in results})
    processes = len([r for r in results if r.get("kind") != "peak"])
    machine, context = _machine(context)
    header = context + [
        f"{processes} contender processes in {repeats} interleaved repeat(s); ratios are "
        "shim / reference within a repeat, median [min..max] over repeats; verdicts use the "
        "median. Throughput is the best of up to 5 windows of whole calls after warm-up; "
        "eval/predict from the time difference of a 1-batch and a longer call, each size "
        f"the fastest of {_timing_repeats(results)} call(s), sizes alternating.",
        f"Machine: {machine}; TensorFlow {' and '.join(tf_versions)}; "
        f"{_allocators(results)}.",
        f"Load (1-min average when each process started): median "
        f"{statistics.median(loads):.2f}, max {max(loads):.2f}, on {os.cpu_count()} cores.",
    ]
    if not full:
        info = len(table_rows) - len(shown)
        where = (f"`.venv/bin/python -m bench --from-json {source}`" if source
                 else "the run's printed report (no `--json` file was kept)")
        header.append(f"Shown: the {len(shown)} rows with a target. The {info} rows without "
                      f"one (info), the absolute figures per contender and the CNN's compute "
                      f"efficiency: {where}.")
    efficiency = report.efficiency_table(results)
    text = ("\n".join(f"- {line}" for line in header)
            + f"\n\n### Ratios and targets ({report.summary(shown)})\n\n"
            + report.ratio_table(shown))
    if not full:
        return text + "\n"
    text += "\n\n### Absolute figures (medians)\n\n" + report.figures_table(results) + "\n"
    return text + (f"\n### Compute efficiency (CNN)\n\n{efficiency}\n" if efficiency else "")


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = ".venv/bin/python -m bench " + shlex.join(argv)
    if args.from_json:
        with open(args.from_json) as f:
            records = [json.loads(line) for line in f if line.strip()]
        results = [r for r in records if "context" not in r]
        context = [line for r in records for line in r.get("context", [])] + [
            f"Rendered by `{command.strip()}` from the {len(results)} results recorded."]
    else:
        options = options_from(args)
        started = datetime.datetime.now().astimezone()
        busy_before, git_state = harness.busy_processes(), harness.git_state(options.shim_rev)
        _append(args.json)({"context": [
            f"Command: `{command.strip()}` (from the repository root), started "
            f"{started:%Y-%m-%d %H:%M %Z}. Code: {git_state}.",
            "Other busy processes at start: " + ("; ".join(busy_before) or "none") + ".",
            f"{MACHINE}{report.machine()}."]})
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="tpu_bench_") as tmp:
            results = harness.run_all(options, tmp, progress=lambda s: print(s, flush=True),
                                      record=_append(args.json))
        busy_after = harness.busy_processes()
        _append(args.json)({"context": [
            "Other busy processes at end: " + ("; ".join(busy_after) or "none") + "."]})
        context = [
            f"Command: `{command.strip()}` (from the repository root).",
            f"Started {started:%Y-%m-%d %H:%M %Z}, took "
            f"{(time.monotonic() - t0) / 60:.1f} min. Code: {git_state}.",
            "Other busy processes at start: " + ("; ".join(busy_before) or "none") + ".",
            "Other busy processes at end: " + ("; ".join(busy_after) or "none") + ".",
            f"{MACHINE}{report.machine()}.",
        ]
    text = render(results, context)
    print("\n" + text)
    if args.write_results:
        source = args.from_json or args.json
        report.write_results(RESULTS_MD, render(results, context, full=False, source=source))
        print(f"Wrote {RESULTS_MD}")
    errors = [r for r in results if "error" in r]
    for r in errors:
        print(f"ERROR {r['contender']}/{r['workload']}/r{r['replicas']}/k{r['steps_per_call']}:"
              f" {r['error']}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
