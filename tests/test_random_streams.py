"""Tests for tpu_estimator_compat._tf.random_streams: legacy's per-call random streams,
without TensorFlow instantiating every compiled function again at every seeded call.

Directly on small `tf.function`s, then through TPUEstimator on the default strategy and on
8 MirroredStrategy replicas: a seeded model with dropout still restarts its masks at every
call, as legacy's new graph did; a model without random ops keeps its compiled loops.
Instantiations are counted with TensorFlow's own graph collection (every function graph the
runtime instantiates while it is on).
"""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.eager import context  # Graph collection: the instantiation count.

from tensorflow.python.ops import gen_random_ops  # The wrappers the twins replace.

from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator, TPUEstimatorSpec
from tpu_estimator_compat._tf import patches as _tf_patches
from tpu_estimator_compat._tf import random_streams

v1 = tf.compat.v1
BATCH = 16


def _instantiated(fn, ops=None):
    """(fn's result, how many function graphs TensorFlow instantiated while it ran); with
    `ops` (a set), the op types of those graphs and their functions are added to it."""
    ctx = context.context()
    ctx.enable_graph_collection()
    try:
        out = fn()
    finally:
        metadata = ctx.export_run_metadata()
        ctx.disable_graph_collection()
    for graph in metadata.function_graphs if ops is not None else ():
        graph_def = graph.pre_optimization_graph
        ops.update(node.op for node in graph_def.node)
        ops.update(node.op for f in graph_def.library.function for node in f.node_def)
    return out, len(metadata.function_graphs)


def _op_types(concrete):
    graph_def = concrete.graph.as_graph_def()
    return ({node.op for node in graph_def.node}
            | {node.op for f in graph_def.library.function for node in f.node_def})


RANDOM_OPS = {"RandomUniform", "RandomStandardNormal", "TruncatedNormal", "RandomUniformInt",
              "StatefulUniform", "StatefulStandardNormalV2", "StatefulTruncatedNormal",
              "StatefulUniformInt"}


@pytest.mark.parametrize("body, holds", [
    (lambda x: tf.random.uniform([2]) + x, True),
    (lambda x: tf.nn.dropout(tf.ones([4]) + x, 0.5), True),
    (lambda x: tf.random.shuffle(tf.range(4.0)) + x, True),
    (lambda x: tf.random.truncated_normal([2]) + x, True),
    (lambda x: tf.cast(tf.random.categorical([[0.5, 0.5]], 2), tf.float32) + x, True),
    # Inside a while_loop body: a function of the library, not of the outer graph.
    (lambda x: tf.while_loop(lambda i, y: i < 2,
                             lambda i, y: (i + 1, y + tf.random.normal([])), [0, x])[1], True),
    (lambda x: tf.random.stateless_uniform([2], seed=[1, 2]) + x, False),
    (lambda x: x * 2.0, False),
])
def test_holds_stateful_random_ops(body, holds):
    concrete = tf.function(body).get_concrete_function(tf.TensorSpec([], tf.float32))
    assert random_streams.holds_stateful_random_ops(concrete) is holds


# -- twins: the same bits as the stateful kernels, from a state a call sets back ----------

def _float_pair(wrapper, raw):
    return lambda shape, dtype, seeds: (
        wrapper(shape, dtype, seed=seeds[0], seed2=seeds[1]),
        raw(shape=shape, dtype=dtype, seed=seeds[0], seed2=seeds[1]))


def _int_pair(shape, dtype, seeds):
    low, high = tf.constant(-5, dtype), tf.constant(2**30 + 7, dtype)
    return (gen_random_ops.random_uniform_int(shape, low, high, seed=seeds[0], seed2=seeds[1]),
            tf.raw_ops.RandomUniformInt(shape=shape, minval=low, maxval=high, seed=seeds[0],
                                        seed2=seeds[1]))


PAIRS = {  # The patched wrapper (a twin while traced) and the untouched raw op, side by side.
    "uniform": (_float_pair(lambda *a, **k: gen_random_ops.random_uniform(*a, **k),
                            tf.raw_ops.RandomUniform), "StatefulUniform"),
    "normal": (_float_pair(lambda *a, **k: gen_random_ops.random_standard_normal(*a, **k),
                           tf.raw_ops.RandomStandardNormal), "StatefulStandardNormalV2"),
    "truncated_normal": (_float_pair(lambda *a, **k: gen_random_ops.truncated_normal(*a, **k),
                                     tf.raw_ops.TruncatedNormal), "StatefulTruncatedNormal"),
    "uniform_int": (_int_pair, "StatefulUniformInt"),
}


