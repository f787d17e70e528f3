"""Tests for tpu_estimator_compat.step.cross_shard: TPU cross-replica primitives on tf.distribute.

Every step runs the way the estimator runs it: a `tf.function` calling `strategy.run`, traced
and called under `strategy.scope()` and `strategy._scale_loss_for_estimator_enabled()`.
"""
import itertools
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from conftest import make_strategy

from tpu_estimator_compat import (EstimatorSpec, RunConfig, TPUConfig, TPUEstimator,
                                  TPUEstimatorSpec)
from tpu_estimator_compat._tf import patches as _tf_patches
from tpu_estimator_compat.step import cross_shard

LR = 0.01
W0 = 0.5


# Every MirroredStrategy starts its collective keys at the same group/instance key, so two
# strategies whose first all-reduces differ in shape abort the process's collective executor
# ("Shape mismatch in the collective instance 100"). Give each strategy here its own key
# range, as TF's own strategy_combinations does.
_KEY_BASES = itertools.count(7_000)


def _strategy(name, monkeypatch):
    monkeypatch.setattr(tf.distribute.MirroredStrategy, "_collective_key_base",
                        next(_KEY_BASES) * 100_000)
    return make_strategy(name)


@pytest.fixture(params=["default", "mirrored8"])
def strategy(request, monkeypatch):
    return _strategy(request.param, monkeypatch)


@pytest.fixture(autouse=True)
def _installed():
    cross_shard.install()


def _replica_x():
    """x = replica_id + 1, as float32, in replica context."""
    ctx = tf.distribute.get_replica_context()
    return tf.cast(ctx.replica_id_in_sync_group, tf.float32) + 1.0


def _loss(w, x):
    """Per-replica loss whose gradient wrt w is x**2 + 2*w*x (= x**2 + x at w=0.5)."""
    return w * x * x + w * w * x


def _per_replica_grads(num_replicas):
    xs = np.arange(1, num_replicas + 1, dtype=np.float64)
    return xs ** 2 + 2 * W0 * xs


def _op_types(concrete):
    graph_def = concrete.graph.as_graph_def()
    types = {node.op for node in graph_def.node}
    for function in graph_def.library.function:
        types.update(node.op for node in function.node_def)
    return types


def _run_step(strategy, replica_fn):
    """Traces and runs `strategy.run(replica_fn)` once, as the estimator does.

    Returns (concrete function, per-replica results as numpy).
    """
    scale_loss = strategy._scale_loss_for_estimator_enabled  # pylint: disable=protected-access
    with strategy.scope(), scale_loss():
        @tf.function
        def step():
            return strategy.run(replica_fn)

        concrete = step.get_concrete_function()
        result = step()
    if result is None:
        return concrete, None
    return concrete, [r.numpy() for r in strategy.experimental_local_results(result)]


def _make_w(strategy):
    with strategy.scope():
        return tf.Variable(W0, aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)


def _local_values(strategy, w):
    return [float(v.numpy()) for v in strategy.experimental_local_results(w)]


def _assert_w(strategy, w, expected):
    values = _local_values(strategy, w)
    assert len(values) == strategy.num_replicas_in_sync
    np.testing.assert_allclose(values, [expected] * len(values), rtol=1e-6)


# install / cross_replica_sum


def test_install_is_idempotent_and_patches_in_place():
    cls = tf.compat.v1.tpu.CrossShardOptimizer
    cross_shard.install()
    patched = (cls.compute_gradients, cls.apply_gradients)
    cross_shard.install()
    assert tf.compat.v1.tpu.cross_replica_sum is cross_shard.cross_replica_sum
    assert cls.compute_gradients is patched[0]
    assert cls.apply_gradients is patched[1]
    assert cls.compute_gradients.__qualname__.startswith("patched_compute_gradients.")
    assert cls.apply_gradients.__qualname__.startswith("patched_apply_gradients.")
    assert tf.compat.v1.tpu.CrossShardOptimizer is cls


