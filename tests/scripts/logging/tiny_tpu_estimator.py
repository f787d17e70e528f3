"""A tiny TPUEstimator script that sets no verbosity: train, evaluate twice, train again,
predict. The progress lines legacy printed are what its users watch and scrape.

    python tiny_tpu_estimator.py MODEL_DIR [app_run|no_app_run] [absl flags...]

With `no_app_run` it calls main directly, as notebooks do, after
`tf.logging.set_verbosity(INFO)`.
"""
import sys

import numpy as np
import tensorflow.compat.v1 as tf
from absl import app

MODEL_DIR = sys.argv.pop(1)
APP_RUN = sys.argv.pop(1) == "app_run" if len(sys.argv) > 1 else True
ROWS = 64


def input_fn(params):
    x = np.arange(ROWS * 4, dtype=np.float32).reshape(ROWS, 4) / 100.0
    y = (np.arange(ROWS) % 2).astype(np.int32)
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(
        params["batch_size"], drop_remainder=True)


def finite_input_fn(params):
    """Three batches, then the end of input."""
    x = np.arange(24 * 4, dtype=np.float32).reshape(24, 4) / 50.0
    y = (np.arange(24) % 2).astype(np.int32)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(params["batch_size"],
                                                             drop_remainder=True)


def model_fn(features, labels, mode, params):
    del params
    logits = tf.layers.dense(features, 2, kernel_initializer=tf.zeros_initializer())
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.tpu.TPUEstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = None
    if mode == tf.estimator.ModeKeys.TRAIN:
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(
            loss, tf.train.get_global_step())

    def metric_fn(labels, logits):
        return {"accuracy": tf.metrics.accuracy(labels, tf.argmax(logits, 1))}

    return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op,
                                             eval_metrics=(metric_fn, [labels, logits]))


def main(_):
    config = tf.estimator.tpu.RunConfig(
        model_dir=MODEL_DIR, save_checkpoints_steps=3, log_step_count_steps=2,
        tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=2))
    estimator = tf.estimator.tpu.TPUEstimator(
        model_fn=model_fn, use_tpu=False, train_batch_size=8, eval_batch_size=8,
        predict_batch_size=8, config=config)
    estimator.train(input_fn, max_steps=7)
    print("evaluate", estimator.evaluate(input_fn, steps=2))
    print("evaluate to the end of input", estimator.evaluate(finite_input_fn))
    estimator.train(input_fn, max_steps=7)
    print("predictions", len(list(estimator.predict(finite_input_fn))))


if __name__ == "__main__":
    if APP_RUN:
        app.run(main)
    else:
        tf.logging.set_verbosity(tf.logging.INFO)
        main(None)
