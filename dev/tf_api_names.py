"""Writes `tpu_estimator_compat/scan/tf_api_names.txt`: TensorFlow's public names, as data.

    python dev/tf_api_names.py [--check]      # from the repository root, in the TF 2.x venv

The scan (`python -m tpu_estimator_compat.scan`) decides whether a `tf.*` name a script uses
exists in this TensorFlow without importing TensorFlow: it reads this table. The table lists
every public API module reachable from `tensorflow` (with `TF_USE_LEGACY_KERAS=1`, as the
library runs: `tf.keras` is tf_keras) and its public names, and every module file of the
private `tensorflow` tree (`tensorflow.python.tpu.tpu_function`). Regenerate it when the
supported TensorFlow changes; `--check` fails when the installed TensorFlow's differs.

Format, one line each: `# ...` comments (versions); `M <path> <name> <name> ...` (a module at
attribute path `<path>` under `tf`, '' written as `.`); `A <path> <other path>` (the same
module object as another path: `compat.v1.keras` and `keras` are one); `P <dotted module>`
(a private module that exists).
"""

from __future__ import annotations

import os
import pathlib
import sys
import types

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

OUT = (pathlib.Path(__file__).resolve().parent.parent / "tpu_estimator_compat" / "scan"
       / "tf_api_names.txt")
# Public API modules only: attributes that are implementation modules (`tf.dtensor.python`,
# anything under a `python`/`src` package) are names, not walked.
_API_ROOTS = ("tensorflow", "tf_keras", "keras")
_PRIVATE_PARTS = frozenset(("python", "src", "core", "compiler", "tsl", "xla"))
_MAX_DEPTH = 7
_PRIVATE_TREES = ("python", "compiler", "core", "lite", "tsl", "xla", "dtensor", "tools")


def _members(module: types.ModuleType) -> tuple[list[str], list[tuple[str, types.ModuleType]]]:
    names, modules = [], []
    for name in dir(module):
        if name.startswith("_"):
            continue
        try:
            value = getattr(module, name)
        except Exception:  # pylint: disable=broad-except  # Lazy loaders raise anything.
            continue
        names.append(name)
        parts = getattr(value, "__name__", "").split(".")
        if (isinstance(value, types.ModuleType) and parts[0] in _API_ROOTS
                and not _PRIVATE_PARTS.intersection(parts)):
            modules.append((name, value))
    return sorted(names), modules


def api_lines(tf: types.ModuleType) -> list[str]:
    """`M` and `A` lines for every module reachable from `tf` (breadth first: short paths win).

    `compat.v2` is the root and the roots nested in `compat.v1` (`compat.v1.compat.v1`) are
    not walked: the scan folds those paths. Modules with the same names as one written
    before (`raw_ops` under each root) are `A` lines.
    """
    seen: dict[int, str] = {id(tf.compat.v2): ""}
    by_names: dict[tuple[str, ...], str] = {}
    lines, queue = [], [("", tf)]
    while queue:
        path, module = queue.pop(0)
        names, modules = _members(module)
        if len(names) > 20 and tuple(names) in by_names:
            lines.append(f"A {path} {by_names[tuple(names)]}")
            continue
        by_names[tuple(names)] = path or "."
        lines.append(f"M {path or '.'} {' '.join(names)}")
        for name, child in modules:
            child_path = f"{path}.{name}" if path else name
            if child_path.count(".") >= _MAX_DEPTH or (name == "compat" and path):
                continue
            if id(child) in seen:
                lines.append(f"A {child_path} {seen[id(child)] or '.'}")
                continue
            seen[id(child)] = child_path
            queue.append((child_path, child))
    return lines


def private_lines(tf: types.ModuleType) -> list[str]:
    root = pathlib.Path(tf.__file__).parent
    found = set()
    for tree in _PRIVATE_TREES:
        for path in (root / tree).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if all(p.isidentifier() for p in parts):
                found.add("tensorflow." + ".".join(parts))
    return [f"P {name}" for name in sorted(found)]


def table() -> str:
    import tensorflow as tf
    import tf_keras

    header = [f"# TensorFlow {tf.__version__}, tf_keras {tf_keras.__version__}, "
              "TF_USE_LEGACY_KERAS=1; written by dev/tf_api_names.py"]
    return "\n".join(header + api_lines(tf) + private_lines(tf)) + "\n"


def main(argv: list[str]) -> int:
    text = table()
    if "--check" in argv:
        same = OUT.exists() and OUT.read_text() == text
        print("up to date" if same else f"{OUT} differs from the installed TensorFlow's")
        return 0 if same else 1
    OUT.write_text(text)
    print(f"wrote {OUT}: {len(text.splitlines())} lines, {len(text)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
