"""`TF_CONFIG`: what the job's cluster environment variable says about this process.

The one reading of `TF_CONFIG` in the library. `RunConfig` parses it once at construction
(`cluster_info`, `model_dir`, `tpu_job_name`) and keeps the result as `RunConfig.cluster_info`;
`cluster/workers.py` builds the multi-worker resolver from that result instead of reading the
environment again, so the estimator's roles (task, chief) and the strategy's cluster cannot
disagree. The rules and error wording are legacy RunConfig's. It knows nothing of strategies,
estimators or checkpoints.
"""
from __future__ import annotations

import json
import os
from typing import NamedTuple

import tensorflow as tf

from tpu_estimator_compat import log as logging

_TF_CONFIG_ENV = "TF_CONFIG"
_RPC_LAYER_KEY = "rpc_layer"
_SERVICE_KEY = "service"
_TPU_WORKER_JOB_NAME_KEY = "tpu_worker_job_name"
_CLUSTER_KEY = "cluster"
_TASK_KEY = "task"
_TASK_TYPE_KEY = "type"
_TASK_ID_KEY = "index"
_SESSION_MASTER_KEY = "session_master"
_EVAL_SESSION_MASTER_KEY = "eval_session_master"
_MODEL_DIR_KEY = "model_dir"
_LOCAL_MASTER = ""
_GRPC_SCHEME = "grpc://"


class TaskType:
    """Task type names used in `TF_CONFIG`, kept as legacy spelled them."""
    MASTER = "master"
    PS = "ps"
    WORKER = "worker"
    CHIEF = "chief"
    EVALUATOR = "evaluator"


def load() -> dict:
    """Returns the parsed `TF_CONFIG` environment variable, `{}` when unset."""
    raw = os.environ.get(_TF_CONFIG_ENV, "")
    if not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(
                "`TF_CONFIG` environment variable is not valid JSON ({}): {!r}. "
                "Fix or unset TF_CONFIG.".format(e, raw)) from e
    if not isinstance(parsed, dict):
        raise ValueError(
                "`TF_CONFIG` environment variable must hold a JSON object, got {!r}."
                .format(raw))
    return parsed


def tpu_job_name() -> str | None:
    """The TPU job name `TF_CONFIG['service']` names, or None."""
    service = load().get(_SERVICE_KEY) or {}
    job_name = service.get(_TPU_WORKER_JOB_NAME_KEY) if isinstance(service, dict) else None
    if job_name:
        logging.legacy_info("Load TPU job name from TF_CONFIG: %s", job_name)
    return job_name


def model_dir(tf_config: dict, model_dir: str | None) -> str | None:
    """Reconciles the RunConfig `model_dir` argument with `TF_CONFIG['model_dir']`."""
    # '' is falsy and would silently mean "unset"; legacy rejected it explicitly.
    if model_dir == "":
        raise ValueError("model_dir should be non-empty, got ''. Pass a path or None.")
    from_env = tf_config.get(_MODEL_DIR_KEY)
    if from_env == "":
        raise ValueError(
                "model_dir in TF_CONFIG should be non-empty, got ''. Remove the key or set "
                "a path.")
    if from_env:
        if model_dir and model_dir != from_env:
            raise ValueError(
                    "`model_dir` provided in RunConfig construct, if set, must have the same "
                    "value as the model_dir in TF_CONFIG. model_dir: {}\n"
                    "TF_CONFIG[\"model_dir\"]: {}.\nPass the same directory or drop one."
                    .format(model_dir, from_env))
        logging.legacy_info("Using model_dir in TF_CONFIG: %s", from_env)
    return model_dir or from_env


class ClusterInfo(NamedTuple):
    """What `TF_CONFIG` says about this process's cluster, parsed once by `RunConfig`.

    The one reading of `TF_CONFIG` in the library: `workers.py` builds the multi-worker
    resolver from this instead of reading the environment again, so the estimator's roles
    (task, chief) and the strategy's cluster cannot disagree.
    """

    cluster_spec: tf.train.ClusterSpec
    task_type: str
    task_id: int
    master: str
    evaluation_master: str
    num_ps_replicas: int
    num_worker_replicas: int
    global_id_in_cluster: int | None
    is_chief: bool
    service: dict | None
    rpc_layer: str | None = None


