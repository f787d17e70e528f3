"""Tests for tpu_estimator_compat.legacy.estimator_names: legacy's two estimator namespaces.

The name sets are checked against `tests/goldens/estimator_namespaces/legacy.json`, recorded
on TF 2.15.1 + tensorflow-estimator 2.15.0 by `tests/legacy_recorder/estimator_namespaces.py`
(`dir()` of `tf.compat.v1.estimator` and `tf.estimator` and their sub-namespaces).
"""
import json
import os
import types

import pytest
import tensorflow as tf

import tpu_estimator_compat
from tpu_estimator_compat.legacy import estimator_map
from tpu_estimator_compat.legacy import estimator_names
from tpu_estimator_compat.legacy import namespaces

_GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "goldens",
                       "estimator_namespaces", "legacy.json")
with open(_GOLDEN) as _f:
    LEGACY = json.load(_f)


@pytest.fixture(scope="module", autouse=True)
def installed():
    tpu_estimator_compat.install_aliases()


def _sub(root, namespace):
    for part in filter(None, namespace.split(".")):
        root = getattr(root, part)
    return root


def _names(namespace):
    """Public names that are not sub-namespaces (the recorder lists those on their own)."""
    return {n for n in namespaces.public_names(namespace)
            if not isinstance(vars(namespace).get(n), types.ModuleType)}


def _check_name_sets(built, version):
    legacy = LEGACY["namespaces"][version]
    extra = set(estimator_map.V2_EXTRA_NAMESPACES) if version == "v2" else set()
    assert set(estimator_map.NAMESPACES) == set(legacy) | extra
    for namespace in estimator_map.NAMESPACES:
        expected = set(legacy.get(namespace, {}))
        if namespace in extra:  # Served at v2 as at v1 (the v1 tree's names).
            expected = set(LEGACY["namespaces"]["v1"][namespace])
        assert _names(_sub(built, namespace)) == expected, (version, namespace)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_name_sets_are_legacy_s(version):
    built = estimator_names.build_estimator_namespaces()[version]
    _check_name_sets(built, version)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_name_sets_are_legacy_s_without_the_package(monkeypatch, version):
    """Placeholders stand for every name the package would supply, at the same roots."""
    monkeypatch.setattr(estimator_map, "package_installed", lambda: False)
    built = estimator_names.build_estimator_namespaces()[version]
    _check_name_sets(built, version)
    if version == "v2":
        with pytest.raises(namespaces.LegacySymbolUnavailableError, match="tensorflow-estimator"):
            built.experimental.RNNClassifier()


def test_v2_only_and_v1_only_names_are_refused_at_the_other_root_naming_it():
    with pytest.raises(namespaces.LegacySymbolError,
                       match=r"tf\.compat\.v1\.estimator\.experimental\.KMeans"):
        tf.estimator.experimental.KMeans  # noqa: B018
    with pytest.raises(namespaces.LegacySymbolError,
                       match=r"tf\.compat\.v2\.estimator\.experimental\.RNNClassifier"):
        tf.compat.v1.estimator.experimental.RNNClassifier  # noqa: B018
    with pytest.raises(ImportError, match="KMeans"):
        from tensorflow.estimator.experimental import KMeans  # noqa: F401
    assert estimator_map.verdict("experimental.KMeans", v2=True)[0] == estimator_map.REFUSED
    assert estimator_map.verdict("experimental.KMeans")[0] == estimator_map.SERVED


@pytest.mark.skipif(not estimator_map.package_installed(),
                    reason="tensorflow-estimator 2.15.0 is not installed")
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_package_names_are_legacy_s_objects(version):
    """Where legacy's name was the package's object, ours is the same (module, qualname):
    `tf.estimator.DNNClassifier` is `canned.dnn.DNNClassifierV2`."""
    root = tf.estimator if version == "v2" else tf.compat.v1.estimator
    for namespace, names in estimator_map.package_names(version == "v2").items():
        for name in names:
            value = getattr(_sub(root, namespace), name)
            got = f"{value.__module__}:{value.__qualname__}"
            assert got == LEGACY["namespaces"][version][namespace][name], (namespace, name)


def test_each_root_serves_its_namespace_and_shares_the_rest():
    v1, v2 = tf.compat.v1.estimator, tf.estimator
    assert v1 is not v2
    for root in (tf.compat.v2, tf.compat.v1.compat.v2, tf.compat.v2.compat.v2):
        assert root.estimator is v2
    for root in (tf.compat.v1.compat.v1, tf.compat.v2.compat.v1):
        assert root.estimator is v1
    assert v1.tpu is v2.tpu and v1.export is v2.export and v1.inputs is v2.inputs
    assert v1.experimental is not v2.experimental
    for name in ("Estimator", "EstimatorSpec", "RunConfig", "ModeKeys", "train_and_evaluate",
                 "LoggingTensorHook", "WarmStartSettings"):
        assert getattr(v1, name) is getattr(v2, name), name
    assert v1.experimental.call_logit_fn is v2.experimental.call_logit_fn
    assert LEGACY["v2_is_compat_v2"]


def test_private_modules_still_hold_the_v2_only_names(monkeypatch):
    """Legacy's `canned/rnn.py` defined RNNClassifier; a private module path reaches it (or,
    without the package, its placeholder) though `tf.compat.v1.estimator` has no such name."""
    import importlib

    from tpu_estimator_compat.scan import names  # pylint: disable=import-outside-toplevel

    module = importlib.import_module("tensorflow.python.estimator.canned.rnn")
    assert module.RNNClassifier is tf.estimator.experimental.RNNClassifier
    expected = names.SERVED if estimator_map.package_installed() else names.REFUSED
    assert names.judge("tensorflow.python.estimator.canned.rnn.RNNClassifier").status == expected
    assert estimator_map.private_verdict("canned.rnn", "RNNClassifier")[0] == expected
    monkeypatch.setattr(estimator_map, "package_installed", lambda: False)
    status, note = estimator_map.private_verdict("canned.rnn", "RNNClassifier")
    assert status == names.REFUSED and "tensorflow-estimator==2.15.0" in note  # Placeholder's.
