"""InMemoryEvaluatorHook: evaluations of the training run's live variables during train()."""

import glob
import json
import os

import numpy as np
import pytest
import tensorflow as tf

import models
import tpu_estimator_compat
from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator, TPUEstimatorSpec
from tpu_estimator_compat.api import in_memory_eval

v1 = tf.compat.v1


def _events(eval_dir):
    """{step: {tag: value}} of every scalar event written into `eval_dir`, read back."""
    found = {}
    for path in glob.glob(os.path.join(eval_dir, "events*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    found.setdefault(event.step, {})[value.tag] = value.simple_value
    return found


def _estimator(model_dir, strategy, use_tpu=False, **config):
    # Training on `strategy`, evaluation undistributed (no eval_distribute) with
    # use_tpu=False: on MirroredStrategy the evaluation's runtime is of another strategy.
    return TPUEstimator(
        model_fn=models.linear_full_model_fn, use_tpu=use_tpu, train_batch_size=64,
        eval_batch_size=64,
        config=RunConfig(model_dir=str(model_dir), train_distribute=strategy,
                         tpu_config=TPUConfig(iterations_per_loop=1), **config))


@pytest.mark.parametrize("use_tpu", [False, True])
def test_evaluates_live_variables_at_start_every_n_iterations_and_end(tmp_path, strategy,
                                                                     use_tpu):
    # No checkpoint of steps 3 or 6 is written: the evaluations there can only have seen
    # the training run's variables. (Iterations are loops of one step here.)
    estimator = _estimator(tmp_path, strategy, use_tpu, save_checkpoints_steps=100)
    eval_input_fn = models.digits_input_fn(256, repeat=False, flat=True)
    hook = in_memory_eval.InMemoryEvaluatorHook(
        estimator, eval_input_fn, name="live", every_n_iter=3)
    estimator.train(models.digits_input_fn(512, flat=True), max_steps=7, hooks=[hook])

    events = _events(estimator.eval_dir("live"))
    # Session creation (0), every 3 iterations (3, 6), the end (7).
    assert sorted(events) == [0, 3, 6, 7]
    assert events[0]["loss"] == pytest.approx(np.log(10.0), rel=1e-6)  # Zero weights.
    losses = [events[step]["loss"] for step in (0, 3, 6, 7)]
    assert all(a > b for a, b in zip(losses, losses[1:])), losses
    assert sorted(os.path.basename(p) for p in glob.glob(str(tmp_path / "*.index"))) == [
        "model.ckpt-0.index", "model.ckpt-7.index"]
    # The last evaluation (the final variables, in memory) matches evaluating the final
    # checkpoint the ordinary way.
    final = estimator.evaluate(eval_input_fn)
    assert final["global_step"] == 7
    for tag in ("loss", "accuracy"):
        assert events[7][tag] == pytest.approx(float(final[tag]), rel=1e-6)


def test_evaluation_on_the_training_strategy(tmp_path, strategy):
    """With `eval_distribute` the training strategy's: the evaluation's own runtime shares
    the strategy object, on its own thread, while training waits."""
    estimator = _estimator(tmp_path, strategy, eval_distribute=strategy)
    eval_input_fn = models.digits_input_fn(256, repeat=False, flat=True)
    hook = in_memory_eval.InMemoryEvaluatorHook(estimator, eval_input_fn, every_n_iter=2)
    estimator.train(models.digits_input_fn(512, flat=True), max_steps=4, hooks=[hook])
    events = _events(estimator.eval_dir())
    assert sorted(events) == [0, 2, 4]
    final = estimator.evaluate(eval_input_fn, name="restored")
    assert events[4]["accuracy"] == pytest.approx(float(final["accuracy"]), rel=1e-6)
    assert events[4]["loss"] == pytest.approx(float(final["loss"]), rel=1e-6)


def test_plain_estimator_evaluates_on_each_train_call(tmp_path):
    def model_fn(features, labels, mode):
        w = v1.get_variable("w", [], tf.int64, initializer=v1.zeros_initializer())
        if mode == tf.estimator.ModeKeys.TRAIN:
            with tf.control_dependencies([features]):
                step = v1.assign_add(v1.train.get_global_step(), 1)
            with tf.control_dependencies([step]):
                train_op = w.assign(step * 10)
            return tf.estimator.EstimatorSpec(mode, loss=tf.constant(1.0), train_op=train_op)
        mean = tf.keras.metrics.Mean()
        mean.update_state(w)
        return tf.estimator.EstimatorSpec(mode, loss=tf.constant(2.0),
                                          eval_metric_ops={"w": mean})

    tpu_estimator_compat.install_aliases()
    estimator = tf.compat.v1.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    hook = tf.compat.v1.estimator.experimental.InMemoryEvaluatorHook(
        estimator, lambda: tf.data.Dataset.range(3), every_n_iter=2)
    estimator.train(lambda: tf.data.Dataset.range(3), hooks=[hook])
    # A second train() builds the evaluation again, as legacy's begin() built a new graph.
    estimator.train(lambda: tf.data.Dataset.range(2), hooks=[hook])
    # Iterations count from each train()'s start: 0, 2, 3 (end); 3 (start), 5 (2nd, end).
    events = _events(estimator.eval_dir())
    assert {step: values["w"] for step, values in events.items()} == {
        0: 0.0, 2: 20.0, 3: 30.0, 5: 50.0}


def test_legacy_paths_serve_this_hook():
    tpu_estimator_compat.install_aliases()
    from tensorflow_estimator.python.estimator.hooks import hooks as hooks_lib

    assert hooks_lib.InMemoryEvaluatorHook is in_memory_eval.InMemoryEvaluatorHook
    assert (tf.estimator.experimental.InMemoryEvaluatorHook
            is in_memory_eval.InMemoryEvaluatorHook)
    assert hooks_lib._StopAtCheckpointStepHook is in_memory_eval._StopAtCheckpointStepHook


def test_constructor_refuses_bad_every_n_iter_and_clusters(tmp_path, monkeypatch):
    estimator = _estimator(tmp_path, None)
    with pytest.raises(ValueError, match=r"invalid every_n_iter=0\. Pass"):
        in_memory_eval.InMemoryEvaluatorHook(estimator, lambda params: None, every_n_iter=0)
    with pytest.raises(ValueError, match=r"Must specify steps > 0, given: 0"):
        in_memory_eval.InMemoryEvaluatorHook(estimator, lambda params: None, steps=0)
    monkeypatch.setenv("TF_CONFIG", json.dumps({
        "cluster": {"chief": ["host0:0"], "ps": ["host1:1"]},
        "task": {"type": "chief", "index": 0}}))
    clustered = TPUEstimator(model_fn=models.linear_full_model_fn, use_tpu=False,
                             train_batch_size=64, config=RunConfig(model_dir=str(tmp_path)))
    with pytest.raises(ValueError, match="supports only single machine .* 1 parameter server"):
        in_memory_eval.InMemoryEvaluatorHook(clustered, lambda params: None)


def test_begin_refuses_a_scaffold_init_fn_in_eval(tmp_path):
    def model_fn(features, labels, mode, params):
        del features, labels, params
        scaffold = v1.train.Scaffold(init_fn=lambda scaffold, session: None)
        return tf.estimator.EstimatorSpec(mode, loss=tf.constant(1.0), scaffold=scaffold,
                                          train_op=tf.no_op())

    tpu_estimator_compat.install_aliases()
    estimator = tf.compat.v1.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    hook = in_memory_eval.InMemoryEvaluatorHook(estimator, lambda: tf.data.Dataset.range(2))
    with pytest.raises(ValueError, match="does not support custom init_fn: model_fn's EVAL"):
        hook.begin()


def test_worker_stop_hook_waits_for_the_chiefs_checkpoint(tmp_path, monkeypatch):
    hook = in_memory_eval._StopAtCheckpointStepHook(str(tmp_path), last_step=3,
                                                     wait_after_file_check_secs=7)
    sleeps = []
    monkeypatch.setattr(in_memory_eval.time, "sleep", sleeps.append)
    with tf.Graph().as_default():
        step = v1.train.get_or_create_global_step()
        assign_two, assign_three, no_op = step.assign(2), step.assign(3), tf.no_op()
        saver = v1.train.Saver()
        with v1.train.SingularMonitoredSession(hooks=[hook]) as session:
            session.raw_session().run(assign_two)
            session.run(no_op)  # Step 3 reached here, no checkpoint of it yet.
            assert sleeps == [7] and not session.should_stop()
            session.raw_session().run(assign_three)
            saver.save(session.raw_session(), str(tmp_path / "model.ckpt"), global_step=3)
            session.run(no_op)
            assert session.should_stop() and sleeps == [7]
    chief = _estimator(tmp_path, None)
    assert isinstance(in_memory_eval.make_stop_at_checkpoint_step_hook(chief, 5),
                      v1.train.StopAtStepHook)
