"""tf-slim 1.1.0 on TensorFlow 2.21: the TensorFlow internals it calls, back where it looks.

    import tpu_estimator_compat
    tpu_estimator_compat.install_aliases()     # also runs `install()` below
    from tensorflow.contrib import slim
    slim.tfexample_decoder.Image(...)          # object_detection's decoders
    tf.contrib.layers.optimize_loss(...), slim.batch_norm(...), ...

`tf.contrib.layers`, `framework`, `metrics` and `slim` are served by tf-slim 1.1.0 (its last
release), which reaches TensorFlow through private modules: `ops.Tensor`,
`control_flow_ops.cond`, `array_ops.stack`, `variable_scope.variable`, ... TensorFlow 2.21 moved
those names to other private modules (`tensor.Tensor`, `cond.cond`, `array_ops_stack.stack`,
`variable_v1.VariableV1`) and no longer binds them where tf-slim looks, and its
`tensorflow.python.layers.normalization` loads a tf_keras module path that tf_keras 2.21 does
not have. The calls then fail with AttributeError or ModuleNotFoundError at the first use:
`tfexample_decoder.Image` (the image decoder of every object_detection input pipeline),
`layers.optimize_loss`, `layers.batch_norm`, `layers.utils.smart_cond` with a tensor predicate,
`framework.local_variable`, `metrics.streaming_concat`, slim `learning`'s gradient helpers.

This module builds each missing name from its public TensorFlow 2.21 equivalent (the very
object TensorFlow now exports under the v1 API, so the behaviour is TF1's); the patches that
put them back are `_tf_patches`' `tf_slim_support.*`, each naming the tf-slim calls that need
it. `install()` asks for all of them; it runs with `install_aliases()` and in the
`TPUEstimator` constructor (model_fns import tf_slim directly too). It knows nothing about
tf-slim's functions themselves, estimators, or how a patch is installed.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tpu_estimator_compat._tf import patches as _tf_patches


def tensor_class(original: Any) -> type:
    """`ops.Tensor`: the graph tensor class, now `tf.Tensor` (framework/tensor.py)."""
    del original  # Absent on TF 2.21.
    return tf.Tensor


def indexed_slices_class(original: Any) -> type:
    """`ops.IndexedSlices`: sparse gradients, now `tf.IndexedSlices`."""
    del original
    return tf.IndexedSlices


def stack(original: Any) -> Any:
    """`array_ops.stack`, now `tf.stack` (array_ops_stack.py)."""
    del original
    return tf.stack


def unstack(original: Any) -> Any:
    """`array_ops.unstack`, now `tf.unstack` (array_ops_stack.py)."""
    del original
    return tf.unstack


def v1_assert(original: Any) -> Any:
    """`control_flow_ops.Assert`, now `tf.compat.v1.Assert` (control_flow_assert.py)."""
    del original
    return tf.compat.v1.Assert


def v1_case(original: Any) -> Any:
    """`control_flow_ops.case` (TF1 signature), now `tf.compat.v1.case`."""
    del original
    return tf.compat.v1.case


def v1_cond(original: Any) -> Any:
    """`control_flow_ops.cond` (TF1 signature, `fn1`/`fn2`), now `tf.compat.v1.cond`."""
    del original
    return tf.compat.v1.cond


def v1_while_loop(original: Any) -> Any:
    """`control_flow_ops.while_loop` (TF1 signature), now `tf.compat.v1.while_loop`."""
    del original
    return tf.compat.v1.while_loop


def v1_variable(original: Any) -> Any:
    """`variable_scope.variable`: TF1's `VariableV1` constructor, `tf.compat.v1.Variable`.

    It takes the same keywords (`collections`, `use_resource`, ...) and, like TF1's function,
    goes through the active variable creator scopes.
    """
    del original
    return tf.compat.v1.Variable


class _V1Layers:
    """Reads names from `tf.compat.v1.layers` when first used (it loads tf_keras)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(tf.compat.v1.layers, name)

    def __repr__(self) -> str:
        return "<tf.compat.v1.layers, read lazily by tpu_estimator_compat>"


def v1_layers_module(original: Any) -> Any:
    """`tensorflow.python.layers.normalization.normalization`: where the TF1 layers live.

    The module's `BatchNormalization` and `batch_normalization` read this attribute, a lazy
    loader of `tf_keras.legacy_tf_layers.normalization`, a path tf_keras 2.21 moved;
    `tf.compat.v1.layers` exports the same classes. Read lazily, so installing costs no
    Keras import.
    """
    del original  # Its target module does not exist.
    return _V1Layers()


def register_tensor_conversion_function(original: Any) -> Any:
    """`ops.register_tensor_conversion_function`, now `tf.register_tensor_conversion_function`
    (tensor_conversion_registry.py). Not a tf-slim call: mesh_tensorflow registers its
    `ReplicatedVariable` with it at import time."""
    del original  # Absent on TF 2.21.
    return tf.register_tensor_conversion_function


def install() -> None:
    """Puts every name tf-slim 1.1.0 reaches back into TensorFlow's modules. Idempotent."""
    _tf_patches.install("tf_slim_support")