@pytest.mark.parametrize("kind, dtype", [
    (kind, dtype) for kind in sorted(PAIRS)
    for dtype in (["int32", "int64"] if kind == "uniform_int"
                  else ["float32", "float64", "float16", "bfloat16"])])
@pytest.mark.parametrize("shape, seeds", [([3], (7, 11)), ([5, 7], (0, 5)),
                                          ([3, 1025], (2**31 - 1, 2**31 - 2))])
def test_a_twin_draws_the_stateful_kernels_bits_run_after_run(kind, dtype, shape, seeds):
    pair, twin_op = PAIRS[kind]
    fn = tf.function(lambda: pair(shape, tf.as_dtype(dtype), seeds))
    with random_streams.random_op_twins():
        concrete = fn.get_concrete_function()
    assert twin_op in _op_types(concrete)
    draws = []
    for _ in range(3):
        twin, kernel = concrete()
        np.testing.assert_array_equal(twin.numpy().view(np.uint8), kernel.numpy().view(np.uint8))
        draws.append(twin.numpy())
    assert not np.array_equal(draws[0], draws[1])  # The state advanced, as the kernel's did.


def test_each_replica_gets_a_twin_of_its_own_op(strategy):
    """Each replica's traced op had its own kernel (and op seed): each gets its own state,
    on its own device, and draws that kernel's bits."""
    random_streams.restart(2, fresh=True)

    def replicas_draw():
        return strategy.experimental_local_results(
            strategy.run(lambda: tf.random.uniform([5])))

    with strategy.scope():
        with random_streams.random_op_twins():
            twins = tf.function(replicas_draw).get_concrete_function()
        kernels = tf.function(replicas_draw).get_concrete_function()
    assert "StatefulUniform" in _op_types(twins) and "RandomUniform" in _op_types(kernels)
    for _ in range(2):
        drawn, expected = twins(), kernels()
        assert len(drawn) == strategy.num_replicas_in_sync
        assert [t.device for t in drawn] == [t.device for t in expected]
        for got, want in zip(drawn, expected):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
        assert len({t.numpy().tobytes() for t in drawn}) == len(drawn)  # Streams of their own.


def test_twins_keep_unseeded_ops_and_other_kinds_stateful():
    random_streams.restart(None)  # No graph seed: an op without its own seed is seeded at random.
    fn = tf.function(lambda: (tf.random.uniform([2]), tf.random.shuffle(tf.range(4)),
                              tf.random.uniform([2], seed=3)))
    with random_streams.random_op_twins():
        concrete = fn.get_concrete_function()
    assert _op_types(concrete) & RANDOM_OPS == {"RandomUniform", "StatefulUniform"}
    assert random_streams.holds_stateful_random_ops(concrete)  # Shuffle: new kernels still.
    # Outside the scope nothing is replaced.
    plain = tf.function(lambda: tf.random.uniform([2], seed=3)).get_concrete_function()
    assert _op_types(plain) & RANDOM_OPS == {"RandomUniform"}


def test_a_seeded_call_sets_twins_back_without_new_kernels():
    random_streams.restart(5, fresh=True)
    fn = tf.function(lambda: tf.nn.dropout(tf.ones([64]), 0.5))
    with random_streams.random_op_twins():
        concrete = fn.get_concrete_function()
    assert not random_streams.holds_stateful_random_ops(concrete)
    assert not random_streams.note_function(concrete)
    first = concrete().numpy()
    assert not np.array_equal(concrete().numpy(), first)  # The stream advances within a call.
    resets, _, rewinds = random_streams.counts()

    assert not random_streams.restart(5)  # A new seeded call:
    assert not random_streams.note_function(concrete)  # no new kernels,
    assert random_streams.counts()[::2] == (resets, rewinds + 1)  # its twins set back,
    again, count = _instantiated(concrete)
    np.testing.assert_array_equal(again.numpy(), first)  # the same masks again,
    assert count == 0  # and TensorFlow kept its kernels.
    random_streams.restart(None)  # An unseeded call continues the streams.
    random_streams.note_function(concrete)
    assert not np.array_equal(concrete().numpy(), first)


