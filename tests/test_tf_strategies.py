"""`_tf/strategies.py`: v2-only strategy methods on a TF1 script's v1 strategy, and the v1
optimizers' mark of a loss scaled for a strategy, and a traced step called from control flow."""

import numpy as np
import tensorflow as tf

from tpu_estimator_compat._tf import private
from tpu_estimator_compat._tf import strategies

v1 = tf.compat.v1


def _two_cpus():
    return [d.name for d in tf.config.list_logical_devices("CPU")[:2]]


def test_distribute_values_from_function_on_a_v1_strategy():
    strategy = v1.distribute.MirroredStrategy(
        _two_cpus(), cross_device_ops=tf.distribute.ReductionToOneDevice())
    assert not hasattr(strategy, "experimental_distribute_values_from_function")
    values = strategy.experimental_local_results(strategies.distribute_values_from_function(
        strategy, lambda ctx: tf.constant(ctx.replica_id_in_sync_group * 10)))
    assert [int(v) for v in values] == [0, 10]


def test_loss_scaled_by_optimizer_reads_the_v1_optimizers_mark():
    strategy = tf.distribute.MirroredStrategy(
        _two_cpus(), cross_device_ops=tf.distribute.ReductionToOneDevice())
    marks = {}
    for reduction in (v1.losses.Reduction.MEAN, v1.losses.Reduction.SUM):
        # What legacy's distributed Estimator entered around model_fn.
        with tf.Graph().as_default() as graph, strategy.scope(), \
                private.estimator_loss_scaling(strategy):
            weight = v1.get_variable("w", [2], initializer=v1.ones_initializer())

            def step():
                loss = v1.losses.compute_weighted_loss(weight * np.float32([1, 2]),
                                                       reduction=reduction)
                return v1.train.GradientDescentOptimizer(0.1).minimize(loss)

            strategy.extended.call_for_each_replica(step)
            marks[reduction] = strategies.loss_scaled_by_optimizer(graph)
    assert marks == {v1.losses.Reduction.MEAN: True, v1.losses.Reduction.SUM: False}
    assert not strategies.loss_scaled_by_optimizer(tf.Graph())


def test_call_in_control_flow_feeds_a_traced_all_reduce_inside_a_cond():
    """MirroredStrategy's all-reduce in a traced function takes its instance key at call
    time; called from a cond branch, a plain call leaves that key's placeholder unfed."""
    from tpu_estimator_compat.session import strategy as strategy_lib

    # Collective all-reduces; the process's one instance over these devices (instances over
    # the same devices share collective keys).
    strategy = strategy_lib.mirrored_over([d.name for d in tf.config.list_logical_devices("CPU")])
    total = 3.0 * strategy.num_replicas_in_sync
    traces = []

    @tf.function(autograph=False)
    def step(x):
        traces.append(1)
        per_replica = strategy.run(lambda: tf.distribute.get_replica_context().all_reduce(
            tf.distribute.ReduceOp.SUM, tf.identity(x)))
        return strategy.experimental_local_results(per_replica)[0]

    def run(call):
        @tf.function(autograph=False)
        def outer(x):
            return tf.cond(x > 0, lambda: call(x), lambda: tf.zeros([]))
        return float(outer(tf.constant(3.0)))

    assert run(lambda x: strategies.call_in_control_flow(step, x)) == total
    assert run(lambda x: strategies.call_in_control_flow(step, x)) == total  # One trace.
    assert len(traces) == 1
    try:
        unfed = run(step)
    except tf.errors.InvalidArgumentError as e:
        assert "You must feed a value for placeholder" in str(e)
    else:  # TensorFlow passes such captures through control flow now: nothing to do here.
        assert unfed == total


def test_a_strategy_built_with_eager_off_gets_its_collective_ordering_tokens():
    """A TF1 script that turned eager off builds `MirroredStrategy(devices=['device:GPU:0'])`
    in graph mode (tensorflow/models' r1 cifar10_test.py): its all-reduce launchers have no
    ordering token, and the estimator's steps failed on `None.handle`. Off a GPU the tokens
    land on the CPU (soft placement, as legacy's session allowed)."""
    with tf.Graph().as_default():
        strategy = tf.distribute.MirroredStrategy(["/gpu:0"])
    launchers = strategy.extended._collective_ops._launchers  # pylint: disable=protected-access
    assert launchers and all(l._ordering_token is None for l in launchers)  # pylint: disable=protected-access
    with strategies.eager_soft_placement():
        strategies.make_collective_tokens(strategy)
        strategies.make_collective_tokens(strategy)  # Once only.
    tokens = [l._ordering_token for l in launchers]  # pylint: disable=protected-access
    assert all(t is not None and "CPU" in t.device for t in tokens)
    assert float(tokens[0].numpy()) == 0.0


def _sum_over_replicas(strategy, size):
    """One all-reduce of a `[size]` vector through the strategy's collectives."""
    with strategy.scope():
        destination = tf.Variable(tf.zeros([size]))

        @tf.function
        def reduce():
            value = strategy.run(lambda: tf.ones([size]))
            return strategy.extended.batch_reduce_to(
                tf.distribute.ReduceOp.SUM, [(value, destination)])[0]
        return strategy.experimental_local_results(reduce())[0].numpy()


def test_two_collective_strategies_in_one_process_keep_their_collectives_apart():
    """Every MirroredStrategy numbers its collectives from the same keys, and the process has
    one collective executor: a second Estimator's strategy failed in its first all-reduce
    (`Shape mismatch in the collective instance`). Each later strategy gets groups of its
    own; one strategy seen twice keeps them."""
    with strategies.eager_soft_placement():
        first = tf.distribute.MirroredStrategy(["/gpu:0"])
        second = tf.distribute.MirroredStrategy(["/gpu:0"])
        for strategy in (first, second, first):
            strategies.separate_collective_groups(strategy)
        groups = [{launcher._group_key  # pylint: disable=protected-access
                   for launcher in s.extended._collective_ops._launchers}  # pylint: disable=protected-access
                  for s in (first, second)]
        assert not groups[0] & groups[1]
        np.testing.assert_array_equal(_sum_over_replicas(first, 3), np.ones(3))
        np.testing.assert_array_equal(_sum_over_replicas(second, 7), np.ones(7))
        np.testing.assert_array_equal(_sum_over_replicas(first, 3), np.ones(3))
