"""The plain `tf.estimator.Estimator` on the engine: legacy argument matching, train,
evaluate with `eval_metric_ops`, predict, export, and `RunConfig(train_distribute=...)`.

Every test runs for real and reads what was written back with TensorFlow's own readers.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator_compat
from tpu_estimator_compat import TPUEstimator, TPUEstimatorSpec
from tpu_estimator_compat.api.estimator import Estimator

tpu_estimator_compat.install_aliases()
v1 = tf.compat.v1

_RNG = np.random.RandomState(0)
X = _RNG.rand(64, 3).astype(np.float32)
Y = (X.sum(axis=1) > 1.5).astype(np.int32)
BATCH = 8


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(BATCH)


def linear_model_fn(features, labels, mode):
    """Two-class logistic regression in tf.compat.v1 layers, as r1 tutorials wrote it."""
    logits = v1.layers.dense(features["x"], 2, kernel_initializer=v1.zeros_initializer())
    classes = tf.argmax(logits, axis=1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"classes": classes,
                                                             "logits": logits})
    loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = v1.train.GradientDescentOptimizer(0.5).minimize(
        loss, global_step=v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(
        mode, loss=loss, train_op=train_op,
        eval_metric_ops={"accuracy": v1.metrics.accuracy(labels, classes)})


def checkpoint_values(path):
    reader = tf.train.load_checkpoint(path)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _logits(values, x):
    return x @ values["dense/kernel"] + values["dense/bias"]


def test_public_paths_serve_the_one_estimator():
    from tensorflow_estimator.python.estimator import estimator as estimator_module

    assert tf.estimator.Estimator is Estimator
    assert tf.compat.v1.estimator.Estimator is Estimator
    assert estimator_module.Estimator is Estimator
    assert estimator_module.EstimatorV2 is Estimator
    assert issubclass(TPUEstimator, Estimator)  # As legacy's class tree had it.


def test_train_evaluate_predict_one_replica(tmp_path):
    est = tf.estimator.Estimator(linear_model_fn, model_dir=str(tmp_path),
                                 config=tf.estimator.RunConfig(tf_random_seed=3))
    est.train(input_fn, steps=5)
    values = checkpoint_values(est.latest_checkpoint())
    assert est.latest_checkpoint() == os.path.join(str(tmp_path), "model.ckpt-5")
    assert sorted(est.get_variable_names()) == ["dense/bias", "dense/kernel", "global_step"]
    assert values["global_step"] == 5
    np.testing.assert_array_equal(est.get_variable_value("dense/kernel"),
                                  values["dense/kernel"])
    assert np.abs(values["dense/kernel"]).sum() > 0  # It learnt from the zero start.

    expected_classes = np.argmax(_logits(values, X), axis=1)
    metrics = est.evaluate(input_fn)
    assert metrics["global_step"] == 5
    np.testing.assert_allclose(metrics["accuracy"], np.mean(expected_classes == Y), rtol=1e-6)
    assert tf.io.gfile.glob(os.path.join(est.eval_dir(), "events.out.tfevents.*"))

    predictions = list(est.predict(input_fn))
    assert len(predictions) == len(X)  # Every example once, in order.
    np.testing.assert_array_equal([p["classes"] for p in predictions], expected_classes)
    np.testing.assert_allclose([p["logits"] for p in predictions], _logits(values, X),
                               rtol=1e-5, atol=1e-6)


def test_train_until_input_ends_and_resume_to_max_steps(tmp_path):
    est = tf.estimator.Estimator(linear_model_fn, model_dir=str(tmp_path))
    est.train(input_fn)  # No steps: until input_fn's 8 batches are used up.
    assert checkpoint_values(est.latest_checkpoint())["global_step"] == len(X) // BATCH
    est.train(lambda: input_fn().repeat(), max_steps=11)
    assert checkpoint_values(est.latest_checkpoint())["global_step"] == 11


def test_train_distribute_feeds_each_replica_one_input_fn_batch(tmp_path, strategy):
    """Legacy's distributed Estimator gave each replica its own element of input_fn's
    dataset and averaged the replicas' gradients: one step on R replicas equals one step on
    the concatenation of R batches."""
    replicas = strategy.num_replicas_in_sync
    config = tf.estimator.RunConfig(train_distribute=strategy)
    est = tf.estimator.Estimator(linear_model_fn, model_dir=str(tmp_path / "dist"),
                                 config=config)
    est.train(input_fn, steps=1)
    distributed = checkpoint_values(est.latest_checkpoint())
    assert distributed["global_step"] == 1

    def global_input_fn():
        return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(BATCH * replicas)

    ref = tf.estimator.Estimator(linear_model_fn, model_dir=str(tmp_path / "one"))
    ref.train(global_input_fn, steps=1)
    one = checkpoint_values(ref.latest_checkpoint())
    for name in ("dense/kernel", "dense/bias"):
        np.testing.assert_allclose(distributed[name], one[name], rtol=1e-5, atol=1e-6)
    # Without eval_distribute, legacy evaluated on one device: every example once.
    metrics = est.evaluate(input_fn)
    expected = np.argmax(_logits(distributed, X), axis=1)
    np.testing.assert_allclose(metrics["accuracy"], np.mean(expected == Y), rtol=1e-6)


def _features_only_model_fn(features):
    loss = tf.reduce_mean(v1.layers.dense(features["x"], 1))
    return tf.estimator.EstimatorSpec(
        "train", loss=loss, train_op=v1.assign_add(v1.train.get_global_step(), 1))


@pytest.mark.parametrize("model_fn, params", [
    (lambda features, labels, mode, params, config: linear_model_fn(features, labels, mode),
     {"lr": 1}),
    (lambda features, labels: linear_model_fn(features, labels, "train"), None),
    (lambda features, labels, config: linear_model_fn(features, labels, "train"), None),
])
def test_model_fn_gets_the_arguments_it_names(tmp_path, model_fn, params):
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path), params=params)
    est.train(input_fn, steps=1)
    assert checkpoint_values(est.latest_checkpoint())["global_step"] == 1


def test_params_reach_model_fn_and_input_fn_as_given(tmp_path):
    seen = {}

    def model_fn(features, labels, mode, params, config):
        seen["model_fn"] = (dict(params), config.model_dir)
        return linear_model_fn(features, labels, mode)

    def my_input_fn(params, mode, config):
        seen["input_fn"] = (dict(params), mode, config.model_dir)
        return input_fn()

    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path), params={"units": 2})
    est.train(my_input_fn, steps=1)
    # No batch_size, use_tpu or context: those were TPUEstimator's.
    assert seen["model_fn"] == ({"units": 2}, str(tmp_path))
    assert seen["input_fn"] == ({"units": 2}, "train", str(tmp_path))
    assert est.params == {"units": 2}


def test_features_only_model_fn_with_labelless_input(tmp_path):
    est = tf.estimator.Estimator(_features_only_model_fn, model_dir=str(tmp_path))
    est.train(lambda: tf.data.Dataset.from_tensor_slices({"x": X}).batch(BATCH), steps=2)
    assert checkpoint_values(est.latest_checkpoint())["global_step"] == 2
    with pytest.raises(ValueError, match="model_fn does not take labels"):
        est.train(input_fn, steps=1)


@pytest.mark.parametrize("model_fn, params, match", [
    (lambda labels, mode: None, None, "must include features argument"),
    (lambda features, labels: None, {"a": 1}, "does not include params argument, but params"),
    (lambda features, labels, hparams: None, None, r"not expected args: \['hparams'\]"),
])
def test_bad_model_fn_signature_gets_legacy_error(tmp_path, model_fn, params, match):
    with pytest.raises(ValueError, match=match):
        tf.estimator.Estimator(model_fn, model_dir=str(tmp_path), params=params)


def test_bad_construction_gets_legacy_errors(tmp_path):
    with pytest.raises(ValueError, match="model_fn must be provided to Estimator"):
        tf.estimator.Estimator(None)
    with pytest.raises(ValueError, match="config must be an instance of `RunConfig`"):
        tf.estimator.Estimator(linear_model_fn, config={"model_dir": str(tmp_path)})


def test_tpu_estimator_spec_is_refused_as_legacy_refused_it(tmp_path):
    def model_fn(features, labels, mode):
        spec = linear_model_fn(features, labels, mode)
        return TPUEstimatorSpec(mode, loss=spec.loss, train_op=spec.train_op)

    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    with pytest.raises(ValueError, match="model_fn should return an EstimatorSpec"):
        est.train(input_fn, steps=1)


def test_training_chief_hooks_run_on_the_chief(tmp_path):
    class CountHook(v1.train.SessionRunHook):
        runs = 0

        def after_run(self, run_context, run_values):
            CountHook.runs += 1

    def model_fn(features, labels, mode):
        spec = linear_model_fn(features, labels, mode)
        return spec._replace(training_chief_hooks=[CountHook()])

    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(input_fn, steps=3)
    assert CountHook.runs == 3  # One step per session.run, as legacy.


def test_export_saved_model_serves_the_checkpoint(tmp_path):
    est = tf.estimator.Estimator(linear_model_fn, model_dir=str(tmp_path / "model"))
    est.train(input_fn, steps=3)
    values = checkpoint_values(est.latest_checkpoint())

    def receiver():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        return tf.estimator.export.ServingInputReceiver({"x": x}, {"x": x})

    path = est.export_saved_model(str(tmp_path / "export"), receiver)
    loaded = tf.saved_model.load(path.decode() if isinstance(path, bytes) else path)
    out = loaded.signatures["serving_default"](x=tf.constant(X[:4]))
    np.testing.assert_allclose(out["logits"].numpy(), _logits(values, X[:4]), rtol=1e-5,
                               atol=1e-6)


# Replayed against tests/goldens/estimator_plain/legacy.json (recorded by
# tests/legacy_recorder/estimator_plain.py on the legacy stack, TF_ENABLE_ONEDNN_OPTS=0).

def test_plain_estimator_matches_legacy_bit_for_bit(tmp_path):
    """The r1 script unchanged: per-step losses, evaluate()'s metrics (a train_op built in
    every mode, never run outside TRAIN), predictions and the checkpoint's names, shapes and
    values equal legacy's on one replica."""
    from conftest import legacy_recorder

    recorder, golden = legacy_recorder("estimator_plain")
    shim, legacy = recorder.run(str(tmp_path)), golden["legacy"]
    np.testing.assert_array_equal(np.float32(shim["losses"]), np.float32(legacy["losses"]))
    assert shim["metrics"].keys() == legacy["metrics"].keys()
    for name, value in legacy["metrics"].items():
        assert np.float32(shim["metrics"][name]) == np.float32(value), name
    assert shim["global_step"] == legacy["global_step"] == recorder.STEPS
    assert shim["checkpoint"] == legacy["checkpoint"]
    for key in ("class_ids", "logits"):
        np.testing.assert_array_equal(np.asarray(shim["predictions"][key], np.float32),
                                      np.asarray(legacy["predictions"][key], np.float32),
                                      err_msg=key)
    # From bit-equal logits, TF 2.21's softmax kernel rounds ~1 in 8 values 1 ulp apart
    # from TF 2.15's (measured: at most 1.5e-8 absolute): the kernel's, not the engine's.
    np.testing.assert_array_max_ulp(
        np.asarray(shim["predictions"]["probabilities"], np.float32),
        np.asarray(legacy["predictions"]["probabilities"], np.float32), maxulp=2)
    assert sorted(shim["variables"]) == sorted(legacy["variables"])
    for name, want in legacy["variables"].items():
        got = shim["variables"][name]
        assert got["shape"] == want["shape"], name
        np.testing.assert_array_equal(np.asarray(got["value"], np.float32),
                                      np.asarray(want["value"], np.float32), err_msg=name)
