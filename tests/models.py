"""Tiny r1-style model_fns and input_fns shared by the tests, written as TF1 users wrote them.

Nothing here imports tpu_estimator_compat except the spec type, exactly like a ported script.
"""

import numpy as np
import tensorflow as tf

from tpu_estimator_compat import TPUEstimatorSpec

import zoo_models  # tests/, beside this file: the one cached digits loader.

v1 = tf.compat.v1


def digits(n=None, flat=False):
    """Real handwritten digits (sklearn), float32 in [0, 1], int32 labels."""
    x, y = zoo_models.all_digits()
    if n is not None:
        x, y = x[:n], y[:n]
    return (x.reshape(len(x), -1) if flat else x[..., None]), y


def digits_input_fn(n=512, repeat=True, flat=False, shuffle=False):
    def input_fn(params):
        x, y = digits(n, flat=flat)
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        if shuffle:
            ds = ds.shuffle(n, seed=1)
        if repeat:
            ds = ds.repeat()
        return ds.batch(params["batch_size"], drop_remainder=True)
    return input_fn


def linear_model_fn(features, labels, mode, params):
    """One dense layer by hand with get_variable; plain or CrossShard SGD."""
    w = v1.get_variable("w", [64, 10], initializer=v1.zeros_initializer())
    b = v1.get_variable("b", [10], initializer=v1.zeros_initializer())
    logits = tf.matmul(features, w) + b
    loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    opt = v1.train.GradientDescentOptimizer(params.get("learning_rate", 0.5))
    if params.get("cross_shard"):
        opt = v1.tpu.CrossShardOptimizer(opt)
    train_op = opt.minimize(loss, global_step=v1.train.get_global_step())
    return TPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)


def cnn_model_fn(features, labels, mode, params):
    """mnist_tpu-style CNN on 8x8 digits: v1 layers, exponential_decay, CrossShardOptimizer."""
    x = v1.layers.conv2d(features, 8, 3, padding="same", activation=tf.nn.relu)
    x = v1.layers.max_pooling2d(x, 2, 2)
    x = v1.layers.conv2d(x, 16, 3, padding="same", activation=tf.nn.relu)
    x = v1.layers.flatten(x)
    x = v1.layers.dense(x, 32, activation=tf.nn.relu)
    x = v1.layers.dropout(x, 0.0, training=mode == "train")
    logits = v1.layers.dense(x, 10)
    loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    step = v1.train.get_global_step()
    lr = v1.train.exponential_decay(params.get("learning_rate", 0.1), step, 100, 0.96)
    opt = v1.train.GradientDescentOptimizer(lr)
    if params["use_tpu"]:
        opt = v1.tpu.CrossShardOptimizer(opt)
    return TPUEstimatorSpec(mode=mode, loss=loss, train_op=opt.minimize(loss, global_step=step))


OPTIMIZERS = {
    "sgd": lambda lr: v1.train.GradientDescentOptimizer(lr),
    "momentum": lambda lr: v1.train.MomentumOptimizer(lr, 0.9),
    "adam": lambda lr: v1.train.AdamOptimizer(lr),
    "adagrad": lambda lr: v1.train.AdagradOptimizer(lr),
    "rmsprop": lambda lr: v1.train.RMSPropOptimizer(lr),
}


def kitchen_sink_model_fn(features, labels, mode, params):
    """Every variable-creating idiom at once: keras layer, tf.Variable, BN, regularizer."""
    x = tf.keras.layers.Dense(16, activation="relu")(features)
    scale = tf.Variable(tf.ones([16]), name="scale")
    x = x * scale
    x = v1.layers.batch_normalization(x, training=mode == "train")
    logits = v1.layers.dense(x, 10, kernel_regularizer=lambda w: 1e-4 * tf.nn.l2_loss(w))
    v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    loss = v1.losses.get_total_loss()
    opt = OPTIMIZERS[params.get("optimizer", "momentum")](params.get("learning_rate", 0.05))
    if params.get("cross_shard"):
        opt = v1.tpu.CrossShardOptimizer(opt)
    update_ops = v1.get_collection(v1.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(update_ops):
        train_op = opt.minimize(loss, global_step=v1.train.get_or_create_global_step(),
                                var_list=v1.trainable_variables())
    return TPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)


def metric_fn(labels, logits):
    """The mnist_tpu metric_fn."""
    return {"accuracy": v1.metrics.accuracy(labels=labels,
                                            predictions=tf.argmax(logits, axis=1))}


def linear_full_model_fn(features, labels, mode, params):
    """linear_model_fn with EVAL (eval_metrics) and PREDICT (class_ids, probabilities, logits)."""
    w = v1.get_variable("w", [64, 10], initializer=v1.zeros_initializer())
    b = v1.get_variable("b", [10], initializer=v1.zeros_initializer())
    logits = tf.matmul(features, w) + b
    if mode == "infer":
        return TPUEstimatorSpec(mode, predictions={
            "class_ids": tf.argmax(logits, axis=1),
            "probabilities": tf.nn.softmax(logits),
            "logits": logits})
    loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == "eval":
        return TPUEstimatorSpec(mode, loss=loss, eval_metrics=(metric_fn, [labels, logits]))
    opt = v1.tpu.CrossShardOptimizer(v1.train.GradientDescentOptimizer(0.5))
    return TPUEstimatorSpec(mode, loss=loss,
                            train_op=opt.minimize(loss, global_step=v1.train.get_global_step()))
