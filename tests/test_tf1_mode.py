"""Tests for tpu_estimator_compat.legacy.tf1_mode: the TF1 view, its import hook and TF1 detection.

`enable()` switches tensor shapes to TF1 behaviour for the whole process, so it runs only in
the launcher's subprocess tests (test_run.py); here the view, `tf1_import` and the finder are
exercised directly and undone after each test.
"""
import dataclasses
import importlib
import os
import sys
import textwrap

import pytest
import tensorflow as tf

import tpu_estimator_compat
from tpu_estimator_compat.cluster import tpu_resolver
from tpu_estimator_compat.legacy import tf1_mode

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def tf1():
    return tf1_mode.tf1_module()


def _exec(source: str) -> dict:
    namespace = {"__builtins__": tf1_mode.tf1_builtins(), "__name__": "user_code"}
    exec(compile(textwrap.dedent(source), "<user>", "exec"), namespace)  # noqa: S102
    return namespace


def test_view_is_v1_where_v1_and_v2_disagree(tf1):
    v1 = tf.compat.v1
    assert tf1.nn.dropout is v1.nn.dropout and tf1.nn.dropout is not tf.nn.dropout
    assert tf1.metrics.accuracy is v1.metrics.accuracy
    assert tf1.losses.sparse_softmax_cross_entropy is v1.losses.sparse_softmax_cross_entropy
    assert tf1.train.GradientDescentOptimizer is v1.train.GradientDescentOptimizer
    assert tf1.flags is v1.flags and tf1.app is v1.app and tf1.logging is v1.logging
    assert tf1.ConfigProto is v1.ConfigProto


def test_view_serves_aliases_and_compat(tf1):
    assert tf1.compat.v1 is tf1
    assert tf1.compat.v2 is tf.compat.v2
    assert tf1.compat.as_bytes is tf.compat.as_bytes
    assert tf1.estimator.tpu.TPUEstimator is tpu_estimator_compat.TPUEstimator
    assert tf1.contrib.tpu.TPUEstimator is tpu_estimator_compat.TPUEstimator
    assert tf1.distribute.cluster_resolver.TPUClusterResolver is tpu_resolver.TPUClusterResolver
    assert tf1.__version__ == tf.__version__


def test_view_serves_the_v1_estimator_namespace_and_compat_v2_the_v2_one(tf1):
    """A TF1 script's `tf.estimator` is legacy's v1 namespace (the v1 canned classes, which
    take the v1 optimizers TF1 scripts pass); `tf.compat.v2.estimator` stays the v2 one."""
    assert tf1.estimator is tf.compat.v1.estimator is tf1.compat.v1.estimator
    assert tf1.compat.v2.estimator is tf.estimator is not tf1.estimator
    ns = _exec("""
        import tensorflow as tf
        import tensorflow.estimator as direct
        from tensorflow.estimator import experimental
        from tensorflow.compat.v2 import estimator as v2_estimator
    """)
    assert ns["direct"] is tf.compat.v1.estimator
    assert ns["experimental"] is tf.compat.v1.estimator.experimental
    assert ns["v2_estimator"] is tf.estimator
    assert ns["tf"].estimator.DNNClassifier is tf.compat.v1.estimator.DNNClassifier


def test_tf2_only_name_fails_instead_of_mixing_apis(tf1):
    with pytest.raises(AttributeError, match=r"`tf\.autodiff` does not exist in the TF1 API.*"
                                             r"tf\.compat\.v2\.autodiff"):
        tf1.autodiff  # noqa: B018


def test_imports_resolve_in_the_view_and_private_modules_stay_real(tf1):
    from tensorflow.python.framework import ops as real_ops

    ns = _exec("""
        import tensorflow as tf
        import tensorflow.compat.v1 as v1
        import tensorflow.compat.v2 as v2
        import tensorflow.contrib.tpu
        from tensorflow.compat.v1 import estimator as tf_estimator
        from tensorflow.compat.v1.estimator.tpu import TPUEstimator
        from tensorflow.contrib import cluster_resolver
        from tensorflow.python.framework import ops
        from tensorflow import nn
        import tensorflow.python.framework.dtypes
        import tensorflow.python.ops.array_ops as array_ops
    """)
    assert ns["tf"] is tf1 and ns["v1"] is tf1 and ns["tensorflow"] is tf1
    assert ns["v2"] is tf.compat.v2
    assert ns["tf_estimator"] is tf1.estimator
    assert ns["TPUEstimator"] is tpu_estimator_compat.TPUEstimator
    assert ns["cluster_resolver"].TPUClusterResolver is tpu_resolver.TPUClusterResolver
    assert ns["ops"] is real_ops
    assert ns["array_ops"] is sys.modules["tensorflow.python.ops.array_ops"]
    assert ns["tensorflow"] is tf1  # `import tensorflow.python...` still binds the view.
    assert ns["nn"].dropout is tf.compat.v1.nn.dropout
    assert sys.modules["tensorflow"] is tf


