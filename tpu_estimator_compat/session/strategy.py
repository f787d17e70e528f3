"""Chooses the tf.distribute strategy a TPUEstimator runs on, and says why.

Rules, in order:
1. `RunConfig(train_distribute=...)` (or `eval_distribute` for evaluation) wins; off TPU,
   evaluation uses `eval_distribute` only and prediction neither, as legacy's Estimator
   (estimator._distribute_for; its predict() built no strategy).
2. `use_tpu=True` and `RunConfig(cluster=TPUClusterResolver(...))` naming a reachable TPU
   (one host or a whole pod): TPUStrategy, which drives every host of the pod from here.
3. A cluster of several workers, from `TF_CONFIG` or a non-TPU `RunConfig(cluster=...)`:
   the process-wide MultiWorkerMirroredStrategy (`cluster/workers.py`), whatever `use_tpu` says;
   running each worker on its own would train N unsynchronised copies into one model_dir.
   A `TF_CONFIG` cluster with `ps` tasks trains on ParameterServerStrategy driven by its
   chief (`parameter_servers.py`); its evaluation and prediction run on the calling task's
   own devices, from the checkpoint, by the rules below.
4. `use_tpu=False`: the default strategy, on the host CPU, as legacy ran.
5. `use_tpu=True`: TPUStrategy over local TPU devices; otherwise MirroredStrategy over the
   local GPUs, or over the logical CPU devices when the CPU has been split into several (the
   launcher's `--cpu_replicas`); otherwise the default strategy.

On a real TPU `num_shards` must equal the core count (legacy error). On a fallback a mismatch
is logged once and the job runs on the replicas it has, so an unchanged TPU script still runs
on a laptop. This module knows nothing about models, inputs or loops.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf

from tpu_estimator_compat.cluster import workers as cluster_lib
from tpu_estimator_compat import log as logging
from tpu_estimator_compat.session import parameter_servers


@dataclasses.dataclass(frozen=True)
class StrategyChoice:
    strategy: tf.distribute.Strategy
    reason: str
    is_tpu: bool = False


def _try_tpu(resolver: Any) -> StrategyChoice | None:
    if resolver is not None and (
            getattr(resolver, "no_tpu_reason", None) or
            not isinstance(resolver, tf.distribute.cluster_resolver.TPUClusterResolver)):
        # The launcher's NoTPUClusterResolver, or a resolver that names no TPU: connecting
        # would reset the eager context (tearing down every live dataset iterator) only to
        # fail in TPU initialisation.
        logging.warning("No TPU reachable through %r (%s); falling back.", resolver,
                        getattr(resolver, "no_tpu_reason", None) or "not a TPUClusterResolver")
        return None
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


def _own_devices(kind: str, cluster_info: Any) -> list[Any]:
    """This process's logical devices of `kind`.

    On the chief of a ps cluster the eager context is connected to the whole cluster, and the
    device lists include every worker's and ps task's devices; evaluation there must stay on
    the chief's own.
    """
    devices = tf.config.list_logical_devices(kind)
    if parameter_servers.coordinates(cluster_info):
        prefix = "/job:chief/replica:0/task:0/"  # The coordinator, whatever TF_CONFIG named it.
        devices = [d for d in devices if d.name.startswith(prefix)]
    return devices


def _local_fallback(cluster_info: Any = None) -> StrategyChoice:
    gpus = _own_devices("GPU", cluster_info)
    if len(gpus) > 1:
        return StrategyChoice(mirrored_over([d.name for d in gpus]),
                              f"no TPU; MirroredStrategy over {len(gpus)} local GPUs")
    if len(gpus) == 1:
        return StrategyChoice(tf.distribute.OneDeviceStrategy(gpus[0].name),
                              "no TPU; OneDeviceStrategy on the local GPU")
    cpus = _own_devices("CPU", cluster_info)
    if len(cpus) > 1:
        return StrategyChoice(mirrored_over([d.name for d in cpus]),
                              f"no TPU or GPU; MirroredStrategy over {len(cpus)} logical "
                              "CPU devices")
    return StrategyChoice(tf.distribute.get_strategy(),
                          "no TPU or GPU; default strategy on the host CPU")


def _public_name(strategy: tf.distribute.Strategy) -> str:
    """The name users know: MultiWorkerMirroredStrategy's class is CollectiveAllReduceStrategy."""
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return "MultiWorkerMirroredStrategy"
    if parameter_servers.is_parameter_server_strategy(strategy):
        return "ParameterServerStrategy"
    return type(strategy).__name__


