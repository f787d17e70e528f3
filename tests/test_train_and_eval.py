"""train_and_evaluate on one machine: checkpoints, eval dirs and exports it produces."""

import os

import numpy as np
import pytest
import tensorflow as tf

import models
from tpu_estimator_compat import (BestExporter, EvalSpec, LatestExporter, RunConfig,
                                  TPUConfig, TPUEstimator, TrainSpec, train_and_evaluate)
from tpu_estimator_compat.export import saved_model as export_lib


def features_model_fn(features, labels, mode, params):
    if isinstance(features, dict):
        features = features["x"]
    return models.linear_full_model_fn(features, labels, mode, params)


def eval_input_fn(params):
    x, y = models.digits(128, flat=True)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(params["batch_size"])


@pytest.mark.slow_cases('mirrored8')
def test_train_and_evaluate_evaluates_after_checkpoints_and_exports(tmp_path, strategy):
    config = RunConfig(model_dir=str(tmp_path), train_distribute=strategy,
                       eval_distribute=strategy, save_checkpoints_steps=4,
                       tpu_config=TPUConfig(iterations_per_loop=4))
    est = TPUEstimator(model_fn=features_model_fn, config=config, train_batch_size=64,
                       eval_batch_size=64, predict_batch_size=64)
    receiver = export_lib.build_raw_serving_input_receiver_fn(
        {"x": tf.TensorSpec([None, 64], tf.float32)})
    eval_steps_seen = []

    class Seen(tf.compat.v1.train.SessionRunHook):
        def end(self, session):
            eval_steps_seen.append(int(session.run(tf.compat.v1.train.get_global_step())))

    result, exports = train_and_evaluate(
        est, TrainSpec(models.digits_input_fn(256, flat=True), max_steps=12),
        EvalSpec(eval_input_fn, steps=None, name="val", throttle_secs=0, hooks=[Seen()],
                 exporters=[LatestExporter("latest", receiver, exports_to_keep=2),
                            BestExporter("best", receiver)]))
    # Checkpoints at 0 (skipped: untrained), 4, 8, 12; each later one evaluated once.
    assert eval_steps_seen == [4, 8, 12]
    assert result["global_step"] == 12
    assert os.path.isdir(os.path.join(str(tmp_path), "eval_val"))
    latest = sorted(os.listdir(os.path.join(str(tmp_path), "export", "latest")))
    assert len(latest) == 2  # exports_to_keep
    best = os.listdir(os.path.join(str(tmp_path), "export", "best"))
    assert 1 <= len(best) <= 3
    # As legacy's listener: the last evaluation's exports only, one per exporter in order.
    assert len(exports) == 2
    last = exports[0].decode() if isinstance(exports[0], bytes) else exports[0]
    assert os.path.basename(last) == latest[-1]
    loaded = tf.saved_model.load(os.path.join(str(tmp_path), "export", "latest", latest[-1]))
    x, _ = models.digits(4, flat=True)
    logits = loaded.signatures["serving_default"](x=tf.constant(x))["logits"].numpy()
    reader = tf.train.load_checkpoint(est.latest_checkpoint())
    np.testing.assert_allclose(logits, x @ reader.get_tensor("w") + reader.get_tensor("b"),
                               rtol=1e-5, atol=1e-5)


def test_throttle_skips_evaluations(tmp_path):
    config = RunConfig(model_dir=str(tmp_path), save_checkpoints_steps=2,
                       tpu_config=TPUConfig(iterations_per_loop=2))
    est = TPUEstimator(model_fn=features_model_fn, config=config, use_tpu=False,
                       train_batch_size=64, eval_batch_size=64)
    seen = []

    class Seen(tf.compat.v1.train.SessionRunHook):
        def end(self, session):
            seen.append(int(session.run(tf.compat.v1.train.get_global_step())))

    train_and_evaluate(est, TrainSpec(models.digits_input_fn(256, flat=True), max_steps=8),
                       EvalSpec(eval_input_fn, steps=1, throttle_secs=3600, hooks=[Seen()]))
    # The first trained checkpoint is evaluated, the rest throttled, the final one at the end.
    assert seen == [2, 8]


def test_spec_validation():
    with pytest.raises(ValueError, match=r"Must specify max_steps > 0"):
        TrainSpec(lambda params: None, max_steps=0)
    with pytest.raises(ValueError, match=r"unique names"):
        EvalSpec(lambda params: None, exporters=[LatestExporter("a", None),
                                                 LatestExporter("a", None)])
    with pytest.raises(TypeError, match=r"`train_spec` must have type `TrainSpec`"):
        train_and_evaluate(None, None, None)


class _ClusterConfig:
    def __init__(self, task_type):
        self.task_type, self.task_id, self.is_chief = task_type, 0, task_type == "chief"
        self.cluster_spec = tf.train.ClusterSpec({"master": ["h:1"], "ps": ["h:2"]})


class _Recorder:
    def __init__(self, task_type):
        self.config = _ClusterConfig(task_type)
        self.trained = []

    def train(self, input_fn, max_steps=None, hooks=None, saving_listeners=None):
        self.trained.append((max_steps, hooks, saving_listeners))


def test_cluster_roles_train_and_return_none_as_legacy():
    """chief/worker/ps train (serving happens inside train()); only the chief gets the
    saving listeners; a master task's in-training evaluation is refused with the fix."""
    listener = tf.compat.v1.train.CheckpointSaverListener()
    train_spec = TrainSpec(lambda params: None, max_steps=9, saving_listeners=[listener])
    eval_spec = EvalSpec(lambda params: None)
    for role, listeners in (("chief", [listener]), ("worker", None), ("ps", None)):
        estimator = _Recorder(role)
        assert train_and_evaluate(estimator, train_spec, eval_spec) is None
        assert estimator.trained == [(9, [], listeners)]
    with pytest.raises(NotImplementedError, match=r"^train_and_evaluate on a `master` task .* "
                                                  r"Rename the job `master` to `chief`"):
        train_and_evaluate(_Recorder("master"), train_spec, eval_spec)
    with pytest.raises(ValueError, match=r"^Task type local is not supported"):
        train_and_evaluate(_Recorder("local"), train_spec, eval_spec)
