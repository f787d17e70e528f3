"""pytest plugin for `dev/peer_suite.py`: the library serves `tensorflow_estimator.*`.

The runner passes it as `-p peer_suite_plugin` to each pytest process of the peer suite
(tensorflow-estimator 2.15.0's own unit tests, read-only and verbatim). pytest imports a `-p`
plugin before it collects a single test file, so the names those files import at module
level (`from tensorflow_estimator.python.estimator import estimator`) resolve to whatever
`install_aliases()` serves at those paths: this library's modules, and the real package's
own where a later install provides them. Nothing here assumes which.
"""

import os

# The library's rules for the test process, set before TensorFlow loads: tf_keras as
# `tf.keras` (the tests' model code is Keras 2), oneDNN off (the project's parity setting).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import tpu_estimator_compat  # noqa: E402

tpu_estimator_compat.install_aliases()
