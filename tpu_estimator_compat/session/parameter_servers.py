"""Clusters with `ps` tasks: ParameterServerStrategy, driven from the chief.

Synopsis::

    if parameter_servers.serves(run_config.cluster_info):       # a worker or ps task
        parameter_servers.serve(run_config.cluster_info, ...)   # until the chief is gone
    strategy = parameter_servers.strategy(run_config.cluster_info)   # on the chief
    iterator, endless = parameter_servers.per_worker_input(strategy, dataset_for_worker)
    run_steps = parameter_servers.ScheduledSteps(strategy, loop_fn, iterator, per_worker=10)
    result = run_steps(40)     # 40 global steps, spread over the workers as closures

A legacy `TF_CONFIG` with `ps` tasks ran asynchronous between-graph training: every task
started a server, the ps tasks only served (`server.join()`), the chief and each worker ran
the whole training graph on its own batches and updated the variables on the ps tasks
without waiting for the others. TF2's engine for that is
`tf.distribute.experimental.ParameterServerStrategy` with a `ClusterCoordinator`: here the
chief is the coordinator, the worker and ps tasks run `tf.distribute.Server` and serve until
the chief has finished (the legacy `join()`, with an end), variables live on the ps tasks,
and the chief schedules the compiled multi-step train function on whichever worker is free.
Each closure runs `iterations_per_loop` steps on one worker's batches, each step applying its
update at once (asynchronously, as legacy did). Unlike legacy, the chief does not train
itself: it coordinates, saves checkpoints and writes summaries.

This module owns the strategy and coordinator of a process, serving, the per-worker
iterators (over each worker's dataset, `inputs.distribute.worker_dataset_fn`) and spreading
a loop's steps over workers. It knows nothing about models, model_fns, checkpoints or files.
"""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
from typing import Any, Callable, NoReturn, Sequence

import numpy as np
import tensorflow as tf

from tpu_estimator_compat._tf import private as _tf_private
from tpu_estimator_compat._tf import random_streams
from tpu_estimator_compat.cluster import workers as cluster_lib
from tpu_estimator_compat import log as logging
from tpu_estimator_compat.loop import train_loop as loop_lib

_PSS = tf.distribute.experimental.ParameterServerStrategy
_SERVING_JOBS = ("worker", "ps")
_POLL_SECS = 1.0


def serves(tf_config: Any) -> bool:
    """Whether this task only serves: a worker or ps task of a cluster with ps tasks."""
    return (cluster_lib.has_parameter_servers(tf_config)
            and tf_config.task_type in _SERVING_JOBS)


def coordinates(tf_config: Any) -> bool:
    """Whether this task drives a parameter-server cluster (its chief)."""
    return (cluster_lib.has_parameter_servers(tf_config)
            and tf_config.task_type not in _SERVING_JOBS + ("evaluator",))


def _engine_spec(tf_config: Any) -> tf.train.ClusterSpec:
    """The cluster as ParameterServerStrategy names it: no evaluator, `master` called `chief`.

    The strategy only knows `chief`, `worker` and `ps`; the oldest legacy layout named the
    chief `master`. Every task of the job applies the same renaming, so their servers agree.
    """
    jobs = cluster_lib.training_spec(tf_config.cluster_spec).as_dict()
    if "master" in jobs:
        jobs["chief"] = jobs.pop("master")
    return tf.train.ClusterSpec(jobs)


def _chief_address(spec: tf.train.ClusterSpec) -> tuple[str, str]:
    return "chief/0", spec.task_address("chief", 0)


def _reachable(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return True
    except OSError:
        return False


def serve(tf_config: Any, *, protocol: str | None, wait_secs: float,
          clock: Callable[[], float] = time.monotonic) -> NoReturn:
    """Serves this worker or ps task until the chief has gone, then exits the process.

    Legacy `train_and_evaluate` ran `server.join()` on ps tasks, which never returned; the
    cluster manager killed them. Here the task watches the chief's address: once the chief
    has come and gone (finished or failed; a worker cannot tell which, the chief's exit
    status says) the job is over and the process exits with status 0.

    Raises:
      RuntimeError: the chief did not come up within `wait_secs`
        (RunConfig.session_creation_timeout_secs).
      SystemExit: always, with status 0, once the chief has gone.
    """
    spec = _engine_spec(tf_config)
    task = f"{tf_config.task_type}/{tf_config.task_id}"
    server = tf.distribute.Server(spec, job_name=tf_config.task_type,
                                  task_index=tf_config.task_id, protocol=protocol or "grpc",
                                  start=True)
    chief, address = _chief_address(spec)
    logging.info(
        "Task %s of a parameter-server cluster: serving %s for the chief (%s at %s) until it "
        "has finished, as legacy's server.join() did; the chief runs the training.", task,
        "variables" if tf_config.task_type == "ps" else "training steps", chief, address)
    deadline = clock() + wait_secs
    while not _reachable(address):
        if clock() > deadline:
            raise RuntimeError(
                f"Task {task} waited {wait_secs:g} s for the chief ({chief} at {address}) and "
                "it never came up. Start the chief with the same TF_CONFIG cluster, or raise "
                "RunConfig(session_creation_timeout_secs=...).")
        time.sleep(_POLL_SECS)
    while _reachable(address):
        time.sleep(_POLL_SECS)
    logging.info("The chief (%s at %s) has gone: the job is over, task %s exits.", chief,
                 address, task)
    del server  # Stops serving with the process.
    raise SystemExit(0)


_LOCK = threading.Lock()
_COORDINATORS: dict[int, Any] = {}
_SPECS: dict[int, tf.train.ClusterSpec] = {}


def strategy(tf_config: Any, *, protocol: str | None = None) -> _PSS:
    """The process-wide ParameterServerStrategy of the chief, with its ClusterCoordinator.

    Created once per process: it connects this process to every worker and ps task.
    """
    with _LOCK:
        for existing in _COORDINATORS.values():
            return existing.strategy
        spec = _engine_spec(tf_config)
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            spec, task_type="chief", task_id=0, rpc_layer=protocol or "grpc")
        pss = _PSS(resolver)
        _SPECS[id(pss)] = spec
        _COORDINATORS[id(pss)] = tf.distribute.experimental.coordinator.ClusterCoordinator(pss)
        return pss


