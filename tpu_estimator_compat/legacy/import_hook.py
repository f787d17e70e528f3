"""Legacy module paths as real modules: `tensorflow.contrib.*`, `tensorflow_estimator.*`, ...

    import tpu_estimator_compat
    tpu_estimator_compat.install_aliases()          # installs the finder below
    from tensorflow.contrib import tpu as contrib_tpu
    from tensorflow.python.estimator import estimator
    from tensorflow_estimator.python.estimator.tpu import tpu_estimator
    estimator._load_global_step_from_checkpoint_dir(model_dir)

Real TF1 code reached Estimator, TPUEstimator and contrib through module paths, not only
through attributes of `tf`: `from tensorflow.contrib import layers`, `import
tensorflow_estimator as tf_estimator`, `from tensorflow.python.estimator import estimator`
(see `migration_guide/launcher.md` for the paths and where each was seen). Python resolves
these through `sys.modules` and `sys.meta_path`, so this module owns a meta-path finder that
builds those modules lazily, on first import, out of the alias namespaces `install_aliases`
installed (`namespaces.installed()`), and the private helpers real code called through them
(`_load_global_step_from_checkpoint_dir`).
A name no module serves fails with `namespaces.LegacySymbolError` (an ImportError subclass is
raised on the import path) naming the legacy symbol, never a bare `ModuleNotFoundError`.
It must not know about TF1 mode, the launcher's command line, or how estimators run.
"""

from __future__ import annotations

import enum
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
import types
from typing import Any, Callable, Sequence

from tpu_estimator_compat.legacy import contrib_map
from tpu_estimator_compat.legacy import contrib_namespace
from tpu_estimator_compat.legacy import estimator_map
from tpu_estimator_compat.legacy import estimator_names
from tpu_estimator_compat.legacy import namespaces

_CONTRIB = "tensorflow.contrib"
_TFE = estimator_map.TFE
_TFE_PRIVATE = estimator_map.TFE_PRIVATE
_TF_PRIVATE_ESTIMATOR = estimator_map.TF_PRIVATE_ESTIMATOR
_ESTIMATOR_ROOTS = estimator_map.ESTIMATOR_MODULE_NAMES
# TF 2.15's `tensorflow.python.tpu` stubs of tensorflow-estimator's TPU modules (see
# `estimator_map.TF_TPU_STUBS`), served only where TensorFlow itself has no such module.
_TF_PRIVATE_TPU = estimator_map.TF_PRIVATE_TPU
_TF_TPU_STUBS = estimator_map.TF_TPU_STUBS
# Removed TF modules whose names this library implements, by parent package.
_TF_LIBRARY_MODULES = {_TF_PRIVATE_TPU: estimator_map.TF_TPU_LIBRARY_NAMES,
                       estimator_map.TF_PRIVATE_DISTRIBUTE:
                           estimator_map.TF_DISTRIBUTE_LIBRARY_NAMES,
                       estimator_map.TF_PRIVATE_EAGER: estimator_map.TF_EAGER_LIBRARY_NAMES}
# Removed modules of packages TensorFlow still has, served only under their own names.
_TF_LIBRARY_ONLY = {parent: names for parent, names in _TF_LIBRARY_MODULES.items()
                    if parent != _TF_PRIVATE_TPU}
_PREFIXES = ((_CONTRIB, _TFE, _TF_PRIVATE_ESTIMATOR, _TF_PRIVATE_TPU + ".")
             + tuple(f"{parent}.{name}" for parent, names in _TF_LIBRARY_ONLY.items()
                     for name in names)
             + _ESTIMATOR_ROOTS)
# tensorflow-estimator 2.15.0's private modules, relative to `_TFE_PRIVATE` (TF 1.x shipped
# the same tree as `tensorflow.python.estimator`; both prefixes serve it).
_PRIVATE_ESTIMATOR_MODULES = estimator_map.PRIVATE_ESTIMATOR_MODULES

# Legacy contrib trees kept under `<name>.python.<pkg>.<module>`; deeper names are symbols.
_CONTRIB_MODULE_DEPTH = 4
_SLIM_PREFIXES = ("slim.python.slim.", "slim.")
# `<contrib name>.<module>` of legacy modules this library re-implements, by its module:
# `from tensorflow.contrib.training.python.training import hparam` (Cloud ML Engine samples).
_LIBRARY_TWINS = {"training.hparam": "tpu_estimator_compat.contrib.hparams"}
# `<contrib name>.python.<pkg>.` paths whose TF 1.14+ modules re-exported a core TensorFlow
# module, by where that module lives under `tensorflow.python.tpu`: `from
# tensorflow.contrib.tpu.python.tpu import tpu_function` then
# `tpu_function.get_tpu_context().number_of_shards` (google/compare_gan `arch_ops.py`).
_CORE_TPU_TWINS = {"tpu.python.tpu.": "", "tpu.python.ops.": "ops."}


