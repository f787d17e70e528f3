"""Tests for tpu_estimator_compat.scan.names: the scan's verdicts are the library's behaviour.

The scan judges names from data tables without TensorFlow; these tests build the real
namespaces the launcher serves (with TensorFlow) and check both ways that every name the
library serves or refuses has that verdict, and every verdict is what the library does, so
the two cannot drift. They also check the committed TF names table against the installed
TensorFlow.
"""
import importlib
import os
import subprocess
import sys

import pytest
import tensorflow as tf

import tpu_estimator_compat
from tpu_estimator_compat.api import estimator as estimator_lib
from tpu_estimator_compat.legacy import estimator_map
from tpu_estimator_compat.legacy import estimator_names
from tpu_estimator_compat.legacy import namespaces
from tpu_estimator_compat.scan import names

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module", autouse=True)
def installed():
    tpu_estimator_compat.install_aliases()


def _is_placeholder(obj):
    return (getattr(obj, "__doc__", "") or "").startswith("Placeholder for legacy")


def _namespace(root, namespace):
    obj = root
    for part in filter(None, namespace.split(".")):
        obj = getattr(obj, part)
    return obj


# The scan judges `tf.estimator` as the launcher's TF1 mode serves it (the v1 namespace) and
# `tf.compat.v2.estimator` as the v2 one.
_ROOTS = {"v1": "tf.estimator", "v2": "tf.compat.v2.estimator"}


@pytest.mark.parametrize("version", sorted(_ROOTS))
@pytest.mark.parametrize("namespace", estimator_map.NAMESPACES)
def test_every_served_or_refused_estimator_name_has_that_verdict(namespace, version):
    module = _namespace(estimator_names.build_estimator_namespace(version == "v2"), namespace)
    members = {n: getattr(module, n) for n in namespaces.public_names(module)}
    assert members, namespace
    for name, value in members.items():
        verdict = names.judge(".".join(filter(None, [_ROOTS[version], namespace, name])))
        expected = names.REFUSED if _is_placeholder(value) else (names.SERVED, names.CHANGED)
        assert verdict.status in expected, (namespace, name, verdict)
        if _is_placeholder(value):
            assert verdict.note in value.__doc__  # Our error's hint is the scan's note.


@pytest.mark.parametrize("version", sorted(_ROOTS))
@pytest.mark.parametrize("namespace", estimator_map.NAMESPACES)
def test_every_estimator_verdict_is_what_the_namespace_does(namespace, version):
    v2 = version == "v2"
    module = _namespace(estimator_names.build_estimator_namespace(v2), namespace)
    tabled = set(estimator_map.served_names(v2)[namespace]) | set(
        estimator_map.refused_names(v2)[namespace])
    assert tabled == namespaces.public_names(module)
    other = (estimator_map.V1_ONLY_NAMES if v2 else estimator_map.V2_ONLY_NAMES)
    for name in ("NoSuchName",) + other.get(namespace, ()):
        verdict = names.judge(".".join(filter(None, [_ROOTS[version], namespace, name])))
        assert verdict.status == names.REFUSED
        with pytest.raises(namespaces.LegacySymbolError) as raised:
            getattr(module, name)
        assert verdict.note in str(raised.value)


@pytest.mark.parametrize("name, status", [
    ("tf.estimator.experimental.KMeans", names.SERVED),  # TF1 mode: the v1 namespace.
    ("tf.compat.v1.estimator.experimental.RNNClassifier", names.REFUSED),
    ("tf.compat.v2.estimator.experimental.KMeans", names.REFUSED),
    ("tf.compat.v1.compat.v2.estimator.experimental.RNNClassifier", names.SERVED),
    ("tf.compat.v2.estimator.tpu.TPUEstimator", names.SERVED),
])
def test_scan_tells_the_two_estimator_namespaces_apart(name, status):
    if not estimator_map.package_installed() and status == names.SERVED and "tpu" not in name:
        status = names.REFUSED  # A placeholder naming the package.
    assert names.judge(name).status == status


