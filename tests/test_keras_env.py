"""Keras 2 arrangement: set when possible, a clear error when Keras 3 was loaded first."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

pytest.importorskip("tf_keras")


def run(code, env_extra):
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    env.update(env_extra, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)


def test_import_sets_legacy_keras_before_first_touch():
    done = run("import tpu_estimator_compat as t, tensorflow as tf\n"
               "print(tf.keras.layers.Dense.__module__)\n"
               "t.TPUEstimator(model_fn=lambda features, labels, mode, params: None,"
               " config=t.RunConfig(), use_tpu=False)\nprint('ok')", {})
    assert done.returncode == 0, done.stderr
    assert "tf_keras" in done.stdout and "ok" in done.stdout


def test_keras3_loaded_first_is_a_clear_error():
    done = run("import tensorflow as tf\nprint(tf.keras.__name__)\n"
               "import tpu_estimator_compat as t\n"
               "t.TPUEstimator(model_fn=lambda features, labels, mode, params: None,"
               " config=t.RunConfig(), use_tpu=False)", {"TF_USE_LEGACY_KERAS": "0"})
    assert done.returncode != 0
    assert "tf.keras is Keras 3 in this process" in done.stderr
    assert "TF_USE_LEGACY_KERAS=1" in done.stderr


# ----------------------------------------------------------------------------------------
# Batch norm moving statistics: the TF1-graph formula inside replica steps.

_BN_STEPS = 6
_BN_BATCH = 16


def _bn_data():
    rng = np.random.RandomState(3)
    # Rank 4: tf_keras fuses batch norm (and may average in the fused kernel) only then.
    x = (rng.standard_normal([_BN_STEPS * _BN_BATCH, 3, 3, 5]) * 3 + 1.7).astype(np.float32)
    y = rng.standard_normal([_BN_STEPS * _BN_BATCH, 1]).astype(np.float32)
    return x, y


def _bn_body(x, y):
    v1 = tf.compat.v1
    h = v1.layers.batch_normalization(x, momentum=0.9, training=True)
    pred = v1.layers.dense(v1.layers.flatten(h), 1, kernel_initializer=v1.ones_initializer())
    loss = v1.losses.mean_squared_error(y, pred)
    with tf.control_dependencies(v1.get_collection(v1.GraphKeys.UPDATE_OPS)):
        train_op = v1.train.GradientDescentOptimizer(0.001).minimize(
            loss, global_step=v1.train.get_or_create_global_step())
    return loss, train_op


def _bn_stats_of_tf1_graph():
    """The moving statistics a real TF1 graph computes: legacy TPUEstimator's semantics."""
    x, y = _bn_data()
    with tf.Graph().as_default():
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(_BN_BATCH)
        features, labels = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
        _, train_op = _bn_body(features, labels)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            for _ in range(_BN_STEPS):
                session.run(train_op)
            stats = [v for v in tf.compat.v1.global_variables() if "moving_" in v.name]
            return {v.op.name: value for v, value in zip(stats, session.run(stats))}


def test_batch_norm_moving_statistics_equal_a_tf1_graph_bit_for_bit(tmp_path):
    """Without the TF1 formula, FusedBatchNormV3's own averaging differs by ~1 ulp a step."""
    from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator, TPUEstimatorSpec

    def model_fn(features, labels, mode, params):
        loss, train_op = _bn_body(features, labels)
        return TPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)

    def input_fn(params):
        return tf.data.Dataset.from_tensor_slices(_bn_data()).batch(params["batch_size"])

    estimator = TPUEstimator(
        model_fn=model_fn, use_tpu=False, train_batch_size=_BN_BATCH,
        config=RunConfig(model_dir=str(tmp_path),
                         tpu_config=TPUConfig(iterations_per_loop=_BN_STEPS)))
    estimator.train(input_fn, max_steps=_BN_STEPS)
    reader = tf.train.load_checkpoint(str(tmp_path))
    assert reader.get_tensor("global_step") == _BN_STEPS
    for name, expected in _bn_stats_of_tf1_graph().items():
        got = reader.get_tensor(name)
        assert got.tobytes() == expected.tobytes(), (name, got - expected)


def test_batch_norm_outside_replica_steps_keeps_keras_behaviour():
    """The switch is thread-local and scoped: plain Keras code elsewhere is untouched."""
    from tpu_estimator_compat import keras_env

    seen = []
    layer = tf.keras.layers.BatchNormalization(momentum=0.9)

    @tf.function
    def call(x):
        seen.append(type(layer.momentum))
        return layer(x, training=True)

    with keras_env.tf1_batch_norm_updates():
        pass  # Installs the patch.
    call(tf.ones([4, 2, 2, 3]))
    assert layer.momentum == 0.9 and set(seen) == {float}
    graph = call.get_concrete_function(tf.ones([4, 2, 2, 3])).graph
    ops = {op.type for op in graph.get_operations()}
    assert "AssignSubVariableOp" not in ops, "outside the scope tf_keras keeps its fused average"
