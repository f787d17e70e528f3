"""TensorFlow's docs' TF1 Estimator programs (legacy_models/tf_docs/) run through the launcher.

Each program is a tensorflow/docs notebook's setup and TF1 cells, unchanged but for the data
path (legacy_models/tf_docs/README.md). Each case runs `python -m tpu_estimator_compat.run
PROGRAM` as a subprocess in a scratch working directory and checks that it ends with status 0
and prints what the notebook shows under its last TF1 cell (an evaluate dict, predictions, a
checkpoint listing). Results on both stacks: migration_guide/tf_docs.md.

All `slow` (a child process each, 40-60 s on a shared 2-core machine); CI's slow set runs
three of them, the rest are `full` (pytest.ini).
"""

import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = os.path.join(REPO, "legacy_models", "tf_docs")
TIMEOUT_S = 900

# train_and_evaluate's (eval dict, export results) of the DNNClassifier on the digits at step 10.
_EVAL_AT_10 = (r"^\(\{'accuracy': 0\.[0-9]+, 'average_loss': [0-9.]+, 'loss': [0-9.]+, "
               r"'global_step': 10\}, \[\]\)$")

# program -> regular expressions its standard output must match (re.MULTILINE).
EXPECTED = {
    "migrate_migrating_estimator": [r"^\{'loss': [0-9.e-]+, 'global_step': 3\}$"],
    "migrate_mirrored_strategy": [r"^\(\{'loss': [0-9.e-]+, 'global_step': 3\}, \[\]\)$"],
    "migrate_multi_worker_cpu_gpu_training": [
        r"^\(\{'loss': [0-9.e-]+, 'global_step': 3\}, \[\]\)$"],
    "migrate_sessionrunhook_callback": [r"^Time: .*, Step #: 290 , Examples per second: "],
    "migrate_tpu_estimator": [r"^All devices:  \[\]$",
                              r"^\{'loss': [0-9.e-]+, 'global_step': 0\}$"],
    "migrate_tpu_embedding": [r"^\{'loss': [0-9.e-]+, 'global_step': 0\}$"],
    "migrate_migrating_feature_columns": [
        r"^\{'all_class_ids': array\(\[0, 1\], dtype=int32\), .*'probabilities': array\("],
    "migrate_checkpoint_saver": [_EVAL_AT_10],
    "migrate_evaluator": [_EVAL_AT_10],
    "migrate_tensorboard": [_EVAL_AT_10],
    "migrate_fault_tolerance": [r"^RuntimeError:Interruption$",
                                r"^<tensorflow_estimator\.python\.estimator\.canned\.dnn\."
                                r"DNNClassifier object at "],
    "migrate_saved_model": [r"^add two output:  5\.0$", r"^add_two output:  5\.0$",
                            r"^estimator-model$"],
    "tutorial_premade": [r"^Test set accuracy: 0\.9[0-9]{2}$",
                         r'^Prediction is "Setosa" \([0-9.]+%\), expected "Setosa"$'],
    "tutorial_linear": [r"^\{'accuracy': 0\.[6-9][0-9]*, 'accuracy_baseline': .*"
                        r"'global_step': 200\}$"],
    "migrate_logging_stop_hook": [r"^<tpu_estimator_compat\.api\.estimator\.Estimator object at "],
    "migrate_metrics_optimizers": [
        r"^\{'accuracy': 0\.[0-9]+, 'loss': [0-9.e-]+, 'mean_squared_error': [0-9.e-]+, "
        r"'global_step': 3\}$"],
    "migrate_early_stopping": [r"^\(\{'loss': [0-9.e-]+, 'global_step': [0-9]+\}, \[\]\)$"],
    "migrate_canned_estimators": [
        r"^\{'accuracy': 0\.[0-9]+, 'accuracy_baseline': .*'global_step': 20\}$"],
    # Object-based checkpoints through a Scaffold's saver (checkpoint/object_based.py).
    "migrate_migrating_checkpoints": [
        r"^  \(key='var_list/var/\.ATTRIBUTES/VARIABLE_VALUE', shape=\[\], dtype=float32, "
        r"value=4\.0\)$",
        r"^  \(key='step/\.ATTRIBUTES/VARIABLE_VALUE', shape=\[\], dtype=int64, value=1\)$",
        r"^  \(key='_CHECKPOINTABLE_OBJECT_GRAPH', shape=\[\], dtype=string, value=b"],
    "tutorial_keras_model_to_estimator": [
        r"^Eval result: \{'loss': [0-9.e-]+, 'global_step': 500\}$"],
    # The MobileNetV2 model_to_estimator's evaluate, the object-based checkpoint's step
    # restored by tf.train.Checkpoint, the last evaluate.
    "guide_estimator": [r"^\{'accuracy': 0\.[0-9]+, 'loss': [0-9.e-]+, 'global_step': 2\}$",
                        r"^10$",
                        r"^\{'average_loss': [0-9.e-]+, .*'global_step': 10\}$"],
}

