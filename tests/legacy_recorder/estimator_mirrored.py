# An r1 Estimator script, written as TF1 users wrote it (no tpu_estimator_compat import).
"""The plain `tf.estimator.Estimator` MLP of estimator_plain.py, trained, evaluated and
predicted with `RunConfig(train_distribute=MirroredStrategy, eval_distribute=...)` over 2
logical CPUs, recorded on the legacy stack.

    TF_ENABLE_ONEDNN_OPTS=0 .venv-legacy/bin/python tests/legacy_recorder/estimator_mirrored.py
    (tests/test_estimator_plain.py replays it on the library, after `install_aliases()`)

Legacy's distributed Estimator (`_actual_train_model_distributed`) called input_fn through the
strategy's `make_input_fn_iterator`: each replica took one element (a batch of BATCH) of
input_fn's dataset, so one step read 2 batches. model_fn ran once per replica under the
strategy's "scale loss for estimator" mode (v1 optimizers scaled each replica's loss by 1/2
and the gradients were summed: the mean over replicas), the step's reported loss was that
mean (`strategy.reduce(MEAN, ...)`, written as the `loss` summary), and the training hooks of
the first replica's spec ran. Evaluation (`eval_distribute`) gave each replica one batch
too; prediction ran on one device.

Twice: with the mean-reduced loss of estimator_plain (`mean`), and reduced by SUM (`summed`:
no 1/replicas scaling in the optimizer; the reported loss is the SUM over the replicas).
Recorded: each step's `loss` summary (save_summary_steps=1: the reported loss), the
loss the first replica's training hook fetched, `evaluate()` (accuracy, mean per-class
accuracy, loss; 597 examples in batches of 100, a partial last one), 40 predictions, and the
checkpoint's names, shapes and values. The script runs twice and stores how far the second
run drifted from the first (`run_to_run`): legacy's own variation, the bound a replay may be
held to. Output: tests/goldens/estimator_mirrored/legacy.json.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf

# Sibling recorders, found on sys.path as a script or through conftest.legacy_recorder:
# two logical CPUs (`_split_cpu`), and values as JSON (`jsonable`: float32 as its shortest
# decimal, which reads back exactly).
from canned_parity import _jsonable as jsonable
from estimator_keras_metrics import _split_cpu

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "goldens",
                   "estimator_mirrored", "legacy.json")


def mirrored2():
    """MirroredStrategy over 2 logical CPUs, reducing to one device.

    Legacy's session hangs in its first training step with the collective all-reduce TF 2.15
    picks for logical CPUs (measured: no step in 90 s; keras_optimizer.py found the same);
    the reduction to one device runs. A sum of two values is the same in either order.
    """
    return tf.distribute.MirroredStrategy(
        ["/cpu:0", "/cpu:1"], cross_device_ops=tf.distribute.ReductionToOneDevice())


def _sibling(name):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        return __import__(name)
    finally:
        sys.path.pop(0)


def summary_losses(model_dir):
    """[step, tag, value] of every scalar summary whose tag names a loss, in model_dir's
    (training) events files, by step and tag."""
    found = []
    for path in sorted(tf.gfile.Glob(os.path.join(model_dir, "events.out.tfevents.*"))):
        for event in tf.train.summary_iterator(path):
            for value in event.summary.value:
                if "loss" in value.tag and value.HasField("simple_value"):
                    found.append([int(event.step), value.tag,
                                  jsonable(np.float32(value.simple_value))[0]])
    return sorted(found, key=lambda row: row[:2])


def checkpoint(path):
    """Every variable of the checkpoint: {name: {shape, value}}; an object-based
    checkpoint's serialized object graph is kept by name only (value None)."""
    reader = tf.train.load_checkpoint(path)
    shapes = reader.get_variable_to_shape_map()
    return {n: {"shape": list(shapes[n]),
                "value": None if n == "_CHECKPOINTABLE_OBJECT_GRAPH"
                else jsonable(reader.get_tensor(n))}
            for n in sorted(shapes)}


