"""Tests for tpu_estimator_compat.v1_state.variables: TF1 variable semantics inside replica steps.

MirroredStrategy runs each replica in its own thread, all tracing into one graph, and switches
threads at every all-reduce. These tests pin what a TPU core saw, whatever the interleaving:
its own v1 variable store and variable scope for the whole step. They train through
TPUEstimator on the default strategy and on 8 MirroredStrategy replicas, and read the
checkpoint back with TensorFlow's own reader.
"""

import numpy as np
import pytest
import tensorflow as tf

from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator, TPUEstimatorSpec
from tpu_estimator_compat._tf import private as _tf_private
from tpu_estimator_compat.v1_state import replica_state
from tpu_estimator_compat.v1_state import variables

v1 = tf.compat.v1

BATCH = 16
STEPS = 3
LR = 0.1
W0 = np.array([0.5, -0.25], np.float32)
X = np.arange(BATCH * 2, dtype=np.float32).reshape(BATCH, 2) / 10.0


class _MomentSlotOptimizer(v1.train.Optimizer):
    """BERT's AdamWeightDecayOptimizer pattern, reduced to sums that are easy to check.

    `apply_gradients` is overridden and creates its slots with `get_variable` named
    `<param>/adam_m` and `<param>/adam_v`; wrapped in CrossShardOptimizer, it runs after the
    cross-replica sum of the gradients, i.e. after every replica thread has paused once.
    """

    def __init__(self, learning_rate):
        super().__init__(use_locking=False, name="MomentSlot")
        self.learning_rate = learning_rate

    def _slot(self, param, suffix):
        return v1.get_variable(param.name.split(":")[0] + "/" + suffix,
                               shape=param.shape.as_list(), dtype=tf.float32,
                               trainable=False, initializer=v1.zeros_initializer())

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        del global_step
        updates = []
        for grad, param in grads_and_vars:
            m, v = self._slot(param, "adam_m"), self._slot(param, "adam_v")
            updates += [m.assign(m + grad), v.assign(v + tf.square(grad)),
                        param.assign(param - self.learning_rate * grad)]
        return tf.group(*updates, name=name)


def _slot_model_fn(features, labels, mode, params):
    del labels, params
    w = v1.get_variable("w", initializer=tf.constant(W0))
    loss = tf.reduce_mean(tf.linalg.matvec(features, w))  # d loss / d w = mean of rows.
    tvars = v1.trainable_variables()
    grads = tf.gradients(loss, tvars)
    optimizer = v1.tpu.CrossShardOptimizer(_MomentSlotOptimizer(LR))
    global_step = v1.train.get_global_step()
    train_op = optimizer.apply_gradients(zip(grads, tvars), global_step=global_step)
    return TPUEstimatorSpec(mode=mode, loss=loss,
                            train_op=tf.group(train_op, global_step.assign_add(1)))


def _scoped_after_all_reduce_model_fn(features, labels, mode, params):
    """get_variable inside a variable scope (and a `default_name` one) spanning an all-reduce."""
    del labels, params
    w = v1.get_variable("w", initializer=tf.constant(W0))
    loss = tf.reduce_mean(tf.linalg.matvec(features, w))
    with v1.variable_scope("head"):
        total = v1.tpu.cross_replica_sum(loss)
        scale = v1.get_variable("scale", initializer=tf.constant(2.0))
        with v1.variable_scope(None, default_name="block"):
            bias = v1.get_variable("bias", initializer=tf.constant(1.0))
    loss = loss + 0.0 * (scale * total + bias)
    optimizer = v1.tpu.CrossShardOptimizer(v1.train.GradientDescentOptimizer(LR))
    train_op = optimizer.minimize(loss, global_step=v1.train.get_global_step())
    return TPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)


def _input_fn(params):
    del params  # Every step sees the same global batch: the whole of X.
    labels = np.zeros([BATCH], np.int32)
    return tf.data.Dataset.from_tensor_slices((X, labels)).repeat().batch(
            BATCH, drop_remainder=True)