def _load_global_step_from_checkpoint_dir(checkpoint_dir: str) -> int:
    """The global step of the newest checkpoint in `checkpoint_dir`, 0 when there is none.

    Legacy `tensorflow_estimator.python.estimator.estimator` kept this private helper, and
    TPU reference scripts (tensorflow/tpu efficientnet, dcgan, deeplab `main.py`) call it to
    resume their train/eval loop; like the original it answers 0 for any unreadable state.
    """
    import tensorflow as tf

    try:
        path = tf.train.latest_checkpoint(checkpoint_dir)
        return int(tf.train.load_variable(path, tf.compat.v1.GraphKeys.GLOBAL_STEP))
    except Exception:  # pylint: disable=broad-except  # Legacy: any failure means "step 0".
        return 0


def _tpu_embedding_names(names: Sequence[str]) -> dict[str, Any]:
    from tpu_estimator_compat.embedding import config as embedding_config

    return {name: getattr(embedding_config, name) for name in names}


class ExportSavedModelApiVersion(enum.Enum):
    """Legacy `tpu_estimator.ExportSavedModelApiVersion`, the value of `TPUEstimator`'s
    `export_saved_model_api_version` (tensor2tensor `trainer_lib.create_estimator` reads `.V1`
    whenever it builds a TPUEstimator). This library takes either and exports the same
    `serve` SavedModel (V2's `model_fn_inference_on_tpu` rewrite is TPU-only)."""

    V1 = 1
    V2 = 2


def _private_members(relative: str) -> dict[str, Any]:
    """The private helpers and names real code called through the private module `relative`
    (`estimator_map.PRIVATE_HELPER_NAMES`, `PRIVATE_LIBRARY_NAMES`, `PRIVATE_EMBEDDING_NAMES`):
    legacy `tpu_estimator` re-exported the embedding spec and three parameter classes."""
    helpers: dict[str, Any] = {}
    if "_canned_estimator_api_gauge" in estimator_map.PRIVATE_HELPER_NAMES.get(relative, ()):
        from tpu_estimator_compat._tf import estimator_seam

        gauges = estimator_seam.api_gauges()
        helpers.update(_estimator_api_gauge=gauges[0], _canned_estimator_api_gauge=gauges[1])
    members = _tpu_embedding_names(estimator_map.PRIVATE_EMBEDDING_NAMES.get(relative, ()))
    members.update({name: helpers[name]
                    for name in estimator_map.PRIVATE_HELPER_NAMES.get(relative, ())})
    for name, where in estimator_map.PRIVATE_LIBRARY_NAMES.get(relative, {}).items():
        module, _, attribute = where.partition(":")
        members[name] = getattr(importlib.import_module(module), attribute)
    return members


class LegacyImportError(ImportError):
    """`import`/`from ... import` of a legacy name that no alias serves; says what to do."""


def _estimator() -> Any:
    return namespaces.installed()["estimator"]


def _contrib() -> Any:
    return namespaces.installed()["contrib"]


def _namespace(name: str, display: str, sources: Sequence[Callable[[], Any]],
               members: dict[str, Any] | None = None, hint: str = "",
               homes: dict[str, tuple[str, str]] | None = None) -> namespaces.AliasNamespace:
    return namespaces.AliasNamespace(name, display, f"Legacy module `{display}`.", members=members,
                                  sources=sources, hint=hint, homes=homes)


def _estimator_sources() -> list[Callable[[], Any]]:
    """Where a private estimator module's public names come from: the legacy public API.

    Legacy private modules defined their classes under their public names
    (`tpu.tpu_estimator.TPUEstimator`, `export.export_output.PredictOutput`,
    `hooks.basic_session_run_hooks.LoggingTensorHook`), so looking a name up in
    `tf.compat.v1.estimator`, then its parts in `estimator_map.PRIVATE_SOURCES`' order answers
    them; then the v2 namespace's, for the names only it had (`canned.rnn.RNNClassifier`).
    """
    def source(key: str, namespace: str) -> Callable[[], Any]:
        def get() -> Any:
            obj = namespaces.installed()[key]
            for part in filter(None, namespace.split(".")):
                obj = getattr(obj, part)
            return obj
        return get

    return [source(key, namespace) for key in ("estimator", "estimator_v2")
            for namespace in estimator_map.PRIVATE_SOURCES]


