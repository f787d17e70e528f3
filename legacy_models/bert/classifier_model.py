# run_classifier-style model_fn for fine-tuning the tiny BERT with TPUEstimator.
"""`model_fn_builder(...)` returns the TPUEstimator model_fn that fine-tunes `BertModel`.

Like BERT's run_classifier, the builder closes over the configuration (not `params`):
`bert_config`, `num_labels`, `init_checkpoint`, `learning_rate`, `num_train_steps`,
`num_warmup_steps`, `use_tpu`, `use_one_hot_embeddings`. The model_fn

- takes dict features {input_ids, input_mask, segment_ids, is_real_example} and the
  `label_ids` labels (None in PREDICT);
- puts a dropout + `output_weights`/`output_bias` classifier on the pooled output;
- when `init_checkpoint` is set, maps checkpoint names onto the model's trainable variables
  (`modeling.get_assignment_map_from_checkpoint`) and calls `tf.train.init_from_checkpoint`:
  on TPU inside a `scaffold_fn` returning `tf.train.Scaffold()`, on CPU directly;
- trains with `optimization.create_optimizer` (AdamWeightDecay, warmup + linear decay,
  clipping, CrossShardOptimizer on TPU, explicit global-step increment);
- evaluates with `eval_metrics=(metric_fn, {...})`: accuracy and mean loss weighted by
  `is_real_example`, so TPU padding examples do not count;
- predicts {'probabilities', 'predictions'}.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import os
import sys

import tensorflow.compat.v1 as tf
from tensorflow.compat.v1 import estimator as tf_estimator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modeling  # noqa: E402
import optimization  # noqa: E402


def create_model(bert_config, is_training, input_ids, input_mask, segment_ids, labels,
                 num_labels, use_one_hot_embeddings):
    """Classifier over BERT's pooled output.

    Returns:
      (loss, per_example_loss, logits, probabilities); the losses are None without labels.
    """
    model = modeling.BertModel(
        config=bert_config,
        is_training=is_training,
        input_ids=input_ids,
        input_mask=input_mask,
        token_type_ids=segment_ids,
        use_one_hot_embeddings=use_one_hot_embeddings)
    output_layer = model.get_pooled_output()
    hidden_size = output_layer.shape[-1]

    output_weights = tf.get_variable(
        "output_weights", [num_labels, hidden_size],
        initializer=tf.truncated_normal_initializer(stddev=0.02))
    output_bias = tf.get_variable(
        "output_bias", [num_labels], initializer=tf.zeros_initializer())

    with tf.variable_scope("loss"):
        if is_training:
            output_layer = tf.nn.dropout(output_layer, rate=0.1)
        logits = tf.nn.bias_add(tf.matmul(output_layer, output_weights, transpose_b=True),
                                output_bias)
        probabilities = tf.nn.softmax(logits, axis=-1)
        if labels is None:
            return None, None, logits, probabilities
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        one_hot_labels = tf.one_hot(labels, depth=num_labels, dtype=tf.float32)
        per_example_loss = -tf.reduce_sum(one_hot_labels * log_probs, axis=-1)
        loss = tf.reduce_mean(per_example_loss)
        return loss, per_example_loss, logits, probabilities


def metric_fn(per_example_loss, label_ids, logits, is_real_example):
    """Accuracy and loss over real examples only (padding has is_real_example = 0)."""
    predictions = tf.argmax(logits, axis=-1, output_type=tf.int32)
    accuracy = tf.metrics.accuracy(labels=label_ids, predictions=predictions,
                                   weights=is_real_example)
    loss = tf.metrics.mean(values=per_example_loss, weights=is_real_example)
    return {"eval_accuracy": accuracy, "eval_loss": loss}


def model_fn_builder(bert_config, num_labels, init_checkpoint, learning_rate,
                     num_train_steps, num_warmup_steps, use_tpu, use_one_hot_embeddings):
    """Returns `model_fn` closure for TPUEstimator."""

    def model_fn(features, labels, mode, params):
        """The `model_fn` for TPUEstimator."""
        del params  # Everything comes from the closure, as in run_classifier.
        tf.logging.info("*** Features ***")
        for name in sorted(features.keys()):
            tf.logging.info("  name = %s, shape = %s" % (name, features[name].shape))

        input_ids = features["input_ids"]
        input_mask = features["input_mask"]
        segment_ids = features["segment_ids"]
        if "is_real_example" in features:
            is_real_example = tf.cast(features["is_real_example"], dtype=tf.float32)
        else:
            is_real_example = tf.ones(tf.shape(input_ids)[:1], dtype=tf.float32)

        is_training = mode == tf_estimator.ModeKeys.TRAIN
        total_loss, per_example_loss, logits, probabilities = create_model(
            bert_config, is_training, input_ids, input_mask, segment_ids, labels,
            num_labels, use_one_hot_embeddings)

        tvars = tf.trainable_variables()
        initialized_variable_names = set()
        scaffold_fn = None
        if init_checkpoint:
            assignment_map, initialized_variable_names = (
                modeling.get_assignment_map_from_checkpoint(tvars, init_checkpoint))
            if use_tpu:
                def tpu_scaffold():
                    tf.train.init_from_checkpoint(init_checkpoint, assignment_map)
                    return tf.train.Scaffold()

                scaffold_fn = tpu_scaffold
            else:
                tf.train.init_from_checkpoint(init_checkpoint, assignment_map)

        tf.logging.info("**** Trainable Variables ****")
        for var in tvars:
            init_string = ", *INIT_FROM_CKPT*" if var.name in initialized_variable_names else ""
            tf.logging.info("  name = %s, shape = %s%s", var.name, var.shape, init_string)

        if mode == tf_estimator.ModeKeys.TRAIN:
            train_op = optimization.create_optimizer(
                total_loss, learning_rate, num_train_steps, num_warmup_steps, use_tpu)
            return tf_estimator.tpu.TPUEstimatorSpec(
                mode=mode, loss=total_loss, train_op=train_op, scaffold_fn=scaffold_fn)

        if mode == tf_estimator.ModeKeys.EVAL:
            eval_metrics = (metric_fn, {
                "per_example_loss": per_example_loss,
                "label_ids": labels,
                "logits": logits,
                "is_real_example": is_real_example,
            })
            return tf_estimator.tpu.TPUEstimatorSpec(
                mode=mode, loss=total_loss, eval_metrics=eval_metrics,
                scaffold_fn=scaffold_fn)

        predictions = {
            "probabilities": probabilities,
            "predictions": tf.argmax(probabilities, axis=-1, output_type=tf.int32),
        }
        return tf_estimator.tpu.TPUEstimatorSpec(
            mode=mode, predictions=predictions, scaffold_fn=scaffold_fn)

    return model_fn