def _validate_task(cluster_spec: tf.train.ClusterSpec, task_env: dict,
                   chief_task_type: str) -> tuple[str, int]:
    """Checks `TF_CONFIG['task']` against the cluster; returns (task_type, task_id)."""
    # With workers only (MultiWorkerMirroredStrategy) worker 0 leads; there is no chief job.
    if chief_task_type != TaskType.WORKER and chief_task_type not in cluster_spec.jobs:
        raise ValueError(
                'If "cluster" is set in TF_CONFIG, it must have one "{}" node. Got jobs {}.'
                .format(chief_task_type, sorted(cluster_spec.jobs)))
    if (chief_task_type != TaskType.WORKER
            and len(cluster_spec.job_tasks(chief_task_type)) > 1):
        raise ValueError(
                'The "cluster" in TF_CONFIG must have only one "{}" node, got {}.'
                .format(chief_task_type, cluster_spec.job_tasks(chief_task_type)))
    task_type = task_env.get(_TASK_TYPE_KEY)
    task_id = task_env.get(_TASK_ID_KEY)
    if not task_type and chief_task_type == TaskType.WORKER:
        # Legacy's reading: a cluster of workers only lacks its chief. Here it can also be a
        # MultiWorkerMirroredStrategy cluster, whose tasks must say who they are.
        raise ValueError(
                'If "cluster" is set in TF_CONFIG, it must have one "chief" node. Got jobs {}; '
                'add a "chief" job, or, for a cluster of workers only, this task\'s "task": '
                '{{"type": "worker", "index": ...}}.'.format(sorted(cluster_spec.jobs)))
    if not task_type:
        raise ValueError(
                'If "cluster" is set in TF_CONFIG, task type must be set: add '
                '"task": {"type": ..., "index": ...}.')
    if task_id is None:
        raise ValueError('If "cluster" is set in TF_CONFIG, task index must be set.')
    task_id = int(task_id)
    if task_id < 0:
        raise ValueError("Task index must be non-negative number, got {}.".format(task_id))
    if task_type == TaskType.EVALUATOR:
        return task_type, task_id  # Evaluators live outside the training cluster.
    if task_type not in cluster_spec.jobs:
        raise ValueError(
                "{} is not a valid task_type in the cluster_spec:\n{}\n\nNote that these "
                "values may be coming from the TF_CONFIG environment variable."
                .format(task_type, cluster_spec))
    if task_id >= len(cluster_spec.job_tasks(task_type)):
        raise ValueError(
                "{} is not a valid task_id for task_type {} in the cluster_spec:\n{}\n\n"
                "Note that these values may be coming from the TF_CONFIG environment variable."
                .format(task_id, task_type, cluster_spec))
    return task_type, task_id


def _global_id(cluster_spec: tf.train.ClusterSpec, task_type: str, task_id: int,
               chief_task_type: str) -> int:
    # Legacy numbering: chief first, then other jobs alphabetically, parameter servers last.
    ordered = [chief_task_type] + [
            job for job in sorted(cluster_spec.jobs)
            if job not in (chief_task_type, TaskType.PS)]
    if TaskType.PS in cluster_spec.jobs:
        ordered.append(TaskType.PS)
    offset = 0
    for job in ordered:
        if job == task_type:
            return offset + task_id
        offset += len(cluster_spec.job_tasks(job))
    raise RuntimeError("Internal error: task_type {!r} is not in cluster_spec {}."
                       .format(task_type, cluster_spec))


