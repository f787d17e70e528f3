"""Keras 2 for r1 code: `tf.compat.v1.layers` and `tf.keras` inside model_fn need tf-keras.

TF 2.16+ routes `tf.keras` to Keras 3 unless `TF_USE_LEGACY_KERAS=1` is set before Keras is
first touched, and Keras 3 has no `tf.compat.v1.layers`. TensorFlow reads the variable lazily,
at the first `tf.keras` access, so `prefer_legacy_keras()` (run when this package is imported)
sets it when the user has not chosen, and `check_legacy_keras()` (run by the TPUEstimator
constructor) fails with the fix when Keras 3 was already loaded. This module knows nothing else.
"""

from __future__ import annotations

import os

from absl import logging

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
