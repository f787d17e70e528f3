"""tf_keras's legacy OptimizerV2 inside the replica step, as tensorflow-estimator's v2 heads
train with it (`step/optimizer_apply.py`, `v1_state/tf1_names.py`).

A canned v2 model_fn makes a `tf.keras.optimizers.legacy.*` instance in TRAIN, sets its
`iterations` to the global step, and returns `optimizer.get_updates(loss, vars)[0]` grouped
with the model's update ops. These tests run that train path under our `Estimator` on the
default strategy and on MirroredStrategy over the 8 logical CPUs (conftest's `strategy`), read
the checkpoints back with `tf.train.load_checkpoint`, and replay
tests/legacy_recorder/keras_optimizer.py against its golden recorded on TF 2.15.1 +
tensorflow-estimator 2.15.0: on one replica, and on MirroredStrategy over 2 logical CPUs in a
child process.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator_compat
from tpu_estimator_compat.api.estimator import Estimator

tpu_estimator_compat.install_aliases()
v1 = tf.compat.v1

_RNG = np.random.RandomState(0)
X = _RNG.rand(64, 3).astype(np.float32)
Y = (X.sum(axis=1) > 1.5).astype(np.int32)
BATCH = 8
# Each optimizer's slots per variable (tf_keras's `add_slot` names).
SLOTS = {"Adagrad": ("accumulator",), "Adam": ("m", "v"), "Ftrl": ("accumulator", "linear"),
         "RMSprop": ("rms",), "SGD": ()}
OPTIMIZERS = tuple(SLOTS)
MODEL_VARIABLES = ("hidden/kernel", "hidden/bias", "logits/kernel", "logits/bias")


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(BATCH)


def same_batch_fn():
    """One batch per replica, the same at every step: a second train() call sees what the
    first one's later steps saw."""
    return tf.data.Dataset.from_tensor_slices(({"x": X[:BATCH]}, Y[:BATCH])).batch(
        BATCH).repeat()


def make_model_fn(optimizer_name, every_mode=False):
    """A v2 head's train path: Keras layers, a legacy Keras optimizer whose `iterations` is
    the global step, `get_updates` under `training/`. `every_mode`: the optimizer and its
    train_op are built in EVAL and PREDICT too, as many hand-written model_fns did."""

    def model_fn(features, labels, mode):
        hidden = tf.keras.layers.Dense(4, activation="relu", name="hidden",
                                       kernel_initializer=tf.constant_initializer(0.3))
        head = tf.keras.layers.Dense(2, name="logits",
                                     kernel_initializer=tf.constant_initializer(-0.2))
        logits = head(hidden(features["x"]))
        predictions = {"logits": logits}
        if mode == "infer" and not every_mode:
            return tf.estimator.EstimatorSpec(mode, predictions=predictions)
        train = mode == "train" or every_mode
        loss = (v1.losses.sparse_softmax_cross_entropy(labels, logits)
                if labels is not None else tf.reduce_mean(logits))
        train_op = None
        if train:
            optimizer = getattr(tf.keras.optimizers.legacy, optimizer_name)(learning_rate=0.1)
            optimizer.iterations = v1.train.get_or_create_global_step()
            scaled = loss / tf.distribute.get_strategy().num_replicas_in_sync
            variables = hidden.trainable_variables + head.trainable_variables
            with v1.name_scope(""), v1.name_scope("training"):
                train_op = optimizer.get_updates(scaled, variables)[0]
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op,
                                          predictions=predictions)

    return model_fn


def checkpoint_values(path):
    reader = tf.train.load_checkpoint(path)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _distribute(strategy):
    """RunConfig's train_distribute for the `strategy` fixture: None for the default one."""
    return None if strategy is tf.distribute.get_strategy() else strategy


def _estimator(model_fn, model_dir, strategy):
    config = tf.estimator.RunConfig(train_distribute=_distribute(strategy))
    return Estimator(model_fn, model_dir=str(model_dir), config=config)


