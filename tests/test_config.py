"""Tests for tpu_estimator_compat.config: defaults, validation wording, TF_CONFIG, model_dir."""
import copy
import json
import os
import pathlib
import sys

import numpy as np
import pytest
import tensorflow as tf

from tpu_estimator_compat import config as cfg
from tpu_estimator_compat.config import RunConfig, validate_model_dir
from tpu_estimator_compat.tpu_config import (InputPipelineConfig, IterationsPerLoop, TPUConfig,
                                             parse_iterations_per_loop)


@pytest.fixture(autouse=True)
def _no_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)


def _set_tf_config(monkeypatch, value):
    monkeypatch.setenv("TF_CONFIG", json.dumps(value))


# InputPipelineConfig / TPUConfig


def test_input_pipeline_constants_match_legacy():
    assert (InputPipelineConfig.PER_SHARD_V1, InputPipelineConfig.PER_HOST_V1,
            InputPipelineConfig.PER_HOST_V2, InputPipelineConfig.BROADCAST,
            InputPipelineConfig.SLICED) == (1, 2, 3, 4, 5)


def test_tpu_config_defaults():
    c = TPUConfig()
    assert c == (2, None, None, InputPipelineConfig.PER_HOST_V1, None, None, None,
                 InputPipelineConfig.PER_HOST_V1, 1, False, None)
    assert c._fields == (
            "iterations_per_loop", "num_shards", "num_cores_per_replica",
            "per_host_input_for_training", "tpu_job_name", "initial_infeed_sleep_secs",
            "input_partition_dims", "eval_training_input_configuration",
            "experimental_host_call_every_n_steps",
            "experimental_allow_per_host_v2_parallel_get_next", "experimental_feed_hook")


def test_tpu_config_is_namedtuple_positional_and_replace():
    c = TPUConfig(100, 8)
    assert c.iterations_per_loop == 100 and c.num_shards == 8
    assert isinstance(c, tuple)
    r = c._replace(iterations_per_loop=7)
    assert isinstance(r, TPUConfig)
    assert r.iterations_per_loop == 7 and r.num_shards == 8
    assert c.iterations_per_loop == 100


@pytest.mark.parametrize("value,expected", [
        (True, InputPipelineConfig.PER_HOST_V1),
        (False, InputPipelineConfig.PER_SHARD_V1),
        (InputPipelineConfig.PER_HOST_V2, InputPipelineConfig.PER_HOST_V2),
        (InputPipelineConfig.BROADCAST, InputPipelineConfig.BROADCAST),
        (np.int64(3), InputPipelineConfig.PER_HOST_V2),
])
def test_per_host_input_mapping(value, expected):
    got = TPUConfig(per_host_input_for_training=value).per_host_input_for_training
    assert got == expected and type(got) is int


@pytest.mark.parametrize("value", [0, 6, "per_host", None])
def test_per_host_input_invalid(value):
    with pytest.raises(ValueError, match="`per_host_input_for_training` must be True, False"):
        TPUConfig(per_host_input_for_training=value)


@pytest.mark.parametrize("value,expected", [
        (5, IterationsPerLoop(5, "count")),
        ("12", IterationsPerLoop(12, "count")),
        ("30s", IterationsPerLoop(30, "seconds")),
        ("2m", IterationsPerLoop(120, "seconds")),
        ("1h", IterationsPerLoop(3600, "seconds")),
        (np.int32(4), IterationsPerLoop(4, "count")),
])
def test_parse_iterations_per_loop(value, expected):
    assert parse_iterations_per_loop(value) == expected
    assert TPUConfig(iterations_per_loop=value).parsed_iterations_per_loop == expected


@pytest.mark.parametrize("value", [0, -1, 2.5, "0s", "10d", "5|", "", True, None, "s"])
def test_iterations_per_loop_invalid(value):
    with pytest.raises(ValueError) as e:
        TPUConfig(iterations_per_loop=value)
    assert str(e.value).startswith(
            "Invalid TPUConfig `iterations_per_loop` value: {!r}.".format(value))
    assert "`3600s`, `60m`, `1h`" in str(e.value)
    assert "Value must be positive" in str(e.value)  # Legacy's words, which its tests match.


def test_num_shards_validation():
    assert TPUConfig(num_shards=8).num_shards == 8
    with pytest.raises(TypeError) as e:
        TPUConfig(num_shards=2.0)
    assert str(e.value) == ("TPUConfig `num_shards` must be int, got float (2.0). "
                            "Pass a positive integer.")
    with pytest.raises(ValueError) as e:
        TPUConfig(num_shards=0)
    assert str(e.value) == ("TPUConfig `num_shards` must be positive, got 0. "
                            "Pass an integer >= 1.")


