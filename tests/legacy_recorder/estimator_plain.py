# An r1 Estimator script, written as TF1 users wrote it (no tpu_estimator_compat import).
"""A plain `tf.estimator.Estimator` MLP on scikit-learn's digits, recorded on the legacy stack.

    TF_ENABLE_ONEDNN_OPTS=0 .venv-legacy/bin/python tests/legacy_recorder/estimator_plain.py
    (tests/test_estimator_plain.py replays it on the library, after `install_aliases()`)

model_fn takes `(features, labels, mode)` only and input_fns take no argument: what the
plain Estimator allowed and TPUEstimator did not. Its initial weights are numpy constants, so
both stacks start from the same values without a checkpoint. It builds its Adam train_op in
every mode, as many r1 model_fns did: legacy's evaluation and prediction never ran it.

Recorded, on one replica: the loss of each of STEPS training steps (a training hook fetching
the spec's loss), `evaluate()` over the held-out digits (accuracy and mean per-class accuracy
through `tf.compat.v1.metrics`, a partial last batch), the predictions for 40 examples, and
the checkpoint's variable names, shapes and values. Output: tests/goldens/estimator_plain/
legacy.json (~90 kB).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "goldens",
                   "estimator_plain", "legacy.json")
NUM_TRAIN = 1200
BATCH = 50
STEPS = 12
HIDDEN = 16


def _digits(split):
    from sklearn.datasets import load_digits

    data = load_digits()
    x = (data.data / 16.0).astype(np.float32)
    y = data.target.astype(np.int32)
    return (x[:NUM_TRAIN], y[:NUM_TRAIN]) if split == "train" else (x[NUM_TRAIN:],
                                                                    y[NUM_TRAIN:])


def train_input_fn():
    x, y = _digits("train")
    return tf.data.Dataset.from_tensor_slices(({"pixels": x}, y)).repeat().batch(BATCH)


def eval_input_fn():
    x, y = _digits("test")  # 597 examples: the last batch of 100 is partial.
    return tf.data.Dataset.from_tensor_slices(({"pixels": x}, y)).batch(100)


def predict_input_fn():
    x, _ = _digits("test")
    return tf.data.Dataset.from_tensor_slices({"pixels": x[:40]}).batch(16)


def _initial_weights():
    rng = np.random.RandomState(7)
    return {"hidden": (rng.normal(0, 0.2, (64, HIDDEN)).astype(np.float32),
                       np.zeros(HIDDEN, np.float32)),
            "logits": (rng.normal(0, 0.2, (HIDDEN, 10)).astype(np.float32),
                       np.zeros(10, np.float32))}


class LossRecorder(tf.train.SessionRunHook):
    def __init__(self, loss, losses):
        self._loss, self._losses = loss, losses

    def before_run(self, run_context):
        return tf.train.SessionRunArgs(self._loss)

    def after_run(self, run_context, run_values):
        self._losses.append(float(run_values.results))


def make_model_fn(losses, reduction=None):
    """`reduction`: the v1 loss's (None: `sparse_softmax_cross_entropy`'s default, a mean)."""
    weights = _initial_weights()
    reduction_kwargs = {} if reduction is None else {"reduction": reduction}

    def dense(x, name, activation=None):
        kernel, bias = weights[name]
        return tf.layers.dense(x, kernel.shape[1], activation=activation, name=name,
                               kernel_initializer=tf.constant_initializer(kernel),
                               bias_initializer=tf.constant_initializer(bias))

    def model_fn(features, labels, mode):
        hidden = dense(features["pixels"], "hidden", tf.nn.relu)
        logits = dense(hidden, "logits")
        classes = tf.argmax(logits, axis=1)
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions={
                "class_ids": classes, "probabilities": tf.nn.softmax(logits),
                "logits": logits})
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits,
                                                      **reduction_kwargs)
        train_op = tf.train.AdamOptimizer(0.01).minimize(
            loss, global_step=tf.train.get_global_step())
        metrics = {
            "accuracy": tf.metrics.accuracy(labels, classes),
            "mean_per_class_accuracy": tf.metrics.mean_per_class_accuracy(
                labels, classes, num_classes=10)}
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op,
                                          eval_metric_ops=metrics,
                                          training_hooks=[LossRecorder(loss, losses)])

    return model_fn


def run(workdir):
    """Trains STEPS steps, evaluates and predicts; returns what legacy's tests compare."""
    losses = []
    estimator = tf.estimator.Estimator(make_model_fn(losses), model_dir=workdir,
                                       config=tf.estimator.RunConfig(tf_random_seed=1))
    estimator.train(train_input_fn, steps=STEPS)
    metrics = estimator.evaluate(eval_input_fn)
    predictions = list(estimator.predict(predict_input_fn))
    reader = tf.train.load_checkpoint(estimator.latest_checkpoint())
    shapes = reader.get_variable_to_shape_map()
    return {
        "losses": losses,
        "metrics": {k: float(v) for k, v in metrics.items() if k != "global_step"},
        "global_step": int(metrics["global_step"]),
        "predictions": {key: [np.asarray(p[key]).tolist() for p in predictions]
                        for key in ("class_ids", "probabilities", "logits")},
        "checkpoint": os.path.basename(estimator.latest_checkpoint()),
        "variables": {name: {"shape": list(shapes[name]),
                             "value": np.asarray(reader.get_tensor(name)).ravel().tolist()}
                      for name in sorted(shapes)},
    }


def main():
    with tempfile.TemporaryDirectory() as workdir:
        result = run(workdir)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump({"legacy": result, "versions": {"tensorflow": tf.__version__}}, f)
    print("wrote", os.path.relpath(OUT), file=sys.stderr)


if __name__ == "__main__":
    main()
