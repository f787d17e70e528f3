"""The hybrid route: tensorflow-estimator 2.15.0's canned estimators on this library's engine.

Mirrors `legacy/import_hook.py` (the engine paths it serves when the real package is
installed), `legacy/estimator_map.py` (`HYBRID_MODULES`, `PACKAGE_NAMES`) and
`legacy/estimator_names.py` (the lazy public names). Tests that need the real package skip
without it; run them against the unpacked wheel with
`PYTHONPATH=$PWD:/path/to/site .venv/bin/python -m pytest -n 0 tests/test_canned_import.py`.
"""
import importlib
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from sklearn.datasets import load_digits

import tpu_estimator_compat
from tpu_estimator_compat.api import estimator as estimator_lib
from tpu_estimator_compat.legacy import estimator_map
from tpu_estimator_compat.legacy import estimator_names
from tpu_estimator_compat.legacy import namespaces

needs_package = pytest.mark.skipif(
    not estimator_map.package_installed(),
    reason="tensorflow-estimator 2.15.0 is not installed (requirements-dev.txt pins it)")
_TFE = estimator_map.TFE_PRIVATE
# Legacy's prediction keys of a classifier head (tensorflow-estimator 2.15.0).
_CLASSIFIER_KEYS = ["all_class_ids", "all_classes", "class_ids", "classes", "logits",
                    "probabilities"]


@pytest.fixture(scope="module", autouse=True)
def installed():
    tpu_estimator_compat.install_aliases()