def test_cross_replica_sum_sums_over_replicas_without_tpu_op(strategy):
    concrete, results = _run_step(
            strategy, lambda: tf.compat.v1.tpu.cross_replica_sum(_replica_x()))
    replicas = strategy.num_replicas_in_sync
    expected = replicas * (replicas + 1) / 2  # 36 on 8 replicas, 1 on default.
    assert results == [expected] * replicas
    assert "CrossReplicaSum" not in _op_types(concrete)
    assert "CrossReplicaSum" not in {op.type for op in concrete.graph.get_operations()}


def test_cross_replica_sum_of_tensor_keeps_shape_and_sums_elementwise(strategy):
    _, results = _run_step(
            strategy, lambda: tf.compat.v1.tpu.cross_replica_sum(_replica_x() * [1.0, 10.0]))
    total = sum(range(1, strategy.num_replicas_in_sync + 1))
    for r in results:
        np.testing.assert_array_equal(r, [total, 10.0 * total])


def test_cross_replica_sum_in_cross_replica_context_raises(monkeypatch):
    strategy = _strategy("mirrored8", monkeypatch)
    with strategy.scope():
        with pytest.raises(RuntimeError, match="outside a replica step"):
            tf.compat.v1.tpu.cross_replica_sum(tf.constant(1.0))


# Every path real code reaches the op through (tensorflow/tpu amoeba_net network_utils.py and
# official/detection nn_ops.py: the private module; the raw op wrapper), looked up when called.
def _private_module_sum(x):
    from tensorflow.python.tpu.ops import tpu_ops  # pylint: disable=import-outside-toplevel
    return tpu_ops.cross_replica_sum(x)


def _all_replicas(x):
    return [list(range(tf.distribute.get_replica_context().num_replicas_in_sync))]


_PATHS = {
    "tf.compat.v1.tpu": lambda x: tf.compat.v1.tpu.cross_replica_sum(x),
    "tensorflow.python.tpu.ops.tpu_ops": _private_module_sum,
    "tf.raw_ops": lambda x: tf.raw_ops.CrossReplicaSum(input=x,
                                                      group_assignment=_all_replicas(x)),
    "tf.compat.v1.raw_ops": lambda x: tf.compat.v1.raw_ops.CrossReplicaSum(
        input=x, group_assignment=_all_replicas(x)),
}


@pytest.mark.parametrize("path", sorted(_PATHS))
def test_every_path_to_the_op_sums_over_replicas_without_tpu_op(strategy, path):
    concrete, results = _run_step(strategy, lambda: _PATHS[path](_replica_x()))
    replicas = strategy.num_replicas_in_sync
    assert results == [replicas * (replicas + 1) / 2] * replicas
    assert "CrossReplicaSum" not in _op_types(concrete)


def test_raw_op_stays_keyword_only():
    with pytest.raises(TypeError, match="keyword"):
        tf.raw_ops.CrossReplicaSum(tf.constant(1.0), [[0]])


