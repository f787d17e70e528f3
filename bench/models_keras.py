"""The same three workloads as idiomatic tf_keras models, for the TF2 and `fit` contenders.

Layer for layer what `models_v1` builds (same shapes, initialisers, dropout, batch-norm
momentum/epsilon, weight decay as `WEIGHT_DECAY * l2_loss(kernel)`), with the same optimiser
and schedule, so a TF2 training step does the same arithmetic as the r1 model_fn's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
import tf_keras as keras

from bench import models_v1

layers = keras.layers


def _weight_decay(kernel: tf.Tensor) -> tf.Tensor:
    return models_v1.WEIGHT_DECAY * tf.nn.l2_loss(kernel)


def _cnn() -> keras.Model:
    return keras.Sequential([
        layers.Reshape((28, 28, 1), input_shape=(28, 28)),
        layers.Conv2D(32, 5, padding="same", activation="relu"),
        layers.MaxPooling2D(2, 2, padding="same"),
        layers.Conv2D(64, 5, padding="same", activation="relu"),
        layers.MaxPooling2D(2, 2, padding="same"),
        layers.Flatten(),
        layers.Dense(1024, activation="relu"),
        layers.Dropout(models_v1.DROPOUT),
        layers.Dense(10),
    ])


def _mlp() -> keras.Model:
    return keras.Sequential([layers.Dense(32, activation="relu", input_shape=(64,)),
                             layers.Dense(10)])


def _mlp64() -> keras.Model:
    return keras.Sequential([
        layers.Dense(32, activation="relu", input_shape=(64,), kernel_regularizer=_weight_decay),
        layers.Dense(10, kernel_regularizer=_weight_decay)])


def _conv_bn(x: Any, filters: int, kernel: int, strides: int, relu: bool = True) -> Any:
    x = layers.Conv2D(filters, kernel, strides=strides, padding="same", use_bias=False,
                      kernel_regularizer=_weight_decay)(x)
    x = layers.BatchNormalization(momentum=0.99, epsilon=1e-3)(x)
    return layers.ReLU()(x) if relu else x


def _resnet() -> keras.Model:
    inputs = keras.Input((28, 28))
    x = _conv_bn(layers.Reshape((28, 28, 1))(inputs), 16, 3, 2)
    for filters, strides in ((16, 1), (32, 2), (64, 2)):
        shortcut = x
        if strides != 1 or x.shape[-1] != filters:
            shortcut = _conv_bn(x, filters, 1, strides, relu=False)
        y = _conv_bn(x, filters, 3, strides)
        y = _conv_bn(y, filters, 3, 1, relu=False)
        x = layers.ReLU()(layers.Add()([y, shortcut]))
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(10, kernel_regularizer=_weight_decay)(x))


def build(name: str) -> keras.Model:
    return {"cnn": _cnn, "mlp": _mlp, "resnet": _resnet, "mlp64": _mlp64}[name]()


def optimizer(name: str) -> keras.optimizers.Optimizer:
    """models_v1's optimiser: Momentum for resnet, SGD (mlp64: Momentum) on
    exponential_decay otherwise."""
    workload = models_v1.WORKLOADS[name]
    if name == "resnet":
        return keras.optimizers.SGD(workload.learning_rate, momentum=models_v1.MOMENTUM)
    schedule = keras.optimizers.schedules.ExponentialDecay(
        workload.learning_rate, decay_steps=models_v1.DECAY_STEPS,
        decay_rate=models_v1.DECAY_RATE)
    return keras.optimizers.SGD(schedule, momentum=models_v1.MOMENTUM if name == "mlp64" else 0.0)


def dataset(data: str, name: str, split: str, batch_size: int, *, labels: bool = True,
            shuffle: bool = False) -> tf.data.Dataset:
    """models_v1's input pipeline (cache, repeat, shuffle(1500, seed 1), batch, prefetch(2))."""
    x, y = models_v1.load_split(data, models_v1.WORKLOADS[name].feature_key, split)
    ds = tf.data.Dataset.from_tensor_slices((x, y) if labels else x).cache().repeat()
    if shuffle:
        ds = ds.shuffle(buffer_size=1500, seed=1)
    return ds.batch(batch_size, drop_remainder=True).prefetch(2)


def seed() -> None:
    """Python, NumPy and TF seeds: Keras 2 initialisers draw from Python's `random`."""
    keras.utils.set_random_seed(1)
    np.random.seed(1)
