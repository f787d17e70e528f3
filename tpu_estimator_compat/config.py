"""Legacy configuration objects: `InputPipelineConfig`, `TPUConfig` and `RunConfig`.

This module owns the shape, defaults and validation of the configuration a legacy
`TPUEstimator` user constructs, the little `TF_CONFIG` parsing that fills in the cluster
properties (`task_type`, `task_id`, `is_chief`, ...), and the rule that reconciles the
estimator's `model_dir` argument with `RunConfig.model_dir`. It must not know how the
configuration is used: nothing here builds strategies, runs loops, reads checkpoints or knows
about specs, so it can be imported and validated without touching a device.
"""
from __future__ import annotations

import collections
import copy
import inspect
import json
import numbers
import os
import re
import tempfile
from typing import Any, Callable, NamedTuple

import tensorflow as tf

from tpu_estimator_compat import log as logging

_TF_CONFIG_ENV = "TF_CONFIG"
# Not in legacy: how long a silent peer task is tolerated (see `RunConfig.peer_timeout_secs`);
# the launcher's `--peer_timeout_secs` sets it, so unchanged scripts can choose it too.
PEER_TIMEOUT_ENV = "TPU_ESTIMATOR_COMPAT_PEER_TIMEOUT_SECS"
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

_ALLOWED_CORES_PER_REPLICA = (1, 2, 4, 8, 16, 32, 64, 128)
_VALID_PROTOCOLS = (None, "grpc", "grpc+verbs")

# Sentinel: lets RunConfig tell "the user left this alone" apart from an explicit None, which
# legacy used to disable checkpointing.
_USE_DEFAULT = object()
_DEFAULT_SAVE_CHECKPOINTS_SECS = 600

_SAVE_CKPT_ERR = (
        "`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set. "
        "Got save_checkpoints_steps={!r} and save_checkpoints_secs={!r}; pass only one "
        "of them (set the other to None).")

# Only these may be changed by `RunConfig.replace`; the cluster properties come from
# TF_CONFIG / the ClusterResolver and are fixed at construction time, as in legacy.
_REPLACEABLE_PROPERTIES = (
        "model_dir", "tf_random_seed", "save_summary_steps", "save_checkpoints_steps",
        "save_checkpoints_secs", "session_config", "keep_checkpoint_max",
        "keep_checkpoint_every_n_hours", "log_step_count_steps", "train_distribute",
        "device_fn", "protocol", "eval_distribute", "experimental_distribute",
        "experimental_max_worker_delay_secs", "session_creation_timeout_secs",
        "checkpoint_save_graph_def", "tpu_config", "stop_on_nan_loss", "peer_timeout_secs")


# Attributes that refer to live objects rather than plain settings; see RunConfig.__deepcopy__.
_SHARED_ON_DEEPCOPY = frozenset((
        "_train_distribute", "_eval_distribute", "_experimental_distribute", "_device_fn",
        "_cluster"))


class InputPipelineConfig:
    """How `input_fn` is invoked and its batches spread over replicas.

    The values are the legacy integers because user code stores and compares them directly
    (`per_host_input_for_training=3`), so they must not change.
    """
    PER_SHARD_V1 = 1
    PER_HOST_V1 = 2
    PER_HOST_V2 = 3
    BROADCAST = 4
    SLICED = 5


_VALID_INPUT_PIPELINES = (
        InputPipelineConfig.PER_SHARD_V1, InputPipelineConfig.PER_HOST_V1,
        InputPipelineConfig.PER_HOST_V2, InputPipelineConfig.BROADCAST,
        InputPipelineConfig.SLICED)


class TaskType:
    """Task type names used in `TF_CONFIG`, kept as legacy spelled them."""
    MASTER = "master"
    PS = "ps"
    WORKER = "worker"
    CHIEF = "chief"
    EVALUATOR = "evaluator"


class IterationsPerLoop(NamedTuple):
    """A parsed `iterations_per_loop`: `value` in `unit` ('count' or 'seconds')."""
    value: int
    unit: str


