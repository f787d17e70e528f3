"""Tests for `python -m tpu_estimator_compat.scan`: import forms, verdicts, run semantics,
output, exit status and bad input (one clear line per file, and the scan goes on)."""
import ast
import dataclasses
import json
import os
import subprocess
import sys
import textwrap

import pytest

from tpu_estimator_compat.legacy import estimator_map

from tpu_estimator_compat.scan import cli
from tpu_estimator_compat.scan import codebase
from tpu_estimator_compat.scan import files

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# tensorflow-estimator's canned estimators are served when it is installed (the hybrid route).
_CANNED = "served" if estimator_map.package_installed() else "refused"


def _write(root, files_):
    for name, text in files_.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(textwrap.dedent(text))
    return root


def _uses(tmp_path, source, name="m.py"):
    _write(tmp_path, {name: source})
    result = codebase.scan_code_base(files.CodeBase("cb", str(tmp_path), [str(tmp_path / name)]))
    (f,) = result.files
    return {u.name: (u.status, u.lines) for u in f.uses.values()}, f, result


@pytest.mark.parametrize("source, name, status, line", [
    ("import tensorflow as tf\ntf.estimator.tpu.TPUEstimator(model_fn=f)\n",
     "tf.estimator.tpu.TPUEstimator", "served", "2"),
    ("import tensorflow.compat.v1 as tf\nx = tf.estimator.DNNClassifier\n",
     "tf.estimator.DNNClassifier", _CANNED, "2"),
    ("from tensorflow.contrib import tpu as contrib_tpu\n"
     "opt = contrib_tpu.CrossShardOptimizer(o)\n",
     "tf.contrib.tpu.CrossShardOptimizer", "served", "2"),
    ("from tensorflow.contrib.tpu import CrossShardOptimizer, RunConfig\n"
     "opt = CrossShardOptimizer(o)\n",
     "tf.contrib.tpu.CrossShardOptimizer", "served", "1"),
    ("from tensorflow.contrib.opt import LazyAdamOptimizer\n\n\nLazyAdamOptimizer()\n",
     "tf.contrib.opt.LazyAdamOptimizer", "refused", "1"),
    ("import tensorflow as tf\nl = tf.contrib.keras.layers.Dense(3)\n",
     "tf.contrib.keras.layers", "served", "2"),
    ("import tensorflow_estimator as tfe\ntfe.estimator.tpu.RunConfig()\n",
     "tf.estimator.tpu.RunConfig", "served", "2"),
    ("from tensorflow.python.estimator import estimator\n"
     "estimator._load_global_step_from_checkpoint_dir(d)\n",
     "tensorflow_estimator.python.estimator.estimator._load_global_step_from_checkpoint_dir",
     "served", "2"),
    ("from tensorflow.python.tpu import tpu_function\n",
     "tensorflow.python.tpu.tpu_function", "served", "1"),
    ("from tensorflow.python.tpu import tpu_estimator\n",
     "tensorflow.python.tpu.tpu_estimator", "served", "1"),
    ("import tensorflow as tf\ntf.no_such_api.thing()\n", "tf.no_such_api", "absent", "2"),
    ("from tensorflow.python.no_such import x\n", "tensorflow.python.no_such", "absent", "1"),
    ("import tensorflow.compat.v1 as tf\nr = tf.distribute.cluster_resolver.TPUClusterResolver\n",
     "tf.compat.v1.distribute.cluster_resolver.TPUClusterResolver", "changed", "2"),
    ("from tensorflow.compat.v1 import estimator as tf_estimator\n"
     "s = tf_estimator.tpu.experimental.EmbeddingConfigSpec()\n",
     "tf.estimator.tpu.experimental.EmbeddingConfigSpec", "changed", "2"),
    ("def main():\n    import tensorflow as tf\n    tf.contrib.rnn.LSTMBlockCell(3)\n",
     "tf.contrib.rnn.LSTMBlockCell", "refused", "3"),
])
def test_import_forms_resolve_to_full_names_with_verdicts(tmp_path, source, name, status, line):
    uses, _, _ = _uses(tmp_path, source)
    assert name in uses, uses
    assert uses[name][0] == status
    assert line in uses[name][1]


def test_tensorflow_s_own_existing_names_are_not_listed(tmp_path):
    uses, _, result = _uses(tmp_path, "import tensorflow as tf\n"
                                      "tf.nn.relu(tf.train.AdamOptimizer)\n"
                                      "tf.flags.DEFINE_string('a', None, '')\n")
    assert uses == {} and result.status == codebase.RUNS


