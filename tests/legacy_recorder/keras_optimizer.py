# An r1 Estimator script, written as TF1 users wrote it (no tpu_estimator_compat import).
"""A model_fn that trains as a canned v2 head does, recorded on the legacy stack.

    TF_ENABLE_ONEDNN_OPTS=0 .venv-legacy/bin/python tests/legacy_recorder/keras_optimizer.py
    (tests/test_keras_optimizer.py replays it on the library, after `install_aliases()`)

The train path is canned `dnn_model_fn_v2` + `base_head.create_estimator_spec_train_op` of
tensorflow-estimator 2.15.0, written out: a Keras model named `dnn` (Dense hidden layer,
optional batch norm, Dense logits) called on the features; in TRAIN a tf_keras legacy
`OptimizerV2` (`tf.keras.optimizers.legacy.*`, what the canned names 'Adagrad', 'Adam',
'Ftrl', 'RMSProp' and 'SGD' resolve to) whose `iterations` is the global step; the loss
scaled by 1/replicas under `name_scope('')` + `name_scope('training')`;
`optimizer.get_updates(loss, model.trainable_variables)[0]` grouped with the model's
`updates`. Initial weights are numpy constants, so both stacks start from the same values.

Recorded per case: the loss of each of STEPS training steps (a training hook fetching the
spec's loss: replica 0's on MirroredStrategy, as legacy handed hooks the first device's),
`evaluate()`'s loss on held-out digits, and the checkpoint's variable names, shapes and
values. Cases: each canned optimizer name on one replica, an Adam instance with batch norm,
Adagrad on MirroredStrategy over 2 logical CPUs (RunConfig(train_distribute=...)), and
canned dnn_linear_combined's two optimizers (Adagrad on the DNN, Ftrl on a linear part).
Output: tests/goldens/keras_optimizer/legacy.json.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "goldens",
                   "keras_optimizer", "legacy.json")
NUM_TRAIN = 1200
BATCH = 50
STEPS = 8
HIDDEN = 8
# canned/optimizers.py's `_OPTIMIZER_CLS_NAMES_V2`: name -> tf.keras.optimizers.legacy class.
CANNED_NAMES = {"Adagrad": "Adagrad", "Adam": "Adam", "Ftrl": "Ftrl", "RMSProp": "RMSprop",
                "SGD": "SGD"}
# case -> (optimizer name or instance maker, batch norm, replicas, linear part's optimizer).
CASES = {
    **{name: (name, False, 1, None) for name in CANNED_NAMES},
    "Adam_instance_batchnorm": (lambda: tf.keras.optimizers.legacy.Adam(0.01), True, 1, None),
    "Adagrad_mirrored2": ("Adagrad", False, 2, None),
    # canned dnn_linear_combined v2: two optimizers, the DNN's `iterations` is the global step,
    # the linear one keeps its own step counter.
    "dnn_Adagrad_linear_Ftrl": ("Adagrad", False, 1, "Ftrl"),
}


def _digits(split):
    from sklearn.datasets import load_digits

    data = load_digits()
    x = (data.data / 16.0).astype(np.float32)
    y = data.target.astype(np.int32)
    return (x[:NUM_TRAIN], y[:NUM_TRAIN]) if split == "train" else (x[NUM_TRAIN:],
                                                                    y[NUM_TRAIN:])


def train_input_fn():
    x, y = _digits("train")
    return tf.data.Dataset.from_tensor_slices(({"pixels": x}, y)).repeat().batch(BATCH)


def eval_input_fn():
    x, y = _digits("test")
    return tf.data.Dataset.from_tensor_slices(({"pixels": x}, y)).batch(100)


def _initial_weights():
    rng = np.random.RandomState(11)
    return {"hiddenlayer_0": rng.normal(0, 0.2, (64, HIDDEN)).astype(np.float32),
            "logits": rng.normal(0, 0.2, (HIDDEN, 10)).astype(np.float32)}


def optimizer_instance(opt):
    """canned/optimizers.py's `get_optimizer_instance_v2` for a name (every legacy Keras
    optimizer has a default learning rate, so the class is built with none), or `opt()`."""
    if isinstance(opt, str):
        return getattr(tf.keras.optimizers.legacy, CANNED_NAMES[opt])()
    return opt()


class DNNModel(tf.keras.Model):
    """As canned `_DNNModelV2`: one hidden layer, optional batch norm, logits."""

    def __init__(self, batch_norm, name="dnn"):
        super().__init__(name=name)
        weights = _initial_weights()
        self._hidden = tf.keras.layers.Dense(
            HIDDEN, activation=tf.nn.relu, name="hiddenlayer_0",
            kernel_initializer=tf.constant_initializer(weights["hiddenlayer_0"]))
        self._batch_norm = (tf.keras.layers.BatchNormalization(momentum=0.9, name="batchnorm_0")
                            if batch_norm else None)
        self._logits = tf.keras.layers.Dense(
            10, name="logits", kernel_initializer=tf.constant_initializer(weights["logits"]))

    def call(self, features, mode):
        net = self._hidden(features["pixels"])
        if self._batch_norm is not None:
            net = self._batch_norm(net, training=mode == tf.estimator.ModeKeys.TRAIN)
        return self._logits(net)


class LinearModel(tf.keras.Model):
    """The linear part of canned `dnn_linear_combined` (zero-initialised, as canned Linear)."""

    def __init__(self, name="linear"):
        super().__init__(name=name)
        self._dense = tf.keras.layers.Dense(10, name="linear_model",
                                            kernel_initializer="zeros")

    def call(self, features):
        return self._dense(features["pixels"])


class LossRecorder(tf.train.SessionRunHook):
    def __init__(self, loss, losses):
        self._loss, self._losses = loss, losses

    def before_run(self, run_context):
        return tf.train.SessionRunArgs(self._loss)

    def after_run(self, run_context, run_values):
        self._losses.append(float(run_values.results))


def make_model_fn(opt, batch_norm, losses, linear_opt=None):
    def model_fn(features, labels, mode):
        model = DNNModel(batch_norm)
        logits = model(features, mode)
        linear = None
        if linear_opt is not None:
            linear = LinearModel()
            logits = logits + linear(features)
        optimizer = linear_optimizer = None
        if mode == tf.estimator.ModeKeys.TRAIN:  # canned dnn_model_fn_v2
            optimizer = optimizer_instance(opt)
            optimizer.iterations = tf.train.get_or_create_global_step()
            if linear_opt is not None:
                linear_optimizer = optimizer_instance(linear_opt)
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        if mode != tf.estimator.ModeKeys.TRAIN:
            return tf.estimator.EstimatorSpec(mode, loss=loss)
        with tf.name_scope(""), tf.name_scope("training"):  # base_head's train op
            scaled = loss
            replicas = tf.distribute.get_strategy().num_replicas_in_sync
            if replicas > 1:
                scaled = loss * (1. / replicas)
            train_ops = optimizer.get_updates(scaled, model.trainable_variables)
            train_ops.extend(model.updates)
            if linear is not None:
                train_ops.extend(linear_optimizer.get_updates(scaled,
                                                              linear.trainable_variables))
            train_op = tf.group(*train_ops)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op,
                                          training_hooks=[LossRecorder(loss, losses)])

    return model_fn


def mirrored2():
    # Legacy's session hangs in its first step with the collective all-reduce TF 2.15 picks
    # for logical CPUs (measured: no step in 90 s, v1 and Keras optimizers alike); the
    # reduction to one device runs. A sum of two values is the same in either order.
    return tf.distribute.MirroredStrategy(
        ["/cpu:0", "/cpu:1"], cross_device_ops=tf.distribute.ReductionToOneDevice())


def run(workdir, case, strategy=None):
    """Trains `case` STEPS steps and evaluates; returns what the tests compare.

    `strategy`: the MirroredStrategy of a 2-replica case (built here when None).
    """
    opt, batch_norm, replicas, linear_opt = CASES[case]
    if replicas > 1 and strategy is None:
        strategy = mirrored2()
    losses = []
    config = tf.estimator.RunConfig(tf_random_seed=1,
                                    train_distribute=strategy if replicas > 1 else None)
    estimator = tf.estimator.Estimator(make_model_fn(opt, batch_norm, losses, linear_opt),
                                       model_dir=os.path.join(workdir, case), config=config)
    estimator.train(train_input_fn, steps=STEPS)
    metrics = estimator.evaluate(eval_input_fn)
    reader = tf.train.load_checkpoint(estimator.latest_checkpoint())
    shapes = reader.get_variable_to_shape_map()
    return {
        "losses": losses,
        "eval_loss": float(metrics["loss"]),
        "global_step": int(metrics["global_step"]),
        "variables": {name: {"shape": list(shapes[name]),
                             "value": np.asarray(reader.get_tensor(name)).ravel().tolist()}
                      for name in sorted(shapes)},
    }


def main():
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
    with tempfile.TemporaryDirectory() as workdir:
        result = {case: run(workdir, case) for case in CASES}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump({"legacy": result, "versions": {"tensorflow": tf.__version__}}, f)
    print("wrote", os.path.relpath(OUT), file=sys.stderr)


if __name__ == "__main__":
    main()