_ITERATIONS_PER_LOOP_RE = re.compile(r"^(?P<value>[1-9][0-9]*)(?P<suffix>[smh]?)$")
_SECONDS_PER_SUFFIX = {"s": 1, "m": 60, "h": 3600}


def parse_iterations_per_loop(iterations_per_loop: int | str) -> IterationsPerLoop:
    """Parses `iterations_per_loop` into a count of steps or a number of seconds.

    Legacy accepted a positive step count or a time budget written `<N>s`, `<N>m` or `<N>h`;
    callers that run the device loop need to know which of the two they got.

    Args:
        iterations_per_loop: A positive int (or digit string), or a string such as '60m'.

    Returns:
        The parsed value; time budgets are converted to seconds.

    Raises:
        ValueError: If the value is neither form.
    """
    text = "" if isinstance(iterations_per_loop, bool) else str(iterations_per_loop)
    match = _ITERATIONS_PER_LOOP_RE.match(text)
    if match is None:
        raise ValueError(
                "Invalid TPUConfig `iterations_per_loop` value: {!r}. Value must be a positive "
                "integer or a time-based value `<N><s|m|h>` where <N> is a positive integer and "
                "`s`, `m`, `h` are seconds, minutes, hours, e.g. `3600s`, `60m`, `1h`."
                .format(iterations_per_loop))
    value = int(match.group("value"))
    suffix = match.group("suffix")
    if not suffix:
        return IterationsPerLoop(value, "count")
    return IterationsPerLoop(value * _SECONDS_PER_SUFFIX[suffix], "seconds")


