"""Keras 2 arrangement: set when possible, a clear error when Keras 3 was loaded first."""

import os
import subprocess
import sys

import pytest

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