@pytest.mark.eight_replicas(name=["Adam"])
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_slots_and_iterations_are_made_once_and_resume(tmp_path, strategy, name):
    """Slots and hyperparameters exist once each under the optimizer's v1 names, the global
    step is the optimizer's `iterations` (one increment a step), and a second `train()`
    (a new trace, a new optimizer object) continues from the saved slots: 3 + 5 steps give
    the bits of 8."""
    split = _estimator(make_model_fn(name), tmp_path / "split", strategy)
    split.train(same_batch_fn, steps=3)
    split.train(same_batch_fn, steps=5)
    whole = _estimator(make_model_fn(name), tmp_path / "whole", strategy)
    whole.train(same_batch_fn, steps=8)
    got, want = checkpoint_values(split.latest_checkpoint()), checkpoint_values(
        whole.latest_checkpoint())
    assert got["global_step"] == want["global_step"] == 8
    assert sorted(got) == sorted(want)
    prefix = f"training/{name}/"
    slots = sorted(n for n in got if n.startswith(prefix))
    assert f"{prefix}learning_rate" in slots and f"{prefix}decay" in slots
    hypers = {n for n in slots if "/" not in n[len(prefix):]}
    assert f"{prefix}iter" not in hypers  # `iterations` is the global step.
    assert set(slots) - hypers == {f"{prefix}{v}/{slot}" for v in MODEL_VARIABLES
                                   for slot in SLOTS[name]}
    assert set(got) - set(slots) == {"global_step", *MODEL_VARIABLES}
    for n in got:
        np.testing.assert_array_equal(got[n], want[n], err_msg=n)
    assert np.abs(got["hidden/kernel"] - 0.3).max() > 0  # It trained.


def test_replicas_average_as_one_step_on_the_concatenated_batch(tmp_path):
    """On 8 replicas the head's 1/replicas loss scaling and the optimizer's sum over replicas
    make one step on the 8 batches concatenated, as legacy's distributed Estimator did."""
    from conftest import make_strategy

    strategy = make_strategy("mirrored8")
    replicas = strategy.num_replicas_in_sync
    dist = _estimator(make_model_fn("Adam"), tmp_path / "dist", strategy)
    dist.train(input_fn, steps=1)

    def global_input_fn():
        return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(replicas * BATCH)

    one = _estimator(make_model_fn("Adam"), tmp_path / "one", None)
    one.train(global_input_fn, steps=1)
    got, want = checkpoint_values(dist.latest_checkpoint()), checkpoint_values(
        one.latest_checkpoint())
    assert sorted(got) == sorted(want)
    for n in want:
        np.testing.assert_allclose(got[n], want[n], rtol=1e-5, atol=1e-7, err_msg=n)


def test_eval_and_predict_never_run_the_keras_train_op(tmp_path, strategy):
    """A model_fn that builds its Keras optimizer's train_op in every mode: evaluate and
    predict change no variable and no step, as legacy never ran the train_op outside TRAIN.
    (Trained on `strategy`; evaluated on one device, as legacy did without eval_distribute.)
    """
    config = tf.estimator.RunConfig(train_distribute=_distribute(strategy))
    est = Estimator(make_model_fn("Adam", every_mode=True), model_dir=str(tmp_path),
                    config=config)
    est.train(input_fn, steps=2)
    before = checkpoint_values(est.latest_checkpoint())
    once = est.evaluate(same_batch_fn, steps=1)
    ten = est.evaluate(same_batch_fn, steps=10)
    assert once["global_step"] == ten["global_step"] == 2
    np.testing.assert_allclose(ten["loss"], once["loss"], rtol=1e-6)
    logits = [p["logits"] for p in est.predict(lambda: same_batch_fn().take(3))]
    np.testing.assert_array_equal(logits[:BATCH], logits[-BATCH:])
    after = checkpoint_values(est.latest_checkpoint())
    assert est.latest_checkpoint().endswith("model.ckpt-2")
    for n in before:
        np.testing.assert_array_equal(after[n], before[n], err_msg=n)


@pytest.mark.eight_replicas(name=["Adam"])
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_not_training_makes_keras_apply_gradients_a_no_op_in_every_replica(strategy, name):
    """`optimizer_apply.not_training()` (entered while model_fn builds an EVAL or PREDICT
    step) on each replica of `strategy`: `get_updates` is a no-op, no slot is made, the step
    stays; outside it the same optimizer trains again."""
    from tpu_estimator_compat.step import optimizer_apply
    from tpu_estimator_compat.v1_state import keras_env

    with strategy.scope():
        weight = tf.Variable([1.0, 2.0])
        step = tf.Variable(0, dtype=tf.int64)
        optimizer = getattr(tf.keras.optimizers.legacy, name)(learning_rate=0.1)
        optimizer.iterations = step

    @tf.function
    def eval_like_step():
        def replica():
            with keras_env.tf1_graph_keras(), optimizer_apply.not_training():
                loss = tf.reduce_sum(weight * weight)
                train_op = optimizer.get_updates(loss, [weight])[0]
            assert isinstance(train_op, tf.Operation) and train_op.type == "NoOp"
            return loss

        return strategy.experimental_local_results(strategy.run(replica))[0]

    assert eval_like_step().numpy() == 5.0
    np.testing.assert_array_equal(weight.numpy(), [1.0, 2.0])
    assert step.numpy() == 0 and not optimizer.weights[1:]
    @tf.function
    def train_step():
        strategy.run(lambda: optimizer.minimize(lambda: tf.reduce_sum(weight * weight),
                                                [weight]) and None)

    train_step()  # The patch is gone again.
    assert step.numpy() == 1 and weight.numpy()[0] != 1.0


