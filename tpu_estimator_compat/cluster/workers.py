"""The cluster a job runs on: its workers, its chief, and the process's multi-worker strategy.

Synopsis::

    resolver = cluster.multi_worker_resolver(run_config.cluster, run_config.cluster_info)
    strategy = cluster.multi_worker_strategy(resolver, peer_timeout_secs=30)  # once per process
    cluster.num_hosts(strategy), cluster.is_chief(strategy)
    rows = cluster.gather(strategy, per_replica_tensor)           # every worker's replicas
    cluster.sum_over_workers(strategy, [stop, signalled])         # one all-reduce of counters

This module owns what changes when a job spans several machines on tf.distribute's own
synchronous multi-worker engines (`MultiWorkerMirroredStrategy` for GPU/CPU clusters;
`TPUStrategy` already spans a whole pod from one client): the worker count from `TF_CONFIG`
(as `RunConfig` parsed it; only `config.py` reads the environment) or a ClusterResolver, the
one `MultiWorkerMirroredStrategy` of a process (it configures collective ops for the process,
and instances share collective keys) with its health checks (how long a silent peer is
tolerated), how many input hosts a strategy has, which process is the chief (the only one
writing checkpoints and summaries), gathering per-replica tensors from every worker, the
small agreements workers must reach so that they issue the same collectives in the same order
(which checkpoint to restore, when to save, sums of per-worker counters), and turning the
engine's error for a lost peer into one that says what to do. Clusters with `ps` tasks are
`session/parameter_servers.py`'s; the stop protocol built on these sums is `preemption.py`'s. It
knows nothing about models, input_fns, loops or file formats, nor how `_tf_patches` swaps
the strategy's local device list in (`local_cpu_devices` builds it).
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any, Callable, Sequence

import tensorflow as tf

from tpu_estimator_compat._tf import patches as _tf_patches
from tpu_estimator_compat._tf import private as _tf_private
from tpu_estimator_compat._tf import run_time_shapes as _tf_shapes

_TRAINING_JOBS = ("chief", "worker")

_MWMS = tf.distribute.MultiWorkerMirroredStrategy


def _training_tasks(spec: tf.train.ClusterSpec) -> int:
    """Tasks that run replicas under MultiWorkerMirroredStrategy: the chief and the workers."""
    return sum(spec.num_tasks(job) for job in _TRAINING_JOBS if job in spec.jobs)


def _is_tpu_resolver(resolver: Any) -> bool:
    return isinstance(resolver, tf.distribute.cluster_resolver.TPUClusterResolver)


def _is_multi_worker_resolver(cluster: Any) -> bool:
    if not isinstance(cluster, tf.distribute.cluster_resolver.ClusterResolver):
        return False
    if _is_tpu_resolver(cluster):
        return False
    try:
        return _training_tasks(cluster.cluster_spec()) > 1
    except Exception:  # pylint: disable=broad-except
        # A resolver that cannot produce a cluster spec (an unreachable TPU look-alike) is
        # not a GPU/CPU cluster; the TPU rule decides what happens to it.
        return False


def training_spec(spec: tf.train.ClusterSpec) -> tf.train.ClusterSpec:
    """`spec` without its `evaluator` job: the evaluator evaluates on its own, outside."""
    jobs = {job: spec.job_tasks(job) for job in spec.jobs if job != "evaluator"}
    return tf.train.ClusterSpec(jobs)


def has_parameter_servers(tf_config: Any) -> bool:
    """Whether TF_CONFIG (as `RunConfig` parsed it) describes a cluster with `ps` tasks."""
    return tf_config is not None and "ps" in tf_config.cluster_spec.jobs


def multi_worker_resolver(cluster: Any = None, tf_config: Any = None) -> Any | None:
    """The resolver of a GPU/CPU cluster of several workers, or None.

    `RunConfig(cluster=...)` is used when it is a non-TPU resolver naming several chief/worker
    tasks; otherwise the cluster `TF_CONFIG` described, as `RunConfig` parsed it
    (`tf_config`, a `config.ClusterInfo`; this module never reads the environment itself, so
    the estimator's task and chief and the strategy's cannot disagree). A TPU resolver (a pod)
    is not a multi-worker cluster here: `TPUStrategy` drives every host of the pod from one
    client. An `evaluator` task sits outside the training cluster and evaluates on its own,
    and a cluster with `ps` tasks trains on ParameterServerStrategy
    (`session/parameter_servers.py`), not here.
    """
    if _is_multi_worker_resolver(cluster):
        return cluster
    if tf_config is None or tf_config.task_type == "evaluator":
        return None
    if has_parameter_servers(tf_config):
        return None
    spec = training_spec(tf_config.cluster_spec)
    if _training_tasks(spec) <= 1:
        return None
    # MultiWorkerMirroredStrategy takes its local GPU count from the resolver (it asks
    # TensorFlow only for a TFConfigClusterResolver), so say how many this worker has.
    gpus = len(tf.config.list_physical_devices("GPU"))
    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        spec, master=spec.task_address(tf_config.task_type, tf_config.task_id),
        task_type=tf_config.task_type, task_id=tf_config.task_id,
        rpc_layer=tf_config.rpc_layer, num_accelerators={"GPU": gpus} if gpus else None)


def describe(resolver: Any) -> str:
    """'task worker/1 of 2 workers (chief: worker/0)', for the strategy log line."""
    spec = resolver.cluster_spec()
    chief = "chief/0" if "chief" in spec.jobs else "worker/0"
    return (f"task {resolver.task_type}/{resolver.task_id} of {_training_tasks(spec)} "
            f"workers (chief: {chief})")


_LOCK = threading.Lock()
_STRATEGY: dict[str, Any] = {}


def _cluster_key(resolver: Any) -> str:
    return json.dumps([resolver.cluster_spec().as_dict(), resolver.task_type,
                       resolver.task_id], sort_keys=True, default=str)


def local_cpu_replicas() -> int:
    """How many logical devices the host CPU was split into (1 if it was not split).

    Read from the device configuration, not from the live devices, so that asking does not
    start TensorFlow's runtime before the multi-worker strategy configures it.
    """
    cpus = tf.config.list_physical_devices("CPU")
    if not cpus:
        return 1
    logical = tf.config.get_logical_device_configuration(cpus[0])
    return max(1, len(logical or ()))


def multi_worker_strategy(resolver: Any, *, peer_timeout_secs: float | None = None,
                          register_timeout_secs: float | None = None
                          ) -> tf.distribute.MultiWorkerMirroredStrategy:
    """The process-wide MultiWorkerMirroredStrategy for `resolver`'s cluster.

    Created on first use. TensorFlow wants it created before any other TensorFlow op runs
    in the process (it enables collective ops and starts this worker's server); scripts that
    compute tensors before training should call this first (the launcher does). Workers
    without GPUs whose CPU was split into logical devices (`--cpu_replicas=N`) get one
    replica per logical CPU, as a TPU host has one per core; otherwise TensorFlow's own
    rule applies (every local GPU, else one CPU replica).

    Its coordination service watches every task's heartbeat: a task silent for
    `peer_timeout_secs` (dead, frozen, cut off; None: the engine's default) makes every
    collective of the job fail on the other tasks instead of waiting forever, and a task
    that does not join within `register_timeout_secs` fails the start the same way.

    Raises:
      ValueError: a strategy for a different cluster was already created in this process.
    """
    key = _cluster_key(resolver)
    with _LOCK:
        if _STRATEGY:
            (existing_key, strategy), = _STRATEGY.items()
            if existing_key != key:
                raise ValueError(
                    f"This process already runs MultiWorkerMirroredStrategy for cluster "
                    f"{existing_key}; it cannot join {key} too (collective ops are configured "
                    "once per process). Use one TF_CONFIG / RunConfig(cluster=...) per "
                    "process.")
            return strategy
        _tf_private.configure_peer_health_checks(
            resolver.cluster_spec(), heartbeat_timeout_secs=peer_timeout_secs,
            register_timeout_secs=register_timeout_secs)
        cpus = local_cpu_replicas()
        if not tf.config.list_physical_devices("GPU") and cpus > 1:
            with _tf_patches.applied("cluster.local_devices", cpus):
                strategy = _MWMS(cluster_resolver=resolver)
        else:
            strategy = _MWMS(cluster_resolver=resolver)
        _STRATEGY[key] = strategy
        _PEER_TIMEOUT[id(strategy)] = peer_timeout_secs
        return strategy


def local_cpu_devices(original: Callable[..., Any], count: int) -> Callable[..., Any]:
    """The replacement of patch `cluster.local_devices`: `count` replicas on CPUs 0..n-1.

    MultiWorkerMirroredStrategy gives a worker without GPUs exactly one replica (its local
    device list is hard-coded in `CollectiveAllReduceExtended._initialize_local_devices`). A
    CPU split into logical devices stands in for the cores of a TPU host (the launcher's
    `--cpu_replicas`, the multi-worker tests), so that list names the logical CPUs while the
    strategy is constructed. The engine itself (collectives, input workers, health checks)
    is TensorFlow's, unchanged.
    """
    del original  # Replaced whole while the strategy is built.

    def local_cpus(self: Any, cluster_resolver: Any, worker_device: str) -> tuple[Any, str]:
        del self, cluster_resolver
        return tuple(f"{worker_device}/device:CPU:{i}" for i in range(count)), "CPU"

    return local_cpus


_PEER_TIMEOUT: dict[int, float | None] = {}
ENGINE_HEARTBEAT_TIMEOUT_SECS = 10  # TF 2.21's coordination service default.


class PeerLostError(tf.errors.UnavailableError):
    """A task of the cluster died, froze or became unreachable; the job cannot go on.

    An `UnavailableError`, as the engine's own error was, so existing handlers still match.
    """

    def __init__(self, message: str) -> None:
        super().__init__(None, None, message)


def _peer_failure(error: tf.errors.OpError) -> bool:
    text = str(error)
    return isinstance(error, (tf.errors.UnavailableError, tf.errors.AbortedError,
                              tf.errors.DeadlineExceededError)) or (
        "Collective ops is aborted" in text or "stopped sending heartbeats" in text)


def _engine_reason(error: tf.errors.OpError) -> str:
    """The engine's own words, without the op traceback TensorFlow prepends."""
    text = str(getattr(error, "message", error))
    if "Collective ops is aborted by:" in text:
        text = text[text.index("Collective ops is aborted by:"):]
    else:
        text = text.strip().split("\n\n")[-1]
    return " ".join(text.split("[[")[0].split())[:500]


def _lost_tasks(reason: str, spec: tf.train.ClusterSpec, here: str) -> list[str]:
    """The tasks the engine's message names (by task name or address), this one excepted.

    "Additional GRPC error information from remote target /job:chief/..." names the task
    that relayed the error (the coordination service's), not one that was lost.
    """
    named = re.sub(r"remote target \S+", "", reason)
    found = [f"{job}/{task}" for job, task in
             re.findall(r"/job:(\w+)/replica:\d+/task:(\d+)", named)]
    for job in spec.jobs:
        for task in range(spec.num_tasks(job)):
            if spec.task_address(job, task) in named:
                found.append(f"{job}/{task}")
    if not found and "CoordinationService/" in reason:
        # A call to the coordination service failed and no other task is named (this
        # task's heartbeats went unanswered): the task running the service (the chief,
        # else worker 0) is the one that fell silent.
        found.append("chief/0" if "chief" in spec.jobs else "worker/0")
    return [t for t in dict.fromkeys(found) if t != here]


def peer_lost_error(strategy: tf.distribute.Strategy, error: tf.errors.OpError, *,
                    what: str, latest_checkpoint: str | None) -> PeerLostError | None:
    """Our error for an engine error that means a peer task is gone, else None.

    The engine's message names the task that stopped answering deep inside an op
    traceback, and says "Restart your program"; this one says which task, that the job
    cannot continue, why, and where it resumes.
    """
    if not is_multi_client(strategy) or not _peer_failure(error):
        return None
    resolver = strategy.cluster_resolver
    here = f"{resolver.task_type}/{resolver.task_id}"
    timeout = _PEER_TIMEOUT.get(id(strategy))
    timeout_text = (f"{timeout:g} s, from RunConfig(peer_timeout_secs=...) or the launcher's "
                    "--peer_timeout_secs" if timeout else
                    f"the engine's default, {ENGINE_HEARTBEAT_TIMEOUT_SECS} s; set it with "
                    "RunConfig(peer_timeout_secs=...) or the launcher's --peer_timeout_secs")
    reason = _engine_reason(error)
    lost = _lost_tasks(reason, resolver.cluster_spec(), here)
    resume = (f"it resumes from {latest_checkpoint}" if latest_checkpoint
              else "there is no checkpoint yet, so it starts afresh")
    return PeerLostError(
        f"{what} stopped on task {here}: the cluster lost "
        f"{' and '.join(lost) if lost else 'a peer task'}. A task that dies, freezes "
        f"(e.g. SIGSTOP) or is unreachable for longer than the peer timeout ({timeout_text}) "
        f"makes MultiWorkerMirroredStrategy abort the collectives of every other task, and "
        f"the job cannot continue without it. Restart the whole job: {resume}. "
        f"The engine said: {reason}")


def num_hosts(strategy: tf.distribute.Strategy) -> int:
    """Input hosts of a strategy: one input_fn call (one input pipeline) per host.

    TPUStrategy: the hosts of the TPU system (a pod has several). MultiWorkerMirroredStrategy:
    its chief and worker tasks. Anything else runs on one host.
    """
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return max(1, int(getattr(strategy.extended, "num_hosts", 1)))
    if isinstance(strategy, _MWMS):
        resolver = strategy.cluster_resolver
        return max(1, _training_tasks(resolver.cluster_spec())) if resolver else 1
    return 1


def worker_device(index: int) -> str:
    """The CPU of worker task `index`, where its input pipeline runs."""
    return f"/job:worker/replica:0/task:{index}/device:CPU:0"


def is_multi_client(strategy: tf.distribute.Strategy) -> bool:
    """True when every worker runs its own copy of this program (MWMS over several workers).

    Then each process only holds its local replicas' values, and every collective must be
    issued by every worker in the same order. A TPU pod is single-client.
    """
    return isinstance(strategy, _MWMS) and num_hosts(strategy) > 1


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes checkpoints and summaries (always, on one machine)."""
    return bool(strategy.extended.should_checkpoint)


# ----------------------------------------------------------------------------------------
# Gathering per-replica tensors from every worker.

# Collective all-gather has kernels for these; narrower types travel widened and come back.
_GATHERABLE = (tf.float32, tf.float64, tf.int32, tf.int64)
_WIDENED = {tf.bool: tf.int32, tf.int8: tf.int32, tf.int16: tf.int32, tf.uint8: tf.int32,
            tf.uint16: tf.int32, tf.uint32: tf.int64, tf.float16: tf.float32,
            tf.bfloat16: tf.float32}


def gather(strategy: tf.distribute.Strategy, value: Any, what: str = "tensor") -> tf.Tensor:
    """Concatenates a per-replica value over all replicas on axis 0, in replica order.

    On one client the local copies are concatenated on the host (any dtype, no collective).
    On several, `strategy.gather` all-gathers from every worker, so every process gets every
    replica's rows in global replica order (worker 0's replicas first). Call it in
    cross-replica context inside the compiled step, identically on every worker.

    Raises:
      TypeError: on several workers, for strings and other non-numeric dtypes. (A plain
        TypeError: AutoGraph re-raises built-in exception types from a trace unchanged.)
    """
    parts = strategy.experimental_local_results(value)
    if not is_multi_client(strategy):
        return parts[0] if len(parts) == 1 else tf.concat(parts, axis=0)
    dtype = parts[0].dtype
    if dtype in _GATHERABLE:
        return strategy.gather(value, axis=0)
    if dtype not in _WIDENED:
        raise TypeError(
            f"A {what} of dtype {dtype.name} cannot be gathered across workers: "
            "MultiWorkerMirroredStrategy's all-gather carries only numbers (float32/64, "
            "int32/64, and narrower ints, bools and halves widened). Return numeric tensors "
            "from model_fn (e.g. ids instead of strings) and turn them into strings on the "
            "host, or run this on one machine.")
    widened = strategy.run(lambda t: tf.cast(t, _WIDENED[dtype]), args=(value,))
    return tf.cast(strategy.gather(widened, axis=0), dtype)


# TensorFlow's AddN kernel (aggregate_ops) adds up to 9 inputs left to right in one pass;
# beyond that it adds groups of 8 to a running sum.
_ONE_PASS_ADD_N = 9


def reduce_to_host(strategy: tf.distribute.Strategy, reduce_op: tf.distribute.ReduceOp,
                   value: Any) -> tf.Tensor:
    """`strategy.reduce(reduce_op, value, axis=None)`, summed left to right, without AddN.

    On one machine's MirroredStrategy TensorFlow sums the replicas' copies with one AddN on
    the host, which grappler then rewrites. Its memory optimizer turns an AddN of more than
    two inputs into a temporary variable and in-place adds, in the order the inputs arrive,
    when one of them is alive at the graph's estimated memory peak, and then estimates the
    whole graph's memory again. On BERT-base over 8 replicas it picked the step's loss: the
    pass took 12.0 s instead of 4.7 s of the first call's graph optimisation (`python -m
    bench.bert_startup shim 8`). Its arithmetic optimizer regroups the AddN's adds too: in a
    tf.function, the sum of 8 scalars differed in the last bit from the left-to-right sum
    in 130 of 300 cases.

    Here the sum is the AddN kernel's own: left to right (as `tf.add_n` computes up to 9
    inputs), each add on its right operand's device. Grappler's arithmetic optimizer merges
    a chain of adds into an AddN only on one device, so none forms: the value is the same
    on every run and every machine. Elsewhere (one or two replicas, more than 9, several
    workers, TPUs, values that are not per-replica) it is `strategy.reduce`.
    """
    parts = strategy.experimental_local_results(value)
    # MultiWorkerMirroredStrategy is not a MirroredStrategy: several workers fall through.
    if (not 2 < len(parts) <= _ONE_PASS_ADD_N
            or not isinstance(strategy, _ONE_HOST_MIRRORED)
            or not isinstance(value, tf.types.experimental.distributed.PerReplica)
            or reduce_op not in (tf.distribute.ReduceOp.SUM, tf.distribute.ReduceOp.MEAN)):
        return strategy.reduce(reduce_op, value, axis=None)
    total = parts[0]
    for part in parts[1:]:
        with tf.device(part.device):
            total = total + part
    # Where `strategy.reduce` puts its result without a device scope: the host's first CPU.
    with tf.device("/device:CPU:0"):
        return (total / len(parts) if reduce_op == tf.distribute.ReduceOp.MEAN
                else tf.identity(total))


_ONE_HOST_MIRRORED = (tf.distribute.MirroredStrategy, tf.compat.v1.distribute.MirroredStrategy)


def count_rows(strategy: tf.distribute.Strategy, mask: Any) -> tf.Tensor:
    """Real rows (mask True) of one step over every replica of every worker, as int32.

    On several workers this is an all-reduce, so all of them see the same count and stop
    their evaluation loops at the same step.
    """
    if not is_multi_client(strategy):
        counts = [tf.reduce_sum(tf.cast(m, tf.int32))
                  for m in strategy.experimental_local_results(mask)]
        return tf.add_n(counts)
    per_replica = strategy.run(lambda m: tf.reduce_sum(tf.cast(m, tf.int32)), args=(mask,))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)


def count_fed_replicas(strategy: tf.distribute.Strategy, witness: Any) -> tf.Tensor:
    """Replicas (of every worker) whose input tensor `witness` is not empty, as int32.

    An input iterator hands a replica that found no batch an empty dummy; every worker must
    agree whether a step runs, so on several workers this is an all-reduce. The size is read
    when the step runs: from static shapes Grappler folds it wrongly when the step pins the
    batch dimension (`_tf/run_time_shapes.py`).
    """
    def fed(t: tf.Tensor) -> tf.Tensor:
        return tf.cast(_tf_shapes.run_time_size(t) > 0, tf.int32)

    if not is_multi_client(strategy):
        return tf.add_n([fed(t) for t in strategy.experimental_local_results(witness)])
    per_replica = strategy.run(fed, args=(witness,))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)


# ----------------------------------------------------------------------------------------
# Agreements between workers.

_SUMMERS: dict[int, Any] = {}


def _summer(strategy: tf.distribute.Strategy) -> Any:
    """A compiled all-reduce of one int64: replica 0's value, 0 on every other replica."""
    if id(strategy) not in _SUMMERS:

        def replica_fn(value: tf.Tensor) -> tf.Tensor:
            replica = tf.distribute.get_replica_context().replica_id_in_sync_group
            return tf.where(tf.equal(replica, 0), value, tf.zeros_like(value))

        @tf.function
        def summed(value: tf.Tensor) -> tf.Tensor:
            per_replica = strategy.run(replica_fn, args=(value,))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

        _SUMMERS[id(strategy)] = summed
    return _SUMMERS[id(strategy)]


def from_chief(strategy: tf.distribute.Strategy, value: int) -> int:
    """The chief's `value`, on every worker (a broadcast; a no-op on one client).

    Global replica 0 lives on the chief, so the sum of "replica 0's value, 0 elsewhere" is it.
    """
    if not is_multi_client(strategy):
        return value
    with strategy.scope():
        return int(_summer(strategy)(tf.constant(value, tf.int64)))


_VECTOR_SUMMERS: dict[tuple[int, int], Any] = {}


def sum_over_workers(strategy: tf.distribute.Strategy, values: Sequence[int]) -> list[int]:
    """Element-wise sums of every worker's `values` (each worker passes as many), on all.

    One all-reduce for several counters (e.g. stop requests and which signal asked), so that
    the workers' collectives stay paired. `values` as they are on one client.
    """
    if not is_multi_client(strategy):
        return [int(v) for v in values]
    key = (id(strategy), len(values))
    if key not in _VECTOR_SUMMERS:

        def replica_fn(value: tf.Tensor) -> tf.Tensor:
            first = tf.equal(tf.distribute.get_replica_context().replica_id_in_sync_group %
                             (strategy.num_replicas_in_sync // num_hosts(strategy)), 0)
            return tf.where(first, value, tf.zeros_like(value))

        @tf.function
        def summed(value: tf.Tensor) -> tf.Tensor:
            per_replica = strategy.run(replica_fn, args=(value,))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

        _VECTOR_SUMMERS[key] = summed
    with strategy.scope():
        total = _VECTOR_SUMMERS[key](tf.constant(list(values), tf.int64))
    return [int(v) for v in total.numpy()]


def task_rank(strategy: tf.distribute.Strategy) -> int:
    """This task's index among the training tasks: the chief (if any) 0, then the workers."""
    resolver = strategy.cluster_resolver
    spec = resolver.cluster_spec()
    offset = spec.num_tasks("chief") if "chief" in spec.jobs and resolver.task_type == "worker" else 0
    return offset + int(resolver.task_id)


def task_name(strategy: tf.distribute.Strategy, rank: int) -> str:
    """'chief/0' or 'worker/1' for a `task_rank`."""
    spec = strategy.cluster_resolver.cluster_spec()
    chiefs = spec.num_tasks("chief") if "chief" in spec.jobs else 0
    return f"chief/{rank}" if rank < chiefs else f"worker/{rank - chiefs}"


def barrier(strategy: tf.distribute.Strategy) -> None:
    """Returns on each worker once every worker has reached it."""
    from_chief(strategy, 0)


class WorkerSync:
    """What a CheckpointManager shared by the workers of one job needs (see
    checkpoint/checkpoints.py).

    The chief writes; the others read the variables along with it (reading a sync-on-read
    variable is an all-reduce every worker must join) and write nothing. The checkpoint to
    restore is the one the chief sees.
    """

    def __init__(self, strategy: tf.distribute.Strategy) -> None:
        self._strategy = strategy
        self.is_writer = is_chief(strategy)

    def agree(self, step: int) -> int:
        return from_chief(self._strategy, step)

    def barrier(self) -> None:
        barrier(self._strategy)


def checkpoint_sync(strategy: tf.distribute.Strategy) -> WorkerSync | None:
    """A WorkerSync on several workers, None on one client."""
    return WorkerSync(strategy) if is_multi_client(strategy) else None


def chief_decides(strategy: tf.distribute.Strategy) -> Callable[[bool], bool] | None:
    """On several workers, a function giving every worker the chief's yes/no; else None.

    Time-based saving (`save_checkpoints_secs`, the default) reads each worker's clock; left
    alone, workers would save at different loops and their collectives would no longer pair.
    """
    if not is_multi_client(strategy):
        return None
    return lambda decision: bool(from_chief(strategy, int(decision)))
