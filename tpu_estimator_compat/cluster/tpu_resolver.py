"""A `TPUClusterResolver` that does not crash an unchanged script on a machine without a TPU.

    resolver = TPUClusterResolver(tpu=FLAGS.tpu)   # the real resolver, or NoTPUClusterResolver
    config = RunConfig(cluster=resolver, ...)       # the estimator then falls back off TPU

Legacy scripts build the resolver unconditionally. This module owns deciding whether a TPU can
be resolved here (a local TPU, an explicit `grpc://` address, or a Google Cloud VM) and the
stand-in returned when it cannot; `legacy/aliases.py` serves it as
`tf.compat.v1.distribute.cluster_resolver.TPUClusterResolver` and `tf.contrib`'s. The strategy
choice (`session/strategy.py`) recognises the stand-in and falls back.
"""

from __future__ import annotations

import os
from typing import Any

import tensorflow as tf

from tpu_estimator_compat import log as logging

_DMI_PRODUCT_NAME = "/sys/class/dmi/id/product_name"


def _real_resolver_class() -> type:
    return tf.distribute.cluster_resolver.TPUClusterResolver


class NoTPUClusterResolver(tf.distribute.cluster_resolver.TPUClusterResolver):
    """What `TPUClusterResolver(...)` returns when there is no TPU to resolve.

    A legacy script builds the resolver unconditionally and passes it on as
    `RunConfig(cluster=...)`. This stand-in reports the local master (`''`) and an empty
    cluster, so `RunConfig` and `get_master()` callers see "no remote TPU"; anything that
    needs the TPU itself (TensorFlow's TPU initialisation, which the estimator's strategy
    choice tries) raises ValueError with `no_tpu_reason`, and the estimator falls back to GPUs
    or the CPU. It subclasses the real resolver so `isinstance` checks in scripts and in
    TensorFlow accept it; the real constructor, which would contact Google Cloud, never runs.
    """

    def __init__(self, tpu: Any, reason: str) -> None:  # pylint: disable=super-init-not-called
        self.tpu = tpu
        self.no_tpu_reason = reason
        self.task_type = "worker"
        self.task_id = 0
        self.rpc_layer = None

    def _no_tpu(self) -> ValueError:
        return ValueError(self.no_tpu_reason)

    @property
    def _tpu(self) -> str:  # Read by tf.tpu.experimental.initialize_tpu_system.
        raise self._no_tpu()

    @property
    def tpu_hardware_feature(self) -> Any:
        raise self._no_tpu()

    def get_tpu_system_metadata(self) -> Any:
        raise self._no_tpu()

    def cluster_spec(self) -> tf.train.ClusterSpec:
        return tf.train.ClusterSpec({})

    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        del task_type, task_id, rpc_layer  # There is one answer: the local process.
        return ""

    get_master = master  # The TF1 resolver's name for `master`.

    def get_job_name(self) -> str:
        return self.task_type

    def num_accelerators(self, task_type: str | None = None, task_id: int | None = None,
                         config_proto: Any = None) -> dict[str, int]:
        del task_type, task_id, config_proto
        return {}

    @property
    def environment(self) -> str:
        return ""

    def __repr__(self) -> str:
        return f"NoTPUClusterResolver(tpu={self.tpu!r})"


def _on_google_cloud() -> bool:
    """True on a GCE VM (where the real resolver may ask the metadata server), read offline."""
    if os.environ.get("GCE_METADATA_HOST") or os.environ.get("GCE_METADATA_IP"):
        return True
    try:
        with open(_DMI_PRODUCT_NAME, encoding="utf-8") as f:
            return "Google" in f.read()
    except OSError:
        return False


def _has_local_tpu() -> bool:
    return bool(tf.config.list_physical_devices("TPU"))


def _reason_not_to_try(tpu: Any) -> str | None:
    """Why the real resolver must not be built for `tpu`, or None to try it.

    The real resolver asks the GCE metadata server for the project and zone of any named TPU
    and for the name itself when none is given. Off Google Cloud that is a network call that
    can only fail (slowly), so it is skipped; an explicit `grpc://` address and a local TPU
    are tried.
    """
    name = tpu[0] if isinstance(tpu, (list, tuple)) and len(tpu) == 1 else tpu
    if isinstance(name, bytes):
        name = name.decode("utf-8")
    if isinstance(name, str) and name.startswith("grpc://"):
        return None
    if _has_local_tpu():
        return None
    if name == "local":
        return "tpu='local' but this machine has no TPU devices"
    if _on_google_cloud():
        return None
    return "no TPU devices here and not on Google Cloud, so there is no TPU to resolve"


class _ResolverMeta(type):
    """Makes `isinstance(r, TPUClusterResolver)` true for what the factory returns."""

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, _real_resolver_class())


class TPUClusterResolver(metaclass=_ResolverMeta):
    """`TPUClusterResolver(tpu, zone, project, ...)` that never fails for lack of a TPU.

    Returns the real `tf.distribute.cluster_resolver.TPUClusterResolver` when a TPU can be
    resolved, else a `NoTPUClusterResolver` (logged once per call), so a legacy script that
    constructs a resolver unconditionally still runs on a laptop.
    """

    def __new__(cls, tpu: Any = None, zone: str | None = None, project: str | None = None,
                *args: Any, **kwargs: Any) -> Any:
        reason = _reason_not_to_try(tpu)
        if reason is None:
            try:
                return _real_resolver_class()(tpu, zone, project, *args, **kwargs)
            except Exception as e:  # pylint: disable=broad-except
                # Any failure to resolve (no name, unknown TPU, no credentials) means "no TPU
                # here": the estimator falls back, as the script's author expects off-TPU.
                reason = f"{type(e).__name__}: {e}"
        logging.warning("TPUClusterResolver(tpu=%r) found no TPU (%s); returning a "
                        "NoTPUClusterResolver so the estimator falls back to GPUs or the CPU.",
                        tpu, reason)
        return NoTPUClusterResolver(tpu, reason)


# TensorFlow's job names for TPU hosts (`tf.tpu` system metadata): a master naming no cluster
# runs its TPU computations on `tpu_worker`, and `coordinator` is never the TPU job.
TPU_WORKER_JOB = "tpu_worker"
_COORDINATOR_JOB = "coordinator"
_LOCAL_MASTERS = ("", "local")


def master_job(master: str | None, cluster_def: Any = None) -> str | None:
    """The job TPU computations were placed on for `master` and a session's `cluster_def`.

    Legacy `_InternalTPUContext.master_job` without a `tpu_job_name`: None for a local
    master; `tpu_worker` when no cluster is given; else the cluster's only job, or its only
    job besides `coordinator`. Raises ValueError when that cannot be told.
    """
    if master is None or master in _LOCAL_MASTERS:
        return None
    if cluster_def is None or not cluster_def.job:
        return TPU_WORKER_JOB
    names = {job.name for job in cluster_def.job}
    if TPU_WORKER_JOB in names:
        raise ValueError(f"Currently, {TPU_WORKER_JOB} is not an allowed job name. Please "
                         "specify a tpu_job_name as part of your TPUConfig.")
    if len(names) == 1:
        return cluster_def.job[0].name
    if len(names) == 2 and _COORDINATOR_JOB in names:
        return (names - {_COORDINATOR_JOB}).pop()
    raise ValueError(f"Could not infer TPU job name (jobs {sorted(names)}). Please specify a "
                     "tpu_job_name as part of your TPUConfig.")