@pytest.mark.slow
def test_names_bound_at_import_time_are_mapped_in_a_fresh_process():
    # `from ...tpu_ops import cross_replica_sum` at a script's top runs before any estimator
    # exists: install_aliases() (the launcher) must have mapped it already.
    code = textwrap.dedent("""
        import tpu_estimator_compat
        from tpu_estimator_compat.step import cross_shard
        tpu_estimator_compat.install_aliases()
        from tensorflow.python.tpu.ops.tpu_ops import cross_replica_sum as private
        from tensorflow.contrib.tpu.python.ops.tpu_ops import cross_replica_sum as contrib
        from tensorflow.compat.v1.tpu import cross_replica_sum as public
        assert private is contrib is public is cross_shard.cross_replica_sum
        print("OK")
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=240, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("OK")


@pytest.mark.parametrize("groups", [[[0, 2, 4, 6], [1, 3, 5, 7]], [[0, 1, 2, 3], [4, 5, 6, 7]],
                                    [[0, 1], [2, 3], [4, 5], [6, 7]],
                                    [list(range(8))]])
def test_group_assignment_sums_within_each_group(monkeypatch, groups):
    strategy = _strategy("mirrored8", monkeypatch)
    concrete, results = _run_step(strategy, lambda: tf.compat.v1.tpu.cross_replica_sum(
        _replica_x() * [1.0, 10.0], group_assignment=groups))
    for replica, result in enumerate(results):
        members = next(g for g in groups if replica in g)
        total = sum(r + 1.0 for r in members)
        np.testing.assert_array_equal(result, [total, 10.0 * total])
    assert "CrossReplicaSum" not in _op_types(concrete)


@pytest.mark.slow
def test_group_assignment_gradient_is_the_group_sum_of_upstream(monkeypatch):
    # d/dx_r of sum_{r' in g(r)} c_r' * y_r' with y = group sum of x: sum of c over r's group.
    strategy = _strategy("mirrored8", monkeypatch)
    groups = [[0, 2, 4, 6], [1, 3, 5, 7]]

    def replica_fn():
        x = tf.constant(2.0)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.compat.v1.tpu.cross_replica_sum(x, group_assignment=groups)
            loss = _replica_x() * y
        return tape.gradient(loss, x)

    _, results = _run_step(strategy, replica_fn)
    for replica, result in enumerate(results):
        members = next(g for g in groups if replica in g)
        assert result == sum(r + 1.0 for r in members)


def test_group_assignment_on_one_replica_is_the_identity():
    _, results = _run_step(tf.distribute.get_strategy(), lambda: tf.raw_ops.CrossReplicaSum(
        input=_replica_x(), group_assignment=[[0]]))
    assert results == [1.0]


@pytest.mark.parametrize("groups,why", [
    ([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]], "TPU core count"),
    ([[0, 1, 2], [3, 4, 5, 6, 7]], "ragged"),
    ([[0, 1, 2, 3], [3, 4, 5, 6]], "a replica twice"),
])
def test_group_assignment_that_a_tpu_would_refuse_names_it(monkeypatch, groups, why):
    del why
    strategy = _strategy("mirrored8", monkeypatch)
    with pytest.raises(ValueError, match=r"group_assignment=.*every replica id from 0 to 7.*"
                                         r"received \[\[0, 1, 2.*8 replica\(s\)"):
        _run_step(strategy, lambda: tf.compat.v1.tpu.cross_replica_sum(
            _replica_x(), group_assignment=groups))


# CrossShardOptimizer with the base v1 apply


def _minimize_step(strategy, make_optimizer):
    w = _make_w(strategy)
    optimizer = make_optimizer()

    def replica_fn():
        optimizer.minimize(_loss(w, _replica_x()), var_list=[w])

    concrete, _ = _run_step(strategy, replica_fn)
    return w, concrete


def test_cross_shard_optimizer_mean_averages_gradients(strategy):
    w, concrete = _minimize_step(strategy, lambda: tf.compat.v1.tpu.CrossShardOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(LR)))
    grads = _per_replica_grads(strategy.num_replicas_in_sync)
    _assert_w(strategy, w, W0 - LR * grads.mean())
    assert "CrossReplicaSum" not in _op_types(concrete)


def test_plain_optimizer_under_estimator_scaling_averages_gradients(strategy):
    w, _ = _minimize_step(strategy,
                          lambda: tf.compat.v1.train.GradientDescentOptimizer(LR))
    grads = _per_replica_grads(strategy.num_replicas_in_sync)
    _assert_w(strategy, w, W0 - LR * grads.mean())


def test_cross_shard_optimizer_sum_reduction_sums_gradients(strategy):
    w, _ = _minimize_step(strategy, lambda: tf.compat.v1.tpu.CrossShardOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(LR),
            reduction=tf.compat.v1.losses.Reduction.SUM))
    grads = _per_replica_grads(strategy.num_replicas_in_sync)
    _assert_w(strategy, w, W0 - LR * grads.sum())


def test_cross_shard_optimizer_restores_estimator_scaling_flag(strategy):
    w = _make_w(strategy)
    optimizer = tf.compat.v1.tpu.CrossShardOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(LR))
    flags = []

    def replica_fn():
        flags.append(strategy._scale_loss_for_estimator)  # pylint: disable=protected-access
        optimizer.compute_gradients(_loss(w, _replica_x()), var_list=[w])
        flags.append(strategy._scale_loss_for_estimator)  # pylint: disable=protected-access

    _run_step(strategy, replica_fn)
    assert flags == [True, True] * strategy.num_replicas_in_sync
    assert strategy._scale_loss_for_estimator is False  # pylint: disable=protected-access


# CrossShardOptimizer around a custom optimizer that updates variables itself


class _AssignSubOptimizer(tf.compat.v1.train.Optimizer):
    """Updates variables in replica context, like BERT's AdamWeightDecayOptimizer."""

    def __init__(self, learning_rate):
        super().__init__(use_locking=False, name="AssignSubOptimizer")
        self._lr = learning_rate

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        return tf.group([v.assign_sub(self._lr * g) for g, v in grads_and_vars])


def test_custom_optimizer_minimize_applies_summed_scaled_gradients(strategy):
    w, concrete = _minimize_step(
            strategy, lambda: tf.compat.v1.tpu.CrossShardOptimizer(_AssignSubOptimizer(LR)))
    # compute_gradients scales each loss by 1/R; apply sums: the mean of the gradients.
    grads = _per_replica_grads(strategy.num_replicas_in_sync)
    _assert_w(strategy, w, W0 - LR * grads.mean())
    assert "CrossReplicaSum" not in _op_types(concrete)


def test_custom_optimizer_after_tf_gradients_applies_summed_gradients(strategy):
    w = _make_w(strategy)
    optimizer = tf.compat.v1.tpu.CrossShardOptimizer(_AssignSubOptimizer(LR))

    def replica_fn():
        # BERT: tf.gradients of the unscaled loss, then apply_gradients (TPU sums them).
        grads = tf.gradients(_loss(w, _replica_x()), [w])
        optimizer.apply_gradients(zip(grads, [w]))

    _run_step(strategy, replica_fn)
    grads = _per_replica_grads(strategy.num_replicas_in_sync)
    _assert_w(strategy, w, W0 - LR * grads.sum())


# xla.replica_id()


def _xla_module():
    from tensorflow.compiler.tf2xla.python import xla  # pylint: disable=import-outside-toplevel
    return xla


_REPLICA_ID_DTYPES = []  # What model_fn saw (params are copied per call, so not there).


def _concat_replica_ids_model_fn(features, labels, mode, params):
    """SimCLR objective.py's tpu_cross_replica_concat, applied to each replica's own id."""
    del labels
    xla = _xla_module()
    num_replicas = params["context"].num_replicas
    replica_id = xla.replica_id()
    _REPLICA_ID_DTYPES.append(replica_id.dtype)
    ext = tf.scatter_nd(indices=[[replica_id]], updates=[tf.cast([replica_id], tf.float32)],
                        shape=[num_replicas, 1])
    ext = tf.reshape(tf.compat.v1.tpu.cross_replica_sum(ext), [-1])
    seen = tf.compat.v1.get_variable(
        "seen", [num_replicas], initializer=tf.compat.v1.zeros_initializer(), trainable=False,
        aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    w = tf.compat.v1.get_variable("w", [], initializer=tf.compat.v1.ones_initializer())
    loss = tf.reduce_mean(features) * w
    train_op = tf.group(
        seen.assign(ext),
        tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=tf.compat.v1.train.get_or_create_global_step()))
    return TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def test_xla_replica_id_in_a_replica_step_is_the_replica_index(strategy, tmp_path):
    replicas = strategy.num_replicas_in_sync
    _REPLICA_ID_DTYPES.clear()
    est = TPUEstimator(
        model_fn=_concat_replica_ids_model_fn, use_tpu=True, train_batch_size=2 * replicas,
        config=RunConfig(model_dir=str(tmp_path), train_distribute=strategy,
                         tpu_config=TPUConfig(iterations_per_loop=1)))
    est.train(lambda params: tf.data.Dataset.from_tensors(tf.ones([4])).repeat().batch(
        params["batch_size"], drop_remainder=True), max_steps=1)
    seen = tf.train.load_checkpoint(str(tmp_path)).get_tensor("seen")
    np.testing.assert_array_equal(seen, np.arange(replicas, dtype=np.float32))
    assert _REPLICA_ID_DTYPES and set(_REPLICA_ID_DTYPES) == {tf.int32}


def test_xla_replica_id_outside_a_replica_step_is_tensorflows_op():
    xla = _xla_module()
    concrete = tf.function(xla.replica_id).get_concrete_function()
    assert "XlaReplicaId" in _op_types(concrete)  # Traced only: running it would crash.
    assert xla.replica_id is not _tf_patches.original("cross_shard.xla_replica_id")


# number_of_shards inside model_fn


def _global_bn_model_fn(seen):
    """SimCLR's global batch norm: moments all-reduced when `number_of_shards > 1`."""
    from tensorflow.python.tpu import tpu_function  # pylint: disable=g-direct-tensorflow-import

    def model_fn(features, labels, mode, params):
        del labels
        shards = tpu_function.get_tpu_context().number_of_shards
        seen.append((shards, params["use_tpu"]))
        mean, variance = tf.nn.moments(features, [0])
        if shards and shards > 1:
            group_mean = tf.compat.v1.tpu.cross_replica_sum(mean) / shards
            variance = (tf.compat.v1.tpu.cross_replica_sum(variance) / shards +
                        tf.compat.v1.tpu.cross_replica_sum(tf.square(group_mean - mean))
                        / shards)
        w = tf.compat.v1.get_variable("w", initializer=tf.ones([2]))
        loss = tf.reduce_sum(w * variance)
        train_op = tf.compat.v1.train.GradientDescentOptimizer(LR).minimize(
            loss, global_step=tf.compat.v1.train.get_global_step())
        return TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

    return model_fn


@pytest.mark.parametrize("use_tpu", [True, False])
def test_model_fn_reads_the_replica_count_as_tpu_shard_count(tmp_path, strategy, use_tpu):
    """With use_tpu=True legacy built model_fn in a TPU shard context: number_of_shards was
    the replica count, and global batch norm all-reduced its moments. 8 replicas then train
    exactly as 1 does on the global batch (w' = w - lr * Var[X]); with use_tpu=False, as on
    legacy's CPU path, it is None."""
    x = np.arange(32, dtype=np.float32).reshape(16, 2) ** 1.5 / 10.0
    steps, seen = 3, []
    config = RunConfig(model_dir=str(tmp_path), train_distribute=strategy,
                       tpu_config=TPUConfig(iterations_per_loop=steps))
    est = TPUEstimator(model_fn=_global_bn_model_fn(seen), config=config, use_tpu=use_tpu,
                       train_batch_size=16)
    est.train(lambda params: tf.data.Dataset.from_tensor_slices((x, x[:, 0])).repeat().batch(
        params["batch_size"], drop_remainder=True), max_steps=steps)
    replicas = strategy.num_replicas_in_sync
    assert set(seen) == {(replicas if use_tpu else None, use_tpu)}
    w = tf.train.load_checkpoint(est.latest_checkpoint()).get_tensor("w")
    if use_tpu or replicas == 1:
        np.testing.assert_allclose(w, 1.0 - LR * steps * x.var(axis=0), rtol=1e-5)


def test_tensorflow_itself_still_sees_no_shard_context_inside_model_fn():
    """TF's TPU feature columns choose their CPU lookup by `number_of_shards is None`, and
    the shim maps CrossShardOptimizer only outside a real shard: both keep TF's answer."""
    from tensorflow.python.tpu import tpu_function  # pylint: disable=g-direct-tensorflow-import

    from tpu_estimator_compat._tf import private as _tf_private

    with cross_shard.shard_count(8):
        as_model_code = tpu_function.get_tpu_context().number_of_shards
        as_tf = {"__name__": "tensorflow.python.tpu.feature_column", "tpu_function": tpu_function}
        exec("count = tpu_function.get_tpu_context().number_of_shards", as_tf)  # pylint: disable=exec-used
        assert not _tf_private.in_legacy_tpu_shard_context()
    assert (as_model_code, as_tf["count"]) == (8, None)
    assert tpu_function.get_tpu_context().number_of_shards is None


# The XLA context model code reads inside model_fn


def _is_xla_compiled():
    """tensor2tensor `common_layers.is_xla_compiled()`: legacy's TPU-path switch."""
    from tensorflow.python.ops import control_flow_util  # pylint: disable=g-direct-tensorflow-import

    context = tf.compat.v1.get_default_graph()._get_control_flow_context()  # pylint: disable=protected-access
    return control_flow_util.GetContainingXLAContext(context) is not None


_XLA_SEEN = []


def _xla_switch_model_fn(features, labels, mode, params):
    """tensor2tensor's EVAL: a TPUEstimatorSpec with eval_metrics when XLA-compiled, else an
    EstimatorSpec with eval_metric_ops (which TPU evaluation refuses)."""
    from tensorflow.python.ops import control_flow_util  # pylint: disable=g-direct-tensorflow-import

    v1 = tf.compat.v1
    xla = _is_xla_compiled()
    _XLA_SEEN.append(xla)
    logits = v1.layers.dense(features, 2, name="dense")
    # contrib.seq2seq's `_is_xla_tensor`: the op-level question.
    assert control_flow_util.IsInXLAContext(logits.op) is xla
    # TensorFlow's own control flow is built as before: lowered to Switch/Merge off XLA.
    _, = tf.while_loop(lambda i: i < 3, lambda i: [i + 1], [tf.constant(0)])
    loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == "train":
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(
                loss, v1.train.get_global_step())
        return TPUEstimatorSpec(mode, loss=loss, train_op=train_op)
    predictions = tf.argmax(logits, 1)
    if xla:
        metric_fn = lambda labels, predictions: {  # noqa: E731
                "accuracy": v1.metrics.accuracy(labels, predictions)}
        return TPUEstimatorSpec(mode, loss=loss, eval_metrics=(metric_fn, [labels, predictions]))
    return EstimatorSpec(
            mode, loss=loss, eval_metric_ops={"accuracy": v1.metrics.accuracy(labels, predictions)})


@pytest.mark.slow_cases('mirrored8-True')
@pytest.mark.parametrize("use_tpu", [True, False])
def test_model_code_sees_the_xla_context_legacy_tpu_built_model_fn_in(tmp_path, strategy,
                                                                      use_tpu):
    """Legacy built a use_tpu=True model_fn inside `tpu.rewrite`; tensor2tensor asks for that
    XLA context to return its TPU spec. Model code gets it there (and not with
    use_tpu=False), so evaluation runs on every replica; TensorFlow's own control flow and
    every other thread still see none."""
    x = np.random.RandomState(0).randn(32, 3).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int32)
    seen = _XLA_SEEN
    seen.clear()
    config = RunConfig(model_dir=str(tmp_path), eval_distribute=strategy,
                       train_distribute=strategy, tpu_config=TPUConfig(iterations_per_loop=2))
    est = TPUEstimator(model_fn=_xla_switch_model_fn, config=config, use_tpu=use_tpu,
                       train_batch_size=16, eval_batch_size=16)
    input_fn = lambda params: tf.data.Dataset.from_tensor_slices((x, y)).batch(  # noqa: E731
            params["batch_size"], drop_remainder=True)
    est.train(lambda params: input_fn(params).repeat(), max_steps=2)
    if not use_tpu and strategy.num_replicas_in_sync > 1:
        return  # eval_metric_ops on several replicas is refused (test_replica_step).
    results = est.evaluate(input_fn)
    assert set(seen) == {use_tpu}
    assert 0.0 <= results["accuracy"] <= 1.0 and results["global_step"] == 2
    assert not _is_xla_compiled()


