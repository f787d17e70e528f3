"""tpu_estimator_compat: run TF1 `TPUEstimator` model_fns unchanged on TF2 tf.distribute.

    from tpu_estimator_compat import TPUEstimator, TPUEstimatorSpec, RunConfig, TPUConfig

Importing this package patches nothing. It only sets `TF_USE_LEGACY_KERAS=1` when the user
has not set it, because TensorFlow reads it at the first `tf.keras` access and r1 model_fns
need Keras 2 (see `v1_state/keras_env.py`).
"""

# First: keras_env sets TF_USE_LEGACY_KERAS before anything imports TensorFlow.
from tpu_estimator_compat.v1_state import keras_env as _keras_env  # noqa: F401

from tpu_estimator_compat.legacy.aliases import install_aliases  # noqa: E402
from tpu_estimator_compat.config import RunConfig  # noqa: E402
from tpu_estimator_compat.api.estimator import TPUEstimator  # noqa: E402
from tpu_estimator_compat.spec import EstimatorSpec  # noqa: E402
from tpu_estimator_compat.spec import ModeKeys  # noqa: E402
from tpu_estimator_compat.spec import TPUEstimatorSpec  # noqa: E402
from tpu_estimator_compat.tpu_config import InputPipelineConfig  # noqa: E402
from tpu_estimator_compat.tpu_config import TPUConfig  # noqa: E402
from tpu_estimator_compat.api.train_and_eval import BestExporter  # noqa: E402
from tpu_estimator_compat.api.train_and_eval import EvalSpec  # noqa: E402
from tpu_estimator_compat.api.train_and_eval import LatestExporter  # noqa: E402
from tpu_estimator_compat.api.train_and_eval import TrainSpec  # noqa: E402
from tpu_estimator_compat.api.train_and_eval import train_and_evaluate  # noqa: E402
from tpu_estimator_compat.checkpoint.warm_start import WarmStartSettings  # noqa: E402

__all__ = [
    "BestExporter",
    "EstimatorSpec",
    "EvalSpec",
    "InputPipelineConfig",
    "LatestExporter",
    "ModeKeys",
    "RunConfig",
    "TPUConfig",
    "TPUEstimator",
    "TPUEstimatorSpec",
    "TrainSpec",
    "WarmStartSettings",
    "install_aliases",
    "train_and_evaluate",
]
