# An r1 Estimator script, written as TF1 users wrote it (no tpu_estimator_compat import).
"""`eval_metric_ops` mixing `(value, update_op)` pairs and tf.keras Metric objects, on the
legacy stack, evaluated on one replica and on MirroredStrategy over 2 CPUs.

    TF_ENABLE_ONEDNN_OPTS=0 .venv-legacy/bin/python tests/legacy_recorder/estimator_keras_metrics.py
    (tests/test_eval_metric_ops.py replays it on the library, after `install_aliases()`)

The model is estimator_plain's MLP on scikit-learn's digits (numpy initial weights, Adam
train_op built in every mode). model_fn returns v1 metrics (`accuracy`, `auc`) beside
tf.keras `Mean`, `Accuracy`, `AUC`, `Precision` and `Recall` objects on which it called
`update_state`, as the v2 heads do. Trained STEPS steps on one replica; then `evaluate()`
over the held-out digits (597 examples in batches of 100: a partial last one) with no
eval_distribute, and again with `RunConfig(eval_distribute=MirroredStrategy)` over 2 logical
CPUs (each replica takes one input_fn batch). Output: tests/goldens/estimator_keras_metrics/
legacy.json.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "goldens",
                   "estimator_keras_metrics", "legacy.json")
STEPS = 12


def _split_cpu():
    """Two logical CPUs for MirroredStrategy (before anything initialises the devices)."""
    cpus = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
    except RuntimeError:
        pass  # Already split (the test process splits it into more).


def _plain():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        import estimator_plain
    finally:
        sys.path.pop(0)
    return estimator_plain


def make_model_fn():
    plain = _plain()
    weights = plain._initial_weights()

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
            return tf.estimator.EstimatorSpec(mode, predictions={"class_ids": classes})
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        train_op = tf.train.AdamOptimizer(0.01).minimize(
            loss, global_step=tf.train.get_global_step())
        # A binary view for the AUC, precision and recall: "is it a zero?".
        is_zero = tf.equal(labels, 0)
        p_zero = tf.nn.softmax(logits)[:, 0]
        keras_metrics = {
            "k_mean_loss": tf.keras.metrics.Mean(name="k_mean_loss"),
            "k_accuracy": tf.keras.metrics.Accuracy(name="k_accuracy"),
            "k_auc": tf.keras.metrics.AUC(name="k_auc"),
            "k_precision": tf.keras.metrics.Precision(thresholds=0.2, name="k_precision"),
            "k_recall": tf.keras.metrics.Recall(thresholds=0.2, name="k_recall"),
        }
        keras_metrics["k_mean_loss"].update_state(loss)
        keras_metrics["k_accuracy"].update_state(labels, classes)
        keras_metrics["k_auc"].update_state(is_zero, p_zero)
        keras_metrics["k_precision"].update_state(is_zero, p_zero)
        keras_metrics["k_recall"].update_state(is_zero, p_zero)
        metrics = dict(keras_metrics)
        metrics["accuracy"] = tf.metrics.accuracy(labels, classes)
        metrics["auc"] = tf.metrics.auc(is_zero, p_zero)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op,
                                          eval_metric_ops=metrics)

    return model_fn


def run(workdir, mirrored=None):
    """Trains STEPS steps on one replica; evaluates on one replica and on `mirrored`.

    `mirrored`: the 2-replica MirroredStrategy to evaluate with (one over 2 logical CPUs is
    made when None).
    """
    plain = _plain()
    estimator = tf.estimator.Estimator(make_model_fn(), model_dir=workdir,
                                       config=tf.estimator.RunConfig(tf_random_seed=1))
    estimator.train(plain.train_input_fn, steps=STEPS)
    one = estimator.evaluate(plain.eval_input_fn)
    if mirrored is None:
        mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    distributed = tf.estimator.Estimator(
        make_model_fn(), model_dir=workdir,
        config=tf.estimator.RunConfig(tf_random_seed=1, eval_distribute=mirrored))
    two = distributed.evaluate(plain.eval_input_fn, name="mirrored")

    def plain_values(metrics):
        return {k: float(v) for k, v in metrics.items() if k != "global_step"}

    return {"one_replica": plain_values(one), "two_replicas": plain_values(two),
            "global_step": int(one["global_step"])}


def main():
    _split_cpu()
    with tempfile.TemporaryDirectory() as workdir:
        result = run(workdir)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump({"legacy": result, "versions": {"tensorflow": tf.__version__}}, f,
                  indent=1, sort_keys=True)
    print("wrote", os.path.relpath(OUT), file=sys.stderr)


if __name__ == "__main__":
    main()
