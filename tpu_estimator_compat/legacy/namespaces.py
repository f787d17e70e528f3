"""The building blocks of every legacy namespace: alias modules and the errors they raise.

    tpu = AliasNamespace("tensorflow.compat.v1.estimator.tpu", "tf.estimator.tpu", doc,
                         members={"TPUEstimator": TPUEstimator}, hint="...")
    tpu.TPUEstimator        # the member
    tpu.Unknown             # LegacySymbolError naming `tf.estimator.tpu.Unknown`, with the hint

An `AliasNamespace` is a module object whose names come from this library first and then from
maintained modules (TensorFlow, tf-slim), and whose unknown names fail with a message naming
the legacy symbol. Placeholders (`unavailable_class`, `unavailable_function`) stand for legacy
names that exist so code imports, and raise when used. This module also keeps which
namespaces `install_aliases` installed (`installed`), which the import hook serves. It knows
no namespace's contents: those are `estimator_names.py`'s and `contrib_names.py`'s.
"""

from __future__ import annotations

import importlib
import threading
import types
from typing import Any, Callable, Iterable, Mapping

class LegacySymbolError(AttributeError):
    """A legacy TF1 name that no alias serves; the message names it and says what to do.

    An AttributeError so that `hasattr()` and `getattr(x, name, default)` keep working.
    """


class LegacySymbolUnavailableError(NotImplementedError):
    """A legacy class or function that exists so code imports, but was constructed or called.

    Libraries subclass legacy classes at import time (tensorflow_hub: `class
    LatestModuleExporter(tf_estimator.Exporter)`); failing there would break every script that
    imports them, so the failure waits until the symbol is really used.
    """


def unavailable_class(display_name: str, hint: str) -> type:
    """A subclassable stand-in for legacy class `display_name` that raises when constructed."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        del self, args, kwargs
        raise LegacySymbolUnavailableError(
            f"`{display_name}` is not available on TensorFlow 2 through tpu_estimator_compat "
            f"(it was constructed). {hint}")

    name = display_name.rpartition(".")[2]
    return type(name, (), {"__init__": __init__, "__module__": display_name.rpartition(".")[0],
                           "__doc__": f"Placeholder for legacy `{display_name}`. {hint}"})


def unavailable_function(display_name: str, hint: str) -> Callable[..., Any]:
    """A stand-in for legacy function `display_name` that raises when called."""

    def unavailable(*args: Any, **kwargs: Any) -> Any:
        del args, kwargs
        raise LegacySymbolUnavailableError(
            f"`{display_name}` is not available on TensorFlow 2 through tpu_estimator_compat "
            f"(it was called). {hint}")

    unavailable.__name__ = unavailable.__qualname__ = display_name.rpartition(".")[2]
    unavailable.__doc__ = f"Placeholder for legacy `{display_name}`. {hint}"
    return unavailable


class AliasNamespace(types.ModuleType):
    """A module of aliases whose unknown names fail with a message naming the legacy symbol.

    Members come from `members` first and then from each of `sources` in order, so a namespace
    can list the names this library serves and defer everything else to a maintained module.
    """

    def __init__(self, name: str, display_name: str, doc: str,
                 members: Mapping[str, Any] | None = None,
                 sources: Iterable[Callable[[], Any]] = (),
                 hint: str = "", lazy: Mapping[str, Callable[[], Any]] | None = None,
                 hints: Mapping[str, str] | None = None,
                 homes: Mapping[str, tuple[str, str]] | None = None) -> None:
        super().__init__(name, doc)
        self.__dict__.update(members or {})
        self.__dict__["_alias_display_name"] = display_name
        self.__dict__["_alias_sources"] = tuple(sources)
        self.__dict__["_alias_hint"] = hint
        # Hints of their own for some unknown names (a name another namespace has).
        self.__dict__["_alias_hints"] = dict(hints or {})
        # Members whose value is loaded on first access (another package's objects, which
        # importing this library must not import), then kept like any member.
        self.__dict__["_alias_lazy"] = dict(lazy or {})
        # Members that are another module's attribute ({name: (module, attribute)}): assigning
        # one here assigns it there too, so the code of that module sees what was assigned
        # (`mock.patch.object(training, "_TrainingExecutor")` reaches `train_and_evaluate`,
        # as on legacy, where both were one module's).
        self.__dict__["_alias_homes"] = dict(homes or {})

    def __setattr__(self, attr: str, value: Any) -> None:
        home = self.__dict__["_alias_homes"].get(attr)
        if home is not None:
            setattr(importlib.import_module(home[0]), home[1], value)
        super().__setattr__(attr, value)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")
        load = self._alias_lazy.get(attr)
        if load is not None:
            value = load()
            self.__dict__[attr] = value
            return value
        for source in self._alias_sources:
            value = getattr(source(), attr, _MISSING)
            if value is not _MISSING:
                return value
        hint = self._alias_hints.get(attr, self._alias_hint)
        raise LegacySymbolError(f"`{self._alias_display_name}.{attr}` is not available on "
                                f"TensorFlow 2 through tpu_estimator_compat. {hint}")

    def __dir__(self) -> list[str]:
        names = set(super().__dir__()) | set(self._alias_lazy)
        for source in self._alias_sources:
            names.update(n for n in dir(source()) if not n.startswith("_"))
        return sorted(names)

    def __repr__(self) -> str:
        return f"<alias module {self._alias_display_name!r} (tpu_estimator_compat)>"


_MISSING = object()


def public_names(namespace: AliasNamespace) -> set[str]:
    """The namespace's public members, the lazy ones included (without loading them)."""
    return {n for n in (*vars(namespace), *namespace._alias_lazy)  # pylint: disable=protected-access
            if not n.startswith("_")}


_installed_lock = threading.Lock()
_installed: dict[str, Any] = {}


def installed() -> dict[str, Any]:
    """The installed `estimator` (v1), `estimator_v2` and `contrib` namespaces (empty before
    `install_aliases`)."""
    with _installed_lock:
        return dict(_installed)


def set_installed(namespaces: Mapping[str, Any]) -> None:
    """Records the namespaces `install_aliases` put onto TensorFlow."""
    with _installed_lock:
        _installed.update(namespaces)
