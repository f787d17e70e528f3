"""Speed of `python -m tpu_estimator_compat.scan`: files per second on one core.

    python -m bench.scan_speed [PATH...] [--repeats N] [--cpu K]

(from the repository root) pins this process to one CPU (`--cpu`, default the last one),
scans PATHs (default: `legacy_models/` and `../shared/realworld`) `--repeats` times in
process, and prints one row: files, the best wall time, files/s and the issue's target
(>= 500 files/s, judged on the process's CPU time: on a shared machine wall time also counts
other processes' turns on the pinned core), with `ast.parse` alone over the same files beside
it. Loading the scan's tables (TF's names), which every command-line run pays once, is
printed apart. TensorFlow is never imported (the row says so, checked on `sys.modules`).
"""

from __future__ import annotations

import argparse
import ast
import os
import resource
import sys
import time

TARGET = 500.0


def main(argv: list[str] | None = None) -> int:
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(prog="python -m bench.scan_speed")
    parser.add_argument("paths", nargs="*", default=[
        os.path.join(repo, "legacy_models"), os.path.join(repo, "..", "shared", "realworld")])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    args = parser.parse_args(argv)
    os.sched_setaffinity(0, {args.cpu})
    started = time.perf_counter()
    from tpu_estimator_compat.scan import cli
    from tpu_estimator_compat.scan import names

    names.tf_names()
    first = time.perf_counter() - started
    paths = [p for p in args.paths if os.path.exists(p)]
    times, cpu_times, files, size = [], [], 0, 0
    for _ in range(args.repeats):
        start, cpu_start = time.perf_counter(), time.process_time()
        results, _ = cli.scan(paths)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
        files = sum(len(r.files) for r in results)
        size = sum(os.path.getsize(f.path) for r in results for f in r.files)
    # The floor, side by side: Python's own parser over the same files (no scan can skip it
    # for a file that names TensorFlow).
    sources = [open(f.path, "rb").read() for r in results for f in r.files
               if f.path.endswith(".py") and not f.problem]
    parse_cpu = []
    for _ in range(args.repeats):
        cpu_start = time.process_time()
        for source in sources:
            ast.parse(source)
        parse_cpu.append(time.process_time() - cpu_start)
    parse_rate = len(sources) / min(parse_cpu)
    best, best_cpu = min(times), min(cpu_times)
    rate, cpu_rate = files / best, files / best_cpu
    load = os.getloadavg()[0]
    # On a shared machine wall time counts other processes' turns on the core; the CPU time
    # of this process is the scan's own cost. The verdict uses the CPU figure.
    print(f"| scan | {files} files, {size / 2**20:.1f} MiB | best of {args.repeats}: wall "
          f"{best:.3f} s ({rate:,.0f} files/s), CPU {best_cpu:.3f} s ({cpu_rate:,.0f} files/s) "
          f"| >= {TARGET:.0f} files/s | {'PASS' if cpu_rate >= TARGET else 'FAIL'} |")
    print(f"ast.parse alone over the same {len(sources)} .py files: {parse_rate:,.0f} files/s "
          f"CPU; scan / parse-alone rate: {cpu_rate / parse_rate:.2f}")
    print(f"start-up (import + TF names table): {first:.3f} s; CPU {args.cpu} only; "
          f"load average {load:.2f} on {os.cpu_count()} cores; peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB; TensorFlow "
          f"imported: {'tensorflow' in sys.modules}")
    return 0 if cpu_rate >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
