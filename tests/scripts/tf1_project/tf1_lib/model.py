# TF1-era helper module: `import tensorflow as tf` means TF1 here too.
"""The fixture's model, written with TF1 names whose TF2 meaning differs."""

import tensorflow as tf


def build(features, is_training):
  hidden = tf.layers.dense(features, 16, activation=tf.nn.relu, name="hidden")
  width = hidden.shape[-1].value  # A TF1 Dimension; TF2 shapes hold plain ints.
  hidden = tf.contrib.layers.layer_norm(hidden)
  if is_training:
    hidden = tf.nn.dropout(hidden, 0.9)  # TF1: keep_prob=0.9 (TF2 would read rate=0.9).
  assert width == 16
  return tf.layers.dense(hidden, 2, name="logits")


def describe_tf():
  """Facts about the `tf` this module got, for the launcher tests to check."""
  ones = tf.ones([200, 100])
  kept = float(tf.reduce_mean(tf.cast(tf.not_equal(tf.nn.dropout(ones, 0.9), 0), tf.float32)))
  return "dropout(x, 0.9) kept=%.2f metrics.accuracy=%s shape[-1].value=%d" % (
      kept, tf.metrics.accuracy.__module__, tf.constant([[1, 2, 3]]).shape[-1].value)