def cluster_info(tf_config: dict) -> ClusterInfo:
    """Derives the cluster properties of a RunConfig from a parsed TF_CONFIG."""
    service = tf_config.get(_SERVICE_KEY)
    if service is not None and not isinstance(service, dict):
        raise TypeError(
                'If "service" is set in TF_CONFIG, it must be a dict. Given {}.'
                .format(type(service).__name__))
    cluster_spec = tf.train.ClusterSpec(tf_config.get(_CLUSTER_KEY) or {})
    task_env = tf_config.get(_TASK_KEY) or {}

    if not cluster_spec.jobs:
        task_type = task_env.get(_TASK_TYPE_KEY, TaskType.WORKER)
        task_id = int(task_env.get(_TASK_ID_KEY, 0))
        if task_type != TaskType.WORKER:
            raise ValueError(
                    'If "cluster" is not set in TF_CONFIG, task type must be WORKER, got {!r}.'
                    .format(task_type))
        if task_id != 0:
            raise ValueError(
                    'If "cluster" is not set in TF_CONFIG, task index must be 0, got {}.'
                    .format(task_id))
        return ClusterInfo(
                cluster_spec=cluster_spec, task_type=task_type, task_id=task_id,
                master=tf_config.get(_SESSION_MASTER_KEY, _LOCAL_MASTER),
                evaluation_master=tf_config.get(_EVAL_SESSION_MASTER_KEY, _LOCAL_MASTER),
                num_ps_replicas=0, num_worker_replicas=1, global_id_in_cluster=0,
                is_chief=True, service=service,
                rpc_layer=tf_config.get(_RPC_LAYER_KEY))

    uses_master_job = TaskType.MASTER in cluster_spec.jobs
    if uses_master_job and TaskType.CHIEF in cluster_spec.jobs:
        raise ValueError(
                "If `master` node exists in `cluster`, job `chief` is not supported. "
                "Keep only one of them in TF_CONFIG.")
    chief_task_type = TaskType.MASTER if uses_master_job else TaskType.CHIEF
    if (not uses_master_job and TaskType.CHIEF not in cluster_spec.jobs
            and TaskType.PS not in cluster_spec.jobs and TaskType.WORKER in cluster_spec.jobs):
        # The usual MultiWorkerMirroredStrategy TF_CONFIG lists workers only; worker 0 is
        # its chief. Legacy accepted this layout only with a `train_distribute` (through the
        # distribute coordinator); here the strategy comes from the cluster itself.
        chief_task_type = TaskType.WORKER
    task_type, task_id = _validate_task(cluster_spec, task_env, chief_task_type)

    if task_type == TaskType.EVALUATOR:
        if uses_master_job:
            raise ValueError(
                    "If `master` node exists in `cluster`, task_type `evaluator` is not "
                    "supported.")
        return ClusterInfo(
                cluster_spec=tf.train.ClusterSpec({}), task_type=task_type, task_id=task_id,
                master=_LOCAL_MASTER,
                evaluation_master=tf_config.get(_EVAL_SESSION_MASTER_KEY, _LOCAL_MASTER),
                num_ps_replicas=0, num_worker_replicas=0, global_id_in_cluster=None,
                is_chief=False, service=service,
                rpc_layer=tf_config.get(_RPC_LAYER_KEY))

    if _SESSION_MASTER_KEY in tf_config:
        master = tf_config[_SESSION_MASTER_KEY]
    elif len(cluster_spec.jobs) == 1 and cluster_spec.num_tasks(cluster_spec.jobs[0]) == 1:
        master = _LOCAL_MASTER  # A one-node cluster is faster without the RPC layer.
    else:
        master = _GRPC_SCHEME + cluster_spec.task_address(task_type, task_id)
    jobs = cluster_spec.as_dict()
    return ClusterInfo(
            cluster_spec=cluster_spec, task_type=task_type, task_id=task_id, master=master,
            evaluation_master=_LOCAL_MASTER,
            num_ps_replicas=len(jobs.get(TaskType.PS, [])),
            num_worker_replicas=(len(jobs.get(TaskType.WORKER, []))
                                 + (len(jobs.get(chief_task_type, []))
                                    if chief_task_type != TaskType.WORKER else 0)),
            global_id_in_cluster=_global_id(cluster_spec, task_type, task_id,
                                            chief_task_type),
            is_chief=task_type == chief_task_type and (
                chief_task_type != TaskType.WORKER or task_id == 0), service=service,
            rpc_layer=tf_config.get(_RPC_LAYER_KEY))
