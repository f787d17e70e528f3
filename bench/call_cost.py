"""Fixed cost per call and steady steps/s on N replicas: the shim and a hand loop.

    python -m bench.call_cost [--processes one|two] [--replicas 8] [--rounds 3] \
        [--json bench/results/F.jsonl]
    python -m bench.call_cost --profile [--noseed] [--top N]   # counts of one call each

Issue 45's rows. One process holds both sides on the same MirroredStrategy over the CPU
split into N logical devices (the shim's own process-wide strategy; a second strategy would
clash on collective keys), the bench's CNN (`cnn`: mnist_tpu's model_fn, global batch 128)
and its digits. The shim is `TPUEstimator(use_tpu=True)` with iterations_per_loop=100; the
hand loop is `run_tf2.py`'s (tf_keras model, `strategy.run` in a `tf.range` loop in one
`tf.function`), which keeps one iterator across its train calls, as a hand-written loop does;
its eval and predict calls each open a new iterator, as the shim must (input_fn is called
once per call). Calls alternate between the sides, sizes alternate, and every figure is the
fastest of `--rounds` calls (load from other processes only ever adds time).

Figures: train steps/s of a 20-step and a 100-step call (whole call: restore, checkpoints
and input included for the shim); the fixed cost per call, the intercept of the call time
against its steps (train: the slope of the 20- and 100-step calls, through the 1-step
call; evaluate and predict: from a 1-batch and a (1 + 20)-batch call). Process settings are the same for both sides and are
recorded (`TF_CPU_ALLOCATOR_USE_BFC`, `TPU_ESTIMATOR_COMPAT_TFG_OPTIMIZER`).

`--processes two` is issue 45's own setup: each side in a child process of its own, the shim
under its launcher's process settings (`python -m tpu_estimator_compat.run --cpu_replicas=N`:
TensorFlow's BFC allocator from 2 replicas on, Grappler's TFG pipeline off; the values of
`bench.harness`'s `--cpu-allocator launcher`), the hand loop under TensorFlow's defaults
(malloc, TFG on), whatever the caller's environment says. This process only schedules: the
same call order as in one process (sides alternating, sizes alternating, odd rounds
reversed), one call at a time, each timed inside its child (a waiting child blocks on its
pipe); the tf_keras ordering constraint above does not arise. `--cpu-allocator malloc|bfc`
gives both children that allocator instead (and TensorFlow's TFG setting), to tell the
allocator's share of a ratio from the step's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL, BIG = 20, 100  # Train steps per call of the steady-state figures.
INFER_BIG = 21  # Batches of the larger eval/predict call (the small one has 1).
# Call sizes per kind, smallest first: the slope comes from the two largest, the fixed cost
# from the smallest (a 1-step train call: the intercept is then its time less one step,
# where from the 20-step call it was 1.25 t20 - 0.25 t100, and 2% noise in t20 moved it
# by 0.13 s on the CNN).
SIZES = {"train": (1, SMALL, BIG), "evaluate": (1, INFER_BIG), "predict": (1, INFER_BIG)}
READY = "CALL_COST_READY"  # A child's line: warmed up, waiting for calls.
TIMED = "CALL_COST_TIMED "  # A child's line: one timed call, JSON.
BFC_ENV = "TF_CPU_ALLOCATOR_USE_BFC"


def _env() -> None:
    for name, value in (("TF_ENABLE_ONEDNN_OPTS", "0"), ("TF_USE_LEGACY_KERAS", "1"),
                        ("TF_CPP_MIN_LOG_LEVEL", "2")):
        os.environ.setdefault(name, value)


def _shim_side(strategy_devices: list[str], npz: str, tmp: str,
               seed: int | None = 1) -> dict[str, Callable]:
    import tpu_estimator_compat as shim
    from bench import models_v1

    estimator = shim.TPUEstimator(
        model_fn=models_v1.make_model_fn("cnn", shim.TPUEstimatorSpec),
        config=shim.RunConfig(model_dir=os.path.join(tmp, f"shim_seed{seed}"),
                              tf_random_seed=seed,
                              tpu_config=shim.TPUConfig(BIG, len(strategy_devices))),
        params={"data": npz, "workload": "cnn"}, use_tpu=len(strategy_devices) > 1,
        train_batch_size=128, eval_batch_size=128, predict_batch_size=128)

    def predict(batches: int) -> None:
        count = sum(1 for _ in estimator.predict(models_v1.finite_predict_input_fn(batches)))
        assert count == 128 * batches, count

    return {"train": lambda n: estimator.train(models_v1.train_input_fn, steps=n),
            "evaluate": lambda n: estimator.evaluate(models_v1.eval_input_fn, steps=n),
            "predict": predict}


def _hand_side(strategy: Any, npz: str) -> dict[str, Callable]:
    import tensorflow as tf

    from bench import models_keras

    batch = 128
    models_keras.seed()

    def distributed(split: str, labels: bool = True, shuffle: bool = False) -> Any:
        return strategy.distribute_datasets_from_function(
            lambda ctx: models_keras.dataset(npz, "cnn", split,
                                             ctx.get_per_replica_batch_size(batch),
                                             labels=labels, shuffle=shuffle))

    with strategy.scope():
        model = models_keras.build("cnn")
        optimizer = models_keras.optimizer("cnn")
        train_loss = tf.keras.metrics.Mean()
        eval_loss = tf.keras.metrics.Mean()

    def train_step(inputs: Any) -> None:
        x, y = inputs
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.nn.compute_average_loss(tf.keras.losses.sparse_categorical_crossentropy(
                y, logits, from_logits=True), global_batch_size=batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        train_loss.update_state(loss * strategy.num_replicas_in_sync)

    @tf.function
    def train_n(iterator: Any, n: tf.Tensor) -> None:
        for _ in tf.range(n):
            strategy.run(train_step, args=(next(iterator),))

    def eval_step(inputs: Any) -> None:
        x, y = inputs
        eval_loss.update_state(tf.keras.losses.sparse_categorical_crossentropy(
            y, model(x, training=False), from_logits=True))

    @tf.function
    def eval_n(iterator: Any, n: tf.Tensor) -> None:
        for _ in tf.range(n):
            strategy.run(eval_step, args=(next(iterator),))

    @tf.function
    def predict_n(iterator: Any, n: tf.Tensor) -> Any:
        out = tf.TensorArray(tf.float32, size=n)
        for i in tf.range(n):
            logits = strategy.run(lambda x: tf.nn.softmax(model(x, training=False)),
                                  args=(next(iterator),))
            out = out.write(i, tf.concat(strategy.experimental_local_results(logits), 0))
        return out.concat()

    train_iterator = iter(distributed("train", shuffle=True))

    def train(n: int) -> None:
        train_n(train_iterator, tf.constant(n))
        float(train_loss.result())  # What a loop logging its loss reads back per call.

    def evaluate(n: int) -> None:
        eval_loss.reset_state()
        eval_n(iter(distributed("test")), tf.constant(n))
        float(eval_loss.result())

    def predict(n: int) -> None:
        predict_n(iter(distributed("test", labels=False)), tf.constant(n)).numpy()

    return {"train": train, "evaluate": evaluate, "predict": predict}


def profile(replicas: int, noseed: bool = False, top: int = 0) -> list[dict[str, Any]]:
    """One 1-step train, 1-batch evaluate and 1-batch predict call of the shim after two
    warm-up calls of each: seconds, Python function calls (cProfile) and the function
    graphs TensorFlow instantiated during the call (its graph collection). Counts, unlike
    seconds, do not depend on the machine's load."""
    import cProfile
    import io
    import pstats

    _env()
    from bench import data, devices

    names = devices.split_cpu(replicas)
    from tensorflow.python.eager import context  # Graph collection: no public switch.

    tmp = tempfile.mkdtemp(prefix="call_cost_")
    npz = os.path.join(tmp, "digits.npz")
    data.generate(npz, REPO)
    rows = []
    for seed in (1, None) if noseed else (1,):
        side = _shim_side(names, npz, tmp, seed=seed)
        for _ in range(2):
            for kind in ("train", "evaluate", "predict"):
                side[kind](1)
        for kind in ("train", "evaluate", "predict"):
            ctx, profiler = context.context(), cProfile.Profile()
            ctx.enable_graph_collection()
            start = time.perf_counter()
            profiler.runcall(side[kind], 1)
            seconds = time.perf_counter() - start
            graphs = len(ctx.export_run_metadata().function_graphs)
            ctx.disable_graph_collection()
            out = io.StringIO()
            stats = pstats.Stats(profiler, stream=out)
            if top:
                stats.sort_stats("cumulative").print_stats(top)
            rows.append({"side": "shim" if seed else "shim_noseed", "kind": kind,
                         "seconds": seconds, "python_calls": stats.total_calls,
                         "function_graphs": graphs, "load1": os.getloadavg()[0],
                         "top": out.getvalue()})
    return rows