@pytest.mark.parametrize("cores", [1, 2, 4, 8, 16, 32, 64, 128])
def test_num_cores_per_replica_allowed(cores):
    assert TPUConfig(num_cores_per_replica=cores).num_cores_per_replica == cores


@pytest.mark.parametrize("cores", [0, 3, 256, True])
def test_num_cores_per_replica_rejected(cores):
    with pytest.raises(ValueError) as e:
        TPUConfig(num_cores_per_replica=cores)
    assert str(e.value) == (
            "num_cores_per_replica must be 1, 2, 4, 8, 16, 32, 64, 128; got {!r}."
            .format(cores))


def test_input_partition_dims_rules():
    ok = TPUConfig(num_cores_per_replica=4,
                   per_host_input_for_training=InputPipelineConfig.PER_HOST_V2,
                   input_partition_dims=[[1, 2, 2, 1], None])
    assert ok.input_partition_dims == [[1, 2, 2, 1], None]
    with pytest.raises(ValueError, match=r"^input_partition_dims must be a list/tuple with "
                                         r"one or two elements"):
        TPUConfig(num_cores_per_replica=4, per_host_input_for_training=3,
                  input_partition_dims=[[1], [1], [1]])
    with pytest.raises(ValueError, match=r"^input_partition_dims is only supported in "
                                         r"PER_HOST_V2 mode\. per_host_input_for_training is "
                                         r"True"):
        TPUConfig(num_cores_per_replica=4, input_partition_dims=[[1, 2]])
    with pytest.raises(ValueError, match=r"^input_partition_dims requires setting "
                                         r"num_cores_per_replica\."):
        TPUConfig(per_host_input_for_training=3, input_partition_dims=[[1, 2]])


def test_eval_training_input_configuration():
    assert TPUConfig(eval_training_input_configuration=5).eval_training_input_configuration == 5
    with pytest.raises(ValueError) as e:
        TPUConfig(eval_training_input_configuration=InputPipelineConfig.PER_HOST_V2)
    assert str(e.value) == ("`eval_training_input_configuration` must be PER_HOST_V1 or "
                            "SLICED; got 3.")


def test_initial_infeed_sleep_and_host_call_every_n_steps():
    assert TPUConfig(initial_infeed_sleep_secs=3).initial_infeed_sleep_secs == 3
    assert TPUConfig(initial_infeed_sleep_secs=0).initial_infeed_sleep_secs == 0
    with pytest.raises(ValueError, match=r"^TPUConfig `initial_infeed_sleep_secs` must be "
                                         r"positive, got -2\."):
        TPUConfig(initial_infeed_sleep_secs=-2)
    with pytest.raises(TypeError, match=r"^TPUConfig `initial_infeed_sleep_secs` must be int, "
                                        r"got float"):
        TPUConfig(initial_infeed_sleep_secs=1.5)
    assert TPUConfig(experimental_host_call_every_n_steps=4)[8] == 4
    with pytest.raises(ValueError, match=r"^TPUConfig `experimental_host_call_every_n_steps` "
                                         r"must be positive, got 0\."):
        TPUConfig(experimental_host_call_every_n_steps=0)


def test_tpu_job_name_from_tf_config(monkeypatch):
    _set_tf_config(monkeypatch, {"service": {"tpu_worker_job_name": "my_tpu"}})
    assert TPUConfig().tpu_job_name == "my_tpu"
    assert TPUConfig(tpu_job_name="explicit").tpu_job_name == "explicit"


def test_effective_input_pipeline():
    c = TPUConfig()
    assert c.effective_input_pipeline(is_training=True) == InputPipelineConfig.PER_HOST_V1
    shard = TPUConfig(per_host_input_for_training=False)
    assert shard.effective_input_pipeline(is_training=True) == InputPipelineConfig.PER_SHARD_V1
    assert shard.effective_input_pipeline(is_training=False) == InputPipelineConfig.PER_HOST_V1
    v2 = TPUConfig(per_host_input_for_training=3)
    assert v2.effective_input_pipeline(is_training=False) == InputPipelineConfig.PER_HOST_V2
    sliced = TPUConfig(per_host_input_for_training=3, eval_training_input_configuration=5)
    assert sliced.effective_input_pipeline(is_training=True) == InputPipelineConfig.PER_HOST_V2
    assert sliced.effective_input_pipeline(is_training=False) == InputPipelineConfig.SLICED
    # `_replace` skips validation, so raw booleans still have to map.
    raw = c._replace(per_host_input_for_training=False)
    assert raw.effective_input_pipeline(is_training=True) == InputPipelineConfig.PER_SHARD_V1


# RunConfig: defaults and properties


