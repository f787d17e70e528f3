"""tensorflow/tpu `models/experimental/cifar_keras/cifar_keras.py`'s idioms, run unchanged.

The same imports (`tensorflow.compat.v1`, `from tensorflow.contrib import keras as
contrib_keras`, `tpu`, `cluster_resolver`), flags, a model_fn of `contrib_keras.layers`
(`Input(tensor=features)`, Conv2D, MaxPool2D, Flatten, Dense) under `CrossShardOptimizer`
with `use_tpu`, a TFRecord input_fn of CIFAR's schema (raw uint8 `image`, int64 `label`),
`tf.logging.set_verbosity(tf.logging.INFO)` and `app.run(main)`; smaller images so the test
is fast. Prints the checkpoint's variables and the final global step.
"""
from absl import app
from absl import flags
import tensorflow.compat.v1 as tf
from tensorflow.contrib import cluster_resolver as contrib_cluster_resolver
from tensorflow.contrib import keras as contrib_keras
from tensorflow.contrib import tpu as contrib_tpu

flags.DEFINE_string("tpu", default=None, help="TPU name.")
flags.DEFINE_integer("batch_size", 16, "Global batch size.")
flags.DEFINE_string("train_file", "", "Path to the training TFRecords.")
flags.DEFINE_integer("train_steps", 4, "Total number of steps.")
flags.DEFINE_bool("use_tpu", True, "Use TPUs rather than plain CPUs")
flags.DEFINE_string("model_dir", None, "Estimator model_dir")
flags.DEFINE_integer("iterations_per_loop", 2, "Number of iterations per TPU training loop.")
flags.DEFINE_integer("num_shards", 2, "Number of shards (TPU chips).")
FLAGS = flags.FLAGS
SIZE = 8


def model_fn(features, labels, mode, params):
  del params
  layers = contrib_keras.layers
  v = layers.Input(tensor=features)
  v = layers.Conv2D(filters=4, kernel_size=3, activation="relu", padding="same")(v)
  v = layers.MaxPool2D(pool_size=2)(v)
  v = layers.Flatten()(v)
  fc1 = layers.Dense(units=16, activation="relu")(v)
  logits = layers.Dense(units=10)(fc1)
  loss = tf.reduce_mean(
      tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=labels))
  optimizer = tf.train.AdamOptimizer()
  if FLAGS.use_tpu:
    optimizer = contrib_tpu.CrossShardOptimizer(optimizer)
  train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
  return contrib_tpu.TPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)


def input_fn(params):
  del params

  def parser(serialized_example):
    features = tf.parse_single_example(
        serialized_example,
        features={"image": tf.FixedLenFeature([], tf.string),
                  "label": tf.FixedLenFeature([], tf.int64)})
    image = tf.decode_raw(features["image"], tf.uint8)
    image.set_shape([3 * SIZE * SIZE])
    image = tf.cast(image, tf.float32) * (1. / 255) - 0.5
    image = tf.transpose(tf.reshape(image, [3, SIZE, SIZE]))
    return image, tf.cast(features["label"], tf.int32)

  dataset = tf.data.TFRecordDataset([FLAGS.train_file])
  dataset = dataset.map(parser).cache().repeat()
  return dataset.batch(FLAGS.batch_size, drop_remainder=True)


def main(argv):
  del argv
  resolver = contrib_cluster_resolver.TPUClusterResolver(FLAGS.tpu)
  run_config = contrib_tpu.RunConfig(
      cluster=resolver, model_dir=FLAGS.model_dir, save_checkpoints_secs=3600,
      session_config=tf.ConfigProto(allow_soft_placement=True),
      tpu_config=contrib_tpu.TPUConfig(iterations_per_loop=FLAGS.iterations_per_loop,
                                       num_shards=FLAGS.num_shards))
  estimator = contrib_tpu.TPUEstimator(model_fn=model_fn, use_tpu=FLAGS.use_tpu,
                                       config=run_config, train_batch_size=FLAGS.batch_size)
  estimator.train(input_fn=input_fn, max_steps=FLAGS.train_steps)
  print("variables", " ".join(sorted(name for name, _ in
                                     tf.train.list_variables(FLAGS.model_dir))))
  print("global step", estimator.get_variable_value("global_step"))


if __name__ == "__main__":
  tf.logging.set_verbosity(tf.logging.INFO)
  app.run(main)
