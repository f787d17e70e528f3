"""Turns a legacy `model_fn` into one replica step function per mode.

A replica step is what one TPU core ran per iteration: call model_fn on one replica's batch,
inside `variables.replica_scope`, and return the tensors the loop needs. One function per
mode (`train_step`, and the eval/predict steps next to it), not one closure switching on mode.

This module owns calling model_fn the legacy way (argument matching, `params` copies with
`batch_size`/`use_tpu`/`context`, legacy errors for a bad signature or a bad return value),
and nothing about loops, input pipelines, checkpoints or host-side work.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from typing import Any, Callable

import tensorflow as tf

from tpu_estimator_compat import spec as spec_lib
from tpu_estimator_compat import variables as variables_lib
from tpu_estimator_compat.inputs import BATCH_SIZE_KEY, CONTEXT_KEY, USE_TPU_KEY

ModeKeys = spec_lib.ModeKeys


def model_fn_args(model_fn: Callable[..., Any]) -> set[str]:
    fn = model_fn.func if hasattr(model_fn, "func") else model_fn
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


def check_model_fn_signature(model_fn: Callable[..., Any]) -> None:
    """Raises the legacy error for a model_fn that cannot receive `params`."""
    args = model_fn_args(model_fn)
    if "features" not in args:
        raise ValueError(
            f"model_fn ({model_fn}) must include features argument. Define it as "
            "`def model_fn(features, labels, mode, params):`.")
    if "params" not in args:
        raise ValueError(
            f"model_fn ({model_fn}) does not include params argument, required by "
            "TPUEstimator to pass batch size as params['batch_size']. Define it as "
            "`def model_fn(features, labels, mode, params):`.")


@dataclasses.dataclass(frozen=True)
class ModelFnCaller:
    """Everything needed to call the user's model_fn the way legacy TPUEstimator did."""

    model_fn: Callable[..., Any]
    params: dict[str, Any]
    config: Any
    use_tpu: bool
    context_factory: Callable[[str], Any] | None = None

    def __call__(self, features: Any, labels: Any, mode: str, batch_size: int | None,
                 export_mode: bool = False) -> Any:
        args = model_fn_args(self.model_fn)
        kwargs: dict[str, Any] = {}
        if "labels" in args:
            kwargs["labels"] = labels
        elif labels is not None:
            raise ValueError(
                "model_fn does not take labels, but input_fn returns labels. Either add a "
                "`labels` argument to model_fn or return only features from input_fn.")
        if "mode" in args:
            kwargs["mode"] = mode
        if "config" in args:
            kwargs["config"] = copy.deepcopy(self.config)
        params = copy.deepcopy(self.params)
        if batch_size is not None:
            params[BATCH_SIZE_KEY] = batch_size
        if not export_mode:  # Legacy export passed neither batch_size nor use_tpu.
            params[USE_TPU_KEY] = self.use_tpu
        if self.use_tpu and self.context_factory is not None:
            params[CONTEXT_KEY] = self.context_factory(mode)
        kwargs["params"] = params
        result = self.model_fn(features=features, **kwargs)
        spec_lib.validate_spec_type(result, mode)
        return result


def _as_float_loss(loss: Any) -> tf.Tensor:
    loss = tf.convert_to_tensor(loss)
    loss = tf.reshape(loss, [])
    return tf.cast(loss, tf.float32)


def make_train_step(caller: ModelFnCaller, registry: variables_lib.VariableRegistry,
                    global_step: tf.Variable,
                    batch_size: int | None) -> Callable[[Any, Any], tf.Tensor]:
    """Returns `step(features, labels) -> loss` running TRAIN model_fn on one replica.

    The returned loss runs after the spec's `train_op`, so reading it means the update ran.
    """

    def train_step(features: Any, labels: Any) -> tf.Tensor:
        with variables_lib.replica_scope(registry, global_step):
            spec = caller(features, labels, ModeKeys.TRAIN, batch_size)
            if spec.loss is None:
                raise ValueError(
                    "model_fn returned a spec without `loss` in TRAIN mode. Return "
                    "`TPUEstimatorSpec(mode, loss=..., train_op=...)`.")
            if spec.train_op is None:
                raise ValueError(
                    "model_fn returned a spec without `train_op` in TRAIN mode. Return "
                    "`TPUEstimatorSpec(mode, loss=..., train_op=optimizer.minimize(...))`.")
            with tf.control_dependencies([spec.train_op]):
                return _as_float_loss(spec.loss)

    return train_step