def test_aliases_re_exported_by_the_code_base_s_own_modules_are_followed(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/compat.py": "import tensorflow.compat.v1 as tf\n"
                         "from tensorflow.contrib import opt as contrib_opt\n",
        "pkg/model.py": "from .compat import tf\nfrom pkg.compat import contrib_opt\n"
                        "tf.estimator.LinearClassifier()\ncontrib_opt.AdamWOptimizer()\n"})
    results, _ = cli.scan([str(tmp_path)], fleets=False)
    model = [f for f in results[0].files if f.path.endswith("model.py")][0]
    assert model.uses["tf.estimator.LinearClassifier"].status == _CANNED
    assert model.uses["tf.contrib.opt.AdamWOptimizer"].lines == ["4"]


def test_guarded_import_is_reported_but_does_not_block(tmp_path):
    uses, f, result = _uses(tmp_path, """
        try:
          from tensorflow.contrib.cloud import BigtableClient
        except ImportError:
          BigtableClient = None
        """)
    assert uses["tf.contrib.cloud.BigtableClient"][0] == "refused"
    assert result.status == codebase.RUNS and not result.blockers()


@pytest.mark.parametrize("source, key, status", [
    ("import tensorflow as tf\ntf.disable_v2_behavior()\n", "eager_off", "changed"),
    ("import tensorflow as tf\nwith tf.Session() as s:\n  pass\n", "tf1_session", "limit"),
    ("import tensorflow as tf\ntf.compat.v1.disable_eager_execution()\ns = tf.Session()\n",
     "tf1_session", "changed"),
    ("c = TPUConfig(num_cores_per_replica=2)\n", "model_parallelism", "changed"),
    ("c = TPUConfig(input_partition_dims=[[1, 2]])\n", "model_parallelism", "changed"),
    ("e = TPUEstimator(export_to_tpu=True)\n", "export_to_tpu", "changed"),
    ("s = EstimatorSpec(mode, loss=l, eval_metric_ops=m)\n", "eval_metric_ops", "limit"),
    ("s = Scaffold(init_fn=f)\n", "scaffold_init_fn", "limit"),
    ("c = TPUConfig(iterations_per_loop='30s')\n", "iterations_per_loop_seconds", "limit"),
])
def test_run_semantics(tmp_path, source, key, status):
    _, f, result = _uses(tmp_path, source)
    assert key in f.semantics
    assert result.semantic_status(key) == status


def test_session_inside_a_graph_scope_is_no_limit(tmp_path):
    _, f, _ = _uses(tmp_path, "import tensorflow as tf\nwith tf.Graph().as_default():\n"
                              "  with tf.Session() as s:\n    pass\n")
    assert "tf1_session" not in f.semantics


def test_notebook_code_cells_with_magics(tmp_path):
    notebook = {"cells": [
        {"cell_type": "markdown", "source": ["import tensorflow as tf"]},
        {"cell_type": "code", "source": ["%matplotlib inline\n", "import tensorflow as tf\n"]},
        {"cell_type": "code", "source": "!pip install x\nest = tf.estimator.DNNClassifier(f)\n"}],
        "nbformat": 4}
    uses, f, _ = _uses(tmp_path, json.dumps(notebook), "n.ipynb")
    assert uses["tf.estimator.DNNClassifier"] == (_CANNED, ["3:2"])
    assert not f.problem


BAD_INPUT = {
    "syntax.py": ("import tensorflow as tf\ndef f(:\n", "syntax error (line 2"),
    "py2.py": ("import tensorflow as tf\nprint 'hello'\n", "Python 2 source (line 2"),
    "binary.py": (b"\x7fELF\x00\x01\x02", "binary file (NUL byte at offset 4)"),
    "huge.py": ("x = 1\n" * 300000, "over the 1.0 MiB limit"),
    "nested.py": ("import tensorflow as tf\nx = " + "(" * 300 + ")" * 300 + "\n",
                  "too many nested parentheses"),
    "broken.ipynb": ('{"cells": [', "notebook is not valid JSON (line 1"),
}


