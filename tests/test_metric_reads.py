"""Tests for tpu_estimator_compat.step.metric_reads: metric values read in an eval step are the
step's starting values where legacy's session read them first.

google-research/goemotions averages its per-label `tf.compat.v1.metrics.auc` values with
`tf.compat.v1.metrics.mean`: legacy averaged the AUCs as they were before each batch (each
value's reads ran before that batch's updates). The expected numbers replay the batches in a
v1 Session, reading the values in a run of their own before the updates' run.
"""
import functools

import numpy as np
import pytest
import tensorflow as tf

from tpu_estimator_compat import EstimatorSpec, RunConfig, TPUEstimator, TPUEstimatorSpec

v1 = tf.compat.v1
LABELS = 3
KERNEL = np.array([[0.5, -1.0, 0.25], [-0.75, 0.5, 1.0]], np.float32)


def _data():
    rng = np.random.RandomState(3)
    x = rng.uniform(-1, 1, size=(24, 2)).astype(np.float32)
    y = (rng.uniform(size=(24, LABELS)) > 0.5).astype(np.int64)
    return x, y


def _input_fn(params):
    x, y = _data()
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(params["batch_size"])


def _metric_fn(labels, probabilities):
    aucs = [v1.metrics.auc(labels[:, j:j + 1], probabilities[:, j:j + 1])
            for j in range(LABELS)]
    values = tf.convert_to_tensor([value for value, _ in aucs])
    metrics = {f"auc_{j}": aucs[j] for j in range(LABELS)}
    metrics["auc_mean"] = v1.metrics.mean(values=values)
    metrics["auc_weighted"] = v1.metrics.mean(values=values,
                                              weights=tf.reduce_sum(labels, axis=0))
    return metrics


def _model_fn(features, labels, mode, params, spec_type="eval_metric_ops"):
    logits = v1.layers.dense(features, LABELS, use_bias=False,
                             kernel_initializer=v1.constant_initializer(KERNEL))
    probabilities = tf.sigmoid(logits)
    loss = tf.reduce_mean(tf.abs(probabilities - tf.cast(labels, tf.float32)))
    if mode == "train":
        return EstimatorSpec(mode, loss=loss, train_op=tf.no_op())
    if spec_type == "eval_metrics":  # metric_fn, built after the step on one device.
        return TPUEstimatorSpec(mode, loss=loss,
                                eval_metrics=(_metric_fn, [labels, probabilities]))
    return EstimatorSpec(mode, loss=loss, eval_metric_ops=_metric_fn(labels, probabilities))


def _replayed(batch_size, steps):
    """Legacy's numbers: each batch's AUC values read before that batch's updates."""
    x, y = _data()
    probabilities = 1 / (1 + np.exp(-(x @ KERNEL)))
    graph = tf.Graph()
    with graph.as_default():
        labels = v1.placeholder(tf.int64, [None, LABELS])
        probs = v1.placeholder(tf.float32, [None, LABELS])
        aucs = [v1.metrics.auc(labels[:, j:j + 1], probs[:, j:j + 1]) for j in range(LABELS)]
        init = v1.local_variables_initializer()
    session = v1.Session(graph=graph)
    session.run(init)
    total = weighted = weight = 0.0
    for step in range(steps):
        rows = slice(step * batch_size, (step + 1) * batch_size)
        feed = {labels: y[rows], probs: probabilities[rows]}
        values = np.array(session.run([value for value, _ in aucs]), np.float32)
        session.run([update for _, update in aucs], feed)
        counts = y[rows].sum(axis=0)
        total, weighted, weight = (total + values.sum(), weighted + (values * counts).sum(),
                                   weight + counts.sum())
    finals = session.run([value for value, _ in aucs])
    return total / (steps * LABELS), weighted / weight, finals


@pytest.mark.parametrize("spec_type", ["eval_metric_ops", "eval_metrics"])
def test_a_metric_averaging_other_metrics_values_takes_them_before_each_batch(tmp_path,
                                                                              spec_type):
    est = TPUEstimator(model_fn=functools.partial(_model_fn, spec_type=spec_type),
                       use_tpu=False, train_batch_size=8,
                       eval_batch_size=8, config=RunConfig(model_dir=str(tmp_path)))
    est.train(_input_fn, max_steps=1)
    results = est.evaluate(_input_fn, steps=3)
    mean, weighted, finals = _replayed(8, 3)
    np.testing.assert_allclose(results["auc_mean"], mean, rtol=1e-6)
    np.testing.assert_allclose(results["auc_weighted"], weighted, rtol=1e-6)
    # The AUCs themselves are reported after every update, as legacy's last run read them.
    np.testing.assert_allclose([results[f"auc_{j}"] for j in range(LABELS)], finals,
                               rtol=1e-6)
    assert not np.isclose(mean, np.mean(finals))  # The test can tell the two orders apart.
