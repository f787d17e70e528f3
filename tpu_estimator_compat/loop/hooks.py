"""SessionRunHooks as legacy ran them: per step on its CPU path, per loop on a TPU.

With `use_tpu=False` legacy TPUEstimator was a plain Estimator: one `session.run` per step,
so `before_run`/`after_run` ran around every step and could fetch any tensor of the model's
graph. With `use_tpu=True` one `session.run` covered a loop of `iterations_per_loop` steps,
and the hooks ran once per loop. This module does both for the hooks a user passes
(`train(hooks=...)`, `training_hooks`, `evaluation_hooks`, `prediction_hooks`):

* A user's own hook gets `begin()`, `after_create_session(session, coord)`,
  `before_run(run_context)`, `after_run(run_context, run_values)` and `end(session)`, in that
  order. There is no TF1 session: `session` is a `HostSession` whose `run` reads variables
  and the values the step produced. `SessionRunArgs` fetches may be variables (e.g.
  `tf.compat.v1.train.get_global_step()`), the names `'loss'`/`'global_step'`, and, on
  legacy's CPU path (`use_tpu=False`; in evaluate also `eval_on_tpu=False`), model_fn
  tensors by object or by name (`'dense/BiasAdd:0'`) in train, evaluate and predict: the
  runner asks the loop to return those tensors for every step (replica 0's value; the spec's
  own `loss` tensor is replica 0's for the plain Estimator, whose distributed legacy ran the
  first replica's hooks, and the global batch's, `'loss'`, for TPUEstimator). `request_stop()` stops.
* `LoggingTensorHook` runs as itself (its own timer and log format) on the CPU path; on a
  TPU it logs `'loss'`/`'global_step'` at loop ends, as the values the host had there.
  `StopAtStepHook`, `NanTensorHook` and `CheckpointSaverHook` are re-expressed with their
  legacy meaning on the values the host has after each loop.
* `SummarySaverHook` and `StepCounterHook` run as themselves on the CPU path (their
  `begin()` reads the global step through a scoped patch); on a TPU, and for the other
  built-in TF1 hooks (ProfilerHook, ...), they are refused when training starts, naming the
  hook, rather than silently doing nothing.

This module knows nothing about models, strategies or compiled functions: the caller hands it
the graph model_fn was traced in and a function that makes the loop return named tensors.
"""

from __future__ import annotations

import collections
import contextlib
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import tensorflow as tf

from tpu_estimator_compat._tf import patches as _tf_patches
from tpu_estimator_compat._tf import private as _tf_private
from tpu_estimator_compat import log as logging
from tpu_estimator_compat.loop import nan_loss
from tpu_estimator_compat.loop import train_loop as loop_lib
from tpu_estimator_compat.v1_state import replica_state
from tpu_estimator_compat.v1_state import variables as variables_lib
from tpu_estimator_compat.checkpoint import warm_start as warm_start_lib

_v1 = tf.compat.v1
_train = _v1.train

_RESHAPED = (_train.LoggingTensorHook, _train.StopAtStepHook, _train.NanTensorHook,
             _train.CheckpointSaverHook)
_SPECIAL = ("loss", "global_step")
# The name scope of the Estimator's own `loss` summary, made for hooks' `merge_all()`.
_LOSS_SUMMARY = "tpu_estimator_compat_loss_summary"


def _loss_summary(loss: Any) -> bytes:
    """The serialized `Summary` of legacy Estimator's own scalar summary `loss`."""
    return _v1.Summary(value=[_v1.Summary.Value(
        tag="loss", simple_value=float(loss))]).SerializeToString()

# The fetches of a hook's SessionRunArgs the host resolves: name -> dtype of the model_fn
# tensors to return per step.
FetchTensors = Callable[[tuple[tuple[str, tf.DType], ...]], None]