def test_run_config_defaults():
    c = RunConfig()
    assert c.model_dir is None
    assert c.tf_random_seed is None
    assert c.save_summary_steps == 100
    assert c.save_checkpoints_steps is None
    assert c.save_checkpoints_secs == 600
    assert c.session_config is None
    assert c.keep_checkpoint_max == 5
    assert c.keep_checkpoint_every_n_hours == 10000
    assert c.log_step_count_steps == 100
    assert c.train_distribute is None and c.eval_distribute is None
    assert c.experimental_distribute is None
    assert c.device_fn is None and c.protocol is None
    assert c.experimental_max_worker_delay_secs is None
    assert c.session_creation_timeout_secs == 7200
    assert c.checkpoint_save_graph_def is True
    assert c.tpu_config == TPUConfig()
    assert c.cluster is None
    assert c.master == "" and c.evaluation_master == ""
    assert c.task_type == "worker" and c.task_id == 0
    assert c.is_chief is True
    assert c.num_worker_replicas == 1 and c.num_ps_replicas == 0
    assert c.global_id_in_cluster == 0
    assert c.cluster_spec.as_dict() == {}
    assert c.service is None


def test_run_config_properties_are_read_only():
    c = RunConfig(model_dir="/tmp/x")
    with pytest.raises(AttributeError):
        c.model_dir = "/tmp/y"


def test_run_config_positional_tpu_config_and_masters():
    tpu = TPUConfig(iterations_per_loop=50)
    c = RunConfig(tpu, None, "grpc://10.0.0.1:8470")
    assert c.tpu_config.iterations_per_loop == 50
    assert c.master == "grpc://10.0.0.1:8470"
    assert c.evaluation_master == "grpc://10.0.0.1:8470"
    c2 = RunConfig(master="grpc://a", evaluation_master="grpc://b")
    assert (c2.master, c2.evaluation_master) == ("grpc://a", "grpc://b")


def test_save_checkpoint_defaults_and_conflict():
    c = RunConfig(save_checkpoints_steps=50)
    assert (c.save_checkpoints_steps, c.save_checkpoints_secs) == (50, None)
    c = RunConfig(save_checkpoints_secs=30)
    assert (c.save_checkpoints_steps, c.save_checkpoints_secs) == (None, 30)
    c = RunConfig(save_checkpoints_steps=None, save_checkpoints_secs=None)
    assert (c.save_checkpoints_steps, c.save_checkpoints_secs) == (None, None)
    with pytest.raises(ValueError) as e:
        RunConfig(save_checkpoints_steps=10, save_checkpoints_secs=20)
    assert str(e.value) == (
            "`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set. Got "
            "save_checkpoints_steps=10 and save_checkpoints_secs=20; pass only one of them "
            "(set the other to None).")


@pytest.mark.parametrize("kwargs,message", [
        ({"save_summary_steps": -1},
         "save_summary_steps should be >= 0, got -1. Use 0 to disable summaries."),
        ({"save_checkpoints_steps": -5},
         "save_checkpoints_steps should be >= 0, got -5. "
         "Use None to disable step-based checkpoints."),
        ({"save_checkpoints_secs": -5},
         "save_checkpoints_secs should be >= 0, got -5. "
         "Use None to disable time-based checkpoints."),
        ({"keep_checkpoint_max": -1},
         "keep_checkpoint_max should be >= 0, got -1. Use 0 or None to keep every "
         "checkpoint."),
        ({"keep_checkpoint_every_n_hours": 0},
         "keep_checkpoint_every_n_hours should be > 0, got 0. Use a positive number of "
         "hours (the default 10000 disables the feature)."),
        ({"log_step_count_steps": 0},
         "log_step_count_steps should be > 0, got 0. Use a positive step count."),
        ({"session_creation_timeout_secs": 0},
         "session_creation_timeout_secs should be > 0, got 0. "
         "Use a positive number of seconds."),
        ({"session_config": {"allow_soft_placement": True}},
         "session_config must be instance of ConfigProto, got {'allow_soft_placement': "
         "True}. Pass a tf.compat.v1.ConfigProto or None."),
        ({"tf_random_seed": 1.5},
         "tf_random_seed must be integer, got 1.5. Pass an int seed or None."),
        ({"experimental_max_worker_delay_secs": 2.5},
         "experimental_max_worker_delay_secs must be an integer if set, got 2.5. "
         "Pass an int number of seconds or None."),
        ({"protocol": "http"},
         "protocol should be grpc or grpc+verbs, got 'http'. "
         "Pass 'grpc', 'grpc+verbs' or None."),
        ({"tpu_config": {"iterations_per_loop": 2}},
         "tpu_config must be a TPUConfig, got {'iterations_per_loop': 2}. "
         "Pass tpu_estimator_compat.config.TPUConfig(...) or None."),
])
def test_run_config_value_errors(kwargs, message):
    with pytest.raises(ValueError) as e:
        RunConfig(**kwargs)
    assert str(e.value) == message


