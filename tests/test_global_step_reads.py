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


def test_frozen_writes_do_nothing_in_the_trace_and_stay_eager(strategy):
    """EVAL/PREDICT (`frozen`): `assign*` of the global step in a traced replica step neither
    writes nor fails; eager writes and other variables' writes still apply."""
    step = _step_variable(strategy)
    with strategy.scope():
        other = tf.Variable(0, dtype=tf.int64,
                            aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

    def replica_fn():
        with global_step_reads.frozen(step):
            read = step.assign_add(1)
            step.assign(9, read_value=False)
            step.assign_sub(2)
            other.assign_add(1)
            return tf.identity(read)

    @tf.function
    def run():
        return strategy.run(replica_fn)

    values = strategy.experimental_local_results(run())
    assert [int(v) for v in values] == [5] * strategy.num_replicas_in_sync
    assert int(step.numpy()) == 5 and int(other.numpy()) == 1
    with global_step_reads.frozen(step):
        step.assign_add(1)  # Eager (the host): a real write.
    assert int(step.numpy()) == 6


def test_evaluate_and_predict_do_not_move_the_global_step(tmp_path):
    """A train_op built in every mode (`tf.assign_add(global_step, 1)`, estimator_test's
    idiom) never ran outside TRAIN on legacy: predictions and metrics read the restored step."""
    v1 = tf.compat.v1

    def model_fn(features, labels, mode):
        del labels
        step = v1.train.get_global_step()
        predictions = tf.zeros_like(features, tf.int64) + step
        return tf.estimator.EstimatorSpec(
            mode, predictions=predictions, loss=tf.constant(0.),
            train_op=v1.assign_add(step, 1),
            eval_metric_ops={"step": v1.metrics.mean(step)})

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(([1., 2., 3., 4.], [0, 0, 0, 0])).batch(2)

    import tpu_estimator_compat
    tpu_estimator_compat.install_aliases()
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(input_fn, steps=2)
    assert [int(p) for p in est.predict(input_fn)] == [2, 2, 2, 2]
    assert est.evaluate(input_fn) == {"step": 2.0, "loss": 0.0, "global_step": 2}
