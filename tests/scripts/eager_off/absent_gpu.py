# Fixture for tests/test_eager_scope.py, run as `python absent_gpu.py MODEL_DIR REPORT`: as
# tensorflow/models' official r1 cifar10_test.py, eager is turned off and a session has run
# (TensorFlow's context starts in graph mode, with soft placement off), then a plain
# Estimator trains with `MirroredStrategy(devices=['device:GPU:0'])` on a machine without a
# GPU and `session_config=ConfigProto(allow_soft_placement=True)`, as its `--num_gpus=1`
# default gave. Legacy's session placed the variables on the CPU.
"""disable_eager_execution, a Session, then an Estimator on an absent GPU's strategy."""

import json
import sys

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()
with tf.Session() as session:
    session.run(tf.constant(1.0))

import tpu_estimator_compat  # noqa: E402

tpu_estimator_compat.install_aliases()


def model_fn(features, labels, mode):
    logits = tf.layers.dense(features, 1)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn():
    x = np.arange(16, dtype=np.float32).reshape(8, 2) / 16
    return tf.data.Dataset.from_tensor_slices((x, x[:, :1])).repeat().batch(4)


def main():
    model_dir, report = sys.argv[1], sys.argv[2]
    config = tf.estimator.RunConfig(
        train_distribute=tf.distribute.MirroredStrategy(devices=["device:GPU:0"]),
        session_config=tf.ConfigProto(allow_soft_placement=True))
    estimator = tf.estimator.Estimator(model_fn, model_dir=model_dir, config=config)
    estimator.train(input_fn, steps=3)
    with open(report, "w") as f:
        json.dump({"step": int(estimator.get_variable_value("global_step")),
                   "soft_placement_after": tf.config.get_soft_device_placement()}, f)


if __name__ == "__main__":
    main()
