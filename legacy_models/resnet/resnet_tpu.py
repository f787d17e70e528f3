# A resnet_main-style TPUEstimator script, written the way TF1 users wrote it.
"""Trains, evaluates and predicts with a small ResNet on the embedded digits.

  python legacy_models/resnet/resnet_tpu.py --use_tpu=false --model_dir=/tmp/resnet

runs on the legacy stack (TF 1.x / 2.15 with tensorflow-estimator); the same file runs on
TF 2.21 through `python -m tpu_estimator_compat.run legacy_models/resnet/resnet_tpu.py`.
Model and input live in `resnet_model.py` and `digits_input.py`.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import os
import sys

from absl import app
from absl import flags
from absl import logging
import tensorflow.compat.v1 as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import digits_input  # noqa: E402
import resnet_model  # noqa: E402

FLAGS = flags.FLAGS

flags.DEFINE_string("tpu", default=None, help="The Cloud TPU to use for training.")
flags.DEFINE_string("tpu_zone", default=None, help="GCE zone of the Cloud TPU.")
flags.DEFINE_string("gcp_project", default=None, help="GCP project of the Cloud TPU.")
flags.DEFINE_bool("use_tpu", True, "Use TPUs rather than plain CPUs.")
flags.DEFINE_string("model_dir", None, "Directory for checkpoints and summaries.")
flags.DEFINE_string("mode", "train_and_eval", "One of {'train_and_eval', 'train', 'eval'}.")
flags.DEFINE_integer("train_steps", 300, "Total training steps.")
flags.DEFINE_integer("train_batch_size", 64, "Global batch size for training.")
flags.DEFINE_integer("eval_batch_size", 64, "Global batch size for evaluation.")
flags.DEFINE_integer("predict_batch_size", 16, "Global batch size for prediction.")
flags.DEFINE_integer("iterations_per_loop", 100, "Steps per TPU training loop.")
flags.DEFINE_integer("num_cores", 8, "Number of TPU cores.")
flags.DEFINE_float("base_learning_rate", 0.2, "Peak learning rate.")
flags.DEFINE_string("lr_schedule", "cosine", "'cosine' or 'piecewise'.")
flags.DEFINE_float("weight_decay", 1e-4, "L2 weight decay on kernels.")
flags.DEFINE_integer("width", 16, "Channels of the first stage.")
flags.DEFINE_integer("blocks_per_stage", 1, "Residual blocks per stage.")
flags.DEFINE_bool("skip_host_call", False, "Skip the host_call summaries.")
flags.DEFINE_integer("num_predictions", 10, "Test images to predict at the end (0: none).")
flags.DEFINE_string("export_dir", None, "If set, export a SavedModel here at the end.")


def main(unused_argv):
    tpu_cluster_resolver = None
    if FLAGS.use_tpu:
        tpu_cluster_resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
            FLAGS.tpu, zone=FLAGS.tpu_zone, project=FLAGS.gcp_project)

    config = tf.estimator.tpu.RunConfig(
        cluster=tpu_cluster_resolver,
        model_dir=FLAGS.model_dir,
        save_checkpoints_steps=max(100, FLAGS.iterations_per_loop),
        tf_random_seed=1,
        tpu_config=tf.estimator.tpu.TPUConfig(
            iterations_per_loop=FLAGS.iterations_per_loop,
            num_shards=FLAGS.num_cores,
            per_host_input_for_training=tf.estimator.tpu.InputPipelineConfig.PER_HOST_V2))

    params = resnet_model.default_params(
        base_learning_rate=FLAGS.base_learning_rate,
        lr_schedule=FLAGS.lr_schedule,
        train_steps=FLAGS.train_steps,
        weight_decay=FLAGS.weight_decay,
        width=FLAGS.width,
        blocks_per_stage=FLAGS.blocks_per_stage,
        model_dir=FLAGS.model_dir,
        skip_host_call=FLAGS.skip_host_call,
        iterations_per_loop=FLAGS.iterations_per_loop)

    resnet_classifier = tf.estimator.tpu.TPUEstimator(
        use_tpu=FLAGS.use_tpu,
        model_fn=resnet_model.model_fn,
        config=config,
        params=params,
        train_batch_size=FLAGS.train_batch_size,
        eval_batch_size=FLAGS.eval_batch_size,
        predict_batch_size=FLAGS.predict_batch_size)

    train_input = digits_input.DigitsInput(is_training=True, split="train")
    eval_input = digits_input.DigitsInput(is_training=False, split="test")

    if FLAGS.mode in ("train", "train_and_eval"):
        logging.info("Training for %d steps.", FLAGS.train_steps)
        resnet_classifier.train(input_fn=train_input.input_fn, max_steps=FLAGS.train_steps)

    if FLAGS.mode in ("eval", "train_and_eval"):
        eval_results = resnet_classifier.evaluate(input_fn=eval_input.input_fn)
        logging.info("Eval results: %s", eval_results)
        print("Evaluation results: %s" % eval_results)

    if FLAGS.num_predictions:
        predict_input = digits_input.DigitsInput(
            is_training=False, split="test", with_labels=False,
            num_examples=FLAGS.num_predictions)
        _, labels = digits_input.load_digits_split("test")
        correct = 0
        for i, prediction in enumerate(resnet_classifier.predict(predict_input.input_fn)):
            cls = int(prediction["classes"])
            correct += int(cls == labels[i])
            print("Prediction %d: class %d (p=%.3f), label %d" % (
                i, cls, prediction["probabilities"][cls], labels[i]))
        print("Predicted %d of %d correctly." % (correct, FLAGS.num_predictions))

    if FLAGS.export_dir:
        export_path = resnet_classifier.export_saved_model(
            FLAGS.export_dir, digits_input.serving_input_receiver_fn)
        if isinstance(export_path, bytes):
            export_path = export_path.decode("utf-8")
        print("Exported SavedModel to %s" % export_path)

if __name__ == "__main__":
    logging.set_verbosity(logging.INFO)
    app.run(main)
