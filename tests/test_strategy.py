"""Tests for tpu_estimator_compat.session.strategy: which strategy a TPUEstimator runs on, and why.

This machine has no TPU or GPU; conftest splits the CPU into 8 logical devices.
"""
import pytest
import tensorflow as tf
from conftest import NUM_LOGICAL_CPUS, make_strategy

from tpu_estimator_compat.session import strategy as strategy_lib

_CHOSEN = "TPUEstimator runs on %s with %d replica(s): %s."
_CPU_FALLBACK = (f"no TPU or GPU; MirroredStrategy over {NUM_LOGICAL_CPUS} logical CPU "
                 "devices")


class _LogRecorder:
    """Stands in for absl `logging` inside strategy.py; keeps (level, format, args)."""

    def __init__(self):
        self.records = []

    def info(self, msg, *args):
        self.records.append(("info", msg, args))

    def warning(self, msg, *args):
        self.records.append(("warning", msg, args))

    def of_level(self, level):
        return [(msg, args) for lvl, msg, args in self.records if lvl == level]


@pytest.fixture
def log(monkeypatch):
    recorder = _LogRecorder()
    monkeypatch.setattr(strategy_lib, "logging", recorder)
    # The mismatch warning is once per process; start each test with none given yet.
    monkeypatch.setattr(strategy_lib, "_WARNED_SHARD_MISMATCH", set())
    monkeypatch.setattr(strategy_lib, "_WARNED_MODEL_PARALLEL", set())
    return recorder


def _assert_cpu_fallback(choice):
    assert isinstance(choice.strategy, tf.distribute.MirroredStrategy)
    assert choice.strategy.num_replicas_in_sync == NUM_LOGICAL_CPUS
    assert [d.rsplit("/", 1)[-1] for d in choice.strategy.extended.worker_devices] == [
            f"device:CPU:{i}" for i in range(NUM_LOGICAL_CPUS)]
    assert choice.reason == _CPU_FALLBACK
    assert choice.is_tpu is False


def test_use_tpu_false_gives_default_strategy(log):
    choice = strategy_lib.select(use_tpu=False, distribute=None)
    assert choice.strategy is tf.distribute.get_strategy()
    assert choice.reason == "use_tpu=False: default strategy on the host CPU"
    assert choice.is_tpu is False
    assert log.records == [("info", _CHOSEN, ("_DefaultDistributionStrategy", 1,
                                               choice.reason))]


def test_use_tpu_false_ignores_num_shards(log):
    strategy_lib.select(use_tpu=False, distribute=None, num_shards=8)
    assert log.of_level("warning") == []


@pytest.mark.parametrize("use_tpu", [True, False])
def test_given_distribute_wins(log, use_tpu):
    given = make_strategy("mirrored8")
    choice = strategy_lib.select(use_tpu=use_tpu, distribute=given)
    assert choice.strategy is given
    assert choice.reason == "given by RunConfig"
    assert choice.is_tpu is False
    assert log.records == [("info", _CHOSEN, ("MirroredStrategy", 8, "given by RunConfig"))]


def test_given_non_tpu_distribute_with_num_shards_mismatch_only_warns(log):
    given = make_strategy("default")
    choice = strategy_lib.select(use_tpu=True, distribute=given, num_shards=8)
    assert choice.strategy is given
    assert len(log.of_level("warning")) == 1
    _, args = log.of_level("warning")[0]
    assert args == (8, "_DefaultDistributionStrategy", 1, 1, 1)


def test_use_tpu_without_tpu_falls_back_to_mirrored_over_logical_cpus(log):
    choice = strategy_lib.select(use_tpu=True, distribute=None)
    _assert_cpu_fallback(choice)
    assert log.records == [("info", _CHOSEN, ("MirroredStrategy", 8, _CPU_FALLBACK))]


def test_fallback_num_shards_mismatch_only_warns(log):
    choice = strategy_lib.select(use_tpu=True, distribute=None, num_shards=2)
    _assert_cpu_fallback(choice)
    warnings = log.of_level("warning")
    assert len(warnings) == 1
    msg, args = warnings[0]
    assert args == (2, "MirroredStrategy", 8, 8, 8)
    assert (msg % args) == ("TPUConfig num_shards=2 but MirroredStrategy has 8 replica(s); "
                            "running on 8. Batch sizes must divide by 8.")


def test_fallback_matching_num_shards_does_not_warn(log):
    _assert_cpu_fallback(strategy_lib.select(use_tpu=True, distribute=None, num_shards=8))
    assert log.of_level("warning") == []


class _UnreachableTPUResolver(tf.distribute.cluster_resolver.ClusterResolver):
    """A TPUClusterResolver look-alike for a TPU that cannot be found."""

    def master(self, task_type=None, task_id=None, rpc_layer=None):
        raise ValueError("Could not find TPU 'my-tpu'.")

    def cluster_spec(self):
        raise ValueError("Could not find TPU 'my-tpu'.")


@pytest.mark.parametrize("cluster", [object(), _UnreachableTPUResolver()],
                         ids=["not_a_resolver", "unreachable_resolver"])
def test_cluster_that_raises_value_error_falls_back(log, cluster):
    choice = strategy_lib.select(use_tpu=True, distribute=None, cluster=cluster)
    _assert_cpu_fallback(choice)
    (msg, args), = log.of_level("warning")
    assert msg == "No TPU reachable through %r (%s); falling back."
    assert args[0] is cluster
    # Not a TPUClusterResolver: refused before connecting (which would reset the eager
    # context and tear down every live iterator), not after a connection error.
    assert args[1] == "not a TPUClusterResolver"
    assert log.of_level("info") == [(_CHOSEN, ("MirroredStrategy", 8, _CPU_FALLBACK))]


def test_simple_cluster_resolver_with_empty_spec_falls_back(log):
    cluster = tf.distribute.cluster_resolver.SimpleClusterResolver(tf.train.ClusterSpec({}))
    try:
        choice = strategy_lib.select(use_tpu=True, distribute=None, cluster=cluster)
    except AssertionError as e:
        pytest.fail(f"select() crashed with a bare AssertionError: {e!r}")
    _assert_cpu_fallback(choice)
    assert len(log.of_level("warning")) == 1


def test_fallback_num_shards_mismatch_warns_once(log):
    for _ in range(3):
        strategy_lib.select(use_tpu=True, distribute=None, num_shards=2)
    assert len(log.of_level("warning")) == 1


def test_model_parallel_settings_run_unpartitioned_with_one_warning(log):
    """3D U-Net / Mask R-CNN style num_cores_per_replica: no stop, one line saying so."""
    for _ in range(2):
        choice = strategy_lib.select(use_tpu=True, distribute=None, num_cores_per_replica=2,
                                     partitioned_inputs=True)
    _assert_cpu_fallback(choice)
    warnings = [msg % args for msg, args in log.of_level("warning")]
    assert warnings == [
        "TPUConfig num_cores_per_replica=2 with input_partition_dims asks for model "
        "parallelism, which tpu_estimator_compat does not apply off TPU: each of the 8 "
        "replica(s) of MirroredStrategy runs the whole model on one device, unpartitioned "
        "(the same math; it must fit one device's memory)."]


@pytest.mark.parametrize("cores, use_tpu", [(None, True), (1, True), (2, False)])
def test_no_model_parallel_warning_when_nothing_is_partitioned(log, cores, use_tpu):
    strategy_lib.select(use_tpu=use_tpu, distribute=None, num_cores_per_replica=cores)
    assert not log.of_level("warning")