def _train(model_dir, strategy, model_fn):
    config = RunConfig(model_dir=str(model_dir), train_distribute=strategy,
                       tpu_config=TPUConfig(iterations_per_loop=STEPS))
    estimator = TPUEstimator(model_fn=model_fn, config=config, use_tpu=True,
                             train_batch_size=BATCH)
    estimator.train(_input_fn, max_steps=STEPS)
    return tf.train.load_checkpoint(estimator.latest_checkpoint())


def test_slots_created_with_get_variable_after_all_reduce(tmp_path, strategy):
    """Every replica creates `w/adam_m` in its own store; the checkpoint has the v1 names.

    On TPU, CrossShardOptimizer.apply_gradients sums the per-core gradients of per-core
    mean losses, so N replicas of B/N rows each step by N times the global-batch mean.
    """
    reader = _train(tmp_path, strategy, _slot_model_fn)
    assert sorted(reader.get_variable_to_shape_map()) == [
        "global_step", "w", "w/adam_m", "w/adam_v"]
    grad = strategy.num_replicas_in_sync * X.mean(axis=0)
    assert reader.get_tensor("global_step") == STEPS
    np.testing.assert_allclose(reader.get_tensor("w/adam_m"), STEPS * grad, rtol=1e-6)
    np.testing.assert_allclose(reader.get_tensor("w/adam_v"), STEPS * grad**2, rtol=1e-6)
    np.testing.assert_allclose(reader.get_tensor("w"), W0 - LR * STEPS * grad, rtol=1e-6)


def test_variable_scope_survives_an_all_reduce(tmp_path, strategy):
    """After the all-reduce each replica is still in its own `head` scope, with its counts."""
    reader = _train(tmp_path, strategy, _scoped_after_all_reduce_model_fn)
    names = set(reader.get_variable_to_shape_map())
    assert names == {"global_step", "w", "head/scale", "head/block/bias"}
    assert reader.get_tensor("head/scale") == 2.0


def _hashing_after_all_reduce_model_fn(features, labels, mode, params):
    """google/compare_gan `ModularGAN._check_variables`: after the optimizer's all-reduce,
    `set(d_vars) & set(g_vars)` and a dict keyed by tensors, as in a TF1 graph."""
    del labels, params
    w = v1.get_variable("w", initializer=tf.constant(W0))
    loss = tf.reduce_mean(tf.linalg.matvec(features, w))
    optimizer = v1.tpu.CrossShardOptimizer(v1.train.GradientDescentOptimizer(LR))
    train_op = optimizer.minimize(loss, global_step=v1.train.get_global_step())
    shared = set(v1.trainable_variables()) & {w}
    by_tensor = {loss: "loss"}
    assert shared == {w} and by_tensor[loss] == "loss"
    return TPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)


def test_variables_hash_after_an_all_reduce_in_every_replica(tmp_path, strategy):
    """TF1 graphs hashed variables and tensors by identity; the shim turns TF2's tensor
    equality off while model_fn is traced. The switch is process-wide and MirroredStrategy's
    replica threads interleave at every all-reduce: the first replica to finish its model_fn
    turned equality back on while the others were still tracing theirs (`TypeError: Variable
    is unhashable` in replica 1)."""
    reader = _train(tmp_path, strategy, _hashing_after_all_reduce_model_fn)
    assert reader.get_tensor("global_step") == STEPS
    assert tf.Tensor._USE_EQUALITY  # pylint: disable=protected-access  # Back on after.


@pytest.mark.parametrize("strategy_name", ["default", "mirrored8"])
def test_replica_stores_leave_the_collections_as_they_were(tmp_path, strategy_name):
    from conftest import make_strategy

    graph = v1.get_default_graph()  # Eager: the process-wide graph every FuncGraph shares.
    before = [list(graph.get_collection(k)) for k in _tf_private.VARIABLE_STORE_COLLECTIONS]
    _train(tmp_path, make_strategy(strategy_name), _slot_model_fn)
    after = [graph.get_collection(k) for k in _tf_private.VARIABLE_STORE_COLLECTIONS]
    assert [[id(s) for s in c] for c in after] == [[id(s) for s in c] for c in before]
    assert not any(isinstance(s, replica_state._PerReplicaStore) for c in after for s in c)


