"""Legacy batch sizes and `params['context']`: what input_fn and model_fn are told.

Owns the legacy batch-size rules (`params['batch_size']` per `InputPipelineConfig`), the
legacy `params['context']` object (`TPUContext`) and how `params` is copied and set. It knows
nothing of datasets, strategies or model_fns.

The rules, for a global batch B, R replicas and H hosts (legacy `tpu_context.py`):

| pipeline      | input_fn gets | called      | model_fn gets |
|---------------|---------------|-------------|---------------|
| PER_HOST_V1   | B / H         | per host    | B / R         |
| PER_HOST_V2   | B / R         | per host    | B / R         |
| PER_SHARD_V1  | B / R         | per replica | B / R         |
| BROADCAST     | B             | per host    | B             |
| `use_tpu=False` on one replica | B | once     | B             |

PER_HOST_V1 batches are split into R/H consecutive slices, replica i taking slice i, as the
TPU infeed did (`distribute.py`). PER_SHARD_V1 is served by one pipeline per host whose
batches are per replica, which is what a per-core input_fn produced.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from typing import Any, Callable, Iterator

import tensorflow as tf

from tpu_estimator_compat.cluster import tpu_resolver
from tpu_estimator_compat.spec import ModeKeys
from tpu_estimator_compat.tpu_config import InputPipelineConfig

BATCH_SIZE_KEY = "batch_size"
CONTEXT_KEY = "context"
USE_TPU_KEY = "use_tpu"


def copy_params(params: Any) -> Any:
    """A deep copy of the user's `params`, keeping its type, as legacy Estimator made.

    Legacy kept `copy.deepcopy(params)`: a dict subclass (an attribute-access config such as
    tensorflow/tpu QANet's `utils.Config`) or an `HParams` reached model_fn and input_fn as
    that type, so `params.dataset.train_batch_size` worked there.
    """
    return {} if params is None else copy.deepcopy(params)


def set_param(params: Any, key: str, value: Any) -> None:
    """Sets `params[key]` the way legacy TPUEstimator did: HParams through their own API.

    A dict (subclass) is tested first: legacy asked `hasattr(params, 'set_hparam')`, which an
    attribute-access dict whose `__getattr__` is `dict.__getitem__` (QANet's `Config`)
    answers with a KeyError on Python 3 (Python 2's `hasattr`, which these scripts were
    written for, swallowed it and took the dict branch).
    """
    if not isinstance(params, dict) and hasattr(params, "set_hparam"):
        if key in params:
            params.set_hparam(key, value)
        else:
            params.add_hparam(key, value)
    else:
        params[key] = value


LOCAL_HOST = "/job:localhost/replica:0/task:0/device:CPU:0"


@dataclasses.dataclass(frozen=True)
class BatchPlan:
    """Batch sizes for one mode, derived once from the legacy rules."""

    global_batch_size: int | None
    for_input_fn: int | None
    for_model_fn: int | None
    pipeline: int
    num_replicas: int
    num_hosts: int
    rebatch_to: int | None  # PER_HOST_V1: split each host batch into per-replica batches.
    # Legacy plain `Estimator`'s calling convention: input_fn and model_fn get `params` only
    # when they take it, with no batch_size/use_tpu/context keys (TPUEstimator required it).
    plain: bool = False


def plan_batches(*, global_batch_size: int | None, batch_name: str, num_replicas: int,
                 num_hosts: int, pipeline: int, use_tpu: bool) -> BatchPlan:
    """Applies the legacy batch-size rules, validating divisibility first.

    Args:
      global_batch_size: `train_batch_size` / `eval_batch_size` / `predict_batch_size`.
      batch_name: the constructor argument's name, for error messages.
      num_replicas: replicas in sync on the chosen strategy.
      num_hosts: input pipelines (workers).
      pipeline: an `InputPipelineConfig` value.
      use_tpu: legacy `use_tpu`; with one replica and `use_tpu=False` input_fn gets B.
    """
    if global_batch_size is None:
        return BatchPlan(None, None, None, pipeline, num_replicas, num_hosts, None)
    if num_replicas > 1 or use_tpu:
        if global_batch_size % num_replicas:
            raise ValueError(
                f"`{batch_name}` ({global_batch_size}) must be divisible by the number of "
                f"replicas ({num_replicas}). Use a multiple of {num_replicas}. (Legacy: "
                f"batch size {global_batch_size} must be divisible by number of replicas "
                f"{num_replicas}.)")
    per_replica = global_batch_size // num_replicas
    if num_replicas == 1 and not use_tpu:
        return BatchPlan(global_batch_size, global_batch_size, global_batch_size, pipeline,
                         1, num_hosts, None)
    if pipeline == InputPipelineConfig.BROADCAST:
        return BatchPlan(global_batch_size, global_batch_size, global_batch_size, pipeline,
                         num_replicas, num_hosts, None)
    if pipeline == InputPipelineConfig.PER_HOST_V1:
        per_host = global_batch_size // num_hosts
        rebatch = per_replica if per_host != per_replica else None
        return BatchPlan(global_batch_size, per_host, per_replica, pipeline, num_replicas,
                         num_hosts, rebatch)
    return BatchPlan(global_batch_size, per_replica, per_replica, pipeline, num_replicas,
                     num_hosts, None)


class TPUContext:
    """The legacy `params['context']` surface, backed by a `tf.distribute.InputContext`.

    ResNet and BERT input_fns read it to shard files by host:
    `dataset.shard(ctx.num_hosts, ctx.current_host)`. Reading which host this is calls
    `on_host_read`, so the caller knows the input_fn shards by host itself.
    """

    def __init__(self, input_context: tf.distribute.InputContext | None, plan: BatchPlan,
                 mode: str, *, input_device: str | None = None,
                 on_host_read: Callable[[], None] | None = None) -> None:
        self._input_context = input_context
        self._plan = plan
        self._mode = mode
        self._input_device = input_device or LOCAL_HOST
        self._on_host_read = on_host_read

    def _host_read(self) -> None:
        if self._on_host_read is not None:
            self._on_host_read()

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def num_replicas(self) -> int:
        return self._plan.num_replicas

    @property
    def num_hosts(self) -> int:
        return self._plan.num_hosts

    @property
    def current_host(self) -> int:
        """This input_fn call's host, 0..num_hosts-1 (the InputContext's input_pipeline_id)."""
        self._host_read()
        return self._input_context.input_pipeline_id if self._input_context else 0

    @property
    def num_of_replicas_per_host(self) -> int:
        return max(1, self._plan.num_replicas // self._plan.num_hosts)

    @property
    def num_of_cores_per_host(self) -> int:
        return self.num_of_replicas_per_host

    @property
    def input_context(self) -> tf.distribute.InputContext | None:
        self._host_read()
        return self._input_context

    def current_input_fn_deployment(self) -> tuple[str, int, int, int]:
        """(host device, invocation index, total invocations, replicas fed), as legacy.

        input_fn runs once per host here in every pipeline, so the invocation is the host
        (PER_SHARD_V1 included: one call feeds all of a host's replicas, and sharding by
        these numbers keeps hosts disjoint). BROADCAST keeps legacy's (0, 1, all replicas):
        every host must produce the same batches there, so it must not shard by host.
        """
        if self._plan.pipeline == InputPipelineConfig.BROADCAST:
            return self._input_device, 0, 1, self._plan.num_replicas
        return (self._input_device, self.current_host, self.num_hosts,
                self.num_of_replicas_per_host)

    @property
    def device_assignment(self) -> None:
        return None


class InternalTPUContext:
    """What a TPUEstimator tells about its run in a mode: legacy `TPUEstimator._ctx`.

    `with estimator._ctx.with_mode(mode) as ctx:` gives a copy for `mode`, whose
    `master_job` is the job legacy placed TPU computations on: `tpu_job_name` when set, else
    the job of the mode's master (`evaluation_master` in EVAL) in the session config's
    cluster (`cluster/tpu_resolver.master_job`).
    """

    def __init__(self, config: Any, mode: str | None = None) -> None:
        self._config = config
        self._mode = mode

    @contextlib.contextmanager
    def with_mode(self, mode: str) -> Iterator["InternalTPUContext"]:
        yield InternalTPUContext(self._config, mode)

    @property
    def config(self) -> Any:
        return self._config

    @property
    def mode(self) -> str:
        if self._mode is None:
            raise RuntimeError("This TPU context has no mode: use `with ctx.with_mode(mode) "
                               "as ctx:`.")
        return self._mode

    @property
    def master_job(self) -> str | None:
        config = self._config
        if config.tpu_config.tpu_job_name:
            return config.tpu_config.tpu_job_name
        master = config.evaluation_master if self.mode == ModeKeys.EVAL else config.master
        session_config = config.session_config
        return tpu_resolver.master_job(
            master, session_config.cluster_def if session_config is not None else None)
