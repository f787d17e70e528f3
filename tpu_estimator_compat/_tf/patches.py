"""Every monkey-patch of TensorFlow and tf_keras: what is replaced, why, and how it is undone.

`PATCHES` (in `patch_table.py`) is the table of every TensorFlow or tf_keras symbol this
library replaces. Each entry names the symbol by its dotted path, says why no public API
serves, and names the function (in the module that needs the patch) that builds the
replacement from the original. A TensorFlow upgrade that moves, removes or re-signs one of
them needs edits in that table (and perhaps in that builder) and nowhere else;
tests/test_tf_patches.py checks every entry against the installed TensorFlow. Three kinds of
patch:

* process-wide (`install(name)`): in place from the first request until `uninstall()`;
* scoped (`with applied(name, *args)`): in place while at least one such block is open, on
  any thread, and restored when the last one exits (blocks may overlap across threads);
* per object (`install_on(name, obj, *args)`): shadows a class attribute on one instance.

This module owns the mechanics: resolving targets, recording the exact original bindings
(including "absent"), swapping, and restoring them, all under one lock. It must not know what
any replacement does: builders are named as `module:function` strings and imported only when
a patch is applied, so importing this module imports neither TensorFlow nor the rest of the
library. Private reads of TensorFlow objects that are not patches live in `private.py`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import inspect
import sys
import threading
import types
import weakref
from typing import Any, Callable, Iterable, Iterator

from tpu_estimator_compat import log as logging

# The table and its vocabulary live in `patch_table.py`; re-exported for the library.
from tpu_estimator_compat._tf.patch_table import (  # pylint: disable=unused-import
    GIVEN, INSTANCE, PATCHES, PROCESS, SCOPED, Patch)

_MISSING = object()  # Marks a binding that did not exist before the patch added it.


_BY_NAME = {patch.name: patch for patch in PATCHES}
_LOCK = threading.RLock()


class PatchTargetError(LookupError):
    """A patch's TensorFlow symbol is not where (or what) the patch table says."""


@dataclasses.dataclass
class _Applied:
    """One application: the exact bindings before it, and the replacement put in place."""

    patch: Patch
    saved: list[tuple[Any, str, Any]]  # (owner, attribute, raw value before or _MISSING)
    original: Any
    replacement: Any


class _Scope:
    """One open `applied` block; compared by identity."""

    def __init__(self, replacement: Any) -> None:
        self.replacement = replacement


@dataclasses.dataclass
class _ScopedState:
    applied: _Applied
    scopes: list[_Scope]


@dataclasses.dataclass
class _InstanceRecord:
    ref: Callable[[], Any]
    attribute: str
    raw: Any


_installed: dict[str, _Applied] = {}
_scoped: dict[str, _ScopedState] = {}
_instances: dict[tuple[str, int], _InstanceRecord] = {}


# ---------------------------------------------------------------------------------------------
# Resolution.
# ---------------------------------------------------------------------------------------------


