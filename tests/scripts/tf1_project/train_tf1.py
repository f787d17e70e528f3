# A TF1-era TPUEstimator script, kept exactly as such code was written for TF 1.x: it says
# `import tensorflow as tf` and means TF1. Test fixture for `python -m tpu_estimator_compat.run`.
"""Two-class softmax model on synthetic data through tf.contrib.tpu.TPUEstimator."""

import numpy as np
import tensorflow as tf

from tf1_lib import model as model_lib

flags = tf.flags
flags.DEFINE_string("tpu", None, "Cloud TPU name; None: discover.")
flags.DEFINE_string("model_dir", None, "Where checkpoints go.")
flags.DEFINE_bool("use_tpu", True, "Run on TPU.")
flags.DEFINE_integer("num_shards", 8, "TPU cores.")
flags.DEFINE_integer("iterations", 5, "Steps per TPU loop.")
flags.DEFINE_integer("train_steps", 20, "Steps to train.")
FLAGS = flags.FLAGS

BATCH_SIZE = 64


def model_fn(features, labels, mode, params):
  del params
  logits = model_lib.build(features, is_training=(mode == tf.estimator.ModeKeys.TRAIN))
  if mode == tf.estimator.ModeKeys.PREDICT:
    return tf.contrib.tpu.TPUEstimatorSpec(mode, predictions={"class": tf.argmax(logits, 1)})
  loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
  if mode == tf.estimator.ModeKeys.TRAIN:
    optimizer = tf.train.GradientDescentOptimizer(learning_rate=0.5)
    if FLAGS.use_tpu:
      optimizer = tf.contrib.tpu.CrossShardOptimizer(optimizer)
    train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
    return tf.contrib.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

  def metric_fn(labels, logits):
    return {"accuracy": tf.metrics.accuracy(labels=labels, predictions=tf.argmax(logits, 1))}

  return tf.contrib.tpu.TPUEstimatorSpec(mode, loss=loss, eval_metrics=(metric_fn, [labels, logits]))


def input_fn(params):
  rng = np.random.RandomState(0)
  features = rng.randn(1024, 8).astype(np.float32)
  labels = (features.sum(axis=1) > 0).astype(np.int32)
  ds = tf.data.Dataset.from_tensor_slices((features, labels)).repeat()
  return ds.batch(params["batch_size"], drop_remainder=True)


def main(_):
  tf.logging.set_verbosity(tf.logging.INFO)
  resolver = tf.contrib.cluster_resolver.TPUClusterResolver(tpu=FLAGS.tpu)
  config = tf.contrib.tpu.RunConfig(
      cluster=resolver,
      model_dir=FLAGS.model_dir,
      session_config=tf.ConfigProto(allow_soft_placement=True, log_device_placement=False),
      tpu_config=tf.contrib.tpu.TPUConfig(iterations_per_loop=FLAGS.iterations,
                                          num_shards=FLAGS.num_shards))
  estimator = tf.contrib.tpu.TPUEstimator(
      model_fn=model_fn, config=config, use_tpu=FLAGS.use_tpu,
      train_batch_size=BATCH_SIZE, eval_batch_size=BATCH_SIZE)
  estimator.train(input_fn=input_fn, max_steps=FLAGS.train_steps)
  results = estimator.evaluate(input_fn=input_fn, steps=4)
  print("TF1 script evaluation: accuracy=%.3f global_step=%d"
        % (results["accuracy"], results["global_step"]))
  print("TF1 script view: " + model_lib.describe_tf())


if __name__ == "__main__":
  tf.app.run()
