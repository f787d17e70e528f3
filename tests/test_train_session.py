"""session/train_session.py: how many steps a compiled call runs, and that users cannot tell.

The plain Estimator observes one step per run (legacy's one step per `session.run`) and runs
`PLAIN_TRAIN_STEPS_PER_CALL` steps per compiled call while no hook needs each step. These
tests train the same model with 1 and with several steps per call and compare what a user
sees: the events (tags, steps, values), the checkpoints written and the weights.
"""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator_compat
from tpu_estimator_compat.loop import driver as driver_lib
from tpu_estimator_compat.session import settings as settings_lib

tpu_estimator_compat.install_aliases()
v1 = tf.compat.v1

_RNG = np.random.RandomState(0)
X = _RNG.randn(400, 4).astype(np.float32)
Y = X.sum(axis=1, keepdims=True).astype(np.float32)


def _input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat(2).batch(8)


def _model_fn(features, labels, mode):
    """A seeded dropout (a random stream per step) and model_fn summaries."""
    w = v1.get_variable("w", [4, 1], initializer=v1.constant_initializer(0.1))
    x = v1.layers.dropout(features["x"], 0.3, training=mode == tf.estimator.ModeKeys.TRAIN,
                          seed=3)
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - labels))
    v1.summary.scalar("my_loss", loss)
    train_op = v1.train.GradientDescentOptimizer(0.01).minimize(
        loss, global_step=v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _observed(model_dir, hooks=(), second_call=True):
    """Trains to step 95, then 30 more (each call's input_fn gives 100 batches); returns what
    a user sees and the steps each compiled call ran."""
    calls = []
    original = driver_lib.TrainDriver.run

    def run(self, *, target_step, iterations_per_loop):
        run_steps = self.run_steps

        def counted(n):
            calls.append(n)
            return run_steps(n)

        self.run_steps = counted
        return original(self, target_step=target_step, iterations_per_loop=iterations_per_loop)

    config = tf.estimator.RunConfig(model_dir=model_dir, tf_random_seed=1,
                                    save_checkpoints_steps=35, save_summary_steps=20,
                                    log_step_count_steps=30)
    estimator = tf.estimator.Estimator(_model_fn, config=config)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(driver_lib.TrainDriver, "run", run)
        estimator.train(_input_fn, max_steps=95, hooks=list(hooks))
        if second_call:
            estimator.train(_input_fn, steps=30, hooks=list(hooks))
    events = {}
    for path in sorted(glob.glob(os.path.join(model_dir, "events.out*"))):
        for event in v1.train.summary_iterator(path):
            for value in event.summary.value:
                number = (None if value.tag.endswith("/sec") or not value.HasField(
                    "simple_value") else value.simple_value)
                events.setdefault(value.tag, []).append((event.step, number))
    checkpoints = sorted(int(p.split("-")[-1].split(".")[0])
                         for p in glob.glob(os.path.join(model_dir, "model.ckpt-*.index")))
    return {"events": events, "checkpoints": checkpoints,
            "w": estimator.get_variable_value("w")}, calls


def test_several_steps_per_call_are_observed_as_one_step_per_run(tmp_path, monkeypatch):
    many, many_calls = _observed(str(tmp_path / "many"))
    monkeypatch.setattr(settings_lib, "PLAIN_TRAIN_STEPS_PER_CALL", 1)
    one, one_calls = _observed(str(tmp_path / "one"))
    assert max(many_calls) > 1 and sum(many_calls) < sum(one_calls) * 2
    assert set(one_calls) == {1}
    assert many["events"] == one["events"]
    assert many["events"]["my_loss"][0][0] == 1 and len(many["events"]["my_loss"]) > 4
    assert many["checkpoints"] == one["checkpoints"] == [0, 35, 70, 95, 125]
    np.testing.assert_array_equal(many["w"], one["w"])


def test_a_hook_gets_every_step(tmp_path):
    class Counter(tf.estimator.SessionRunHook):
        def __init__(self):
            self.runs = 0

        def after_run(self, run_context, run_values):
            self.runs += 1

    counter = Counter()
    _, calls = _observed(str(tmp_path), hooks=[counter], second_call=False)
    assert set(calls) == {1}
    assert counter.runs == 95


def _counting_model_fn(calls, host_call=False):
    """A model_fn with Python side effects (a call counter) and v1 summaries; in TRAIN a
    TPUEstimatorSpec with a host_call when `host_call`."""

    def model_fn(features, labels, mode, params):
        del params
        calls.append(mode)
        w = v1.get_variable("w", [4, 1], initializer=v1.constant_initializer(0.1))
        predictions = tf.matmul(features["x"], w)
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions={"y": predictions})
        loss = tf.reduce_mean(tf.square(predictions - labels))
        if mode == tf.estimator.ModeKeys.EVAL:
            return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
                "mse": v1.metrics.mean_squared_error(labels, predictions)})
        v1.summary.scalar("my_loss", loss)
        train_op = v1.train.GradientDescentOptimizer(0.01).minimize(
            loss, global_step=v1.train.get_global_step())
        if not host_call:
            return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
        step = tf.reshape(v1.train.get_global_step(), [1])
        return tpu_estimator_compat.TPUEstimatorSpec(
            mode, loss=loss, train_op=train_op,
            host_call=(lambda gs: [v1.summary.scalar("host_step", tf.cast(gs[0], tf.float32))],
                       [step]))

    return model_fn


def test_train_calls_model_fn_once_per_replica_with_summaries(tmp_path, strategy):
    """Legacy built one graph per train(): model_fn ran once (once per replica under a
    distributed Estimator). The loop built again to return the v1 summaries the first trace
    found calls the same traced step, so model_fn's Python side effects happen once."""
    calls = []
    config = tf.estimator.RunConfig(model_dir=str(tmp_path), train_distribute=strategy,
                                    eval_distribute=strategy, save_summary_steps=2)
    est = tf.estimator.Estimator(_counting_model_fn(calls), config=config)
    replicas = strategy.num_replicas_in_sync
    est.train(_input_fn, steps=4)
    assert calls == ["train"] * replicas
    tags = set()
    for path in glob.glob(os.path.join(str(tmp_path), "events.out*")):
        for event in v1.train.summary_iterator(path):
            tags.update(value.tag for value in event.summary.value)
    assert "my_loss" in tags  # The loop that returns them is the one that ran.
    del calls[:]
    est.evaluate(_input_fn, steps=2)
    assert calls == ["eval"] * replicas
    del calls[:]
    est.train(_input_fn, steps=2)  # Reuses the traced loop (or traces it once more).
    assert calls in ([], ["train"] * replicas)


def test_tpu_estimator_train_with_host_call_calls_model_fn_once(tmp_path):
    """A host_call is known after the first trace; its loop reuses that trace."""
    calls = []
    config = tpu_estimator_compat.RunConfig(
        model_dir=str(tmp_path),
        tpu_config=tpu_estimator_compat.TPUConfig(iterations_per_loop=2))
    est = tpu_estimator_compat.TPUEstimator(
        model_fn=_counting_model_fn(calls, host_call=True), config=config, use_tpu=False,
        train_batch_size=8, eval_batch_size=8)
    est.train(lambda params: _input_fn().unbatch().batch(params["batch_size"]), steps=4)
    assert calls == ["train"]
    steps = []
    for path in glob.glob(os.path.join(str(tmp_path), "events.out*")):
        for event in v1.train.summary_iterator(path):
            steps += [event.step for value in event.summary.value if value.tag == "host_step"]
    assert sorted(steps) == [0, 1, 2, 3]  # The loop that outfeeds host_call ran.
