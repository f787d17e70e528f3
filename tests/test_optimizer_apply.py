"""Tests for optimizer_apply: v1 optimizers update each device without an all-device barrier.

The step below is a v1 `minimize(loss, global_step)` inside `strategy.run` in one
`tf.function`, as a replica step of the shim traces it. Values must equal TensorFlow's own
`_distributed_apply` bit for bit; the traced graph must hold no control edge from one device
to another.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
import tensorflow as tf

from tpu_estimator_compat.step import optimizer_apply
from tpu_estimator_compat.v1_state import write_order

from conftest import make_strategy

v1 = tf.compat.v1

OPTIMIZERS: dict[str, Callable[[], Any]] = {
    "sgd": lambda: v1.train.GradientDescentOptimizer(0.1),
    "momentum": lambda: v1.train.MomentumOptimizer(0.1, 0.9),
    # Adam's `_finish` updates non-slot beta powers on every device.
    "adam": lambda: v1.train.AdamOptimizer(0.01),
}


def _train(strategy: tf.distribute.Strategy, make_optimizer: Callable[[], Any],
           steps: int, with_global_step: bool = True,
           with_update_ops: bool = False) -> tuple[Any, Any]:
    """Runs `steps` v1 training steps; returns (traced graph, {name: per-device values}).

    `with_update_ops`: each replica first counts its steps in a replica-local variable and
    minimizes under `tf.control_dependencies` on that count (batch norm's UPDATE_OPS idiom).
    """
    optimizer_apply.install()
    with strategy.scope():
        kernel = tf.Variable(np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3),
                             name="kernel")
        bias = tf.Variable(np.zeros(3, np.float32), name="bias")
        step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        counts = tf.Variable(0.0, name="counts", trainable=False,
                             synchronization=tf.VariableSynchronization.ON_READ,
                             aggregation=tf.VariableAggregation.SUM)
        optimizer = make_optimizer()  # Its slots are created at the first trace, once.
    rows = np.arange(4 * 8, dtype=np.float32).reshape(8, 4) / 10.0

    def replica_step() -> Any:
        context = tf.distribute.get_replica_context()
        x = tf.gather(tf.constant(rows), context.replica_id_in_sync_group)[None]
        loss = tf.reduce_sum(tf.square(tf.matmul(x, kernel) + bias - 1.0))
        update_ops = [counts.assign_add(1.0)] if with_update_ops else []
        with tf.control_dependencies(update_ops):
            return optimizer.minimize(loss, var_list=[kernel, bias],
                                      global_step=step if with_global_step else None)

    @tf.function
    def run() -> None:
        strategy.run(replica_step)

    with strategy.scope():
        graph = run.get_concrete_function().graph
        for _ in range(steps):
            run()
    values = {v.name: [t.numpy() for t in strategy.experimental_local_results(v)]
              for v in (kernel, bias, step)}
    return graph, values


def _cross_device_control_edges(graph: Any) -> list[tuple[str, str]]:
    ops = {op.name: op for op in graph.get_operations()}
    edges = []
    for op in ops.values():
        for source in op.control_inputs:
            if op.device and source.device and op.device != source.device:
                edges.append((source.name, op.name))
    return edges


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_values_equal_tensorflows_own_apply_bit_for_bit(strategy, name, monkeypatch):
    with optimizer_apply.per_device():
        _, ours = _train(strategy, OPTIMIZERS[name], steps=3)
    monkeypatch.setattr(optimizer_apply, "_applies", lambda distribution: False)
    _, theirs = _train(strategy, OPTIMIZERS[name], steps=3)
    assert ours.keys() == theirs.keys()
    for key in ours:
        for mine, reference in zip(ours[key], theirs[key]):
            np.testing.assert_array_equal(mine, reference, err_msg=key)
    assert [int(v) for v in ours["global_step:0"]] == [3] * strategy.num_replicas_in_sync


@pytest.mark.parametrize("with_global_step", [True, False])
def test_no_control_edge_crosses_devices_on_eight_replicas(with_global_step):
    strategy = make_strategy("mirrored8")
    with optimizer_apply.per_device():
        graph, values = _train(strategy, OPTIMIZERS["adam"], steps=1,
                               with_global_step=with_global_step)
    assert _cross_device_control_edges(graph) == []
    assert len({tuple(np.ravel(k)) for k in values["kernel:0"]}) == 1  # Replicas agree.


def test_update_ops_order_only_their_own_devices_update(monkeypatch):
    """Under `tf.control_dependencies(UPDATE_OPS)` each device's update waits for its own
    replica's update ops, not every replica's (MirroredStrategy's merge_call runs under the
    union of all of them: 144 control inputs on each constant of an 8-replica ResNet)."""
    strategy = make_strategy("mirrored8")
    with optimizer_apply.per_device():
        graph, ours = _train(strategy, OPTIMIZERS["momentum"], steps=2, with_update_ops=True)
    assert _cross_device_control_edges(graph) == []
    monkeypatch.setattr(optimizer_apply, "_applies", lambda distribution: False)
    _, theirs = _train(strategy, OPTIMIZERS["momentum"], steps=2, with_update_ops=True)
    for key in ours:
        for mine, reference in zip(ours[key], theirs[key]):
            np.testing.assert_array_equal(mine, reference, err_msg=key)


def test_tensorflows_own_apply_has_the_barrier_this_module_removes():
    """Guards the test above: without per_device() the same step has the N*N edges."""
    graph, _ = _train(make_strategy("mirrored8"), OPTIMIZERS["adam"], steps=1)
    assert len(_cross_device_control_edges(graph)) >= 8 * 7


def test_outside_per_device_scope_tensorflows_apply_runs(strategy):
    """The patch is inert outside the shim's runtime scope (other code in the process)."""
    assert not optimizer_apply._applies(strategy)  # pylint: disable=protected-access


def _train_mixed(bias_dtype: Any) -> dict[str, list[Any]]:
    """Two SGD steps on 8 replicas of a float32 kernel and a `bias_dtype` bias."""
    strategy = make_strategy("mirrored8")
    optimizer_apply.install()
    with strategy.scope():
        kernel = tf.Variable(np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3))
        bias = tf.Variable(np.zeros(3, bias_dtype))
        optimizer = v1.train.GradientDescentOptimizer(0.01)
    rows = np.arange(4 * 8, dtype=np.float32).reshape(8, 4) / 10.0

    def replica_step() -> Any:
        context = tf.distribute.get_replica_context()
        x = tf.gather(tf.constant(rows), context.replica_id_in_sync_group)[None]
        out = tf.cast(tf.matmul(x, kernel), bias_dtype) + bias
        return optimizer.minimize(tf.reduce_sum(tf.square(out - 1.0)), var_list=[kernel, bias])

    @tf.function
    def run() -> None:
        strategy.run(replica_step)

    with strategy.scope(), optimizer_apply.per_device():
        for _ in range(2):
            run()
    return {name: [t.numpy() for t in strategy.experimental_local_results(v)]
            for name, v in (("kernel", kernel), ("bias", bias))}


