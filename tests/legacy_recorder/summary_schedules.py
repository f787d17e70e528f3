# An r1 TPUEstimator script, written as TF1 users wrote it (no tpu_estimator_compat import).
"""Which training summaries legacy TPUEstimator wrote, at which steps, how many times.

    .venv-legacy/bin/python tests/legacy_recorder/summary_schedules.py   # records
    (tests/test_summaries.py replays every scenario on the shim and compares)

Each scenario trains a one-layer model on scikit-learn's digits with
`tf.compat.v1.estimator.tpu.TPUEstimator(use_tpu=False)` (no TPU is available to record
use_tpu=True) and lists, per events directory, every summary tag with the step of every
event that carried it (repeats kept, so counts are compared too). The scenarios are the
issue's acceptance cases (iterations_per_loop=21 over 42 steps, host_call every_n=2) and the
cases that decide legacy's loss tag (`loss_1`, `loss_2`). The output,
tests/goldens/summary_schedules/legacy_events.json, is a few kB.

The same code runs on the shim once `tpu_estimator_compat.install_aliases()` has run.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "goldens",
                   "summary_schedules", "legacy_events.json")

# name: (iterations_per_loop, train steps, RunConfig kwargs, host_call every_n, host tag,
#        model_fn takes the root name `loss`)
SCENARIOS = {
    "ipl21_steps42_every_n2": (21, 42, {}, 2, "host_loss", False),
    "ipl4_steps12_save4_log4": (4, 12, {"save_summary_steps": 4, "log_step_count_steps": 4},
                                1, None, False),
    "host_call_takes_loss": (2, 4, {}, 1, "loss", False),
    "model_fn_takes_loss": (2, 4, {}, 1, None, True),
    "both_take_loss": (2, 4, {}, 1, "loss", True),
}


def _input_fn(params):
    from sklearn.datasets import load_digits

    data = load_digits()
    x = (data.images[:256] / 16.0).astype(np.float32).reshape(256, 64)
    y = data.target[:256].astype(np.int32)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
    return dataset.batch(params["batch_size"], drop_remainder=True)


def _model_fn(features, labels, mode, params):
    def network():
        w = tf.get_variable("w", [64, 10], initializer=tf.zeros_initializer())
        return tf.losses.sparse_softmax_cross_entropy(labels, tf.matmul(features, w))

    if params["model_fn_takes_loss"]:
        with tf.variable_scope("loss"):  # BERT's pattern
            loss = network()
    else:
        loss = network()
    step = tf.train.get_global_step()
    train_op = tf.train.GradientDescentOptimizer(0.5).minimize(loss, global_step=step)
    host_call = None
    if params["host_tag"]:
        model_dir, tag = params["model_dir"], params["host_tag"]

        def host_call_fn(gs, loss):
            with tf.compat.v2.summary.create_file_writer(model_dir).as_default():
                with tf.compat.v2.summary.record_if(True):
                    tf.compat.v2.summary.scalar(tag, loss[0], step=gs[0])
                    return tf.summary.all_v2_summary_ops()

        # Written after minimize(), as ResNet's host_call tensors are.
        host_call = (host_call_fn, [tf.reshape(step, [1]), tf.reshape(loss, [1])])
    return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op,
                                             host_call=host_call)


def run(name: str, model_dir: str) -> dict[str, dict[str, list[int]]]:
    """Trains scenario `name` into `model_dir`; returns {dir: {tag: [step of each event]}}."""
    ipl, steps, config, every_n, host_tag, takes_loss = SCENARIOS[name]
    tpu = tf.estimator.tpu
    run_config = tpu.RunConfig(
        model_dir=model_dir,
        tpu_config=tpu.TPUConfig(iterations_per_loop=ipl,
                                 experimental_host_call_every_n_steps=every_n),
        **config)
    estimator = tpu.TPUEstimator(
        model_fn=_model_fn, config=run_config, use_tpu=False, train_batch_size=64,
        params={"model_dir": model_dir, "host_tag": host_tag,
                "model_fn_takes_loss": takes_loss})
    estimator.train(_input_fn, max_steps=steps)
    return events(model_dir)


def events(model_dir: str) -> dict[str, dict[str, list[int]]]:
    found: dict[str, dict[str, list[int]]] = {}
    for root, _, files in os.walk(model_dir):
        for name in sorted(files):
            if name.startswith("events.out.tfevents"):
                tags = found.setdefault(os.path.relpath(root, model_dir), {})
                for event in tf.train.summary_iterator(os.path.join(root, name)):
                    for value in event.summary.value:
                        tags.setdefault(value.tag, []).append(int(event.step))
    return {d: {t: sorted(s) for t, s in sorted(tags.items())}
            for d, tags in sorted(found.items())}


def main() -> None:
    import tensorflow

    if not tensorflow.__version__.startswith("2.15."):
        sys.exit("Run with .venv-legacy/bin/python (TF 2.15 + tensorflow-estimator 2.15).")
    from importlib import metadata

    versions = {}
    for dist in ("tensorflow", "tensorflow-cpu", "tensorflow-estimator"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    recorded = {"versions": versions, "scenarios": {}}
    for name in SCENARIOS:
        with tempfile.TemporaryDirectory() as model_dir:
            recorded["scenarios"][name] = run(name, model_dir)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(recorded, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