# The docs' `x_train['sex'].replace(..., inplace=True)` changes x_train only before pandas 3
# (pandas 3's copy-on-write makes it change a copy): 'sex' stays a string column.
NEEDS_PANDAS_2 = ("migrate_canned_estimators",)

# Run by CI's slow set; the others are `full`.
CI_CASES = ("migrate_migrating_estimator", "migrate_tpu_estimator",
            "migrate_migrating_feature_columns")


def _pandas_major():
    import pandas
    return int(pandas.__version__.split(".")[0])


def _cases():
    for name in sorted(EXPECTED):
        marks = [] if name in CI_CASES else [pytest.mark.full]
        if name in NEEDS_PANDAS_2:
            marks.append(pytest.mark.skipif(
                _pandas_major() >= 3, reason="the docs' chained inplace replace needs pandas < 3"))
        yield pytest.param(name, marks=marks, id=name)


def run_program(name, cwd):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0",
               PYTHONDONTWRITEBYTECODE="1")
    env.pop("TF_USE_LEGACY_KERAS", None)  # The launcher sets it.
    return subprocess.run(
        [sys.executable, "-m", "tpu_estimator_compat.run", os.path.join(PROGRAMS, name + ".py")],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)


@pytest.mark.slow
@pytest.mark.parametrize("name", _cases())
def test_docs_program_runs_through_the_launcher(name, tmp_path):
    done = run_program(name, str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    for pattern in EXPECTED[name]:
        assert re.search(pattern, done.stdout, re.MULTILINE), (pattern, done.stdout[-3000:])


def test_every_expected_program_exists():
    for name in EXPECTED:
        assert os.path.isfile(os.path.join(PROGRAMS, name + ".py")), name


# ------------------------------------------------------------------------------------------
# The extractor (dev/tf_docs_extract.py)
# ------------------------------------------------------------------------------------------

sys.path.insert(0, os.path.join(REPO, "dev"))
import tf_docs_extract  # noqa: E402

DOCS_GIT = os.environ.get("TF_DOCS_GIT", "/work/.mirror/tensorflow+docs/repo")
DOCS_COMMIT = "7c3650212740204359d4ceae481abc79345541be"


def _notebook(*cells):
    return {"cells": [{"cell_type": kind, "source": source.splitlines(True)}
                      for kind, source in cells]}


def test_extract_keeps_the_docs_lines_and_lists_each_change():
    notebook = _notebook(
        ("code", "!pip install x\nimport pandas as pd\nimport tensorflow as tf\n"
                 "import tensorflow_recommenders as tfrs\n"),
        ("markdown", "## TensorFlow 1"),
        ("code", "df = pd.read_csv('https://storage.googleapis.com/tf-datasets/titanic/"
                 "train.csv')\n%ls {dir}\nest.evaluate(\n    input_fn)"),
        ("code", "!saved_model_cli run --dir d \\\n --input_exprs input=10\nx = 1"),
        ("code", "model.summary()"))
    body, changes = tf_docs_extract.extract(notebook, [0, 2, 3, 4], "t", DOCS_COMMIT)
    assert body.split("\n") == [
        "# In[0]:", "import pandas as pd", "import tensorflow as tf",
        tf_docs_extract.DATA_IMPORT, "", "",
        "# In[2]:",
        "df = pd.read_csv(tf_docs_data.local('https://storage.googleapis.com/tf-datasets/"
        "titanic/train.csv'))",
        "print(est.evaluate(", "    input_fn))", "", "",
        "# In[3]:", "x = 1", "", "",
        "# In[4]:", "model.summary()", ""]
    assert changes == [
        "dropped (notebook-only): !pip install x",
        "dropped (display or TF2 section): import tensorflow_recommenders as tfrs",
        "dropped (notebook-only): %ls {dir}",
        "printed (notebook display): print(est.evaluate(",
        "dropped (notebook-only): !saved_model_cli run --dir d \\",
        "dropped (notebook-only): --input_exprs input=10",
        "data: `df = pd.read_csv('https://storage.googleapis.com/tf-datasets/titanic/"
        "train.csv')` -> `df = pd.read_csv(tf_docs_data.local('https://storage.googleapis.com/"
        "tf-datasets/titanic/train.csv'))`",
        "added: `%s`" % tf_docs_extract.DATA_IMPORT]


def test_extract_rejects_a_markdown_cell():
    with pytest.raises(ValueError, match="cell 0 is markdown"):
        tf_docs_extract.extract(_notebook(("markdown", "# x")), [0], "t", DOCS_COMMIT)


@pytest.mark.skipif(not os.path.isdir(DOCS_GIT), reason="no tensorflow/docs git (TF_DOCS_GIT)")
def test_committed_programs_are_what_the_extractor_writes(tmp_path):
    subprocess.run([sys.executable, os.path.join(REPO, "dev", "tf_docs_extract.py"),
                    "--docs_git", DOCS_GIT, "--commit", DOCS_COMMIT, "--out", str(tmp_path)],
                   check=True, capture_output=True)
    for name in tf_docs_extract.PROGRAMS:
        with open(os.path.join(PROGRAMS, name + ".py")) as f, \
                open(os.path.join(tmp_path, name + ".py")) as g:
            assert f.read() == g.read(), name


def test_local_data_has_the_downloaded_files_schema():
    sys.path.insert(0, PROGRAMS)
    try:
        import tf_docs_data
    finally:
        sys.path.remove(PROGRAMS)
    import pandas as pd
    titanic = pd.read_csv(tf_docs_data.local(
        "https://storage.googleapis.com/tf-datasets/titanic/train.csv"))
    assert list(titanic.columns) == ["survived", "sex", "age", "n_siblings_spouses", "parch",
                                     "fare", "class", "deck", "embark_town", "alone"]
    assert len(titanic) == 627
    assert set(titanic["class"]) == {"First", "Second", "Third"}
    iris = pd.read_csv(tf_docs_data.get_file(
        "iris_training.csv",
        "https://storage.googleapis.com/download.tensorflow.org/data/iris_training.csv"),
        names=["a", "b", "c", "d", "species"], header=0)
    assert iris.shape == (120, 5) and set(iris["species"]) == {0, 1, 2}
    (x_train, y_train), (x_test, y_test) = tf_docs_data.mnist.load_data()
    assert x_train.shape == (1500, 28, 28) and x_train.dtype == "uint8"
    assert x_test.shape == (297, 28, 28) and y_test.dtype == "uint8"
    assert x_train.max() == 255 and sorted(set(y_train)) == list(range(10))
    iris_ds = tf_docs_data.load("iris", split=tf_docs_data.Split.TRAIN, as_supervised=True)
    assert [(spec.shape.as_list(), spec.dtype.name) for spec in iris_ds.element_spec] == [
        ([4], "float32"), ([], "int64")]
    assert len(list(iris_ds)) == 150
    mnist_ds = tf_docs_data.load("mnist", split="test", as_supervised=True)
    assert [(spec.shape.as_list(), spec.dtype.name) for spec in mnist_ds.element_spec] == [
        ([28, 28, 1], "uint8"), ([], "int64")]
    cats = tf_docs_data.load("cats_vs_dogs", as_supervised=True)["train"]
    assert [(spec.shape.as_list(), spec.dtype.name) for spec in cats.element_spec] == [
        ([None, None, 3], "uint8"), ([], "int64")]
    assert len(list(cats)) == 64