def _choose(use_tpu: bool, cluster: Any, cluster_info: Any, training: bool,
            peer_timeout_secs: float | None,
            register_timeout_secs: float | None) -> StrategyChoice:
    """Rules 2-5 of the module docstring; a TPU resolver is tried (and warned about) once."""
    names_tpu = isinstance(cluster, tf.distribute.cluster_resolver.TPUClusterResolver)
    if use_tpu and names_tpu:
        tpu = _try_tpu(cluster)
        if tpu is not None:
            return tpu
    if training and parameter_servers.coordinates(cluster_info):
        pss = parameter_servers.strategy(cluster_info, protocol=cluster_info.rpc_layer)
        return StrategyChoice(pss, f"cluster with ps tasks: {parameter_servers.describe(pss)}")
    resolver = cluster_lib.multi_worker_resolver(cluster, cluster_info)
    if resolver is not None:
        return _multi_worker(resolver, peer_timeout_secs, register_timeout_secs)
    if not use_tpu:
        return StrategyChoice(tf.distribute.get_strategy(),
                              "use_tpu=False: default strategy on the host CPU")
    return (None if names_tpu else _try_tpu(cluster)) or _local_fallback(cluster_info)


def _multi_worker(resolver: Any, peer_timeout_secs: float | None,
                  register_timeout_secs: float | None) -> StrategyChoice:
    strategy = cluster_lib.multi_worker_strategy(
        resolver, peer_timeout_secs=peer_timeout_secs,
        register_timeout_secs=register_timeout_secs)
    hosts = cluster_lib.num_hosts(strategy)
    local = strategy.num_replicas_in_sync // hosts
    role = "the chief" if cluster_lib.is_chief(strategy) else "not the chief"
    return StrategyChoice(
        strategy, f"cluster of {hosts} workers; this process is "
                  f"{cluster_lib.describe(resolver)}, {role}, with {local} local replica(s)")


_WARNED_SHARD_MISMATCH: set[tuple[int, str, int]] = set()


_WARNED_MODEL_PARALLEL: set[tuple[int, str, int]] = set()


def _warn_unpartitioned(num_cores_per_replica: int | None, partitioned_inputs: bool,
                        choice: StrategyChoice) -> None:
    """Model parallelism (3D U-Net, Mask R-CNN) runs unpartitioned here, said once per setup.

    Legacy split each replica's model over `num_cores_per_replica` TPU cores (spatial
    partitioning of `input_partition_dims`). Every replica here holds the whole model on one
    device: the same math, more memory per device.
    """
    if not num_cores_per_replica or num_cores_per_replica == 1:
        return
    replicas = choice.strategy.num_replicas_in_sync
    key = (num_cores_per_replica, type(choice.strategy).__name__, replicas)
    if key in _WARNED_MODEL_PARALLEL:
        return
    _WARNED_MODEL_PARALLEL.add(key)
    logging.warning(
        "TPUConfig num_cores_per_replica=%d%s asks for model parallelism, which "
        "tpu_estimator_compat does not apply%s: each of the %d replica(s) of %s runs the whole "
        "model on one device, unpartitioned (the same math; it must fit one device's memory).",
        num_cores_per_replica,
        " with input_partition_dims" if partitioned_inputs else "",
        " on TPUs yet" if choice.is_tpu else " off TPU", replicas, key[1])


def select(*, use_tpu: bool, distribute: tf.distribute.Strategy | None,
           cluster: Any = None, cluster_info: Any = None, num_shards: int | None = None,
           num_cores_per_replica: int | None = None,
           partitioned_inputs: bool = False, training: bool = True,
           peer_timeout_secs: float | None = None,
           register_timeout_secs: float | None = None) -> StrategyChoice:
    """Picks the strategy for one mode and logs one line saying which and why.

    `cluster` is `RunConfig.cluster` (a ClusterResolver or None) and `cluster_info` is
    `RunConfig.cluster_info` (what TF_CONFIG said); without them this is one machine.
    `training` is False for evaluation and prediction. The timeouts configure a
    multi-worker strategy's health checks (`cluster.multi_worker_strategy`).
    """
    if distribute is not None:
        choice = StrategyChoice(distribute, "given by RunConfig",
                                is_tpu=isinstance(distribute, tf.distribute.TPUStrategy))
    else:
        choice = _choose(use_tpu, cluster, cluster_info, training, peer_timeout_secs,
                         register_timeout_secs)
    replicas = choice.strategy.num_replicas_in_sync
    logging.info("TPUEstimator runs on %s with %d replica(s): %s.",
                 _public_name(choice.strategy), replicas, choice.reason)
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
    if use_tpu:
        _warn_unpartitioned(num_cores_per_replica, partitioned_inputs, choice)
    return choice