def _random_fn():
    return tf.function(lambda: tf.random.uniform([3])).get_concrete_function()


def test_only_a_noted_random_function_restarts_its_stream():
    random_streams.restart(5, fresh=True)
    noted, other = _random_fn(), _random_fn()
    plain = tf.function(lambda x: x * 2.0).get_concrete_function(tf.TensorSpec([]))
    for fn in (noted, plain):
        assert not random_streams.note_function(fn)  # First run: nothing to restart.
    first, other_first = noted().numpy(), other().numpy()
    assert not np.array_equal(noted().numpy(), first)  # The stream advances within a call.
    plain(tf.constant(1.0))

    assert not random_streams.restart(5)  # A new seeded call: no cache cleared.
    assert random_streams.note_function(noted)
    assert not random_streams.note_function(noted)  # Once per call.
    np.testing.assert_array_equal(noted().numpy(), first)
    assert not random_streams.note_function(plain)
    _, count = _instantiated(lambda: plain(tf.constant(1.0)))
    assert count == 0  # Its kernel was kept.
    # A function the estimator does not run keeps its stream: nothing cleared every cache.
    assert not np.array_equal(other().numpy(), other_first)


def test_unseeded_calls_restart_nothing():
    random_streams.restart(None)
    fn = _random_fn()
    random_streams.note_function(fn)
    first = fn().numpy()
    tf.random.uniform([2])  # An eager draw: would clear every cache in a seeded call.
    assert not random_streams.restart(None)
    assert not random_streams.note_function(fn)
    assert not np.array_equal(fn().numpy(), first)


def test_eager_draws_clear_every_cache_at_the_next_seeded_call():
    random_streams.restart(3, fresh=True)
    first = tf.random.uniform([2]).numpy()
    assert random_streams.restart(3)
    np.testing.assert_array_equal(tf.random.uniform([2]).numpy(), first)
    # tf.data's own draws keep their state in the dataset: no clear for them.
    assert random_streams.restart(3)
    list(tf.data.Dataset.range(4).shuffle(4))
    assert not random_streams.restart(3)


def test_explicitly_seeded_eager_ops_while_input_fn_runs_clear_every_cache_too():
    random_streams.restart(3, fresh=True)
    with _tf_patches.applied("random_streams.explicit_seeds"):
        list(tf.data.Dataset.range(4).shuffle(4, seed=1))  # tf.data's: no clear.
    assert not random_streams.restart(3)
    with _tf_patches.applied("random_streams.explicit_seeds"):
        first = tf.random.uniform([2], seed=1).numpy()
    assert random_streams.restart(3)
    np.testing.assert_array_equal(tf.random.uniform([2], seed=1).numpy(), first)


def test_a_script_seed_in_between_is_not_trusted():
    random_streams.restart(3, fresh=True)
    tf.random.set_seed(9)  # Replaces the watched op-seed generator.
    assert random_streams.restart(3)


# -- through the estimator --------------------------------------------------------------

def _input_fn(params):
    x = np.ones([BATCH, 4], np.float32)  # Every row the same: only dropout tells them apart.
    return tf.data.Dataset.from_tensor_slices((x, np.zeros([BATCH], np.int32))).repeat().batch(
        params["batch_size"], drop_remainder=True)


def _predict_input_fn(params):
    # One batch: a loop's iterations may run their random ops in either order
    # (tf.while_loop's parallel iterations), one step draws in a fixed order.
    x = np.ones([BATCH, 4], np.float32)
    return tf.data.Dataset.from_tensor_slices(x).batch(params["batch_size"])


