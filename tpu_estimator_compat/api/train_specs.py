"""`TrainSpec` and `EvalSpec`: what `train_and_evaluate` trains and evaluates, validated.

Synopsis::

    train_spec = TrainSpec(train_input_fn, max_steps=1000, hooks=[...])
    eval_spec = EvalSpec(eval_input_fn, steps=100, exporters=LatestExporter(...),
                         throttle_secs=600)

Both check their arguments when built, with legacy's exception types and messages (a hook
that is no `SessionRunHook`, a listener that is no `CheckpointSaverListener`, a non-string
name, an exporter without a unique string name, negative delays), so a bad spec fails where
it is written, before any training starts.
"""

from __future__ import annotations

import collections
from typing import Any, Callable, Iterable, Sequence

import tensorflow as tf

from tpu_estimator_compat.api import exporters as exporters_lib


def _validate_input_fn(input_fn: Any) -> None:
    if not callable(input_fn):
        raise TypeError(f"`input_fn` must be callable, given: {input_fn}")


def validate_hooks(hooks: Iterable[Any] | None) -> tuple[Any, ...]:
    """`hooks` as a tuple; TypeError unless each is a `tf.compat.v1.train.SessionRunHook`."""
    hooks = tuple(hooks or ())
    for hook in hooks:
        if not isinstance(hook, tf.compat.v1.train.SessionRunHook):
            raise TypeError(f"All hooks must be `SessionRunHook` instances, given: {hook}")
    return hooks


def _validate_saving_listeners(listeners: Iterable[Any] | None) -> tuple[Any, ...]:
    listeners = tuple(listeners or ())
    for listener in listeners:
        if not isinstance(listener, tf.compat.v1.train.CheckpointSaverListener):
            raise TypeError("All saving_listeners must be `CheckpointSaverListener` instances, "
                            f"given: {listener}")
    return listeners


def _validate_exporters(exporters: Any) -> tuple[Any, ...]:
    """`exporters` (one, an iterable of them, or None) as a tuple of named exporters."""
    if not exporters:
        return ()
    if isinstance(exporters, exporters_lib.Exporter):
        exporters = [exporters]
    try:
        exporters = list(exporters)
    except TypeError:
        exporters = None
    if exporters is None or not all(isinstance(e, exporters_lib.Exporter) for e in exporters):
        raise TypeError("`exporters` must be an Exporter, an iterable of Exporter, or `None`, "
                        f"found {exporters}.")
    names = [e.name for e in exporters]
    for name in names:
        if not name:
            raise ValueError("An Exporter cannot have a name that is `None` or empty. All "
                             f"exporter names: {names}")
        if not isinstance(name, str):
            raise ValueError(f"An Exporter must have a string name. Given: {type(name)}")
    if len(set(names)) != len(names):
        raise ValueError("`exporters` must have unique names. Such a name cannot be `None`. "
                         f"All exporter names: {names}")
    return tuple(exporters)


class TrainSpec(collections.namedtuple("TrainSpec", [
        "input_fn", "max_steps", "hooks", "saving_listeners"])):
    """Legacy `tf.estimator.TrainSpec`: the training input, its length and its hooks.

    `hooks` run on every training task, `saving_listeners` on the chief only.
    """

    def __new__(cls, input_fn: Callable[..., Any], max_steps: int | None = None,
                hooks: Sequence[Any] | None = None,
                saving_listeners: Sequence[Any] | None = None) -> "TrainSpec":
        _validate_input_fn(input_fn)
        if max_steps is not None and max_steps <= 0:
            raise ValueError(f"Must specify max_steps > 0, given: {max_steps}")
        return super().__new__(cls, input_fn, max_steps, validate_hooks(hooks),
                               _validate_saving_listeners(saving_listeners))


class EvalSpec(collections.namedtuple("EvalSpec", [
        "input_fn", "steps", "name", "hooks", "exporters", "start_delay_secs",
        "throttle_secs"])):
    """Legacy `tf.estimator.EvalSpec`: the evaluation input, its pace and the exporters."""

    def __new__(cls, input_fn: Callable[..., Any], steps: int | None = 100,
                name: str | None = None, hooks: Sequence[Any] | None = None,
                exporters: Any = None, start_delay_secs: int = 120,
                throttle_secs: int = 600) -> "EvalSpec":
        _validate_input_fn(input_fn)
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"`name` must be string, given: {name}")
        hooks = validate_hooks(hooks)
        exporters = _validate_exporters(exporters)
        if start_delay_secs < 0:
            raise ValueError(f"Must specify start_delay_secs >= 0, given: {start_delay_secs}")
        if throttle_secs < 0:
            raise ValueError(f"Must specify throttle_secs >= 0, given: {throttle_secs}")
        return super().__new__(cls, input_fn, steps, name, hooks, exporters, start_delay_secs,
                               throttle_secs)


def assert_eval_spec(eval_spec: Any) -> None:
    """TypeError unless `eval_spec` is an `EvalSpec` (the roles that evaluate need one)."""
    if not isinstance(eval_spec, EvalSpec):
        raise TypeError("`eval_spec` must have type `tf.estimator.EvalSpec`. "
                        f"Got: {type(eval_spec)}")
