"""Legacy run configuration: `EstimatorRunConfig` (`tf.estimator.RunConfig`) and `RunConfig`
(`tf.estimator.tpu.RunConfig`; its TPU part, `TPUConfig`, is `tpu_config.py`'s).

This module owns the shape, defaults and validation of the `RunConfig` a legacy
`Estimator` or `TPUEstimator` user constructs, the cluster properties (`task_type`, `task_id`, `is_chief`,
...) it fills in from `TF_CONFIG` as parsed by `cluster/tf_config.py`, and the rule that
reconciles the estimator's `model_dir` argument with `RunConfig.model_dir`. It must not know
how the configuration is used: nothing here builds strategies, runs loops, reads checkpoints
or knows about specs, so it can be imported and validated without touching a device.
"""
from __future__ import annotations

import copy
import inspect
import numbers
import os
import tempfile
from typing import Any, Callable

import tensorflow as tf

from tpu_estimator_compat import log as logging

from tpu_estimator_compat.cluster import coordinator as coordinator_lib
from tpu_estimator_compat.cluster import tf_config as tf_config_lib
from tpu_estimator_compat.cluster.tf_config import ClusterInfo, TaskType
# `tpu_estimator_compat.config.TPUConfig` is where RunConfig's errors send users.
from tpu_estimator_compat.tpu_config import TPUConfig

# Not in legacy: how long a silent peer task is tolerated (see `RunConfig.peer_timeout_secs`);
# the launcher's `--peer_timeout_secs` sets it, so unchanged scripts can choose it too.
PEER_TIMEOUT_ENV = "TPU_ESTIMATOR_COMPAT_PEER_TIMEOUT_SECS"

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


def path_to_str(path: Any) -> Any:
    """Returns `os.PathLike` objects as `str` and anything else unchanged."""
    if isinstance(path, os.PathLike):
        return tf.compat.as_str_any(os.fspath(path))
    return path


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
            raise TypeError("{} must be a number, got {} ({!r}). {}"
                            .format(name, type(value).__name__, value, fix))
        if not ok(value):  # Legacy's words ("model_dir should be non-empty"), then ours.
            raise ValueError("{} {}, got {!r}. {}".format(name, requirement, value, fix))

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


def _check_strategy_compatibility(train_distribute: Any, eval_distribute: Any) -> None:
    """Legacy refused TF2's ParameterServerStrategy object for an Estimator."""
    v2_pss = tf.distribute.experimental.ParameterServerStrategy
    for name, strategy in (("train_distribute", train_distribute),
                           ("eval_distribute", eval_distribute)):
        if strategy is not None and type(strategy) is v2_pss:  # pylint: disable=unidiomatic-typecheck
            raise ValueError(
                    "Please use `tf.compat.v1.distribute.experimental.ParameterServerStrategy` "
                    "for parameter server strategy with estimator (got it as `{}`). Or pass "
                    "no {}: under a TF_CONFIG cluster with ps tasks the estimator trains on "
                    "ParameterServerStrategy by itself.".format(name, name))


def _distributed_session_config(task_type: str, task_id: int) -> Any:
    """Legacy's session config for a TF_CONFIG cluster (RunConfig's
    `_get_default_session_config_distributed`): the device filters that let a chief, master or
    worker see only the parameter servers and itself; None for other tasks."""
    filters = {TaskType.MASTER: ["/job:ps", "/job:master"],
               TaskType.CHIEF: ["/job:ps", "/job:chief"],
               TaskType.WORKER: ["/job:ps", "/job:worker/task:%d" % task_id],
               TaskType.PS: ["/job:ps", "/job:worker", "/job:chief", "/job:master"]}
    if task_type not in filters:
        return None
    session_config = default_session_config()
    session_config.device_filters.extend(filters[task_type])
    return session_config


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


def _session_config_for_cluster(
        given: tf.compat.v1.ConfigProto | None,
        cluster_spec: tf.train.ClusterSpec) -> tf.compat.v1.ConfigProto:
    """The session config of a RunConfig built with a ClusterResolver: `given` (copied, so
    the caller's proto is not mutated behind their back) or legacy's default, holding the
    cluster's definition."""
    if given is None:
        session_config = tf.compat.v1.ConfigProto(
                allow_soft_placement=True, isolate_session_state=True)
    else:
        session_config = copy.deepcopy(given)
        if session_config.HasField("cluster_def"):
            raise ValueError(
                    "You cannot provide a ClusterResolver and "
                    "session_config.cluster_def. Drop `session_config.cluster_def` or "
                    "`cluster`.")
    if cluster_spec:
        session_config.cluster_def.CopyFrom(cluster_spec.as_cluster_def())
    return session_config


