"""train_and_evaluate on one machine: checkpoints, eval dirs and exports it produces."""

import json
import os
import time

import numpy as np
import pytest
import tensorflow as tf

import models
from tpu_estimator_compat import (BestExporter, EstimatorSpec, EvalSpec, LatestExporter, RunConfig,
                                  TPUConfig, TPUEstimator, TrainSpec, train_and_evaluate)
from tpu_estimator_compat.api.estimator import Estimator
from tpu_estimator_compat.api.evaluator import ContinuousEvalListener
from tpu_estimator_compat.api.exporters import Exporter
from tpu_estimator_compat.api.train_and_eval import StopAtSecsHook, TrainingExecutor
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
    with pytest.raises(TypeError, match=r"^`eval_spec` must have type `tf.estimator.EvalSpec`"):
        train_and_evaluate(None, None, None)
    with pytest.raises(TypeError, match=r"^`estimator` must have type `tf.estimator.Estimator`"):
        train_and_evaluate(object(), TrainSpec(lambda: 1), EvalSpec(lambda: 1))


# The executor on a real plain Estimator: checkpoints, eval events and exports read back.
_X = np.linspace(-1.0, 1.0, 32, dtype=np.float32).reshape(16, 2)


def _input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": _X}, _X.sum(axis=1, keepdims=True))
                                              ).batch(4).repeat()


def _eval_input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": _X}, _X.sum(axis=1, keepdims=True))
                                              ).batch(8)


def _model_fn(features, labels, mode):
    w = tf.compat.v1.get_variable("w", [2, 1], initializer=tf.compat.v1.zeros_initializer())
    predictions = features["x"] @ w
    loss = tf.compat.v1.losses.mean_squared_error(labels, predictions)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return EstimatorSpec(mode, loss=loss, train_op=train_op, predictions=predictions)


def _estimator(model_dir, **config):
    return Estimator(_model_fn, model_dir=str(model_dir), config=RunConfig(**config))


class _Recorder(Exporter):
    def __init__(self):
        self.calls = []

    @property
    def name(self):
        return "recorder"

    def export(self, estimator, export_path, checkpoint_path, eval_result,
               is_the_final_export):
        self.calls.append((export_path, os.path.basename(checkpoint_path),
                           eval_result["global_step"], is_the_final_export))
        return checkpoint_path