def test_unserved_imports_name_the_symbol(tf1):
    with pytest.raises(ImportError, match=r"`tf\.contrib\.opt\.LazyAdamOptimizer`"):
        _exec("from tensorflow.contrib.opt import LazyAdamOptimizer")
    with pytest.raises(ModuleNotFoundError, match=r"tensorflow\.no_such_module"):
        _exec("import tensorflow.no_such_module")
    with pytest.raises(ImportError, match=r"cannot import name 'autodiff'"):
        _exec("from tensorflow import autodiff")


def _write(root, files):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


_USES_TF = """
    import tensorflow as tf
    DROPOUT = tf.nn.dropout
"""


@pytest.fixture
def user_tree(tmp_path, monkeypatch):
    """A project dir (user code) and a site dir (third party), both on sys.path."""
    project, site = tmp_path / "project", tmp_path / "site"
    _write(project, {"userpkg/__init__.py": "from . import inner\n",
                     "userpkg/inner.py": _USES_TF, "usermod.py": _USES_TF})
    _write(site, {"thirdparty.py": _USES_TF, "namedpkg/__init__.py": _USES_TF})
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(project))
    names = ("userpkg", "userpkg.inner", "usermod", "thirdparty", "namedpkg")
    yield project, site
    for name in names:
        sys.modules.pop(name, None)


def test_finder_gives_user_modules_the_view_and_others_the_real_module(user_tree,
                                                                       monkeypatch):
    project, site = user_tree
    user_code = tf1_mode.UserCode(roots=(str(project),), packages=("namedpkg",),
                                  excluded=(str(project / "venv"),))
    monkeypatch.setattr(sys, "meta_path", [tf1_mode.UserModuleFinder(user_code)]
                        + sys.meta_path)
    importlib.invalidate_caches()
    assert importlib.import_module("usermod").DROPOUT is tf.compat.v1.nn.dropout
    assert importlib.import_module("userpkg.inner").DROPOUT is tf.compat.v1.nn.dropout
    assert importlib.import_module("namedpkg").DROPOUT is tf.compat.v1.nn.dropout
    assert importlib.import_module("thirdparty").DROPOUT is tf.nn.dropout
    assert importlib.import_module("tpu_estimator_compat.spec").tf is tf


def test_user_code_ownership(tmp_path):
    root = tmp_path / "proj"
    user_code = tf1_mode.UserCode(roots=(str(root),), packages=("mylib",),
                                  excluded=(str(root / ".venv"),))
    assert user_code.owns("model", str(root / "model.py"))
    assert user_code.owns("a.b", str(root / "a" / "b.py"))
    assert not user_code.owns("torch", str(root / ".venv" / "lib" / "torch" / "__init__.py"))
    assert not user_code.owns("x", str(tmp_path / "elsewhere" / "x.py"))
    assert user_code.owns("mylib.sub", "/usr/lib/python3/site-packages/mylib/sub.py")
    assert not user_code.owns("tensorflow.foo", str(root / "tensorflow" / "foo.py"))


def test_default_exclusions_cover_the_interpreter_and_this_library():
    user_code = tf1_mode.UserCode.for_script(os.path.join(REPO, "script.py"))
    assert not user_code.owns("tpu_estimator_compat.run", tf1_mode.__file__)
    assert not user_code.owns("absl", os.path.realpath(os.__file__))
    assert user_code.owns("legacy_models.mnist.mnist_data",
                          os.path.join(REPO, "legacy_models", "mnist", "mnist_data.py"))


# ---------------------------------------------------------------------------------------------
# Detection


def _detect(script):
    return tf1_mode.detect(script, tf1_mode.UserCode.for_script(script))


def test_detects_tf1_script_and_follows_into_its_helper_package():
    found = _detect(os.path.join(SCRIPTS, "tf1_project", "train_tf1.py"))
    assert found.is_tf1
    joined = " ".join(found.tf1)
    assert "train_tf1.py:10 tf.flags" in joined
    assert "tf.contrib.tpu.TPUEstimator" in joined
    assert "model.py:" in joined and "tf.contrib.layers.layer_norm" in joined
    assert any(f.endswith(os.path.join("tf1_lib", "model.py")) for f in found.files)
    assert found.tf2 == ()


@pytest.mark.parametrize("script", [os.path.join(SCRIPTS, "compat_v1", "train_compat_v1.py"),
                                    os.path.join(REPO, "legacy_models", "mnist",
                                                 "mnist_tpu.py")])
def test_compat_v1_scripts_are_not_tf1_mode(script):
    found = _detect(script)
    assert not found.is_tf1, found.tf1
    assert len(found.files) >= 1