def test_variables_of_mixed_dtypes_are_summed_per_dtype():
    """A float64 layer next to float32 ones (tf_keras v1 dtype behaviour after
    `disable_v2_behavior()`): TensorFlow's batch all-reduce would concat them and fail."""
    mixed = _train_mixed(np.float64)
    single = _train_mixed(np.float32)
    assert mixed["bias"][0].dtype == np.float64
    for name in ("kernel", "bias"):
        for got, want in zip(mixed[name], single[name]):
            np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=name)
    assert np.abs(mixed["bias"][0]).max() > 0.01  # It trained.


# A custom optimizer's update under CrossShardOptimizer: computed once, written everywhere.

from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator, TPUEstimatorSpec  # noqa: E402


class _WeightDecayAdam(v1.train.Optimizer):
    """BERT's AdamWeightDecayOptimizer, reduced: slots from get_variable, every variable and
    slot assigned in replica context. `extra` adds, half-way through the variables, a write
    the update cannot stand in for on other replicas: a SUM-aggregated variable (its assign
    merges across replicas) or a replica-local ON_READ one."""

    calls = 0

    def __init__(self, extra: str | None = None) -> None:
        super().__init__(use_locking=False, name="WeightDecayAdam")
        self._extra = extra

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        type(self).calls += 1
        assignments = []
        grads_and_vars = list(grads_and_vars)
        for index, (grad, param) in enumerate(grads_and_vars):
            if index == len(grads_and_vars) // 2 and self._extra:
                assignments.append(self._extra_write())
            base = param.name.split(":")[0]
            m = v1.get_variable(base + "/adam_m", shape=param.shape, trainable=False,
                                initializer=v1.zeros_initializer())
            v = v1.get_variable(base + "/adam_v", shape=param.shape, trainable=False,
                                initializer=v1.zeros_initializer())
            next_m = 0.9 * m + 0.1 * grad
            next_v = 0.999 * v + 0.001 * tf.square(grad)
            update = next_m / (tf.sqrt(next_v) + 1e-6) + 0.01 * param
            assignments += [param.assign(param - 0.05 * update), m.assign(next_m),
                            v.assign(next_v)]
        return tf.group(*assignments, name=name)

    def _extra_write(self) -> Any:
        if self._extra == "summed":
            counter = v1.get_variable("summed_count", [], trainable=False,
                                      initializer=v1.zeros_initializer(),
                                      aggregation=tf.VariableAggregation.SUM)
        else:
            counter = v1.get_variable("replica_count", [], trainable=False,
                                      initializer=v1.zeros_initializer(),
                                      synchronization=tf.VariableSynchronization.ON_READ,
                                      aggregation=tf.VariableAggregation.SUM)
        return counter.assign_add(tf.constant(1.0))