def test_run_config_type_error_for_non_numbers():
    with pytest.raises(TypeError) as e:
        RunConfig(save_summary_steps="10")
    assert str(e.value) == ("save_summary_steps must be a number, got str ('10'). "
                            "Use 0 to disable summaries.")


def test_device_fn_must_take_op():
    def good(op):
        return "/cpu:0"

    assert RunConfig(device_fn=good).device_fn is good
    with pytest.raises(ValueError) as e:
        RunConfig(device_fn=lambda op, extra: "")
    assert str(e.value).startswith(
            'device_fn must be callable with exactly one argument "op", got <function')
    with pytest.raises(ValueError, match='^device_fn must be callable'):
        RunConfig(device_fn="cpu")


def test_model_dir_handling(tmp_path):
    assert RunConfig(model_dir=pathlib.Path(tmp_path)).model_dir == str(tmp_path)
    assert RunConfig(model_dir="~/m").model_dir == "~/m"  # Legacy did not expand `~`.
    with pytest.raises(ValueError) as e:
        RunConfig(model_dir="")
    assert str(e.value) == "model_dir should be non-empty, got ''. Pass a path or None."


def test_session_config_accepted():
    sc = tf.compat.v1.ConfigProto(allow_soft_placement=True)
    assert RunConfig(session_config=sc).session_config is sc


# replace


def test_replace_returns_new_instance_and_keeps_original():
    c = RunConfig(model_dir="/tmp/a", save_summary_steps=10)
    r = c.replace(model_dir="/tmp/b", tf_random_seed=3)
    assert r is not c and isinstance(r, RunConfig)
    assert (r.model_dir, r.tf_random_seed, r.save_summary_steps) == ("/tmp/b", 3, 10)
    assert (c.model_dir, c.tf_random_seed) == ("/tmp/a", None)


def test_replace_checkpoint_cadence_switch():
    c = RunConfig()
    r = c.replace(save_checkpoints_steps=100)
    assert (r.save_checkpoints_steps, r.save_checkpoints_secs) == (100, None)
    r2 = r.replace(save_checkpoints_secs=60)
    assert (r2.save_checkpoints_steps, r2.save_checkpoints_secs) == (None, 60)
    with pytest.raises(ValueError, match="cannot be both set"):
        c.replace(save_checkpoints_steps=1, save_checkpoints_secs=1)


def test_replace_tpu_config():
    c = RunConfig()
    r = c.replace(tpu_config=TPUConfig(iterations_per_loop=9))
    assert r.tpu_config.iterations_per_loop == 9
    assert c.tpu_config.iterations_per_loop == 2
    assert c.replace(tpu_config=None).tpu_config == TPUConfig()


def test_replace_unknown_or_fixed_keys():
    c = RunConfig()
    with pytest.raises(ValueError) as e:
        c.replace(master="grpc://x")
    assert str(e.value).startswith(
            "Replacing master is not supported. Allowed properties are ['model_dir', ")
    with pytest.raises(ValueError, match="^Replacing bogus is not supported"):
        c.replace(bogus=1)


def test_replace_validates():
    with pytest.raises(ValueError, match=r"^log_step_count_steps should be > 0, got -3\."):
        RunConfig().replace(log_step_count_steps=-3)


def test_replace_copies_session_config():
    sc = tf.compat.v1.ConfigProto(allow_soft_placement=True)
    c = RunConfig(session_config=sc)
    r = c.replace(tf_random_seed=1)
    assert r.session_config == sc and r.session_config is not sc


# master / cluster


def _resolver():
    spec = tf.train.ClusterSpec({"worker": ["10.1.1.1:8470"]})
    return tf.distribute.cluster_resolver.SimpleClusterResolver(
            spec, master="grpc://10.1.1.1:8470")


def test_cluster_resolver_supplies_master_and_session_config():
    resolver = _resolver()
    c = RunConfig(cluster=resolver)
    assert c.cluster is resolver
    assert c.master == "grpc://10.1.1.1:8470"
    assert c.evaluation_master == "grpc://10.1.1.1:8470"
    assert c.cluster_spec.as_dict() == {"worker": ["10.1.1.1:8470"]}
    assert c.session_config.allow_soft_placement is True
    assert c.session_config.isolate_session_state is True
    assert c.session_config.cluster_def == resolver.cluster_spec().as_cluster_def()


def test_cluster_does_not_mutate_user_session_config():
    sc = tf.compat.v1.ConfigProto(log_device_placement=True)
    c = RunConfig(cluster=_resolver(), session_config=sc)
    assert not sc.HasField("cluster_def")
    assert c.session_config.log_device_placement is True
    assert c.session_config.HasField("cluster_def")


