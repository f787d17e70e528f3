"""session/live_eval.py: one evaluation traced once, run on given variable values."""

import glob
import os

import numpy as np
import tensorflow as tf

import models
from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator

v1 = tf.compat.v1


def test_runs_on_given_values_with_fresh_accumulators_and_input(tmp_path):
    estimator = TPUEstimator(model_fn=models.linear_full_model_fn, use_tpu=False,
                             train_batch_size=64, eval_batch_size=64,
                             config=RunConfig(model_dir=str(tmp_path),
                                              tpu_config=TPUConfig(iterations_per_loop=1)))
    input_fn = models.digits_input_fn(128, repeat=False, flat=True)
    evaluation = estimator._live_evaluation(input_fn, hooks=None, steps=None, name="x")
    assert evaluation.variable_names() == {"global_step", "w", "b"}
    x, y = models.digits(128, flat=True)
    w = np.zeros([64, 10], np.float32)
    w[np.arange(64), np.arange(64) % 10] = 1.0  # Some fixed non-zero weights.
    expected = float(np.mean(np.argmax(x @ w, axis=1) == y))
    first = evaluation.run({"w": w, "b": np.zeros([10], np.float32), "global_step": 5})
    again = evaluation.run({"w": w, "global_step": 6, "not_in_the_model": 1.0})
    # Both read all 128 examples (the input from its start) into fresh accumulators.
    assert first["accuracy"] == again["accuracy"] == np.float32(expected)
    assert (first["global_step"], again["global_step"]) == (5, 6)
    zero = evaluation.run({"w": np.zeros([64, 10], np.float32)})
    np.testing.assert_allclose(zero["loss"], np.log(10.0), rtol=1e-6)
    assert glob.glob(os.path.join(str(tmp_path), "*.index")) == []  # Nothing restored/saved.
    steps = set()
    for path in glob.glob(os.path.join(estimator.eval_dir("x"), "events*")):
        steps |= {event.step for event in v1.train.summary_iterator(path)
                  if event.summary.value}
    assert steps == {5, 6}


def test_the_evaluations_own_variables_start_every_run_afresh(tmp_path):
    def model_fn(features, labels, mode):
        del labels
        w = v1.get_variable("w", [], initializer=v1.zeros_initializer())
        if mode == tf.estimator.ModeKeys.TRAIN:
            return tf.estimator.EstimatorSpec(mode, loss=tf.constant(0.0), train_op=tf.no_op())
        seen = v1.get_variable("seen", [], initializer=v1.constant_initializer(100.0),
                               trainable=False)  # The evaluation's own (global) variable.
        with tf.control_dependencies([features]):
            total = seen.assign_add(1.0)
        mean = tf.keras.metrics.Mean()
        mean.update_state(total + w)
        return tf.estimator.EstimatorSpec(mode, loss=tf.constant(0.0),
                                          eval_metric_ops={"mean": mean})

    import tpu_estimator_compat
    tpu_estimator_compat.install_aliases()
    estimator = tf.compat.v1.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    evaluation = estimator._live_evaluation(lambda: tf.data.Dataset.range(3), None, None, None)
    results = [evaluation.run({"w": np.float32(w), "global_step": 1}) for w in (0.0, 10.0)]
    # seen: 101, 102, 103 in each run (from 100 afresh), plus w.
    assert [r["mean"] for r in results] == [102.0, 112.0]