def is_parameter_server_strategy(value: Any) -> bool:
    return isinstance(value, _PSS)


def num_workers(pss: _PSS) -> int:
    return _SPECS[id(pss)].num_tasks("worker")


def describe(pss: _PSS) -> str:
    spec = _SPECS[id(pss)]
    return (f"{spec.num_tasks('worker')} worker(s) and {spec.num_tasks('ps')} ps task(s), "
            "asynchronous updates; this process (the chief) coordinates")


def _coordinator(pss: _PSS) -> Any:
    return _COORDINATORS[id(pss)]


def log_placement(variables: dict[str, tf.Variable]) -> None:
    """Logs where the model's variables live: on a parameter-server cluster, the ps tasks."""
    by_device: dict[str, list[str]] = {}
    for name, variable in variables.items():
        device = tf.DeviceSpec.from_string(variable.device)
        by_device.setdefault(f"{device.job}/{device.task}", []).append(name)
    logging.info("Variables of the model by task: %s.", "; ".join(
        f"{task}: {', '.join(sorted(names))}" for task, names in sorted(by_device.items())))


def per_worker_input(pss: _PSS, dataset_for: Callable[[int, tf.distribute.InputContext],
                                                      tf.data.Dataset]) -> tuple[Any, bool]:
    """Per-worker iterators, worker i iterating `dataset_for(i, its InputContext)`.

    The dataset function is traced here once per worker (input_fn runs in this process and
    its graph on the worker, as TPU hosts ran theirs), so each worker's input_fn knows which
    worker it feeds. Returns (the iterator to pass to scheduled functions, whether every
    worker's input is endless).
    """
    count = num_workers(pss)
    endless = []

    def for_worker(index: int) -> Callable[[], tf.data.Dataset]:
        context = tf.distribute.InputContext(num_input_pipelines=count,
                                             input_pipeline_id=index,
                                             num_replicas_in_sync=count * pss.num_replicas_in_sync)

        def dataset_fn() -> tf.data.Dataset:
            dataset = dataset_for(index, context)
            endless.append(tf.get_static_value(dataset.cardinality())
                           == tf.data.INFINITE_CARDINALITY)
            return dataset

        return dataset_fn

    iterator = _tf_private.per_worker_iterators(_coordinator(pss),
                                                [for_worker(i) for i in range(count)])
    return iterator, bool(endless) and all(endless)


@dataclasses.dataclass
class ScheduledSteps:
    """`run_steps(n)` for the train driver: n global steps as closures on the workers.

    The n steps are cut into closures of at most `per_worker` steps (iterations_per_loop)
    that the coordinator hands to free workers; the call returns when all have run, so
    checkpoints and summaries between calls see a quiet model. A failed worker's closures
    are retried on the others by the coordinator (the engine's fault tolerance); a lost ps
    task fails the call.
    """

    pss: _PSS
    loop_fn: Any  # The compiled `fn(iterator, n)` of `train_loop.make_multi_step_train_fn`.
    iterator: Any
    per_worker: int
    scopes: Callable[[], Any]

    def __call__(self, n: int) -> loop_lib.LoopResult:
        coordinator = _coordinator(self.pss)
        random_streams.note_streams()  # Kernels on the workers: not inspected, reset as before.
        chunks = [min(self.per_worker, n - start) for start in range(0, n, self.per_worker)]
        with self.scopes():
            remotes = [coordinator.schedule(self.loop_fn,
                                            args=(self.iterator, tf.constant(c, tf.int32)))
                       for c in chunks]
            coordinator.join()
        return _combine([remote.fetch() for remote in remotes])


def _combine(parts: Sequence[Any]) -> loop_lib.LoopResult:
    """One LoopResult from the closures' (steps, losses, host_calls, step, hook_tensors)."""
    steps = sum(int(p[0]) for p in parts)
    losses = (np.concatenate([np.asarray(p[1], np.float32) for p in parts]) if parts
              else np.zeros([0], np.float32))
    host_calls: list[list[np.ndarray]] = []
    for part in parts:
        arrays = [np.asarray(c) for c in part[2]]
        host_calls += [[a[k] for a in arrays] for k in range(len(arrays[0]))] if arrays else []
    fetched = [np.concatenate([np.asarray(p[4][j]) for p in parts])
               for j in range(len(parts[0][4]))] if parts else []
    return loop_lib.LoopResult(steps, losses, host_calls, None, fetched)
