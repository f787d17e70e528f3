# A TF1-era Estimator script as legacy users wrote it (no tpu_estimator_compat).
"""What legacy did with a Scaffold's `init_fn` and `saver` in training.

    TF_ENABLE_ONEDNN_OPTS=0 /work/main/.venv-legacy/bin/python \\
        tests/legacy_recorder/scaffold_parts.py   # records
    (tests/test_scaffold_parts.py replays it on the library)

A linear model (`w` [3, 1], `b` [1], zeros; squared error; SGD 0.1) on 16 fixed rows, and
a "pretrained" checkpoint (`pre/w`, `pre/unused`) written by a TF1 Saver. Cases, each on a
fresh model_dir:

* `init_fn_saver`: plain Estimator; model_fn builds `Saver({'pre/w': w})` and
  `Scaffold(init_fn=...)` whose init_fn restores it from the pretrained checkpoint (the
  `lambda scaffold, sess: saver.restore(sess, ckpt)` idiom) and reads `w` with
  `session.run`. Two `train(steps=2)` calls, then `evaluate(steps=1)`.
* `scaffold_fn_init_fn`: the same init_fn from a TPUEstimator (use_tpu=False) scaffold_fn.
* `evaluate_fresh`: `evaluate(steps=1)` on a model_dir with no checkpoint (legacy ran
  init_fn there too), then `train(steps=1)` and `evaluate` again.
* `saver_var_list`: `Scaffold(saver=Saver({'renamed/w': w, 'global_step': step},
  max_to_keep=2, pad_step_number=True))`, a checkpoint every step, `train(steps=3)`; then
  `train(steps=1)` again, which fails (`b` is not in the var_list).

Recorded per case: init_fn's calls after each call (and what it saw), the checkpoint files,
keys and values. Output: tests/goldens/scaffold_parts/legacy.json.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np
import tensorflow as tf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "goldens",
                   "scaffold_parts", "legacy.json")
v1 = tf.compat.v1
X = np.random.RandomState(0).rand(16, 3).astype(np.float32)
Y = X @ np.array([[1.0], [2.0], [3.0]], np.float32)
PRETRAINED_W = np.array([[0.5], [-1.0], [2.0]], np.float32)
CALLS: list[dict] = []  # What each init_fn call saw.


def write_pretrained(path: str) -> str:
    with tf.Graph().as_default(), v1.Session() as sess:
        w = v1.get_variable("pre/w", initializer=PRETRAINED_W)
        unused = v1.get_variable("pre/unused", initializer=np.ones([2], np.float32))
        sess.run(v1.global_variables_initializer())
        return v1.train.Saver([w, unused]).save(sess, path)


def input_fn(params=None):
    batch = params["batch_size"] if params and "batch_size" in params else 4
    return tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(batch, drop_remainder=True)


def _linear(features, labels, mode):
    w = v1.get_variable("w", [3, 1], initializer=v1.zeros_initializer())
    b = v1.get_variable("b", [1], initializer=v1.zeros_initializer())
    loss = tf.reduce_mean(tf.square(tf.matmul(features, w) + b - labels))
    train_op = None
    if mode == tf.estimator.ModeKeys.TRAIN:
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=v1.train.get_global_step())
    return w, b, loss, train_op


def restoring_init_fn(pretrained: str, w):
    saver = v1.train.Saver({"pre/w": w})

    def init_fn(scaffold, session):
        saver.restore(session, pretrained)
        CALLS.append({"w": session.run(w).ravel().tolist(),
                      "scaffold_saver": scaffold.saver is not None})

    return init_fn


def model_fn(features, labels, mode, params):
    w, _, loss, train_op = _linear(features, labels, mode)
    scaffold = v1.train.Scaffold(init_fn=restoring_init_fn(params["pretrained"], w))
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, scaffold=scaffold,
                                      eval_metric_ops={"w0": v1.metrics.mean(w[0, 0])})


def tpu_model_fn(features, labels, mode, params):
    w, _, loss, train_op = _linear(features, labels, mode)

    def scaffold_fn():
        return v1.train.Scaffold(init_fn=restoring_init_fn(params["pretrained"], w))

    return v1.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op,
                                             scaffold_fn=scaffold_fn)


def saver_model_fn(features, labels, mode):
    w, _, loss, train_op = _linear(features, labels, mode)
    saver = v1.train.Saver({"renamed/w": w, "global_step": v1.train.get_global_step()},
                           max_to_keep=2, pad_step_number=True)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op,
                                      scaffold=v1.train.Scaffold(saver=saver))


def checkpoints(model_dir: str) -> dict:
    """The `.index` files, and the latest checkpoint's keys and values."""
    latest = tf.train.latest_checkpoint(model_dir)
    reader = tf.train.load_checkpoint(latest)
    return {"files": sorted(f for f in os.listdir(model_dir) if f.endswith(".index")),
            "latest": os.path.basename(latest),
            "values": {k: np.asarray(reader.get_tensor(k)).ravel().tolist()
                       for k in sorted(reader.get_variable_to_shape_map())}}