def _build_private_estimator(name: str, relative: str,
                             display: str | None = None) -> types.ModuleType:
    display = display or name.replace(_TF_PRIVATE_ESTIMATOR, _TFE_PRIVATE)
    homes = {attr: tuple(where.split(":"))
             for attr, where in estimator_map.PRIVATE_LIBRARY_NAMES.get(relative, {}).items()}
    return _namespace(name, display, _estimator_sources(),
                      members=_private_members(relative),
                      hint=estimator_names.ESTIMATOR_HINT, homes=homes)


def _build_tensorflow_estimator(name: str) -> types.ModuleType:
    """`tensorflow_estimator`: its `estimator` attribute was the v1 `tf.estimator` API.

    With the real package installed, this module takes the package's `__path__`, so its
    model modules (`python.estimator.canned.dnn`, ...) load from it through the normal import
    system while its `__init__` (the generated API tree, which would import every module at
    once) never runs; the stand-ins those modules need are put in place first.
    """
    members: dict[str, Any] = {"estimator": _estimator()}
    spec = _real_package_spec()
    if spec is not None:
        from tpu_estimator_compat._tf import estimator_seam

        estimator_seam.install()
        members["__path__"] = list(spec.submodule_search_locations or ())
    return _namespace(name, name, [], members=members, hint=estimator_names.ESTIMATOR_HINT)


def _real_package_spec() -> importlib.machinery.ModuleSpec | None:
    """tensorflow-estimator's spec on `sys.path`, None when it is not installed."""
    if not estimator_map.package_installed():
        return None
    return importlib.machinery.PathFinder.find_spec(_TFE)


def _build_hybrid(fullname: str) -> types.ModuleType | None:
    """Under the real package: this library's module at an ENGINE path, None (the package's
    own module, loaded by Python) elsewhere (`estimator_map.HYBRID_MODULES`)."""
    if not _under(fullname, _TFE_PRIVATE) or fullname == _TFE_PRIVATE:
        return None
    relative = fullname[len(_TFE_PRIVATE) + 1:]
    if estimator_map.hybrid_owner(relative) != estimator_map.ENGINE:
        parent = sys.modules.get(fullname.rpartition(".")[0])
        path = getattr(parent, "__path__", None)
        if path is not None and importlib.machinery.PathFinder.find_spec(fullname, path) is None:
            raise _no_such_module(fullname)  # Our error, not Python's "No module named".
        return None
    library = estimator_map.HYBRID_LIBRARY_MODULES.get(relative)
    if library is not None:
        return importlib.import_module(library)
    if relative not in _PRIVATE_ESTIMATOR_MODULES:
        raise _no_such_module(fullname)
    return _build_private_estimator(fullname, relative)


def _build_contrib(name: str, parts: Sequence[str]) -> types.ModuleType | None:
    """`tensorflow.contrib[.x[.python.pkg.module]]`, or None when the last part is a symbol."""
    contrib = _contrib()
    if not parts:
        return contrib
    rest = ".".join(parts)
    if rest in ("slim", "slim.python", "slim.python.slim"):
        return _tf_slim_module("")
    for prefix in _SLIM_PREFIXES:
        if rest.startswith(prefix):
            return _tf_slim_module(rest[len(prefix):])
    if parts[0].startswith("_"):
        return None
    if len(parts) == 4 and parts[:3] == ["tpu", "python", "tpu"] and parts[3] in _TF_TPU_STUBS:
        # TF 1.15's contrib.tpu.python.tpu.tpu_estimator (and its siblings) re-exported
        # `tensorflow.python.tpu.<name>`, itself tensorflow-estimator's: one module, private
        # names included (`tpu_estimator.ExportSavedModelApiVersion`).
        relative = f"tpu.{parts[3]}"
        return _build_private_estimator(name, relative, f"{_TFE_PRIVATE}.{relative}")
    if len(parts) == 1 or parts[1] != "python" or ".".join(parts[:2]) in contrib_map.BY_PATH:
        # The attribute route decides (`tensorflow.contrib.keras.api.keras.models` is
        # `tf.contrib.keras.api.keras.models`): the same module, or None for a name that is
        # none, refused or missing.
        return contrib_namespace.module_at(contrib, parts)
    sub = getattr(contrib, parts[0])
    if len(parts) > _CONTRIB_MODULE_DEPTH:
        return None
    sources: list[Callable[[], Any]] = [lambda: sub]
    twin_name = f"{parts[0]}.{parts[-1]}"
    if len(parts) == 4 and twin_name in _LIBRARY_TWINS:
        twin = importlib.import_module(_LIBRARY_TWINS[twin_name])
    else:
        twin = _tf_slim_module(twin_name) if len(parts) == 4 else None
    if twin is not None:
        sources.insert(0, lambda: twin)
    core = _core_tpu_twin(rest) if len(parts) == 4 else None
    if core is not None:
        # After `tf.contrib.tpu`: its names (this library's TPUEstimator, the mapped
        # `cross_replica_sum`) win over the core module's.
        sources.append(lambda: core)
    return _namespace(name, f"tf.contrib.{rest}", sources, hint=contrib_map.error_hint(rest))


