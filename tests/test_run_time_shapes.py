"""`_tf/run_time_shapes.py`: a size test that Grappler cannot fold from a branch's shapes."""

from __future__ import annotations

import pytest
import tensorflow as tf

from tpu_estimator_compat._tf import run_time_shapes


def _guarded(size_of, dtype: tf.DType):
    """`f(x)`: when x is not empty, a branch that pins x's batch dimension to 4 (x plus a
    `[4, 3]` tensor, summed), else -1: the pattern of the train loop's every-replica-fed
    check."""

    @tf.function(input_signature=[tf.TensorSpec([None, 3], dtype)])
    def f(x):
        def run():  # AddN's and StringJoin's shape functions merge x's batch dim with 4.
            if dtype == tf.string:
                joined = tf.strings.join([x, tf.fill([4, 3], "")])
                return tf.reduce_sum(tf.strings.length(joined))
            return tf.cast(tf.reduce_sum(tf.add_n([x, tf.zeros([4, 3], dtype)])), tf.int32)

        return tf.cond(size_of(x) > 0, run, lambda: tf.constant(-1))

    return f


def _ones(dtype: tf.DType) -> tf.Tensor:
    return tf.ones([4, 3], dtype) if dtype != tf.string else tf.fill([4, 3], "a")


@pytest.mark.parametrize("dtype", [tf.float32, tf.int64, tf.string])
def test_run_time_size_tells_an_empty_tensor_from_a_full_one_under_a_pinning_branch(dtype):
    f = _guarded(run_time_shapes.run_time_size, dtype)
    assert int(f(_ones(dtype))) == 12
    assert int(f(_ones(dtype)[:0])) == -1
    assert int(run_time_shapes.run_time_size(_ones(dtype))) == 12


def test_run_time_size_is_not_folded_when_the_branch_would_run_silently():
    """A branch reshaping x to its static shape pins x's batch dimension as well; with
    `tf.size` that branch ran on the empty x without an error (Grappler drops a reshape
    before a full sum) and returned 0.0 instead of the other branch's -1.0."""

    def guarded(size_of):
        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
        def f(x):
            return tf.cond(size_of(x) > 0, lambda: tf.reduce_sum(tf.reshape(x, [4, 3])),
                           lambda: tf.constant(-1.0))

        return f

    assert float(guarded(run_time_shapes.run_time_size)(tf.zeros([0, 3]))) == -1.0
    assert float(guarded(tf.size)(tf.zeros([0, 3]))) == 0.0  # The folded check.


def test_plain_size_is_folded_from_the_branchs_shapes():
    """Why the module exists: with `tf.size` Grappler takes the empty tensor for a full one
    and runs the branch on it. If TensorFlow stops doing so, this fails: the workaround can
    then go."""
    f = _guarded(tf.size, tf.float32)
    assert int(f(_ones(tf.float32))) == 12
    with pytest.raises(tf.errors.InvalidArgumentError, match="same size and shape"):
        f(tf.zeros([0, 3]))
