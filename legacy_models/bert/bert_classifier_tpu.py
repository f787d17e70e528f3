# A run_classifier-style TPUEstimator script, written the way TF1 users wrote it.
"""Fine-tunes the tiny BERT on the digits sentence-pair task: train, eval, predict.

  python legacy_models/bert/bert_classifier_tpu.py --output_dir=/tmp/bert_cls

first writes a masked-LM "pretrained" checkpoint to `<output_dir>/pretrained` (unless
`--init_checkpoint` is given, or `--pretrain_steps=0` to fine-tune from scratch), then
fine-tunes from it with `init_from_checkpoint`. `--use_tpu` defaults to false, as in BERT;
on TF 2.21 run the same file through `python -m tpu_estimator_compat.run`, where
`--use_tpu=true` takes the TPU code paths (scaffold_fn, CrossShardOptimizer, padded eval).
Model: `classifier_model.py`, `modeling.py`, `optimization.py`; data: `digits_text.py`.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import os
import sys

from absl import app
from absl import flags
import numpy as np
import tensorflow.compat.v1 as tf
from tensorflow.compat.v1 import estimator as tf_estimator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import classifier_model  # noqa: E402
import digits_text  # noqa: E402
import modeling  # noqa: E402
import pretrain  # noqa: E402

FLAGS = flags.FLAGS

flags.DEFINE_string("output_dir", None, "Model checkpoints, TFRecords and results.")
flags.DEFINE_string("bert_config_file", None, "BERT config json (default: the tiny config).")
flags.DEFINE_string("init_checkpoint", None, "Checkpoint to initialise the encoder from.")
flags.DEFINE_integer("pretrain_steps", 300,
                     "Without --init_checkpoint: masked-LM steps for a checkpoint written "
                     "to <output_dir>/pretrained first (0: fine-tune from scratch).")
flags.DEFINE_bool("do_train", True, "Whether to run training.")
flags.DEFINE_bool("do_eval", True, "Whether to run eval on the test split.")
flags.DEFINE_bool("do_predict", True, "Whether to run prediction on the test split.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("eval_batch_size", 32, "Total batch size for eval.")
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.")
flags.DEFINE_float("learning_rate", 2e-3, "The initial learning rate for Adam.")
flags.DEFINE_float("num_train_epochs", 10.0, "Total number of training epochs.")
flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of training for linear warmup.")
flags.DEFINE_integer("save_checkpoints_steps", 200, "How often to save a checkpoint.")
flags.DEFINE_integer("iterations_per_loop", 100, "Steps per estimator call.")
flags.DEFINE_bool("use_tpu", False, "Whether to use TPU or GPU/CPU.")
flags.DEFINE_string("tpu_name", None, "The Cloud TPU to use for training.")
flags.DEFINE_string("tpu_zone", None, "GCE zone of the Cloud TPU.")
flags.DEFINE_string("gcp_project", None, "GCP project of the Cloud TPU.")
flags.DEFINE_string("master", None, "[Optional] TensorFlow master URL.")
flags.DEFINE_integer("num_tpu_cores", 8, "Total number of TPU cores to use.")


def main(_):
    tf.logging.set_verbosity(tf.logging.INFO)
    if not FLAGS.do_train and not FLAGS.do_eval and not FLAGS.do_predict:
        raise ValueError("At least one of `do_train`, `do_eval` or `do_predict' must be True.")
    if FLAGS.output_dir is None:
        raise ValueError("--output_dir is required.")

    if FLAGS.bert_config_file:
        bert_config = modeling.BertConfig.from_json_file(FLAGS.bert_config_file)
    else:
        bert_config = pretrain.tiny_bert_config()
    tf.gfile.MakeDirs(FLAGS.output_dir)

    init_checkpoint = FLAGS.init_checkpoint
    if not init_checkpoint and FLAGS.pretrain_steps and FLAGS.do_train:
        init_checkpoint = pretrain.write_pretrained_checkpoint(
            os.path.join(FLAGS.output_dir, "pretrained"), bert_config,
            num_steps=FLAGS.pretrain_steps)

    tpu_cluster_resolver = None
    if FLAGS.use_tpu and FLAGS.tpu_name:
        tpu_cluster_resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
            FLAGS.tpu_name, zone=FLAGS.tpu_zone, project=FLAGS.gcp_project)

    is_per_host = tf_estimator.tpu.InputPipelineConfig.PER_HOST_V2
    run_config = tf_estimator.tpu.RunConfig(
        cluster=tpu_cluster_resolver,
        master=FLAGS.master,
        model_dir=FLAGS.output_dir,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        tf_random_seed=12345,
        tpu_config=tf_estimator.tpu.TPUConfig(
            iterations_per_loop=FLAGS.iterations_per_loop,
            num_shards=FLAGS.num_tpu_cores,
            per_host_input_for_training=is_per_host))

    train_examples = digits_text.get_examples("train")
    num_train_steps = int(len(train_examples) / FLAGS.train_batch_size
                          * FLAGS.num_train_epochs)
    num_warmup_steps = int(num_train_steps * FLAGS.warmup_proportion)

    model_fn = classifier_model.model_fn_builder(
        bert_config=bert_config,
        num_labels=digits_text.NUM_LABELS,
        init_checkpoint=init_checkpoint,
        learning_rate=FLAGS.learning_rate,
        num_train_steps=num_train_steps,
        num_warmup_steps=num_warmup_steps,
        use_tpu=FLAGS.use_tpu,
        use_one_hot_embeddings=FLAGS.use_tpu)

    # If TPU is not available, this falls back to normal Estimator on CPU or GPU.
    estimator = tf_estimator.tpu.TPUEstimator(
        use_tpu=FLAGS.use_tpu,
        model_fn=model_fn,
        config=run_config,
        train_batch_size=FLAGS.train_batch_size,
        eval_batch_size=FLAGS.eval_batch_size,
        predict_batch_size=FLAGS.predict_batch_size)

    if FLAGS.do_train:
        train_file = os.path.join(FLAGS.output_dir, "train.tf_record")
        digits_text.file_based_convert_examples_to_features(train_examples, train_file)
        tf.logging.info("***** Running training *****")
        tf.logging.info("  Num examples = %d", len(train_examples))
        tf.logging.info("  Batch size = %d", FLAGS.train_batch_size)
        tf.logging.info("  Num steps = %d", num_train_steps)
        train_input_fn = digits_text.file_based_input_fn_builder(
            input_file=train_file, seq_length=digits_text.MAX_SEQ_LENGTH,
            is_training=True, drop_remainder=True)
        estimator.train(input_fn=train_input_fn, max_steps=num_train_steps)

    test_examples = digits_text.get_examples("test")
    num_actual_examples = len(test_examples)
    if FLAGS.do_eval:
        eval_examples = test_examples
        if FLAGS.use_tpu:
            # TPU needs fixed-size batches: pad with fake examples that the metrics weight out.
            eval_examples = digits_text.pad_for_tpu(eval_examples, FLAGS.eval_batch_size)
        eval_file = os.path.join(FLAGS.output_dir, "eval.tf_record")
        digits_text.file_based_convert_examples_to_features(eval_examples, eval_file)
        tf.logging.info("***** Running evaluation *****")
        tf.logging.info("  Num examples = %d (%d actual, %d padding)", len(eval_examples),
                        num_actual_examples, len(eval_examples) - num_actual_examples)
        eval_steps = None
        if FLAGS.use_tpu:
            eval_steps = len(eval_examples) // FLAGS.eval_batch_size
        eval_input_fn = digits_text.file_based_input_fn_builder(
            input_file=eval_file, seq_length=digits_text.MAX_SEQ_LENGTH,
            is_training=False, drop_remainder=FLAGS.use_tpu)
        result = estimator.evaluate(input_fn=eval_input_fn, steps=eval_steps)
        print("Evaluation results: %s" % result)
        with tf.gfile.GFile(os.path.join(FLAGS.output_dir, "eval_results.txt"), "w") as writer:
            for key in sorted(result.keys()):
                writer.write("%s = %s\n" % (key, str(result[key])))

    if FLAGS.do_predict:
        predict_examples = test_examples
        if FLAGS.use_tpu:
            predict_examples = digits_text.pad_for_tpu(predict_examples,
                                                       FLAGS.predict_batch_size)
        predict_file = os.path.join(FLAGS.output_dir, "predict.tf_record")
        digits_text.file_based_convert_examples_to_features(predict_examples, predict_file)
        predict_input_fn = digits_text.file_based_input_fn_builder(
            input_file=predict_file, seq_length=digits_text.MAX_SEQ_LENGTH,
            is_training=False, drop_remainder=FLAGS.use_tpu, with_labels=False)
        labels = np.array([e.label for e in test_examples])
        predicted = []
        output_file = os.path.join(FLAGS.output_dir, "test_results.tsv")
        with tf.gfile.GFile(output_file, "w") as writer:
            for i, prediction in enumerate(estimator.predict(input_fn=predict_input_fn)):
                if i >= num_actual_examples:
                    break  # Padding examples.
                predicted.append(int(prediction["predictions"]))
                writer.write("\t".join("%.6f" % p for p in prediction["probabilities"]) + "\n")
        accuracy = np.mean(np.array(predicted) == labels)
        print("Predicted %d test examples, accuracy %.4f (written to %s)"
              % (len(predicted), accuracy, output_file))


if __name__ == "__main__":
    app.run(main)
