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


@pytest.mark.slow
def test_import_sets_legacy_keras_before_first_touch():
    """Set before TensorFlow loads, too: TF's __init__ otherwise imports Keras 3's optimizers
    (with scikit-learn and SciPy, ~1.7 s of start-up) though tf.keras will be tf-keras."""
    done = run("import sys\nimport tpu_estimator_compat as t, tensorflow as tf\n"
               "print('loaded:', sorted({'keras', 'sklearn'} & set(sys.modules)))\n"
               "import logging\nprint('root handlers:', logging.getLogger().handlers)\n"
               "print(tf.keras.layers.Dense.__module__)\n"
               "t.TPUEstimator(model_fn=lambda features, labels, mode, params: None,"
               " config=t.RunConfig(), use_tpu=False)\nprint('ok')", {})
    assert done.returncode == 0, done.stderr
    assert "tf_keras" in done.stdout and "ok" in done.stdout
    assert "loaded: []" in done.stdout, done.stdout
    # Nothing logged at import: TensorFlow's own logger keeps its INFO:tensorflow: lines.
    assert "root handlers: []" in done.stdout, done.stdout


@pytest.mark.slow
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
    from tpu_estimator_compat.v1_state import keras_env

    seen = []
    layer = tf.keras.layers.BatchNormalization(momentum=0.9)

    @tf.function
    def call(x):
        seen.append(type(layer.momentum))
        return layer(x, training=True)

    with keras_env.tf1_graph_keras():
        pass  # Installs the patch.
    call(tf.ones([4, 2, 2, 3]))
    assert layer.momentum == 0.9 and set(seen) == {float}
    graph = call.get_concrete_function(tf.ones([4, 2, 2, 3])).graph
    ops = {op.type for op in graph.get_operations()}
    assert "AssignSubVariableOp" not in ops, "outside the scope tf_keras keeps its fused average"


# ----------------------------------------------------------------------------------------
# Keras functional models built on model_fn's own tensors, as legacy's graph-mode Keras took.


def _functional_model_fn(style):
    from tpu_estimator_compat import TPUEstimatorSpec

    def model_fn(features, labels, mode, params):
        v1 = tf.compat.v1
        if style == "input_tensor":  # tf.keras.applications(..., input_tensor=features) style.
            inputs = tf.keras.layers.Input(tensor=features)
            hidden = tf.keras.layers.Dense(
                6, activation="relu", kernel_initializer=v1.glorot_uniform_initializer(seed=1))
            out = tf.keras.layers.Dense(
                3, kernel_initializer=v1.glorot_uniform_initializer(seed=2))
            model = tf.keras.Model(inputs, out(hidden(inputs)))
            logits = model.output  # A plain graph tensor, as in legacy's graph.
        else:  # Build on Input(tensor=...) and then call the model on the features.
            inputs = tf.keras.layers.Input(tensor=features)
            model = tf.keras.Model(inputs, tf.keras.layers.Dense(
                3, kernel_initializer=v1.glorot_uniform_initializer(seed=2))(inputs))
            logits = model(features)
        if mode == "infer":
            return TPUEstimatorSpec(mode, predictions={"logits": logits})
        loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
        train_op = v1.train.GradientDescentOptimizer(0.5).minimize(
            loss, v1.train.get_global_step())
        with tf.control_dependencies(model.updates):
            train_op = tf.group(train_op)
        return TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

    return model_fn


def _functional_data():
    rng = np.random.RandomState(0)
    return (rng.standard_normal([64, 4]).astype(np.float32),
            rng.randint(0, 3, [64]).astype(np.int32))


