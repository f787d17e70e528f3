"""Evaluation and prediction run only what legacy fetched: a train_op model_fn builds in
every mode changes no variable (step/fetched_only.py).

Legacy ran `session.run` of the loss and metric updates (evaluate) or the predictions
(predict), so an `optimizer.minimize(loss)` model_fn built in EVAL or PREDICT never ran:
the checkpoint's variables stay as they were, and every batch is evaluated on them.
"""
import numpy as np
import pytest
import tensorflow as tf

import models
from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator, TPUEstimatorSpec

v1 = tf.compat.v1
ROWS = 96  # Three global batches of 32.


def minimize_in_every_mode_model_fn(features, labels, mode, params):
    """A linear model whose model_fn builds its train_op (and a counter's assign) in every
    mode, as some public model_fns do; EVAL and PREDICT return their usual spec."""
    w = v1.get_variable("w", [64, 10], initializer=v1.zeros_initializer())
    b = v1.get_variable("b", [10], initializer=v1.zeros_initializer())
    calls = v1.get_variable("calls", [], initializer=v1.zeros_initializer(), trainable=False)
    logits = tf.matmul(features, w) + b
    opt = v1.tpu.CrossShardOptimizer(v1.train.GradientDescentOptimizer(0.5))
    if mode == "infer":
        fake_loss = tf.reduce_mean(tf.square(logits))
        with tf.control_dependencies([calls.assign_add(1.0)]):
            opt.minimize(fake_loss)
        return TPUEstimatorSpec(mode, predictions={"logits": logits})
    loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    train_op = opt.minimize(loss, global_step=v1.train.get_global_step())
    if mode == "eval":
        calls.assign_add(1.0)
        return TPUEstimatorSpec(mode, loss=loss, eval_metrics=(models.metric_fn,
                                                               [labels, logits]))
    return TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn(params):
    x, y = models.digits(ROWS, flat=True)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(params["batch_size"],
                                                            drop_remainder=True)


def predict_input_fn(params):
    x, _ = models.digits(ROWS, flat=True)
    return tf.data.Dataset.from_tensor_slices(x).batch(params["batch_size"],
                                                       drop_remainder=True)


def _values(est):
    reader = tf.train.load_checkpoint(est.latest_checkpoint())
    return {name: reader.get_tensor(name) for name in ("w", "b", "calls", "global_step")}


@pytest.mark.parametrize("use_tpu", [True, False])
def test_evaluate_and_predict_leave_variables_as_the_checkpoint_has_them(tmp_path, strategy,
                                                                         use_tpu):
    config = RunConfig(model_dir=str(tmp_path), train_distribute=strategy,
                       eval_distribute=strategy, tpu_config=TPUConfig(iterations_per_loop=2))
    est = TPUEstimator(model_fn=minimize_in_every_mode_model_fn, config=config,
                       use_tpu=use_tpu, train_batch_size=32, eval_batch_size=32,
                       predict_batch_size=32)
    est.train(input_fn, max_steps=2)
    before = _values(est)
    results = est.evaluate(input_fn)
    # The loss of every batch at the checkpoint's weights: no step moved them.
    x, y = models.digits(ROWS, flat=True)
    logits = x @ before["w"] + before["b"]
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    expected = -log_probs[np.arange(ROWS), y].mean()
    np.testing.assert_allclose(results["loss"], expected, rtol=1e-5)
    assert results["global_step"] == 2
    predicted = np.stack([p["logits"] for p in est.predict(predict_input_fn)])
    np.testing.assert_allclose(predicted, logits, rtol=1e-5, atol=1e-6)
    # Evaluation and prediction wrote no checkpoint, and a new train() starts from it.
    est.train(input_fn, max_steps=3)
    reader = tf.train.load_checkpoint(est.latest_checkpoint())
    assert reader.get_tensor("global_step") == 3
    assert reader.get_tensor("calls") == before["calls"]  # Training never assigns it.