def patch(name: str) -> Patch:
    """The table entry called `name`."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"No TensorFlow patch is called {name!r}; known: "
                       f"{sorted(_BY_NAME)}.") from None


def _select(names: Iterable[str], kinds: tuple[str, ...]) -> list[Patch]:
    names = tuple(names)
    if not names:
        return [p for p in PATCHES if p.kind in kinds]
    selected = []
    for name in names:
        group = [p for p in PATCHES if p.name == name or p.name.startswith(name + ".")]
        if not group:
            patch(name)  # Raises with the known names.
        selected.extend(p for p in group if p.kind in kinds and p not in selected)
    return selected


def resolve(path: str) -> Any:
    """The object a dotted path names, importing modules along it as needed.

    Attribute access first (public API modules such as `tensorflow.compat.v1` are attributes,
    not importable names); a missing attribute is imported as a submodule.

    Raises:
      PatchTargetError: some component does not exist.
    """
    parts = path.split(".")
    try:
        obj = importlib.import_module(parts[0])
    except ImportError as e:
        raise PatchTargetError(f"Cannot import {parts[0]!r} to reach `{path}`: {e}") from e
    for index, part in enumerate(parts[1:], start=1):
        try:
            obj = getattr(obj, part)
            continue
        except AttributeError:
            pass
        prefix = ".".join(parts[:index + 1])
        try:
            obj = importlib.import_module(prefix)
        except ImportError as e:
            raise PatchTargetError(f"`{path}`: `{'.'.join(parts[:index])}` has no attribute "
                                   f"or submodule {part!r}.") from e
    return obj


def _owner(path: str) -> tuple[Any, str]:
    owner_path, _, attribute = path.rpartition(".")
    return resolve(owner_path), attribute


def _raw(owner: Any, attribute: str) -> Any:
    """What `owner` itself binds (a class's own descriptor, not an inherited one)."""
    return vars(owner).get(attribute, _MISSING)


def _public_api_modules() -> list[Any]:
    return [module for module_name, module in list(sys.modules.items())
            if module is not None and not module_name.startswith("tensorflow.python")
            and (module_name.startswith("tensorflow") or module_name.startswith("tf_keras"))]


def _maybe(path: str) -> Any:
    try:
        return resolve(path)
    except PatchTargetError:
        return None


def _is_api_module(path: str) -> bool:
    """Whether `path` names a public TensorFlow API package below the root (`tensorflow.x...`)."""
    if not path.startswith("tensorflow.") or path.startswith(("tensorflow.python",
                                                               "tensorflow._api")):
        return False
    obj = _maybe(path)
    return isinstance(obj, types.ModuleType) or hasattr(obj, "_tfmw_wrapped_module")


# path -> (len(sys.modules) when found, `_module_objects(path)`). Scoped patches are applied
# whenever a replica step is traced, once per replica; scanning the few thousand entries of
# sys.modules each time took ~2% of an 8-replica test's time. A new module object for a
# package comes with an import, which grows sys.modules; nothing here deletes or reloads one.
_MODULE_OBJECTS: dict[str, tuple[int, list[Any]]] = {}


def _module_objects(path: str) -> list[Any]:
    """Every loaded module object of the public API package `path`.

    TensorFlow keeps one API package as several module objects: the lazy `TFModuleWrapper`
    reached by attribute (`tensorflow._api.v2....`), the one the import system makes for
    `import tensorflow.a.b` (which then rebinds the parent's attribute), and the module each
    wraps. A patch of a name on such a package is bound on all of them (see `settle_api`).
    """
    loaded = len(sys.modules)
    cached = _MODULE_OBJECTS.get(path)
    if cached is not None and cached[0] == loaded:
        return list(cached[1])
    found = _find_module_objects(path)
    _MODULE_OBJECTS[path] = (loaded, found)
    return list(found)


def _find_module_objects(path: str) -> list[Any]:
    tail = path.partition(".")[2]
    found = [resolve(path)]
    found += [module for name, module in list(sys.modules.items())
              if module is not None and name.startswith("tensorflow") and name.endswith(tail)
              and name[-len(tail) - 1] == "."]
    found += [vars(m).get("_tfmw_wrapped_module") for m in list(found)]
    unique: dict[int, Any] = {}
    for module in found:
        if module is not None:
            unique.setdefault(id(module), module)
    # Wrapped modules first, wrappers last: restoring runs backwards, and a wrapper's delattr
    # also deletes from the module it wraps.
    return sorted(unique.values(), key=lambda m: "_tfmw_wrapped_module" in vars(m))


_SETTLED: list[bool] = []
_SETTLE_LOCK = threading.Lock()


def settle_api() -> None:
    """Imports, through the import system, every public API package a patch binds on. Once.

    Importing `tensorflow.compat.v1.tpu` (a script's `from tensorflow.compat.v1.tpu import
    ...`) makes a new module object and rebinds `tf.compat.v1.tpu` to it: a patch bound
    before on the old object only would be lost to every later `tf.compat.v1.tpu.x`. Loading
    them all first, and binding on every module object of each (`_module_objects`), keeps
    every path to a patched name patched, whatever the script imports later.
    """
    if _SETTLED:
        return
    with _SETTLE_LOCK:
        if _SETTLED:
            return
        for p in PATCHES:
            if _package_missing(p) or p.public_bindings or p.kind == INSTANCE:
                continue
            for path in p.paths:
                parts = path.split(".")[:-1]
                for end in range(2, len(parts) + 1):
                    name = ".".join(parts[:end])
                    if not _is_api_module(name):
                        break
                    try:
                        importlib.import_module(name)
                    except ImportError:
                        break
        _SETTLED.append(True)


def bindings(p: Patch) -> list[tuple[Any, str]]:
    """The (owner, attribute) pairs applying `p` would rebind now (not for INSTANCE)."""
    if p.public_bindings:
        function = resolve(p.target)
        attribute = p.target.rpartition(".")[2]
        return [(module, attribute) for module in _public_api_modules()
                if vars(module).get(attribute) is function]
    found: list[tuple[Any, str]] = []
    for path in p.paths:
        owner_path, _, attribute = path.rpartition(".")
        owners = (_module_objects(owner_path) if _is_api_module(owner_path)
                  else [resolve(owner_path)])
        found += [(owner, attribute) for owner in owners
                  if not any(o is owner and a == attribute for o, a in found)]
    return found


def _package_missing(p: Patch) -> bool:
    return p.package is not None and importlib.util.find_spec(p.package) is None


def _builder(p: Patch) -> Callable[..., Any]:
    if p.build == GIVEN:
        return lambda original, replacement: replacement
    module_name, _, function = p.build.partition(":")
    return getattr(importlib.import_module(module_name), function)


def check(p: Patch) -> None:
    """Checks `p` against the installed TensorFlow without applying it.

    Raises:
      PatchTargetError: naming the symbol and what to update.
    """
    where = (f"Update `target`/`also` of {p.name!r} in tpu_estimator_compat/_tf/patch_table.py "
             f"and check that its replacement (`{p.build}`) still fits.")
    for path in (p.target,) if p.public_bindings else p.paths:
        try:
            owner, attribute = _owner(path)
        except PatchTargetError as e:
            raise PatchTargetError(f"Patch {p.name!r} replaces `{path}`, which this "
                                   f"TensorFlow no longer has ({e}). {where}") from e
        if not p.may_be_absent and not hasattr(owner, attribute):
            raise PatchTargetError(f"Patch {p.name!r} replaces `{path}`, which this "
                                   f"TensorFlow no longer has. {where}")
    in_place = _installed.get(p.name)  # Then the public names hold the replacement.
    if p.public_bindings and not (in_place.saved if in_place is not None else bindings(p)):
        raise PatchTargetError(
            f"Patch {p.name!r} rebinds the public API names of `{p.target}`, but no loaded "
            f"public TensorFlow module binds that function any more. {where}")
    if p.build != GIVEN:
        try:
            _builder(p)
        except (ImportError, AttributeError) as e:
            raise PatchTargetError(f"Patch {p.name!r}: builder `{p.build}` not found ({e}). "
                                   "Fix `build` in tpu_estimator_compat/_tf/patch_table.py.") from e
    if p.signature is not None:
        # The original, also while the patch is in place (the table describes TensorFlow's).
        by_path = p.public_bindings or p.kind == INSTANCE  # Never rebound at the target.
        function = resolve(p.target) if by_path else original(p.name)
        actual = str(inspect.signature(function))
        if actual != p.signature:
            raise PatchTargetError(
                f"Patch {p.name!r}: `{p.target}` now has the signature {actual}; its "
                f"replacement (`{p.build}`) was written for {p.signature}. Check that the "
                "replacement accepts the new arguments and calls the original correctly, then "
                f"update `signature` of {p.name!r} in tpu_estimator_compat/_tf/patch_table.py.")


# ---------------------------------------------------------------------------------------------
# Applying and restoring.
# ---------------------------------------------------------------------------------------------


def _apply(p: Patch, args: tuple[Any, ...]) -> _Applied:
    if _package_missing(p):
        logging.debug("TF patch %s skipped: %s is not installed.", p.name, p.package)
        return _Applied(p, [], None, None)
    targets = bindings(p)
    if p.public_bindings:
        original = resolve(p.target)
    else:
        owner, attribute = targets[0]
        original = getattr(owner, attribute, None)
    saved = [(owner, attribute, _raw(owner, attribute)) for owner, attribute in targets]
    replacement = _builder(p)(original, *args)
    for owner, attribute in targets:
        setattr(owner, attribute, replacement)
    logging.debug("TF patch %s: replaced %s (%d binding(s)).", p.name, p.target, len(targets))
    return _Applied(p, saved, original, replacement)


def _rebind(applied_: _Applied, replacement: Any) -> None:
    for owner, attribute, _ in applied_.saved:
        setattr(owner, attribute, replacement)


def _restore_attribute(owner: Any, attribute: str, raw: Any) -> None:
    if raw is _MISSING:
        if attribute in vars(owner):
            delattr(owner, attribute)
    else:
        setattr(owner, attribute, raw)


def _restore(applied_: _Applied) -> None:
    for owner, attribute, raw in reversed(applied_.saved):
        _restore_attribute(owner, attribute, raw)
    logging.debug("TF patch %s: restored %s.", applied_.patch.name, applied_.patch.target)


def install(*names: str) -> None:
    """Puts the named process-wide patches in place; no names: all of them. Idempotent.

    A name is a patch's name or its owning module's (`install("cross_shard")`). The bindings
    in place before are recorded exactly, for `uninstall`.
    """
    selected = _select(names, (PROCESS,))
    if all(p.name in _installed for p in selected):
        return  # The common case (every replica step asks again): no lock.
    settle_api()
    with _LOCK:
        for p in selected:
            if p.name not in _installed:
                _installed[p.name] = _apply(p, ())


def installed() -> tuple[str, ...]:
    """Names of the process-wide patches in place, in installation order."""
    with _LOCK:
        return tuple(_installed)


def uninstall(*names: str) -> None:
    """Restores the originals of the named process-wide and per-object patches (no names: all).

    Every binding gets back the very object it held before (an attribute the patch added is
    deleted). Open `applied` blocks are left alone: they restore when they exit.
    """
    with _LOCK:
        for p in reversed(_select(names, (PROCESS,))):
            applied_ = _installed.pop(p.name, None)
            if applied_ is not None:
                _restore(applied_)
        chosen = {p.name for p in _select(names, (INSTANCE,))}
        for key, record in list(_instances.items()):
            if key[0] in chosen:
                del _instances[key]
                obj = record.ref()
                if obj is not None:
                    _restore_attribute(obj, record.attribute, record.raw)


def original(name: str) -> Any:
    """What patch `name` replaced (the current binding when it is not in place)."""
    applied_ = _installed.get(name)
    if applied_ is None:
        state = _scoped.get(name)
        applied_ = state.applied if state is not None else None
    if applied_ is not None:
        return applied_.original
    p = patch(name)
    owner, attribute = _owner(p.target)
    return getattr(owner, attribute)


@contextlib.contextmanager
def applied(name: str, *args: Any) -> Iterator[Any]:
    """Inside: scoped patch `name` is in place, built with `args`; yields the replacement.

    Blocks may overlap (replica threads, nesting): the most recently opened block's
    replacement is in place while any is open, and the original is put back exactly when the
    last one exits, whatever order they exit in.
    """
    p = patch(name)
    if p.kind != SCOPED:
        raise ValueError(f"Patch {name!r} is {p.kind}, not scoped; use install/install_on.")
    settle_api()
    with _LOCK:
        state = _scoped.get(name)
        if state is None:
            applied_ = _apply(p, args)
            state = _scoped[name] = _ScopedState(applied_, [])
            scope = _Scope(applied_.replacement)
        else:
            scope = _Scope(_builder(p)(state.applied.original, *args))
            _rebind(state.applied, scope.replacement)
        state.scopes.append(scope)
    try:
        yield scope.replacement
    finally:
        with _LOCK:
            state.scopes.remove(scope)
            if not state.scopes:
                del _scoped[name]
                _restore(state.applied)
            elif scope.replacement is not state.scopes[-1].replacement:
                _rebind(state.applied, state.scopes[-1].replacement)


def _reference(obj: Any, key: tuple[str, int]) -> Callable[[], Any]:
    """A weak reference that forgets `key` when `obj` dies (strong if `obj` has none)."""

    def forget(ref: Any) -> None:
        record = _instances.get(key)
        if record is not None and record.ref is ref:
            _instances.pop(key, None)

    try:
        return weakref.ref(obj, forget)
    except TypeError:
        return lambda: obj


def install_on(name: str, obj: Any, *args: Any) -> bool:
    """Shadows per-object patch `name` on `obj`, built with `args`; False if already there."""
    p = patch(name)
    if p.kind != INSTANCE:
        raise ValueError(f"Patch {name!r} is {p.kind}, not per-object; use install/applied.")
    attribute = p.target.rpartition(".")[2]
    key = (name, id(obj))
    with _LOCK:
        record = _instances.get(key)
        if record is not None and record.ref() is obj:
            return False
        raw = _raw(obj, attribute)
        replacement = _builder(p)(getattr(obj, attribute), *args)
        setattr(obj, attribute, replacement)
        _instances[key] = _InstanceRecord(_reference(obj, key), attribute, raw)
        return True
