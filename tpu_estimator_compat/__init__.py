"""tpu_estimator_compat: run TF1 `TPUEstimator` model_fns unchanged on TF2 tf.distribute.

    from tpu_estimator_compat import TPUEstimator, TPUEstimatorSpec, RunConfig, TPUConfig

Importing this package patches nothing and loads no TensorFlow: each public name is imported
on first access (PEP 562 `__getattr__`), so the tools that only read code
(`python -m tpu_estimator_compat.scan`) start in milliseconds. It only sets
`TF_USE_LEGACY_KERAS=1` when the user has not set it, because TensorFlow reads it at the first
`tf.keras` access and r1 model_fns need Keras 2 (`v1_state/keras_env.py` owns the rule and
applies it again when it loads; importing it here would load TensorFlow).
"""

import importlib as _importlib
import os as _os
from typing import Any as _Any

# keras_env.prefer_legacy_keras()'s rule (unset means ours), before anything imports TensorFlow.
_os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

# Public name -> the module that defines it, imported on first access.
_PUBLIC = {
    "BestExporter": "tpu_estimator_compat.api.train_and_eval",
    "EstimatorSpec": "tpu_estimator_compat.spec",
    "EvalSpec": "tpu_estimator_compat.api.train_and_eval",
    "InputPipelineConfig": "tpu_estimator_compat.tpu_config",
    "LatestExporter": "tpu_estimator_compat.api.train_and_eval",
    "ModeKeys": "tpu_estimator_compat.spec",
    "RunConfig": "tpu_estimator_compat.config",
    "TPUConfig": "tpu_estimator_compat.tpu_config",
    "TPUEstimator": "tpu_estimator_compat.api.estimator",
    "TPUEstimatorSpec": "tpu_estimator_compat.spec",
    "TrainSpec": "tpu_estimator_compat.api.train_and_eval",
    "WarmStartSettings": "tpu_estimator_compat.checkpoint.warm_start",
    "install_aliases": "tpu_estimator_compat.legacy.aliases",
    "train_and_evaluate": "tpu_estimator_compat.api.train_and_eval",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> _Any:
    """A public name, imported now; else a submodule (`tpu_estimator_compat.config`)."""
    module = _PUBLIC.get(name)
    if module is not None:
        value = getattr(_importlib.import_module(module), name)
        globals()[name] = value  # Later reads skip this function.
        return value
    if not name.startswith("_"):
        try:
            return _importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
