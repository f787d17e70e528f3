"""Tests for tpu_estimator_compat.cluster.workers, in this process: which clusters are multi-worker,
what one machine looks like, and how a shared model_dir behaves for a writer and a reader.

Nothing here creates a MultiWorkerMirroredStrategy (it would reconfigure this process's
collective ops); the real multi-worker job runs in tests/test_multi_worker.py.
"""

import json

import numpy as np
import pytest
import tensorflow as tf
from conftest import make_strategy

from tpu_estimator_compat.checkpoint import checkpoints as checkpoints_lib
from tpu_estimator_compat.cluster import workers as cluster
from tpu_estimator_compat import config as config_lib
from tpu_estimator_compat.session import strategy as strategy_lib
from tpu_estimator_compat.cluster.tpu_resolver import NoTPUClusterResolver

_TWO_WORKERS = {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}


def _set_tf_config(monkeypatch, value):
    monkeypatch.setenv("TF_CONFIG", json.dumps(value))


def _parsed():
    """TF_CONFIG as the estimator passes it on: parsed once, by RunConfig."""
    return config_lib.RunConfig().cluster_info


@pytest.fixture(autouse=True)
def _no_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)


def test_one_machine_is_not_a_cluster():
    assert cluster.multi_worker_resolver() is None
    assert cluster.multi_worker_resolver(object()) is None
    assert cluster.multi_worker_resolver(None, _parsed()) is None


def test_the_environment_is_not_read_here(monkeypatch):
    """Only RunConfig reads TF_CONFIG: a cluster set after it was built does not count."""
    parsed = _parsed()
    _set_tf_config(monkeypatch, {"cluster": _TWO_WORKERS, "task": {"type": "worker", "index": 0}})
    assert cluster.multi_worker_resolver() is None
    assert cluster.multi_worker_resolver(None, parsed) is None