def _timed(fn: Callable[[int], Any], n: int) -> float:
    start = time.perf_counter()
    fn(n)
    return time.perf_counter() - start


Side = Callable[[str, int], float]  # (kind, steps or batches) -> seconds of that call.


Times = dict[tuple[str, str, int], list[float]]  # {(side, kind, n): [seconds of each call]}


def interleave(sides: dict[str, Side], rounds: int,
               record: Callable[[dict[str, Any]], None]) -> Times:
    """Times every call size of every side `rounds` times; {(side, kind, n): [seconds]}.

    Per round and kind, each size is called on every side before the next size; odd rounds
    reverse both the sides and the sizes, so a drift in the machine's load hits each side and
    size alike. Sides are called one at a time."""
    times: Times = {}
    for r in range(rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for kind, sizes in SIZES.items():
            for n in sizes if r % 2 == 0 else tuple(reversed(sizes)):
                for name in order:
                    t = sides[name](kind, n)
                    times.setdefault((name, kind, n), []).append(t)
                    record({"round": r, "side": name, "kind": kind, "steps": n, "seconds": t,
                            "load1": os.getloadavg()[0]})
    return times


def _local(fns: dict[str, Callable[[int], Any]]) -> Side:
    return lambda kind, n: _timed(fns[kind], n)


def measure(replicas: int, rounds: int, record: Callable[[dict[str, Any]], None],
            noseed: bool = False) -> dict[str, dict[str, float]]:
    """Runs both sides alternately in this process; returns {side: figures}."""
    _env()
    from bench import data, devices

    names = devices.split_cpu(replicas)
    from tpu_estimator_compat.session import strategy as strategy_lib

    tmp = tempfile.mkdtemp(prefix="call_cost_")
    npz = os.path.join(tmp, "digits.npz")
    data.generate(npz, REPO)
    strategy = (strategy_lib.mirrored_over(names) if replicas > 1 else None)
    import tensorflow as tf

    # Warm-up: traces, first checkpoint, compiled graphs. The hand loop's tf_keras model is
    # built and traced first: the shim's v1 layers, made in a graph, leave Keras models made
    # before them unusable for a new trace (tf_keras `_assert_built_as_v1`); traced, the
    # hand loop's functions are never traced again.
    sides = {"tf2": _hand_side(strategy or tf.distribute.get_strategy(), npz)}
    for kind, (small, *_) in SIZES.items():
        sides["tf2"][kind](small)
    sides["shim"] = _shim_side(names, npz, tmp)
    if noseed:  # The shim with tf_random_seed=None: no seed reset (kernel cache) per call.
        sides["shim_noseed"] = _shim_side(names, npz, tmp, seed=None)
    for side in sides.values():
        for kind, (small, *_) in SIZES.items():
            side[kind](small)
    times = interleave({name: _local(fns) for name, fns in sides.items()}, rounds, record)
    return compute_figures(times)


# -- Two processes: each side in a child under its own user's process settings. -----------

def child_env(side: str, replicas: int, base: dict[str, str] | None = None,
              mode: str = "launcher") -> dict[str, str]:
    """The environment of `side`'s child: the caller's, with the pinned bench variables
    (`harness.BASE_ENV`, tf_keras) and the process settings of `mode` (`harness`'s
    `--cpu-allocator` modes): under `launcher` those `side`'s user runs with by default, the
    launcher's for the shim and TensorFlow's for the hand loop (`tf2`); under `malloc` or
    `bfc` that allocator for both sides and TensorFlow's TFG setting."""
    from bench import harness

    contender = "tf2" if side == "tf2" else "shim"
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if k not in (BFC_ENV, harness.TFG_ENV)}
    env.update(harness.BASE_ENV)
    env.update(harness.NEW_STACK_ENV)
    env[BFC_ENV] = harness.CPU_ALLOCATORS[harness.allocator_for(mode, contender, replicas)]
    env.update(harness.launcher_env(mode, contender))
    env["PYTHONPATH"] = os.pathsep.join([REPO] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def settings_of(env: dict[str, str]) -> dict[str, str | None]:
    """The process settings a child ran with, as the context records them."""
    from bench import harness

    return {BFC_ENV: env.get(BFC_ENV), harness.TFG_ENV: env.get(harness.TFG_ENV)}


class Child:
    """One side in a child process (`--worker SIDE`): called as `Side`, it asks the child for
    one call and returns the seconds the child measured around it."""

    def __init__(self, side: str, replicas: int, npz: str, tmp: str,
                 mode: str = "launcher") -> None:
        self.side, self.env = side, child_env(side, replicas, mode=mode)
        self.log_path = os.path.join(tmp, f"{side}.log")
        argv = [sys.executable, "-m", "bench.call_cost", "--worker", side, "--replicas",
                str(replicas), "--data", npz, "--tmp", tmp]
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(argv, cwd=REPO, env=self.env, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=log, text=True)

    def _line(self, prefix: str) -> str:
        for line in self.proc.stdout:
            if line.startswith(prefix):
                return line[len(prefix):]
        with open(self.log_path) as log:
            tail = log.read()[-3000:]
        raise RuntimeError(f"call_cost child {self.side!r} ended (exit code "
                           f"{self.proc.wait()}) before {prefix.strip()!r}; its log "
                           f"{self.log_path} ends:\n{tail}")

    def ready(self) -> None:
        self._line(READY)

    def __call__(self, kind: str, n: int) -> float:
        self.proc.stdin.write(f"{kind} {n}\n")
        self.proc.stdin.flush()
        return float(json.loads(self._line(TIMED))["seconds"])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()  # The child leaves at end of input.
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()  # This child only (its own pid).
                self.proc.wait()


def serve(fns: dict[str, Callable[[int], Any]], requests: Any, out: Any) -> int:
    """A child's loop: reads `KIND N` lines, runs each call, writes its seconds; returns the
    number of calls served at end of input."""
    out.write(READY + "\n")
    out.flush()
    served = 0
    for line in requests:
        if not line.strip():
            continue
        kind, n = line.split()
        if kind not in fns:
            raise ValueError(f"unknown call kind {kind!r}; expected one of {sorted(fns)}")
        seconds = _timed(fns[kind], int(n))
        out.write(TIMED + json.dumps({"kind": kind, "steps": int(n), "seconds": seconds})
                  + "\n")
        out.flush()
        served += 1
    return served


def worker(side: str, replicas: int, npz: str, tmp: str) -> None:
    """A child of `--processes two`: builds `side`, warms each kind up once, then serves."""
    _env()
    from bench import devices

    names = devices.split_cpu(replicas)
    if side == "tf2":  # The hand loop alone: it imports no library module.
        import tensorflow as tf

        strategy = (tf.distribute.MirroredStrategy(names) if replicas > 1
                    else tf.distribute.get_strategy())
        fns = _hand_side(strategy, npz)
    else:
        fns = _shim_side(names, npz, tmp, seed=None if side == "shim_noseed" else 1)
    for kind, (small, *_) in SIZES.items():
        fns[kind](small)
    serve(fns, sys.stdin, sys.stdout)


def measure_two(replicas: int, rounds: int, record: Callable[[dict[str, Any]], None],
                noseed: bool = False, mode: str = "launcher"
                ) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """Each side in its own child process; returns ({side: figures}, {side: settings})."""
    tmp = tempfile.mkdtemp(prefix="call_cost_")
    npz = os.path.join(tmp, "digits.npz")
    # In a process of its own: the digits' resize loads TensorFlow, which this process,
    # only scheduling the children, does not need.
    subprocess.run([sys.executable, "-m", "bench.data", npz, REPO], cwd=REPO,
                   env=child_env("tf2", replicas), check=True, capture_output=True)
    names = ["shim", "tf2"] + (["shim_noseed"] if noseed else [])
    children: dict[str, Child] = {}
    try:
        for name in names:  # One warm-up at a time: a child's first calls are its slowest.
            children[name] = Child(name, replicas, npz, tmp, mode)
            children[name].ready()
        times = interleave(dict(children), rounds, record)
    finally:
        for child in children.values():
            child.close()
    return compute_figures(times), {n: settings_of(c.env) for n, c in children.items()}


def compute_figures(times: dict[tuple[str, str, int], list[float]]
                    ) -> dict[str, dict[str, float]]:
    """{side: figures} from {(side, kind, steps): [seconds of each timed call]}; a side
    with fewer than two sizes of a kind (a run stopped early) gets no figure for it."""
    figures: dict[str, dict[str, float]] = {}
    for name in sorted({key[0] for key in times}):
        best = {key[1:]: min(v) for key, v in times.items() if key[0] == name}
        f: dict[str, float] = {}
        for kind, sizes in SIZES.items():
            # Files recorded before the 1-step train call have the other two sizes.
            present = [n for n in sizes if (kind, n) in best]
            if len(present) >= 2:
                mid, big = present[-2:]
                per_step = (best[(kind, big)] - best[(kind, mid)]) / (big - mid)
                f[f"{kind}_fixed_s"] = best[(kind, present[0])] - present[0] * per_step
                f[f"{kind}_per_step_s"] = per_step
        for steps in (SMALL, BIG):
            if ("train", steps) in best:
                f[f"train_steps_per_sec_{steps}"] = steps / best[("train", steps)]
        figures[name] = f
    return figures


def figures_from_json(path: str) -> dict[str, dict[str, float]]:
    """`compute_figures` of the timed calls a `--json` file recorded (also a partial one)."""
    times: dict[tuple[str, str, int], list[float]] = {}
    with open(path) as f:
        for line in f:
            entry = json.loads(line)
            if "side" in entry:
                key = (entry["side"], entry["kind"], entry["steps"])
                times.setdefault(key, []).append(entry["seconds"])
    return compute_figures(times)


def table(figures: dict[str, dict[str, float]], subject: str = "shim") -> str:
    shim, tf2 = figures[subject], figures["tf2"]
    rows = [f"| figure | {subject} | hand loop (tf2) | {subject} / hand |",
            "|---|---|---|---|"]
    for key, label in (("train_steps_per_sec_20", "train steps/s, 20 steps a call"),
                       ("train_steps_per_sec_100", "train steps/s, 100 steps a call"),
                       ("train_per_step_s", "train s/step (slope)"),
                       ("train_fixed_s", "train fixed s/call"),
                       ("evaluate_fixed_s", "evaluate fixed s/call"),
                       ("predict_fixed_s", "predict fixed s/call")):
        if key not in shim or key not in tf2:
            rows.append(f"| {label} | {shim.get(key, float('nan')):.3f} | "
                        f"{tf2.get(key, float('nan')):.3f} | - |")
            continue
        rows.append(f"| {label} | {shim[key]:.3f} | {tf2[key]:.3f} | "
                    f"{shim[key] / tf2[key]:.2f} |")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.call_cost", description=__doc__)
    p.add_argument("--replicas", type=int, default=8)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", help="append every timed call and the figures to this file")
    p.add_argument("--from-json", help="print the figures of a --json file; run nothing")
    p.add_argument("--noseed", action="store_true",
                   help="also time the shim with RunConfig(tf_random_seed=None)")
    p.add_argument("--profile", action="store_true",
                   help="profile one call of each kind of the shim (and shim_noseed with "
                        "--noseed) instead of timing; print counts")
    p.add_argument("--top", type=int, default=0,
                   help="with --profile: also print the N costliest functions of each call")
    p.add_argument("--processes", choices=("one", "two"), default="one",
                   help="one: both sides in this process, its settings; two: each side in a "
                        "child under its user's default process settings (issue 45's setup)")
    p.add_argument("--cpu-allocator", default="launcher",
                   choices=("launcher", "malloc", "bfc"),
                   help="with --processes two: launcher (the shim on its launcher's "
                        "settings, the hand loop on TensorFlow's), or one allocator for both")
    p.add_argument("--worker", choices=("shim", "tf2", "shim_noseed"),
                   help=argparse.SUPPRESS)  # A child of --processes two.
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--tmp", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.cpu_allocator != "launcher" and args.processes == "one":
        p.error("--cpu-allocator applies to --processes two; one process runs both sides "
                "under its own settings (set TF_CPU_ALLOCATOR_USE_BFC before it starts)")
    if args.worker:
        worker(args.worker, args.replicas, args.data, args.tmp)
        sys.stdout.flush()
        os._exit(0)  # At end of input; teardown of 8-replica pipelines is slow (below).
    if args.profile:
        for row in profile(args.replicas, noseed=args.noseed, top=args.top):
            print(row.pop("top"), end="")
            print(json.dumps(row))
        sys.stdout.flush()
        os._exit(0)
    if args.from_json:
        figures = figures_from_json(args.from_json)
        for subject in figures:
            if subject != "tf2" and "tf2" in figures:
                print(table(figures, subject))
        return 0
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", REPO, "status", "--porcelain",
                                 "tpu_estimator_compat"],
                                capture_output=True, text=True).stdout.strip())

    def record(entry: dict[str, Any]) -> None:
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(entry) + "\n")

    context = {"command": "python -m bench.call_cost " + " ".join(argv), "commit": commit,
               "dirty": dirty, "cpus": os.cpu_count(),
               "load1_start": os.getloadavg()[0],
               "TF_CPU_ALLOCATOR_USE_BFC": os.environ.get("TF_CPU_ALLOCATOR_USE_BFC"),
               "TPU_ESTIMATOR_COMPAT_TFG_OPTIMIZER":
                   os.environ.get("TPU_ESTIMATOR_COMPAT_TFG_OPTIMIZER")}
    record({"context": context})
    if args.processes == "two":
        figures, context["settings"] = measure_two(args.replicas, args.rounds, record,
                                                   noseed=args.noseed,
                                                   mode=args.cpu_allocator)
    else:
        figures = measure(args.replicas, args.rounds, record, noseed=args.noseed)
    context["load1_end"] = os.getloadavg()[0]
    record({"context": context, "figures": figures})
    print(json.dumps(context))
    for subject in figures:
        if subject != "tf2":
            print(table(figures, subject))
    sys.stdout.flush()
    os._exit(0)  # As bench.common.emit: 8-replica pipelines can take minutes to tear down.


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