def _ema_after_all_reduce_model_fn(features, labels, mode, params):
    """The TPU image models' idiom: EMA over the collections, applied after minimize()."""
    del labels, params
    w = v1.get_variable("w", initializer=tf.constant(W0))
    loss = tf.reduce_mean(tf.linalg.matvec(features, w))
    global_step = v1.train.get_global_step()
    optimizer = v1.tpu.CrossShardOptimizer(v1.train.GradientDescentOptimizer(LR))
    train_op = optimizer.minimize(loss, global_step=global_step)
    ema = v1.train.ExponentialMovingAverage(decay=0.5, num_updates=None)
    # Read after the all-reduce: each replica must see only its own collections' contents.
    averaged = v1.trainable_variables() + v1.moving_average_variables()
    with tf.control_dependencies([train_op]):
        train_op = ema.apply(averaged)
    return TPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)


def test_collections_read_after_an_all_reduce_are_the_replicas_own(tmp_path, strategy):
    """One `w/ExponentialMovingAverage`; no replica sees another's `moving_average_variables`.

    With shared lists the second replica listed `w` twice and made twice the merge_calls
    ("Some replicas made a different number of replica_context().merge_call() calls").
    """
    reader = _train(tmp_path, strategy, _ema_after_all_reduce_model_fn)
    assert sorted(reader.get_variable_to_shape_map()) == [
        "global_step", "w", "w/ExponentialMovingAverage"]
    grad = X.mean(axis=0)  # CrossShardOptimizer.minimize averages over the replicas.
    ws = [W0 - LR * k * grad for k in range(STEPS + 1)]
    average = W0
    for k in range(1, STEPS + 1):
        average = 0.5 * average + 0.5 * ws[k]
    np.testing.assert_allclose(reader.get_tensor("w/ExponentialMovingAverage"), average,
                               rtol=1e-5)


@pytest.mark.parametrize("strategy_name", ["default", "mirrored8"])
def test_per_replica_collections_are_put_back(tmp_path, strategy_name):
    from conftest import make_strategy

    _train(tmp_path, make_strategy(strategy_name), _ema_after_all_reduce_model_fn)
    graph = v1.get_default_graph()
    for key in replica_state.PER_STEP_COLLECTIONS:
        assert not isinstance(graph.get_collection_ref(key), replica_state._PerReplicaCollection)


def test_per_replica_collections_put_back_the_same_list_objects():
    """A FuncGraph shares its variable collections' lists with the outer graph; the step must
    leave those very lists in place, not copies."""
    graph = tf.Graph()
    with graph.as_default():
        ref = graph.get_collection_ref(v1.GraphKeys.GLOBAL_VARIABLES)
        with replica_state.own_collections(graph):
            graph.add_to_collection(v1.GraphKeys.GLOBAL_VARIABLES, "inside")
            assert graph.get_collection(v1.GraphKeys.GLOBAL_VARIABLES) == ["inside"]
        assert graph.get_collection_ref(v1.GraphKeys.GLOBAL_VARIABLES) is ref
        assert ref == []


def _one_initializer_for_two_variables(init):
    """A model_fn using one initializer object for two variables, as r1 code often did."""

    def model_fn(features, labels, mode, params):
        del labels, params
        a = v1.get_variable("a", [2, 4], initializer=init)
        b = v1.get_variable("b", [2, 4], initializer=init)
        loss = tf.reduce_mean(tf.matmul(features, a + b)) * 0.0
        optimizer = v1.train.GradientDescentOptimizer(LR)
        return TPUEstimatorSpec(mode=mode, loss=loss, train_op=optimizer.minimize(
            loss, global_step=v1.train.get_global_step()))

    return model_fn


def test_one_seeded_initializer_draws_the_same_for_each_variable(tmp_path, strategy):
    """In a TF1 graph every random op had its own generator, so `a` and `b` got the same
    draw (tests/test_hooks.py replays a legacy golden built this way); run eagerly, the
    second call would have continued the first's stream."""
    reader = _train(tmp_path, strategy,
                    _one_initializer_for_two_variables(v1.glorot_uniform_initializer(seed=3)))
    np.testing.assert_array_equal(reader.get_tensor("a"), reader.get_tensor("b"))