def first_checkpoint_w(model_dir: str) -> list:
    return tf.train.load_variable(os.path.join(model_dir, "model.ckpt-0"), "w").ravel().tolist()


def estimator(name: str, model_dir: str, pretrained: str, config=None):
    params = {"pretrained": pretrained}
    if name == "scaffold_fn_init_fn":
        run_config = v1.estimator.tpu.RunConfig(model_dir=model_dir)
        return v1.estimator.tpu.TPUEstimator(model_fn=tpu_model_fn, config=run_config,
                                             params=params, use_tpu=False,
                                             train_batch_size=4)
    if name == "saver_var_list":
        run_config = tf.estimator.RunConfig(save_checkpoints_steps=1, train_distribute=config)
        return tf.estimator.Estimator(saver_model_fn, model_dir=model_dir, config=run_config)
    run_config = tf.estimator.RunConfig(train_distribute=config, eval_distribute=config)
    return tf.estimator.Estimator(model_fn, model_dir=model_dir, config=run_config,
                                  params=params)


def run(name: str, model_dir: str, pretrained: str, config=None) -> dict:
    """One case on a fresh model_dir: what init_fn saw and what was written."""
    CALLS.clear()
    est = estimator(name, model_dir, pretrained, config)
    found: dict = {}
    if name == "saver_var_list":
        est.train(input_fn, steps=3)
        found["checkpoints"] = checkpoints(model_dir)
        try:
            est.train(input_fn, steps=1)
            found["resume"] = "trained"
        except Exception as e:  # pylint: disable=broad-except  # Recorded, as legacy raised it.
            found["resume"] = [type(e).__name__, str(e).split("  ")[0]]
        return found
    if name == "evaluate_fresh":
        found["evaluate"] = {"w0": float(est.evaluate(input_fn, steps=1)["w0"])}
        found["calls_after_evaluate"] = len(CALLS)
    est.train(input_fn, steps=2)
    found["calls_after_train"] = len(CALLS)
    found["first_checkpoint_w"] = first_checkpoint_w(model_dir)
    est.train(input_fn, steps=2)
    found["calls_after_second_train"] = len(CALLS)
    found["seen"] = list(CALLS)
    found["checkpoints"] = checkpoints(model_dir)
    if name != "scaffold_fn_init_fn":
        found["evaluate_after"] = float(est.evaluate(input_fn, steps=1)["w0"])
        found["calls_at_end"] = len(CALLS)
    return found


CASES = ("init_fn_saver", "scaffold_fn_init_fn", "evaluate_fresh", "saver_var_list")


def main() -> None:
    versions = {"tensorflow": tf.__version__, "python": sys.version.split()[0]}
    from importlib import metadata
    versions["tensorflow-estimator"] = metadata.version("tensorflow-estimator")
    recorded = {"versions": versions}
    with tempfile.TemporaryDirectory() as tmp:
        pretrained = write_pretrained(os.path.join(tmp, "pretrained", "model.ckpt"))
        for name in CASES:
            recorded[name] = run(name, os.path.join(tmp, name), pretrained)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(recorded, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", os.path.abspath(OUT))


if __name__ == "__main__":
    main()