def _builtin_hook_types(tensors_per_step: bool = False) -> tuple[type, ...]:
    """Built-in hooks refused. On legacy's CPU path (`tensors_per_step`) SummarySaverHook
    and StepCounterHook run as themselves, around every step, as on a plain Estimator."""
    names = ["ProfilerHook", "FeedFnHook", "FinalOpsHook", "GlobalStepWaiterHook"]
    if not tensors_per_step:
        names += ["SummarySaverHook", "StepCounterHook"]
    return tuple(getattr(_train, n) for n in names
                 if isinstance(getattr(_train, n, None), type))


def check_listeners(listeners: Sequence[Any]) -> None:
    """Refuses a saving listener that is not one, before anything runs, as legacy did."""
    for listener in listeners:
        if not (isinstance(listener, _train.CheckpointSaverListener) or all(
                hasattr(listener, m) for m in ("begin", "before_save", "after_save", "end"))):
            raise TypeError(
                f"saving_listeners must be a list of CheckpointSaverListener, given: "
                f"{listener!r}. Pass tf.compat.v1.train.CheckpointSaverListener instances.")


def check_hooks_type(hooks: Sequence[Any] | None) -> list[Any]:
    """Legacy `estimator._check_hooks_type`: `hooks` as a list, or legacy's TypeError for one
    that is no SessionRunHook (an object with its four methods passes too).

    tensorflow-estimator's `InMemoryEvaluatorHook` checks its `hooks` argument with it.
    """
    hooks = list(hooks or [])
    for hook in hooks:
        if not all(hasattr(hook, m) for m in ("begin", "before_run", "after_run", "end")):
            raise TypeError(
                f"Hooks must be a SessionRunHook, given: {hook!r}. Pass "
                "tf.compat.v1.train.SessionRunHook instances (or objects with begin, "
                "before_run, after_run and end).")
    return hooks


def check_supported(hooks: Sequence[Any], *, tensors_per_step: bool = False) -> None:
    """Refuses hooks this shim cannot honour, before any step runs.

    `tensors_per_step`: hooks may fetch model_fn tensors (training on legacy's CPU path).
    """
    for hook in check_hooks_type(hooks):
        if (isinstance(hook, _builtin_hook_types(tensors_per_step))
                and not isinstance(hook, _RESHAPED)):
            per_step = (" With use_tpu=True hooks run once per loop, outside the compiled "
                        "loop: write summaries from host_call, or run with use_tpu=False "
                        "(evaluate: eval_on_tpu=False), where it runs around every step."
                        if isinstance(hook, (_train.SummarySaverHook, _train.StepCounterHook))
                        else "")
            raise NotImplementedError(
                f"`{type(hook).__name__}` is not supported by tpu_estimator_compat: it needs "
                "TF1 graph tensors. Supported: LoggingTensorHook, StopAtStepHook, "
                "NanTensorHook, CheckpointSaverHook and your own SessionRunHook subclasses, "
                "and with use_tpu=False SummarySaverHook and StepCounterHook."
                f"{per_step} Remove it, or see migration_guide/hooks.md.")
        if isinstance(hook, _train.LoggingTensorHook) and not tensors_per_step:
            unknown = [t for t in _logging_tags(hook).values()
                       if _value_key(t) not in _SPECIAL]
            if unknown:
                raise NotImplementedError(
                    f"LoggingTensorHook asks for {unknown}. With use_tpu=True hooks run once "
                    "per loop of iterations_per_loop steps, and legacy TPUEstimator could not "
                    "fetch tensors from inside its TPU loop either: only 'loss' and "
                    "'global_step' (or the global step variable) can be logged. Log other "
                    "values with host_call, or train with use_tpu=False, where hooks run "
                    "around every step and may fetch any model_fn tensor.")


def _logging_tags(hook: Any) -> dict[str, Any]:
    return _tf_private.logging_hook_tensors(hook)


