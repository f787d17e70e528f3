# An r1 ResNet model_fn for TPUEstimator, written the way TF1 users wrote them.
"""Small ResNet on the embedded digits: network, learning-rate schedule and model_fn.

Everything a TF1 ResNet-on-TPU script kept next to its `main`, minus the flags so tests can
import it: `model_fn(features, labels, mode, params)` reads its hyperparameters from `params`
(build them with `default_params(**overrides)`), and `input_fn` lives in `digits_input.py`.

The network is a CIFAR-style pre-2016 ResNet (v1): a 3x3 conv stem, three stages of basic
residual blocks (widths `width`, 2x, 4x; stride 2 at the start of stages 2 and 3, with a
1x1 projection shortcut), `tf.layers.batch_normalization` after every conv, global average
pooling and a dense classifier. On 16x16 digits (see `digits_input.py`) the stages run at
16x16, 8x8 and 4x4.

TF1 idioms kept on purpose (they are what the compat layer must run unchanged):
- batch-norm moving statistics updated through `tf.GraphKeys.UPDATE_OPS`, made a control
  dependency of the train op;
- weight decay as `kernel_regularizer`s, collected with `tf.losses.get_regularization_loss()`;
- label-smoothed `tf.losses.softmax_cross_entropy`;
- `MomentumOptimizer` with a warmup + cosine (or piecewise-constant) learning rate computed
  from the global step, inside `tf.tpu.CrossShardOptimizer` when `params['use_tpu']`;
- a `host_call` that writes `tf.compat.v2.summary` scalars from `[1]`-shaped tensors and
  returns `tf.summary.all_v2_summary_ops()`;
- `eval_metrics=(metric_fn, [labels, logits])` with top-1 and top-5 accuracy.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import math

import tensorflow.compat.v1 as tf

NUM_CLASSES = 10


def default_params(**overrides):
    """Returns the model hyperparameters as a `params` dict, updated with `overrides`.

    Keys:
      num_classes: Output classes.
      width: Channels of the stem and the first stage (stages 2 and 3 use 2x and 4x).
      blocks_per_stage: Residual blocks in each of the three stages.
      base_learning_rate: Peak learning rate (reached at the end of warmup).
      lr_schedule: 'cosine' (warmup, then cosine to 0 at `train_steps`) or 'piecewise'
        (warmup, then x0.1 at 50% and x0.01 at 75% of `train_steps`).
      warmup_steps: Linear warmup length in steps.
      train_steps: Total training steps, the horizon of the schedule.
      momentum: MomentumOptimizer momentum.
      weight_decay: L2 coefficient on conv and dense kernels (not on batch-norm or biases).
      label_smoothing: Passed to tf.losses.softmax_cross_entropy.
      bn_momentum, bn_epsilon: Batch-norm moving-average momentum and epsilon.
      model_dir: Where host_call writes its summaries.
      skip_host_call: True to return no host_call (legacy ResNet's --skip_host_call).
      iterations_per_loop: Only sizes the host_call writer's queue, as legacy ResNet did.
    """
    params = dict(
        num_classes=NUM_CLASSES,
        width=16,
        blocks_per_stage=1,
        base_learning_rate=0.2,
        lr_schedule="cosine",
        warmup_steps=20,
        train_steps=300,
        momentum=0.9,
        weight_decay=1e-4,
        label_smoothing=0.1,
        bn_momentum=0.9,
        bn_epsilon=1e-5,
        model_dir=None,
        skip_host_call=False,
        iterations_per_loop=100,
    )
    unknown = set(overrides) - set(params)
    if unknown:
        raise ValueError("Unknown ResNet params: %s" % sorted(unknown))
    params.update(overrides)
    return params


def _l2(weight_decay):
    """A kernel_regularizer: weight_decay * sum(w**2) / 2, as tf.nn.l2_loss computes it."""
    def regularizer(weights):
        return weight_decay * tf.nn.l2_loss(weights)
    return regularizer


def batch_norm_relu(inputs, is_training, params, relu=True, init_zero=False, name=None):
    """Batch norm (moving statistics updated via UPDATE_OPS), then an optional ReLU."""
    gamma_initializer = tf.zeros_initializer() if init_zero else tf.ones_initializer()
    inputs = tf.layers.batch_normalization(
        inputs,
        momentum=params["bn_momentum"],
        epsilon=params["bn_epsilon"],
        center=True,
        scale=True,
        training=is_training,
        fused=True,
        gamma_initializer=gamma_initializer,
        name=name)
    if relu:
        inputs = tf.nn.relu(inputs)
    return inputs


def conv2d(inputs, filters, kernel_size, strides, params, name=None):
    """A bias-free 'same' convolution with He initialisation and weight decay."""
    return tf.layers.conv2d(
        inputs,
        filters=filters,
        kernel_size=kernel_size,
        strides=strides,
        padding="same",
        use_bias=False,
        kernel_initializer=tf.variance_scaling_initializer(scale=2.0),
        kernel_regularizer=_l2(params["weight_decay"]),
        name=name)


def residual_block(inputs, filters, strides, is_training, params):
    """Basic block: conv3x3-BN-ReLU-conv3x3-BN, plus a (projected) shortcut, then ReLU.

    The last batch norm starts with gamma = 0, so every block begins as the identity.
    """
    shortcut = inputs
    if strides != 1 or inputs.shape[-1] != filters:
        shortcut = conv2d(inputs, filters, 1, strides, params)
        shortcut = batch_norm_relu(shortcut, is_training, params, relu=False)
    x = conv2d(inputs, filters, 3, strides, params)
    x = batch_norm_relu(x, is_training, params)
    x = conv2d(x, filters, 3, 1, params)
    x = batch_norm_relu(x, is_training, params, relu=False, init_zero=True)
    return tf.nn.relu(x + shortcut)


def resnet(images, is_training, params):
    """Returns logits [batch, num_classes] for NHWC images."""
    width = params["width"]
    with tf.variable_scope("resnet"):
        x = conv2d(images, width, 3, 1, params)
        x = batch_norm_relu(x, is_training, params)
        for stage, (filters, strides) in enumerate(
                [(width, 1), (2 * width, 2), (4 * width, 2)]):
            with tf.variable_scope("stage%d" % (stage + 1)):
                for block in range(params["blocks_per_stage"]):
                    with tf.variable_scope("block%d" % (block + 1)):
                        x = residual_block(x, filters, strides if block == 0 else 1,
                                           is_training, params)
        x = tf.reduce_mean(x, axis=[1, 2])  # Global average pooling.
        logits = tf.layers.dense(
            x, params["num_classes"],
            kernel_initializer=tf.random_normal_initializer(stddev=0.01),
            kernel_regularizer=_l2(params["weight_decay"]),
            name="logits")
    return logits


def learning_rate_schedule(params, global_step):
    """Linear warmup to `base_learning_rate`, then cosine decay or piecewise constant."""
    base_lr = params["base_learning_rate"]
    warmup_steps = params["warmup_steps"]
    train_steps = params["train_steps"]
    step = tf.cast(global_step, tf.float32)
    warmup_lr = base_lr * step / max(float(warmup_steps), 1.0)
    if params["lr_schedule"] == "cosine":
        progress = (step - warmup_steps) / max(float(train_steps - warmup_steps), 1.0)
        progress = tf.clip_by_value(progress, 0.0, 1.0)
        decayed_lr = 0.5 * base_lr * (1.0 + tf.cos(math.pi * progress))
    elif params["lr_schedule"] == "piecewise":
        decayed_lr = tf.train.piecewise_constant(
            global_step,
            boundaries=[train_steps // 2, 3 * train_steps // 4],
            values=[base_lr, base_lr * 0.1, base_lr * 0.01])
    else:
        raise ValueError("lr_schedule must be 'cosine' or 'piecewise', got %r"
                         % (params["lr_schedule"],))
    return tf.where(step < warmup_steps, warmup_lr, decayed_lr)


def metric_fn(labels, logits):
    """Top-1 and top-5 accuracy; runs on the host over all replicas' outputs."""
    predictions = tf.argmax(logits, axis=1)
    top_1_accuracy = tf.metrics.accuracy(labels, predictions)
    in_top_5 = tf.cast(tf.nn.in_top_k(logits, labels, 5), tf.float32)
    top_5_accuracy = tf.metrics.mean(in_top_5)
    return {
        "top_1_accuracy": top_1_accuracy,
        "top_5_accuracy": top_5_accuracy,
    }


def make_host_call_fn(model_dir, iterations_per_loop):
    """Returns the host_call function: scalar summaries written on the host."""

    def host_call_fn(gs, loss, lr, ce, reg):
        """Writes training summaries; every argument is a [1]-shaped (per-step) tensor.

        On a TPU the host receives the [1] tensors of all cores concatenated; the first
        element stands for the step.
        """
        gs = gs[0]
        with tf.compat.v2.summary.create_file_writer(
                model_dir, max_queue=iterations_per_loop).as_default():
            with tf.compat.v2.summary.record_if(True):
                tf.compat.v2.summary.scalar("loss", loss[0], step=gs)
                tf.compat.v2.summary.scalar("learning_rate", lr[0], step=gs)
                tf.compat.v2.summary.scalar("cross_entropy", ce[0], step=gs)
                tf.compat.v2.summary.scalar("regularization_loss", reg[0], step=gs)
            return tf.summary.all_v2_summary_ops()

    return host_call_fn


def model_fn(features, labels, mode, params):
    """The TPUEstimator model_fn: TRAIN, EVAL and PREDICT on one ResNet graph."""
    if isinstance(features, dict):
        features = features["image"]
    images = features
    is_training = mode == tf.estimator.ModeKeys.TRAIN

    logits = resnet(images, is_training, params)

    if mode == tf.estimator.ModeKeys.PREDICT:
        predictions = {
            "classes": tf.argmax(logits, axis=1),
            "probabilities": tf.nn.softmax(logits, name="softmax_tensor"),
        }
        return tf.estimator.tpu.TPUEstimatorSpec(
            mode=mode,
            predictions=predictions,
            export_outputs={
                "classify": tf.estimator.export.PredictOutput(predictions)
            })

    one_hot_labels = tf.one_hot(labels, params["num_classes"])
    cross_entropy = tf.losses.softmax_cross_entropy(
        logits=logits,
        onehot_labels=one_hot_labels,
        label_smoothing=params["label_smoothing"])
    regularization_loss = tf.losses.get_regularization_loss()
    loss = cross_entropy + regularization_loss

    host_call = None
    if mode == tf.estimator.ModeKeys.TRAIN:
        global_step = tf.train.get_global_step()
        learning_rate = learning_rate_schedule(params, global_step)
        optimizer = tf.train.MomentumOptimizer(
            learning_rate=learning_rate, momentum=params["momentum"], use_nesterov=True)
        if params["use_tpu"]:
            optimizer = tf.tpu.CrossShardOptimizer(optimizer)

        # Batch norm's moving mean/variance updates must run with every step.
        update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        with tf.control_dependencies(update_ops):
            train_op = optimizer.minimize(loss, global_step)

        if not params["skip_host_call"] and params["model_dir"]:
            # Outfed tensors need a batch axis: every scalar becomes shape [1].
            gs_t = tf.reshape(global_step, [1])
            loss_t = tf.reshape(loss, [1])
            lr_t = tf.reshape(learning_rate, [1])
            ce_t = tf.reshape(cross_entropy, [1])
            reg_t = tf.reshape(regularization_loss, [1])
            host_call = (make_host_call_fn(params["model_dir"], params["iterations_per_loop"]),
                         [gs_t, loss_t, lr_t, ce_t, reg_t])
        return tf.estimator.tpu.TPUEstimatorSpec(
            mode=mode, loss=loss, train_op=train_op, host_call=host_call)

    return tf.estimator.tpu.TPUEstimatorSpec(
        mode=mode, loss=loss, eval_metrics=(metric_fn, [labels, logits]))