def _eval_steps(model_dir, name):
    """The global steps of the loss summaries in `model_dir/eval[_<name>]`, read back."""
    steps = []
    eval_dir = f"eval_{name}" if name else "eval"
    for path in sorted(tf.io.gfile.glob(os.path.join(model_dir, eval_dir, "events*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            if any(v.tag == "loss" for v in event.summary.value):
                steps.append(event.step)
    return steps


def test_run_local_evaluates_each_checkpoint_after_the_first_and_exports(tmp_path):
    est = _estimator(tmp_path, save_checkpoints_steps=2)
    exporter = _Recorder()
    hooks_seen = []

    class Seen(tf.compat.v1.train.SessionRunHook):
        def begin(self):
            hooks_seen.append("train")

    executor = TrainingExecutor(est, TrainSpec(_input_fn, max_steps=4),
                                EvalSpec(_eval_input_fn, steps=1, name="v", throttle_secs=0,
                                         exporters=exporter),
                                train_hooks=[Seen()])
    metrics, exports = executor.run()
    assert metrics["global_step"] == 4
    assert exports == [est.latest_checkpoint()]
    export_dir = os.path.join(str(tmp_path), "export", "recorder")
    assert exporter.calls == [(export_dir, "model.ckpt-2", 2, False),
                              (export_dir, "model.ckpt-4", 4, True)]
    assert _eval_steps(str(tmp_path), "v") == [2, 4]
    assert hooks_seen == ["train"]


def test_run_local_listener_stops_training_after_the_first_evaluation(tmp_path):
    class StopAfterFirst(ContinuousEvalListener):
        def __init__(self):
            self.results = []

        def after_eval(self, eval_result):
            self.results.append(eval_result)
            return False

    est = _estimator(tmp_path, save_checkpoints_steps=2)
    listener = StopAfterFirst()
    metrics, _ = TrainingExecutor(est, TrainSpec(_input_fn, max_steps=50),
                                  EvalSpec(_eval_input_fn, steps=1, throttle_secs=0),
                                  continuous_eval_listener=listener).run_local()
    assert metrics["global_step"] == 2
    assert [(r.status, os.path.basename(r.checkpoint_path)) for r in listener.results] == [
        ("evaluated", "model.ckpt-2")]
    assert tf.train.load_variable(est.latest_checkpoint(), "global_step") == 2


def test_run_local_throttles_and_evaluates_the_final_checkpoint(tmp_path):
    class NoEvaluation(ContinuousEvalListener):
        def before_eval(self):
            return False

    est = _estimator(tmp_path / "throttled", save_checkpoints_steps=2)
    TrainingExecutor(est, TrainSpec(_input_fn, max_steps=6),
                     EvalSpec(_eval_input_fn, steps=1, throttle_secs=3600)).run_local()
    # Checkpoints at 0 (untrained), 2 (evaluated), 4 (throttled), 6 (the final one).
    assert _eval_steps(str(tmp_path / "throttled"), None) == [2, 6]
    # A listener refusing the first evaluation stops the training there, unevaluated.
    est = _estimator(tmp_path / "refused", save_checkpoints_steps=2)
    result = TrainingExecutor(est, TrainSpec(_input_fn, max_steps=50),
                              EvalSpec(_eval_input_fn, steps=1),
                              continuous_eval_listener=NoEvaluation()).run_local()
    assert result == (None, None)
    assert tf.train.load_variable(est.latest_checkpoint(), "global_step") == 2
    assert not tf.io.gfile.exists(os.path.join(str(tmp_path / "refused"), "eval"))


def test_run_evaluator_evaluates_a_trained_model_dir_and_exports_it_final(tmp_path):
    est = _estimator(tmp_path, save_checkpoints_steps=4)
    est.train(_input_fn, max_steps=4)
    exporter = _Recorder()
    TrainingExecutor(est, TrainSpec(_input_fn, max_steps=4),
                     EvalSpec(_eval_input_fn, steps=1, name="e", start_delay_secs=0,
                              throttle_secs=0, exporters=[exporter])).run_evaluator()
    assert [c[1:] for c in exporter.calls] == [("model.ckpt-4", 4, True)]
    assert _eval_steps(str(tmp_path), "e") == [4]


def test_stop_at_secs_hook_stops_training(tmp_path):
    est = _estimator(tmp_path, save_checkpoints_steps=100)
    est.train(_input_fn, max_steps=1000, hooks=[StopAtSecsHook(0)])
    assert tf.train.load_variable(est.latest_checkpoint(), "global_step") < 1000


def test_executor_checks_its_arguments_and_the_task_type(tmp_path, monkeypatch):
    est = _estimator(tmp_path)
    train_spec, eval_spec = TrainSpec(_input_fn), EvalSpec(_eval_input_fn)
    with pytest.raises(TypeError, match=r"^`train_spec` must have type"):
        TrainingExecutor(est, object(), eval_spec)
    with pytest.raises(TypeError, match=r"^`eval_spec` must be either `None` or have type"):
        TrainingExecutor(est, train_spec, object())
    with pytest.raises(TypeError, match=r"^All hooks must be `SessionRunHook` instances"):
        TrainingExecutor(est, train_spec, eval_spec, train_hooks=[object()])
    with pytest.raises(TypeError, match=r"must have type `_ContinuousEvalListener`"):
        TrainingExecutor(est, train_spec, eval_spec, continuous_eval_listener=object())
    with pytest.raises(TypeError, match=r"^`eval_spec` must have type"):
        TrainingExecutor(est, train_spec, None).run_local()
    for task, match in (("local", r"^`task.type` in TF_CONFIG cannot be `local`"),
                        ("alloc", r"^Task type alloc is not supported. Supported task types "
                                  r"are \['chief', 'evaluator', 'master', 'ps', 'worker'\]$")):
        monkeypatch.setenv("TF_CONFIG", json.dumps(
            {"cluster": {"chief": ["h:0"], task: ["h:1"]}, "task": {"type": task, "index": 0}}))
        executor = TrainingExecutor(_estimator(tmp_path), train_spec, eval_spec)
        with pytest.raises(ValueError, match=match):
            executor.run()


def _cluster_estimator(tmp_path, monkeypatch, task_type, cluster):
    """A real Estimator on a TF_CONFIG cluster whose `train` records instead of training."""
    monkeypatch.setenv("TF_CONFIG", json.dumps(
        {"cluster": cluster, "task": {"type": task_type, "index": 0}}))
    est = Estimator(_model_fn, model_dir=str(tmp_path), config=RunConfig())
    est.trained = []

    def record(input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
        est.trained.append((max_steps, hooks, saving_listeners))
        return est

    est.train = record
    return est


def test_cluster_roles_train_as_legacy(tmp_path, monkeypatch):
    """chief/worker/ps train (a ps serves inside train()); only the chief gets the saving
    listeners; none is delayed; the call returns None."""
    cluster = {"chief": ["h:0"], "worker": ["h:1"], "ps": ["h:2"]}
    listener = tf.compat.v1.train.CheckpointSaverListener()
    hook = tf.compat.v1.train.SessionRunHook()
    train_spec = TrainSpec(_input_fn, max_steps=9, hooks=[hook], saving_listeners=[listener])
    for role, hooks, listeners in (("chief", [hook], (listener,)), ("worker", [hook], None),
                                   ("ps", None, None)):
        est = _cluster_estimator(tmp_path, monkeypatch, role, cluster)
        monkeypatch.setattr(time, "sleep", lambda s: pytest.fail(f"slept {s} s"))
        assert train_and_evaluate(est, train_spec, EvalSpec(_eval_input_fn)) is None
        assert est.trained == [(9, hooks, listeners)]


def test_master_trains_alone_with_evaluation_or_is_refused_in_a_cluster(tmp_path, monkeypatch):
    train_spec = TrainSpec(_input_fn, max_steps=9)
    est = _cluster_estimator(tmp_path, monkeypatch, "master", {"master": ["h:0"]})
    train_and_evaluate(est, train_spec, EvalSpec(_eval_input_fn))
    [(_, _, listeners)] = est.trained
    assert [type(x).__name__ for x in listeners] == ["NewCheckpointListenerForEvaluate"]
    est = _cluster_estimator(tmp_path, monkeypatch, "master",
                                 {"master": ["h:0"], "ps": ["h:1"]})
    with pytest.raises(NotImplementedError, match=r"^train_and_evaluate on a `master` task .* "
                                                  r"Rename the job `master` to `chief`"):
        train_and_evaluate(est, train_spec, EvalSpec(_eval_input_fn))
    assert est.trained == []