def test_master_and_cluster_conflict():
    with pytest.raises(ValueError) as e:
        RunConfig(master="grpc://x", cluster=_resolver())
    assert str(e.value).startswith("Both master and cluster are set: `master`='grpc://x', "
                                   "`cluster`=")


def test_cluster_and_session_cluster_def_conflict():
    sc = tf.compat.v1.ConfigProto()
    sc.cluster_def.CopyFrom(tf.train.ClusterSpec({"w": ["a:1"]}).as_cluster_def())
    with pytest.raises(ValueError, match=r"^You cannot provide a ClusterResolver and "
                                         r"session_config.cluster_def\."):
        RunConfig(cluster=_resolver(), session_config=sc)


# TF_CONFIG


_CLUSTER = {"chief": ["host0:2222"], "ps": ["host1:2222", "host2:2222"],
            "worker": ["host3:2222", "host4:2222", "host5:2222"]}


def test_tf_config_worker(monkeypatch):
    _set_tf_config(monkeypatch, {"cluster": _CLUSTER, "task": {"type": "worker", "index": 1}})
    c = RunConfig()
    assert c.task_type == "worker" and c.task_id == 1
    assert c.is_chief is False
    assert c.master == "grpc://host4:2222"
    assert c.evaluation_master == "grpc://host4:2222"  # TPU RunConfig falls back to master.
    assert c.num_ps_replicas == 2 and c.num_worker_replicas == 4
    assert c.global_id_in_cluster == 2
    assert c.cluster_spec.as_dict() == _CLUSTER
    assert isinstance(c.cluster_spec, tf.train.ClusterSpec)


def test_tf_config_chief(monkeypatch):
    _set_tf_config(monkeypatch, {"cluster": _CLUSTER, "task": {"type": "chief", "index": 0}})
    c = RunConfig()
    assert (c.task_type, c.task_id, c.is_chief) == ("chief", 0, True)
    assert c.master == "grpc://host0:2222"
    assert c.global_id_in_cluster == 0


def test_tf_config_ps_global_id_is_last(monkeypatch):
    _set_tf_config(monkeypatch, {"cluster": _CLUSTER, "task": {"type": "ps", "index": 1}})
    assert RunConfig().global_id_in_cluster == 5


def test_tf_config_evaluator(monkeypatch):
    _set_tf_config(monkeypatch, {"cluster": _CLUSTER, "task": {"type": "evaluator", "index": 0},
                                 "eval_session_master": "grpc://eval"})
    c = RunConfig()
    assert (c.task_type, c.is_chief, c.master) == ("evaluator", False, "")
    assert c.evaluation_master == "grpc://eval"
    assert c.num_worker_replicas == 0 and c.num_ps_replicas == 0
    assert c.global_id_in_cluster is None
    assert c.cluster_spec.as_dict() == {}


def test_tf_config_single_node_cluster_is_local(monkeypatch):
    _set_tf_config(monkeypatch, {"cluster": {"chief": ["h:1"]},
                                 "task": {"type": "chief", "index": 0}})
    c = RunConfig()
    assert (c.master, c.is_chief, c.num_worker_replicas) == ("", True, 1)


@pytest.mark.parametrize("index", [0, 1])
def test_tf_config_workers_only_worker_zero_is_chief(monkeypatch, index):
    """The MultiWorkerMirroredStrategy layout: no chief job, worker 0 leads."""
    _set_tf_config(monkeypatch, {"cluster": {"worker": ["w0:1", "w1:1"]},
                                 "task": {"type": "worker", "index": index}})
    c = RunConfig()
    assert (c.task_type, c.task_id, c.is_chief) == ("worker", index, index == 0)
    assert (c.num_worker_replicas, c.global_id_in_cluster) == (2, index)
    assert c.master == f"grpc://w{index}:1"


def test_tf_config_master_job(monkeypatch):
    _set_tf_config(monkeypatch, {"cluster": {"master": ["m:1"], "worker": ["w:1"]},
                                 "task": {"type": "master", "index": 0}})
    c = RunConfig()
    assert (c.is_chief, c.master, c.num_worker_replicas) == (True, "grpc://m:1", 2)


def test_tf_config_local_mode_session_master_and_model_dir(monkeypatch):
    _set_tf_config(monkeypatch, {"session_master": "grpc://local", "model_dir": "/tmp/env",
                                 "service": {"x": 1}})
    c = RunConfig()
    assert (c.master, c.evaluation_master, c.model_dir) == ("grpc://local", "grpc://local",
                                                            "/tmp/env")
    assert c.service == {"x": 1}
    assert RunConfig(model_dir="/tmp/env").model_dir == "/tmp/env"


