# An r1 TPUEstimator script, written as TF1 users wrote it (no tpu_estimator_compat import).
"""Which training summaries legacy TPUEstimator wrote, at which steps, how many times.

    .venv-legacy/bin/python tests/legacy_recorder/summary_schedules.py   # records
    (tests/test_summaries.py replays every scenario on the shim and compares)

Each scenario trains a one-layer model on scikit-learn's digits with
`tf.compat.v1.estimator.tpu.TPUEstimator(use_tpu=False)` (no TPU is available to record
use_tpu=True) and lists, per events directory, every summary tag with the step of every
event that carried it (repeats kept, so counts are compared too), and the global step of
every checkpoint written. The scenarios are the issue's acceptance cases
(iterations_per_loop=21 over 42 steps, host_call every_n=2), the cases that decide legacy's
loss tag (`loss_1`, `loss_2`), step-based checkpoints more frequent than
`iterations_per_loop` (legacy's CPU path asked its saver hook after every step), and a
model_fn that advances the global step on every second step only (gradient accumulation, as
google-research/tapas does). The output, tests/goldens/summary_schedules/legacy_events.json,
is a few kB.

Legacy's summary hook fetched the global step in the step's own `session.run`, unordered
against the optimizer's increment: for this tiny model the increment sometimes won the race,
and the hook then saw the step's end value and shifted its schedule (recorded: 1 to 3
runs in 10 of some scenarios, e.g. `loss` at 1, 4, 7, 9 instead of 1, 4, 7, 10). So every scenario is trained
`RUNS` times; the golden keeps each distinct outcome with its count, and `.`/`checkpoints`
of the most frequent one, the outcome without the race. (host_call tags, whose own read
raced on every step, are left out of the outcomes.)

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

_SAVE2 = {"save_checkpoints_steps": 2, "keep_checkpoint_max": 100}

# name: (iterations_per_loop, train steps, RunConfig kwargs, host_call every_n, host tag,
#        model_fn takes the root name `loss`, global step advances every this many steps)
SCENARIOS = {
    "ipl21_steps42_every_n2": (21, 42, {}, 2, "host_loss", False, 1),
    "ipl4_steps12_save4_log4": (4, 12, {"save_summary_steps": 4, "log_step_count_steps": 4},
                                1, None, False, 1),
    "host_call_takes_loss": (2, 4, {}, 1, "loss", False, 1),
    "model_fn_takes_loss": (2, 4, {}, 1, None, True, 1),
    "both_take_loss": (2, 4, {}, 1, "loss", True, 1),
    "ipl5_steps10_checkpoints2": (5, 10, dict(_SAVE2, save_summary_steps=3), 1, None, False, 1),
    "accumulate2_ipl5_steps10_summaries1": (
        5, 10, dict(_SAVE2, save_summary_steps=1, log_step_count_steps=4), 1, None, False, 2),
    "accumulate2_ipl5_steps10_summaries3": (
        5, 10, dict(_SAVE2, save_summary_steps=3), 1, None, False, 2),
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
    optimizer = tf.train.GradientDescentOptimizer(0.5)
    if params["accumulate"] > 1:
        # tapas' gradient accumulation, reduced: the update and the global step's increment
        # run on every `accumulate`-th step only.
        counter = tf.get_variable("counter", [], initializer=tf.zeros_initializer(),
                                  trainable=False)
        grads = optimizer.compute_gradients(loss)
        with tf.control_dependencies([counter.assign_add(1.0)]):
            train_op = tf.cond(
                tf.equal(tf.mod(counter, float(params["accumulate"])), 0.0),
                lambda: tf.group(optimizer.apply_gradients(grads, global_step=step)),
                tf.no_op)
    else:
        train_op = optimizer.minimize(loss, global_step=step)
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
    """Trains scenario `name` into `model_dir`; returns {dir: {tag: [step of each event]}}.

    The checkpoints written are listed too, as the pseudo-directory `checkpoints`:
    {"model.ckpt": [global step of each]}.
    """
    ipl, steps, config, every_n, host_tag, takes_loss, accumulate = SCENARIOS[name]
    tpu = tf.estimator.tpu
    run_config = tpu.RunConfig(
        model_dir=model_dir,
        tpu_config=tpu.TPUConfig(iterations_per_loop=ipl,
                                 experimental_host_call_every_n_steps=every_n),
        **config)
    estimator = tpu.TPUEstimator(
        model_fn=_model_fn, config=run_config, use_tpu=False, train_batch_size=64,
        params={"model_dir": model_dir, "host_tag": host_tag,
                "model_fn_takes_loss": takes_loss, "accumulate": accumulate})
    estimator.train(_input_fn, max_steps=steps)
    return dict(events(model_dir), checkpoints={"model.ckpt": checkpoints(model_dir)})


def checkpoints(model_dir: str) -> list[int]:
    """The global steps of the checkpoints in `model_dir`, ascending."""
    return sorted(int(name[len("model.ckpt-"):-len(".index")])
                  for name in os.listdir(model_dir)
                  if name.startswith("model.ckpt-") and name.endswith(".index"))


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


RUNS = 10


def outcomes(name: str, runs: int = RUNS) -> dict:
    """Scenario `name` trained `runs` times: the most frequent outcome and every outcome."""
    counts: dict[str, int] = {}
    first = None
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as model_dir:
            found = run(name, model_dir)
        first = first or found
        host_tag = SCENARIOS[name][4]
        comparable = {d: {t: s for t, s in tags.items() if not (d == "." and t == host_tag)}
                      for d, tags in found.items()}
        key = json.dumps(comparable, sort_keys=True)
        counts[key] = counts.get(key, 0) + 1
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    modal = json.loads(ranked[0][0])
    host_tag = SCENARIOS[name][4]
    if host_tag:  # The first run's host_call steps, for their own (racy) check.
        modal["."][host_tag] = first["."][host_tag]
    return dict(modal, outcomes=[{"count": n, "run": json.loads(k)} for k, n in ranked])


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
        recorded["scenarios"][name] = outcomes(name)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(recorded, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
