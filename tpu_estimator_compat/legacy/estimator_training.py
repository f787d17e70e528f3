"""TF 2.15's `tensorflow.python.distribute.estimator_training`, as far as RunConfig used it.

TF 2.16 removed the module, the glue between the legacy Estimator and the distribute
coordinator. tensorflow-estimator's code and tests import it before any estimator module
(`from tensorflow.python.distribute import estimator_training as dc_training`) and call
`init_run_config(config, tf_config)` and `should_run_distribute_coordinator(config)` on a
RunConfig. The import hook serves this module's names at that path (where TensorFlow has no
such module; `estimator_map.TF_DISTRIBUTE_LIBRARY_NAMES`). The mode itself is
`cluster/coordinator.py`'s, which `RunConfig` records at construction, as legacy's did.

Legacy's `train_and_evaluate`, `estimator_train` and `estimator_evaluate` ran the
coordinator's own worker threads and servers; they are not served: a cluster trains here
through the strategy `session/strategy.py` picks, and the import names the hint.
"""
from __future__ import annotations

from typing import Any

from tpu_estimator_compat import config as config_lib
from tpu_estimator_compat import log as logging
from tpu_estimator_compat.cluster import coordinator as coordinator_lib
from tpu_estimator_compat.cluster.tf_config import TaskType

CHIEF = TaskType.CHIEF
EVALUATOR = TaskType.EVALUATOR
PS = TaskType.PS
WORKER = TaskType.WORKER


def init_run_config(config: config_lib.EstimatorRunConfig, tf_config: dict) -> None:
    """Reads `config`'s strategies again for the parsed TF_CONFIG `tf_config`: its cluster
    properties and `_distribute_coordinator_mode`, as legacy's function set them.

    Raises:
        ValueError: When a strategy is given both directly and in `experimental_distribute`
            (legacy's error; a RunConfig built from a `DistributeConfig` already holds both).
    """
    # pylint: disable=protected-access  # Legacy's contract: the RunConfig's own fields.
    config._train_distribute, config._eval_distribute = coordinator_lib.merged_distribute(
        config._train_distribute, config._eval_distribute, config._experimental_distribute)
    config._init_distribute_coordinator(tf_config, config._cluster)


def should_run_distribute_coordinator(config: Any) -> bool:
    """Whether legacy would have run `train_and_evaluate` under the distribute coordinator:
    `config` recorded a coordinator mode and names a cluster."""
    mode = getattr(config, "_distribute_coordinator_mode", None)
    if mode is None:
        logging.legacy_info("Not using Distribute Coordinator.")
        return False
    if mode not in (coordinator_lib.CoordinatorMode.STANDALONE_CLIENT,
                    coordinator_lib.CoordinatorMode.INDEPENDENT_WORKER):
        logging.legacy_warning("Unexpected distribute_coordinator_mode: %r", mode)
        return False
    if not config.cluster_spec:
        logging.legacy_warning("Running `train_and_evaluate` locally, ignoring "
                               "`experimental_distribute_coordinator_mode`.")
        return False
    return True
