"""Tests for write_order: a replica step's large variable writes are chained, values unchanged.

Each test traces a plain-ops update (BERT's optimizer style: read, compute, assign, one
variable after another) inside `write_order.chained` and reads the traced graph's control
edges; values are compared with the same update traced outside it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tensorflow as tf

from tpu_estimator_compat import write_order


def _variables(sizes: list[int]) -> list[tf.Variable]:
    return [tf.Variable(np.linspace(-1.0, 1.0, n, dtype=np.float32), name=f"v{i}")
            for i, n in enumerate(sizes)]


def _trace_update(variables: list[tf.Variable], chained: bool,
                  extra_ops: int = 0) -> tuple[Any, Any]:
    """Traces `v <- (v * 0.5 + 1) ** 2 [+ extra_ops more ops]` for each variable in order;
    returns (the traced graph, the function)."""

    def update() -> None:
        for var in variables:
            value = tf.square(var * 0.5 + 1.0)
            for _ in range(extra_ops):
                value = value + 0.0
            var.assign(value)

    @tf.function(autograph=False)
    def step() -> None:
        if chained:
            with write_order.chained(tf.compat.v1.get_default_graph()):
                update()
        else:
            update()

    return step.get_concrete_function().graph, step


def _waits(graph: Any) -> set[tuple[str, str]]:
    """(write, op) for every op (other than a write) that waits for a variable write."""
    return {(source.name, op.name) for op in graph.get_operations()
            for source in op.control_inputs
            if source.type == "AssignVariableOp" and op.type != "AssignVariableOp"
            and op.type != "NoOp"}


def test_each_large_update_waits_for_the_previous_large_write(monkeypatch):
    monkeypatch.setattr(write_order, "CHAINED_WRITE_ELEMENTS", 8)
    graph, _ = _trace_update(_variables([16, 4, 16, 16]), chained=True)
    writes = [op for op in graph.get_operations() if op.type == "AssignVariableOp"]
    waits = _waits(graph)
    # v2's update waits for v0's write (v1 is small), v3's for v2's; v1's waits for nothing.
    assert {write for write, _ in waits} == {writes[0].name, writes[2].name}
    consumers = {op for write, op in waits if write == writes[0].name}
    assert any("ReadVariableOp" in op for op in consumers)  # v2's read starts after v0's write.


def test_outside_chained_nothing_is_ordered_and_values_are_equal(monkeypatch):
    monkeypatch.setattr(write_order, "CHAINED_WRITE_ELEMENTS", 8)
    unchained_graph, unchained = _trace_update(_variables([16, 4, 16]), chained=False)
    assert _waits(unchained_graph) == set()
    a, b = _variables([16, 4, 16]), _variables([16, 4, 16])
    _, chained = _trace_update(a, chained=True)
    _, plain = _trace_update(b, chained=False)
    for _ in range(3):
        chained()
        plain()
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    assert not np.allclose(a[0].numpy(), np.linspace(-1.0, 1.0, 16))  # They were updated.


def test_small_variables_are_left_unordered():
    graph, _ = _trace_update(_variables([16, 16, 16]), chained=True)
    assert write_order.CHAINED_WRITE_ELEMENTS > 16
    assert _waits(graph) == set()


def test_a_value_of_more_new_ops_than_an_update_is_left_unordered(monkeypatch):
    """A large write far from the previous one (a forward-pass write, then the optimizer's
    first) would order a whole computation behind it: not chained."""
    monkeypatch.setattr(write_order, "CHAINED_WRITE_ELEMENTS", 8)
    graph, _ = _trace_update(_variables([16, 16]), chained=True,
                             extra_ops=write_order.MAX_CHAINED_OPS)
    assert _waits(graph) == set()


@pytest.mark.parametrize("where", ["eager", "other_graph"])
def test_writes_elsewhere_are_untouched(monkeypatch, where):
    """Only writes made in the chained graph itself are ordered (not eager writes, not a
    nested function's)."""
    monkeypatch.setattr(write_order, "CHAINED_WRITE_ELEMENTS", 8)
    variables = _variables([16, 16])

    @tf.function(autograph=False)
    def inner() -> None:
        for var in variables:
            var.assign(tf.square(var * 0.5 + 1.0))

    @tf.function(autograph=False)
    def outer() -> None:
        with write_order.chained(tf.compat.v1.get_default_graph()):
            inner()

    if where == "eager":
        with write_order.chained(tf.Graph()):
            for var in variables:
                var.assign(tf.square(var * 0.5 + 1.0))
        np.testing.assert_allclose(variables[0].numpy()[0], 0.25)
    else:
        outer.get_concrete_function()
        assert _waits(inner.get_concrete_function().graph) == set()
