"""Extracts the TF1 Estimator programs of TensorFlow's docs into runnable `.py` files.

    python dev/tf_docs_extract.py --docs_git /work/.mirror/tensorflow+docs/repo \
        --commit 7c3650212740204359d4ceae481abc79345541be --out legacy_models/tf_docs

Each notebook named in PROGRAMS becomes one program: its setup cells and its TF1 cells, in the
notebook's order, joined as the notebook runs them. The docs' lines are kept as written except:

- notebook-only lines are dropped: shell (`!pip ...`, `!rm ...`) and magics (`%ls`, `%tensorboard`);
- a cell's final bare expression, which a notebook displays, is printed: `print(EXPR)` (not a
  final `model.compile(...)` / `model.summary()`, which return None);
- data that the docs download (a URL, `tf.keras.datasets.mnist`, `tensorflow_datasets`, ImageNet
  weights) comes from local files of the same schema (`tf_docs_data.py`): the SUBSTITUTIONS below;
- lines that only feed a notebook's display or a TF2 section (DROPPED_LINES: an import of a TF2-only
  package, `clear_output()`, plotting) are dropped.

Every changed or dropped line is listed in the header of the program it belongs to.
"""

import argparse
import ast
import json
import os
import re
import subprocess

_MIGRATE = "site/en/guide/migrate/"
_TUTORIAL = "site/en/tutorials/estimator/"

# program name -> (notebook path, code cell indices: setup + TF1 cells).
PROGRAMS = {
    "migrate_canned_estimators": (_MIGRATE + "canned_estimators.ipynb",
                                  [6, 8, 9, 11, 15, 16, 23, 24, 32, 33]),
    "migrate_checkpoint_saver": (_MIGRATE + "checkpoint_saver.ipynb", [5, 6, 8, 9]),
    "migrate_early_stopping": (_MIGRATE + "early_stopping.ipynb", [5, 8, 10]),
    "migrate_evaluator": (_MIGRATE + "evaluator.ipynb", [5, 6, 8, 10]),
    "migrate_fault_tolerance": (_MIGRATE + "fault_tolerance.ipynb", [6, 7, 8, 10, 12, 14, 16]),
    "migrate_logging_stop_hook": (_MIGRATE + "logging_stop_hook.ipynb", [5, 6, 9]),
    "migrate_metrics_optimizers": (_MIGRATE + "metrics_optimizers.ipynb", [5, 7, 9, 10, 12]),
    "migrate_migrating_checkpoints": (_MIGRATE + "migrating_checkpoints.ipynb", [6, 38, 39]),
    "migrate_migrating_estimator": (_MIGRATE + "migrating_estimator.ipynb", [5, 6, 8, 10, 12]),
    "migrate_migrating_feature_columns": (
        _MIGRATE + "migrating_feature_columns.ipynb",
        [4, 6, 8, 10, 14, 19, 24, 28, 33, 37, 41, 45, 47, 49, 51]),
    "migrate_mirrored_strategy": (_MIGRATE + "mirrored_strategy.ipynb", [6, 7, 10]),
    "migrate_multi_worker_cpu_gpu_training": (_MIGRATE + "multi_worker_cpu_gpu_training.ipynb",
                                              [6, 7, 9, 11, 14]),
    "migrate_saved_model": (_MIGRATE + "saved_model.ipynb", [5, 8, 9, 11, 12, 14, 15]),
    "migrate_sessionrunhook_callback": (_MIGRATE + "sessionrunhook_callback.ipynb", [5, 6, 8, 9]),
    "migrate_tensorboard": (_MIGRATE + "tensorboard.ipynb", [5, 6, 8, 9]),
    "migrate_tpu_estimator": (_MIGRATE + "tpu_estimator.ipynb", [5, 6, 9, 11, 12, 14, 16]),
    "migrate_tpu_embedding": (_MIGRATE + "tpu_embedding.ipynb",
                              [5, 6, 8, 11, 13, 15, 17, 19, 20, 22, 24]),
    "tutorial_premade": (_TUTORIAL + "premade.ipynb",
                         [7, 9, 11, 13, 15, 18, 20, 22, 25, 28, 31, 34, 36]),
    "tutorial_linear": (_TUTORIAL + "linear.ipynb",
                        [6, 7, 9, 10, 13, 14, 16, 29, 31, 33, 35, 37, 39, 42, 44, 47, 49]),
    "tutorial_keras_model_to_estimator": (_TUTORIAL + "keras_model_to_estimator.ipynb",
                                          [7, 10, 12, 14, 16, 18, 20]),
    "guide_estimator": ("site/en/guide/estimator.ipynb",
                        [7, 8, 13, 16, 18, 21, 22, 23, 27, 29, 31, 32, 34, 36, 39, 40, 41, 42,
                         44, 46, 49, 51, 52, 55, 57]),
}

# The import of the local data module, added after a program's first line that imports
# TensorFlow when a substitution below needs it.
DATA_IMPORT = "import tf_docs_data  # Local files of the downloaded data's schema (README)."