@pytest.mark.slow_cases('mirrored8-input_tensor', 'mirrored8-call_on_features')
@pytest.mark.parametrize("style", ["input_tensor", "call_on_features"])
def test_keras_functional_model_on_model_fn_tensors_trains(strategy, tmp_path, style):
    """`Input(tensor=features)` / `Model(...)` inside model_fn: legacy graph Keras took them."""
    from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator

    def input_fn(params):
        return tf.data.Dataset.from_tensor_slices(_functional_data()).repeat().batch(
            params["batch_size"], drop_remainder=True)

    estimator = TPUEstimator(
        model_fn=_functional_model_fn(style), use_tpu=True, train_batch_size=16,
        predict_batch_size=16,
        config=RunConfig(model_dir=str(tmp_path), tf_random_seed=1, train_distribute=strategy,
                         tpu_config=TPUConfig(iterations_per_loop=4)))
    estimator.train(input_fn, max_steps=8)
    reader = tf.train.load_checkpoint(str(tmp_path))
    assert reader.get_tensor("global_step") == 8
    names = set(reader.get_variable_to_shape_map())
    assert "dense/kernel" in names or "dense_1/kernel" in names, sorted(names)

    def predict_input_fn(params):
        return tf.data.Dataset.from_tensor_slices(_functional_data()[0]).batch(
            params["batch_size"])

    logits = np.stack([p["logits"] for p in estimator.predict(predict_input_fn)])
    assert logits.shape == (64, 3) and np.all(np.isfinite(logits))


def test_graph_view_is_scoped_to_replica_steps():
    """Outside model_fn, Keras keeps TF2 KerasTensors and the public answer is the true one."""
    from tpu_estimator_compat.v1_state import keras_env

    with keras_env.tf1_graph_keras():
        assert not tf.compat.v1.executing_eagerly_outside_functions()
    assert tf.compat.v1.executing_eagerly_outside_functions()
    assert type(tf.keras.layers.Input([3])).__name__ == "KerasTensor"


# ----------------------------------------------------------------------------------------
# Layers made inside another layer's build() (efficientdet's FNode / ResampleFeatureMap).


class _OuterLayer(tf.keras.layers.Layer):
    """Makes its sublayer in build(), which tf_keras runs under init_scope."""

    def build(self, input_shape):
        self.inner = tf.keras.layers.Dense(
            4, name="inner", kernel_initializer=tf.compat.v1.glorot_uniform_initializer(seed=1))
        super().build(input_shape)

    def call(self, x):
        return self.inner(x)


@pytest.mark.slow_cases('mirrored8')
def test_layer_made_in_build_keeps_model_fn_layers_v1(strategy, tmp_path):
    """A Dense made in model_fn, then a Dense made in another layer's build(), then the first
    one called: legacy's graph made both v1 layers. Without the graph view's answer the second
    one swapped the shared classes to v2 (`'Dense' object has no attribute
    '_saved_model_inputs_spec'`, or `_set_mask_metadata() missing ... 'build_graph'`)."""
    from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator, TPUEstimatorSpec

    def model_fn(features, labels, mode, params):
        v1 = tf.compat.v1
        head = tf.keras.layers.Dense(1, name="head",
                                     kernel_initializer=v1.glorot_uniform_initializer(seed=2))
        logits = head(_OuterLayer(name="outer")(features))
        loss = tf.reduce_mean(tf.square(logits - labels))
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, v1.train.get_global_step())
        return TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

    def input_fn(params):
        x = np.random.RandomState(0).rand(64, 3).astype(np.float32)
        return tf.data.Dataset.from_tensor_slices((x, x.sum(1, keepdims=True))).repeat().batch(
            params["batch_size"], drop_remainder=True)

    estimator = TPUEstimator(
        model_fn=model_fn, use_tpu=True, train_batch_size=16,
        config=RunConfig(model_dir=str(tmp_path), tf_random_seed=1, train_distribute=strategy,
                         tpu_config=TPUConfig(iterations_per_loop=2)))
    estimator.train(input_fn, max_steps=4)
    reader = tf.train.load_checkpoint(str(tmp_path))
    assert reader.get_tensor("global_step") == 4
    names = set(reader.get_variable_to_shape_map())
    assert {"head/kernel", "outer/inner/kernel"} <= names, sorted(names)


def test_graph_view_makes_v1_layers_also_under_init_scope():
    """tf_keras builds layers under init_scope; in the graph view that is still TF1's graph."""
    from tf_keras.src.engine import base_layer_v1
    from tf_keras.src.utils import version_utils

    from tpu_estimator_compat.v1_state import keras_env

    with keras_env.tf1_graph_keras():
        with tf.init_scope():  # What tf_keras enters around build(): eager here.
            inner = tf.keras.layers.Dense(2)
            use_v2 = version_utils.should_use_v2()
    assert not use_v2
    assert isinstance(inner, base_layer_v1.Layer)
    assert version_utils.should_use_v2(), "outside the graph view tf_keras answers as before"
