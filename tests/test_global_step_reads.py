"""Reads of the global step inside a step see the step's starting value, as in a TF1 graph."""

import tensorflow as tf

from tpu_estimator_compat.step import global_step_reads


def _step_variable(strategy):
    with strategy.scope():
        return tf.Variable(5, dtype=tf.int64,
                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)


def test_reads_in_the_step_see_its_start_value_and_the_increment_applies(strategy):
    step = _step_variable(strategy)

    def replica_fn():
        with global_step_reads.step_start_reads(step):
            step.assign_add(1)
            unordered = tf.stack([tf.convert_to_tensor(step), step.read_value(), step.value(),
                                  step + 0, tf.cast(step, tf.int64)])
            with tf.control_dependencies([tf.no_op()]):
                ordered = tf.identity(step)  # Explicitly ordered: a real read (after +1).
            in_branch = tf.cond(tf.constant(True), lambda: tf.identity(step),
                                lambda: tf.constant(0, tf.int64))
            with tf.init_scope():
                eager = step.numpy()  # Outside the trace: the variable's real value.
        return unordered, ordered, in_branch, tf.constant(eager)

    @tf.function
    def run():
        results = strategy.run(replica_fn)
        return strategy.experimental_local_results(results)[0]

    unordered, ordered, in_branch, eager = run()
    assert unordered.numpy().tolist() == [5] * 5
    assert int(ordered) == 6
    assert int(in_branch) == 5
    assert int(eager) == 5
    assert int(step.numpy()) == 6  # Incremented once per step, on every replica.
    assert {int(v.numpy()) for v in getattr(step, "values", [step])} == {6}
    unordered, _, _, _ = run()
    assert unordered.numpy().tolist() == [6] * 5


def test_reads_outside_an_active_step_are_untouched(strategy):
    step = _step_variable(strategy)
    global_step_reads.install(step)
    global_step_reads.install(step)  # Idempotent.

    @tf.function
    def read_after_increment():
        step.assign_add(1)
        return tf.identity(step)

    assert int(read_after_increment()) == 6
    assert int(step.read_value()) == 6 and int(tf.convert_to_tensor(step)) == 6
