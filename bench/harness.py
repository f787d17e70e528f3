"""Runs the contender matrix as interleaved subprocesses and collects one result per run.

Owns scheduling only: which (contender, workload, replicas, steps per call) runs exist, their
order, the pinned environment, and turning each subprocess's BENCH_RESULT line into a dict.
Every run is its own process so peak RSS and time to first step are that contender's own.
Within a repeat, runs of one workload sit next to each other with contenders alternating, and
odd repeats run in reverse order (ABBA), so a slow drift in machine load hits shim and
reference alike; ratios are then taken within a repeat (`report.py`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any, Callable, Iterable

from bench import common
from bench.workloads import WORKLOADS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = {"new": os.path.join(REPO, ".venv", "bin", "python"),
          "legacy": os.path.join(REPO, ".venv-legacy", "bin", "python")}
CONTENDERS = ("shim", "shim_nosum", "tf2", "raw", "keras", "legacy")
MULTI_REPLICA_CONTENDERS = ("shim", "tf2")  # The issue measures 8 replicas for these two.
# The raw loop (`run_raw.py`) is hand-written per model: the overhead-bound MLPs, where it is
# the limit. `shim_nosum` (the shim with legacy's training summaries off) runs next to it.
LIMIT_CONTENDERS = {"raw": ("mlp", "mlp64"), "shim_nosum": ("mlp", "mlp64")}
MODULES = {"shim_nosum": "bench.run_shim"}  # Contender -> module, when not bench.run_<name>.
# Pinned on both stacks: oneDNN changes float results and timings; quiet C++ logs.
BASE_ENV = {"TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONHASHSEED": "0"}
NEW_STACK_ENV = {"TF_USE_LEGACY_KERAS": "1"}  # r1 layers and tf_keras on TF 2.21.
# TensorFlow's CPU allocator, pinned for every contender on both stacks (TF 2.15 and 2.21 read
# the same variable). "malloc" is TF's default; "bfc" is TF's own pooling allocator. On glibc,
# malloc hands big freed tensors back to the kernel and page-faults them in again: on the
# 8-replica ResNet that is over half the process's CPU time (bench/results/HISTORY.md, finding 11).
CPU_ALLOCATORS = {"malloc": "false", "bfc": "true"}
# `--cpu-allocator launcher`: every contender as its user gets it by default. The shim's
# launcher (`python -m tpu_estimator_compat.run`) turns BFC on for the script it runs on
# several CPU replicas (`run.cpu_allocator`, unless the user set the variable); everything
# else runs on TensorFlow's default, malloc.
LAUNCHER_CONTENDERS = ("shim", "shim_nosum")
ALLOCATOR_MODES = (*CPU_ALLOCATORS, "launcher")
# The launcher's other process setting (`run.tfg_optimizer`): Grappler's TFG (MLIR) pass
# pipeline off. In `launcher` mode the shim's contenders get it through the variable the
# library reads, as a launcher-run script does; every other contender keeps TF's default.
# The name is runtime.TFG_OPTIMIZER_ENV's (the harness imports neither the library nor
# TensorFlow; tests/test_bench.py checks the two agree).
TFG_ENV = "TPU_ESTIMATOR_COMPAT_TFG_OPTIMIZER"


def launcher_env(mode: str, contender: str) -> dict[str, str]:
    """The variables, beyond the allocator's, that `contender`'s process gets under `mode`."""
    if mode == "launcher" and contender in LAUNCHER_CONTENDERS:
        return {TFG_ENV: "off"}
    return {}


def allocator_for(mode: str, contender: str, replicas: int = 1) -> str:
    """The CPU allocator (a key of CPU_ALLOCATORS) `contender` runs on under `mode`, on
    `replicas` CPU replicas."""
    if mode == "launcher":
        return ("bfc" if contender in LAUNCHER_CONTENDERS and replicas > 1
                else "malloc")
    return mode
WARMUP_STEPS = 10
MULTI_REPLICA_SCALE = 0.5


@dataclasses.dataclass(frozen=True)
class Run:
    contender: str
    workload: str
    replicas: int
    steps_per_call: int  # iterations_per_loop / steps per tf.function call / per execution.

    @property
    def label(self) -> str:
        return f"{self.contender}/{self.workload}/r{self.replicas}/k{self.steps_per_call}"


@dataclasses.dataclass(frozen=True)
class Options:
    workloads: tuple[str, ...] = tuple(WORKLOADS)
    steps_per_call: tuple[int, ...] = (1, 10, 100)
    replicas: tuple[int, ...] | None = None  # None: each workload's own, else (1, 8).
    contenders: tuple[str, ...] = CONTENDERS
    repeats: int = 3
    scale: float = 1.0  # Multiplies every workload's measured train/eval/predict steps.
    # Timed calls per size in eval/predict (`common.marginal_rate`), alternating, fastest
    # kept. One was not enough: a call can run at half speed with one core idle, in every
    # contender (bench/results/HISTORY.md, finding 15).
    timing_repeats: int = 3
    timeout: float = 1200.0
    shim_rev: str | None = None  # Measure the library as committed at this git revision.
    # Eval/predict on 8 replicas: a noisy 2-3 s fixed cost per call there (distributed
    # iterator, restore) needs long calls to resolve the per-batch cost; off saves ~half
    # the full run. No target depends on it.
    replica_inference: bool = True
    # A key of CPU_ALLOCATORS (the same for every contender) or "launcher" (see allocator_for).
    cpu_allocator: str = "malloc"
    # Measure peak float32 matmul FLOP/s once per repeat (the CNN's compute efficiency).
    peak_flops: bool = True


def matrix(options: Options) -> list[Run]:
    """All runs of one repeat, grouped by workload and replicas, contenders alternating.

    Legacy TPUEstimator(use_tpu=False) runs one step per session.run whatever
    iterations_per_loop says, so it runs once per workload, as k=1.
    """
    runs: list[Run] = []
    for workload in options.workloads:
        spec = WORKLOADS[workload]
        for replicas in options.replicas or spec.replicas or (1, 8):
            allowed = [c for c in options.contenders
                       if (replicas == 1 or c in MULTI_REPLICA_CONTENDERS)
                       and workload in LIMIT_CONTENDERS.get(c, (workload,))
                       and c in (spec.contenders or (c,))]
            for k in spec.steps_per_call or options.steps_per_call:
                runs += [Run(c, workload, replicas, k) for c in allowed if c != "legacy"]
            if "legacy" in allowed:
                runs.append(Run("legacy", workload, replicas, 1))
    return runs


def spec_for(run: Run, options: Options, data: str, tmp: str) -> dict[str, Any]:
    """The JSON a contender process gets. Same steps for every contender of a row."""
    workload = WORKLOADS[run.workload]
    # 8 replicas on 2 cores run several times slower per step; halve their windows so the
    # full matrix stays near an hour. Rates, not counts, are compared.
    scale = options.scale * (MULTI_REPLICA_SCALE if run.replicas > 1 else 1.0)
    return {"contender": run.contender, "workload": run.workload, "replicas": run.replicas,
            "steps_per_call": run.steps_per_call, "warmup_steps": WARMUP_STEPS,
            "measure_steps": max(1, round(workload.measure_steps * scale)),
            "eval_steps": max(1, round(workload.eval_steps * scale)),
            "timing_repeats": options.timing_repeats, "data": data, "tmp": tmp,
            "inference": run.replicas == 1 or options.replica_inference}


def prepare_code(tmp: str, shim_rev: str | None) -> str:
    """A frozen copy of the code the contenders import, first on their PYTHONPATH.

    The working tree is shared with other developers: copying `bench/` (and, with
    `shim_rev`, exporting `tpu_estimator_compat/` at that revision) keeps every run of one
    benchmark on the same code even if files change while it runs.
    """
    code = os.path.join(tmp, "code")
    shutil.copytree(os.path.join(REPO, "bench"), os.path.join(code, "bench"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.md"))
    if shim_rev:
        archive = subprocess.run(["git", "archive", shim_rev, "tpu_estimator_compat"],
                                 cwd=REPO, stdout=subprocess.PIPE, check=True).stdout
        subprocess.run(["tar", "-x", "-C", code], input=archive, check=True)
    return code


def _env(stack: str, code: str, cpu_allocator: str,
         extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TF_USE_LEGACY_KERAS", TFG_ENV)}
    env.update(BASE_ENV)
    env.update(extra or {})
    env["TF_CPU_ALLOCATOR_USE_BFC"] = CPU_ALLOCATORS[cpu_allocator]
    if stack == "new":
        env.update(NEW_STACK_ENV)
    env["PYTHONPATH"] = os.pathsep.join([code, REPO])
    return env


def _run_process(argv: list[str], stack: str, log_path: str, timeout: float,
                 code: str, cpu_allocator: str = "malloc",
                 extra_env: dict[str, str] | None = None) -> str:
    with open(log_path, "w") as log:
        proc = subprocess.run(argv, cwd=code, env=_env(stack, code, cpu_allocator, extra_env),
                              stdout=subprocess.PIPE, stderr=log, text=True, timeout=timeout)
    if proc.returncode:
        with open(log_path) as log:
            tail = "".join(log.readlines()[-15:])
        raise RuntimeError(f"exit {proc.returncode}; {log_path} ends:\n{tail}")
    return proc.stdout


def make_data(tmp: str, code: str) -> str:
    """Generates the shared digits .npz once, in the temp dir every contender reads from."""
    path = os.path.join(tmp, "digits.npz")
    _run_process([PYTHON["new"], "-m", "bench.data", path, REPO], "new",
                 os.path.join(tmp, "data.log"), 300, code)
    return path


def run_one(run: Run, spec: dict[str, Any], tmp: str, repeat: int,
            timeout: float, code: str, cpu_allocator: str) -> dict[str, Any]:
    stack = "legacy" if run.contender == "legacy" else "new"
    module = (WORKLOADS[run.workload].runner
              or MODULES.get(run.contender, f"bench.run_{run.contender}"))
    argv = [PYTHON[stack], "-m", module, json.dumps(spec)]
    extra_env = launcher_env(cpu_allocator, run.contender)
    cpu_allocator = allocator_for(cpu_allocator, run.contender, run.replicas)
    log_path = os.path.join(tmp, f"{run.label.replace('/', '_')}_rep{repeat}.log")
    start, load = time.monotonic(), os.getloadavg()[0]
    try:
        out = _run_process(argv, stack, log_path, timeout, code, cpu_allocator, extra_env)
        lines = [line for line in out.splitlines() if line.startswith(common.RESULT_PREFIX)]
        if len(lines) != 1:
            raise RuntimeError(f"expected one {common.RESULT_PREFIX.strip()} line, got "
                               f"{len(lines)}; see {log_path}")
        result = json.loads(lines[0][len(common.RESULT_PREFIX):])
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        result = {"error": str(e)}
    result.update(dataclasses.asdict(run), repeat=repeat, seconds=time.monotonic() - start,
                  load1_before=load, cpu_allocator=cpu_allocator,
                  tfg_optimizer=extra_env.get(TFG_ENV, "on"))
    return result


def run_all(options: Options, tmp: str | None = None,
            progress: Callable[[str], None] = print,
            record: Callable[[dict[str, Any]], None] = lambda result: None,
            ) -> list[dict[str, Any]]:
    """Runs `options.repeats` interleaved repeats of the matrix; returns every result.

    `record` gets each result as soon as its process ends, so an interrupted run keeps what
    it measured (`python -m bench --from-json`).
    """
    tmp = tmp or tempfile.mkdtemp(prefix="tpu_bench_")
    code = prepare_code(tmp, options.shim_rev)
    data = make_data(tmp, code)
    runs = matrix(options)
    results = []
    for repeat in range(options.repeats):
        if options.peak_flops:
            result = peak_flops(tmp, repeat, options.timeout, code,
                                allocator_for(options.cpu_allocator, "tf2"))
            record(result)
            progress(f"[repeat {repeat + 1}/{options.repeats}] peak matmul: "
                     f"{result.get('matmul_flops_per_sec', float('nan')) / 1e9:.1f} GFLOP/s")
            results.append(result)
        ordered: Iterable[Run] = runs if repeat % 2 == 0 else reversed(runs)
        for i, run in enumerate(ordered):
            result = run_one(run, spec_for(run, options, data, tmp), tmp, repeat,
                             options.timeout, code, options.cpu_allocator)
            record(result)
            status = ("ERROR " + result["error"].splitlines()[0] if "error" in result
                      else f"{result['train_steps_per_sec']:.4g} steps/s")
            progress(f"[repeat {repeat + 1}/{options.repeats} run {i + 1}/{len(runs)}] "
                     f"{run.label}: {status} ({result['seconds']:.0f} s)")
            results.append(result)
    return results



def peak_flops(tmp: str, repeat: int, timeout: float, code: str,
               cpu_allocator: str) -> dict[str, Any]:
    """This machine's float32 matmul FLOP/s now (`bench.peak_flops`), once per repeat.

    On the hand-written loop's allocator. Recorded with `kind: peak`.
    """
    log_path = os.path.join(tmp, f"peak_rep{repeat}.log")
    start, load = time.monotonic(), os.getloadavg()[0]
    try:
        out = _run_process([PYTHON["new"], "-m", "bench.peak_flops"], "new", log_path,
                           timeout, code, cpu_allocator)
        line = next(l for l in out.splitlines() if l.startswith(common.RESULT_PREFIX))
        result = json.loads(line[len(common.RESULT_PREFIX):])
    except (RuntimeError, StopIteration, subprocess.TimeoutExpired) as e:
        result = {"error": str(e)}
    result.update(kind="peak", repeat=repeat, seconds=time.monotonic() - start,
                  load1_before=load, cpu_allocator=cpu_allocator)
    return result


def busy_processes(min_cpu: float = 5.0) -> list[str]:
    """Other processes using CPU now (ps %CPU, lifetime average): the noise in the numbers."""
    try:
        out = subprocess.run(["ps", "-eo", "pid,pcpu,args", "--sort=-pcpu"], text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
    except OSError:
        return []
    busy = []
    for line in out.splitlines()[1:]:
        pid, cpu, args = line.split(None, 2)
        if int(pid) != os.getpid() and float(cpu) >= min_cpu and "<defunct>" not in args:
            busy.append(f"{float(cpu):.0f}% {args[:90]}")
    return busy


def git_state(shim_rev: str | None = None) -> str:
    """The commit measured, and whether the library had uncommitted edits (shared tree)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL).stdout.strip()

    if shim_rev:
        return f"tpu_estimator_compat/ exported from {git('rev-parse', '--short', shim_rev)}"
    dirty = git("status", "--porcelain", "--", "tpu_estimator_compat")
    return git("rev-parse", "--short", "HEAD") + (
        f" with uncommitted edits in tpu_estimator_compat/ ({len(dirty.splitlines())} files)"
        if dirty else ", tpu_estimator_compat/ clean")