def _value_key(fetch: Any) -> str | None:
    if isinstance(fetch, str):
        name = fetch.split(":")[0]
        return name if name in ("loss", "global_step") else None
    name = getattr(fetch, "name", "") or ""
    return "global_step" if name.split(":")[0].endswith("global_step") else None


class _Fetches:
    """Resolves what hooks fetch against the graph model_fn was traced in.

    A fetch is one of: `'loss'`/`'global_step'` (or the global step variable), a variable
    (read on the host), an Operation or an op name (None, as `session.run` gave), or a
    model_fn tensor by object or `'name:0'`, whose value the loop returns per step.
    """

    def __init__(self, graph: Any, tensors_per_step: bool, loss_name: str | None = None
                 ) -> None:
        self.graph = graph
        self._tensors_per_step = tensors_per_step
        self._loss_name = loss_name  # None: the spec's loss is replica 0's, as any tensor.

    def tensor_name(self, fetch: Any) -> str | None:
        """The model_fn tensor `fetch` stands for, or None for the other kinds."""
        if _value_key(fetch) is not None or isinstance(fetch, (tf.Variable, tf.Operation)):
            return None
        if isinstance(fetch, str) and ":" not in fetch:
            return self._check_name(fetch)
        if not (isinstance(fetch, str) or tf.is_symbolic_tensor(fetch)):
            return None
        if not self._tensors_per_step or self.graph is None:
            raise self._not_fetchable(fetch, "with use_tpu=True hooks run once per loop, "
                                             "outside the compiled loop")
        tensor = self._by_name(fetch) if isinstance(fetch, str) else fetch
        if tensor.graph is not self.graph:
            raise self._not_fetchable(fetch, "it does not belong to the graph model_fn was "
                                             "traced in")
        return tensor.name

    def key(self, fetch: Any) -> Any:
        """Where a fetch's value is found in the step's values (see `HostSession`).

        A `merge_all()`/`merge()` made by a hook over model_fn's summaries is a tuple of
        the merged summaries' names (`merged_names`): their serialized values concatenated
        are the merged `Summary`.
        """
        special = _value_key(fetch)
        if special is not None:
            return special
        merged = self.merged_names(fetch)
        if merged is not None:
            return merged
        # The plain Estimator's spec `loss` is replica 0's, as any tensor: legacy's
        # distributed Estimator ran the first replica's hooks. TPUEstimator's off TPU is the
        # global batch's ('loss'): legacy's one device saw the whole batch.
        name = self.tensor_name(fetch)
        return "loss" if name is not None and name == self._loss_name else name

    def merged_names(self, fetch: Any) -> tuple[str, ...] | None:
        """The model_fn summaries a hook's MergeSummary tensor merges, or None.

        A hook's `begin()` that called `tf.compat.v1.summary.merge_all()` made the merge in
        the graph model_fn was traced in, after the trace: the loop cannot return it, but
        it returns the summaries it merges, one serialized `Summary` each per step, and a
        serialized `Summary` concatenated with another is their merge (TF1's MergeSummary
        also refused duplicate tags; model_fn's own summaries have none).
        """
        if (self.graph is None or not tf.is_symbolic_tensor(fetch)
                or fetch.graph is not self.graph or fetch.op.type != "MergeSummary"):
            return None
        names: list[str] = []
        for part in fetch.op.inputs:
            inner = self.merged_names(part)
            names += (inner if inner is not None else
                      ["loss"] if part.op.name.startswith(_LOSS_SUMMARY) else [part.name])
        return tuple(names)

    def logging_element(self, fetch: Any) -> Any:
        """What LoggingTensorHook's begin() made of a name it was given: an op name
        (`'head/truediv'`, as tensorflow/models' r1 programs log) stands for the op's only
        output (`'head/truediv:0'`); an op with several outputs is refused in legacy's
        words. Names the host answers (`'loss'`, `'global_step'`) stay names."""
        if (not isinstance(fetch, str) or ":" in fetch or _value_key(fetch) is not None
                or self.graph is None):
            return fetch
        self.graph.as_graph_element(fetch + ":0")  # The legacy error for an unknown name.
        try:
            self.graph.as_graph_element(fetch + ":1")
        except (KeyError, ValueError):
            return fetch + ":0"
        raise ValueError(f"Name {fetch} is ambiguous, as this `Operation` has multiple "
                         "outputs (at least 2).")

    def _check_name(self, name: str) -> None:
        if self.graph is not None:
            self.graph.as_graph_element(name)  # The legacy error for an unknown name.
        return None

    def _by_name(self, name: str) -> tf.Tensor:
        element = self.graph.as_graph_element(name)
        if not isinstance(element, tf.Tensor):
            raise ValueError(f"A hook fetched {name!r}, which is not a tensor.")
        return element

    @staticmethod
    def _not_fetchable(fetch: Any, why: str) -> Exception:
        return NotImplementedError(
            f"A hook fetched the model_fn tensor {fetch!r}, but {why}. Legacy TPUEstimator "
            "could not fetch tensors from inside its TPU loop either. Hooks can fetch "
            "variables (e.g. tf.compat.v1.train.get_global_step()), 'loss' and "
            "'global_step'; run with use_tpu=False (or evaluate with eval_on_tpu=False) to "
            "fetch model_fn tensors per step (legacy's CPU path), or write the value from "
            "host_call.")


