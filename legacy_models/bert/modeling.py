# A tiny BERT encoder in TF1 style: get_variable embeddings, hand-written LayerNorm.
"""The BERT-style encoder shared by the classifier and the "pretraining" run.

`BertModel(config, is_training, input_ids, input_mask, token_type_ids)` builds, under the
variable scope `bert/`:

  embeddings/{word_embeddings, token_type_embeddings, position_embeddings}
  embeddings/LayerNorm/{gamma, beta}
  encoder/layer_N/attention/self/{query, key, value}/{kernel, bias}
  encoder/layer_N/attention/output/dense/{kernel, bias}, .../attention/output/LayerNorm/*
  encoder/layer_N/intermediate/dense/*, encoder/layer_N/output/dense/*, .../output/LayerNorm/*
  pooler/dense/{kernel, bias}

The names follow the original BERT checkpoints on purpose: `init_from_checkpoint` with an
assignment map built from checkpoint names (`get_assignment_map_from_checkpoint`) is how
fine-tuning scripts loaded them, and a compat layer has to keep those names intact.

Everything is TF1 graph code: `tf.get_variable` tables, `tf.layers.dense` projections,
`tf.nn.dropout` active only when `is_training`, and a LayerNorm written with get_variable
`gamma`/`beta` (BERT used tf.contrib.layers.layer_norm, which created the same names).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import copy
import json
import math
import re

import tensorflow.compat.v1 as tf


class BertConfig(object):
    """Hyperparameters of the encoder; defaults are a tiny 2-layer model."""

    def __init__(self,
                 vocab_size,
                 hidden_size=32,
                 num_hidden_layers=2,
                 num_attention_heads=2,
                 intermediate_size=64,
                 hidden_act="gelu",
                 hidden_dropout_prob=0.1,
                 attention_probs_dropout_prob=0.1,
                 max_position_embeddings=32,
                 type_vocab_size=2,
                 initializer_range=0.02):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range

    @classmethod
    def from_dict(cls, json_object):
        config = cls(vocab_size=None)
        for key, value in json_object.items():
            config.__dict__[key] = value
        return config

    @classmethod
    def from_json_file(cls, json_file):
        with tf.gfile.GFile(json_file, "r") as reader:
            return cls.from_dict(json.loads(reader.read()))

    def to_dict(self):
        return copy.deepcopy(self.__dict__)

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"


def gelu(x):
    """GELU, tanh approximation (as the original BERT computed it)."""
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * tf.pow(x, 3))
    return 0.5 * x * (1.0 + tf.tanh(inner))


def get_activation(name):
    activations = {"gelu": gelu, "relu": tf.nn.relu, "tanh": tf.tanh, "linear": None}
    if name not in activations:
        raise ValueError("Unsupported activation: %s" % name)
    return activations[name]


def create_initializer(initializer_range=0.02):
    return tf.truncated_normal_initializer(stddev=initializer_range)


def dropout(input_tensor, dropout_prob):
    """Dropout that is a no-op for probability 0 (the eval/predict graph)."""
    if not dropout_prob:
        return input_tensor
    return tf.nn.dropout(input_tensor, rate=dropout_prob)


def layer_norm(input_tensor, name="LayerNorm", epsilon=1e-12):
    """Normalizes the last axis; variables `<scope>/LayerNorm/gamma` and `.../beta`."""
    with tf.variable_scope(name):
        depth = input_tensor.shape[-1]
        gamma = tf.get_variable("gamma", [depth], initializer=tf.ones_initializer())
        beta = tf.get_variable("beta", [depth], initializer=tf.zeros_initializer())
        mean, variance = tf.nn.moments(input_tensor, axes=[-1], keep_dims=True)
        normalized = (input_tensor - mean) * tf.rsqrt(variance + epsilon)
        return normalized * gamma + beta


def layer_norm_and_dropout(input_tensor, dropout_prob, name="LayerNorm"):
    return dropout(layer_norm(input_tensor, name=name), dropout_prob)


def embed(input_ids, config, use_one_hot_embeddings):
    """Word + token-type + position embeddings; returns (output [B, S, H], word table)."""
    seq_length = input_ids.shape[1]
    word_table = tf.get_variable(
        "word_embeddings", [config.vocab_size, config.hidden_size],
        initializer=create_initializer(config.initializer_range))
    if use_one_hot_embeddings:
        # TPUs prefer a matmul against one-hot rows to a gather.
        one_hot = tf.one_hot(tf.reshape(input_ids, [-1]), depth=config.vocab_size)
        words = tf.matmul(one_hot, word_table)
    else:
        words = tf.gather(word_table, tf.reshape(input_ids, [-1]))
    return tf.reshape(words, [-1, seq_length, config.hidden_size]), word_table


def add_type_and_position(word_output, token_type_ids, config):
    seq_length = word_output.shape[1]
    width = config.hidden_size
    type_table = tf.get_variable(
        "token_type_embeddings", [config.type_vocab_size, width],
        initializer=create_initializer(config.initializer_range))
    types = tf.matmul(tf.one_hot(tf.reshape(token_type_ids, [-1]), config.type_vocab_size),
                      type_table)
    output = word_output + tf.reshape(types, [-1, seq_length, width])
    position_table = tf.get_variable(
        "position_embeddings", [config.max_position_embeddings, width],
        initializer=create_initializer(config.initializer_range))
    positions = tf.slice(position_table, [0, 0], [seq_length, -1])
    return output + positions[None]


def attention_bias(input_mask):
    """[B, S] 1/0 mask -> [B, 1, 1, S] additive bias: 0 to attend, -10000 to ignore."""
    mask = tf.cast(input_mask, tf.float32)
    return (1.0 - mask)[:, None, None, :] * -10000.0


def self_attention(x, bias, config, is_training):
    """Multi-head self-attention over x [B, S, H]; returns [B, S, H] before the output dense."""
    heads = config.num_attention_heads
    width = config.hidden_size
    head_size = width // heads
    seq_length = x.shape[1]

    def project(name):
        y = tf.layers.dense(x, width, name=name,
                            kernel_initializer=create_initializer(config.initializer_range))
        return tf.transpose(tf.reshape(y, [-1, seq_length, heads, head_size]), [0, 2, 1, 3])

    query, key, value = project("query"), project("key"), project("value")
    scores = tf.matmul(query, key, transpose_b=True) / math.sqrt(float(head_size)) + bias
    probs = tf.nn.softmax(scores)
    if is_training:
        probs = dropout(probs, config.attention_probs_dropout_prob)
    context = tf.transpose(tf.matmul(probs, value), [0, 2, 1, 3])
    return tf.reshape(context, [-1, seq_length, width])


def transformer_layer(x, bias, config, is_training):
    """Post-LN transformer block: attention, add & norm, GELU feed-forward, add & norm."""
    hidden_dropout = config.hidden_dropout_prob if is_training else 0.0
    init = create_initializer(config.initializer_range)
    with tf.variable_scope("attention"):
        with tf.variable_scope("self"):
            context = self_attention(x, bias, config, is_training)
        with tf.variable_scope("output"):
            attended = tf.layers.dense(context, config.hidden_size, kernel_initializer=init)
            attended = layer_norm(dropout(attended, hidden_dropout) + x)
    with tf.variable_scope("intermediate"):
        inner = tf.layers.dense(attended, config.intermediate_size,
                                activation=get_activation(config.hidden_act),
                                kernel_initializer=init)
    with tf.variable_scope("output"):
        out = tf.layers.dense(inner, config.hidden_size, kernel_initializer=init)
        return layer_norm(dropout(out, hidden_dropout) + attended)


class BertModel(object):
    """The encoder: embeddings, `num_hidden_layers` transformer layers and a tanh pooler.

    Args:
      config: BertConfig.
      is_training: False disables dropout (eval and predict).
      input_ids: int32 [batch, seq_length] token ids.
      input_mask: int32 [batch, seq_length], 1 for real tokens, 0 for padding.
      token_type_ids: int32 [batch, seq_length] segment ids.
      use_one_hot_embeddings: Look words up by one-hot matmul (TPU) instead of gather.
      scope: Variable scope, default 'bert'.
    """

    def __init__(self, config, is_training, input_ids, input_mask=None, token_type_ids=None,
                 use_one_hot_embeddings=False, scope=None):
        config = copy.deepcopy(config)
        if not is_training:
            config.hidden_dropout_prob = 0.0
            config.attention_probs_dropout_prob = 0.0
        if input_mask is None:
            input_mask = tf.ones_like(input_ids)
        if token_type_ids is None:
            token_type_ids = tf.zeros_like(input_ids)

        with tf.variable_scope(scope, default_name="bert"):
            with tf.variable_scope("embeddings"):
                words, self.embedding_table = embed(input_ids, config, use_one_hot_embeddings)
                self.embedding_output = layer_norm_and_dropout(
                    add_type_and_position(words, token_type_ids, config),
                    config.hidden_dropout_prob)
            with tf.variable_scope("encoder"):
                bias = attention_bias(input_mask)
                x = self.embedding_output
                self.all_encoder_layers = []
                for index in range(config.num_hidden_layers):
                    with tf.variable_scope("layer_%d" % index):
                        x = transformer_layer(x, bias, config, is_training)
                        self.all_encoder_layers.append(x)
                self.sequence_output = x
            with tf.variable_scope("pooler"):
                first_token = self.sequence_output[:, 0, :]
                self.pooled_output = tf.layers.dense(
                    first_token, config.hidden_size, activation=tf.tanh,
                    kernel_initializer=create_initializer(config.initializer_range))

    def get_pooled_output(self):
        return self.pooled_output

    def get_sequence_output(self):
        return self.sequence_output

    def get_embedding_output(self):
        return self.embedding_output

    def get_embedding_table(self):
        return self.embedding_table


def get_assignment_map_from_checkpoint(tvars, init_checkpoint):
    """Maps checkpoint names to the same-named variables among `tvars`.

    Returns:
      (assignment_map, initialized_variable_names): an OrderedDict {ckpt name: var name}
      for `tf.train.init_from_checkpoint`, and the set of initialised names (with and
      without the ':0' suffix) for logging which variables came from the checkpoint.
    """
    variables_by_name = collections.OrderedDict()
    for var in tvars:
        name = re.sub(r":\d+$", "", var.name)
        variables_by_name[name] = var

    assignment_map = collections.OrderedDict()
    initialized_variable_names = set()
    for name, _ in tf.train.list_variables(init_checkpoint):
        if name in variables_by_name:
            assignment_map[name] = name
            initialized_variable_names.update([name, name + ":0"])
    return assignment_map, initialized_variable_names