def test_tensorflow_itself_still_sees_no_xla_context_inside_model_fn():
    from tensorflow.python.ops import control_flow_util  # pylint: disable=g-direct-tensorflow-import

    graph = tf.Graph()
    with graph.as_default(), cross_shard.shard_count(8):
        op = tf.constant(1.0).op
        as_model_code = (_is_xla_compiled(), control_flow_util.IsInXLAContext(op))
        as_tf = {"__name__": "tensorflow.python.ops.while_v2", "cfu": control_flow_util,
                 "graph": graph, "op": op}
        exec("answer = (cfu.GraphOrParentsInXlaContext(graph), cfu.IsInXLAContext(op))",  # pylint: disable=exec-used
             as_tf)
        tf.while_loop(lambda i: i < 3, lambda i: i + 1, [tf.constant(0)])
    while_ops = [op for op in graph.get_operations() if op.type in ("While", "StatelessWhile")]
    assert as_model_code == (True, True)
    assert as_tf["answer"] == (False, False)
    assert len(while_ops) == 1 and while_ops[0].get_attr("_lower_using_switch_merge")
    with graph.as_default():
        assert not _is_xla_compiled()


def _accumulating_model_fn(features, labels, mode, params):
    """google-research/tapas' gradient accumulation, reduced: the summed gradient is applied
    by a custom optimizer's `assign` inside `tf.cond` on every 2nd step (`in_cond=True`), or
    by the same assign masked outside any control flow (`in_cond=False`)."""
    v1 = tf.compat.v1
    w = v1.get_variable("w", initializer=np.eye(3, dtype=np.float32) * 0.5)
    loss = tf.reduce_mean(tf.square(tf.matmul(features, w) - labels))
    counter = v1.get_variable("counter", [], initializer=v1.zeros_initializer(),
                              trainable=False)
    grad = v1.tpu.cross_replica_sum(tf.gradients(loss, [w])[0])
    with tf.control_dependencies([counter.assign_add(1.0)]):
        due = tf.equal(tf.math.floormod(counter, 2.0), 0.0)
        if params["in_cond"]:
            apply = v1.cond(due, lambda: tf.group(w.assign_sub(0.1 * grad)), tf.no_op)
        else:
            apply = w.assign_sub(tf.cast(due, tf.float32) * 0.1 * grad)
    gs = v1.train.get_global_step()
    return TPUEstimatorSpec(mode, loss=loss, train_op=tf.group(apply, gs.assign_add(1)))