class _HostSaver:
    """Stands in for `tf.compat.v1.train.Saver` made by a hook: restores on the host.

    Legacy hooks built a Saver over graph variables in begin() and called
    `saver.restore(session, path)` in after_create_session (loading EMA weights for
    evaluation). The variables here are eager (and mirrored), which a v1 Saver cannot restore
    outside a graph; the `{checkpoint name: variable}` map is restored directly.
    """

    def __init__(self, var_list: Any = None, *args: Any, **kwargs: Any) -> None:
        del args, kwargs
        self._var_map = warm_start_lib.saver_var_map(
            var_list if var_list is not None else _v1.global_variables())
        if not self._var_map:
            raise ValueError("No variables to save")

    def restore(self, sess: Any, save_path: str) -> None:
        del sess
        with tf.init_scope():
            warm_start_lib.restore_through_map(save_path, self._var_map)

    def save(self, sess: Any, save_path: str, *args: Any, **kwargs: Any) -> Any:
        del sess, args, kwargs
        raise NotImplementedError(
            f"Saver.save(sess, {save_path!r}) on a Saver made in a hook's begin(): "
            "tpu_estimator_compat serves such a Saver for restore() only (loading EMA "
            "weights). The estimator writes model_dir's checkpoints itself; to save at other "
            "times pass a tf.compat.v1.train.CheckpointSaverHook, or a CheckpointSaverListener "
            "in train(saving_listeners=...).")


def global_step_read(original: Callable[..., Any]) -> Callable[..., Any]:
    """The replacement of patch `hooks.global_step_read`: the global-step variable itself.

    `SessionRunArgs` fetches of it resolve to the step's global step (`_value_key`).
    """

    def get_or_create_global_step_read(graph: Any = None) -> Any:
        step = _train.get_global_step(graph)
        return step if step is not None else original(graph)

    get_or_create_global_step_read.__doc__ = original.__doc__
    return get_or_create_global_step_read


def host_saver(original: Any) -> type:
    """The replacement of patch `hooks.Saver`: `_HostSaver`."""
    del original
    return _HostSaver


