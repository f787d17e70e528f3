"""`tf.contrib` and its modules as real module objects, built from `contrib_map`'s table.

    tree = ContribTree()
    contrib = tree.root()                        # what `tf.compat.v1.contrib` is
    contrib.keras.layers.Dense is tf_keras.layers.Dense                   # True
    tree.module_at(["keras", "api", "keras", "models"])   # `import tensorflow.contrib.keras...`
    contrib.opt.LazyAdamOptimizer    # LegacySymbolError naming the replacement

Every attribute of a contrib module is decided here in one place, so the attribute route
(`tf.contrib.X.Y`) and the import route (`from tensorflow.contrib.X import Y`, which
`legacy/import_hook.py` answers with `module_at`) hand out the same objects and the same errors:
a name's own table entry first (served from its home, or refused with the entry's note), then
its module's homes in order (a module found there is wrapped as a contrib module of its own,
so `tf.contrib.keras.layers` names its missing names), else the nearest entry's hint.
Modules are built on first use and kept per path, so every route reaches the same object;
plain values are looked up on every access, so a patch installed later (the mapped
`cross_replica_sum`) is what a later lookup sees. It knows nothing about the import system,
TF1 mode or estimators, and decides no verdict itself: those are `contrib_map`'s.
"""

from __future__ import annotations

import functools
import importlib
import threading
import types
from typing import Any, Callable, Sequence

from tpu_estimator_compat.legacy import namespaces
from tpu_estimator_compat.legacy import contrib_map

_MISSING = object()
_PY, _TF, _CONTRIB = "py:", "tf:", "contrib:"
# Homes that are optional installs, with the command that installs them.
_INSTALL = {"tf_slim": "pip install tf-slim==1.1.0", "tf_keras": "pip install tf-keras",
            "tensorboard": "pip install tensorboard"}


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _attributes(obj: Any, chain: str) -> Any:
    for part in chain.split(".") if chain else ():
        obj = getattr(obj, part)
    return obj


def _is_submodule(value: Any, home: Any) -> bool:
    """True for a module inside the package `home` (`tf_keras...keras.layers` of
    `tf_keras...keras`)."""
    return (isinstance(value, types.ModuleType) and isinstance(home, types.ModuleType)
            and not isinstance(value, ContribModule)
            and getattr(value, "__name__", "").startswith(getattr(home, "__name__", "") + "."))


@functools.lru_cache(maxsize=None)
def _called(module: str, function: str) -> types.SimpleNamespace:
    """The names a `py:<module>:<function>()` home returns, called once per process."""
    return types.SimpleNamespace(**getattr(importlib.import_module(module), function)())


def _not_importable(path: str, module: str, error: ImportError) -> namespaces.LegacySymbolError:
    top = module.split(".")[0]
    fix = f"Run `{_INSTALL[top]}`." if top in _INSTALL else f"Install `{top}`."
    return namespaces.LegacySymbolError(
        f"`tf.contrib.{path}` is served by `{module}`, which does not import here ({error}). "
        f"{fix}")


def refusal(path: str) -> namespaces.LegacySymbolError:
    """Our error for `tf.contrib.<path>`, ending with the table's hint for it."""
    return namespaces.LegacySymbolError(
        f"`tf.contrib.{path}` is not available on TensorFlow 2 through tpu_estimator_compat. "
        f"{contrib_map.error_hint(path)}")


def module_at(root: types.ModuleType, parts: Sequence[str]) -> types.ModuleType | None:
    """The module at `tensorflow.contrib.<parts>` under the `tf.contrib` module `root`, or
    None when a part is no module (a refused, missing or plain name)."""
    return root._contrib_tree.module_at(parts)  # pylint: disable=protected-access