def test_install_aliases_imports_none_of_the_real_package():
    code = ("import sys, tpu_estimator_compat\n"
            "tpu_estimator_compat.install_aliases()\n"
            "import tensorflow as tf\n"
            "tf.compat.v1.estimator.Estimator\n"
            "print(sorted(m for m in sys.modules if m.startswith('tensorflow_estimator.')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_without_the_package_canned_names_are_placeholders_naming_it(monkeypatch):
    monkeypatch.setattr(estimator_map, "package_installed", lambda: False)
    namespace = estimator_names.build_estimator_namespace()
    with pytest.raises(namespaces.LegacySymbolUnavailableError,
                       match=r"DNNClassifier`.*tensorflow-estimator==2\.15\.0"):
        namespace.DNNClassifier([16], [])
    with pytest.raises(namespaces.LegacySymbolUnavailableError, match="tensorflow-estimator"):
        namespace.experimental.stop_if_no_decrease_hook(None, "loss", 10)
    assert "DNNClassifier" in estimator_map.refused_names()[""]


def test_call_logit_fn_passes_the_arguments_logit_fn_names():
    call = tf.compat.v1.estimator.experimental.call_logit_fn
    logits = call(lambda features, mode: features * (2.0 if mode == "train" else 1.0),
                  tf.constant([1.0]), "train", None, None)
    assert logits.numpy().tolist() == [2.0]
    with pytest.raises(ValueError, match="logit_fn should return a Tensor"):
        call(lambda features: [features], tf.constant([1.0]), "train", None, None)


@needs_package
def test_engine_paths_are_ours_and_model_modules_the_package_s():
    served = {name: importlib.import_module(f"{_TFE}.{name}")
              for name in ("estimator", "model_fn", "run_config", "training",
                           "tpu.tpu_estimator")}
    assert served["estimator"].Estimator is estimator_lib.Estimator
    assert served["estimator"].EstimatorV2 is estimator_lib.Estimator
    assert served["model_fn"].EstimatorSpec is tpu_estimator_compat.EstimatorSpec
    assert served["run_config"].RunConfig is tpu_estimator_compat.config.EstimatorRunConfig
    assert importlib.import_module(f"{_TFE}.tpu.tpu_config").RunConfig is (
        tpu_estimator_compat.RunConfig)
    assert served["training"].train_and_evaluate is tf.estimator.train_and_evaluate
    assert served["tpu.tpu_estimator"].TPUEstimator is tpu_estimator_compat.TPUEstimator
    assert served["estimator"]._load_global_step_from_checkpoint_dir("/nonexistent") == 0
    assert served["run_config"].TaskType.EVALUATOR == "evaluator"
    for name in ("_canned_estimator_api_gauge", "_estimator_api_gauge"):
        assert hasattr(getattr(served["estimator"], name), "get_cell"), name
    for relative in ("canned.dnn", "head.multi_class_head", "early_stopping", "exporter"):
        assert estimator_map.hybrid_owner(relative) == estimator_map.MODEL
        module = importlib.import_module(f"{_TFE}.{relative}")
        assert module.__file__.endswith(relative.replace(".", os.sep) + ".py"), relative


@needs_package
@pytest.mark.parametrize("v2, namespace, name", [
    (v2, ns, name) for v2 in (False, True)
    for ns, names in estimator_map.package_names(v2).items() for name in names])
def test_public_names_are_the_package_s_objects(v2, namespace, name):
    module, _, attribute = estimator_map.package_names(v2)[namespace][name].partition(":")
    real = getattr(importlib.import_module(f"{_TFE}.{module}"), attribute)
    served = tf.estimator if v2 else tf.compat.v1.estimator
    for part in filter(None, namespace.split(".")):
        served = getattr(served, part)
    assert getattr(served, name) is real


_CLASSES = ["BaselineClassifier", "DNNClassifier", "LinearClassifier",
            "DNNLinearCombinedClassifier"]


def _canned(name, v2):
    """tf.compat.v1.estimator.<name>, or tf.estimator.<name>: legacy's `<name>V2`."""
    return getattr(tf.estimator if v2 else tf.compat.v1.estimator, name)


@needs_package
@pytest.mark.parametrize("name", sorted(estimator_map.PACKAGE_NAMES_V2))
def test_v2_roots_serve_legacy_v2_objects(name):
    module, _, attribute = estimator_map.PACKAGE_NAMES_V2[name].partition(":")
    real = getattr(importlib.import_module(f"{_TFE}.{module}"), attribute)
    assert getattr(tf.estimator, name) is real
    assert tf.compat.v2.estimator is tf.estimator
    assert getattr(tf.compat.v1.estimator, name) is not real


def _digits(n=64):
    digits = load_digits()
    return (digits.data[:n] / 16.0).astype(np.float32), digits.target[:n].astype(np.int32)


def _build(name, v2, model_dir):
    columns = [tf.feature_column.numeric_column("pixels", shape=(64,))]
    kwargs = {"n_classes": 10, "model_dir": str(model_dir)}
    if name == "DNNClassifier":
        return _canned(name, v2)([16], columns, **kwargs)
    if name == "LinearClassifier":
        return _canned(name, v2)(columns, **kwargs)
    if name == "DNNLinearCombinedClassifier":
        return _canned(name, v2)(linear_feature_columns=columns, dnn_feature_columns=columns,
                                 dnn_hidden_units=[16], **kwargs)
    return _canned(name, v2)(**kwargs)


@needs_package
@pytest.mark.parametrize("v2", [False, True], ids=["v1", "v2"])
@pytest.mark.parametrize("name", _CLASSES)
def test_canned_classifier_subclasses_our_estimator_and_predicts(tmp_path, name, v2):
    assert issubclass(_canned(name, v2), estimator_lib.Estimator)
    x, _ = _digits()
    est = _build(name, v2, tmp_path)
    predictions = list(est.predict(
        lambda: tf.data.Dataset.from_tensor_slices({"pixels": x}).batch(32)))
    assert len(predictions) == len(x)
    assert sorted(predictions[0]) == _CLASSIFIER_KEYS
    assert predictions[0]["probabilities"].shape == (10,)
    np.testing.assert_allclose([p["probabilities"].sum() for p in predictions], 1.0, rtol=1e-5)
    assert [p["class_ids"][0] for p in predictions] == [
        int(np.argmax(p["logits"])) for p in predictions]


def _train_input_fn():
    x, y = _digits()
    return tf.data.Dataset.from_tensor_slices(({"pixels": x}, y)).batch(32)


# The v2 heads train with a tf_keras OptimizerV2 (its `iterations` the global step) and put
# Keras Metric objects in eval_metric_ops; the v1 heads take v1 optimizers and metric pairs.
# Both run in the compiled replica step.
@needs_package
@pytest.mark.slow_cases("Baseline*", "Linear*", "DNNLinear*")
@pytest.mark.parametrize("v2", [False, True], ids=["v1", "v2"])
@pytest.mark.parametrize("name", _CLASSES)
def test_canned_classifier_trains_and_evaluates(tmp_path, name, v2):
    est = _build(name, v2, tmp_path)
    est.train(_train_input_fn, steps=2)
    metrics = est.evaluate(_train_input_fn, steps=2)
    assert sorted(metrics) == ["accuracy", "average_loss", "global_step", "loss"]
    assert metrics["global_step"] == 2
    assert np.isfinite(metrics["loss"]) and 0.0 <= metrics["accuracy"] <= 1.0
    assert est.get_variable_value("global_step") == 2


_GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "goldens",
                       "estimator_namespaces", "legacy.json")