def map_fetches(fn: Callable[[Any], Any], fetches: Any) -> Any:
    """`fetches` with `fn` applied to each fetch, as `session.run` walked a fetch structure.

    Lists, tuples, namedtuples and dicts nest; a dict keeps its keys as they are, in their
    order (`LoggingTensorHook(tensors=[t1, t2])` fetches `{t1: t1, t2: t2}`, whose keys are
    graph tensors, which `tf.nest` would sort and so compare).
    """
    if isinstance(fetches, dict):
        # Graph tensors as keys hash by identity, as in the TF1 graph the hook was made for.
        with _tf_private.tf1_tensor_equality():
            mapped = {key: map_fetches(fn, value) for key, value in fetches.items()}
            return collections.OrderedDict(mapped) if isinstance(
                fetches, collections.OrderedDict) else mapped
    if isinstance(fetches, tuple) and hasattr(fetches, "_fields"):
        return type(fetches)(*(map_fetches(fn, value) for value in fetches))
    if isinstance(fetches, (list, tuple)):
        return type(fetches)(map_fetches(fn, value) for value in fetches)
    return fn(fetches)


def flatten_fetches(fetches: Any) -> list[Any]:
    """Every fetch of a fetch structure, in `map_fetches`' order."""
    flat: list[Any] = []
    map_fetches(flat.append, fetches)
    return flat


class HostSession:
    """What a hook gets for `session`: `run` reads variables and the step's values."""

    def __init__(self, values: dict[str, Any], fetches: _Fetches | None = None) -> None:
        self._values = values
        self._fetches = fetches or _Fetches(None, False)

    def run(self, fetches: Any, feed_dict: Any = None, options: Any = None,
            run_metadata: Any = None) -> Any:
        del options, run_metadata
        if feed_dict:
            raise NotImplementedError("HostSession.run does not take feed_dict in hooks.")
        with tf.init_scope():  # Hooks may run with the model's graph as default.
            return map_fetches(self._resolve, fetches)

    def _resolve(self, fetch: Any) -> Any:
        if isinstance(fetch, tf.Operation):
            return None
        key = self._fetches.key(fetch)
        if isinstance(key, tuple):
            if not all(name in self._values for name in key):
                raise NotImplementedError(
                    f"A hook fetched {fetch!r} outside before_run/after_run; model_fn "
                    "summaries can only be fetched through before_run's SessionRunArgs.")
            return b"".join(_loss_summary(self._values[name]) if name == "loss"
                            else bytes(self._values[name]) for name in key)
        if key is not None:
            if key not in self._values:
                raise NotImplementedError(
                    f"A hook fetched {fetch!r} outside before_run/after_run; model_fn "
                    "tensors can only be fetched through before_run's SessionRunArgs.")
            return self._values[key]
        if isinstance(fetch, str):
            return None  # An op name: session.run returned None for an op.
        if isinstance(fetch, tf.Variable) or hasattr(fetch, "numpy"):
            return np.asarray(fetch.numpy())
        raise NotImplementedError(
            f"A hook fetched {fetch!r}. Hooks can fetch variables (e.g. "
            "tf.compat.v1.train.get_global_step()), 'loss', 'global_step' and, with "
            "use_tpu=False, model_fn tensors.")


@contextlib.contextmanager
def global_step_visible(global_step: tf.Variable, graph: Any = None) -> Iterator[None]:
    """Runs hook code as legacy did: in the model's graph, where `get_global_step()` works.

    With `graph` (the graph model_fn was traced in) it is the default graph, so hooks can
    look tensors up by name; its global-step collection then holds only the variable.
    """
    with contextlib.ExitStack() as stack:
        if graph is not None:
            stack.enter_context(graph.as_default())
        current = _v1.get_default_graph()
        ref = current.get_collection_ref(_v1.GraphKeys.GLOBAL_STEP)
        saved = list(ref)
        if graph is not None:
            ref[:] = [global_step]
        elif not any(item is global_step for item in ref):
            ref.append(global_step)
        try:
            yield
        finally:
            ref[:] = saved


