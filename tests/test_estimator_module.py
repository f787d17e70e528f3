"""`api/estimator_module.py`: legacy's `estimator` module functions beside the class."""

import os

import pytest
import tensorflow as tf

import tpu_estimator_compat
from tpu_estimator_compat import RunConfig
from tpu_estimator_compat.api import estimator_module

_overwrite = estimator_module.maybe_overwrite_model_dir_and_session_config


def test_served_at_legacy_s_estimator_module():
    tpu_estimator_compat.install_aliases()  # Serves legacy's module paths.
    from tensorflow.python.estimator import estimator  # pylint: disable=g-direct-tensorflow-import

    assert estimator.maybe_overwrite_model_dir_and_session_config is _overwrite


def test_no_config_is_a_default_one_with_legacy_s_session_config_and_a_temporary_dir(caplog):
    caplog.set_level("INFO")
    config = _overwrite(None, None)
    # tf.estimator.RunConfig (legacy's run_config.RunConfig), not TPUEstimator's subclass.
    assert type(config) is tf.estimator.RunConfig
    assert os.path.isdir(config.model_dir)
    assert config.session_config.allow_soft_placement
    assert config.session_config.graph_options.rewrite_options.meta_optimizer_iterations == 1
    assert "Using default config." in caplog.text
    assert "Using temporary folder as model directory: " + config.model_dir in caplog.text


def test_model_dir_fills_the_config_s_and_a_given_session_config_is_kept(tmp_path):
    session_config = tf.compat.v1.ConfigProto(log_device_placement=True)
    config = _overwrite(RunConfig(session_config=session_config), tmp_path)
    assert config.model_dir == str(tmp_path)
    assert config.session_config == session_config
    same = _overwrite(RunConfig(model_dir=str(tmp_path)), str(tmp_path))
    assert same.model_dir == str(tmp_path)


def test_legacy_s_errors(tmp_path):
    with pytest.raises(ValueError, match="config must be an instance of `RunConfig`"):
        _overwrite({"model_dir": str(tmp_path)}, None)
    with pytest.raises(ValueError, match="`model_dir` are set both in constructor and "
                                         "`RunConfig`, but with different values"):
        _overwrite(RunConfig(model_dir=str(tmp_path / "a")), str(tmp_path / "b"))
