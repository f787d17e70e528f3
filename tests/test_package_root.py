"""Tests for the package root (`tpu_estimator_compat/__init__.py`): lazy public names.

The root loads no TensorFlow, so tools that only read code start fast; every public name
still resolves, by `from tpu_estimator_compat import X` and `tpu_estimator_compat.X`, to the
object of the module that defines it.
"""
import os
import subprocess
import sys
import textwrap

import pytest

import tpu_estimator_compat

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python(code, **env):
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": REPO, **env})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_import_loads_no_tensorflow_and_sets_legacy_keras():
    out = _python("""
        import os, sys
        import tpu_estimator_compat
        print(sorted(n for n in sys.modules if n.split('.')[0] in ('tensorflow', 'tf_keras')))
        print(os.environ['TF_USE_LEGACY_KERAS'])
    """, TF_USE_LEGACY_KERAS="")
    assert out.split("\n")[:2] == ["[]", ""]  # The user's own setting (even empty) stays.
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    done = subprocess.run([sys.executable, "-c", "import os, tpu_estimator_compat; "
                           "print(os.environ['TF_USE_LEGACY_KERAS'])"], capture_output=True,
                          text=True, timeout=120, env={**env, "PYTHONPATH": REPO})
    assert done.stdout.strip() == "1", done.stderr


@pytest.mark.parametrize("name", tpu_estimator_compat.__all__)
def test_every_public_name_is_the_defining_module_s_object(name):
    import importlib

    module = importlib.import_module(tpu_estimator_compat._PUBLIC[name])
    assert getattr(tpu_estimator_compat, name) is getattr(module, name)
    namespace = {}
    exec(f"from tpu_estimator_compat import {name}", namespace)
    assert namespace[name] is getattr(module, name)
    assert name in dir(tpu_estimator_compat)


def test_public_names_are_the_documented_ones():
    assert set(tpu_estimator_compat.__all__) == {
        "BestExporter", "EstimatorSpec", "EvalSpec", "InputPipelineConfig", "LatestExporter",
        "ModeKeys", "RunConfig", "TPUConfig", "TPUEstimator", "TPUEstimatorSpec", "TrainSpec",
        "WarmStartSettings", "install_aliases", "train_and_evaluate"}


def test_submodules_resolve_and_unknown_names_raise_attribute_error():
    out = _python("""
        import tpu_estimator_compat as t
        print(t.config.RunConfig is t.RunConfig, t.legacy.__name__)
        try:
            t.no_such_name
        except AttributeError as e:
            print(e)
        print(hasattr(t, 'no_such_name'))
    """)
    assert out.splitlines() == [
        "True tpu_estimator_compat.legacy",
        "module 'tpu_estimator_compat' has no attribute 'no_such_name'", "False"]


def test_star_import_gives_the_public_names():
    out = _python("""
        from tpu_estimator_compat import *
        print(TPUEstimator.__name__, install_aliases.__name__)
    """)
    assert out.split() == ["TPUEstimator", "install_aliases"]


@pytest.mark.parametrize("tool", ["run", "parity"])
def test_tools_start(tool):
    done = subprocess.run([sys.executable, "-m", f"tpu_estimator_compat.{tool}", "--help"],
                          capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": REPO})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "usage" in done.stdout.lower()