def _accumulating_input_fn(params):
    x = np.random.RandomState(0).rand(64, 3).astype(np.float32)
    return tf.data.Dataset.from_tensor_slices((x, x)).repeat().batch(params["batch_size"],
                                                                     drop_remainder=True)


@pytest.mark.slow
def test_replica_assign_inside_cond_updates_like_the_tpu(tmp_path):
    """On 8 replicas (use_tpu=True) a mirrored variable assigned inside `tf.cond` in
    replica context: TensorFlow refuses the merge_call there; each TPU core assigned its own
    copy. The weights equal those of the same update made outside control flow."""
    results = {}
    for in_cond in (True, False):
        est = TPUEstimator(model_fn=_accumulating_model_fn, use_tpu=True, train_batch_size=16,
                           params={"in_cond": in_cond},
                           config=RunConfig(model_dir=str(tmp_path / str(in_cond)),
                                            tpu_config=TPUConfig(iterations_per_loop=2)))
        est.train(_accumulating_input_fn, max_steps=4)
        results[in_cond] = (est.get_variable_value("w"), est.get_variable_value("counter"))
    np.testing.assert_array_equal(results[True][0], results[False][0])
    assert results[True][1] == results[False][1] == 4.0
    assert not np.array_equal(results[True][0], np.eye(3) * 0.5)  # Two updates were applied.
