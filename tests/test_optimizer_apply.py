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

from tpu_estimator_compat import optimizer_apply

from conftest import make_strategy

v1 = tf.compat.v1

OPTIMIZERS: dict[str, Callable[[], Any]] = {
    "sgd": lambda: v1.train.GradientDescentOptimizer(0.1),
    "momentum": lambda: v1.train.MomentumOptimizer(0.1, 0.9),
    # Adam's `_finish` updates non-slot beta powers on every device.
    "adam": lambda: v1.train.AdamOptimizer(0.01),
}


def _train(strategy: tf.distribute.Strategy, make_optimizer: Callable[[], Any],
           steps: int, with_global_step: bool = True) -> tuple[Any, Any]:
    """Runs `steps` v1 training steps; returns (traced graph, {name: per-device values})."""
    optimizer_apply.install()
    with strategy.scope():
        kernel = tf.Variable(np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3),
                             name="kernel")
        bias = tf.Variable(np.zeros(3, np.float32), name="bias")
        step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        optimizer = make_optimizer()  # Its slots are created at the first trace, once.
    rows = np.arange(4 * 8, dtype=np.float32).reshape(8, 4) / 10.0

    def replica_step() -> Any:
        context = tf.distribute.get_replica_context()
        x = tf.gather(tf.constant(rows), context.replica_id_in_sync_group)[None]
        loss = tf.reduce_sum(tf.square(tf.matmul(x, kernel) + bias - 1.0))
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
