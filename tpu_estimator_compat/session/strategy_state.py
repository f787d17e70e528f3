"""The live state of one strategy: its variables, global step and compiled functions.

`Runtime` is kept across train/evaluate/predict calls of one estimator for one strategy, as
legacy kept model_dir; `Runtime.scope()` is entered around every trace and call. What a run
reads from the estimator is `settings.RunSettings`. This module knows nothing about loops,
hooks or files.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import tensorflow as tf

from tpu_estimator_compat._tf import device_iterators
from tpu_estimator_compat._tf import private as _tf_private
from tpu_estimator_compat._tf import strategies as _tf_strategies
from tpu_estimator_compat import log as logging
from tpu_estimator_compat.step import optimizer_apply
from tpu_estimator_compat.v1_state import variables as variables_lib


@dataclasses.dataclass
class Runtime:
    """The live state for one strategy: its variables and global step."""

    strategy: tf.distribute.Strategy
    registry: variables_lib.VariableRegistry
    global_step: tf.Variable
    functions: dict[Any, Any] = dataclasses.field(default_factory=dict)
    # The per-device input pipelines' functions, traced once for every call's new iterator.
    device_generators: device_iterators.DeviceGeneratorCache = dataclasses.field(
        default_factory=device_iterators.DeviceGeneratorCache)

    def scope(self) -> "RuntimeScope":
        return RuntimeScope(self)


class RuntimeScope:
    """Strategy scope + registry creator scope + v1-optimizer loss scaling, entered eagerly.

    Entered around every trace and call so that code running in the strategy's merge_call
    (v1 optimizer slots) and in replica threads shares one variable registry, v1
    optimizers average over replicas as Estimator did, and update each device without an
    all-device barrier (`optimizer_apply`).
    """

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._stack: list[Any] = []

    def __enter__(self) -> None:
        for cm in (self._runtime.strategy.scope(), self._runtime.registry.creator_scope(),
                   _tf_private.estimator_loss_scaling(self._runtime.strategy),
                   optimizer_apply.per_device()):
            cm.__enter__()
            self._stack.append(cm)

    def __exit__(self, *exc: Any) -> None:
        while self._stack:
            self._stack.pop().__exit__(*exc)


# Grappler's TFG (MLIR) pass pipeline, "on" (TensorFlow's default) or "off". The launcher
# sets "off" unless told otherwise (`run.tfg_optimizer`); a program using the library
# directly sets the variable itself. Off, a big model's first call starts sooner and runs
# the same graph: on BERT-base's train step over 8 replicas the pipeline changed no node and
# took 13.8 of Grappler's 47.6 s (Grappler's own log at 046ec71, bench/results/HISTORY.md).
TFG_OPTIMIZER_ENV = "TPU_ESTIMATOR_COMPAT_TFG_OPTIMIZER"


def apply_process_settings() -> None:
    """Applies `TFG_OPTIMIZER_ENV`; before the first compiled call of a run, idempotent."""
    value = os.environ.get(TFG_OPTIMIZER_ENV, "on").strip().lower()
    if value not in ("on", "off"):
        raise ValueError(
            f"`{TFG_OPTIMIZER_ENV}` is {value!r}. Set it to 'off' (skip Grappler's TFG pass "
            "pipeline, as the launcher does) or 'on' (TensorFlow's default), or unset it.")
    if value == "off" and _tf_private.disable_tfg_optimizer():
        logging.info("Grappler's TFG pass pipeline is off for this process (%s=off).",
                     TFG_OPTIMIZER_ENV)


def new_runtime(strategy: tf.distribute.Strategy, drops_partitioners: bool = False) -> Runtime:
    """A runtime on `strategy`; `drops_partitioners`: legacy built this run's model_fn in a
    strategy's scope, which dropped v1 partitioners (`one_part.dropping_partitioners`)."""
    apply_process_settings()
    _tf_strategies.make_collective_tokens(strategy)  # A strategy made with eager off.
    _tf_strategies.separate_collective_groups(strategy)
    registry = variables_lib.VariableRegistry(drops_partitioners)
    with strategy.scope():
        global_step = variables_lib.create_global_step(registry)
    return Runtime(strategy, registry, global_step)