@pytest.mark.parametrize("tf_config,error,message", [
        ({"task": {"type": "chief"}}, ValueError,
         "If \"cluster\" is not set in TF_CONFIG, task type must be WORKER, got 'chief'."),
        ({"task": {"type": "worker", "index": 2}}, ValueError,
         "If \"cluster\" is not set in TF_CONFIG, task index must be 0, got 2."),
        ({"cluster": {"ps": ["a:1"], "worker": ["b:1"]}, "task": {"type": "worker",
                                                                  "index": 0}}, ValueError,
         "If \"cluster\" is set in TF_CONFIG, it must have one \"chief\" node. "
         "Got jobs ['ps', 'worker']."),
        ({"cluster": {"chief": ["a:1", "b:1"]}, "task": {"type": "chief", "index": 0}},
         ValueError,
         "The \"cluster\" in TF_CONFIG must have only one \"chief\" node, got ['a:1', 'b:1']."),
        ({"cluster": {"worker": ["a:1", "b:1"]}}, ValueError,
         "If \"cluster\" is set in TF_CONFIG, it must have one \"chief\" node. Got jobs "
         "['worker']; add a \"chief\" job, or, for a cluster of workers only, this task's "
         "\"task\": {\"type\": \"worker\", \"index\": ...}."),
        ({"cluster": {"chief": ["a:1"]}, "task": {"index": 0}}, ValueError,
         "If \"cluster\" is set in TF_CONFIG, task type must be set: add "
         "\"task\": {\"type\": ..., \"index\": ...}."),
        ({"cluster": {"chief": ["a:1"]}, "task": {"type": "chief"}}, ValueError,
         "If \"cluster\" is set in TF_CONFIG, task index must be set."),
        ({"cluster": {"chief": ["a:1"]}, "task": {"type": "chief", "index": -1}}, ValueError,
         "Task index must be non-negative number, got -1."),
        ({"cluster": {"chief": ["a:1"], "master": ["b:1"]},
          "task": {"type": "chief", "index": 0}}, ValueError,
         "If `master` node exists in `cluster`, job `chief` is not supported. "
         "Keep only one of them in TF_CONFIG."),
        ({"cluster": {"master": ["b:1"]}, "task": {"type": "evaluator", "index": 0}},
         ValueError, "If `master` node exists in `cluster`, task_type `evaluator` is not "
         "supported."),
        ({"service": ["x"]}, TypeError,
         "If \"service\" is set in TF_CONFIG, it must be a dict. Given list."),
        ({"model_dir": ""}, ValueError,
         "model_dir in TF_CONFIG should be non-empty, got ''. Remove the key or set a path."),
])
def test_tf_config_errors(monkeypatch, tf_config, error, message):
    _set_tf_config(monkeypatch, tf_config)
    with pytest.raises(error) as e:
        RunConfig()
    assert str(e.value) == message


def test_tf_config_task_not_in_cluster(monkeypatch):
    _set_tf_config(monkeypatch, {"cluster": {"chief": ["a:1"]},
                                 "task": {"type": "worker", "index": 0}})
    with pytest.raises(ValueError, match="^worker is not a valid task_type in the cluster_spec"):
        RunConfig()
    _set_tf_config(monkeypatch, {"cluster": {"chief": ["a:1"], "worker": ["b:1"]},
                                 "task": {"type": "worker", "index": 3}})
    with pytest.raises(ValueError, match="^3 is not a valid task_id for task_type worker"):
        RunConfig()


def test_tf_config_model_dir_conflict(monkeypatch):
    _set_tf_config(monkeypatch, {"model_dir": "/tmp/env"})
    with pytest.raises(ValueError) as e:
        RunConfig(model_dir="/tmp/other")
    assert str(e.value).startswith(
            "`model_dir` provided in RunConfig construct, if set, must have the same value as "
            "the model_dir in TF_CONFIG. model_dir: /tmp/other\n")


def test_tf_config_invalid_json(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match=r"^`TF_CONFIG` environment variable is not valid "
                                         r"JSON"):
        RunConfig()


def test_empty_tf_config_is_local(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", "")
    assert RunConfig().is_chief is True


# validate_model_dir


def test_validate_model_dir_agreement_and_precedence(tmp_path):
    d = str(tmp_path)
    assert validate_model_dir(d, None) == d
    assert validate_model_dir(d, RunConfig(model_dir=d)) == d
    assert validate_model_dir(pathlib.Path(d), RunConfig(model_dir=d)) == d
    assert validate_model_dir(None, RunConfig(model_dir=d)) == d
    assert validate_model_dir(d, RunConfig()) == d


def test_validate_model_dir_conflict():
    with pytest.raises(ValueError) as e:
        validate_model_dir("/tmp/a", RunConfig(model_dir="/tmp/b"))
    assert str(e.value) == (
            "`model_dir` are set both in constructor and `RunConfig`, but with different "
            "values. In constructor: '/tmp/a', in `RunConfig`: '/tmp/b'. Set it in one place "
            "only.")


def test_validate_model_dir_temp_dir(caplog):
    with caplog.at_level("WARNING", logger="tensorflow"):  # Legacy's line, in its channel.
        got = validate_model_dir(None, RunConfig())
    assert os.path.isdir(got)
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("tensorflow", "Using temporary folder as model directory: " + got)]
    os.rmdir(got)


