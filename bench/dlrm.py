"""DLRM-style TPU embedding benchmark: the shim's `embedding_config_spec` vs a TF2 loop.

    .venv/bin/python -m bench.dlrm --repeats 2            # both contenders, 1 and 8 replicas
    .venv/bin/python -m bench.dlrm --one shim --replicas 8 --steps 50   # one process
    .venv/bin/python -m bench --workloads dlrm            # the same, in the bench's table

The workload (issue 18): 26 sparse categorical features, one id per example each, each with
its own table of 10^5 to 10^6 rows (geometric; 9.3 M rows in all) of dimension 16, mean
combiner, Adagrad for the tables; 13 dense features; an MLP 429-256-64-1 with a logistic loss
and Adagrad; global batch 1024; 100 steps per loop. Contenders, each in a process of its own
(its own peak RSS):

* `shim`: an r1 model_fn with `tf.compat.v1.tpu.experimental.embedding_column`s read through
  `DenseFeatures`, `CrossShardOptimizer(AdagradOptimizer)`, and
  `EmbeddingConfigSpec(optimization_parameters=AdagradParameters(...))`, `use_tpu=True`.
* `tf2`: the same lookups hand-written: one plain table variable per feature on the host CPU,
  `tf.gather` + the mean per example in `strategy.run`, the gradient w.r.t. the activations
  from a `GradientTape`, the row gradients of all replicas concatenated, summed per id and
  applied with TensorFlow's sparse Adagrad kernel; Keras Dense layers with a legacy Keras
  Adagrad; `iterations_per_loop` steps per `tf.function` call over a distributed iterator.

Train steps/s: the fastest of 3 loops of `--steps` steps after a warm-up loop (shim: one
`train()` of 4 loops timed by a hook, which with use_tpu=True runs once per loop; tf2: 4 calls
of its compiled loop). Both then write one checkpoint of everything, as `train()` does at its
end. Peak RSS: `ru_maxrss` of the process at the end. Runs alternate shim/tf2 (reversed on odd
repeats).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

NUM_SPARSE = 26
NUM_DENSE = 13
DIM = 16
BATCH = 1024
LEARNING_RATE = 0.05
ROWS = [int(round(10 ** (5 + i / (NUM_SPARSE - 1)))) for i in range(NUM_SPARSE)]
DATA_EXAMPLES = 16 * BATCH
LOOPS = 3  # Timed loops after the warm-up loop.
ENV = {"TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2", "TF_USE_LEGACY_KERAS": "1",
       "PYTHONHASHSEED": "0"}


def _setup(replicas: int) -> Any:
    import tensorflow as tf

    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration()] * replicas)
    return tf


def _dataset(tf: Any, batch: int) -> Any:
    """Endless batches: {'c0'..'c25': [batch, 1] SparseTensor ids, 'dense': [batch, 13]}, label."""
    import numpy as np

    rng = np.random.RandomState(0)
    ids = np.stack([rng.randint(rows, size=DATA_EXAMPLES) for rows in ROWS], 1).astype(np.int64)
    dense = rng.uniform(size=(DATA_EXAMPLES, NUM_DENSE)).astype(np.float32)
    labels = (rng.uniform(size=DATA_EXAMPLES) < 0.3).astype(np.float32)

    def to_features(ids, dense, labels):
        n = tf.shape(ids, out_type=tf.int64)[0]
        index = tf.stack([tf.range(n), tf.zeros([n], tf.int64)], 1)
        features = {f"c{i}": tf.SparseTensor(index, ids[:, i], tf.stack([n, 1]))
                    for i in range(NUM_SPARSE)}
        features["dense"] = dense
        return features, labels

    ds = tf.data.Dataset.from_tensor_slices((ids, dense, labels)).repeat()
    return ds.batch(batch, drop_remainder=True).map(to_features).prefetch(2)


# ---------------------------------------------------------------------------------------------
# The shim.


def _shim(tf: Any, replicas: int, steps: int, model_dir: str) -> float:
    import tpu_estimator_compat as tec
    from tpu_estimator_compat.session import strategy as strategy_lib

    tec.install_aliases()
    v1 = tf.compat.v1

    def columns():
        init = v1.truncated_normal_initializer(0.0, 0.05)
        return [v1.tpu.experimental.embedding_column(
            v1.feature_column.categorical_column_with_identity(f"c{i}", rows), DIM,
            combiner="mean", initializer=init) for i, rows in enumerate(ROWS)]

    def model_fn(features, labels, mode, params):
        sparse = v1.keras.layers.DenseFeatures(columns())(features)
        net = tf.concat([sparse, features["dense"]], 1)
        net = v1.layers.dense(net, 256, activation=tf.nn.relu)
        net = v1.layers.dense(net, 64, activation=tf.nn.relu)
        logits = tf.squeeze(v1.layers.dense(net, 1), 1)
        loss = v1.losses.sigmoid_cross_entropy(labels, logits)
        optimizer = v1.tpu.CrossShardOptimizer(v1.train.AdagradOptimizer(LEARNING_RATE))
        return tec.TPUEstimatorSpec(mode, loss=loss, train_op=optimizer.minimize(
            loss, global_step=v1.train.get_global_step()))

    strategy = (strategy_lib.mirrored_over([d.name for d in tf.config.list_logical_devices("CPU")])
                if replicas > 1 else tf.distribute.get_strategy())
    config = tec.RunConfig(
        model_dir=model_dir, save_checkpoints_steps=10**9, save_summary_steps=0,
        log_step_count_steps=10**9, train_distribute=strategy,
        tpu_config=tec.TPUConfig(iterations_per_loop=steps,
                                 num_shards=replicas if replicas > 1 else None))
    spec = v1.estimator.tpu.experimental.EmbeddingConfigSpec(
        feature_columns=columns(),
        optimization_parameters=v1.tpu.experimental.AdagradParameters(LEARNING_RATE))
    estimator = tec.TPUEstimator(model_fn=model_fn, config=config, train_batch_size=BATCH,
                                 embedding_config_spec=spec)
    input_fn = lambda params: _dataset(tf, params["batch_size"])  # noqa: E731

    class LoopTimes(v1.train.SessionRunHook):
        """With use_tpu=True hooks run once per loop: the time each loop ended."""

        def __init__(self) -> None:
            self.ends: list[float] = []

        def after_run(self, run_context: Any, run_values: Any) -> None:
            self.ends.append(time.perf_counter())

    timer = LoopTimes()
    # One train() of 1 + LOOPS loops: the first (trace, restore-or-init, first checkpoint) is
    # the warm-up; the final checkpoint is written after the last loop ends.
    estimator.train(input_fn, steps=steps * (1 + LOOPS), hooks=[timer])
    return _best_rate(timer.ends, steps)


# ---------------------------------------------------------------------------------------------
# The hand-written TF2 loop.


def _tf2(tf: Any, replicas: int, steps: int, model_dir: str) -> float:
    import tf_keras

    strategy = (tf.distribute.MirroredStrategy(
        [d.name for d in tf.config.list_logical_devices("CPU")]) if replicas > 1
        else tf.distribute.get_strategy())
    host = "/job:localhost/replica:0/task:0/device:CPU:0"
    init = tf.random.truncated_normal
    with tf.device(host):
        tables = [tf.Variable(init([rows, DIM], 0.0, 0.05)) for rows in ROWS]
        accumulators = [tf.Variable(tf.fill([rows, DIM], 0.1)) for rows in ROWS]
    with strategy.scope():
        mlp = tf_keras.Sequential([tf_keras.layers.Dense(256, activation="relu"),
                                   tf_keras.layers.Dense(64, activation="relu"),
                                   tf_keras.layers.Dense(1)])
        mlp.build([None, NUM_SPARSE * DIM + NUM_DENSE])
        optimizer = tf_keras.optimizers.legacy.Adagrad(LEARNING_RATE)
    per_replica = BATCH // replicas
    dataset = strategy.experimental_distribute_dataset(_dataset(tf, BATCH))
    iterator = iter(dataset)

    def replica_step(features, labels):
        ids = [features[f"c{i}"] for i in range(NUM_SPARSE)]
        rows = [sp.indices[:, 0] for sp in ids]
        counts = [tf.math.unsorted_segment_sum(tf.ones_like(r, tf.float32), r, per_replica)
                  for r in rows]
        scales = [tf.gather(tf.math.divide_no_nan(1.0, c), r) for c, r in zip(counts, rows)]
        activations = [tf.math.unsorted_segment_sum(
            tf.gather(t, sp.values) * s[:, None], r, per_replica)
            for t, sp, s, r in zip(tables, ids, scales, rows)]
        with tf.GradientTape() as tape:
            tape.watch(activations)
            net = tf.concat(activations + [features["dense"]], 1)
            logits = tf.squeeze(mlp(net), 1)
            loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels, logits))
            scaled = loss / replicas
        grads = tape.gradient(scaled, activations + mlp.trainable_variables)
        optimizer.apply_gradients(zip(grads[NUM_SPARSE:], mlp.trainable_variables))
        row_grads = [tf.gather(g, r) * s[:, None]
                     for g, r, s in zip(grads[:NUM_SPARSE], rows, scales)]
        return loss, [sp.values for sp in ids], row_grads

    def apply_tables(ids, grads):
        updates = []
        for table, acc, i, g in zip(tables, accumulators, ids, grads):
            all_ids = tf.concat(strategy.experimental_local_results(i), 0)
            all_grads = tf.concat(strategy.experimental_local_results(g), 0)
            unique, index = tf.unique(all_ids, out_idx=tf.int64)
            summed = tf.math.unsorted_segment_sum(all_grads, index, tf.size(unique, tf.int64))
            with tf.device(host):
                updates.append(tf.raw_ops.ResourceSparseApplyAdagrad(
                    var=table.handle, accum=acc.handle, lr=tf.constant(LEARNING_RATE),
                    grad=summed, indices=unique))
        return updates

    @tf.function
    def run(n):
        loss = tf.constant(0.0)
        for _ in tf.range(n):
            features, labels = next(iterator)
            per_loss, ids, grads = strategy.run(replica_step, (features, labels))
            with tf.control_dependencies(apply_tables(ids, grads)):
                loss = strategy.reduce("mean", per_loss, axis=None)
        return loss

    n = tf.constant(steps)
    run(n).numpy()  # Warm-up: trace.
    ends = [time.perf_counter()]
    for _ in range(LOOPS):
        run(n).numpy()
        ends.append(time.perf_counter())
    # What the shim writes at the end of train(): one checkpoint of everything.
    checkpoint = tf.train.Checkpoint(tables=tables, accumulators=accumulators, mlp=mlp,
                                     optimizer=optimizer)
    checkpoint.write(os.path.join(model_dir, "ckpt"))
    return _best_rate(ends, steps)


def _best_rate(ends: list[float], steps: int) -> float:
    """Steps/s of the fastest loop after the first."""
    return max(steps / (b - a) for a, b in zip(ends[-LOOPS - 1:-1], ends[-LOOPS:]))


# ---------------------------------------------------------------------------------------------
# Driver.


def run_one(contender: str, replicas: int, steps: int) -> dict[str, Any]:
    tf = _setup(replicas)
    with tempfile.TemporaryDirectory() as model_dir:
        rate = (_shim(tf, replicas, steps, model_dir) if contender == "shim"
                else _tf2(tf, replicas, steps, model_dir))
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"contender": contender, "replicas": replicas, "steps_per_call": steps,
            "train_steps_per_s": rate, "peak_rss_mb": rss_mb}


def harness_main(spec: dict[str, Any]) -> None:
    """`python -m bench.dlrm '<json spec>'`: one contender process of `python -m bench`
    (workload `dlrm`), printing the harness's BENCH_RESULT line."""
    from bench import common

    result = run_one(spec["contender"], spec["replicas"], spec["steps_per_call"])
    nan = float("nan")
    common.emit({**spec, "train_steps_per_sec": result["train_steps_per_s"],
                 "peak_rss_mb": result["peak_rss_mb"], "time_to_first_step": nan,
                 "train_cpu_ms_per_step": nan, **common.NO_INFERENCE})


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 1 and argv[0].startswith("{"):
        harness_main(json.loads(argv[0]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", choices=("shim", "tf2"), help="run one contender here")
    parser.add_argument("--replicas", type=int, nargs="*", default=[1, 8])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", help="append results as JSON lines to this file")
    args = parser.parse_args(argv)
    if args.one:
        print("BENCH_RESULT " + json.dumps(run_one(args.one, args.replicas[0], args.steps)))
        return
    results = []
    for repeat in range(args.repeats):
        for replicas in args.replicas:
            order = ("shim", "tf2") if repeat % 2 == 0 else ("tf2", "shim")
            for contender in order:
                done = subprocess.run(
                    [sys.executable, "-m", "bench.dlrm", "--one", contender,
                     "--replicas", str(replicas), "--steps", str(args.steps)],
                    capture_output=True, text=True, env=dict(os.environ, **ENV),
                    cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
                line = [ln for ln in done.stdout.splitlines() if ln.startswith("BENCH_RESULT ")]
                if done.returncode != 0 or not line:
                    raise RuntimeError(f"{contender} x{replicas} failed:\n{done.stderr[-3000:]}")
                result = dict(json.loads(line[0].split(" ", 1)[1]), repeat=repeat,
                              load=os.getloadavg()[0])
                results.append(result)
                print(json.dumps(result), flush=True)
                if args.json:
                    with open(args.json, "a", encoding="utf-8") as f:
                        f.write(json.dumps(result) + "\n")
    _print_table(results)


def _print_table(results: list[dict[str, Any]]) -> None:
    import statistics

    print("| replicas | figure | shim | tf2 | shim/tf2 median [min..max] | target | result |")
    print("|---|---|---|---|---|---|---|")
    for replicas in sorted({r["replicas"] for r in results}):
        for key, target, better in (("train_steps_per_s", 0.95, "ge"),
                                    ("peak_rss_mb", 1.2, "le")):
            ratios, shim, tf2 = [], [], []
            for repeat in sorted({r["repeat"] for r in results}):
                pair = {r["contender"]: r[key] for r in results
                        if r["replicas"] == replicas and r["repeat"] == repeat}
                if len(pair) == 2:
                    ratios.append(pair["shim"] / pair["tf2"])
                    shim.append(pair["shim"])
                    tf2.append(pair["tf2"])
            if not ratios:
                continue
            median = statistics.median(ratios)
            ok = median >= target if better == "ge" else median <= target
            print(f"| {replicas} | {key} | {statistics.median(shim):.4g} | "
                  f"{statistics.median(tf2):.4g} | {median:.3f} [{min(ratios):.3f}.."
                  f"{max(ratios):.3f}] | {'>=' if better == 'ge' else '<='} {target} | "
                  f"{'PASS' if ok else 'FAIL'} |")


if __name__ == "__main__":
    main()