def drift(first, second):
    """The largest absolute and relative difference between two recordings' numbers, per
    top-level key (strings and structure must agree; they are not numbers to drift)."""
    def numbers(tree):
        if isinstance(tree, dict):
            return [x for key in sorted(tree) for x in numbers(tree[key])]
        if isinstance(tree, (list, tuple)):
            return [x for item in tree for x in numbers(item)]
        return [float(tree)] if isinstance(tree, (int, float)) else []

    out = {}
    for key in sorted(first):
        if isinstance(first[key], dict) and "losses" in first[key]:  # A case of several.
            out[key] = drift(first[key], second[key])
            continue
        a, b = np.asarray(numbers(first[key])), np.asarray(numbers(second[key]))
        if a.shape != b.shape:
            out[key] = {"max_abs": None, "max_rel": None}  # Different structure.
            continue
        diff = np.abs(a - b)
        rel = diff / np.maximum(np.abs(a), np.finfo(np.float32).tiny)
        out[key] = {"max_abs": float(diff.max(initial=0.0)), "max_rel": float(rel.max(initial=0.0))}
    return out


def run(workdir, mirrored=None, summed=False):
    """Trains the plain MLP STEPS steps on 2 replicas, evaluates on 2, predicts.

    `mirrored`: the 2-replica MirroredStrategy (`mirrored2()` when None). `summed`: the loss
    is reduced by SUM over the batch: legacy's v1 optimizers then did not scale it by
    1/replicas (the gradients were summed), and the step's reported loss was the SUM over
    the replicas (`_get_loss_reduce_op_for_reporting`).
    """
    plain = _sibling("estimator_plain")
    if mirrored is None:
        mirrored = mirrored2()
    replica0_losses = []
    config = tf.estimator.RunConfig(tf_random_seed=1, save_summary_steps=1,
                                    train_distribute=mirrored, eval_distribute=mirrored)
    reduction = tf.losses.Reduction.SUM if summed else None
    estimator = tf.estimator.Estimator(plain.make_model_fn(replica0_losses, reduction),
                                       model_dir=workdir, config=config)
    estimator.train(plain.train_input_fn, steps=plain.STEPS)
    metrics = estimator.evaluate(plain.eval_input_fn)
    predictions = list(estimator.predict(plain.predict_input_fn))
    return {
        "losses": summary_losses(workdir),
        "replica0_losses": jsonable(np.float32(replica0_losses)),
        "metrics": {k: jsonable(np.float32(v))[0] for k, v in metrics.items()
                    if k != "global_step"},
        "global_step": int(metrics["global_step"]),
        "predictions": {key: [jsonable(p[key]) for p in predictions]
                        for key in ("class_ids", "probabilities", "logits")},
        "checkpoint": os.path.basename(estimator.latest_checkpoint()),
        "variables": checkpoint(estimator.latest_checkpoint()),
    }


def cpu():
    """The CPU's model name and whether it has AVX-512: Eigen's kernels round per CPU kind
    (migration_guide/parity.md), so a bit-exact replay holds on the kind recorded on."""
    model, flags = "unknown", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = (part.strip() for part in line.partition(":"))
            if key == "model name":
                model = value
            elif key == "flags":
                flags = set(value.split())
                break
    return {"model": model, "avx512f": "avx512f" in flags}


def record(run_fn):
    """Runs `run_fn(workdir)` twice; returns the first result and the second's drift."""
    results = []
    for _ in range(2):
        with tempfile.TemporaryDirectory() as workdir:
            results.append(run_fn(workdir))
    return {"legacy": results[0], "run_to_run": drift(results[0], results[1]),
            "versions": {"tensorflow": tf.__version__, "cpu": cpu()}}


def write(golden, out):
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(golden, f)
    print("wrote", os.path.relpath(out), "run_to_run", golden["run_to_run"], file=sys.stderr)


def run_both(workdir, mirrored=None):
    """The mean-reduced loss (`mean`) and the SUM-reduced one (`summed`)."""
    return {"mean": run(os.path.join(workdir, "mean"), mirrored),
            "summed": run(os.path.join(workdir, "summed"), mirrored, summed=True)}


def main():
    _split_cpu()
    write(record(run_both), OUT)


if __name__ == "__main__":
    main()
