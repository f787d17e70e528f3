"""Tests for tpu_estimator_compat.legacy.contrib_map: the table of every legacy `tf.contrib` path.

The table is data: it must load without TensorFlow (by file path, as a static tool would),
be well formed (a verdict, a home that names something, a replacement for what it refuses),
answer for any path (aliases, TF 1.x's `python` tree, unknown modules), and be the table the
guide shows (`dev/contrib_table.py --check`). That the namespaces serve exactly what it says
is tests/test_contrib_namespace.py's.
"""
import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
MAP_FILE = ROOT / "tpu_estimator_compat" / "legacy" / "contrib_map.py"


def _load():
    spec = importlib.util.spec_from_file_location("contrib_map_under_test", MAP_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cm = _load()


def test_loads_by_file_path_without_tensorflow():
    code = textwrap.dedent(f"""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("m", {str(MAP_FILE)!r})
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        assert not [n for n in sys.modules if n.split(".")[0] in ("tensorflow", "tf_keras",
                                                                  "tf_slim", "numpy")]
        print(m.verdict("keras.layers.Dense").status)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, PYTHONPATH=""))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "served"


@pytest.mark.parametrize("entry", cm.ENTRIES, ids=[e.path for e in cm.ENTRIES])
def test_entry_is_well_formed(entry):
    assert entry.status in (cm.SERVED, cm.CHANGED, cm.REFUSED)
    assert entry.kind in (cm.MODULE, cm.NAME)
    assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", entry.path)
    assert entry.note, "every row says what serves it, what differs or what to use instead"
    # The guide's cell is the note plus the hint; issue 42's limit for a cell is 400 chars.
    assert len(entry.note) + len(entry.hint) <= 380, len(entry.note) + len(entry.hint)
    for home in entry.home:
        assert re.fullmatch(r"(tf:[\w.]+|py:[\w.]+(:[\w.]+(\(\))?)?|contrib:[\w.]+)", home), home
    if entry.status == cm.REFUSED:
        assert not entry.home, "a refused entry serves nothing"
    if entry.kind == cm.NAME and entry.status != cm.REFUSED:
        assert len(entry.home) == 1, "a served name comes from one home"
    parent = entry.path.rpartition(".")[0]
    if parent:
        assert cm.BY_PATH[parent].kind == cm.MODULE, f"{parent} must be a module entry"


def test_paths_are_unique_and_children_listed():
    assert len(cm.BY_PATH) == len(cm.ENTRIES)
    assert {e.path for e in cm.children("keras")} >= {"keras.optimizers", "keras.wrappers",
                                                      "keras.api", "keras.python"}
    assert "keras" in {e.path for e in cm.children("")}


def test_the_modules_real_code_imports_all_have_a_verdict():
    # Issue 41's list and tensorflow/tpu's imports (migration_guide/launcher.md).
    for module in ("keras", "opt", "rnn", "seq2seq", "metrics", "framework", "data", "learn",
                   "distribute", "training", "layers", "slim", "cudnn_rnn", "crf", "quantize",
                   "tpu", "cluster_resolver", "summary", "image", "lookup", "util",
                   "stateless", "eager", "compiler", "memory_stats", "nccl", "predictor",
                   "labeled_tensor", "losses", "estimator", "cloud", "tensorrt"):
        assert module in cm.BY_PATH, module


@pytest.mark.parametrize("path,decided_by,status", [
    ("keras.layers.Dense", "keras", cm.SERVED),
    ("keras.api.keras.layers.Dense", "keras", cm.SERVED),          # alias followed
    ("keras.python.keras.models.Sequential", "keras", cm.SERVED),
    ("keras.api.keras.optimizers.Adam", "keras.optimizers", cm.CHANGED),
    ("keras.wrappers.scikit_learn.KerasClassifier", "keras.wrappers", cm.REFUSED),
    ("opt.LazyAdamOptimizer", "opt.LazyAdamOptimizer", cm.REFUSED),
    ("opt.PowerSignOptimizer", "opt", cm.REFUSED),
    ("opt.python.training.lazy_adam_optimizer.LazyAdamOptimizer", "opt.LazyAdamOptimizer",
     cm.REFUSED),                                                   # TF 1.x's tree
    ("rnn.LSTMCell", "rnn.LSTMCell", cm.SERVED),
    ("rnn.LSTMBlockCell", "rnn", cm.REFUSED),
    ("tpu.TPUEstimator", "tpu.TPUEstimator", cm.SERVED),
    ("tpu.CrossShardOptimizer", "tpu", cm.SERVED),
    ("slim.nets.inception.inception_v3", "slim", cm.SERVED),
    ("no_such_module.thing", "no_such_module", cm.REFUSED),
])
def test_verdict_finds_the_deciding_entry(path, decided_by, status):
    entry = cm.verdict(path)
    assert (entry.path, entry.status) == (decided_by, status)


def test_error_hint_ends_with_the_replacement_and_the_guide():
    hint = cm.error_hint("opt.LazyAdamOptimizer")
    assert hint.startswith("`tf.compat.v1.train.AdamOptimizer`") and hint.endswith(
        f"See {cm.GUIDE}.")
    assert cm.error_hint("no_such_module.x").startswith("tf.contrib was removed")
    served = re.search(r"\(served: tf\.contrib\.([^)]*)\)", cm.GENERIC_HINT).group(1).split(", ")
    assert {"tpu", "keras", "layers", "rnn", "image"} <= set(served)  # Served in whole or part.
    assert "opt" not in served and "seq2seq" not in served
    # A served module's missing name gets the module's hint for names it lacks.
    assert "TensorFlow Probability" in cm.error_hint("distributions.MultivariateNormalDiag")


def test_guide_shows_the_table_generated_from_the_map():
    done = subprocess.run([sys.executable, str(ROOT / "dev" / "contrib_table.py"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    guide = (ROOT / "migration_guide" / "launcher.md").read_text()
    start = guide.index("<!-- contrib-map:begin")
    table = guide[start:guide.index("<!-- contrib-map:end -->")]
    for row in table.splitlines()[3:]:
        for cell in row.strip("|").split(" | "):
            assert len(cell) <= 400, cell[:80]
