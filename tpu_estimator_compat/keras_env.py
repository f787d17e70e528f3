"""Keras 2 for r1 code: `tf.compat.v1.layers` and `tf.keras` inside model_fn need tf-keras.

TF 2.16+ routes `tf.keras` to Keras 3 unless `TF_USE_LEGACY_KERAS=1` is set before Keras is
first touched, and Keras 3 has no `tf.compat.v1.layers`. TensorFlow reads the variable lazily,
at the first `tf.keras` access, so `prefer_legacy_keras()` (run when this package is imported)
sets it when the user has not chosen, and `check_legacy_keras()` (run by the TPUEstimator
constructor) fails with the fix when Keras 3 was already loaded.

`tf1_batch_norm_updates()` makes Keras 2 batch norm, called inside a replica step, update its
moving statistics with the formula a TF1 graph used, so checkpoints match legacy bit for bit.
This module knows nothing else: not the strategy, the loop or the model_fn.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Iterator

from absl import logging

from tpu_estimator_compat import _tf_private

ENV_VAR = "TF_USE_LEGACY_KERAS"
_TRUE = ("true", "True", "1")


def prefer_legacy_keras() -> None:
    """Sets TF_USE_LEGACY_KERAS=1 unless the user set it (to anything) themselves."""
    if ENV_VAR not in os.environ:
        os.environ[ENV_VAR] = "1"
        logging.debug("Set %s=1 so r1 model_fns get Keras 2 (tf-keras).", ENV_VAR)


def _resolved_keras_version() -> str | None:
    import tensorflow as tf  # Local: keep this module importable before TensorFlow.

    return vars(tf.keras).get("_tfll_keras_version")


def check_legacy_keras() -> None:
    """Raises a clear error when tf.keras already resolved to Keras 3 in this process."""
    version = _resolved_keras_version()
    if version == "keras_3" or (version is None and os.environ.get(ENV_VAR) not in _TRUE):
        raise RuntimeError(
            f"tf.keras is Keras 3 in this process ({ENV_VAR}="
            f"{os.environ.get(ENV_VAR)!r}), but r1 model_fns need Keras 2 for "
            "`tf.compat.v1.layers` and `tf.keras` layers. Set the environment variable "
            f"{ENV_VAR}=1 before TensorFlow is imported (or import tpu_estimator_compat "
            "before touching tf.keras), and `pip install tf-keras` matching your TensorFlow.")


_GRAPH_BATCH_NORM = threading.local()
_install_lock = threading.Lock()
_installed: list[bool] = []


@contextlib.contextmanager
def tf1_batch_norm_updates() -> Iterator[None]:
    """Inside (this thread only): tf_keras batch norm updates moving stats as in a TF1 graph.

    Why: in a `tf.function` traced from eager code, tf_keras lets FusedBatchNormV3 average the
    moving mean/variance (`exponential_avg_factor`); in the TF1 graph legacy TPUEstimator
    built, it ran `moving -= (moving - batch) * (1 - momentum)`. Both are right, they round
    differently (about 1 ulp a step), and parity with legacy checkpoints needs the latter.
    Thread-local because MirroredStrategy traces each replica on its own thread.
    """
    _install()
    previous = getattr(_GRAPH_BATCH_NORM, "active", False)
    _GRAPH_BATCH_NORM.active = True
    try:
        yield
    finally:
        _GRAPH_BATCH_NORM.active = previous


def _install() -> None:
    with _install_lock:
        if _installed:
            return
        _installed.append(True)
        cls = _tf_private.keras_batch_norm_base()
        if cls is None:
            return
        original = cls._fused_batch_norm  # pylint: disable=protected-access

        def _fused_batch_norm(self: Any, inputs: Any, mask: Any, training: Any) -> Any:
            momentum = self.momentum
            if not (getattr(_GRAPH_BATCH_NORM, "active", False)
                    and isinstance(momentum, (float, int))):
                return original(self, inputs, mask, training)
            # tf_keras takes the fused average only for a Python-number momentum; the same
            # number as a tensor selects the graph formula, with the float32 value a TF1
            # graph's `convert_to_tensor(momentum)` gave. Set on the instance dict directly
            # so Keras attribute tracking never sees the temporary tensor.
            import tensorflow as tf  # Local: keep this module importable before TensorFlow.

            object.__setattr__(self, "momentum", tf.convert_to_tensor(momentum))
            try:
                return original(self, inputs, mask, training)
            finally:
                object.__setattr__(self, "momentum", momentum)

        cls._fused_batch_norm = _fused_batch_norm  # pylint: disable=protected-access
        logging.debug("tf_keras batch norm: TF1-graph moving-average updates in replica steps.")
