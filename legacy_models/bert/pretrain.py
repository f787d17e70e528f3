# Writes the "pretrained" checkpoint the classifier fine-tunes from.
"""A separate masked-LM run that shares the classifier's `bert/...` variable names.

  python legacy_models/bert/pretrain.py --output_dir=/tmp/bert_pretrained

trains the tiny encoder for a few hundred steps to predict [MASK]ed words of the digits
sentence pairs (train split, labels unused) and saves `model.ckpt-N` with a plain TF1
`tf.train.Saver` in a `tf.Graph` + `tf.Session` loop: no Estimator, no compat layer, so the
same checkpoint format comes out of TF 1.x, TF 2.15 and TF 2.21. Besides the shared
`bert/...` variables it holds a masked-LM head (`cls/predictions/...`), the global step and
the optimizer moments (`.../adam_m`, `.../adam_v`): `get_assignment_map_from_checkpoint` must
pick only the encoder variables the classifier has. On TF 2.16+, set TF_USE_LEGACY_KERAS=1
(tf.layers needs Keras 2) or run it through `python -m tpu_estimator_compat.run`.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import os
import sys

import numpy as np
import tensorflow.compat.v1 as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import digits_text  # noqa: E402
import modeling  # noqa: E402
import optimization  # noqa: E402


def tiny_bert_config():
    """The encoder shared by pretraining and fine-tuning: 2 layers, width 64, 4 heads.

    Encoder dropout is off: with 1,500 short examples it only slows learning (0.1 costs
    about 4 points of test accuracy at 10 epochs). The classifier head keeps BERT's 0.1.
    """
    return modeling.BertConfig(
        vocab_size=digits_text.VOCAB_SIZE,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        max_position_embeddings=digits_text.MAX_SEQ_LENGTH)


def masked_lm_loss(bert_config, model, masked_lm_labels):
    """Predicts the original word at masked positions through the tied embedding table."""
    with tf.variable_scope("cls/predictions"):
        with tf.variable_scope("transform"):
            hidden = tf.layers.dense(
                model.get_sequence_output(), bert_config.hidden_size,
                activation=modeling.gelu,
                kernel_initializer=modeling.create_initializer(bert_config.initializer_range))
            hidden = modeling.layer_norm(hidden)
        output_bias = tf.get_variable("output_bias", [bert_config.vocab_size],
                                      initializer=tf.zeros_initializer())
        logits = tf.matmul(hidden, model.get_embedding_table(), transpose_b=True) + output_bias
        weights = tf.cast(masked_lm_labels >= 0, tf.float32)
        one_hot = tf.one_hot(tf.maximum(masked_lm_labels, 0), bert_config.vocab_size)
        per_token = -tf.reduce_sum(one_hot * tf.nn.log_softmax(logits), axis=-1)
        loss = tf.reduce_sum(per_token * weights) / (tf.reduce_sum(weights) + 1e-5)
        hits = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), masked_lm_labels),
                       tf.float32)
        accuracy = tf.reduce_sum(hits * weights) / (tf.reduce_sum(weights) + 1e-5)
    return loss, accuracy


def write_pretrained_checkpoint(output_dir, bert_config=None, num_steps=300, batch_size=64,
                                learning_rate=1e-3, seed=0):
    """Runs masked-LM pretraining and saves it; returns the checkpoint path.

    Args:
      output_dir: Directory for `model.ckpt-<num_steps>` and `bert_config.json`.
      bert_config: The encoder config (default `tiny_bert_config()`).
      num_steps, batch_size, learning_rate: Pretraining schedule (10% warmup, then decay).
      seed: Graph and masking seed; the checkpoint is a deterministic function of it.
    """
    bert_config = bert_config or tiny_bert_config()
    tf.gfile.MakeDirs(output_dir)
    with tf.gfile.GFile(os.path.join(output_dir, "bert_config.json"), "w") as f:
        f.write(bert_config.to_json_string())

    data = digits_text.mlm_arrays(digits_text.get_examples("train"), seed=seed)
    num_examples = len(data["input_ids"])
    with tf.Graph().as_default():
        tf.set_random_seed(seed)
        placeholders = {name: tf.placeholder(tf.int32, [None, digits_text.MAX_SEQ_LENGTH],
                                             name=name)
                        for name in data}
        model = modeling.BertModel(
            config=bert_config, is_training=True,
            input_ids=placeholders["input_ids"], input_mask=placeholders["input_mask"],
            token_type_ids=placeholders["segment_ids"])
        loss, accuracy = masked_lm_loss(bert_config, model, placeholders["masked_lm_labels"])
        train_op = optimization.create_optimizer(
            loss, learning_rate, num_steps, num_steps // 10, use_tpu=False)
        saver = tf.train.Saver()
        rng = np.random.RandomState(seed)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for step in range(num_steps):
                batch = rng.randint(0, num_examples, batch_size)
                feed = {placeholders[name]: values[batch] for name, values in data.items()}
                loss_value, accuracy_value, _ = sess.run([loss, accuracy, train_op], feed)
                if step % 100 == 0 or step == num_steps - 1:
                    tf.logging.info("pretrain step %d: masked-LM loss %.3f, accuracy %.3f",
                                    step, loss_value, accuracy_value)
            return saver.save(sess, os.path.join(output_dir, "model.ckpt"),
                              global_step=num_steps)


def main(argv):
    del argv
    from absl import flags

    path = write_pretrained_checkpoint(flags.FLAGS.output_dir,
                                       num_steps=flags.FLAGS.pretrain_steps)
    print("Wrote pretrained checkpoint %s" % path)


if __name__ == "__main__":
    from absl import app
    from absl import flags

    flags.DEFINE_string("output_dir", None, "Where to write the checkpoint.")
    flags.DEFINE_integer("pretrain_steps", 300, "Masked-LM training steps.")
    flags.mark_flag_as_required("output_dir")
    tf.logging.set_verbosity(tf.logging.INFO)
    app.run(main)