def _core_tpu_twin(rest: str) -> types.ModuleType | None:
    """The core TensorFlow module a TF 1.14+ `tf.contrib.tpu.python.<pkg>.<module>` stub
    re-exported, when TensorFlow still has it."""
    for prefix, core in _CORE_TPU_TWINS.items():
        if rest.startswith(prefix):
            from tpu_estimator_compat._tf import private as _tf_private

            return _tf_private.core_tpu_module(core + rest[len(prefix):])
    return None


def _tf_slim_module(relative: str) -> types.ModuleType | None:
    """`tf_slim.<relative>` when tf-slim has that module (`nets.inception`, `layers.layers`)."""
    name = f"tf_slim.{relative}" if relative else "tf_slim"
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _build_estimator_submodule(root: str, parts: Sequence[str]) -> types.ModuleType | None:
    """`<root>.<parts>`: a sub-namespace of the v1 or (`tensorflow.estimator`,
    `tensorflow.compat.v2.estimator`) the v2 estimator namespace."""
    v2 = root in estimator_map.ESTIMATOR_MODULE_NAMES_V2
    obj: Any = namespaces.installed()["estimator_v2"] if v2 else _estimator()
    for part in parts:
        obj = getattr(obj, part, None)
    return obj if isinstance(obj, types.ModuleType) else None


def _no_such_module(fullname: str) -> LegacyImportError:
    """The error for `fullname`, worded like the attribute errors of the alias namespaces."""
    parent, _, symbol = fullname.rpartition(".")
    root = next((r for r in _ESTIMATOR_ROOTS if fullname.startswith(r + ".")), None)
    if parent.startswith(_CONTRIB):
        # The table's hint for this very path, as the attribute route gives it.
        display = "tf.contrib" + fullname[len(_CONTRIB):]
        hint = contrib_map.error_hint(fullname[len(_CONTRIB) + 1:])
    else:
        if root is not None:
            display = "tf.estimator" + fullname[len(root):]
            hint = estimator_names.ESTIMATOR_HINT
        else:
            display = fullname.replace(_TF_PRIVATE_ESTIMATOR, _TFE_PRIVATE)
            hint = estimator_names.ESTIMATOR_HINT
        hint = getattr(sys.modules.get(parent), "_alias_hint", None) or hint
    return LegacyImportError(
        f"`{display}` is not available on TensorFlow 2 through tpu_estimator_compat "
        f"(importing {symbol!r} from {parent!r}). {hint}", name=fullname)


def _under(fullname: str, prefix: str) -> bool:
    return fullname == prefix or fullname.startswith(prefix + ".")


def _tf_tpu_stub(fullname: str) -> str | None:
    """`tpu.<name>` when `fullname` is one of TF 2.15's `tensorflow.python.tpu` stubs that this
    TensorFlow does not have, else None (every other `tensorflow.python.tpu` module is TF's)."""
    parent, _, name = fullname.rpartition(".")
    if parent != _TF_PRIVATE_TPU or name not in _TF_TPU_STUBS:
        return None
    package = importlib.import_module(_TF_PRIVATE_TPU)
    if importlib.machinery.PathFinder.find_spec(fullname, package.__path__) is not None:
        return None
    return f"tpu.{name}"


def _tf_library_module(fullname: str) -> bool:
    """Whether `fullname` is a removed `tensorflow.python.tpu` or `.distribute` module this
    library serves (`_TF_LIBRARY_MODULES`) and this TensorFlow does not have."""
    parent, _, name = fullname.rpartition(".")
    if name not in _TF_LIBRARY_MODULES.get(parent, {}):
        return False
    package = importlib.import_module(parent)
    return importlib.machinery.PathFinder.find_spec(fullname, package.__path__) is None


