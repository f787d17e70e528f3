"""Tests for tpu_estimator_compat.inputs.queue_input: TF1 queue-runner input_fns as datasets."""
import numpy as np
import pytest
import tensorflow as tf

from tpu_estimator_compat import EstimatorSpec, ModeKeys, RunConfig
from tpu_estimator_compat.api.estimator import Estimator
from tpu_estimator_compat.inputs import queue_input

v1 = tf.compat.v1


def _rows(dataset):
    return [tf.nest.map_structure(lambda t: t.numpy().tolist(), e) for e in dataset]


def test_eager_refusals_of_queue_input_are_recognised():
    with pytest.raises(RuntimeError) as refused:
        v1.train.queue_runner.QueueRunner(tf.queue.FIFOQueue(1, [tf.float32]), [])
    assert queue_input.is_queue_refusal(refused.value)
    with pytest.raises(ValueError) as batch_refused:
        v1.train.batch([tf.constant(1)], batch_size=1)
    assert queue_input.is_queue_refusal(batch_refused.value)
    assert not queue_input.is_queue_refusal(RuntimeError("something else"))


def test_limit_epochs_and_batch_give_legacys_batches_and_end():
    """`limit_epochs(num_epochs=2)` + `batch(3)`: the queue gives 3, 3, then the partial 2
    (allow_smaller_final_batch), then OutOfRange ends the input, as in a TF1 session."""

    def input_fn():
        value = v1.train.limit_epochs(tf.constant([1, 2, 3, 4]), num_epochs=2)
        element = v1.train.batch([value], batch_size=3, enqueue_many=True,
                                 allow_smaller_final_batch=True, num_threads=1)
        return {"x": element}, element * 10

    batches = _rows(queue_input.queue_dataset(input_fn))
    assert batches == [({"x": [1, 2, 3]}, [10, 20, 30]), ({"x": [4, 1, 2]}, [40, 10, 20]),
                       ({"x": [3, 4]}, [30, 40])]


def test_features_with_none_labels_are_features_alone():
    def input_fn():
        queue = tf.queue.FIFOQueue(2, [tf.float32])
        v1.train.queue_runner.add_queue_runner(
            v1.train.queue_runner.QueueRunner(queue, [queue.enqueue(
                v1.train.limit_epochs(tf.constant([1.0]), num_epochs=1))]))
        return {"x": queue.dequeue()}, None

    assert _rows(queue_input.queue_dataset(input_fn)) == [{"x": [1.0]}]


def _linear_model_fn(features, labels, mode):
    predictions = v1.layers.dense(features["x"], 1)
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions={"y": predictions})
    loss = tf.reduce_mean(tf.square(predictions - labels))
    train_op = v1.train.GradientDescentOptimizer(0.05).minimize(
        loss, v1.train.get_global_step())
    return EstimatorSpec(mode, loss=loss, train_op=train_op)


def _queued_input_fn(x, num_epochs=None):
    """The canned tests' `queue_parsed_features` input: a FIFOQueue fed by a QueueRunner
    with the whole batch (limited to `num_epochs` for evaluation and prediction)."""

    def input_fn():
        batch = tf.constant(x)
        if num_epochs is not None:
            batch = v1.train.limit_epochs(batch, num_epochs=num_epochs)
        queue = tf.queue.FIFOQueue(capacity=100, dtypes=[tf.float32], shapes=[x.shape])
        v1.train.queue_runner.add_queue_runner(
            v1.train.queue_runner.QueueRunner(queue, [queue.enqueue([batch])]))
        dequeued = queue.dequeue()
        return {"x": dequeued}, 2.0 * dequeued

    return input_fn


@pytest.mark.slow
def test_estimator_trains_evaluates_and_predicts_on_queue_runner_input(tmp_path):
    x = np.linspace(0.0, 1.0, 10, dtype=np.float32).reshape(10, 1)
    est = Estimator(_linear_model_fn, config=RunConfig(model_dir=str(tmp_path)))
    est.train(_queued_input_fn(x), steps=2)
    assert est.get_variable_value("global_step") == 2
    # One epoch of the limited queue is one batch: evaluate runs one step and stops.
    scores = est.evaluate(_queued_input_fn(x, num_epochs=1))
    assert scores["global_step"] == 2 and np.isfinite(scores["loss"])
    predictions = list(est.predict(_queued_input_fn(x, num_epochs=1)))
    assert len(predictions) == 10