def test_bad_input_gets_one_clear_line_each_and_the_scan_goes_on(tmp_path):
    root = tmp_path / "cb"
    _write(root, {name: text for name, (text, _) in BAD_INPUT.items()})
    _write(root, {"good.py": "import tensorflow as tf\ntf.estimator.BoostedTreesClassifier()\n"})
    (root / "loop").symlink_to(root)
    (root / "self.py").symlink_to(root / "self.py")
    done = subprocess.run([sys.executable, "-m", "tpu_estimator_compat.scan", "--max-bytes",
                           str(2**20), str(root)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": REPO})
    assert done.returncode == 1, done.stderr  # good.py's refused name (gone in TF 2.15).
    out = done.stdout
    for name, (_, message) in BAD_INPUT.items():
        lines = [line for line in out.splitlines() if f"{name}:" in line]
        assert len(lines) == 1 and message in lines[0], (name, out)
    assert sum("symlink loop" in line for line in out.splitlines()) == 1, out
    assert sum("self.py" in line and "cannot read" in line for line in out.splitlines()) == 1
    assert "tf.estimator.BoostedTreesClassifier" in out
    assert "file(s) or folder(s) could not be scanned" in out


def test_fleet_summary_json_and_exit_status(tmp_path):
    _write(tmp_path, {
        "a/train.py": "import tensorflow as tf\ntf.estimator.tpu.TPUEstimator(model_fn=f)\n",
        "b/train.py": "import tensorflow as tf\ntf.contrib.opt.LazyAdamOptimizer(0.1)\n",
        "c/train.py": "from tensorflow.contrib.opt import LazyAdamOptimizer\n"})
    done = subprocess.run([sys.executable, "-m", "tpu_estimator_compat.scan", str(tmp_path)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": REPO})
    assert done.returncode == 1
    assert ("1 of 3 code bases should run unchanged (3 files); 2 refuse, because of "
            "tf.contrib.opt.LazyAdamOptimizer (2).") in done.stdout
    assert cli.main(["--json", str(tmp_path / "a")]) == 0
    done = subprocess.run([sys.executable, "-m", "tpu_estimator_compat.scan", "--json",
                           str(tmp_path)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": REPO})
    data = json.loads(done.stdout)
    assert [c["status"] for c in data["code_bases"]] == ["runs unchanged", "refuses", "refuses"]
    (name,) = data["code_bases"][1]["files"][0]["names"]
    assert name["name"] == "tf.contrib.opt.LazyAdamOptimizer" and name["blocks"]
    assert name["lines"] == ["2"] and "AdamOptimizer" in name["note"]


def test_a_long_elif_chain_is_read_to_its_end(tmp_path):
    # Each `elif` is an `If` in the previous one's `orelse`: the walk must not recurse.
    chain = "".join(f"elif x == {i}:\n  y = {i}\n" for i in range(2000))
    uses, f, _ = _uses(tmp_path, "import tensorflow as tf\nif x:\n  pass\n" + chain
                       + "else:\n  tf.contrib.opt.LazyAdamOptimizer(0.1)\n")
    assert not f.problem
    assert uses["tf.contrib.opt.LazyAdamOptimizer"] == ("refused", [str(3 + 2 * 2000 + 2)])


def test_an_absent_name_alone_exits_1(tmp_path):
    _write(tmp_path, {"train.py": "import tensorflow.compat.v1 as tf\n"
                                  "w = tf.summary.create_file_writer('/tmp/x')\n"})
    assert cli.main([str(tmp_path / "train.py")]) == 1
    (result,), _ = cli.scan([str(tmp_path)])
    assert result.blockers() and all("TensorFlow 2.21 has no" in note
                                     for note in result.blockers().values())


def test_folders_without_code_are_no_code_bases(tmp_path):
    _write(tmp_path, {"a/train.py": "import tensorflow as tf\n", "docs/README.md": "# docs\n",
                      "b/train.py": "import tensorflow as tf\n"})
    results, problems = cli.scan([str(tmp_path)])
    assert [os.path.basename(r.name) for r in results] == ["a", "b"] and not problems
    results, problems = cli.scan([str(tmp_path / "docs")])
    assert not results
    assert problems == [(str(tmp_path / "docs"), "no .py or .ipynb file: nothing to scan")]


def test_importing_the_scan_loads_no_tensorflow():
    code = ("import sys, tpu_estimator_compat.scan.cli as c\n"
            "c.scan([%r])\n"
            "print(sorted(n for n in sys.modules if n.split('.')[0] in "
            "('tensorflow', 'tf_keras', 'numpy')))" % os.path.join(REPO, "legacy_models"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": REPO})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_each_script_gets_the_verdict_of_the_files_it_imports(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/model.py": "import tensorflow as tf\nspec = tf.estimator.tpu.TPUEstimatorSpec\n",
        "pkg/extra.py": "import tensorflow as tf\ntf.contrib.opt.LazyAdamOptimizer(0.1)\n",
        "main.py": "from pkg import model\nif __name__ == '__main__':\n    pass\n",
        "tool.py": "from pkg.extra import *\nimport pkg.extra\n"
                   "if __name__ == \"__main__\":\n    pass\n"})
    results, _ = cli.scan([str(tmp_path)], fleets=False)
    (result,) = results
    assert result.status == codebase.REFUSES  # Any use blocks the code base ...
    verdicts = {os.path.basename(p): v for p, v in result.entry_verdicts().items()}
    assert verdicts["main.py"][0] == codebase.RUNS  # ... but main.py never imports extra.py.
    assert verdicts["tool.py"][0] == codebase.REFUSES
    assert list(verdicts["tool.py"][1]) == ["tf.contrib.opt.LazyAdamOptimizer"]
    text = subprocess.run([sys.executable, "-m", "tpu_estimator_compat.scan", "--no-fleets",
                           str(tmp_path)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": REPO}).stdout
    assert f"script {tmp_path / 'main.py'}: runs unchanged" in text


def _corpus_cells():
    """Every code cell of legacy_models/ and ../shared/realworld (when present)."""
    realworld = os.environ.get("TPU_ESTIMATOR_COMPAT_REALWORLD",
                               os.path.join(REPO, "..", "shared", "realworld"))
    for root in (os.path.join(REPO, "legacy_models"), realworld):
        for folder, _, names in sorted(os.walk(root)):
            for name in sorted(names):
                if name.endswith(files.SUFFIXES):
                    path = os.path.join(folder, name)
                    for _, source in files.read_code(path):
                        yield path, source


def _reference_chains(tree, names):
    """Every outermost attribute chain (or lone loaded name) on `names`, by `ast.walk`."""
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    found = []
    for node in ast.walk(tree):
        if id(node) in inner or not isinstance(node, (ast.Attribute, ast.Name)):
            continue
        parts, base = [], node
        while isinstance(base, ast.Attribute):
            parts.append(base.attr)
            base = base.value
        if isinstance(base, ast.Name) and base.id in names and (
                parts or isinstance(node.ctx, ast.Load)):
            found.append((base.id, tuple(parts[::-1]), node.lineno))
    return sorted(found)


_TRICKY = [
    # Bare names as a container's children: decorator, base, except type, tests, iterables.
    "from tensorflow.contrib.framework import add_arg_scope as a\n@a\ndef f(x=a) -> a:\n"
    "  pass\nclass M(a):\n  pass\ntry:\n  pass\nexcept a:\n  pass\nif a:\n  pass\n"
    "while a:\n  pass\nfor a in a:\n  pass\nwith a:\n  pass\n",
    "import tensorflow as tf\r\nx = 1\r\ny = tf.contrib.opt.LazyAdamOptimizer\r\n",
    "import tensorflow as tf\rx = 1\ry = tf.contrib.opt.LazyAdamOptimizer\r",
    "import tensorflow as ｔｆ\n# é\nx = (1,\n     ｔｆ.contrib.opt.LazyAdamOptimizer)\n",
    "import tensorflow as tf\n@tf.function\ndef f(a=tf.float32):\n  return 1; b = tf.x\n",
    "import tensorflow as tf\nclass M(tf.keras.Model, metaclass=tf.y):\n  pass\n"
    "s = f'{tf.z}'\nwith tf.Graph().as_default() as g, tf.Session() as s:\n  pass\n",
    "import tensorflow as tf\nc = tf.train.Checkpoint(v=v)\n@tf.function\ndef f():\n"
    "  s = tf.train.Scaffold(saver=c, init_fn=g)\n  tf.disable_v2_behavior()\n"
    "e = model_to_estimator(keras_model=m)\nt = TPUConfig(num_cores_per_replica=2,\n"
    "  iterations_per_loop='3s')\nwith g.as_default():\n  tf.Session()\n",
    "def main():\n  import tensorflow as tf\n  try:\n    import tensorflow.contrib as c\n"
    "  except ImportError:\n    c = None\n  tf.Session(); c.opt.X\n",
]


@pytest.mark.parametrize("source", _TRICKY)
def test_skipping_leaves_without_a_word_changes_no_fact(source):
    _assert_same_facts(source)


def test_skipping_leaves_changes_no_fact_over_the_real_code():
    """The speed-ups of `read_facts` (leaves whose lines name nothing it looks for are not
    read; chains only on the file's names) against a read of every leaf and a plain
    `ast.walk`, over legacy_models/ and ../shared/realworld."""
    cells = list(_corpus_cells())
    assert len(cells) > 30
    for path, source in cells:
        _assert_same_facts(source, path)


def _assert_same_facts(source, path=""):
    from tpu_estimator_compat.scan import analyze

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return
    fast, full = analyze.read_facts(tree, source), analyze.read_facts(tree)
    assert dataclasses.asdict(fast) == dataclasses.asdict(full), path
    assert sorted(c[:3] for c in fast.chains) == _reference_chains(tree, fast.names), path
    # Every call, by `ast.walk`: the run semantics.
    reference = analyze.Facts()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            analyze._call(reference, node)
    for field in ("semantics", "eager_calls"):
        assert sorted(getattr(fast, field)) == sorted(getattr(reference, field)), (path, field)
