"""Legacy's distribute coordinator, as far as a RunConfig recorded it.

TF 2.15's Estimator ran `train_and_evaluate` under the distribute coordinator
(`tensorflow.python.distribute.estimator_training`, removed in TF 2.16) when RunConfig had
a distribution strategy and TF_CONFIG (or `DistributeConfig.remote_cluster`) named a
cluster. RunConfig recorded which mode in `_distribute_coordinator_mode`; tensorflow-
estimator's own tests and the coordinator's `should_run_distribute_coordinator` read it.
This module owns that decision and `DistributeConfig`'s strategies; it runs no coordinator:
a cluster trains through the strategy `session/strategy.py` picks. It knows nothing of
estimators or models, and treats strategies as opaque objects.
"""
from __future__ import annotations

from typing import Any

import tensorflow as tf

from tpu_estimator_compat.cluster.tf_config import TaskType


def reads_coordinator(train_distribute: Any, eval_distribute: Any,
                      experimental_distribute: Any) -> bool:
    """Whether legacy RunConfig took its distribute-coordinator path: any strategy but a
    TPUStrategy, or a `DistributeConfig`."""
    def non_tpu(strategy: Any) -> bool:
        return bool(strategy) and not type(strategy).__name__.startswith("TPUStrategy")

    return (non_tpu(train_distribute) or non_tpu(eval_distribute)
            or bool(experimental_distribute))


def merged_distribute(train_distribute: Any, eval_distribute: Any,
                      experimental_distribute: Any) -> tuple[Any, Any]:
    """(train_distribute, eval_distribute) with `DistributeConfig`'s strategies, as legacy:
    one of the two places for each, never both."""
    for name in ("train_distribute", "eval_distribute"):
        from_config = getattr(experimental_distribute, name, None)
        given = train_distribute if name == "train_distribute" else eval_distribute
        if from_config and given:
            raise ValueError(
                    f"Either `{name}` or `experimental_distribute.{name}` can be set, not "
                    f"both: got {given!r} and {from_config!r}. Pass the strategy once.")
    return (train_distribute or getattr(experimental_distribute, "train_distribute", None),
            eval_distribute or getattr(experimental_distribute, "eval_distribute", None))


class CoordinatorMode:
    """Legacy's distribute coordinator modes, spelled as `tf.distribute`'s
    `distribute_coordinator.CoordinatorMode` values, which legacy RunConfig recorded."""
    STANDALONE_CLIENT = "standalone_client"
    INDEPENDENT_WORKER = "independent_worker"


def coordinator_mode(tf_config: dict, train_distribute: bool,
                     remote_cluster: object = None) -> str | None:
    """The distribute coordinator mode legacy RunConfig recorded for a distribution strategy.

    Legacy (TF 2.15 `estimator_training.init_run_config`): STANDALONE_CLIENT when
    `DistributeConfig.remote_cluster` names the cluster (and TF_CONFIG names none);
    INDEPENDENT_WORKER when TF_CONFIG names a cluster without a `master` job; None (no
    coordinator) without `train_distribute`, for local training or a `master` cluster.
    """
    cluster_spec = tf.train.ClusterSpec(tf_config.get("cluster") or {})
    if train_distribute and remote_cluster:
        if cluster_spec.jobs:
            raise ValueError(
                'Cannot set both "cluster_spec" of TF_CONFIG and '
                "`experimental_distribute.remote_cluster`. Drop one of them.")
        return CoordinatorMode.STANDALONE_CLIENT
    if not cluster_spec.jobs or TaskType.MASTER in cluster_spec.jobs or not train_distribute:
        return None
    return CoordinatorMode.INDEPENDENT_WORKER