def _bert_style_model_fn(features, labels, mode, params):
    """run_classifier's shape: tf.gradients, clipping, CrossShardOptimizer(custom), then the
    global step assigned by model_fn itself."""
    hidden = v1.layers.dense(features, 8, activation=tf.tanh, name="hidden")
    logits = v1.layers.dense(hidden, 3, name="logits")
    loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
    tvars = v1.trainable_variables()
    grads, _ = tf.clip_by_global_norm(tf.gradients(loss, tvars), 1.0)
    optimizer = v1.tpu.CrossShardOptimizer(_WeightDecayAdam(params["extra"]))
    global_step = v1.train.get_global_step()
    train_op = optimizer.apply_gradients(zip(grads, tvars), global_step=global_step)
    train_op = tf.group(train_op, global_step.assign(global_step + 1))
    return TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def _bert_style_input_fn(params):
    rng = np.random.RandomState(0)
    x = rng.rand(64, 5).astype(np.float32)
    y = rng.randint(0, 3, 64).astype(np.int32)
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(params["batch_size"],
                                                                     drop_remainder=True)


def _train_bert_style(model_dir: Any, extra: str | None) -> tuple[dict[str, Any], int]:
    """Six steps (two loops) on 8 replicas; returns (every variable's value, apply calls)."""
    _WeightDecayAdam.calls = 0
    est = TPUEstimator(model_fn=_bert_style_model_fn, use_tpu=True, train_batch_size=16,
                       params={"extra": extra},
                       config=RunConfig(model_dir=str(model_dir), tf_random_seed=3,
                                        tpu_config=TPUConfig(iterations_per_loop=3)))
    est.train(_bert_style_input_fn, max_steps=6)
    return ({name: est.get_variable_value(name) for name in est.get_variable_names()},
            _WeightDecayAdam.calls)


