"""The TPU embedding optimizers' update rules, as TensorFlow ops on one table's variables.

    op = embedding_update.apply(optimizer, table_var, slot_vars, ids, grads, learning_rate)

On a TPU the embedding engine summed each table's gradients over every core and feature
(gradient accumulation), then updated the looked-up rows with the table's own optimizer,
separately from the model's optimizer. This module owns that last part: given the unique row
ids of one step and their summed gradients, it applies the rule of
`tensorflow/core/protobuf/tpu/optimization_parameters.proto` for each parameter class of
`config.py`: gradient clipping limits first, then the optimizer (Adagrad, Adam
without bias correction, lazy or not, with or without the sum inside the square root, FTRL
with `beta`, SGD), then weight clipping limits. Where TensorFlow has the proto's CPU kernel
(`training_ops`: sparse Adagrad, FTRL-V2, scatter for SGD) that kernel runs; Adam is written
out. It must not know where gradients come from, how tables are named or placed, or anything
about replicas: the caller sums first.
"""

from __future__ import annotations

from typing import Any, Sequence

import tensorflow as tf

from tpu_estimator_compat.embedding import config as config_lib


def apply(optimizer: Any, table: tf.Variable, slots: Sequence[tf.Variable], ids: tf.Tensor,
          grads: tf.Tensor, learning_rate: tf.Tensor) -> tf.Operation:
    """Updates rows `ids` (unique, int64) of `table` and its `slots` with `grads` [n, dim].

    Returns the op that finishes the update (weight clipping included).
    """
    grads = _clip(grads, optimizer.clip_gradient_min, optimizer.clip_gradient_max)
    learning_rate = tf.cast(learning_rate, tf.float32)
    if isinstance(optimizer, config_lib.AdagradParameters):
        update = tf.raw_ops.ResourceSparseApplyAdagrad(
            var=table.handle, accum=slots[0].handle, lr=learning_rate, grad=grads,
            indices=ids, update_slots=True)
    elif isinstance(optimizer, config_lib.AdamParameters):
        update = _adam(optimizer, table, slots, ids, grads, learning_rate)
    elif isinstance(optimizer, config_lib.FtrlParameters):
        update = _ftrl(optimizer, table, slots, ids, grads, learning_rate)
    elif isinstance(optimizer, config_lib.StochasticGradientDescentParameters):
        update = table.scatter_sub(tf.IndexedSlices(learning_rate * grads, ids))
    else:  # EmbeddingConfigSpec accepts only the classes above.
        raise TypeError(f"No TPU embedding update rule for {type(optimizer).__name__}.")
    if optimizer.clip_weight_min is None and optimizer.clip_weight_max is None:
        return _as_op(update)
    with tf.control_dependencies([_as_op(update)]):
        if isinstance(optimizer, config_lib.AdamParameters) and not optimizer.lazy_adam:
            # Non-lazy Adam moved every row; each row is clipped after the update.
            return _as_op(table.assign(_clip(table.read_value(), optimizer.clip_weight_min,
                                             optimizer.clip_weight_max)))
        rows = _clip(tf.gather(table, ids), optimizer.clip_weight_min, optimizer.clip_weight_max)
        return _as_op(table.scatter_update(tf.IndexedSlices(rows, ids)))


def _clip(values: tf.Tensor, low: float | None, high: float | None) -> tf.Tensor:
    if low is not None:
        values = tf.maximum(values, low)
    if high is not None:
        values = tf.minimum(values, high)
    return values


def _as_op(value: Any) -> tf.Operation:
    """The op of an update: an Operation, or what made an assign's result."""
    return value if isinstance(value, tf.Operation) else value.op


def _adam_step(optimizer: config_lib.AdamParameters, m: tf.Tensor, v: tf.Tensor) -> tf.Tensor:
    if optimizer.sum_inside_sqrt:
        return m / tf.sqrt(v + optimizer.epsilon ** 2)
    return m / (tf.sqrt(v) + optimizer.epsilon)


def _adam(optimizer: config_lib.AdamParameters, table: tf.Variable,
          slots: Sequence[tf.Variable], ids: tf.Tensor, grads: tf.Tensor,
          learning_rate: tf.Tensor) -> Any:
    """Adam as the TPU applied it: no bias correction; lazy (looked-up rows) by default."""
    m_var, v_var = slots
    b1, b2 = optimizer.beta1, optimizer.beta2
    if optimizer.lazy_adam:
        m = b1 * tf.gather(m_var, ids) + (1 - b1) * grads
        v = b2 * tf.gather(v_var, ids) + (1 - b2) * tf.square(grads)
        rows = tf.gather(table, ids) - learning_rate * _adam_step(optimizer, m, v)
        return tf.group(_as_op(m_var.scatter_update(tf.IndexedSlices(m, ids))),
                        _as_op(v_var.scatter_update(tf.IndexedSlices(v, ids))),
                        _as_op(table.scatter_update(tf.IndexedSlices(rows, ids))))
    # Non-lazy: every row's moments decay and every row moves, as dense Adam with zeros as the
    # gradient of the rows not looked up.
    dense = tf.scatter_nd(tf.expand_dims(ids, 1), grads, tf.shape(table, out_type=tf.int64))
    m = b1 * m_var.read_value() + (1 - b1) * dense
    v = b2 * v_var.read_value() + (1 - b2) * tf.square(dense)
    return tf.group(_as_op(m_var.assign(m)), _as_op(v_var.assign(v)),
                    _as_op(table.assign_sub(learning_rate * _adam_step(optimizer, m, v))))


def _ftrl(optimizer: config_lib.FtrlParameters, table: tf.Variable,
          slots: Sequence[tf.Variable], ids: tf.Tensor, grads: tf.Tensor,
          learning_rate: tf.Tensor) -> Any:
    """TensorFlow's sparse FTRL-V2 kernel; the TPU's `beta` adds `beta / (2 lr)` to l2."""
    accumulator, linear = slots
    l2 = optimizer.l2_regularization_strength + optimizer.beta / (2.0 * learning_rate)
    return tf.raw_ops.ResourceSparseApplyFtrlV2(
        var=table.handle, accum=accumulator.handle, linear=linear.handle, grad=grads,
        indices=ids, lr=learning_rate,
        l1=tf.constant(optimizer.l1_regularization_strength, tf.float32),
        l2=tf.cast(l2, tf.float32), l2_shrinkage=tf.constant(0.0, tf.float32),
        lr_power=tf.constant(optimizer.learning_rate_power, tf.float32),
        multiply_linear_by_lr=optimizer.multiply_linear_by_learning_rate)


def slot_initial_values(optimizer: Any) -> tuple[float, ...]:
    """Initial value of each slot (`optimizer.slot_names` order), as legacy initialised them."""
    if isinstance(optimizer, config_lib.AdagradParameters):
        return (float(optimizer.initial_accumulator),)
    if isinstance(optimizer, config_lib.AdamParameters):
        return (0.0, 0.0)
    if isinstance(optimizer, config_lib.FtrlParameters):
        return (float(optimizer.initial_accumulator_value), float(optimizer.initial_linear_value))
    return ()