@pytest.mark.parametrize("layout, index", [
    (_TWO_WORKERS, 1),
    ({"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}, 0),
])
def test_tf_config_with_several_workers_is_a_cluster(monkeypatch, layout, index):
    task = "chief" if "chief" in layout else "worker"
    _set_tf_config(monkeypatch, {"cluster": layout, "task": {"type": task, "index": index}})
    resolver = cluster.multi_worker_resolver(None, _parsed())
    assert (resolver.task_type, resolver.task_id) == (task, index)
    assert resolver.cluster_spec().as_dict() == layout
    chief = "chief/0" if "chief" in layout else "worker/0"
    assert cluster.describe(resolver) == f"task {task}/{index} of 2 workers (chief: {chief})"


@pytest.mark.parametrize("tf_config", [
    {"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 0}},
    {"cluster": _TWO_WORKERS, "task": {"type": "evaluator", "index": 0}},
], ids=["one_worker", "evaluator"])
def test_tf_config_that_is_not_a_training_cluster(monkeypatch, tf_config):
    _set_tf_config(monkeypatch, tf_config)
    assert cluster.multi_worker_resolver(None, _parsed()) is None


def test_run_config_cluster_resolver_is_used_without_tf_config():
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(_TWO_WORKERS), task_type="worker", task_id=0)
    assert cluster.multi_worker_resolver(resolver) is resolver


def test_tpu_resolver_is_a_pod_not_a_worker_cluster(monkeypatch):
    tpu = NoTPUClusterResolver(tpu="my-pod", reason="no TPU here")
    assert cluster.multi_worker_resolver(tpu) is None
    _set_tf_config(monkeypatch, {"cluster": _TWO_WORKERS,
                                 "task": {"type": "worker", "index": 0}})
    assert cluster.multi_worker_resolver(tpu, _parsed()) is not None  # TF_CONFIG still counts.


@pytest.mark.parametrize("name", ["default", "mirrored8"])
def test_one_client_strategies(name):
    strategy = make_strategy(name)
    assert cluster.num_hosts(strategy) == 1
    assert not cluster.is_multi_client(strategy)
    assert cluster.is_chief(strategy)
    assert cluster.from_chief(strategy, 5) == 5
    cluster.barrier(strategy)
    assert cluster.checkpoint_sync(strategy) is None
    assert cluster.chief_decides(strategy) is None
    assert cluster.sum_over_workers(strategy, [1, 0, 3]) == [1, 0, 3]


def test_gather_on_one_client_concatenates_local_replicas_any_dtype():
    strategy = make_strategy("mirrored8")

    @tf.function
    def gathered():
        def replica_fn():
            replica = tf.distribute.get_replica_context().replica_id_in_sync_group
            return tf.fill([2], replica), tf.fill([2], tf.strings.as_string(replica))

        ids, names = strategy.run(replica_fn)
        return cluster.gather(strategy, ids), cluster.gather(strategy, names)

    ids, names = gathered()
    np.testing.assert_array_equal(ids, np.repeat(np.arange(8), 2))
    assert names.numpy().tolist() == [str(i).encode() for i in np.repeat(np.arange(8), 2)]


@pytest.mark.parametrize("reduce_op", ["SUM", "MEAN"])
def test_reduce_to_host_sums_replicas_left_to_right_in_any_graph(reduce_op):
    strategy = make_strategy("mirrored8")
    reduce_op = tf.distribute.ReduceOp(reduce_op)
    rng = np.random.default_rng(0)
    # Magnitudes over seven decades: another order of the adds rounds differently.
    rows = (rng.standard_normal((8, 100))
            * 10.0 ** rng.integers(-3, 4, (8, 100))).astype(np.float32)
    table = tf.constant(rows)

    @tf.function
    def reduced():
        # Scalars, as the loss is: 100 of them, in one graph.
        per_replica = strategy.run(lambda: tf.unstack(table[
            tf.distribute.get_replica_context().replica_id_in_sync_group]))
        return [(strategy.reduce(reduce_op, part, axis=None),
                 cluster.reduce_to_host(strategy, reduce_op, part))
                for part in per_replica]

    left_to_right = rows[0]
    for row in rows[1:]:
        left_to_right = left_to_right + row  # float32, as tf.add_n's kernel adds.
    if reduce_op == tf.distribute.ReduceOp.MEAN:
        left_to_right = left_to_right / np.float32(8)
    pairs = np.array([[float(a), float(b)] for a, b in reduced()], np.float32)
    assert pairs[:, 1].tobytes() == left_to_right.tobytes()
    # strategy.reduce's AddN, regrouped by grappler, differs by rounding only.
    scale = np.abs(rows).sum(axis=0) / (8 if reduce_op == tf.distribute.ReduceOp.MEAN else 1)
    assert np.all(np.abs(pairs[:, 0] - pairs[:, 1]) <= 1e-6 * scale)
    graph = reduced.get_concrete_function().graph
    widest = max((len(op.inputs) for op in graph.get_operations() if op.type == "AddN"),
                 default=0)
    assert widest == 8  # strategy.reduce's; reduce_to_host made none.
    # No two chained adds on one device: grappler's arithmetic optimizer would merge them
    # into the AddN its memory optimizer rewrites.
    adds = [op for op in graph.get_operations() if op.type in ("Add", "AddV2")]
    assert len(adds) >= 7 * 100
    for op in adds:
        for source in op.inputs:
            assert source.op.type not in ("Add", "AddV2") or source.op.device != op.device
    # A value that is not per-replica goes to strategy.reduce unchanged.
    if reduce_op == tf.distribute.ReduceOp.MEAN:
        assert float(cluster.reduce_to_host(strategy, reduce_op, tf.constant(2.5))) == 2.5


class _FakeSync:
    """Stands in for cluster.WorkerSync: what the chief says, and the barriers passed."""

    def __init__(self, is_writer, chief_step):
        self.is_writer = is_writer
        self.chief_step = chief_step
        self.barriers = 0

    def agree(self, step):
        return self.chief_step

    def barrier(self):
        self.barriers += 1


class _CountingSaver(checkpoints_lib.V1Saver):
    def __init__(self, variables):
        super().__init__(variables)
        self.reads = 0

    def read_values(self):
        self.reads += 1
        return super().read_values()


def test_worker_that_is_not_the_writer_reads_along_and_writes_nothing(tmp_path):
    saver = _CountingSaver({"v": tf.Variable(1.0), "global_step": tf.Variable(3, tf.int64)})
    sync = _FakeSync(is_writer=False, chief_step=-1)
    manager = checkpoints_lib.CheckpointManager(str(tmp_path / "model"), saver, sync=sync)
    assert manager.save(3) == str(tmp_path / "model" / "model.ckpt-3")
    assert (saver.reads, sync.barriers) == (1, 1)
    assert not (tmp_path / "model").exists()


def test_writer_saves_then_waits_for_every_worker(tmp_path):
    saver = _CountingSaver({"v": tf.Variable(1.0), "global_step": tf.Variable(3, tf.int64)})
    sync = _FakeSync(is_writer=True, chief_step=3)
    manager = checkpoints_lib.CheckpointManager(str(tmp_path), saver, sync=sync)
    manager.save(3)
    assert sync.barriers == 1
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-3")


def _two_checkpoints(model_dir):
    v = tf.Variable(0.0)
    saver = checkpoints_lib.V1Saver({"v": v})
    manager = checkpoints_lib.CheckpointManager(str(model_dir), saver)
    for step in (1, 2):
        v.assign(float(step))
        manager.save(step)
    v.assign(-1.0)
    return v, saver


def test_every_worker_restores_the_checkpoint_the_chief_names(tmp_path):
    v, saver = _two_checkpoints(tmp_path)
    sync = _FakeSync(is_writer=False, chief_step=1)  # The chief's view lags this one's.
    manager = checkpoints_lib.CheckpointManager(str(tmp_path), saver, sync=sync)
    assert manager.restore_latest() == 1
    assert v.numpy() == 1.0
    assert sync.barriers == 1  # Nobody writes before every worker has restored.


def test_chief_without_checkpoint_means_nobody_restores(tmp_path):
    v, saver = _two_checkpoints(tmp_path)
    manager = checkpoints_lib.CheckpointManager(
        str(tmp_path), saver, sync=_FakeSync(is_writer=False, chief_step=-1))
    assert manager.restore_latest() is None
    assert v.numpy() == -1.0


def test_checkpoint_the_chief_names_but_this_worker_cannot_see(tmp_path):
    v, saver = _two_checkpoints(tmp_path)
    manager = checkpoints_lib.CheckpointManager(
        str(tmp_path), saver, sync=_FakeSync(is_writer=False, chief_step=7))
    with pytest.raises(ValueError, match=r"chief restores the checkpoint of step 7, but this "
                                         r"worker cannot read .*model\.ckpt-7.*all workers share"):
        manager.restore_latest()


# ----------------------------------------------------------------------------------------
# strategy.select's cluster rules (the strategy itself is built by the process tests).


@pytest.fixture
def chosen(monkeypatch):
    made = []

    def fake_multi_worker(resolver, peer_timeout_secs=None, register_timeout_secs=None):
        made.append(resolver)
        return strategy_lib.StrategyChoice(tf.distribute.get_strategy(), "multi-worker")

    monkeypatch.setattr(strategy_lib, "_multi_worker", fake_multi_worker)
    return made


@pytest.mark.parametrize("use_tpu", [True, False])
def test_select_tf_config_cluster_picks_multi_worker(monkeypatch, chosen, use_tpu):
    _set_tf_config(monkeypatch, {"cluster": _TWO_WORKERS,
                                 "task": {"type": "worker", "index": 1}})
    choice = strategy_lib.select(use_tpu=use_tpu, distribute=None, cluster_info=_parsed())
    assert choice.reason == "multi-worker"
    assert chosen[0].task_id == 1


def test_select_train_distribute_still_wins(monkeypatch, chosen):
    _set_tf_config(monkeypatch, {"cluster": _TWO_WORKERS,
                                 "task": {"type": "worker", "index": 0}})
    given = make_strategy("mirrored8")
    assert strategy_lib.select(use_tpu=True, distribute=given,
                               cluster_info=_parsed()).strategy is given
    assert chosen == []


def test_select_unreachable_tpu_pod_then_tf_config_cluster(monkeypatch, chosen):
    _set_tf_config(monkeypatch, {"cluster": _TWO_WORKERS,
                                 "task": {"type": "worker", "index": 0}})
    tpu = NoTPUClusterResolver(tpu="my-pod", reason="no TPU here")
    choice = strategy_lib.select(use_tpu=True, distribute=None, cluster=tpu,
                                 cluster_info=_parsed())
    assert choice.reason == "multi-worker"


def test_select_run_config_cluster_resolver(chosen):
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(_TWO_WORKERS), task_type="worker", task_id=0)
    choice = strategy_lib.select(use_tpu=True, distribute=None, cluster=resolver)
    assert choice.reason == "multi-worker" and chosen == [resolver]


def test_local_cpu_replicas_reads_the_split_without_starting_devices():
    assert cluster.local_cpu_replicas() == len(tf.config.list_logical_devices("CPU"))



def test_tf_config_rpc_layer_reaches_the_resolver(monkeypatch):
    _set_tf_config(monkeypatch, {"cluster": _TWO_WORKERS, "rpc_layer": "grpc",
                                 "task": {"type": "worker", "index": 1}})
    resolver = cluster.multi_worker_resolver(None, _parsed())
    assert resolver.rpc_layer == "grpc"
    assert resolver.master() == "grpc://127.0.0.1:2"


_CHIEF_AND_TWO = tf.train.ClusterSpec({"chief": ["127.0.0.1:1"],
                                       "worker": ["127.0.0.1:2", "127.0.0.1:3"]})


@pytest.mark.parametrize("reason, lost", [
    # Worker 1 frozen, as worker 0 heard it from the chief's coordination service (seen with
    # the suite on two processes): the relaying chief is not lost.
    ("Collective ops is aborted by: Error reported from /job:worker/task:1: The following "
     "tasks are unhealthy (stopped sending heartbeats): /job:worker/replica:0/task:1 The "
     "tasks have crashed. The error could be from a previous operation. Restart your program "
     "to reset. Additional GRPC error information from remote target "
     "/job:chief/replica:0/task:0 while calling /tensorflow.CoordinationService/PollForError",
     ["worker/1"]),
    # The chief itself frozen: worker 0's own heartbeats to it go unanswered.
    ("Deadline Exceeded Additional GRPC error information from remote target "
     "/job:chief/replica:0/task:0 while calling /tensorflow.CoordinationService/Heartbeat",
     ["chief/0"]),
    ("failed to connect to all addresses; 127.0.0.1:3", ["worker/1"]),
])
def test_lost_tasks_are_the_ones_the_engine_names_not_its_relay(reason, lost):
    assert cluster._lost_tasks(reason, _CHIEF_AND_TWO, "worker/0") == lost


def test_master_job_is_legacy_tpu_job_choice():
    from tensorflow.core.protobuf import cluster_pb2  # pylint: disable=g-direct-tensorflow-import

    from tpu_estimator_compat.cluster.tpu_resolver import master_job

    def cluster(*jobs):
        cluster_def = cluster_pb2.ClusterDef()
        for name in jobs:
            cluster_def.job.add(name=name).tasks[0] = "grpc://10.0.0.1:8470"
        return cluster_def

    assert master_job("", None) is None and master_job(None, cluster("w")) is None
    assert master_job("grpc://10.0.0.1:8470", None) == "tpu_worker"
    assert master_job("grpc://10.0.0.1:8470", cluster("w")) == "w"
    assert master_job("grpc://10.0.0.1:8470", cluster("w", "coordinator")) == "w"
    for jobs in (("w", "v"), ("w", "v", "coordinator"), ("tpu_worker",)):
        with pytest.raises(ValueError, match="tpu_job_name"):
            master_job("grpc://10.0.0.1:8470", cluster(*jobs))


def test_estimator_ctx_tells_the_master_job_per_mode():
    from tpu_estimator_compat.api import estimator as estimator_lib
    from tpu_estimator_compat import tpu_config as tpu_config_lib

    def model_fn(features, labels, mode, params):
        del features, labels, mode, params

    def ctx(mode, **kwargs):
        est = estimator_lib.TPUEstimator(model_fn=model_fn, config=config_lib.RunConfig(
            **kwargs), train_batch_size=8)
        with est._ctx.with_mode(mode) as context:
            return context

    assert ctx("train").master_job is None
    assert ctx("eval", master="grpc://10.0.0.1:8470").master_job == "tpu_worker"
    assert ctx("train", tpu_config=tpu_config_lib.TPUConfig(
        tpu_job_name="mine")).master_job == "mine"
    with pytest.raises(ValueError, match="Model parallelism only supports per host input"):
        estimator_lib.TPUEstimator(model_fn=model_fn, train_batch_size=8,
                                   config=config_lib.RunConfig(tpu_config=tpu_config_lib.TPUConfig(
                                       num_cores_per_replica=2,
                                       per_host_input_for_training=False)))