def _build_tf_library_module(fullname: str) -> types.ModuleType:
    members = {}
    parent, _, module_name = fullname.rpartition(".")
    for name, where in _TF_LIBRARY_MODULES[parent][module_name].items():
        module, _, attribute = where.partition(":")
        members[name] = getattr(importlib.import_module(module), attribute)
    return _namespace(fullname, fullname, [], members=members,
                      hint=estimator_map.TF_LIBRARY_HINTS.get(module_name,
                                                              estimator_names.ESTIMATOR_HINT))


def build_module(fullname: str) -> types.ModuleType | None:
    """The module served under `fullname`, None when `fullname` is not a legacy path.

    Raises LegacyImportError for a path under a served prefix that names no legacy module.
    """
    if not fullname.startswith(_PREFIXES) or not namespaces.installed():
        return None
    if fullname.startswith(tuple(parent + "." for parent in _TF_LIBRARY_ONLY)):
        return _build_tf_library_module(fullname) if _tf_library_module(fullname) else None
    if fullname.startswith(_TF_PRIVATE_TPU + "."):
        if _tf_library_module(fullname):
            return _build_tf_library_module(fullname)
        relative = _tf_tpu_stub(fullname)
        return (None if relative is None else
                _build_private_estimator(fullname, relative, _TFE_PRIVATE + "." + relative))
    if _under(fullname, _CONTRIB):
        module = _build_contrib(fullname, fullname.split(".")[2:])
    elif fullname == _TFE:
        module = _build_tensorflow_estimator(fullname)
    elif _under(fullname, _TFE) and estimator_map.package_installed():
        return _build_hybrid(fullname)
    elif fullname in (f"{_TFE}.python", _TFE_PRIVATE, _TF_PRIVATE_ESTIMATOR):
        # Packages whose `__init__` defined nothing: every name below them is a submodule.
        module = _namespace(fullname, fullname.replace(_TF_PRIVATE_ESTIMATOR, _TFE_PRIVATE), [],
                            hint=estimator_names.ESTIMATOR_HINT)
    elif _under(fullname, _TFE_PRIVATE) or _under(fullname, _TF_PRIVATE_ESTIMATOR):
        base = _TFE_PRIVATE if fullname.startswith(_TFE) else _TF_PRIVATE_ESTIMATOR
        relative = fullname[len(base) + 1:]
        module = (_build_private_estimator(fullname, relative)
                  if relative in _PRIVATE_ESTIMATOR_MODULES else None)
    else:
        root = next((r for r in _ESTIMATOR_ROOTS if fullname.startswith(r + ".")), None)
        if root is None:  # A look-alike such as `tensorflow.contribution`.
            return None
        module = _build_estimator_submodule(root, fullname[len(root) + 1:].split("."))
    if module is None:
        raise _no_such_module(fullname)
    return module


class _ServedLoader(importlib.abc.Loader):
    """Hands importlib the module `build_module` made; there is no code to execute."""

    def __init__(self, module: types.ModuleType) -> None:
        self._module = module

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return self._module

    def exec_module(self, module: types.ModuleType) -> None:
        del module  # Built complete by `build_module`.


class LegacyModuleFinder(importlib.abc.MetaPathFinder):
    """On `sys.meta_path`: serves the legacy paths, ignores everything else at a prefix test."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        del path, target
        if not fullname.startswith(_PREFIXES):
            return None
        module = build_module(fullname)
        if module is None:
            return None
        # Alias modules are packages, so `from m import missing` asks this finder for
        # `m.missing` and gets our error instead of Python's "cannot import name". A real
        # module served under a legacy name (tf-slim's) keeps its own kind.
        is_package = (isinstance(module, namespaces.AliasNamespace)
                      or "__path__" in module.__dict__)
        return importlib.machinery.ModuleSpec(fullname, _ServedLoader(module),
                                              is_package=is_package)


_lock = threading.Lock()


def install_finder() -> None:
    """Puts `LegacyModuleFinder` first on `sys.meta_path` (idempotent; costs one prefix test
    per import of any other module)."""
    with _lock:
        if not any(isinstance(f, LegacyModuleFinder) for f in sys.meta_path):
            sys.meta_path.insert(0, LegacyModuleFinder())


def serves(fullname: str) -> bool:
    """True for `tensorflow.*` paths whose modules only this finder has (not attributes of
    `tf.compat.v1`): TF1 mode sends imports of these to the real import system."""
    return (_under(fullname, _CONTRIB) or _under(fullname, _TF_PRIVATE_ESTIMATOR)
            or (fullname.startswith(_TF_PRIVATE_TPU + ".") and (
                _tf_tpu_stub(fullname) is not None or _tf_library_module(fullname)))
            or (fullname.startswith(_PREFIXES) and _tf_library_module(fullname)))
