# An mnist_tpu-style TPUEstimator script, written the way TF1 users wrote it: it imports only
# TensorFlow and absl, so the same file runs on the legacy TF 2.15 + tensorflow-estimator stack
# and, through `python -m tpu_estimator_compat.run`, on TensorFlow 2.21.
"""MNIST CNN with TPUEstimator; trains on --data_dir MNIST or the embedded digits."""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

from absl import app
from absl import flags
import tensorflow.compat.v1 as tf

import digits_data
import mnist_data

FLAGS = flags.FLAGS

flags.DEFINE_string("tpu", default=None, help="The Cloud TPU to use for training.")
flags.DEFINE_string("tpu_zone", default=None, help="GCE zone of the Cloud TPU.")
flags.DEFINE_string("gcp_project", default=None, help="GCP project of the Cloud TPU.")
flags.DEFINE_string(
    "data_dir", "",
    "Directory with MNIST IDX files (train-images-idx3-ubyte[.gz], ...) or "
    "train.tfrecords/test.tfrecords; empty: the embedded digits.")
flags.DEFINE_string("model_dir", None, "Estimator model_dir")
flags.DEFINE_integer("batch_size", 128, "Mini-batch size for the training.")
flags.DEFINE_integer("train_steps", 200, "Total number of training steps.")
flags.DEFINE_integer("eval_steps", 0, "Total number of evaluation steps.")
flags.DEFINE_float("learning_rate", 0.05, "Learning rate.")
flags.DEFINE_bool("use_tpu", True, "Use TPUs rather than plain CPUs")
flags.DEFINE_bool("enable_predict", True, "Do some predictions at the end")
flags.DEFINE_integer("iterations", 50, "Number of iterations per TPU training loop.")
flags.DEFINE_integer("num_shards", 8, "Number of shards (TPU chips).")


def metric_fn(labels, logits):
    accuracy = tf.metrics.accuracy(
        labels=labels, predictions=tf.argmax(logits, axis=1))
    return {"accuracy": accuracy}


def create_model(inputs, training):
    x = tf.reshape(inputs, [-1, 28, 28, 1])
    x = tf.layers.conv2d(x, 32, 5, padding="same", activation=tf.nn.relu)
    x = tf.layers.max_pooling2d(x, 2, 2, padding="same")
    x = tf.layers.conv2d(x, 64, 5, padding="same", activation=tf.nn.relu)
    x = tf.layers.max_pooling2d(x, 2, 2, padding="same")
    x = tf.layers.flatten(x)
    x = tf.layers.dense(x, 1024, activation=tf.nn.relu)
    x = tf.layers.dropout(x, 0.4, training=training)
    return tf.layers.dense(x, 10)


def model_fn(features, labels, mode, params):
    """model_fn constructs the ML model used to predict handwritten digits."""
    del params
    image = features
    if isinstance(image, dict):
        image = features["image"]

    if mode == tf.estimator.ModeKeys.PREDICT:
        logits = create_model(image, training=False)
        predictions = {
            "class_ids": tf.argmax(logits, axis=1),
            "probabilities": tf.nn.softmax(logits),
        }
        return tf.estimator.tpu.TPUEstimatorSpec(mode, predictions=predictions)

    logits = create_model(image, training=(mode == tf.estimator.ModeKeys.TRAIN))
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)

    if mode == tf.estimator.ModeKeys.TRAIN:
        learning_rate = tf.train.exponential_decay(
            FLAGS.learning_rate,
            tf.train.get_global_step(),
            decay_steps=100000,
            decay_rate=0.96)
        optimizer = tf.train.GradientDescentOptimizer(learning_rate=learning_rate)
        if FLAGS.use_tpu:
            optimizer = tf.tpu.CrossShardOptimizer(optimizer)
        return tf.estimator.tpu.TPUEstimatorSpec(
            mode=mode,
            loss=loss,
            train_op=optimizer.minimize(loss, tf.train.get_global_step()))

    return tf.estimator.tpu.TPUEstimatorSpec(
        mode=mode, loss=loss, eval_metrics=(metric_fn, [labels, logits]))


def _dataset(data_dir, split):
    """(image, label) pairs from --data_dir MNIST, or from the embedded digits when empty."""
    if data_dir:
        return mnist_data.dataset(data_dir, split)
    return tf.data.Dataset.from_tensor_slices(digits_data.load(split))


def train_input_fn(params):
    """train_input_fn defines the input pipeline used for training."""
    batch_size = params["batch_size"]
    data_dir = params["data_dir"]
    ds = _dataset(data_dir, "train")
    ds = ds.cache().repeat().shuffle(buffer_size=50000 if data_dir else 1500, seed=1)
    return ds.batch(batch_size, drop_remainder=True).prefetch(2)


def eval_input_fn(params):
    """eval_input_fn defines the input pipeline used for evaluation."""
    batch_size = params["batch_size"]
    return _dataset(params["data_dir"], "test").batch(batch_size)


def predict_input_fn(params):
    """predict_input_fn: the first 10 test images, features only."""
    batch_size = params["batch_size"]
    ds = _dataset(params["data_dir"], "test").take(10)
    return ds.map(lambda image, label: image).batch(batch_size)


def main(argv):
    del argv  # Unused.
    tpu_cluster_resolver = None
    if FLAGS.use_tpu:
        tpu_cluster_resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
            FLAGS.tpu, zone=FLAGS.tpu_zone, project=FLAGS.gcp_project)

    run_config = tf.estimator.tpu.RunConfig(
        cluster=tpu_cluster_resolver,
        model_dir=FLAGS.model_dir,
        session_config=tf.ConfigProto(
            allow_soft_placement=True, log_device_placement=False),
        save_checkpoints_steps=100,
        tf_random_seed=1,
        tpu_config=tf.estimator.tpu.TPUConfig(FLAGS.iterations, FLAGS.num_shards),
    )

    estimator = tf.estimator.tpu.TPUEstimator(
        model_fn=model_fn,
        use_tpu=FLAGS.use_tpu,
        train_batch_size=FLAGS.batch_size,
        eval_batch_size=FLAGS.batch_size,
        predict_batch_size=FLAGS.batch_size,
        params={"data_dir": FLAGS.data_dir},
        config=run_config)
    estimator.train(input_fn=train_input_fn, max_steps=FLAGS.train_steps)

    eval_steps = FLAGS.eval_steps or None  # None: the whole test split, every example once.
    results = estimator.evaluate(input_fn=eval_input_fn, steps=eval_steps)
    print("Evaluation results: %s" % results)

    if FLAGS.enable_predict:
        predictions = estimator.predict(input_fn=predict_input_fn)
        labels = [int(label) for _, label in _dataset(FLAGS.data_dir, "test").take(10)]
        for i, prediction in enumerate(predictions):
            print("Prediction %d: class %d (p=%.3f), label %d" % (
                i, prediction["class_ids"],
                prediction["probabilities"][prediction["class_ids"]], labels[i]))


if __name__ == "__main__":
    tf.logging.set_verbosity(tf.logging.INFO)
    app.run(main)