def _model_fn(dropout, losses=None):
    """A linear model; with `dropout`, masks in every mode. `losses` gets every train step's
    per-replica losses (a host_call), unchanged by a learning rate of 0."""
    def model_fn(features, labels, mode, params):
        del params
        w = v1.get_variable("w", [4, 1], initializer=v1.ones_initializer())
        x = features
        if dropout:  # Active in every mode: predictions show the masks.
            x = tf.nn.dropout(x, rate=0.5)
        out = tf.matmul(x, w)
        if mode == "infer":  # ModeKeys.PREDICT
            return TPUEstimatorSpec(mode, predictions={"y": out})
        loss = tf.reduce_mean(tf.square(out - tf.cast(labels[:, None], tf.float32)))
        train_op = v1.tpu.CrossShardOptimizer(v1.train.GradientDescentOptimizer(0.0)).minimize(
            loss, global_step=v1.train.get_global_step())
        host_call = None
        if losses is not None:
            def record(values):
                losses.append(values.numpy().tolist())
                return 0

            host_call = (lambda loss: [tf.py_function(record, [loss], tf.int32)],
                         [tf.reshape(loss, [1])])
        return TPUEstimatorSpec(mode, loss=loss, train_op=train_op, host_call=host_call)
    return model_fn


def _estimator(tmp_path, strategy, dropout, losses=None):
    config = RunConfig(model_dir=str(tmp_path), tf_random_seed=1, train_distribute=strategy,
                       eval_distribute=strategy, tpu_config=TPUConfig(iterations_per_loop=2))
    estimator = TPUEstimator(model_fn=_model_fn(dropout, losses), config=config, use_tpu=True,
                             train_batch_size=BATCH, eval_batch_size=BATCH,
                             predict_batch_size=BATCH)
    estimator.train(_input_fn, steps=2)
    return estimator


def _predict(estimator):
    return np.array([p["y"] for p in estimator.predict(_predict_input_fn)])


def test_seeded_dropout_restarts_its_masks_at_every_call(tmp_path, strategy):
    """Legacy's new graph per call: the same masks in every train(), evaluate() and
    predict()."""
    losses = []
    estimator = _estimator(tmp_path, strategy, dropout=True, losses=losses)
    estimator.train(_input_fn, steps=2)
    estimator.train(_input_fn, steps=2)
    assert len(losses) == 6 and losses[0] != losses[1]  # Each step its own masks,
    assert losses[2:4] == losses[:2] and losses[4:] == losses[:2]  # restarted every call.
    assert estimator.evaluate(_input_fn, steps=1)["loss"] == estimator.evaluate(
        _input_fn, steps=1)["loss"]
    first = _predict(estimator)
    assert len(np.unique(first)) > 1  # The masks differ between rows.
    resets, _, rewinds = random_streams.counts()
    instantiated = set()
    np.testing.assert_array_equal(_instantiated(lambda: _predict(estimator), instantiated)[0],
                                  first)
    _instantiated(lambda: estimator.train(_input_fn, steps=2), instantiated)
    assert losses[-2:] == losses[:2]  # (evaluate calls ran the host_call too.)
    # Dropout's ops are twins: their loops were set back, not instantiated again.
    assert random_streams.counts()[::2] == (resets, rewinds + 2)
    assert not instantiated & RANDOM_OPS
    estimator.evaluate(_input_fn, steps=1)
    np.testing.assert_array_equal(_predict(estimator), first)


def test_calls_without_random_ops_keep_their_compiled_loops(tmp_path, strategy):
    estimator = _estimator(tmp_path, strategy, dropout=False)
    calls = {"train": lambda: estimator.train(_input_fn, steps=2),
             "evaluate": lambda: estimator.evaluate(_input_fn, steps=1),
             "predict": lambda: _predict(estimator)}
    for call in calls.values():  # Every loop traced and run once.
        call()
    clears = random_streams.counts()
    kept = {name: _instantiated(call)[1] for name, call in calls.items()}
    assert random_streams.counts() == clears
    for name, call in calls.items():
        tf.random.set_seed(1)  # What each call did before: every function instantiated again.
        _, again = _instantiated(call)
        assert again > kept[name], (name, kept, again)


def test_input_fn_random_data_repeats_every_call(tmp_path, strategy):
    """An input_fn making its data with seeded random ops (eager here, in each call's new
    graph in legacy) gives the same data in every call."""
    def input_fn(params):
        x = tf.random.uniform([BATCH, 4], seed=7)
        return tf.data.Dataset.from_tensor_slices(x).batch(params["batch_size"])

    estimator = _estimator(tmp_path, strategy, dropout=False)
    first = [p["y"] for p in estimator.predict(input_fn)]
    second = [p["y"] for p in estimator.predict(input_fn)]
    np.testing.assert_array_equal(second, first)