def _seeded_function_initializer(shape, dtype=None, partition_info=None):
    """A user's own initializer function: the shim cannot see its seed."""
    del partition_info
    return tf.random.normal(shape, dtype=dtype, seed=11)


@pytest.mark.parametrize("initializer, draws_the_same, fresh_kernels", [
    (v1.truncated_normal_initializer(stddev=0.02), False, 0),
    (v1.zeros_initializer(), True, 0),
    # tf_keras gives an unseeded initializer object one draw, repeated at every call.
    (tf.keras.initializers.GlorotUniform(), True, 0),
    (v1.truncated_normal_initializer(stddev=0.02, seed=7), True, 2),
    (_seeded_function_initializer, True, 2),
])
def test_kernel_cache_is_reset_only_before_a_draw_with_an_explicit_seed(
        tmp_path, monkeypatch, initializer, draws_the_same, fresh_kernels):
    """Resetting TensorFlow's eager kernel cache makes every later eager op build its kernel
    again (each mirrored variable's copies to every device: 3-4 s of BERT-base's start-up on
    8 replicas). An initializer object of TensorFlow or Keras without a seed never continues
    a seeded stream, so it draws without the reset; a seeded one, or a function whose seed
    the shim cannot see, still gets it and draws what a TF1 graph drew."""
    resets = []
    reset = _tf_private.fresh_random_kernels
    monkeypatch.setattr(_tf_private, "fresh_random_kernels",
                        lambda: (resets.append(1), reset())[1])
    config = RunConfig(model_dir=str(tmp_path), tf_random_seed=1,
                       tpu_config=TPUConfig(iterations_per_loop=1))
    estimator = TPUEstimator(model_fn=_one_initializer_for_two_variables(initializer),
                             config=config, use_tpu=True, train_batch_size=BATCH)
    estimator.train(_input_fn, max_steps=1)
    reader = tf.train.load_checkpoint(estimator.latest_checkpoint())
    same = np.array_equal(reader.get_tensor("a"), reader.get_tensor("b"))
    assert same == draws_the_same
    assert len(resets) == fresh_kernels



class _NamedEmptyNet(tf.keras.Model):
    """automl efficientdet's `EfficientDetNet`: a Keras model that keeps the name '' (for
    checkpoints without a model scope), so its v1 `__call__` enters `name_scope('')`."""

    def __init__(self):
        super().__init__(name="")
        self.body = tf.keras.layers.Dense(1, name="body")

    def _init_set_name(self, name, zero_based=True):
        if name == "":
            self._name = name
        else:
            super()._init_set_name(name, zero_based)

    def call(self, x):
        return self.body(x)


def _root_reset_model_fn(features, labels, mode, params, top_layer=False):
    del labels, params
    if top_layer:  # A layer named like the model's own, made first, at the root.
        features = features + tf.keras.layers.Dense(2, name="body")(features)
    loss = tf.reduce_mean(_NamedEmptyNet()(features))
    optimizer = v1.tpu.CrossShardOptimizer(v1.train.GradientDescentOptimizer(LR))
    return TPUEstimatorSpec(mode=mode, loss=loss, train_op=optimizer.minimize(
        loss, global_step=v1.train.get_global_step()))


def _root_reset_after_top_layer_model_fn(features, labels, mode, params):
    return _root_reset_model_fn(features, labels, mode, params, top_layer=True)


@pytest.mark.parametrize("model_fn, expected", [
    (_root_reset_model_fn, {"body/kernel": [2, 1], "body/bias": [1]}),
    (_root_reset_after_top_layer_model_fn, {"body/kernel": [2, 2], "body/bias": [2],
                                            "body_1/kernel": [2, 1], "body_1/bias": [1]}),
])
def test_a_reset_to_the_root_name_scope_stays_in_the_replica(tmp_path, strategy, model_fn,
                                                             expected):
    """A Keras layer named '' resets the name scope to the root. Later replicas must still
    build the first replica's names: with the graph's root, the second replica's `body/` came
    back as `body_1/` (an extra checkpoint entry aliasing `body`), and after a top-level
    `body` MirroredStrategy handed it that layer's [2, 2] kernel."""
    reader = _train(tmp_path, strategy, model_fn)
    assert reader.get_variable_to_shape_map() == {"global_step": [], **expected}