class EstimatorRunConfig:
    """Run settings of a legacy `Estimator` (`tf.estimator.RunConfig`); `RunConfig` below is
    `TPUEstimator`'s, which legacy derived from it.

    Built once and then read through properties, because legacy model code reads fields such
    as `config.model_dir` or `config.tpu_config.iterations_per_loop` and expects them not to
    change under it. Derive variants with `replace`. It takes the TPU arguments too (one
    implementation); the two differ where legacy's did, under a TF_CONFIG cluster:
    `evaluation_master` stays TF_CONFIG's (`''`) here and falls back to `master` for
    TPUEstimator's, and only this one gives a chief, master, worker or ps task legacy's
    between-graph `session_config` device filters (TPUEstimator ran in-graph).
    """

    # TPUEstimator's RunConfig (legacy tpu_config.RunConfig) sets this.
    _TPU_RUN_CONFIG = False

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
        tf_config = tf_config_lib.load()
        if tf_config:
            logging.legacy_info("TF_CONFIG environment variable: %s", tf_config)

        self._model_dir = tf_config_lib.model_dir(tf_config, path_to_str(model_dir))
        self._tf_random_seed = tf_random_seed
        self._save_summary_steps = save_summary_steps
        self._save_checkpoints_steps = save_checkpoints_steps
        self._save_checkpoints_secs = save_checkpoints_secs
        self._session_config = session_config
        self._keep_checkpoint_max = keep_checkpoint_max
        self._keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self._log_step_count_steps = log_step_count_steps
        self._train_distribute, self._eval_distribute = coordinator_lib.merged_distribute(
                train_distribute, eval_distribute, experimental_distribute)
        self._device_fn = device_fn
        self._protocol = protocol
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
        _check_strategy_compatibility(train_distribute, eval_distribute)
        self._init_cluster(tf_config, cluster, master, evaluation_master, (
                coordinator_lib.reads_coordinator(train_distribute, eval_distribute,
                                                  experimental_distribute)))

    def _init_cluster(self, tf_config: dict, cluster: Any, master: str | None,
                      evaluation_master: str | None, coordinated: bool) -> None:
        if coordinated:  # A strategy: legacy's distribute coordinator path.
            logging.legacy_info("Initializing RunConfig with distribution strategies.")
            self._init_distribute_coordinator(tf_config, cluster, master, evaluation_master)
        else:
            self._set_cluster(tf_config_lib.cluster_info(tf_config), cluster, master,
                              evaluation_master)

    def _init_distribute_coordinator(self, tf_config: dict, cluster: Any = None,
                                     master: str | None = None,
                                     evaluation_master: str | None = None) -> None:
        """The cluster properties of a RunConfig given a distribution strategy, and legacy's
        `_distribute_coordinator_mode` (`cluster/coordinator.py`).

        Legacy left the cluster properties local in the coordinator's modes (its coordinator
        set them per task when training started) and kept only the cluster spec: TF_CONFIG's,
        or `DistributeConfig.remote_cluster`. No coordinator runs here, so a TF_CONFIG that
        names this task gives its properties at once, as legacy's coordinator gave model_fn
        (and `train_and_evaluate` its task); one naming no task leaves them local, as legacy.
        """
        remote = getattr(self._experimental_distribute, "remote_cluster", None)
        mode = coordinator_lib.coordinator_mode(tf_config, bool(self._train_distribute), remote)
        self._distribute_coordinator_mode = mode
        local = mode == coordinator_lib.CoordinatorMode.STANDALONE_CLIENT or (
                mode is not None and not tf_config.get("task"))
        self._set_cluster(tf_config_lib.cluster_info({} if local else tf_config), cluster,
                          master, evaluation_master)
        if mode is not None:
            self._cluster_spec = tf.train.ClusterSpec(remote or tf_config["cluster"])
            logging.legacy_info("RunConfig initialized for Distribute Coordinator with %s mode",
                                mode.upper())
        else:
            logging.legacy_info("Not using Distribute Coordinator.")

    def _set_cluster(self, info: ClusterInfo, cluster: Any, master: str | None,
                     evaluation_master: str | None) -> None:
        """The cluster properties: `TF_CONFIG`'s, then the ClusterResolver's, then the
        explicit `master`/`evaluation_master`."""
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
        elif (self._TPU_RUN_CONFIG and not self._evaluation_master
              and self._task_type != TaskType.EVALUATOR):
            # Without a cluster manager, evaluating against the training master is what the
            # user almost always wants; an evaluator task keeps what TF_CONFIG said.
            self._evaluation_master = self._master

        if cluster:
            self._cluster_spec = cluster.cluster_spec()
            self._session_config = _session_config_for_cluster(self._session_config,
                                                               self._cluster_spec)
        if (not self._TPU_RUN_CONFIG and self._session_config is None and self._cluster_spec
                and {TaskType.CHIEF, TaskType.MASTER} & set(self._cluster_spec.jobs)
                and not (self._train_distribute or self._eval_distribute
                         or self._experimental_distribute)):
            # Legacy's between-graph default; a distribution strategy set its own instead.
            self._session_config = _distributed_session_config(self._task_type,
                                                               self._task_id)

    def replace(self, **kwargs: Any) -> "EstimatorRunConfig":
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

    def __deepcopy__(self, memo: dict) -> "EstimatorRunConfig":
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
        return ("{}(model_dir={!r}, save_checkpoints_steps={!r}, "
                "save_checkpoints_secs={!r}, tpu_config={!r}, master={!r}, task_type={!r}, "
                "task_id={!r})".format(type(self).__name__, self._model_dir, self._save_checkpoints_steps,
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


class RunConfig(EstimatorRunConfig):
    """Run settings of a legacy `TPUEstimator` (`tf.estimator.tpu.RunConfig`): the Estimator
    RunConfig plus the TPU extras, `evaluation_master` defaulting to `master` (as a user
    without a cluster manager wants) and no between-graph device filters."""

    _TPU_RUN_CONFIG = True


def validate_model_dir(constructor_model_dir: str | os.PathLike | None,
                       config: EstimatorRunConfig | None) -> str:
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
    if config is not None and not isinstance(config, EstimatorRunConfig):
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


# RunConfig's attributes in the order legacy's `vars(config)` listed them, as its
# Estimator printed them in `Using config: {...}` (run_config.py set them in this order).
_LEGACY_CONFIG_KEYS = (
        "_model_dir", "_tf_random_seed", "_save_summary_steps", "_save_checkpoints_steps",
        "_save_checkpoints_secs", "_session_config", "_keep_checkpoint_max",
        "_keep_checkpoint_every_n_hours", "_log_step_count_steps", "_train_distribute",
        "_device_fn", "_protocol", "_eval_distribute", "_experimental_distribute",
        "_experimental_max_worker_delay_secs", "_session_creation_timeout_secs",
        "_checkpoint_save_graph_def", "_service", "_cluster_spec", "_task_type", "_task_id",
        "_global_id_in_cluster", "_master", "_evaluation_master", "_is_chief",
        "_num_ps_replicas", "_num_worker_replicas", "_tpu_config", "_cluster")


def legacy_config_str(config: RunConfig) -> str:
    """`str(vars(config))` as legacy TPUEstimator logged it in `Using config: ...`.

    Legacy's keys in legacy's order (this RunConfig's own additions left out), the session
    config legacy's RunConfig made when none was given (soft placement, one meta-optimizer
    pass), and `_log_step_count_steps` None: TPUEstimator cleared it, logging steps with
    hooks of its own.
    """
    values = dict(vars(config), _log_step_count_steps=None)
    if values.get("_session_config") is None:
        values["_session_config"] = default_session_config()
    return str({key: values.get(key) for key in _LEGACY_CONFIG_KEYS})


def default_session_config() -> tf.compat.v1.ConfigProto:
    """The session config legacy's Estimator put in a RunConfig that had none: soft
    placement, one meta-optimizer pass (legacy `run_config.get_default_session_config`)."""
    session_config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
    session_config.graph_options.rewrite_options.meta_optimizer_iterations = 1  # ONE
    return session_config