def _dnn(root, optimizer, model_dir):
    columns = [tf.feature_column.numeric_column("pixels", shape=(64,))]
    return root.DNNClassifier([16], columns, n_classes=10, optimizer=optimizer,
                              model_dir=str(model_dir))


@needs_package
def test_v2_dnn_classifier_with_a_keras_optimizer_instance_saves_legacy_s_names(tmp_path):
    """tests/legacy_recorder/estimator_namespaces.py's `canned.v2`: `tf.estimator.DNNClassifier`
    with a `tf.keras.optimizers.legacy.Adagrad` instance, 2 steps: the same class, checkpoint
    variables (`training/Adagrad/...` slots) and evaluate() keys as legacy's."""
    import json

    with open(_GOLDEN) as f:
        legacy = json.load(f)["canned"]["v2"]
    est = _dnn(tf.estimator, tf.keras.optimizers.legacy.Adagrad(0.05), tmp_path)
    assert f"{type(est).__module__}:{type(est).__qualname__}" == legacy["class"]
    est.train(_train_input_fn, steps=2)
    metrics = est.evaluate(_train_input_fn, steps=1)
    assert sorted(metrics) == legacy["evaluate_keys"] and metrics["global_step"] == 2
    saved = {name: shape for name, shape in tf.train.list_variables(est.latest_checkpoint())}
    assert saved == legacy["variables"]
    x, _ = _digits()
    predictions = list(est.predict(
        lambda: tf.data.Dataset.from_tensor_slices({"pixels": x}).batch(32)))
    assert len(predictions) == len(x) and sorted(predictions[0]) == _CLASSIFIER_KEYS


@needs_package
def test_v2_classifier_refuses_a_non_legacy_keras_optimizer_as_legacy_did(tmp_path):
    import json

    with open(_GOLDEN) as f:
        legacy = json.load(f)["keras_new_optimizer"]
    est = _dnn(tf.estimator, tf.keras.optimizers.Adam(), tmp_path)
    with pytest.raises(ValueError) as raised:
        est.train(_train_input_fn, steps=1)
    # Legacy named Keras 2.15's class (`keras.src...`); here it is tf_keras's.
    assert str(raised.value).split("Received")[0] == legacy.split("Received")[0]


@needs_package
def test_v1_classifier_refuses_a_keras_optimizer(tmp_path):
    est = _dnn(tf.compat.v1.estimator, tf.keras.optimizers.legacy.Adagrad(0.05), tmp_path)
    with pytest.raises(ValueError, match="not an Optimizer instance"):
        est.train(_train_input_fn, steps=1)


def _repeated_input_fn():
    return _train_input_fn().repeat()


@needs_package
def test_v2_classifier_trains_twice_with_one_keras_optimizer_instance(tmp_path):
    """Legacy refused a second `train()` with the same instance (a new graph's global step);
    here it continues as one longer `train()` would have."""
    def build(optimizer, model_dir):
        columns = [tf.feature_column.numeric_column("pixels", shape=(64,))]
        return tf.estimator.DNNClassifier(
            [16], columns, n_classes=10, optimizer=optimizer, model_dir=str(model_dir),
            config=tf.estimator.RunConfig(tf_random_seed=1))

    optimizer = tf.keras.optimizers.legacy.Adagrad(0.05)
    twice = build(optimizer, tmp_path / "twice")
    twice.train(_repeated_input_fn, steps=2)
    twice.train(_repeated_input_fn, steps=2)
    once = build(tf.keras.optimizers.legacy.Adagrad(0.05), tmp_path / "once")
    once.train(_repeated_input_fn, steps=4)
    assert twice.get_variable_names() == once.get_variable_names()
    for name in once.get_variable_names():
        np.testing.assert_array_equal(twice.get_variable_value(name),
                                      once.get_variable_value(name), err_msg=name)
    assert twice.get_variable_value("global_step") == 4