def _real_model_module(prefix, module):
    """True for a module the real tensorflow-estimator serves itself (the hybrid route)."""
    return (prefix == estimator_map.TFE_PRIVATE and estimator_map.package_installed()
            and estimator_map.hybrid_owner(module) == estimator_map.MODEL)


@pytest.mark.parametrize("module", sorted(estimator_map.PRIVATE_ESTIMATOR_MODULES))
def test_private_estimator_modules_import_as_the_scan_says(module):
    for prefix in ("tensorflow_estimator.python.estimator", "tensorflow.python.estimator"):
        served = importlib.import_module(f"{prefix}.{module}")
        assert names.judge(f"{prefix}.{module}").status == names.SERVED
        if _real_model_module(prefix, module):
            assert not isinstance(served, namespaces.AliasNamespace)
            assert names.judge(f"{prefix}.{module}.AnyName").status == names.SERVED
            continue
        library = estimator_map.HYBRID_LIBRARY_MODULES.get(module)
        if (library and prefix == estimator_map.TFE_PRIVATE
                and estimator_map.package_installed()):
            assert served is importlib.import_module(library)  # Our tf.data input_fns.
            assert served.__name__ == library
            continue
        extra = (estimator_map.private_helper_names(module)
                 + estimator_map.PRIVATE_EMBEDDING_NAMES.get(module, ()))
        for name in extra + ("TPUEstimator", "PredictOutput", "LoggingTensorHook"):
            assert hasattr(served, name)
            assert names.judge(f"{prefix}.{module}.{name}").status in (names.SERVED,
                                                                        names.CHANGED), name
        if estimator_map.package_installed():
            assert names.judge(f"{prefix}.{module}.DNNClassifier").status == names.SERVED
            assert issubclass(served.DNNClassifier, estimator_lib.Estimator)
        else:
            assert names.judge(f"{prefix}.{module}.DNNClassifier").status == names.REFUSED
            assert _is_placeholder(served.DNNClassifier)


def test_unknown_private_module_is_refused_by_both():
    assert names.judge("tensorflow.python.estimator.no_such_module").status == names.REFUSED
    with pytest.raises(ImportError):
        importlib.import_module("tensorflow.python.estimator.no_such_module")


def test_removed_tpu_module_the_library_serves_is_judged_as_served():
    module = importlib.import_module("tensorflow.python.tpu.tpu_embedding")
    for name in estimator_map.TF_TPU_LIBRARY_NAMES["tpu_embedding"]:
        assert hasattr(module, name)
        verdict = names.judge(f"tensorflow.python.tpu.tpu_embedding.{name}", 3)
        assert verdict.status == names.SERVED, verdict
    assert names.judge("tensorflow.python.tpu.tpu_embedding", 3).status == names.SERVED
    assert names.judge("tensorflow.python.tpu.tpu_embedding.TPUEmbedding").status == (
        names.ABSENT)
    assert not hasattr(module, "TPUEmbedding")


def test_the_served_estimator_training_module_is_judged_served():
    base = "tensorflow.python.distribute.estimator_training"
    assert names.judge(base, 3).status == names.SERVED
    assert names.judge(f"{base}.init_run_config", 3).status == names.SERVED
    assert names.judge(f"{base}.train_and_evaluate", 3).status == names.ABSENT


def test_names_the_aliases_add_to_tensorflow_exist_after_install():
    assert names.patched_names()
    for name in names.patched_names():
        obj = tf
        for part in name.split(".")[1:]:
            obj = getattr(obj, part)
        assert names.judge(name + ".x").name == name


@pytest.mark.parametrize("name, status", [
    ("tf.contrib.tpu.CrossShardOptimizer", names.SERVED),
    ("tf.contrib.opt.LazyAdamOptimizer", names.REFUSED),
    ("tf.contrib.training.HParams", names.SERVED),
    ("tf.contrib.rnn.LSTMBlockCell", names.REFUSED),
])
def test_contrib_verdicts_are_what_the_served_namespace_does(name, status):
    assert names.judge(name).status == status
    obj = tf.compat.v1
    try:
        for part in name.split(".")[1:]:
            obj = getattr(obj, part)
        got = names.SERVED
    except namespaces.LegacySymbolError as e:
        got = names.REFUSED
        assert names.judge(name).note.split(" See ")[0] in str(e)
    assert got == status