# (pattern, replacement, needs DATA_IMPORT): the data path only.
SUBSTITUTIONS = [
    (r"^import tensorflow_datasets as tfds$",
     "import tf_docs_data as tfds  # Local files of the TFDS data's schema (README).", False),
    (r"^mnist = tf\.keras\.datasets\.mnist\b.*$",
     "mnist = tf_docs_data.mnist  # Local files of MNIST's schema (README).", True),
    (r"pd\.read_csv\(('https://[^']+')\)", r"pd.read_csv(tf_docs_data.local(\1))", True),
    (r"tf\.keras\.utils\.get_file\(", "tf_docs_data.get_file(", True),
    (r"^(    input_shape=\(160, 160, 3\), include_top=False)\)$",
     r"\1, weights=None)  # No ImageNet download (README).", False),
]

# Lines that serve only a notebook's display or a TF2 section of the notebook.
DROPPED_LINES = [
    r"^import tensorflow_decision_forests as tfdf$",  # TF2 section (decision forests).
    r"^import tensorflow_recommenders as tfrs$",  # TF2 section (TPUEmbedding layer).
    r"^# TPUEmbedding layer is not part of TensorFlow\.$",  # That import's comment.
    r"^import matplotlib\.pyplot as plt$",
    r"^from matplotlib import pyplot as plt$",
    r"^from IPython\.display import clear_output$",
    r"^clear_output\(\)$",
    r"^plt\.",
    r"^probs\.plot\(",
]


# Final calls a notebook shows nothing for (they return None): left as they are.
_RETURNS_NONE = ("compile", "summary")


def _is_notebook_only(line):
    stripped = line.strip()
    return stripped.startswith("!") or stripped.startswith("%")


def _print_last_expression(source):
    """Wraps the cell's final bare expression in print(), as the notebook displays it."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return source
    last = tree.body[-1]
    value = last.value
    if isinstance(value, ast.Call) and (getattr(value.func, "id", None) == "print" or
                                        getattr(value.func, "attr", None) in _RETURNS_NONE):
        return source
    lines = source.split("\n")
    first, end = last.lineno - 1, last.end_lineno - 1
    col, end_col = last.col_offset, last.end_col_offset
    lines[end] = lines[end][:end_col] + ")" + lines[end][end_col:]
    lines[first] = lines[first][:col] + "print(" + lines[first][col:]
    return "\n".join(lines)


def _cell_source(cell, changes):
    kept = []
    continued = False  # The previous line was a shell line ending in a backslash.
    for line in "".join(cell["source"]).split("\n"):
        if continued or _is_notebook_only(line):
            changes.append("dropped (notebook-only): " + line.strip())
            continued = line.rstrip().endswith("\\")
            continue
        if any(re.search(pattern, line) for pattern in DROPPED_LINES):
            changes.append("dropped (display or TF2 section): " + line.strip())
            continue
        kept.append(line)
    source = "\n".join(kept).rstrip()
    printed = _print_last_expression(source)
    if printed != source:
        line = next(new for old, new in zip(source.split("\n"), printed.split("\n"))
                    if old != new)
        changes.append("printed (notebook display): " + line.strip())
    return printed


def _substitute(source, changes):
    needs_import = False
    out = []
    for line in source.split("\n"):
        new = line
        for pattern, replacement, needs in SUBSTITUTIONS:
            newer = re.sub(pattern, replacement, new)
            if newer != new:
                needs_import = needs_import or needs
                new = newer
        if new != line:
            changes.append("data: `%s` -> `%s`" % (line.strip(), new.strip()))
        out.append(new)
    return "\n".join(out), needs_import


def extract(notebook, cells, name, commit):
    changes = []
    parts = []
    nb_cells = notebook["cells"]
    for index in cells:
        cell = nb_cells[index]
        if cell["cell_type"] != "code":
            raise ValueError("%s: cell %d is %s, not code" % (name, index, cell["cell_type"]))
        source = _cell_source(cell, changes)
        if source.strip():
            parts.append("# In[%d]:\n%s\n" % (index, source))
    body, needs_import = _substitute("\n\n".join(parts), changes)
    if needs_import:
        lines = body.split("\n")
        at = next(i for i, line in enumerate(lines)
                  if re.match(r"^import tensorflow as tf$", line))
        lines.insert(at + 1, DATA_IMPORT)
        body = "\n".join(lines)
        changes.append("added: `%s`" % DATA_IMPORT)
    return body, changes


def header(path, cells, commit, changes):
    out = ["# Extracted from tensorflow/docs %s (commit %s), code cells %s," % (
        path, commit[:9], ", ".join(str(c) for c in cells)),
           "# by dev/tf_docs_extract.py. Copyright The TensorFlow Authors, Apache-2.0 (LICENSE).",
           "# The docs' lines, unchanged except:"]
    out += ["#   - " + change for change in changes] or ["#   (none)"]
    return "\n".join(out) + "\n\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs_git", required=True, help="tensorflow/docs git directory.")
    parser.add_argument("--commit", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, (path, cells) in PROGRAMS.items():
        text = subprocess.run(["git", "-C", args.docs_git, "show", "%s:%s" % (args.commit, path)],
                              check=True, capture_output=True, text=True).stdout
        body, changes = extract(json.loads(text), cells, name, args.commit)
        with open(os.path.join(args.out, name + ".py"), "w") as f:
            f.write(header(path, cells, args.commit, changes) + body)
        print("%s: %d cells, %d changed lines" % (name, len(cells), len(changes)))


if __name__ == "__main__":
    main()