def test_detection_follows_a_sibling_imported_by_its_package_path(tmp_path, monkeypatch):
    # google-research/language bert_joint/prepare_nq_data.py: only `tensorflow.compat.v1`
    # itself, `from language.question_answering.bert_joint import run_nq` (a sibling reached
    # through the package root on PYTHONPATH), and run_nq uses `tf.contrib`.
    _write(tmp_path, {
        "proj/__init__.py": "",
        "proj/sub/__init__.py": "",
        "proj/sub/prepare.py": """
            from proj.sub import run_model
            import other
            import tensorflow.compat.v1 as tf
            FLAGS = tf.flags.FLAGS
        """,
        "proj/sub/run_model.py": """
            import tensorflow.compat.v1 as tf
            from tensorflow.contrib import tpu as contrib_tpu
        """,
        "outside/other.py": "import tensorflow as tf\nX = tf.contrib.layers\n",
    })
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path / "outside"))
    found = _detect(str(tmp_path / "proj" / "sub" / "prepare.py"))
    assert found.is_tf1
    assert found.tf1 == ("run_model.py:3 tf.contrib.tpu",)
    # Only files under the script's directory are followed, not other sys.path entries.
    assert sorted(os.path.relpath(f, tmp_path) for f in found.files) == [
        os.path.join("proj", "sub", name) for name in ("__init__.py", "prepare.py",
                                                        "run_model.py")]


def test_detection_reports_tf2_names_and_relative_imports(tmp_path):
    _write(tmp_path, {
        "main.py": """
            import tensorflow as tf
            from pkg import helper
            writer = tf.summary.create_file_writer("/tmp/x")
            model = tf.keras.Sequential()
        """,
        "pkg/__init__.py": "",
        "pkg/helper.py": "from . import deep\n",
        "pkg/deep.py": "import tensorflow as tf\nLOSS = tf.losses.log_loss\n",
    })
    found = _detect(str(tmp_path / "main.py"))
    assert found.tf1 == ("deep.py:2 tf.losses.log_loss",)
    assert found.tf2 == ("main.py:4 tf.summary.create_file_writer",)
    assert found.is_tf1


_SIBLING_PACKAGE_REPO = {
    # rowanz/grover: `discrimination/run_discrimination.py` imports the repository's `lm`
    # package (`from lm.modeling import ...`, the repository root on PYTHONPATH), whose
    # `optimization_adafactor.py` subclasses `tf.train.Optimizer`.
    "repo/disc/run.py": """
        import tensorflow as tf
        from lm.modeling import build
        from clean import X
        import helper
        import installed_tf1
        FLAGS = tf.flags.FLAGS
    """,
    "repo/disc/helper.py": "import tensorflow as tf\n",
    "repo/lm/__init__.py": "",
    "repo/lm/modeling.py": "from lm import optim\n",
    "repo/lm/optim.py": "import tensorflow as tf\n\nclass Opt(tf.train.Optimizer):\n    pass\n",
    # google-research/disentanglement_lib: `from tensorflow.contrib import tpu` beside
    # `import tensorflow.compat.v1 as tf`: the import hook serves it without TF1 mode.
    "repo/clean/__init__.py": ("import tensorflow as tf\nX = tf.nn.relu\n"
                               "from tensorflow.contrib import tpu as contrib_tpu\n"),
    "site/installed_tf1.py": "import tensorflow as tf\nY = tf.contrib.layers\n",
}


def test_detection_names_tf1_packages_imported_from_outside_the_script_directory(
        tmp_path, monkeypatch):
    """A package on another sys.path entry keeps the real TF2 API (only the script's
    directory and --tf1_packages are user code): its TF1-only names are reported with the
    package to name, never counted as the script's evidence. Installed code is not read, and
    imports the hook serves anyway (`from tensorflow.contrib import tpu`) are no evidence."""
    _write(tmp_path, _SIBLING_PACKAGE_REPO)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.syspath_prepend(str(tmp_path / "repo"))
    script = str(tmp_path / "repo" / "disc" / "run.py")
    user_code = tf1_mode.UserCode(roots=(str(tmp_path / "repo" / "disc"),),
                                  excluded=(str(tmp_path / "site"),))
    found = tf1_mode.detect(script, user_code)
    assert found.tf1 == ("run.py:7 tf.flags", "run.py:7 tf.flags.FLAGS")
    assert found.outside_tf1 == (("lm", ("optim.py:3 tf.train.Optimizer",)),)
    assert sorted(os.path.basename(f) for f in found.files) == ["helper.py", "run.py"]

    named = tf1_mode.detect(script, dataclasses.replace(user_code, packages=("lm",)))
    assert named.outside_tf1 == ()
    assert "optim.py:3 tf.train.Optimizer" in named.tf1