# Each extra state and the chained writes run by default; plain and chained is opt-in.
@pytest.mark.slow
@pytest.mark.parametrize("extra,chained", [
    (None, False), ("summed", True), ("replica_local", False),
    pytest.param(None, True, marks=pytest.mark.slow)])
def test_custom_optimizer_update_equals_a_merge_call_per_write(tmp_path, monkeypatch, extra,
                                                               chained):
    """Bit for bit what a merge_call per assign gave (replica 0's update on every device),
    over two loops of three steps: a replica copy left behind would change the next step's
    summed gradient. With nothing but variable writes in the update, replicas 1-7 do not run
    it; with a write it cannot stand in for, every replica runs it (the SUM counts 8 a step,
    the replica-local one sums 8 copies). `chained`: every variable counts as large, so each
    variable's update waits for the previous one's write (`write_order`)."""
    if chained:
        monkeypatch.setattr(write_order, "CHAINED_WRITE_ELEMENTS", 0)
    ours, our_calls = _train_bert_style(tmp_path / "once", extra)
    monkeypatch.setattr(optimizer_apply, "_local_replica", lambda graph: None)
    theirs, their_calls = _train_bert_style(tmp_path / "merge", extra)
    assert ours.keys() == theirs.keys()
    assert any(name.endswith("/adam_m") for name in ours)
    for name in ours:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
    assert int(ours["global_step"]) == 6
    assert np.abs(ours["logits/kernel/adam_m"]).max() > 0  # The update ran.
    assert their_calls % 8 == 0 and their_calls > 0
    assert our_calls == (their_calls // 8 if extra is None else their_calls)
    if extra == "summed":
        assert float(ours["summed_count"]) == 8 * 6


@pytest.mark.parametrize("nested", [False, True])
def test_a_runtime_scope_left_inside_another_keeps_the_loss_scaling(nested):
    """v1 optimizers average over replicas inside `RuntimeScope`; leaving one entered inside
    another (a loop call or a compile step within train()) must not switch that off for the
    outer one (TF's own context manager set the flag False on exit)."""
    from tpu_estimator_compat.session import strategy_state as runtime_lib

    strategy = make_strategy("mirrored8")
    runtime = runtime_lib.new_runtime(strategy)
    with strategy.scope():
        var = tf.Variable(1.0)

    @tf.function(autograph=False)
    def gradient() -> tf.Tensor:
        def replica() -> tf.Tensor:
            opt = tf.compat.v1.train.GradientDescentOptimizer(1.0)
            return opt.compute_gradients(var * 1.0, [var])[0][0]

        return strategy.experimental_local_results(strategy.run(replica))[0]

    with runtime.scope():
        if nested:
            with runtime.scope():
                pass
        value = float(gradient())
    assert value == pytest.approx(1.0 / 8)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_inference_apply_gradients_leaves_every_variable_as_it_was(name):
    """Outside TRAIN, a model_fn's `minimize()` is a no-op in the traced step: legacy's
    EVAL/PREDICT sessions never ran the train_op, and a tf.function runs every stateful op."""
    from tpu_estimator_compat._tf import patches as _tf_patches

    weight = tf.Variable([1.0, 2.0])
    step = tf.Variable(0, dtype=tf.int64)
    optimizer = OPTIMIZERS[name]()

    @tf.function
    def eval_like_step():
        with _tf_patches.applied("optimizer_apply.inference_apply_gradients"):
            loss = tf.reduce_sum(weight * weight)
            train_op = optimizer.minimize(loss, global_step=step, var_list=[weight])
        assert isinstance(train_op, tf.Operation) and train_op.type == "NoOp"
        return loss

    assert eval_like_step().numpy() == 5.0
    np.testing.assert_array_equal(weight.numpy(), [1.0, 2.0])
    assert step.numpy() == 0
    optimizer.minimize(lambda: tf.reduce_sum(weight * weight), global_step=step,
                       var_list=[weight])  # The patch is gone again.
    assert step.numpy() == 1 and weight.numpy()[0] != 1.0
