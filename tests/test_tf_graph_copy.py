"""Tests for tpu_estimator_compat._tf.graph_copy: a value recomputed after a step's writes."""
import tensorflow as tf

from tpu_estimator_compat._tf import graph_copy


def _step(build):
    """Runs `build(v)` in a traced function on a variable holding 1.0; returns its result."""
    v = tf.Variable(1.0)
    return tf.function(lambda: build(v))().numpy()


def test_a_value_read_before_the_write_is_recomputed_after_it():
    def build(v):
        value = v.read_value() * 2.0 + 1.0      # Read (1.0) before the write is made.
        update = v.assign_add(4.0).op
        again = graph_copy.recompute_after(value, update)
        assert again is not None
        return tf.stack([value, again])
    assert list(_step(build)) == [3.0, 11.0]


def test_a_value_read_after_the_write_is_left_alone():
    def build(v):
        update = v.assign_add(4.0).op
        value = v.read_value() * 2.0            # Already reads 5.0: nothing to recompute.
        assert graph_copy.recompute_after(value, update) is None
        return graph_copy.read_after(value, update)
    assert _step(build) == 10.0


def test_a_write_the_update_does_not_wait_for_is_not_a_reason():
    w = tf.Variable(0.0)

    def build(v):
        value = v.read_value() + 1.0
        v.assign_add(4.0)                       # Not part of `update`.
        update = w.assign_add(1.0).op
        assert graph_copy.recompute_after(value, update) is None
        return value
    assert _step(build) == 2.0


def test_a_stateful_op_between_the_read_and_the_value_is_not_run_twice():
    w = tf.Variable(0.0)

    def build(v):
        value = w.assign_add(v.read_value()) + 1.0    # Stateful on a read: not copied.
        update = v.assign_add(4.0).op
        assert graph_copy.recompute_after(value, update) is None
        return graph_copy.read_after(value, update)
    assert _step(build) == 2.0 and w.numpy() == 1.0
