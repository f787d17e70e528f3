"""Chooses the tf.distribute strategy a TPUEstimator runs on, and says why.

Rules, in order:
1. `RunConfig(train_distribute=...)` (or `eval_distribute` for evaluation) wins.
2. `use_tpu=False`: the default strategy, on the host CPU, as legacy ran.
3. `use_tpu=True`: TPUStrategy when a TPU is reachable (a resolver passed as
   `RunConfig(cluster=...)`, or local TPU devices); otherwise MirroredStrategy over the local
   GPUs, or over the logical CPU devices when the CPU has been split into several (the
   launcher's `--cpu_replicas`); otherwise the default strategy.

On a real TPU `num_shards` must equal the core count (legacy error). On a fallback a mismatch
is logged once and the job runs on the replicas it has, so an unchanged TPU script still runs
on a laptop. This module knows nothing about models, inputs or loops.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf
from absl import logging


@dataclasses.dataclass(frozen=True)
class StrategyChoice:
    strategy: tf.distribute.Strategy
    reason: str
    is_tpu: bool = False


def _try_tpu(resolver: Any) -> StrategyChoice | None:
    try:
        if resolver is None:
            if not tf.config.list_logical_devices("TPU"):
                return None
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver("local")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        strategy = tf.distribute.TPUStrategy(resolver)
    except Exception as e:  # pylint: disable=broad-except
        # Any failure to reach a TPU (bad name, no TPU, an assertion inside TF's own TPU
        # initialisation) means "fall back", never "crash an unchanged script".
        logging.warning("No TPU reachable through %r (%s); falling back.", resolver, e)
        return None
    return StrategyChoice(strategy, f"TPU reachable: TPUStrategy over "
                                    f"{strategy.num_replicas_in_sync} cores", is_tpu=True)


# One MirroredStrategy per device set for the life of the process. Every MirroredStrategy
# instance numbers its collective ops from the same keys, so two instances over the same
# devices corrupt each other's all-reduces ("Shape mismatch in the collective instance").
_MIRRORED: dict[tuple[str, ...], tf.distribute.MirroredStrategy] = {}


def mirrored_over(devices: list[str]) -> tf.distribute.MirroredStrategy:
    """The process-wide MirroredStrategy over `devices`."""
    key = tuple(devices)
    if key not in _MIRRORED:
        _MIRRORED[key] = tf.distribute.MirroredStrategy(list(key))
    return _MIRRORED[key]


def _local_fallback() -> StrategyChoice:
    gpus = tf.config.list_logical_devices("GPU")
    if len(gpus) > 1:
        return StrategyChoice(mirrored_over([d.name for d in gpus]),
                              f"no TPU; MirroredStrategy over {len(gpus)} local GPUs")
    if len(gpus) == 1:
        return StrategyChoice(tf.distribute.OneDeviceStrategy(gpus[0].name),
                              "no TPU; OneDeviceStrategy on the local GPU")
    cpus = tf.config.list_logical_devices("CPU")
    if len(cpus) > 1:
        return StrategyChoice(mirrored_over([d.name for d in cpus]),
                              f"no TPU or GPU; MirroredStrategy over {len(cpus)} logical "
                              "CPU devices")
    return StrategyChoice(tf.distribute.get_strategy(),
                          "no TPU or GPU; default strategy on the host CPU")


_WARNED_SHARD_MISMATCH: set[tuple[int, str, int]] = set()


def select(*, use_tpu: bool, distribute: tf.distribute.Strategy | None,
           cluster: Any = None, num_shards: int | None = None) -> StrategyChoice:
    """Picks the strategy for one mode and logs one line saying which and why."""
    if distribute is not None:
        choice = StrategyChoice(distribute, "given by RunConfig",
                                is_tpu=isinstance(distribute, tf.distribute.TPUStrategy))
    elif not use_tpu:
        choice = StrategyChoice(tf.distribute.get_strategy(),
                                "use_tpu=False: default strategy on the host CPU")
    else:
        choice = _try_tpu(cluster) or _local_fallback()
    replicas = choice.strategy.num_replicas_in_sync
    logging.info("TPUEstimator runs on %s with %d replica(s): %s.",
                 type(choice.strategy).__name__, replicas, choice.reason)
    if use_tpu and num_shards is not None and num_shards != replicas:
        if choice.is_tpu:
            raise ValueError(
                f"`num_shards` ({num_shards}) in TPUConfig does not match the number of "
                f"TPU cores ({replicas}). Set num_shards={replicas} or leave it None. "
                f"(Legacy: The num_shards in TPUConfig {num_shards} does not match the "
                f"total number of cores {replicas}.)")
        key = (num_shards, type(choice.strategy).__name__, replicas)
        if key not in _WARNED_SHARD_MISMATCH:
            _WARNED_SHARD_MISMATCH.add(key)
            logging.warning(
                "TPUConfig num_shards=%d but %s has %d replica(s); running on %d. Batch "
                "sizes must divide by %d.", num_shards, key[1], replicas, replicas, replicas)
    return choice
