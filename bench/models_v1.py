"""The r1 workloads, one source for the shim and for legacy TPUEstimator on TF 2.15.

Pure `tf.compat.v1` (v1 layers, v1 losses/metrics/optimizers, `get_global_step`), written the
way TF1 users wrote TPUEstimator code, so the very same model_fn and input_fns run on both
stacks and the comparison is about the runtime, not the model. The spec class is injected
(`make_model_fn(name, spec_cls)`) because the shim and legacy each have their own
`TPUEstimatorSpec`. Nothing here imports tpu_estimator_compat.

Workloads (see `workloads.py`): `cnn` is mnist_tpu's create_model/model_fn (compute-bound); `mlp`
a 64-32-10 perceptron on the 8x8 digits (overhead-bound); `mlp64` the same at batch 64 with
weight decay and Momentum (issue 20's); `resnet` a small ResNet-v1 with
batch norm, weight decay and Momentum. legacy_models/resnet/ did not exist when this was
written, so `resnet` is our own small r1 model_fn.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import tensorflow.compat.v1 as tf

from bench.workloads import WORKLOADS


WEIGHT_DECAY = 1e-4  # resnet, mlp64: WEIGHT_DECAY * tf.nn.l2_loss(kernel), every kernel.
MOMENTUM = 0.9  # resnet, mlp64.
DECAY_STEPS, DECAY_RATE = 100000, 0.96  # exponential_decay of cnn, mlp, mlp64.
DROPOUT = 0.4  # cnn only, as mnist_tpu.


def load_split(path: str, feature_key: str, split: str) -> tuple[np.ndarray, np.ndarray]:
    """(features, labels) of 'train' (first 1,500 digits) or 'test' (the other 297)."""
    with np.load(path) as data:
        return data[f"{feature_key}_{split}"], data[f"y_{split}"]


# -- models: plain functions of (inputs, training), as create_model in mnist_tpu ----------

def cnn(inputs: Any, training: bool) -> Any:
    """mnist_tpu.create_model, unchanged."""
    x = tf.reshape(inputs, [-1, 28, 28, 1])
    x = tf.layers.conv2d(x, 32, 5, padding="same", activation=tf.nn.relu)
    x = tf.layers.max_pooling2d(x, 2, 2, padding="same")
    x = tf.layers.conv2d(x, 64, 5, padding="same", activation=tf.nn.relu)
    x = tf.layers.max_pooling2d(x, 2, 2, padding="same")
    x = tf.layers.flatten(x)
    x = tf.layers.dense(x, 1024, activation=tf.nn.relu)
    x = tf.layers.dropout(x, DROPOUT, training=training)
    return tf.layers.dense(x, 10)


def mlp(inputs: Any, training: bool) -> Any:
    del training
    x = tf.layers.dense(inputs, 32, activation=tf.nn.relu)
    return tf.layers.dense(x, 10)


def mlp64(inputs: Any, training: bool) -> Any:
    """`mlp` with weight decay on both kernels (issue 20's overhead-bound MLP)."""
    del training
    x = tf.layers.dense(inputs, 32, activation=tf.nn.relu, kernel_regularizer=_weight_decay)
    return tf.layers.dense(x, 10, kernel_regularizer=_weight_decay)


def _weight_decay(kernel: Any) -> Any:
    return WEIGHT_DECAY * tf.nn.l2_loss(kernel)


def _conv_bn(x: Any, filters: int, kernel: int, strides: int, training: bool,
             relu: bool = True) -> Any:
    x = tf.layers.conv2d(x, filters, kernel, strides=strides, padding="same", use_bias=False,
                         kernel_regularizer=_weight_decay)
    x = tf.layers.batch_normalization(x, training=training)
    return tf.nn.relu(x) if relu else x


def _block(x: Any, filters: int, strides: int, training: bool) -> Any:
    """ResNet v1 basic block: conv-bn-relu, conv-bn, projection shortcut when shapes change."""
    shortcut = x
    if strides != 1 or x.shape[-1] != filters:
        shortcut = _conv_bn(x, filters, 1, strides, training, relu=False)
    y = _conv_bn(x, filters, 3, strides, training)
    y = _conv_bn(y, filters, 3, 1, training, relu=False)
    return tf.nn.relu(y + shortcut)


def resnet(inputs: Any, training: bool) -> Any:
    """28x28 -> stem (16, stride 2) -> blocks 16, 32/2, 64/2 -> global pool -> dense 10."""
    x = tf.reshape(inputs, [-1, 28, 28, 1])
    x = _conv_bn(x, 16, 3, 2, training)
    for filters, strides in ((16, 1), (32, 2), (64, 2)):
        x = _block(x, filters, strides, training)
    x = tf.reduce_mean(x, axis=[1, 2])
    return tf.layers.dense(x, 10, kernel_regularizer=_weight_decay)


MODELS: dict[str, Callable[[Any, bool], Any]] = {"cnn": cnn, "mlp": mlp, "resnet": resnet,
                                                 "mlp64": mlp64}


def metric_fn(labels: Any, logits: Any) -> dict[str, Any]:
    """mnist_tpu's metric_fn: runs on the host for the shim, in-graph for legacy on CPU."""
    return {"accuracy": tf.metrics.accuracy(labels=labels, predictions=tf.argmax(logits, 1))}


def _optimizer(workload: Workload, use_tpu: bool) -> Any:
    if workload.name == "resnet":
        opt = tf.train.MomentumOptimizer(workload.learning_rate, MOMENTUM)
    else:
        lr = tf.train.exponential_decay(workload.learning_rate, tf.train.get_global_step(),
                                        decay_steps=DECAY_STEPS, decay_rate=DECAY_RATE)
        opt = (tf.train.MomentumOptimizer(lr, MOMENTUM) if workload.name == "mlp64"
               else tf.train.GradientDescentOptimizer(lr))
    return tf.tpu.CrossShardOptimizer(opt) if use_tpu else opt


def make_model_fn(name: str, spec_cls: Any) -> Callable[..., Any]:
    """The TPUEstimator model_fn of workload `name`, returning `spec_cls` specs."""
    workload = WORKLOADS[name]
    create_model = MODELS[name]

    def model_fn(features: Any, labels: Any, mode: str, params: dict[str, Any]) -> Any:
        if mode == "infer":
            logits = create_model(features, training=False)
            return spec_cls(mode, predictions={"class_ids": tf.argmax(logits, axis=1),
                                               "probabilities": tf.nn.softmax(logits)})
        training = mode == "train"
        logits = create_model(features, training=training)
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        # r1 idiom: layers put their weight decay in REGULARIZATION_LOSSES (resnet only).
        loss += tf.losses.get_regularization_loss()
        if mode == "eval":
            return spec_cls(mode, loss=loss, eval_metrics=(metric_fn, [labels, logits]))
        optimizer = _optimizer(workload, params["use_tpu"])
        with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
            train_op = optimizer.minimize(loss, tf.train.get_global_step())
        return spec_cls(mode, loss=loss, train_op=train_op)

    return model_fn


def _dataset(params: dict[str, Any], split: str, labels: bool, shuffle: bool) -> Any:
    workload = WORKLOADS[params["workload"]]
    x, y = load_split(params["data"], workload.feature_key, split)
    ds = tf.data.Dataset.from_tensor_slices((x, y) if labels else x).cache().repeat()
    if shuffle:
        ds = ds.shuffle(buffer_size=1500, seed=1)
    return ds.batch(params["batch_size"], drop_remainder=True).prefetch(2)


def train_input_fn(params: dict[str, Any]) -> Any:
    """mnist_tpu's train pipeline: cache, repeat, shuffle(1500), batch, prefetch(2)."""
    return _dataset(params, "train", labels=True, shuffle=True)


def eval_input_fn(params: dict[str, Any]) -> Any:
    """The 297 test digits, repeated so any number of full eval batches can be timed."""
    return _dataset(params, "test", labels=True, shuffle=False)


def predict_input_fn(params: dict[str, Any]) -> Any:
    """The test digits' features, repeated: any number of batches can be read."""
    return _dataset(params, "test", labels=False, shuffle=False)


def finite_predict_input_fn(batches: int) -> Callable[[dict[str, Any]], Any]:
    """predict_input_fn ending after `batches` batches, as a user's test set ends."""
    def input_fn(params: dict[str, Any]) -> Any:
        return predict_input_fn(params).take(batches)
    return input_fn
