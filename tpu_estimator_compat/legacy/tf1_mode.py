"""TF1 mode: the user's own modules see `import tensorflow` as the TF1 API; everyone else does not.

    user_code = UserCode.for_script("train.py", packages=["mylib"])
    detection = detect("train.py", user_code)        # auto: does it use TF1-only names?
    script_builtins = enable(user_code)               # then exec the script with them

Legacy scripts say `import tensorflow as tf` and mean TF1: `tf.metrics.accuracy` is a streaming
metric, `tf.nn.dropout(x, 0.9)` keeps 90%, `tf.flags` exists. On TF2 the same names are Keras
objects or gone, so aliasing attributes on the real module cannot make such code right. Instead
each user module (the script, modules under its directory, and packages named on the command
line) is executed with its own `__builtins__` whose `__import__` maps every `tensorflow[...]`
import onto `Tf1Module`: `tf.compat.v1` plus the aliases of `aliases.py` (`estimator`,
`contrib`) and nothing from TF2. Legacy module paths that are no attribute of that view
(`tensorflow.contrib.tpu.python.tpu`, `tensorflow.python.estimator`) go to the real import,
where `import_hook.py` serves them. TensorFlow itself, this library and third-party packages keep
the real `sys.modules['tensorflow']`; no file is rewritten, on disk or in memory. Tensor shapes
switch to TF1 behaviour (`shape[-1].value`), which TensorFlow only offers process-wide.

This module owns that view, the import hook that hands it to user modules, and the detection
of TF1 scripts. It must not know about the launcher's command line or about estimators.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import site
import sys
import sysconfig
import threading
import types
from typing import Any, Iterable, Sequence

from tpu_estimator_compat.legacy import aliases
from tpu_estimator_compat.legacy import import_hook as legacy_imports
from tpu_estimator_compat import log as logging

# Real packages under `tensorflow/` that are not part of any public API; user code that
# imports them (`from tensorflow.python.ops import array_ops`) gets the real modules.
_PRIVATE_SUBPACKAGES = frozenset(("python", "core", "compiler", "lite", "tools", "tsl", "xla"))
_MAX_SCANNED_FILES = 500


class Tf1Module(types.ModuleType):
    """`tensorflow` as TF1 scripts knew it: `tf.compat.v1` plus the legacy aliases.

    Names that exist only in TF2 raise AttributeError saying so rather than silently mixing a
    TF2 meaning into TF1 code; `tf.compat.v2` stays reachable on purpose.
    """

    def __init__(self) -> None:
        super().__init__("tensorflow", "TensorFlow's TF1 API (tf.compat.v1), as seen by user "
                                       "modules in tpu_estimator_compat's TF1 mode.")
        import tensorflow as tf

        self.__dict__["_tf1_v1"] = tf.compat.v1
        self.__dict__["_tf1_real"] = tf
        self.__dict__["compat"] = _Tf1Compat(self)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._tf1_v1, name, _MISSING)
        if value is not _MISSING:
            return value
        if name in _PRIVATE_SUBPACKAGES:
            return importlib.import_module(f"tensorflow.{name}")
        if name.startswith("__"):
            return getattr(self._tf1_real, name)
        hint = (f" It is a TF2 name: use `tf.compat.v2.{name}`."
                if hasattr(self._tf1_real, name) else "")
        raise AttributeError(
            f"`tf.{name}` does not exist in the TF1 API (tf.compat.v1) that TF1 mode gives "
            f"`import tensorflow` in your modules.{hint} Run the launcher with "
            "`--tf1_mode=off` if this script is TF2 code.")

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self._tf1_v1)) | set(self.__dict__))

    def __repr__(self) -> str:
        return "<module 'tensorflow' (TF1 API: tf.compat.v1 + tpu_estimator_compat aliases)>"


class _Tf1Compat(types.ModuleType):
    """`tf.compat` in TF1 mode: `v1` is the TF1 view itself, `v2` the real TF2 API."""

    def __init__(self, tf1: Tf1Module) -> None:
        super().__init__("tensorflow.compat")
        self.__dict__["v1"] = tf1

    def __getattr__(self, name: str) -> Any:
        import tensorflow as tf

        return getattr(tf.compat, name)


_MISSING = object()
_tf1_lock = threading.Lock()
_tf1_module: Tf1Module | None = None


def tf1_module() -> Tf1Module:
    """The process-wide TF1 view (built on first use, after `install_aliases()`)."""
    global _tf1_module
    with _tf1_lock:
        if _tf1_module is None:
            aliases.install_aliases()
            _tf1_module = Tf1Module()
        return _tf1_module


# ---------------------------------------------------------------------------------------------
# The import function user modules run with.
# ---------------------------------------------------------------------------------------------


def _resolve(path: Sequence[str], name: str) -> Any:
    obj: Any = tf1_module()
    for i, part in enumerate(path):
        try:
            obj = getattr(obj, part)
        except AttributeError as e:
            dotted = ".".join(["tensorflow", *path[:i + 1]])
            raise ModuleNotFoundError(f"No module named {dotted!r} in TF1 mode (importing "
                                      f"{name!r}): {e}", name=dotted) from e
    return obj


def _import_tensorflow(name: str, fromlist: Sequence[str] | None) -> Any:
    path = name.split(".")[1:]
    if (path and path[0] in _PRIVATE_SUBPACKAGES) or legacy_imports.serves(name):
        # Real modules (`tensorflow.python.ops`) and the legacy module paths the finder of
        # `legacy_imports` serves (`tensorflow.contrib.tpu.python.tpu`,
        # `tensorflow.python.estimator`): the real import finds both, after the aliases exist.
        tf1_module()
        module = builtins.__import__(name, None, None, fromlist or (), 0)
        return module if fromlist else tf1_module()  # Keep the bound `tensorflow` the view.
    target = _resolve(path, name)
    if not fromlist:
        return tf1_module()  # `import tensorflow.x.y [as z]` binds the top-level module.
    for item in fromlist:
        if item == "*":
            continue
        try:
            getattr(target, item)
        except AttributeError as e:
            raise ImportError(f"cannot import name {item!r} from {name!r} in TF1 mode: {e}",
                              name=name) from e
    return target


def tf1_import(name: str, globals: dict | None = None, locals: dict | None = None,  # noqa: A002
               fromlist: Sequence[str] | None = (), level: int = 0) -> Any:
    """`__import__` for user modules: `tensorflow[...]` resolves in the TF1 view."""
    if level == 0 and (name == "tensorflow" or name.startswith("tensorflow.")):
        return _import_tensorflow(name, fromlist)
    return builtins.__import__(name, globals, locals, fromlist, level)


def tf1_builtins() -> dict[str, Any]:
    """A `__builtins__` dict for one user module: the real builtins with `tf1_import`."""
    namespace = dict(builtins.__dict__)
    namespace["__import__"] = tf1_import
    return namespace


# ---------------------------------------------------------------------------------------------
# Which modules are the user's.
# ---------------------------------------------------------------------------------------------


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(path))


def _is_under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def _installed_dirs() -> tuple[str, ...]:
    """Directories holding the interpreter, its stdlib, site-packages and this library."""
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
            os.path.dirname(os.path.dirname(os.path.abspath(aliases.__file__)))}
    dirs.update(p for p in sysconfig.get_paths().values() if p)
    try:
        dirs.update(site.getsitepackages())
        dirs.add(site.getusersitepackages())
    except AttributeError:  # A virtualenv's stripped-down `site` module.
        pass
    return tuple(sorted({_real(d) for d in dirs if d}))


@dataclasses.dataclass(frozen=True)
class UserCode:
    """Which modules get the TF1 view: files under `roots` and the named top-level `packages`.

    Files of the interpreter, site-packages and this library are never user code, even when a
    script sits above them (a script at a repo root that holds `.venv`).
    """

    roots: tuple[str, ...]
    packages: tuple[str, ...] = ()
    excluded: tuple[str, ...] = dataclasses.field(default_factory=_installed_dirs)

    @classmethod
    def for_script(cls, script: str, packages: Iterable[str] = ()) -> "UserCode":
        return cls(roots=(_real(os.path.dirname(_real(script))),),
                   packages=tuple(p for p in packages if p))

    def owns(self, fullname: str, origin: str | None) -> bool:
        if fullname.split(".")[0] in self.packages:
            return True
        if not origin or fullname.split(".")[0] == "tensorflow":
            return False
        path = _real(origin)
        if any(_is_under(path, d) for d in self.excluded):
            return False
        return any(_is_under(path, root) for root in self.roots)


class _Tf1SourceLoader(importlib.machinery.SourceFileLoader):
    """Executes a user module with `tf1_builtins()`; the source and bytecode are unchanged."""

    def exec_module(self, module: types.ModuleType) -> None:
        module.__dict__["__builtins__"] = tf1_builtins()
        super().exec_module(module)


class UserModuleFinder(importlib.abc.MetaPathFinder):
    """First on `sys.meta_path`: finds user modules as the path finder would, loads them TF1."""

    def __init__(self, user_code: UserCode) -> None:
        self.user_code = user_code

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        del target
        if fullname.split(".")[0] in ("tensorflow", "tpu_estimator_compat"):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if (spec is None or type(spec.loader) is not importlib.machinery.SourceFileLoader
                or not self.user_code.owns(fullname, spec.origin)):
            return None
        spec.loader = _Tf1SourceLoader(spec.loader.name, spec.loader.path)
        return spec


def enable(user_code: UserCode) -> dict[str, Any]:
    """Turns TF1 mode on for this process; returns the `__builtins__` to run the script with.

    Process-wide effects: the finder goes first on `sys.meta_path`, and TensorFlow's tensor
    shapes switch to TF1 behaviour (`TensorShape[i]` is a `Dimension`).
    """
    import tensorflow as tf

    tf1_module()
    if not any(isinstance(f, UserModuleFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, UserModuleFinder(user_code))
    tf.compat.v1.disable_v2_tensorshape()
    return tf1_builtins()


# ---------------------------------------------------------------------------------------------
# Detection.
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Detection:
    """What the static scan found: `tf1` names used as TF1-only, `tf2` as TF2-only.

    `outside_tf1` holds (top-level package, evidence) for modules the user code imports from
    another `sys.path` entry (not installed, not under the script's directory, not named):
    they keep the real TF2 API, so TF1-only names there fail when the script runs
    (rowanz/grover `discrimination/run_discrimination.py` importing the repository's `lm`).
    """

    tf1: tuple[str, ...]
    tf2: tuple[str, ...]
    files: tuple[str, ...]
    outside_tf1: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def is_tf1(self) -> bool:
        return bool(self.tf1)


def _resolves(root: Any, chain: Sequence[str]) -> bool:
    obj = root
    try:
        for part in chain:
            obj = getattr(obj, part)
    except Exception:  # pylint: disable=broad-except  # Lazy loaders raise anything.
        return False
    return True


def _classify(chain: tuple[str, ...]) -> str | None:
    """'tf1' for a name only the TF1 API has, 'tf2' for one only TF2 has, else None."""
    import tensorflow as tf

    if not chain or chain[0] in ("compat", "estimator") or chain[0].startswith("_"):
        return None  # Same in both views, or aliased in both.
    if chain[0] == "contrib":
        return "tf1"
    in_v1 = _resolves(tf.compat.v1, chain)
    in_v2 = _resolves(tf, chain)
    if in_v1 and not in_v2:
        return "tf1"
    if in_v2 and not in_v1:
        return "tf2"
    return None


def _attribute_chain(node: ast.Attribute) -> tuple[str, tuple[str, ...]] | None:
    parts: list[str] = []
    current: ast.AST = node
    while isinstance(current, ast.Attribute):
        parts.append(current.attr)
        current = current.value
    if not isinstance(current, ast.Name):
        return None
    return current.id, tuple(reversed(parts))


class _FileScan:
    """Chains of `tensorflow` names one file uses, and the local modules it imports."""

    def __init__(self, tree: ast.AST) -> None:
        self.aliases: set[str] = set()
        self.chains: list[tuple[int, tuple[str, ...]]] = []
        # The chains of `from tensorflow.<module> import <name>` whose module the import
        # hook serves with or without TF1 mode (`from tensorflow.contrib import tpu`).
        self.served: set[tuple[int, tuple[str, ...]]] = set()
        self.imports: list[tuple[int, str, tuple[str, ...]]] = []  # (level, module, names)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "tensorflow":
                        self.aliases.add(alias.asname or "tensorflow")
                    self.imports.append((0, alias.name, ()))
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                names = tuple(a.name for a in node.names)
                if node.level == 0 and (module == "tensorflow"
                                        or module.startswith("tensorflow.")):
                    base = tuple(module.split(".")[1:])
                    found = [(node.lineno, base + (n,)) for n in names if n != "*"]
                    self.chains.extend(found)
                    if legacy_imports.serves(module):
                        self.served.update(found)
                self.imports.append((node.level, module, names))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                found = _attribute_chain(node)
                if found and found[0] in self.aliases:
                    self.chains.append((node.lineno, found[1]))


def _module_file(root: str, dotted: str) -> str | None:
    base = os.path.join(root, *dotted.split("."))
    for candidate in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(candidate):
            return candidate
    return None


def _package_root(package: str) -> str | None:
    """The sys.path entry a named top-level package is found under (without importing it)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.dirname(list(spec.submodule_search_locations)[0])


def _absolute_name(module: str, level: int, importer: str, importer_path: str) -> str:
    if not level:
        return module
    package = importer if importer_path.endswith("__init__.py") else importer.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{module}".strip(".") if module else package


def _import_roots(user_code: UserCode) -> list[str]:
    """Where `_local_imports` looks absolute module names up, in order.

    The script's own roots, then the `sys.path` entries as Python would search them (a
    package root on PYTHONPATH: `from language.qa.bert_joint import run_nq` in a script inside
    that package reaches a sibling file the script's directory alone cannot name), then the
    named packages' roots. Only files `user_code` owns are followed from any of them.
    """
    return list(dict.fromkeys(
        list(user_code.roots) + [_real(p) for p in sys.path if p and os.path.isdir(p)]
        + [r for r in map(_package_root, user_code.packages) if r]))


def _local_imports(importer: str, path: str, scan: _FileScan, user_code: UserCode,
                   roots: list[str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(module name, file) of each module that `path` imports from `roots` (`_import_roots`),
    found without importing: (the user modules, the others that are not installed code)."""
    found: list[tuple[str, str]] = []
    outside: list[tuple[str, str]] = []
    for level, module, names in scan.imports:
        base = _absolute_name(module, level, importer, path)
        candidates = [base] + [f"{base}.{n}".strip(".") for n in names if n != "*"]
        for name in filter(None, candidates):
            first = None
            for root in roots:
                file = _module_file(root, name)
                if file and user_code.owns(name, file):
                    found.append((name, _real(file)))
                    break
                first = first or file
            else:
                if (first and name.split(".")[0] not in ("tensorflow", "tpu_estimator_compat")
                        and not any(_is_under(_real(first), d) for d in user_code.excluded)):
                    outside.append((name, _real(first)))
    return found, outside


def _scan_file(path: str) -> _FileScan | None:
    try:
        with open(path, encoding="utf-8") as f:
            return _FileScan(ast.parse(f.read(), filename=path))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError) as e:
        logging.debug("TF1 detection skips %s: %s", path, e)
        return None


def _tf1_and_tf2_names(path: str, scan: _FileScan,
                       served: bool = True) -> tuple[list[str], list[str]]:
    """The file's TF1-only and TF2-only names; without `served`, leaving out the imports the
    import hook serves whatever the TF1 mode (`from tensorflow.contrib import tpu`)."""
    tf1: list[str] = []
    tf2: list[str] = []
    for lineno, chain in sorted(set(scan.chains) - (set() if served else scan.served)):
        kind = _classify(chain)
        if kind:
            (tf1 if kind == "tf1" else tf2).append(
                f"{os.path.basename(path)}:{lineno} tf.{'.'.join(chain)}")
    return tf1, tf2


def detect(script: str, user_code: UserCode) -> Detection:
    """Scans the script and the user modules it imports for TF1-only and TF2-only names.

    Static, so nothing of the user's runs: it follows `import`s into files owned by
    `user_code` and classifies every `tf.a.b` chain hanging off an `import tensorflow [as tf]`
    (and every `from tensorflow... import x`) against the TF1 and TF2 APIs.
    """
    tf1: list[str] = []
    tf2: list[str] = []
    queue, seen = [("__main__", _real(script))], []
    outside_queue: list[tuple[str, str]] = []
    roots = _import_roots(user_code)  # Once per detection, not per scanned file.
    while queue and len(seen) < _MAX_SCANNED_FILES:
        name, path = queue.pop(0)
        if path in seen:
            continue
        seen.append(path)
        scan = _scan_file(path)
        if scan is None:
            continue
        file_tf1, file_tf2 = _tf1_and_tf2_names(path, scan)
        tf1 += file_tf1
        tf2 += file_tf2
        owned, outside = _local_imports(name, path, scan, user_code, roots)
        queue += owned
        outside_queue += outside
    return Detection(tuple(tf1), tuple(tf2), tuple(seen),
                     _outside_tf1(outside_queue, user_code, roots, len(seen)))


def _outside_tf1(queue: list[tuple[str, str]], user_code: UserCode, roots: list[str],
                 scanned: int) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(package, evidence) for the imported modules outside the user code that use TF1-only
    names: only to say which `--tf1_packages` the script needs; they never vote on TF1 mode."""
    evidence: dict[str, list[str]] = {}
    seen: list[str] = []
    while queue and scanned + len(seen) < _MAX_SCANNED_FILES:
        name, path = queue.pop(0)
        if path in seen or name.split(".")[0] in evidence:  # One file's evidence will do.
            continue
        seen.append(path)
        scan = _scan_file(path)
        if scan is None:
            continue
        # Code outside the user code keeps the real TF2 API; what the import hook serves
        # there (`from tensorflow.contrib import tpu`) works all the same.
        file_tf1, _ = _tf1_and_tf2_names(path, scan, served=False)
        if file_tf1:
            evidence.setdefault(name.split(".")[0], []).extend(file_tf1)
        package = name.split(".")[0]  # Within the package only: not into its dependencies.
        queue += [(module, file) for module, file in
                  _local_imports(name, path, scan, user_code, roots)[1]
                  if module.split(".")[0] == package]
    return tuple((package, tuple(found)) for package, found in evidence.items())
