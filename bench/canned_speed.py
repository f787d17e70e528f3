"""Canned estimators' train steps/s: the library, legacy (TF 2.15) and a hand-written Keras loop.

    python -m bench.canned_speed [--rounds 3] [--steps 400,2000] [--json F.jsonl]

(from the repository root; legacy runs on `.venv-legacy/bin/python`, found beside this
checkout or at `$TPU_ESTIMATOR_COMPAT_LEGACY_PYTHON`). Issue 43's speed row: `DNNClassifier`
and `LinearClassifier` (`tf.estimator`, the v2 classes, default `RunConfig` but for
`model_dir`) on small tabular data, scikit-learn's digits as 64 numeric columns, batch 32,
one replica, against legacy's same program and against a hand-written TF2 loop of the same
model (`tf_keras` layers: Dense 32-16-10 with Adagrad(0.05), DNNClassifier's default; one
Dense layer with Ftrl(0.2), LinearClassifier's; a `tf.function` train step called once per
step from Python, as a hand-written loop is usually written).

Each contender runs in its own process, one after another, `--rounds` times, alternating.
Train steps/s is the marginal rate between two train calls of `--steps` sizes in one model
dir (steps of the big call minus the small, over the time difference; the median of three
such pairs), so a call's fixed cost (graph build or trace, restore, checkpoints) cancels and
what remains is the per-step rate a long training sees. The best round counts: load only
ever adds time. Measure on an idle machine: under load the differences are noise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ("dnn", "linear")
BATCH = 32
TARGET_VS_LEGACY = 1.5
TARGET_VS_LOOP = 1.0


def _data() -> tuple[Any, Any]:
    import numpy as np
    from sklearn.datasets import load_digits

    digits = load_digits()
    return (digits.data.astype(np.float32) / 16.0), digits.target.astype(np.int32)


def _input_fn(tf: Any, x: Any, y: Any) -> Any:
    def input_fn() -> Any:
        return (tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat()
                .shuffle(1000, seed=1).batch(BATCH, drop_remainder=True))
    return input_fn


def _estimator(tf: Any, model: str, model_dir: str) -> Any:
    columns = [tf.feature_column.numeric_column("x", shape=(64,))]
    config = tf.estimator.RunConfig(model_dir=model_dir)
    if model == "dnn":
        return tf.estimator.DNNClassifier(hidden_units=[32, 16], feature_columns=columns,
                                          n_classes=10, config=config)
    return tf.estimator.LinearClassifier(feature_columns=columns, n_classes=10, config=config)


def _estimator_rate(model: str, small: int, big: int) -> float:
    """Runs in the child: a canned estimator on this process's stack."""
    import tensorflow as tf

    x, y = _data()
    with tempfile.TemporaryDirectory() as model_dir:
        estimator = _estimator(tf, model, model_dir)
        input_fn = _input_fn(tf, x, y)
        estimator.train(input_fn, steps=10)  # Warm-up: the first call's build and checkpoint.
        return _marginal_rate(lambda steps: estimator.train(input_fn, steps=steps), small, big)


def _marginal_rate(train: Any, small: int, big: int, pairs: int = 3) -> float:
    """The median over `pairs` (small, big) call pairs of (big - small) / (t_big - t_small):
    the per-step rate with each call's fixed cost cancelled."""
    rates = []
    for _ in range(pairs):
        times = []
        for steps in (small, big):
            start = time.perf_counter()
            train(steps)
            times.append(time.perf_counter() - start)
        if times[1] > times[0]:
            rates.append((big - small) / (times[1] - times[0]))
    if not rates:
        raise RuntimeError(f"no call of {big} steps took longer than one of {small}: the "
                           "machine is too loaded to measure; rerun with larger --steps.")
    return sorted(rates)[len(rates) // 2]


def _loop_rate(model: str, small: int, big: int) -> float:
    """Runs in the child: the same model as a hand-written TF2 Keras loop."""
    import tensorflow as tf
    import tf_keras as keras

    x, y = _data()
    if model == "dnn":
        net = keras.Sequential([keras.layers.Dense(32, activation="relu"),
                                keras.layers.Dense(16, activation="relu"),
                                keras.layers.Dense(10)])
        optimizer = keras.optimizers.legacy.Adagrad(0.05)
    else:
        net = keras.Sequential([keras.layers.Dense(10)])
        optimizer = keras.optimizers.legacy.Ftrl(0.2)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    iterator = iter(_input_fn(tf, x, y)())

    @tf.function
    def train_step(features: Any, labels: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, net(features["x"], training=True))
        grads = tape.gradient(loss, net.trainable_variables)
        optimizer.apply_gradients(zip(grads, net.trainable_variables))
        return loss

    def train(steps: int) -> None:
        for _ in range(steps):
            loss = train_step(*next(iterator))
        float(loss)  # The last step's loss on the host: every step has run.

    train(10)
    return _marginal_rate(train, small, big)


def _child(contender: str, model: str, small: int, big: int) -> None:
    if contender == "library":
        import tpu_estimator_compat

        tpu_estimator_compat.install_aliases()
    rate = (_loop_rate if contender == "loop" else _estimator_rate)(model, small, big)
    print(json.dumps({"contender": contender, "model": model, "steps_per_sec": rate}))


def _legacy_python() -> str:
    return os.environ.get("TPU_ESTIMATOR_COMPAT_LEGACY_PYTHON",
                          os.path.join(REPO, ".venv-legacy", "bin", "python"))


def _run(contender: str, model: str, small: int, big: int) -> float:
    python = _legacy_python() if contender == "legacy" else sys.executable
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0",
               PYTHONPATH=REPO)
    if contender != "legacy":
        env["TF_USE_LEGACY_KERAS"] = "1"
    out = subprocess.run([python, "-m", "bench.canned_speed", "--child", contender, model,
                          str(small), str(big)], cwd=REPO, env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["steps_per_sec"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.canned_speed")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", default="400,2000")
    parser.add_argument("--json", default=None)
    parser.add_argument("--child", nargs=4, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        contender, model, small, big = args.child
        _child(contender, model, int(small), int(big))
        return 0
    small, big = (int(s) for s in args.steps.split(","))
    best: dict[tuple[str, str], float] = {}
    for _ in range(args.rounds):
        for model in MODELS:
            for contender in ("library", "legacy", "loop"):
                rate = _run(contender, model, small, big)
                key = (model, contender)
                best[key] = max(best.get(key, 0.0), rate)
    ok = True
    print("| model | library steps/s | legacy steps/s | Keras loop steps/s | vs legacy "
          f"(>= {TARGET_VS_LEGACY}) | vs loop (>= {TARGET_VS_LOOP}) | result |")
    print("|---|---|---|---|---|---|---|")
    for model in MODELS:
        lib, leg, loop = (best[(model, c)] for c in ("library", "legacy", "loop"))
        passed = lib / leg >= TARGET_VS_LEGACY and lib / loop >= TARGET_VS_LOOP
        ok = ok and passed
        print(f"| {model} | {lib:,.0f} | {leg:,.0f} | {loop:,.0f} | {lib / leg:.2f} | "
              f"{lib / loop:.2f} | {'PASS' if passed else 'FAIL'} |")
    print(f"best of {args.rounds} rounds; marginal rate between train calls of {small} and "
          f"{big} steps; batch {BATCH}; load average {os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} cores")
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps({"best": {f"{m}/{c}": r for (m, c), r in best.items()},
                                "steps": [small, big], "rounds": args.rounds,
                                "load": os.getloadavg()[0]}) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