def test_absent_names_are_absent_from_tensorflow_and_existing_ones_are_not_reported():
    assert names.judge("tf.no_such_function").status == names.ABSENT
    assert not hasattr(tf, "no_such_function") and not hasattr(tf.compat.v1, "no_such_function")
    for name in ("tf.nn.relu", "tf.train.AdamOptimizer", "tf.flags.DEFINE_string",
                 "tf.compat.v1.layers.dense", "tf.keras.layers.Dense", "tf.compat.v2.nn.relu",
                 "tf.__version__", "tf.compat.v1.__version__", "tf.nn.__name__"):
        assert names.judge(name) is None, name
    # Module metadata is not in the names table (SimCLR's notebooks print `tf.__version__`).
    assert tf.__version__ and tf.compat.v1.__version__ and tf.nn.__name__


@pytest.mark.slow
def test_tf_names_table_is_the_installed_tensorflow_s():
    done = subprocess.run([sys.executable, os.path.join(REPO, "dev", "tf_api_names.py"),
                           "--check"], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]


# Idioms from public code with their launcher outcome (migration_guide/real_world.md):
# (source line, the scan's verdict on the name, the name).
IDIOMS = [
    # zihangdai/xlnet's vendored TPUEstimator: refused by name (LegacyImportError).
    ("from tensorflow.contrib.tpu.proto import compilation_result_pb2", names.REFUSED,
     "tf.contrib.tpu.proto"),
    # google/compare_gan: the core TPU module behind contrib's stub.
    ("from tensorflow.contrib.tpu.python.tpu import tpu_function", names.SERVED,
     "tf.contrib.tpu.python.tpu.tpu_function"),
    # mesh_tensorflow: TF 2.15's stub modules.
    ("from tensorflow.python.tpu import tpu_config", names.SERVED,
     "tensorflow.python.tpu.tpu_config"),
    ("from tensorflow_estimator.python.estimator.tpu.tpu_estimator import "
     "ExportSavedModelApiVersion", names.SERVED,
     "tensorflow_estimator.python.estimator.tpu.tpu_estimator.ExportSavedModelApiVersion"),
    ("from tensorflow.contrib.opt import LazyAdamOptimizer", names.REFUSED,
     "tf.contrib.opt.LazyAdamOptimizer"),
]


@pytest.mark.parametrize("source, status, name", IDIOMS, ids=[i[2] for i in IDIOMS])
def test_scan_verdict_agrees_with_the_import_under_the_aliases(tmp_path, source, status, name):
    from tpu_estimator_compat.scan import codebase, files

    (tmp_path / "m.py").write_text(source + "\n")
    result = codebase.scan_code_base(files.CodeBase("cb", str(tmp_path),
                                                    [str(tmp_path / "m.py")]))
    verdicts = {u.name: u.status for f in result.files for u in f.uses.values()}
    assert verdicts.get(name) == status, verdicts
    try:
        exec(source, {})  # noqa: S102  What the launcher's run does with the line.
        imported = names.SERVED
    except ImportError:
        imported = names.REFUSED
    assert imported == status


def test_contrib_python_tree_module_imports_as_the_scan_says():
    """tensorflow/tpu inception and densenet: `from tensorflow.contrib.training.python.training
    import evaluation` (tf-slim's twin)."""
    from tensorflow.contrib.training.python.training import evaluation  # noqa: F401

    verdict = names.judge("tensorflow.contrib.training.python.training.evaluation", 4)
    assert verdict.status == names.SERVED


def test_the_served_eager_profiler_module_is_judged_served():
    base = "tensorflow.python.eager.profiler"
    assert names.judge(base, 3).status == names.SERVED
    assert names.judge(f"{base}.start", 3).status == names.SERVED
    assert names.judge(f"{base}.Profiler", 3).status == names.ABSENT