class HookRunner:
    """Drives a list of hooks around each loop; the driver asks it whether to stop.

    With `tensors_per_step` (legacy's CPU path) the caller runs one step per loop while user
    hooks or LoggingTensorHooks are present, so hooks run around every step, and
    `fetch_tensors` is called to make the loop return the model_fn tensors the hooks ask
    for. `training`: the steps advance the global step (evaluate and predict do not).
    """

    def __init__(self, hooks: Sequence[Any], global_step: tf.Variable, *,
                 tensors_per_step: bool = False, graph: Any = None,
                 loss_name: str | None = None,
                 fetch_tensors: FetchTensors | None = None, training: bool = True,
                 registry: variables_lib.VariableRegistry | None = None,
                 summary_names: Sequence[str] = (), loss_summary: bool = False,
                 first_replica_loss: bool = False) -> None:
        check_supported(hooks, tensors_per_step=tensors_per_step)
        self._summary_names = tuple(summary_names) if tensors_per_step else ()
        self._loss_summary = loss_summary and tensors_per_step and loss_name is not None
        self._loss_name = loss_name
        self._registry = registry
        self._hooks = list(hooks)
        # The v1 variable stores hooks' `get_variable` calls see: new for each run, as
        # legacy built each train()/evaluate()/predict() in a new graph (`_variables_visible`).
        self._v1_stores = replica_state.new_v1_stores()
        self._global_step = global_step
        self._own_logging = tensors_per_step
        self._generic = [h for h in self._hooks if not isinstance(h, _RESHAPED)
                         or (self._own_logging and isinstance(h, _train.LoggingTensorHook))]
        self._fetches = _Fetches(graph if tensors_per_step else None, tensors_per_step,
                                 None if first_replica_loss else loss_name)
        self._graph = graph if tensors_per_step else None
        self._fetch_tensors = fetch_tensors
        self._training = training
        self._fetched: tuple[str, ...] = ()
        self._last_logged: dict[int, int] = {}  # LoggingTensorHook -> step it last logged.
        self._contexts: list[Any] = []
        self._values: dict[str, Any] = {}
        self.start_step = 0

    @property
    def hooks(self) -> list[Any]:
        return list(self._hooks)

    @property
    def per_step(self) -> bool:
        """Whether the caller must run one step per loop (legacy's CPU path had hooks)."""
        return self._own_logging and bool(self._generic)

    @contextlib.contextmanager
    def _scope(self) -> Iterator[None]:
        """Inside: the global step as legacy's hooks saw it, and TF1's tensor identity (a
        `LoggingTensorHook(tensors=[t1, t2])` keys its values by the tensors)."""
        with global_step_visible(self._global_step, self._graph), \
                _tf_private.tf1_tensor_equality():
            yield

    @contextlib.contextmanager
    def _variables_visible(self) -> Iterator[None]:
        """Inside: the v1 variable collections list the model's variables, as in legacy.

        Legacy called `begin()` and `after_create_session()` with model_fn's graph
        finalized, so `tf.global_variables()`, `tf.trainable_variables()` and
        `ExponentialMovingAverage.variables_to_restore()` saw every variable there: an
        evaluation hook that loads the EMA weights (tensorflow/tpu amoeba_net's
        `LoadEMAHook`: a Saver over `variables_to_restore()`, restored in
        `after_create_session`) needs them.
        """
        with contextlib.ExitStack() as stack:
            if self._registry is not None:
                stack.enter_context(self._registry.in_collections())
                stack.enter_context(variables_lib.ema_restore_by_name())
                stack.enter_context(_tf_patches.applied("hooks.Saver"))
                stack.enter_context(_tf_patches.applied("hooks.global_step_read"))
                # The graph model_fn was traced in (use_tpu=False) is a loop body whose name
                # scope is `while/`; legacy's hooks ran at the root of the model's graph,
                # where `ema.average_name(v)` is `dense/kernel/ExponentialMovingAverage`.
                stack.enter_context(_v1.get_default_graph().name_scope(None))
                # A hook's `begin()` making `get_variable('temp')` without reuse ran in each
                # run's new graph; here the graph (and its stores) outlive the run.
                stack.enter_context(replica_state.own_v1_stores(
                    _v1.get_default_graph(), self._registry.partitioner_check,
                    stores=self._v1_stores))
            yield

    @contextlib.contextmanager
    def _summaries_visible(self) -> Iterator[None]:
        """Inside: the model graph's SUMMARIES collection holds model_fn's v1 summaries.

        Legacy called `begin()` on the graph model_fn had built, whose collection held them,
        so a hook's `tf.compat.v1.summary.merge_all()` merged them (canned estimators' tests
        fetch it every step). The trace empties that per-step collection when it ends.
        With `loss_summary` (training) the collection also holds the Estimator's own
        `loss` summary, which legacy added when model_fn made none named `loss`; the host
        serializes it from the step's loss.
        """
        if self._graph is None or not (self._summary_names or self._loss_summary):
            yield
            return
        ref = self._graph.get_collection_ref(_v1.GraphKeys.SUMMARIES)
        saved = list(ref)
        ref[:] = [self._graph.get_tensor_by_name(name) for name in self._summary_names]
        if self._loss_summary:
            with self._graph.name_scope(None), self._graph.name_scope(_LOSS_SUMMARY):
                ref.append(_v1.summary.scalar(
                    "loss", self._graph.get_tensor_by_name(self._loss_name), collections=[]))
        try:
            yield
        finally:
            ref[:] = saved

    def _session(self) -> HostSession:
        return HostSession(self._values, self._fetches)

    def begin(self, step: int) -> None:
        self.start_step = step
        self._values = {"global_step": np.int64(step), "loss": None}
        before = set(self._registry.by_name()) if self._registry is not None else set()
        with self._scope(), self._variables_visible(), self._summaries_visible():
            for hook in self._generic:
                if isinstance(hook, _train.LoggingTensorHook):
                    self._begin_logging(hook)
                else:
                    hook.begin()
        if self._registry is not None:
            # A hook's own variables (early stopping's `signal_early_stopping/STOP`) were
            # never in legacy's evaluate or predict graph: no restore may require them.
            for name in set(self._registry.by_name()) - before:
                self._registry.mark_optional_on_restore(name)
        with self._scope(), self._variables_visible():
            for hook in self._generic:
                hook.after_create_session(self._session(), None)

    def _begin_logging(self, hook: Any) -> None:
        """LoggingTensorHook.begin, with `'loss'`/`'global_step'` kept as the host's values.

        Its own begin() would look every name up in the graph; the spec's loss has no
        fixed name there, so the names the host answers stay names, and the rest are
        checked against the graph now, as legacy's begin() did.
        """
        tags = {tag: self._fetches.logging_element(fetch)
                for tag, fetch in _logging_tags(hook).items()}
        for fetch in tags.values():
            self._fetches.key(fetch)
        _tf_private.begin_logging_hook(hook, tags)

    def limit_target(self, target: int) -> int:
        """StopAtStepHook's last step, counted from where this call started."""
        for hook in self._hooks:
            if isinstance(hook, _train.StopAtStepHook):
                target = min(target,
                             _tf_private.stop_at_step_last_step(hook, self.start_step))
        return target

    def before_loop(self, step: int) -> None:
        del step
        self._contexts = []
        if not self._generic:  # Nothing to call: no graph switch (once per loop at k=1).
            return
        with self._scope():
            for hook in self._generic:
                context = _train.SessionRunContext(_train.SessionRunArgs(None),
                                                   self._session())
                self._contexts.append((hook, context, hook.before_run(context)))
        self._ask_for_tensors()

    def _ask_for_tensors(self) -> None:
        """Makes the loop return every model_fn tensor a before_run asked for."""
        wanted = set(self._fetched)
        for _, _, args in self._contexts:
            if args is not None and args.fetches is not None:
                for fetch in flatten_fetches(args.fetches):
                    key = self._fetches.key(fetch)
                    if isinstance(key, tuple):
                        wanted.update(name for name in key if name not in _SPECIAL)
                    elif key is not None and key not in _SPECIAL:
                        wanted.add(key)
        if wanted == set(self._fetched):
            return
        if self._fetch_tensors is None:
            raise NotImplementedError("Hooks cannot fetch model_fn tensors here.")
        self._fetched = tuple(sorted(wanted))
        self._fetch_tensors(tuple((name, self._graph.get_tensor_by_name(name).dtype)
                                  for name in self._fetched))

    def after_loop(self, step: int, losses: np.ndarray,
                   tensors: Sequence[np.ndarray] = (), *, steps_run: int | None = None,
                   starts: np.ndarray | None = None) -> bool:
        """Runs after_run and the reshaped hooks; returns True to request a stop.

        `tensors[j][k]`: the j-th fetched model_fn tensor at the loop's k-th step.
        `steps_run` (default: one per loss): on legacy's CPU path a `session.run` that hit
        the end of input raised before any hook's after_run, so none runs for a loop of 0.
        `starts[k]`: the global step the loop's k-th step started from (default: one step
        per step).
        """
        steps_run = len(losses) if steps_run is None else steps_run
        starts = loop_lib.step_starts(starts, step, len(losses))
        if self._own_logging and not steps_run:
            return False
        self._values["global_step"] = np.int64(step)
        if len(losses):
            self._values["loss"] = np.float32(losses[-1])
        for name, values in zip(self._fetched, tensors):
            if len(values):
                self._values[name] = values[-1]
        stop = False
        for hook in self._hooks:
            if isinstance(hook, _train.NanTensorHook):
                error = nan_loss.first_nan_loss(losses, starts)
                if error is not None:
                    if _tf_private.nan_hook_fails(hook):
                        raise error
                    logging.warning("Model diverged with loss = NaN at step %d.", error.step)
                    stop = True
            elif isinstance(hook, _train.LoggingTensorHook) and not self._own_logging:
                self._log(hook, step)
        if self._own_logging and self._training and len(losses):
            # Legacy's CPU path fetched the global step in the step's own session.run, which
            # read it before the step's increment (recorded: 0, 1, 2, ... for steps 1, 2, 3).
            self._values["global_step"] = np.int64(starts[-1])
        if not self._contexts:
            self._values["global_step"] = np.int64(step)
            return stop
        session = self._session()
        with self._scope():
            # Every hook's SessionRunArgs were fetched by the step's own session.run (above:
            # the global step before its increment); a `run_context.session.run(global_step)`
            # inside after_run was a later session.run and read the step's increment
            # (legacy: 1, 2, 3 for steps 1, 2, 3; ELECTRA's ETAHook reads it so).
            results = [session.run(args.fetches)
                       if args is not None and args.fetches is not None else None
                       for _, _, args in self._contexts]
            self._values["global_step"] = np.int64(step)
            for (hook, context, _), result in zip(self._contexts, results):
                hook.after_run(context, _train.SessionRunValues(result, None, None))
                stop = stop or context.stop_requested
        return stop

    def _log(self, hook: Any, step: int) -> None:
        every = _tf_private.logging_hook_every_steps(hook)
        last = self._last_logged.get(id(hook))
        if every and last is not None and step < last + every:
            return
        self._last_logged[id(hook)] = step
        parts = [f"{tag} = {self._values[_value_key(fetch)]}"
                 for tag, fetch in _logging_tags(hook).items()]
        logging.info("%s", ", ".join(parts))

    def end(self) -> None:
        with self._scope():
            for hook in self._generic:
                hook.end(self._session())

    def checkpoint_hooks(self) -> list[Any]:
        return [h for h in self._hooks if isinstance(h, _train.CheckpointSaverHook)]
