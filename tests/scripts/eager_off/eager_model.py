# A tiny r1 model for the eager-off fixture scripts (tests/test_eager_scope.py). Written in
# the `tensorflow.compat.v1` style, so it reads the same in and out of the launcher's TF1 mode.
"""model_fn, input_fn and serving fn, plus what every fixture script reports."""

import json
import os

import numpy as np
import tensorflow.compat.v1 as tf
from tensorflow.compat.v1 import estimator as tf_estimator

NUM_EXAMPLES = 40
NUM_FEATURES = 4
NUM_CLASSES = 3
SEEN_IN_MODEL_FN = set()


def data():
  rng = np.random.RandomState(0)
  x = rng.randn(NUM_EXAMPLES, NUM_FEATURES).astype(np.float32)
  y = (x[:, 0] > 0).astype(np.int32) + (x[:, 1] > 0.5).astype(np.int32)
  return x, y


def model_fn(features, labels, mode, params):
  del params
  hidden = tf.layers.dense(features, 8, activation=tf.nn.relu, name="hidden")
  logits = tf.keras.layers.Dense(NUM_CLASSES, name="logits")(hidden)
  # tf_keras's v1 dtype behaviour (v2 behaviour off): a float64 input makes a float64 layer.
  wide = tf.keras.layers.Dense(1, name="wide")
  logits += 0.0 * tf.cast(wide(tf.cast(features, tf.float64)), tf.float32)
  # What model_fn sees stays TF1 where the script asked for it (reported by the scripts).
  SEEN_IN_MODEL_FN.add((type(features.shape[-1]).__name__,
                        type(tf.get_variable("probe", [1])).__name__, wide.dtype))
  scale = tf.get_variable("scale", [], initializer=tf.ones_initializer())
  # v1 control flow inside model_fn.
  logits = tf.cond(tf.reduce_sum(features) > -1e9, lambda: logits * scale, lambda: logits)
  _, logits = tf.while_loop(lambda i, l: i < 2, lambda i, l: (i + 1, l * 1.0),
                            [tf.constant(0), logits])
  if mode == tf_estimator.ModeKeys.PREDICT:
    return tf_estimator.tpu.TPUEstimatorSpec(
        mode, predictions={"logits": logits, "classes": tf.argmax(logits, 1)})
  loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
  if mode == tf_estimator.ModeKeys.EVAL:
    def metric_fn(labels, logits):
      return {"accuracy": tf.metrics.accuracy(labels, tf.argmax(logits, 1))}
    return tf_estimator.tpu.TPUEstimatorSpec(mode, loss=loss,
                                             eval_metrics=(metric_fn, [labels, logits]))
  optimizer = tf.tpu.CrossShardOptimizer(tf.train.MomentumOptimizer(0.1, 0.9))
  train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
  return tf_estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def train_input_fn(params):
  x, y = data()
  ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
  return ds.batch(params["batch_size"], drop_remainder=True)


def eval_input_fn(params):
  x, y = data()
  return tf.data.Dataset.from_tensor_slices((x, y)).batch(params["batch_size"],
                                                          drop_remainder=True)


def predict_input_fn(params):
  x, _ = data()
  return tf.data.Dataset.from_tensor_slices(x[:10]).batch(params["batch_size"])


def serving_input_receiver_fn():
  x = tf.placeholder(tf.float32, [None, NUM_FEATURES], name="x")
  return tf_estimator.export.TensorServingInputReceiver(x, {"x": x})


def make_estimator(model_dir, use_tpu=True):
  config = tf_estimator.tpu.RunConfig(
      model_dir=model_dir, tf_random_seed=7, save_summary_steps=1,
      save_checkpoints_steps=5,
      tpu_config=tf_estimator.tpu.TPUConfig(iterations_per_loop=1))
  return tf_estimator.tpu.TPUEstimator(
      model_fn=model_fn, config=config, use_tpu=use_tpu, train_batch_size=8,
      eval_batch_size=8, predict_batch_size=4)


def tf1_view():
  """The TF1 switches as the script's own code sees them, outside the estimator."""
  return {
      "executing_eagerly": tf.executing_eagerly(),
      "dimension_shapes": isinstance(tf.TensorShape([1])[0], tf.Dimension),
      "control_flow_v2": tf.control_flow_v2_enabled(),
      "resource_variables": tf.resource_variables_enabled(),
  }


def write_report(path, **report):
  def plain(value):
    if isinstance(value, dict):
      return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
      return [plain(v) for v in value]
    if isinstance(value, np.generic):
      return value.item()
    return value
  with open(path + ".tmp", "w") as f:
    json.dump(plain(report), f, indent=1, sort_keys=True)
  os.rename(path + ".tmp", path)