class ContribModule(namespaces.AliasNamespace):
    """One `tensorflow.contrib[.<path>]` module; its attributes are its tree's to decide."""

    def __init__(self, tree: "ContribTree", path: str,
                 sources: Sequence[Callable[[], Any]]) -> None:
        display = f"tf.contrib.{path}" if path else "tf.contrib"
        super().__init__(f"tensorflow.contrib.{path}" if path else "tensorflow.contrib",
                         display, f"Legacy module `{display}` (tpu_estimator_compat).",
                         sources=sources,
                         hint=contrib_map.error_hint(path) if path else contrib_map.GENERIC_HINT)
        self.__dict__["_contrib_tree"] = tree
        self.__dict__["_contrib_path"] = path

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")
        return self._contrib_tree.attribute(self, attr)

    def _alias_hint_for(self, attr: str) -> str:
        """The hint our error for `attr` of this module ends with (legacy/import_hook.py reads it)."""
        return contrib_map.error_hint(_join(self._contrib_path, attr))

    def __dir__(self) -> list[str]:
        names = {e.path.rpartition(".")[2] for e in contrib_map.children(self._contrib_path)}
        try:
            names.update(super().__dir__())
        except ImportError:  # A home that is not installed lists nothing.
            names.update(self.__dict__)
        return sorted(names)


class ContribTree:
    """Every `tf.contrib` module of one process, built on first use and kept by path."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._modules: dict[str, ContribModule] = {}
        self._root = ContribModule(self, "", ())

    def root(self) -> ContribModule:
        """`tensorflow.contrib` itself."""
        return self._root

    def attribute(self, module: ContribModule, attr: str) -> Any:
        """`module.attr`: its entry's object, else its module's homes', else our error."""
        path = _join(module._contrib_path, attr)  # pylint: disable=protected-access
        entry = contrib_map.BY_PATH.get(path)
        if entry is not None:
            return self._entry_value(entry)
        if module is self._root:
            return self._module(path, ())  # An unknown contrib module: each name refused.
        for source in module._alias_sources:  # pylint: disable=protected-access
            home = source()
            value = getattr(home, attr, _MISSING)
            if value is _MISSING:
                continue
            if _is_submodule(value, home):
                # `tf.contrib.keras.layers`: a contrib module of its own over the home's, so
                # that its missing names fail by name and `import tensorflow.contrib.keras.
                # layers` gets this object, never the home's module under a second name.
                return self._module(path, (lambda v=value: v,))
            return value  # Other modules a home holds (`framework.nest` is `tf.nest`) as is.
        raise refusal(path)

    def module_at(self, parts: Sequence[str]) -> types.ModuleType | None:
        """The module at `tensorflow.contrib.<parts>`, or None when a part is no module."""
        obj: Any = self._root
        for part in parts:
            try:
                obj = getattr(obj, part)
            except AttributeError:  # LegacySymbolError included: a refused or missing name.
                return None
        return obj if isinstance(obj, types.ModuleType) else None

    def _entry_value(self, entry: contrib_map.Entry) -> Any:
        if entry.kind == contrib_map.MODULE:
            return self._module(entry.path, [self._home(h, entry.path) for h in entry.home])
        if entry.status == contrib_map.REFUSED:
            raise refusal(entry.path)
        return self._home(entry.home[0], entry.path)()

    def _module(self, path: str, sources: Sequence[Callable[[], Any]]) -> ContribModule:
        with self._lock:
            module = self._modules.get(path)
            if module is None:
                module = self._modules[path] = ContribModule(self, path, sources)
            return module

    def _home(self, spec: str, path: str) -> Callable[[], Any]:
        """A function returning the object `spec` names (see `contrib_map`), looked up when
        called."""
        if spec.startswith(_CONTRIB):
            target = spec[len(_CONTRIB):].split(".")
            return lambda: self.module_at(target)
        if spec.startswith(_TF):
            return lambda: _attributes(importlib.import_module("tensorflow"), spec[len(_TF):])
        if not spec.startswith(_PY):
            raise ValueError(f"contrib_map home {spec!r} of {path!r}: not tf:, py: or contrib:")
        module, _, chain = spec[len(_PY):].partition(":")

        def load() -> Any:
            try:
                if chain.endswith("()"):
                    return _called(module, chain[:-2])
                return _attributes(importlib.import_module(module), chain)
            except ImportError as e:
                raise _not_importable(path, module, e) from e

        return load