# Replayed against tests/goldens/keras_optimizer/legacy.json (recorded by
# tests/legacy_recorder/keras_optimizer.py on the legacy stack, TF_ENABLE_ONEDNN_OPTS=0).

def _legacy(case):
    from conftest import legacy_recorder

    recorder, golden = legacy_recorder("keras_optimizer")
    return recorder, golden["legacy"][case]


@pytest.mark.parametrize("case", ["Adagrad", "Adam", "Ftrl", "RMSProp", "SGD",
                                  "Adam_instance_batchnorm", "dnn_Adagrad_linear_Ftrl"])
def test_head_train_path_matches_legacy_bit_for_bit(tmp_path, case):
    """One replica: per-step losses, evaluate()'s loss, and the checkpoint's names
    (`training/<Optimizer>/<var>/<slot>`, the hyperparameters, no separate `iter` where the
    global step is the optimizer's; canned dnn_linear_combined's second optimizer keeps its
    own `training/Ftrl/iter`), shapes and values equal legacy's bit for bit."""
    recorder, legacy = _legacy(case)
    shim = recorder.run(str(tmp_path), case)
    np.testing.assert_array_equal(np.float32(shim["losses"]), np.float32(legacy["losses"]))
    assert np.float32(shim["eval_loss"]) == np.float32(legacy["eval_loss"])
    assert shim["global_step"] == legacy["global_step"] == recorder.STEPS
    assert sorted(shim["variables"]) == sorted(legacy["variables"])
    for name, want in legacy["variables"].items():
        got = shim["variables"][name]
        assert got["shape"] == want["shape"], name
        np.testing.assert_array_equal(np.asarray(got["value"], np.float32),
                                      np.asarray(want["value"], np.float32), err_msg=name)


# The 2-replica replay runs in a child process with 2 logical CPUs: this process has 8, and
# MirroredStrategy instances over different device sets share collective group keys
# ("joining a group with size2, but that group has size 8").
_TWO_REPLICAS = textwrap.dedent("""
    import json, os, sys
    import tensorflow as tf
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
    import tpu_estimator_compat
    from tpu_estimator_compat.session import strategy as strategy_lib
    tpu_estimator_compat.install_aliases()
    sys.path.insert(0, sys.argv[1])
    import keras_optimizer
    strategy = strategy_lib.mirrored_over(
        [d.name for d in tf.config.list_logical_devices("CPU")])
    assert strategy.num_replicas_in_sync == 2
    result = keras_optimizer.run(sys.argv[2], "Adagrad_mirrored2", strategy=strategy)
    print(json.dumps(result))
""")


@pytest.mark.slow
def test_head_train_path_on_two_replicas_matches_legacy(tmp_path):
    """MirroredStrategy over 2 logical CPUs through RunConfig(train_distribute=...): the
    checkpoint's values and evaluate()'s loss equal legacy's bit for bit (a sum of two
    gradients is the same in either all-reduce).

    A training hook fetching the spec's `loss` gets replica 0's loss, as legacy's (the
    first device's hook; `loop/hooks.py`). One difference, outside the optimizer: legacy's
    checkpoint also holds each slot's second mirrored copy under `<slot>/replica_1` (equal
    to the slot, checked here); ours holds each slot once."""
    recorder, legacy = _legacy("Adagrad_mirrored2")
    here = os.path.dirname(os.path.abspath(__file__))
    done = subprocess.run(
        [sys.executable, "-c", _TWO_REPLICAS, os.path.join(here, "legacy_recorder"),
         str(tmp_path)], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    shim = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(shim["losses"]) == len(legacy["losses"]) == recorder.STEPS
    np.testing.assert_array_equal(np.float32(shim["losses"]), np.float32(legacy["losses"]))
    assert np.float32(shim["eval_loss"]) == np.float32(legacy["eval_loss"])
    assert shim["global_step"] == legacy["global_step"] == recorder.STEPS
    copies = {n for n in legacy["variables"] if n.endswith("/replica_1")}
    assert copies
    for name in copies:
        assert legacy["variables"][name] == legacy["variables"][name[:-len("/replica_1")]]
    assert sorted(shim["variables"]) == sorted(set(legacy["variables"]) - copies)
    for name, got in shim["variables"].items():
        want = legacy["variables"][name]
        assert got["shape"] == want["shape"], name
        np.testing.assert_array_equal(np.asarray(got["value"], np.float32),
                                      np.asarray(want["value"], np.float32), err_msg=name)
