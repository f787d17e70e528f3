"""Keras 2 for r1 code: `tf.compat.v1.layers` and `tf.keras` inside model_fn need tf-keras.

TF 2.16+ routes `tf.keras` to Keras 3 unless `TF_USE_LEGACY_KERAS=1` is set before Keras is
first touched, and Keras 3 has no `tf.compat.v1.layers`. TensorFlow reads the variable lazily,
at the first `tf.keras` access, so `prefer_legacy_keras()` (run when this package is imported,
before it imports TensorFlow) sets it when the user has not chosen, and
`check_legacy_keras()` (run by the TPUEstimator constructor) fails with the fix when Keras 3
was already loaded.

`tf1_graph_keras()` shows the Keras and TF1 code that model_fn runs the TF1 graph it was written
for: `executing_eagerly_outside_functions()` is False inside it, as in legacy's graph. Keras
functional models built on model_fn's tensors (`Input(tensor=features)`,
`tf.keras.applications.MobileNet(input_tensor=features)`, a layer output used as the loss)
then get plain graph tensors instead of symbolic KerasTensors, and Keras 2 batch norm updates
its moving statistics with the formula a TF1 graph used, so checkpoints match legacy bit for
bit. Layers made inside another layer's `build()` (under init_scope, eager here) are v1
layers too, as every layer of that graph was. The patches this takes are `_tf_patches`'
`keras_env.*`; this module builds their replacements and asks for them on first use. It
knows nothing else: not the strategy, the loop or the model_fn, nor how a patch is installed.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Any, Callable, Iterator

ENV_VAR = "TF_USE_LEGACY_KERAS"
_TRUE = ("true", "True", "1")


def prefer_legacy_keras() -> None:
    """Sets TF_USE_LEGACY_KERAS=1 unless the user set it (to anything) themselves.

    Silently: this runs at import, before a script's `app.run` sets up absl logging, and an
    absl log call then gives Python's root logger a handler of its own; TensorFlow's logger
    then adds none, and legacy's `INFO:tensorflow:Loss for final step ...` lines, which
    scripts grep for, never appear (tensorflow/tpu's efficientnet run.sh failed on it).
    """
    if ENV_VAR not in os.environ:
        os.environ[ENV_VAR] = "1"


# Before TensorFlow loads (the import below is the package's first): TF 2.21's own __init__
# reads the variable once more, to import Keras 3's optimizers eagerly when it is unset, and
# with them scikit-learn and SciPy, ~1.7 s of every process's start-up on a 2-core machine.
prefer_legacy_keras()

from tpu_estimator_compat._tf import patches as _tf_patches
from tpu_estimator_compat._tf import private as _tf_private  # noqa: E402


def check_legacy_keras() -> None:
    """Raises a clear error when tf.keras already resolved to Keras 3 in this process."""
    version = _tf_private.resolved_keras_version()
    if version == "keras_3" or (version is None and os.environ.get(ENV_VAR) not in _TRUE):
        raise RuntimeError(
            f"tf.keras is Keras 3 in this process ({ENV_VAR}="
            f"{os.environ.get(ENV_VAR)!r}), but r1 model_fns need Keras 2 for "
            "`tf.compat.v1.layers` and `tf.keras` layers. Set the environment variable "
            f"{ENV_VAR}=1 before TensorFlow is imported (or import tpu_estimator_compat "
            "before touching tf.keras), and `pip install tf-keras` matching your TensorFlow.")


_GRAPH_VIEW = threading.local()
# Callers that keep the true answer inside the graph view. tf_keras's TF1 layers
# (`tf.compat.v1.layers`) already create their variables as in TF1 through the variable
# registry; told "graph mode" they would look for their variables in a graph collection that
# the eagerly created variables are not in (and fail with a regularizer).
_TRUE_ANSWER_CALLERS = ("tf_keras.src.legacy_tf_layers.",)


def in_tf1_graph_view() -> bool:
    """True inside `tf1_graph_keras()` on this thread."""
    return getattr(_GRAPH_VIEW, "active", False)


@contextlib.contextmanager
def tf1_graph_keras() -> Iterator[None]:
    """Inside (this thread only): model code sees TF1 graph mode, as model_fn did in legacy.

    Why: legacy TPUEstimator called model_fn while building a TF1 graph, where
    `tf.compat.v1.executing_eagerly_outside_functions()` is False. tf_keras decides from that
    call alone whether layers called on a graph tensor build a TF1-style functional graph
    (`Input(tensor=t)` tags `t` and returns it; layer outputs are ordinary tensors) or
    symbolic KerasTensors, which cannot feed a v1 loss, and whether batch norm lets
    FusedBatchNormV3 average its moving statistics (`exponential_avg_factor`) or runs
    `moving -= (moving - batch) * (1 - momentum)` as a TF1 graph did (they round ~1 ulp apart a
    step). Inside a replica step the answer "outside functions is eager" is true of the
    shim's loop but not of what the model code was written against. Only the public API's
    name is answered differently; TensorFlow's own internals keep the true answer.
    Thread-local because MirroredStrategy traces each replica on its own thread.
    """
    _tf_patches.install("keras_env")
    previous = in_tf1_graph_view()
    _GRAPH_VIEW.active = True
    try:
        yield
    finally:
        _GRAPH_VIEW.active = previous


def patched_maybe_init_scope(original: Any) -> Any:
    """tf_keras's `maybe_init_scope(layer)`, deciding on the true answer in the graph view.

    The replacement of patch `keras_env.maybe_init_scope`.

    Why: a TF1 graph built a Keras layer's weights inside the graph, under the graph's
    uniquified name scope. MirroredStrategy traces every replica into one graph, so the
    second replica's `dense` layer would build its weights as `dense_1/kernel` and miss the
    first replica's. Lifted out of the trace (what tf_keras does in TF2), every replica
    builds under the layer's own name, and the variable registry hands all of them the same
    variables, as the single TF1 graph had.
    """

    @contextlib.contextmanager
    def maybe_init_scope(layer: Any) -> Iterator[None]:
        previous = in_tf1_graph_view()
        _GRAPH_VIEW.active = False
        try:
            scope = original(layer)
            scope.__enter__()
        finally:
            _GRAPH_VIEW.active = previous
        try:
            yield
        except BaseException as e:  # pylint: disable=broad-except
            if not scope.__exit__(type(e), e, e.__traceback__):
                raise
        else:
            scope.__exit__(None, None, None)

    return maybe_init_scope


def patched_should_use_v2(original: Callable[[], bool]) -> Callable[[], bool]:
    """tf_keras's `should_use_v2()`: False in the graph view, as in legacy's TF1 graph.

    The replacement of patch `keras_env.should_use_v2`.

    Why: every new Keras layer asks this which Layer base (v1 `base_layer_v1.Layer` or v2)
    its class hierarchy gets, and tf_keras swaps the bases of the shared classes in place.
    In model_fn the answer is v1 (the graph view says "not eager outside functions"), but a
    layer made inside another layer's `build()` (efficientdet's `FNode` and
    `ResampleFeatureMap`) is made under the init_scope tf_keras enters for building, which
    is eager here, so the answer would flip to v2 for that layer's classes: a `Dense` or
    batch norm made in model_fn then runs v2 methods on a v1 object, or a v1 `__call__` in
    progress calls a v2 `_set_mask_metadata` (`TypeError: ... 'build_graph'`). In legacy's
    graph init_scope was graph mode too, and every layer was v1.
    """

    def should_use_v2() -> bool:
        if getattr(_GRAPH_VIEW, "active", False):
            return False
        return original()

    should_use_v2.__doc__ = original.__doc__
    should_use_v2.__wrapped__ = original  # type: ignore[attr-defined]
    return should_use_v2


def patched_executing_eagerly_outside_functions(original: Callable[[], bool]
                                                 ) -> Callable[[], bool]:
    """The public `executing_eagerly_outside_functions` inside `tf1_graph_keras` (see there).

    The replacement of patch `keras_env.executing_eagerly_outside_functions`: False in the
    graph view, except to the callers in `_TRUE_ANSWER_CALLERS`; the original's answer
    everywhere else.
    """

    def executing_eagerly_outside_functions() -> bool:
        # sys._getframe is CPython's documented frame API (inspect.currentframe wraps it),
        # not TensorFlow's: the one caller frame is all that is read.
        if getattr(_GRAPH_VIEW, "active", False) and not sys._getframe(1).f_globals.get(  # pylint: disable=protected-access
                "__name__", "").startswith(_TRUE_ANSWER_CALLERS):
            return False
        return original()

    executing_eagerly_outside_functions.__doc__ = original.__doc__
    executing_eagerly_outside_functions.__wrapped__ = original  # type: ignore[attr-defined]
    return executing_eagerly_outside_functions
