"""SessionRunHooks at loop granularity, as on legacy TPU.

On a TPU, legacy TPUEstimator ran `before_run`/`after_run` once per loop of
`iterations_per_loop` steps, not once per step; this module does the same for the hooks a
user passes (`train(hooks=...)`, `training_hooks`, `evaluation_hooks`, `prediction_hooks`).

* `LoggingTensorHook`, `StopAtStepHook`, `NanTensorHook` and `CheckpointSaverHook` are
  re-expressed with their legacy meaning on the values the host has after each loop
  (the global step, the per-step losses).
* A user's own hook gets `begin()`, `after_create_session(session, coord)`,
  `before_run(run_context)`, `after_run(run_context, run_values)` and `end(session)`, in that
  order. There is no TF1 session: `session` is a `HostSession` whose `run` reads variables, and
  `SessionRunArgs` fetches may be variables (e.g. `tf.compat.v1.train.get_global_step()`), the
  names `'loss'`/`'global_step'`, or nests of these; `run_context.request_stop()` stops.
* Other built-in TF1 hooks (SummarySaverHook, ProfilerHook, ...) are refused when training
  starts, naming the hook, rather than silently doing nothing.

This module knows nothing about models, strategies or compiled functions.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from tpu_estimator_compat import loop as loop_lib

_v1 = tf.compat.v1
_train = _v1.train

_RESHAPED = (_train.LoggingTensorHook, _train.StopAtStepHook, _train.NanTensorHook,
             _train.CheckpointSaverHook)


def _builtin_hook_types() -> tuple[type, ...]:
    names = ["SummarySaverHook", "ProfilerHook", "FeedFnHook", "FinalOpsHook",
             "GlobalStepWaiterHook", "StepCounterHook"]
    return tuple(getattr(_train, n) for n in names
                 if isinstance(getattr(_train, n, None), type))


def check_supported(hooks: Sequence[Any]) -> None:
    """Refuses hooks this shim cannot honour, before any step runs."""
    for hook in hooks:
        if not all(hasattr(hook, m) for m in ("begin", "before_run", "after_run", "end")):
            raise TypeError(f"All hooks must be SessionRunHook instances, given: {hook!r}.")
        if isinstance(hook, _builtin_hook_types()) and not isinstance(hook, _RESHAPED):
            raise NotImplementedError(
                f"`{type(hook).__name__}` is not supported by tpu_estimator_compat: it needs "
                "TF1 graph tensors. Supported: LoggingTensorHook (tensors 'loss' and "
                "'global_step'), StopAtStepHook, NanTensorHook, CheckpointSaverHook and your "
                "own SessionRunHook subclasses. Remove it, or see migration_guide/hooks.md.")
        if isinstance(hook, _train.LoggingTensorHook):
            unknown = [t for t in _logging_tags(hook).values()
                       if _value_key(t) not in ("loss", "global_step")]
            if unknown:
                raise NotImplementedError(
                    f"LoggingTensorHook asks for {unknown}; at loop granularity only 'loss' "
                    "and 'global_step' (or the global step variable) can be logged. Log other "
                    "values with host_call, or remove them from the hook.")


def _logging_tags(hook: Any) -> dict[str, Any]:
    tensors = hook._tensors  # pylint: disable=protected-access
    return dict(tensors) if isinstance(tensors, dict) else {str(t): t for t in tensors}


def _value_key(fetch: Any) -> str | None:
    if isinstance(fetch, str):
        name = fetch.split(":")[0]
        return name if name in ("loss", "global_step") else None
    name = getattr(fetch, "name", "") or ""
    return "global_step" if name.split(":")[0].endswith("global_step") else None


class HostSession:
    """What a hook gets for `session`: `run` reads variables and eager values on the host."""

    def __init__(self, values: dict[str, Any]) -> None:
        self._values = values

    def run(self, fetches: Any, feed_dict: Any = None, options: Any = None,
            run_metadata: Any = None) -> Any:
        del options, run_metadata
        if feed_dict:
            raise NotImplementedError("HostSession.run does not take feed_dict in hooks.")
        return tf.nest.map_structure(self._resolve, fetches)

    def _resolve(self, fetch: Any) -> Any:
        key = _value_key(fetch)
        if key is not None and key in self._values:
            return self._values[key]
        if isinstance(fetch, tf.Variable) or hasattr(fetch, "numpy"):
            return np.asarray(fetch.numpy())
        raise NotImplementedError(
            f"A hook fetched {fetch!r}. Hooks run once per loop on the host and can fetch "
            "variables (e.g. tf.compat.v1.train.get_global_step()), 'loss' and "
            "'global_step', not graph tensors of the model_fn.")


@contextlib.contextmanager
def global_step_visible(global_step: tf.Variable) -> Iterator[None]:
    """Makes `tf.compat.v1.train.get_global_step()` return the global step inside hooks."""
    graph = _v1.get_default_graph()
    ref = graph.get_collection_ref(_v1.GraphKeys.GLOBAL_STEP)
    added = not any(item is global_step for item in ref)
    if added:
        ref.append(global_step)
    try:
        yield
    finally:
        if added:
            ref.remove(global_step)


class HookRunner:
    """Drives a list of hooks once per loop; the driver asks it whether to stop."""

    def __init__(self, hooks: Sequence[Any], global_step: tf.Variable) -> None:
        check_supported(hooks)
        self._hooks = list(hooks)
        self._global_step = global_step
        self._generic = [h for h in self._hooks if not isinstance(h, _RESHAPED)]
        self._contexts: list[Any] = []
        self._values: dict[str, Any] = {}
        self.start_step = 0

    @property
    def hooks(self) -> list[Any]:
        return list(self._hooks)

    def begin(self, step: int) -> None:
        self.start_step = step
        self._values = {"global_step": np.int64(step), "loss": None}
        with global_step_visible(self._global_step):
            for hook in self._generic:
                hook.begin()
            for hook in self._generic:
                hook.after_create_session(HostSession(self._values), None)

    def limit_target(self, target: int) -> int:
        """StopAtStepHook's last step, counted from where this call started."""
        for hook in self._hooks:
            if isinstance(hook, _train.StopAtStepHook):
                last = hook._last_step  # pylint: disable=protected-access
                if last is None:
                    last = self.start_step + hook._num_steps  # pylint: disable=protected-access
                target = min(target, last)
        return target

    def before_loop(self, step: int) -> None:
        del step
        self._contexts = []
        with global_step_visible(self._global_step):
            for hook in self._generic:
                context = _train.SessionRunContext(_train.SessionRunArgs(None),
                                                   HostSession(self._values))
                self._contexts.append((hook, context, hook.before_run(context)))

    def after_loop(self, step: int, losses: np.ndarray) -> bool:
        """Runs after_run and the reshaped hooks; returns True to request a stop."""
        self._values["global_step"] = np.int64(step)
        if len(losses):
            self._values["loss"] = np.float32(losses[-1])
        stop = False
        for hook in self._hooks:
            if isinstance(hook, _train.NanTensorHook):
                bad = np.flatnonzero(~np.isfinite(losses))
                if bad.size:
                    failed = step - len(losses) + 1 + int(bad[0])
                    if hook._fail_on_nan_loss:  # pylint: disable=protected-access
                        raise loop_lib.NanLossError(failed, float(losses[bad[0]]))
                    logging.warning("Model diverged with loss = NaN at step %d.", failed)
                    stop = True
            elif isinstance(hook, _train.LoggingTensorHook):
                self._log(hook, step)
        session = HostSession(self._values)
        with global_step_visible(self._global_step):
            for hook, context, args in self._contexts:
                results = None
                if args is not None and args.fetches is not None:
                    results = session.run(args.fetches)
                hook.after_run(context, _train.SessionRunValues(results, None, None))
                stop = stop or context.stop_requested
        return stop

    def _log(self, hook: Any, step: int) -> None:
        every = hook._timer._every_steps  # pylint: disable=protected-access
        last = getattr(hook, "_shim_last_logged", None)
        if every and last is not None and step < last + every:
            return
        hook._shim_last_logged = step  # pylint: disable=protected-access
        parts = [f"{tag} = {self._values[_value_key(fetch)]}"
                 for tag, fetch in _logging_tags(hook).items()]
        logging.info("%s", ", ".join(parts))

    def end(self) -> None:
        with global_step_visible(self._global_step):
            for hook in self._generic:
                hook.end(HostSession(self._values))

    def checkpoint_hooks(self) -> list[Any]:
        return [h for h in self._hooks if isinstance(h, _train.CheckpointSaverHook)]