def test_validate_model_dir_rejects_non_run_config():
    with pytest.raises(ValueError, match=r"^config must be an instance of `RunConfig`, but "
                                         r"provided \{'model_dir': 'x'\}"):
        validate_model_dir(None, {"model_dir": "x"})


def test_deepcopy_shares_strategies_and_copies_settings():
    strategy = tf.distribute.get_strategy()
    resolver = _resolver()
    sc = tf.compat.v1.ConfigProto(allow_soft_placement=True)
    c = RunConfig(train_distribute=strategy, eval_distribute=strategy, cluster=resolver,
                  session_config=sc, tpu_config=TPUConfig(iterations_per_loop=3))
    d = copy.deepcopy(c)
    assert d is not c
    assert d.train_distribute is strategy and d.eval_distribute is strategy
    assert d.cluster is resolver
    assert d.session_config == c.session_config and d.session_config is not c.session_config
    assert d.tpu_config == c.tpu_config and d.master == c.master


# ---------------------------------------------------------------------------------------------
# TF_CONFIG as legacy RunConfig read it (tests/goldens/tf_config/, recorded on the legacy stack)

def test_tf_config_read_as_legacy_read_it(monkeypatch):
    """Every recorded case: the same properties, or an error starting with legacy's message."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "legacy_recorder"))
    try:
        import tf_config as recorder
    finally:
        sys.path.pop(0)
    with open(os.path.join(os.path.dirname(__file__), "goldens", "tf_config",
                           "legacy.json")) as f:
        golden = json.load(f)
    assert golden["cases"] == json.loads(json.dumps(recorder.CASES))
    shim = recorder.run(cfg.RunConfig)
    for case, legacy, ours in zip(golden["cases"], golden["legacy"], shim):
        if "error" in legacy:
            assert ours.get("error") == legacy["error"], (case, ours)
            # Legacy's words first; the shim adds what was received and the fix.
            stem = legacy["message"].split(" Given <class")[0].rstrip(".")
            assert ours["message"].startswith(stem), (case, ours["message"])
        else:
            assert ours == legacy, case


def test_workers_only_cluster_is_accepted_where_legacy_wanted_a_chief(monkeypatch):
    """The shim's one known difference: workers only is MultiWorkerMirroredStrategy's usual
    layout (worker 0 leads); legacy accepted it only with a `train_distribute`."""
    _set_tf_config(monkeypatch, {"cluster": {"worker": ["w0:1", "w1:1"]},
                                 "task": {"type": "worker", "index": 1}})
    config = cfg.RunConfig()
    assert (config.is_chief, config.num_worker_replicas, config.global_id_in_cluster) == (
        False, 2, 1)


def test_peer_timeout_from_argument_environment_or_engine_default(monkeypatch):
    monkeypatch.delenv(cfg.PEER_TIMEOUT_ENV, raising=False)
    assert cfg.RunConfig().peer_timeout_secs is None
    assert cfg.RunConfig(peer_timeout_secs=30).peer_timeout_secs == 30
    monkeypatch.setenv(cfg.PEER_TIMEOUT_ENV, "12.5")
    assert cfg.RunConfig().peer_timeout_secs == 12.5
    assert cfg.RunConfig(peer_timeout_secs=3).peer_timeout_secs == 3
    assert cfg.RunConfig().replace(peer_timeout_secs=7).peer_timeout_secs == 7
    monkeypatch.setenv(cfg.PEER_TIMEOUT_ENV, "soon")
    with pytest.raises(ValueError, match=r"^`TPU_ESTIMATOR_COMPAT_PEER_TIMEOUT_SECS` "
                                         r"environment variable must be a positive number of "
                                         r"seconds, got 'soon'\. Set e\.g\."):
        cfg.RunConfig()
    monkeypatch.delenv(cfg.PEER_TIMEOUT_ENV)
    with pytest.raises(ValueError, match=r"^peer_timeout_secs should be > 0, got 0\. Use a "
                                         r"positive number of seconds"):
        cfg.RunConfig(peer_timeout_secs=0)


# `Using config: ...` as legacy TPUEstimator (TF 2.15.1, tensorflow-estimator 2.15.0) logged
# it for this config, recorded with tests/scripts/logging/tiny_tpu_estimator.py run by
# .venv-legacy/bin/python (model_dir renamed).
LEGACY_CONFIG_LINE = (
    "{'_model_dir': '/tmp/model', '_tf_random_seed': None, '_save_summary_steps': 100"
    ", '_save_checkpoints_steps': 3, '_save_checkpoints_secs': None, '_session_config"
    "': allow_soft_placement: true\ngraph_options {\n  rewrite_options {\n    meta_optim"
    "izer_iterations: ONE\n  }\n}\n, '_keep_checkpoint_max': 5, '_keep_checkpoint_every_"
    "n_hours': 10000, '_log_step_count_steps': None, '_train_distribute': None, '_dev"
    "ice_fn': None, '_protocol': None, '_eval_distribute': None, '_experimental_distr"
    "ibute': None, '_experimental_max_worker_delay_secs': None, '_session_creation_ti"
    "meout_secs': 7200, '_checkpoint_save_graph_def': True, '_service': None, '_clust"
    "er_spec': ClusterSpec({}), '_task_type': 'worker', '_task_id': 0, '_global_id_in"
    "_cluster': 0, '_master': '', '_evaluation_master': '', '_is_chief': True, '_num_"
    "ps_replicas': 0, '_num_worker_replicas': 1, '_tpu_config': TPUConfig(iterations_"
    'per_loop=2, num_shards=None, num_cores_per_replica=None, per_host_input_for_trai'
    'ning=2, tpu_job_name=None, initial_infeed_sleep_secs=None, input_partition_dims='
    'None, eval_training_input_configuration=2, experimental_host_call_every_n_steps='
    '1, experimental_allow_per_host_v2_parallel_get_next=False, experimental_feed_hoo'
    "k=None), '_cluster': None}"
)


def test_legacy_config_str_is_legacys_using_config_line():
    config = RunConfig(model_dir="/tmp/model", save_checkpoints_steps=3, log_step_count_steps=2,
                       tpu_config=TPUConfig(iterations_per_loop=2))
    assert cfg.legacy_config_str(config) == LEGACY_CONFIG_LINE


@pytest.mark.parametrize("task,filters", [
        ({"type": "chief", "index": 0}, ["/job:ps", "/job:chief"]),
        ({"type": "worker", "index": 1}, ["/job:ps", "/job:worker/task:1"]),
        ({"type": "ps", "index": 0}, ["/job:ps", "/job:worker", "/job:chief", "/job:master"]),
        ({"type": "evaluator", "index": 0}, None),
])
def test_distributed_tf_config_sets_legacys_device_filters(monkeypatch, task, filters):
    """Legacy's between-graph default: a task sees only the parameter servers and itself."""
    _set_tf_config(monkeypatch, {"cluster": {"chief": ["a:1"], "ps": ["b:1"],
                                             "worker": ["c:1", "d:1"]}, "task": task})
    assert RunConfig().session_config is None  # TPUEstimator's ran in-graph: no filters.
    session_config = cfg.EstimatorRunConfig().session_config
    if filters is None:
        assert session_config is None
        return
    assert list(session_config.device_filters) == filters
    assert session_config.allow_soft_placement
    assert session_config.graph_options.rewrite_options.meta_optimizer_iterations == 1
    given = tf.compat.v1.ConfigProto(log_device_placement=True)
    assert cfg.EstimatorRunConfig(session_config=given).session_config is given
    strategy = tf.distribute.get_strategy()  # A strategy sets its own (legacy's branch).
    assert cfg.EstimatorRunConfig(train_distribute=strategy).session_config is None


