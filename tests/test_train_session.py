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
