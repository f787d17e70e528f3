"""Functions of legacy's `estimator` module beside its class, which model code calls.

tensorflow-estimator's own model code (its `keras_lib.model_to_estimator`) and real code
call `tensorflow_estimator.python.estimator.estimator.<function>`; the import hook serves
these there (`estimator_map.PRIVATE_LIBRARY_NAMES`), with legacy's contracts.
"""

from __future__ import annotations

import os

from tpu_estimator_compat import config as config_lib
from tpu_estimator_compat import log as logging


def maybe_overwrite_model_dir_and_session_config(
        config: config_lib.EstimatorRunConfig | None,
        model_dir: str | os.PathLike | None) -> config_lib.EstimatorRunConfig:
    """Legacy's `estimator.maybe_overwrite_model_dir_and_session_config`: the RunConfig an
    Estimator built from `config` and `model_dir` runs with.

    As legacy: None is a default `tf.estimator.RunConfig` (`Using default config.`); a
    TPUEstimator's `tf.estimator.tpu.RunConfig` is one too (a subclass, as legacy's); a config with no
    session_config gets legacy's default one; `model_dir` fills the config's, a different
    one in both raises, and neither gives a temporary directory (with legacy's warning).

    Raises:
        ValueError: `config` is not a RunConfig, or the two model_dirs differ.
    """
    if config is None:
        config = config_lib.EstimatorRunConfig()
        logging.legacy_info("Using default config.")
    if not isinstance(config, config_lib.EstimatorRunConfig):
        raise ValueError(
            f"config must be an instance of `RunConfig`, but provided {config!r}. Pass "
            "`tf.estimator.RunConfig(...)`.")
    if config.session_config is None:
        config = config.replace(session_config=config_lib.default_session_config())
    return config.replace(model_dir=config_lib.validate_model_dir(model_dir, config))