@pytest.mark.parametrize("tf_config,master", [
        ({"session_master": "_m"}, "_m"),
        ({"cluster": {"chief": ["h0:0"], "ps": ["h1:1"], "worker": ["h2:2"]},
          "task": {"type": "worker", "index": 0}}, "grpc://h2:2"),
])
def test_evaluation_master_estimator_keeps_tf_configs_tpu_falls_back(monkeypatch, tf_config,
                                                                      master):
    """Legacy: `tf.estimator.RunConfig` kept TF_CONFIG's evaluation master (''), its TPU
    subclass used `master` for a user without a cluster manager."""
    _set_tf_config(monkeypatch, tf_config)
    estimator_config, tpu_config = cfg.EstimatorRunConfig(), RunConfig()
    assert (estimator_config.master, estimator_config.evaluation_master) == (master, "")
    assert (tpu_config.master, tpu_config.evaluation_master) == (master, master)
    assert isinstance(tpu_config, cfg.EstimatorRunConfig)
    assert type(tpu_config.replace(save_summary_steps=3)) is RunConfig


def test_tf2_parameter_server_strategy_is_refused_as_legacy():
    pss = tf.distribute.experimental.ParameterServerStrategy
    for name in ("train_distribute", "eval_distribute"):
        with pytest.raises(ValueError, match=r"^Please use `tf\.compat\.v1\.distribute\."
                                             r"experimental\.ParameterServerStrategy` .*`" + name):
            RunConfig(**{name: pss.__new__(pss)})