def _check_positive_integer(value: Any, name: str) -> None:
    """Raises the legacy-worded TypeError/ValueError unless `value` is an int > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
                "TPUConfig `{}` must be int, got {} ({!r}). Pass a positive integer."
                .format(name, type(value).__name__, value))
    if value <= 0:
        raise ValueError(
                "TPUConfig `{}` must be positive, got {}. Pass an integer >= 1."
                .format(name, value))


def _load_tf_config() -> dict:
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


def _peer_timeout_from_env() -> float | None:
    """`TPU_ESTIMATOR_COMPAT_PEER_TIMEOUT_SECS` as a number of seconds, None when unset."""
    raw = os.environ.get(PEER_TIMEOUT_ENV, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(
                f"`{PEER_TIMEOUT_ENV}` environment variable must be a positive number of "
                f"seconds, got {raw!r}. Set e.g. {PEER_TIMEOUT_ENV}=60, or unset it.")
    return value


def _tpu_job_name_from_tf_config() -> str | None:
    service = _load_tf_config().get(_SERVICE_KEY) or {}
    job_name = service.get(_TPU_WORKER_JOB_NAME_KEY) if isinstance(service, dict) else None
    if job_name:
        logging.legacy_info("Load TPU job name from TF_CONFIG: %s", job_name)
    return job_name


class TPUConfig(collections.namedtuple("TPUConfig", [
        "iterations_per_loop",
        "num_shards",
        "num_cores_per_replica",
        "per_host_input_for_training",
        "tpu_job_name",
        "initial_infeed_sleep_secs",
        "input_partition_dims",
        "eval_training_input_configuration",
        "experimental_host_call_every_n_steps",
        "experimental_allow_per_host_v2_parallel_get_next",
        "experimental_feed_hook",
])):
    """TPU-specific settings of a legacy `TPUEstimator` run.

    Stays a namedtuple because legacy user code builds it positionally and derives variants
    with `._replace(...)`. Note that `_replace` skips validation, exactly as it did in legacy.
    `per_host_input_for_training` is stored normalised: `True` becomes `PER_HOST_V1` and
    `False` becomes `PER_SHARD_V1`, so downstream code compares integers only.
    """
    __slots__ = ()

    def __new__(cls,
                iterations_per_loop: int | str = 2,
                num_shards: int | None = None,
                num_cores_per_replica: int | None = None,
                per_host_input_for_training: bool | int = True,
                tpu_job_name: str | None = None,
                initial_infeed_sleep_secs: int | None = None,
                input_partition_dims: list | tuple | None = None,
                eval_training_input_configuration: int = InputPipelineConfig.PER_HOST_V1,
                experimental_host_call_every_n_steps: int = 1,
                experimental_allow_per_host_v2_parallel_get_next: bool = False,
                experimental_feed_hook: Any = None) -> "TPUConfig":
        """Validates and builds the config; see the class docstring for why it is a tuple.

        Raises:
            ValueError: For out-of-range values, with the legacy wording.
            TypeError: For non-integer counts.
        """
        parse_iterations_per_loop(iterations_per_loop)

        if num_shards is not None:
            _check_positive_integer(num_shards, "num_shards")

        if input_partition_dims is not None:
            if (not isinstance(input_partition_dims, (list, tuple))
                    or len(input_partition_dims) not in (1, 2)):
                raise ValueError(
                        "`input_partition_dims` must be a list/tuple with one or two elements "
                        "(partition dims for features, and optionally labels), got {!r}."
                        .format(input_partition_dims))
            if per_host_input_for_training != InputPipelineConfig.PER_HOST_V2 or isinstance(
                    per_host_input_for_training, bool):
                raise ValueError(
                        "`input_partition_dims` is only supported in PER_HOST_V2 mode, but "
                        "`per_host_input_for_training` is {!r}. Set it to "
                        "InputPipelineConfig.PER_HOST_V2.".format(per_host_input_for_training))
            if num_cores_per_replica is None:
                raise ValueError(
                        "`input_partition_dims` requires setting `num_cores_per_replica`; "
                        "set it to the total number of partitions.")

        if num_cores_per_replica is not None and (
                isinstance(num_cores_per_replica, bool)
                or num_cores_per_replica not in _ALLOWED_CORES_PER_REPLICA):
            raise ValueError(
                    "`num_cores_per_replica` must be 1, 2, 4, 8, 16, 32, 64, 128; got {!r}."
                    .format(num_cores_per_replica))

        if eval_training_input_configuration not in (
                InputPipelineConfig.PER_HOST_V1, InputPipelineConfig.SLICED) or isinstance(
                        eval_training_input_configuration, bool):
            raise ValueError(
                    "`eval_training_input_configuration` must be PER_HOST_V1 or SLICED; got {!r}."
                    .format(eval_training_input_configuration))

        if per_host_input_for_training is True:
            per_host_input_for_training = InputPipelineConfig.PER_HOST_V1
        elif per_host_input_for_training is False:
            per_host_input_for_training = InputPipelineConfig.PER_SHARD_V1
        if (not isinstance(per_host_input_for_training, numbers.Integral)
                or per_host_input_for_training not in _VALID_INPUT_PIPELINES):
            raise ValueError(
                    "`per_host_input_for_training` must be True, False or an "
                    "InputPipelineConfig value (1..5), got {!r}."
                    .format(per_host_input_for_training))
        per_host_input_for_training = int(per_host_input_for_training)

        if initial_infeed_sleep_secs:
            _check_positive_integer(initial_infeed_sleep_secs, "initial_infeed_sleep_secs")

        _check_positive_integer(experimental_host_call_every_n_steps,
                                "experimental_host_call_every_n_steps")

        tpu_job_name = tpu_job_name or _tpu_job_name_from_tf_config()

        return super().__new__(
                cls,
                iterations_per_loop=iterations_per_loop,
                num_shards=num_shards,
                num_cores_per_replica=num_cores_per_replica,
                per_host_input_for_training=per_host_input_for_training,
                tpu_job_name=tpu_job_name,
                initial_infeed_sleep_secs=initial_infeed_sleep_secs,
                input_partition_dims=input_partition_dims,
                eval_training_input_configuration=eval_training_input_configuration,
                experimental_host_call_every_n_steps=experimental_host_call_every_n_steps,
                experimental_allow_per_host_v2_parallel_get_next=(
                        experimental_allow_per_host_v2_parallel_get_next),
                experimental_feed_hook=experimental_feed_hook)

    @property
    def parsed_iterations_per_loop(self) -> IterationsPerLoop:
        """`iterations_per_loop` as (value, unit), so loops need not re-parse the string."""
        return parse_iterations_per_loop(self.iterations_per_loop)

    @property
    def training_input_pipeline(self) -> int:
        """The `InputPipelineConfig` value that applies to training."""
        return self.effective_input_pipeline(is_training=True)

    def effective_input_pipeline(self, is_training: bool) -> int:
        """Returns the `InputPipelineConfig` value that governs `input_fn` in a mode.

        Legacy only honoured per-core sharding (PER_SHARD_V1) in training and fell back to
        PER_HOST_V1 otherwise, and `eval_training_input_configuration=SLICED` replaced the
        training setting for evaluation and prediction. Callers should ask here instead of
        re-deriving those rules.

        Args:
            is_training: True for TRAIN, False for EVAL and PREDICT.
        """
        pipeline = self.per_host_input_for_training
        if pipeline is True:  # Only reachable through an unvalidated `_replace`.
            pipeline = InputPipelineConfig.PER_HOST_V1
        elif pipeline is False:
            pipeline = InputPipelineConfig.PER_SHARD_V1
        if is_training:
            return pipeline
        if self.eval_training_input_configuration == InputPipelineConfig.SLICED:
            return InputPipelineConfig.SLICED
        if pipeline == InputPipelineConfig.PER_SHARD_V1:
            return InputPipelineConfig.PER_HOST_V1
        return pipeline


def path_to_str(path: Any) -> Any:
    """Returns `os.PathLike` objects as `str` and anything else unchanged."""
    if isinstance(path, os.PathLike):
        return tf.compat.as_str_any(os.fspath(path))
    return path


def _model_dir_with_tf_config(tf_config: dict, model_dir: str | None) -> str | None:
    """Reconciles the RunConfig `model_dir` argument with `TF_CONFIG['model_dir']`."""
    # '' is falsy and would silently mean "unset"; legacy rejected it explicitly.
    if model_dir == "":
        raise ValueError("`model_dir` should be non-empty, got ''. Pass a path or None.")
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

    The one reading of `TF_CONFIG` in the library: `cluster.py` builds the multi-worker
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


def _cluster_info_from_tf_config(tf_config: dict) -> ClusterInfo:
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


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _device_fn_takes_only_op(device_fn: Any) -> bool:
    if not callable(device_fn):
        return False
    try:
        params = inspect.signature(device_fn).parameters
    except (TypeError, ValueError):
        return False
    return list(params) == ["op"]


def _validate_run_config(config: "RunConfig") -> None:
    """Checks every user-settable property; shared by the constructor and `replace`."""

    def check(name: str, ok: Callable[[Any], bool], requirement: str, fix: str,
              numeric: bool = True) -> None:
        value = getattr(config, "_" + name)
        if value is None:
            return
        if numeric and not _is_number(value):
            raise TypeError("`{}` must be a number, got {} ({!r}). {}"
                            .format(name, type(value).__name__, value, fix))
        if not ok(value):
            raise ValueError("`{}` {}, got {!r}. {}".format(name, requirement, value, fix))

    check("model_dir", lambda v: bool(v), "should be non-empty", "Pass a path or None.",
          numeric=False)
    check("save_summary_steps", lambda v: v >= 0, "should be >= 0",
          "Use 0 to disable summaries.")
    check("save_checkpoints_steps", lambda v: v >= 0, "should be >= 0",
          "Use None to disable step-based checkpoints.")
    check("save_checkpoints_secs", lambda v: v >= 0, "should be >= 0",
          "Use None to disable time-based checkpoints.")
    check("keep_checkpoint_max", lambda v: v >= 0, "should be >= 0",
          "Use 0 or None to keep every checkpoint.")
    check("keep_checkpoint_every_n_hours", lambda v: v > 0, "should be > 0",
          "Use a positive number of hours (the default 10000 disables the feature).")
    check("log_step_count_steps", lambda v: v > 0, "should be > 0",
          "Use a positive step count.")
    check("session_creation_timeout_secs", lambda v: v > 0, "should be > 0",
          "Use a positive number of seconds.")
    check("session_config", lambda v: isinstance(v, tf.compat.v1.ConfigProto),
          "must be instance of ConfigProto", "Pass a tf.compat.v1.ConfigProto or None.",
          numeric=False)
    check("tf_random_seed",
          lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool),
          "must be integer", "Pass an int seed or None.", numeric=False)
    check("experimental_max_worker_delay_secs",
          lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool),
          "must be an integer if set", "Pass an int number of seconds or None.",
          numeric=False)
    check("device_fn", _device_fn_takes_only_op,
          'must be callable with exactly one argument "op"',
          "Define it as `def device_fn(op): ...`.", numeric=False)
    check("protocol", lambda v: v in _VALID_PROTOCOLS, "should be grpc or grpc+verbs",
          "Pass 'grpc', 'grpc+verbs' or None.", numeric=False)
    check("peer_timeout_secs", lambda v: v > 0, "should be > 0",
          "Use a positive number of seconds, or None for the engine's default.")
    check("tpu_config", lambda v: isinstance(v, TPUConfig), "must be a TPUConfig",
          "Pass tpu_estimator_compat.config.TPUConfig(...) or None.", numeric=False)


def _resolve_checkpoint_cadence(steps: Any, secs: Any) -> tuple[Any, Any]:
    """Applies the legacy default: 600 seconds, unless the user chose either form."""
    if steps is _USE_DEFAULT and secs is _USE_DEFAULT:
        return None, _DEFAULT_SAVE_CHECKPOINTS_SECS
    if secs is _USE_DEFAULT:
        return steps, None
    if steps is _USE_DEFAULT:
        return None, secs
    if steps is not None and secs is not None:
        raise ValueError(_SAVE_CKPT_ERR.format(steps, secs))
    return steps, secs


class RunConfig:
    """Run settings of a legacy `TPUEstimator`: the Estimator RunConfig plus the TPU extras.

    Built once and then read through properties, because legacy model code reads fields such
    as `config.model_dir` or `config.tpu_config.iterations_per_loop` and expects them not to
    change under it. Derive variants with `replace`.
    """

    def __init__(self,
                 tpu_config: TPUConfig | None = None,
                 evaluation_master: str | None = None,
                 master: str | None = None,
                 cluster: Any = None,
                 model_dir: str | os.PathLike | None = None,
                 tf_random_seed: int | None = None,
                 save_summary_steps: int | None = 100,
                 save_checkpoints_steps: Any = _USE_DEFAULT,
                 save_checkpoints_secs: Any = _USE_DEFAULT,
                 session_config: tf.compat.v1.ConfigProto | None = None,
                 keep_checkpoint_max: int | None = 5,
                 keep_checkpoint_every_n_hours: float | None = 10000,
                 log_step_count_steps: int | None = 100,
                 train_distribute: tf.distribute.Strategy | None = None,
                 device_fn: Callable[[Any], str] | None = None,
                 protocol: str | None = None,
                 eval_distribute: tf.distribute.Strategy | None = None,
                 experimental_distribute: Any = None,
                 experimental_max_worker_delay_secs: int | None = None,
                 session_creation_timeout_secs: int | None = 7200,
                 checkpoint_save_graph_def: bool = True,
                 stop_on_nan_loss: bool = True,
                 peer_timeout_secs: float | None = None) -> None:
        """Validates the arguments and reads cluster properties from `TF_CONFIG`.

        Args:
            tpu_config: TPU settings; defaults to `TPUConfig()`.
            evaluation_master: Master address for evaluation; defaults to `master` unless
                TF_CONFIG says this task is an evaluator.
            master: Master address for training. Mutually exclusive with `cluster`.
            cluster: A `tf.distribute.cluster_resolver.ClusterResolver` supplying the master
                address and cluster spec.
            model_dir: Where checkpoints and summaries go; may also come from TF_CONFIG.
            save_checkpoints_steps: Checkpoint every N steps. Exclusive with
                `save_checkpoints_secs`; when neither is given, checkpoints every 600 s.
            stop_on_nan_loss: Not in legacy: stop training with an error naming the global
                step when a step's loss is NaN or Inf (legacy needed a NanTensorHook). On by
                default; False trains on, as legacy did without the hook.
            **others: As in the legacy Estimator `RunConfig`; stored and validated.

        Raises:
            ValueError: On invalid values or when both `master` and `cluster` are set.
            TypeError: On wrongly typed numeric values.
        """
        save_checkpoints_steps, save_checkpoints_secs = _resolve_checkpoint_cadence(
                save_checkpoints_steps, save_checkpoints_secs)
        tf_config = _load_tf_config()
        if tf_config:
            logging.legacy_info("TF_CONFIG environment variable: %s", tf_config)

        self._model_dir = _model_dir_with_tf_config(tf_config, path_to_str(model_dir))
        self._tf_random_seed = tf_random_seed
        self._save_summary_steps = save_summary_steps
        self._save_checkpoints_steps = save_checkpoints_steps
        self._save_checkpoints_secs = save_checkpoints_secs
        self._session_config = session_config
        self._keep_checkpoint_max = keep_checkpoint_max
        self._keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self._log_step_count_steps = log_step_count_steps
        self._train_distribute = train_distribute
        self._device_fn = device_fn
        self._protocol = protocol
        self._eval_distribute = eval_distribute
        self._experimental_distribute = experimental_distribute
        self._experimental_max_worker_delay_secs = experimental_max_worker_delay_secs
        self._session_creation_timeout_secs = session_creation_timeout_secs
        self._checkpoint_save_graph_def = checkpoint_save_graph_def
        if not isinstance(stop_on_nan_loss, bool):
            raise TypeError(f"`stop_on_nan_loss` must be True or False, got "
                            f"{stop_on_nan_loss!r}.")
        self._stop_on_nan_loss = stop_on_nan_loss
        self._peer_timeout_secs = (_peer_timeout_from_env() if peer_timeout_secs is None
                                   else peer_timeout_secs)
        self._tpu_config = TPUConfig() if tpu_config is None else tpu_config
        _validate_run_config(self)

        info = _cluster_info_from_tf_config(tf_config)
        self._cluster_info = info
        self._cluster_spec = info.cluster_spec
        self._task_type = info.task_type
        self._task_id = info.task_id
        self._master = info.master
        self._evaluation_master = info.evaluation_master
        self._num_ps_replicas = info.num_ps_replicas
        self._num_worker_replicas = info.num_worker_replicas
        self._global_id_in_cluster = info.global_id_in_cluster
        self._is_chief = info.is_chief
        self._service = info.service

        self._cluster = cluster
        if master is not None:  # An explicit '' counts: it asks for the local master.
            if cluster is not None:
                raise ValueError(
                        "Both master and cluster are set: `master`={!r}, `cluster`={!r}. Pass "
                        "only one; the ClusterResolver already supplies the master address."
                        .format(master, cluster))
            self._master = master
        elif cluster:
            self._master = cluster.master()

        if evaluation_master is not None:
            self._evaluation_master = evaluation_master
        elif not self._evaluation_master and self._task_type != TaskType.EVALUATOR:
            # Without a cluster manager, evaluating against the training master is what the
            # user almost always wants; an evaluator task keeps what TF_CONFIG said.
            self._evaluation_master = self._master

        if cluster:
            self._cluster_spec = cluster.cluster_spec()
            if self._session_config is None:
                session_config = tf.compat.v1.ConfigProto(
                        allow_soft_placement=True, isolate_session_state=True)
            else:
                # Copy so the caller's proto is not mutated behind their back.
                session_config = copy.deepcopy(self._session_config)
                if session_config.HasField("cluster_def"):
                    raise ValueError(
                            "You cannot provide a ClusterResolver and "
                            "session_config.cluster_def. Drop `session_config.cluster_def` or "
                            "`cluster`.")
            if self._cluster_spec:
                session_config.cluster_def.CopyFrom(self._cluster_spec.as_cluster_def())
            self._session_config = session_config

    def replace(self, **kwargs: Any) -> "RunConfig":
        """Returns a copy with some user-settable properties changed, leaving `self` intact.

        Cluster properties (master, task, ...) are not replaceable: they describe where this
        process runs, not how the user wants it to run. Setting one of the two checkpoint
        cadences clears the other so a single `replace` can switch between them.

        Raises:
            ValueError: For unknown or non-replaceable names, both checkpoint cadences set,
                or invalid values.
        """
        for key in kwargs:
            if key not in _REPLACEABLE_PROPERTIES:
                raise ValueError(
                        "Replacing {} is not supported. Allowed properties are {}."
                        .format(key, list(_REPLACEABLE_PROPERTIES)))
        # The new values of the changed fields, decided first and set on the copy last.
        fields: dict[str, Any] = {}
        if self.session_config is not None:
            fields["session_config"] = copy.deepcopy(self.session_config)
        for key, value in kwargs.items():
            if key == "model_dir":
                value = path_to_str(value)
            elif key == "tpu_config" and value is None:
                value = TPUConfig()
            fields[key] = value

        steps = fields.get("save_checkpoints_steps", self.save_checkpoints_steps)
        secs = fields.get("save_checkpoints_secs", self.save_checkpoints_secs)
        steps_given = "save_checkpoints_steps" in kwargs
        secs_given = "save_checkpoints_secs" in kwargs
        if steps_given and secs_given:
            if steps is not None and secs is not None:
                raise ValueError(_SAVE_CKPT_ERR.format(steps, secs))
        elif steps_given and steps is not None:
            fields["save_checkpoints_secs"] = None
        elif secs_given and secs is not None:
            fields["save_checkpoints_steps"] = None
        new = copy.copy(self)
        for key, value in fields.items():
            setattr(new, "_" + key, value)  # A RunConfig field behind its read-only property.
        _validate_run_config(new)
        return new

    def __deepcopy__(self, memo: dict) -> "RunConfig":
        """Deep-copies the settings but shares live runtime handles.

        Legacy estimators hand `model_fn` a deep copy of the config so user code cannot mutate
        the estimator's own. Strategies, cluster resolvers and user callables are handles to
        live runtime state, not settings: copying them would silently create a second
        strategy, so the copy refers to the same objects.
        """
        new = copy.copy(self)
        memo[id(self)] = new
        for name, value in vars(self).items():
            if name not in _SHARED_ON_DEEPCOPY:
                setattr(new, name, copy.deepcopy(value, memo))
        return new

    def __repr__(self) -> str:
        return ("RunConfig(model_dir={!r}, save_checkpoints_steps={!r}, "
                "save_checkpoints_secs={!r}, tpu_config={!r}, master={!r}, task_type={!r}, "
                "task_id={!r})".format(self._model_dir, self._save_checkpoints_steps,
                                       self._save_checkpoints_secs, self._tpu_config,
                                       self._master, self._task_type, self._task_id))

    # Read-only properties: legacy code reads these directly.

    @property
    def model_dir(self) -> str | None:
        return self._model_dir

    @property
    def tf_random_seed(self) -> int | None:
        return self._tf_random_seed

    @property
    def save_summary_steps(self) -> int | None:
        return self._save_summary_steps

    @property
    def save_checkpoints_steps(self) -> int | None:
        return self._save_checkpoints_steps

    @property
    def save_checkpoints_secs(self) -> int | None:
        return self._save_checkpoints_secs

    @property
    def session_config(self) -> tf.compat.v1.ConfigProto | None:
        return self._session_config

    @property
    def keep_checkpoint_max(self) -> int | None:
        return self._keep_checkpoint_max

    @property
    def keep_checkpoint_every_n_hours(self) -> float | None:
        return self._keep_checkpoint_every_n_hours

    @property
    def log_step_count_steps(self) -> int | None:
        return self._log_step_count_steps

    @property
    def train_distribute(self) -> tf.distribute.Strategy | None:
        return self._train_distribute

    @property
    def eval_distribute(self) -> tf.distribute.Strategy | None:
        return self._eval_distribute

    @property
    def experimental_distribute(self) -> Any:
        return self._experimental_distribute

    @property
    def device_fn(self) -> Callable[[Any], str] | None:
        return self._device_fn

    @property
    def protocol(self) -> str | None:
        return self._protocol

    @property
    def experimental_max_worker_delay_secs(self) -> int | None:
        return self._experimental_max_worker_delay_secs

    @property
    def session_creation_timeout_secs(self) -> int | None:
        return self._session_creation_timeout_secs

    @property
    def checkpoint_save_graph_def(self) -> bool:
        return self._checkpoint_save_graph_def

    @property
    def stop_on_nan_loss(self) -> bool:
        return self._stop_on_nan_loss

    @property
    def peer_timeout_secs(self) -> float | None:
        """Not in legacy: seconds a silent peer task is tolerated on a cluster (None: the
        engine's default)."""
        return self._peer_timeout_secs

    @property
    def cluster_spec(self) -> tf.train.ClusterSpec:
        return self._cluster_spec

    @property
    def task_type(self) -> str:
        return self._task_type

    @property
    def task_id(self) -> int:
        return self._task_id

    @property
    def is_chief(self) -> bool:
        return self._is_chief

    @property
    def master(self) -> str:
        return self._master

    @property
    def evaluation_master(self) -> str:
        return self._evaluation_master

    @property
    def num_ps_replicas(self) -> int:
        return self._num_ps_replicas

    @property
    def num_worker_replicas(self) -> int:
        return self._num_worker_replicas

    @property
    def global_id_in_cluster(self) -> int | None:
        return self._global_id_in_cluster

    @property
    def service(self) -> dict | None:
        return self._service

    @property
    def tpu_config(self) -> TPUConfig:
        return self._tpu_config

    @property
    def cluster(self) -> Any:
        return self._cluster

    @property
    def cluster_info(self) -> ClusterInfo:
        """Not in legacy: `TF_CONFIG` as parsed at construction (see `ClusterInfo`)."""
        return self._cluster_info


def validate_model_dir(constructor_model_dir: str | os.PathLike | None,
                       config: RunConfig | None) -> str:
    """Returns the model directory a TPUEstimator should use.

    The estimator accepts `model_dir` both directly and through `config`; legacy refused
    conflicting values rather than silently picking one, and fell back to a fresh temporary
    directory (with a warning) when neither was given so that quick experiments still run.

    Args:
        constructor_model_dir: The `model_dir` passed to the estimator constructor.
        config: The estimator's RunConfig, or None.

    Returns:
        The effective model directory.

    Raises:
        ValueError: If both are set and differ, or `config` is not a RunConfig.
    """
    if config is not None and not isinstance(config, RunConfig):
        raise ValueError(
                "config must be an instance of `RunConfig`, but provided {!r}. Pass "
                "tpu_estimator_compat.config.RunConfig(...).".format(config))
    constructor_model_dir = path_to_str(constructor_model_dir)
    config_model_dir = config.model_dir if config is not None else None
    if (constructor_model_dir is not None and config_model_dir is not None
            and constructor_model_dir != config_model_dir):
        raise ValueError(
                "`model_dir` are set both in constructor and `RunConfig`, but with different "
                "values. In constructor: '{}', in `RunConfig`: '{}'. Set it in one place only."
                .format(constructor_model_dir, config_model_dir))
    if constructor_model_dir:
        return constructor_model_dir
    if config_model_dir:
        return config_model_dir
    model_dir = tempfile.mkdtemp()
    logging.legacy_warning("Using temporary folder as model directory: %s", model_dir)
    return model_dir
