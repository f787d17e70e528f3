"""Legacy's distribute coordinator as RunConfig recorded it (`cluster/coordinator.py`), and
TF 2.15's `tensorflow.python.distribute.estimator_training` served at its path
(`legacy/estimator_training.py`).

Legacy RunConfig took a strategy from `DistributeConfig` too, and recorded in
`_distribute_coordinator_mode` whether `train_and_evaluate` would run under the coordinator.
"""
import json

import pytest
import tensorflow as tf
from tensorflow.python.distribute.distribute_config import DistributeConfig

import tpu_estimator_compat
from tpu_estimator_compat.api.estimator import Estimator
from tpu_estimator_compat.cluster import coordinator
from tpu_estimator_compat.config import EstimatorRunConfig

tpu_estimator_compat.install_aliases()
v1 = tf.compat.v1

_CHIEF = {"cluster": {"chief": ["localhost:1"], "worker": ["localhost:2"]},
          "task": {"type": "worker", "index": 0}}
_MASTER = {"cluster": {"master": ["localhost:1"]}, "task": {"type": "master", "index": 0}}


@pytest.fixture(autouse=True)
def _no_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)


def _config(monkeypatch, tf_config=None, **kwargs):
    if tf_config is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
    return EstimatorRunConfig(**kwargs)


def test_distribute_config_strategies_are_the_run_configs(strategy):
    config = EstimatorRunConfig(experimental_distribute=DistributeConfig(
        train_distribute=strategy, eval_distribute=strategy))
    assert config.train_distribute is strategy and config.eval_distribute is strategy


@pytest.mark.parametrize("name", ["train_distribute", "eval_distribute"])
def test_a_strategy_in_both_places_is_refused(name):
    strategy = tf.distribute.get_strategy()
    with pytest.raises(ValueError, match=f"Either `{name}` or "
                                         f"`experimental_distribute.{name}`"):
        EstimatorRunConfig(**{name: strategy},
                           experimental_distribute=DistributeConfig(**{name: strategy}))


def test_modes_as_legacy_recorded_them(monkeypatch):
    strategy = tf.distribute.get_strategy()
    assert not hasattr(_config(monkeypatch), "_distribute_coordinator_mode")
    assert not hasattr(_config(monkeypatch, _CHIEF), "_distribute_coordinator_mode")
    assert _config(monkeypatch, train_distribute=strategy)._distribute_coordinator_mode is None
    assert _config(monkeypatch, _MASTER,
                   train_distribute=strategy)._distribute_coordinator_mode is None
    assert _config(monkeypatch, _CHIEF, eval_distribute=strategy
                   )._distribute_coordinator_mode is None
    worker = _config(monkeypatch, _CHIEF, train_distribute=strategy)
    assert worker._distribute_coordinator_mode == coordinator.CoordinatorMode.INDEPENDENT_WORKER
    # No coordinator runs here: the task TF_CONFIG names is this config's at once.
    assert (worker.task_type, worker.task_id, worker.is_chief) == ("worker", 0, False)
    assert worker.cluster_spec.as_dict() == _CHIEF["cluster"]


def test_a_cluster_without_a_task_stays_local_under_a_strategy(monkeypatch):
    """Legacy refused it without a strategy, and accepted it with one (its coordinator read
    the task later); the properties stay local, the cluster spec is TF_CONFIG's."""
    config = _config(monkeypatch, {"cluster": {"chief": ["localhost:1"]}},
                     experimental_distribute=DistributeConfig(
                         train_distribute=tf.distribute.get_strategy()))
    assert config._distribute_coordinator_mode == "independent_worker"
    assert (config.task_type, config.task_id, config.is_chief) == ("worker", 0, True)
    assert config.cluster_spec.as_dict() == {"chief": ["localhost:1"]}
    with pytest.raises(ValueError, match="task type must be set"):
        _config(monkeypatch, {"cluster": {"chief": ["localhost:1"]}})


def test_remote_cluster_is_the_standalone_client_mode(monkeypatch):
    remote = {"chief": ["localhost:1"]}
    config = _config(monkeypatch, train_distribute=tf.distribute.get_strategy(),
                     experimental_distribute=DistributeConfig(remote_cluster=remote))
    assert config._distribute_coordinator_mode == "standalone_client"
    assert config.cluster_spec.as_dict() == remote and config.task_type == "worker"
    with pytest.raises(ValueError, match="Cannot set both"):
        _config(monkeypatch, _CHIEF, train_distribute=tf.distribute.get_strategy(),
                experimental_distribute=DistributeConfig(remote_cluster=remote))


def test_the_removed_tf_module_is_served_at_its_path(monkeypatch):
    from tensorflow.python.distribute import estimator_training as dc_training

    strategy = tf.distribute.get_strategy()
    assert not dc_training.should_run_distribute_coordinator(_config(monkeypatch))
    assert dc_training.should_run_distribute_coordinator(
        _config(monkeypatch, _CHIEF, train_distribute=strategy))
    config = _config(monkeypatch, train_distribute=strategy)
    config._distribute_coordinator_mode = "elsewhere"
    assert not dc_training.should_run_distribute_coordinator(config)
    dc_training.init_run_config(config, {})  # Read again for a local TF_CONFIG.
    assert config._distribute_coordinator_mode is None and config.task_type == "worker"
    dc_training.init_run_config(config, _CHIEF)
    assert config._distribute_coordinator_mode == "independent_worker"
    assert (dc_training.CHIEF, dc_training.PS) == ("chief", "ps")
    with pytest.raises(AttributeError, match="distribute coordinator itself is not served"):
        dc_training.train_and_evaluate  # pylint: disable=pointless-statement


def test_an_estimator_trains_on_distribute_configs_strategy(tmp_path, strategy):
    replicas = []

    def model_fn(features, labels, mode):
        del labels
        replicas.append(tf.distribute.get_replica_context().num_replicas_in_sync)
        weight = v1.get_variable("w", [], initializer=v1.zeros_initializer())
        loss = tf.reduce_mean(tf.square(features["x"] - weight))
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    def input_fn():
        return tf.data.Dataset.from_tensors({"x": tf.ones([4])}).repeat()

    config = EstimatorRunConfig(experimental_distribute=DistributeConfig(
        train_distribute=strategy))
    estimator = Estimator(model_fn, model_dir=str(tmp_path), config=config)
    estimator.train(input_fn, steps=2)
    assert estimator.get_variable_value("global_step") == 2
    assert set(replicas) == {strategy.num_replicas_in_sync}
