# A TPUEstimator script in the TF 1.15 / 2.x `compat.v1` style, unchanged: it imports the
# estimator from `tensorflow.compat.v1`. Test fixture for `python -m tpu_estimator_compat.run`.
"""Linear regression through tf_estimator.tpu.TPUEstimator."""

import numpy as np
import tensorflow.compat.v1 as tf
from tensorflow.compat.v1 import estimator as tf_estimator

tf.flags.DEFINE_string("tpu", None, "Cloud TPU name.")
tf.flags.DEFINE_string("model_dir", None, "Where checkpoints go.")
tf.flags.DEFINE_bool("use_tpu", True, "Run on TPU.")
tf.flags.DEFINE_integer("train_steps", 30, "Steps to train.")
FLAGS = tf.flags.FLAGS


def model_fn(features, labels, mode, params):
  del params
  predictions = tf.layers.dense(features, 1, name="linear")
  if mode == tf_estimator.ModeKeys.PREDICT:
    return tf_estimator.tpu.TPUEstimatorSpec(mode, predictions={"y": predictions})
  loss = tf.losses.mean_squared_error(labels=labels, predictions=predictions)
  optimizer = tf.tpu.CrossShardOptimizer(tf.train.GradientDescentOptimizer(0.1))
  train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
  return tf_estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn(params):
  rng = np.random.RandomState(0)
  x = rng.randn(256, 4).astype(np.float32)
  y = x.dot(np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32))
  ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
  return ds.batch(params["batch_size"], drop_remainder=True)


def main(_):
  tf.logging.set_verbosity(tf.logging.INFO)
  resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=FLAGS.tpu)
  config = tf_estimator.tpu.RunConfig(
      cluster=resolver, model_dir=FLAGS.model_dir,
      tpu_config=tf_estimator.tpu.TPUConfig(iterations_per_loop=10))
  estimator = tf_estimator.tpu.TPUEstimator(
      model_fn=model_fn, config=config, use_tpu=FLAGS.use_tpu, train_batch_size=32)
  estimator.train(input_fn=input_fn, max_steps=FLAGS.train_steps)
  print("compat.v1 script trained to step %d, loss variable names: %s" % (
      estimator.get_variable_value("global_step"),
      ",".join(n for n in estimator.get_variable_names() if n.startswith("linear"))))


if __name__ == "__main__":
  tf.app.run()
