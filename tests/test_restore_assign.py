"""Tests for tpu_estimator_compat.checkpoint.restore_assign: compiled restore assigns."""
import numpy as np
import tensorflow as tf
from conftest import make_strategy

from tpu_estimator_compat.checkpoint import restore_assign


def _variables(strategy):
    with strategy.scope():
        mirrored = tf.Variable(tf.zeros([3]), name="w")
        summed = tf.Variable(0.0, name="count",
                             synchronization=tf.VariableSynchronization.ON_READ,
                             aggregation=tf.VariableAggregation.SUM)
    return [mirrored, summed]


def test_assigns_on_eight_replicas_are_one_function_traced_once(strategy):
    variables = _variables(strategy)
    replicas = strategy.num_replicas_in_sync
    for round_ in range(3):
        values = [tf.constant([1.0, 2.0, 3.0]) * (round_ + 1), tf.constant(8.0 * round_)]
        with strategy.scope():
            restore_assign.assign_all(variables, values)
        for copy in strategy.experimental_local_results(variables[0]):
            np.testing.assert_array_equal(copy.numpy(), values[0].numpy())
        # A restored SUM sync-on-read value is split over the replicas, as an eager assign.
        for copy in strategy.experimental_local_results(variables[1]):
            assert copy.numpy() == 8.0 * round_ / replicas
        assert variables[1].read_value().numpy() == 8.0 * round_
    kept = restore_assign._FUNCTIONS.get(tuple(id(v) for v in variables))
    if replicas > 1:
        assert kept is not None and kept[1].experimental_get_tracing_count() == 1
    else:
        assert kept is None  # One device: eager assigns.
