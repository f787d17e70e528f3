"""The estimator's own work runs eagerly, whatever the script did to TensorFlow's global mode.

    class TPUEstimator:
        @eager_scope.eager_entry_point
        def train(self, ...): ...          # runs eagerly even after disable_eager_execution()

        @eager_scope.eager_generator
        def predict(self, ...): yield [...]  # each chunk made eagerly, items yielded lazily

    eager_scope.on_own_thread("Hook.evaluate", fn)   # fn eagerly, outside the caller's scopes

Real TF1 scripts call `tf.compat.v1.disable_v2_behavior()` or `disable_eager_execution()`
before `app.run(main)` (tensorflow/tpu reference models, SimCLR, BigBird). This library runs
model_fn in `tf.function`-compiled strategy loops driven from eager Python, which cannot work
in graph mode (iterating a distributed dataset is the first thing to fail). Refusing or undoing
the switch would take away what the script asked for in its own code: top-level
`tf.placeholder` + `tf.Session().run`, v1 control flow and TF1 `TensorShape` in its own graphs.
So each public entry point that runs TensorFlow work enters eager mode for its own duration,
with a private default graph pushed first, so nothing the estimator does lands in the user's
graph (a `FuncGraph` writes v1 collections through to its outermost graph). Inside, the loops
trace `tf.function`s as usual: `ops.init_scope` lifts variable creation to this eager context,
and MirroredStrategy's replica threads copy it. model_fn and input_fn still see every other
TF1 switch (v1 TensorShape, `tf.compat.v1` defaults, tf_keras v1 dtype behaviour).

This module owns that switch and the one log line saying it happened. It must not know what the
entry points do, nor anything about strategies, loops or estimators.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from typing import Any, Callable, Iterable, Iterator, TypeVar

import tensorflow as tf

from tpu_estimator_compat._tf import private as _tf_private
from tpu_estimator_compat._tf import strategies as _tf_strategies
from tpu_estimator_compat import log as logging

_F = TypeVar("_F", bound=Callable[..., Any])

_logged = threading.Event()


def tf1_switches() -> list[str]:
    """The process-wide TF1 switches that are on now, in words a script author recognises."""
    found = []
    if _tf_private.eager_disabled_process_wide():
        found.append("eager execution off")
    if not tf.__internal__.tf2.enabled():
        found.append("v2 behaviour off")
    if isinstance(tf.TensorShape([1])[0], tf.compat.v1.Dimension):
        found.append("TF1 TensorShape")
    if not tf.compat.v1.control_flow_v2_enabled():
        found.append("v1 control flow")
    if not tf.compat.v1.resource_variables_enabled():
        found.append("reference variables")
    return found


def _log_once(entry_point: str) -> None:
    if _logged.is_set():
        return
    _logged.set()
    if _tf_private.eager_disabled_process_wide():
        why = ("the script switched TensorFlow to TF1 behaviour (" + ", ".join(tf1_switches())
               + "; tf.compat.v1.disable_eager_execution() or disable_v2_behavior())")
    else:
        why = "it was called inside a `with tf.Graph().as_default():` block"
    logging.warning(
        "%s: TensorFlow is not executing eagerly here: %s. TPUEstimator runs its own work "
        "eagerly and in tf.function anyway, in a private default graph; the script's own "
        "graph code keeps TF1 behaviour (logged once per process).", entry_point, why)


@contextlib.contextmanager
def running_eagerly(entry_point: str) -> Iterator[None]:
    """Inside: TensorFlow executes eagerly, with a private default graph if it did not before.

    Args:
        entry_point: The public call being run, e.g. "TPUEstimator.train", for messages.

    Raises:
        RuntimeError: When called while a `tf.function` is being traced: the estimator
            compiles and runs its own loops and cannot be part of another graph.
    """
    if tf.executing_eagerly():
        yield
        return
    if tf.inside_function():
        raise RuntimeError(
            f"`{entry_point}()` was called inside a tf.function. TPUEstimator compiles and "
            "runs its own loops; call it from plain Python, outside any tf.function.")
    _log_once(entry_point)
    # The graph first, eager second: eager ops ignore the graph, while code that asks for the
    # default graph (v1 collections, keras) gets the private one, not the user's.
    with (tf.Graph().as_default(), _tf_private.eager_mode(),
          _tf_strategies.eager_soft_placement()):
        yield


def eager_entry_point(method: _F) -> _F:
    """Decorates a public method or function so that its whole call runs eagerly."""
    entry_point = method.__qualname__

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with running_eagerly(entry_point):
            return method(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def eager_generator(
        method: Callable[..., Iterator[Iterable[Any]]]) -> Callable[..., Iterator[Any]]:
    """Decorates a generator of chunks: each made eagerly, its items handed out one by one.

    A script consuming `predict()` runs its own graph-mode code between items (feeding a
    prediction to its `Session`), so eager mode must never stay switched on in the caller's
    frame while the generator is suspended. The method yields iterables of finished items
    (one batch's rows): only making a chunk runs TensorFlow, so the eager check is paid once
    per chunk, not once per example (it was a third of a small model's `predict` time).
    """
    entry_point = method.__qualname__

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
        return _one_chunk_at_a_time(method(*args, **kwargs), entry_point)

    return wrapper


def _one_chunk_at_a_time(inner: Iterator[Iterable[Any]], entry_point: str) -> Iterator[Any]:
    try:
        while True:
            try:
                if tf.executing_eagerly():  # The usual caller: nothing to switch.
                    chunk = next(inner)
                else:
                    with running_eagerly(entry_point):
                        chunk = next(inner)
            except StopIteration:
                return
            yield from chunk
    finally:
        # Closing runs the inner generator's `finally` blocks (hooks' end, iterators).
        with running_eagerly(entry_point):
            inner.close()  # type: ignore[attr-defined]


_T = TypeVar("_T")


def on_own_thread(entry_point: str, fn: Callable[[], _T]) -> _T:
    """Runs `fn` eagerly on a new thread, in a private default graph; returns its result.

    For a run started from inside another run of the same process (a hook that evaluates
    during training, as legacy's `InMemoryEvaluatorHook` did in a graph of its own). The
    caller's scopes (a distribution strategy's, variable creators, the name scope, the
    default graph) are per-thread state that the inner run must not nest in; a new thread
    starts from none of them. The caller waits, so the two never run at once; `fn`'s error
    is raised here.
    """
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            with (tf.Graph().as_default(), _tf_private.eager_mode(),
                  _tf_strategies.eager_soft_placement()):
                outcome["value"] = fn()
        except BaseException as e:  # pylint: disable=broad-except  # Raised in the caller.
            outcome["error"] = e

    thread = threading.Thread(target=target, name=entry_point, daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
