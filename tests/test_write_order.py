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

from tpu_estimator_compat.v1_state import write_order


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


def _trace_scoped(variables: list[tf.Variable], slots: list[tf.Variable] | None = None,
                  reads_previous: bool = False, uses_previous: bool = False) -> Any:
    """Traces, per variable i under name scope `u<i>`, `v <- (v * 0.5 + 1) ** 2` (and its
    slot `s <- s + v`, written after v as BERT writes m and v); `reads_previous`: the update
    also reads the previous variable; `uses_previous`: it adds the previous update's value.
    Returns the chained trace's graph."""

    @tf.function(autograph=False)
    def step() -> None:
        with write_order.chained(tf.compat.v1.get_default_graph()):
            previous_value, previous_var = None, None
            for i, var in enumerate(variables):
                with tf.name_scope(f"u{i}"):
                    value = tf.square(var * 0.5 + 1.0)
                    if reads_previous and previous_var is not None:
                        value += tf.reduce_sum(previous_var)
                    if uses_previous and previous_value is not None:
                        value += tf.reduce_sum(previous_value)
                    slot_value = value + 1.0  # Made before the writes, as BERT's next_m.
                    var.assign(value)
                    if slots:
                        slots[i].assign(slot_value)
                previous_value, previous_var = value, var

    return step.get_concrete_function().graph


def _scope_waits(graph: Any) -> set[tuple[str, str]]:
    """(scope of the write, scope of the update waiting for it)."""
    return {(write.split("/")[0], op.split("/")[0]) for write, op in _waits(graph)}


def test_independent_updates_run_smallest_first(monkeypatch):
    """The largest update comes last, when the fewest gradients are still alive."""
    monkeypatch.setattr(write_order, "CHAINED_WRITE_ELEMENTS", 8)
    graph = _trace_scoped(_variables([64, 16, 32]))
    assert _scope_waits(graph) == {("u1", "u2"), ("u2", "u0")}


def test_an_updates_slot_writes_move_with_it(monkeypatch):
    """BERT's optimizer writes param, m, v: the next update waits for the last of them."""
    monkeypatch.setattr(write_order, "CHAINED_WRITE_ELEMENTS", 8)
    sizes = [64, 16, 32]
    slots = [tf.Variable(tf.zeros([n])) for n in sizes]
    graph = _trace_scoped(_variables(sizes), slots=slots)
    assert _scope_waits(graph) == {("u1", "u2"), ("u2", "u0")}
    for write, op in _waits(graph):  # The slot's write, made after the variable's.
        assert write == f"{write.split('/')[0]}/AssignVariableOp_1", (write, op)


@pytest.mark.parametrize("dependency", ["reads_previous", "uses_previous"])
def test_dependent_updates_keep_the_order_they_were_made_in(monkeypatch, dependency):
    """An update that reads another's variable or takes its value cannot move before it."""
    monkeypatch.setattr(write_order, "CHAINED_WRITE_ELEMENTS", 8)
    graph = _trace_scoped(_variables([64, 16, 32]), **{dependency: True})
    assert _scope_waits(graph) == {("u0", "u1"), ("u1", "u2")}


def test_reordered_updates_compute_the_same_values(monkeypatch):
    monkeypatch.setattr(write_order, "CHAINED_WRITE_ELEMENTS", 8)
    sizes = [64, 16, 32]
    a, b = _variables(sizes), _variables(sizes)
    slots_a, slots_b = ([tf.Variable(tf.zeros([n])) for n in sizes] for _ in range(2))

    def update(variables: list[tf.Variable], slots: list[tf.Variable]) -> None:
        for var, slot in zip(variables, slots):
            value = tf.square(var * 0.5 + 1.0)
            slot_value = value + slot
            var.assign(value)
            slot.assign(slot_value)

    @tf.function(autograph=False)
    def chained() -> None:
        with write_order.chained(tf.compat.v1.get_default_graph()):
            update(a, slots_a)

    @tf.function(autograph=False)
    def plain() -> None:
        update(b, slots_b)

    assert _waits(chained.get_concrete_function().graph)  # It was reordered...
    for _ in range(3):
        chained()
        plain()
    for x, y in zip(a + slots_a, b + slots_b):  # ...and computed the same.
        np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_a_refused_reorder_leaves_slot_writes_unordered(monkeypatch):
    """When updates depend on each other, the slot writes (made before their variable's
    write) keep the order-made plan: no wait of an update on its own write."""
    monkeypatch.setattr(write_order, "CHAINED_WRITE_ELEMENTS", 8)
    sizes = [64, 16, 32]
    graph = _trace_scoped(_variables(sizes), slots=[tf.Variable(tf.zeros([n])) for n in sizes],
                          uses_previous=True)
    assert _scope_waits(graph) == {("u0", "u1"), ("u1", "u2")}
