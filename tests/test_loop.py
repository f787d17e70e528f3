"""Tests for loop/: the compiled train and inference loops, their plumbing and the driver.

Tiny step functions (one variable, a counter) on the default strategy and MirroredStrategy
over 8 logical CPUs; no estimator, no model_fn.
"""
from __future__ import annotations

import dataclasses
import gc
import threading
import weakref

import numpy as np
import pytest
import tensorflow as tf

from tpu_estimator_compat.loop import inference_loop
from tpu_estimator_compat.loop import driver as driver_lib
from tpu_estimator_compat.loop import nan_loss
from tpu_estimator_compat.loop import train_loop as loop_lib


def _dataset(strategy: tf.distribute.Strategy, rows: int, batch: int = 8) -> tf.data.Dataset:
    per_replica = batch // strategy.num_replicas_in_sync
    data = tf.data.Dataset.range(rows).map(lambda x: (tf.cast(x, tf.float32), x))

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        return data.shard(context.num_input_pipelines, context.input_pipeline_id).batch(
            per_replica, drop_remainder=True)

    return strategy.distribute_datasets_from_function(dataset_fn)


def _train_loop(strategy: tf.distribute.Strategy, *, host_call: bool = False,
                every_n: int = 1,
                endless: bool = False) -> tuple[loop_lib.TrainLoop, tf.Variable, tf.Variable]:
    with strategy.scope():
        total = tf.Variable(0.0, aggregation=tf.VariableAggregation.SUM)
        step = tf.Variable(0, dtype=tf.int64,
                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

    def train_step(features, labels):
        update = total.assign_add(tf.reduce_sum(features))
        with tf.control_dependencies([update]):
            increment = step.assign_add(1)
        with tf.control_dependencies([increment]):
            out = {"loss": tf.reduce_mean(features)}
            if host_call:
                out["host_call"] = [tf.identity(labels)]
        return out

    specs = [tf.TensorSpec([None], tf.int64)] if host_call else None
    loop = loop_lib.make_multi_step_train_fn(strategy, train_step, host_call_specs=specs,
                                             host_call_every_n=every_n, global_step=step,
                                             endless=endless)
    return loop, total, step


def _op_types(concrete: tf.types.experimental.ConcreteFunction) -> set[str]:
    graph_def = concrete.graph.as_graph_def()
    nodes = list(graph_def.node)
    for function in graph_def.library.function:
        nodes.extend(function.node_def)
    return {node.op for node in nodes}


@pytest.mark.parametrize("endless", [False, True])
def test_endless_train_loop_takes_elements_without_end_of_input_checks(strategy, endless):
    """A repeated input needs no per-step `get_next_as_optional` + cond (a replica barrier)."""
    loop, total, _ = _train_loop(strategy, endless=endless)
    with strategy.scope():
        iterator = iter(_dataset(strategy, 64))
        loop.trace(iterator)
        result = loop(iterator, 3)
        ops = _op_types(loop._run_steps.concrete(iterator))  # pylint: disable=protected-access
    np.testing.assert_allclose(result.losses, [3.5, 11.5, 19.5])
    assert result.global_step == 3 and float(total.numpy()) == sum(range(24))
    assert ("IteratorGetNextAsOptional" in ops) is not endless, sorted(ops)


def test_train_loop_runs_n_steps_and_returns_losses_and_global_step(strategy):
    loop, total, _ = _train_loop(strategy)
    with strategy.scope():
        iterator = iter(_dataset(strategy, 64))
        loop.trace(iterator)
        first = loop(iterator, 3)
        second = loop(iterator, 2)
    assert first.steps_run == 3 and second.steps_run == 2
    # Global-batch mean of rows 0..7, 8..15, ... (the mean over replicas of replica means).
    np.testing.assert_allclose(first.losses, [3.5, 11.5, 19.5])
    np.testing.assert_allclose(second.losses, [27.5, 35.5])
    assert first.global_step == 3 and second.global_step == 5
    assert float(total.numpy()) == sum(range(40))


def test_train_loop_stops_cleanly_when_input_is_exhausted(strategy):
    loop, _, step = _train_loop(strategy)
    with strategy.scope():
        iterator = iter(_dataset(strategy, 16))  # Two global batches of 8.
        result = loop(iterator, 5)
        after = loop(iterator, 5)
    assert result.steps_run == 2 and len(result.losses) == 2
    assert result.global_step == 2 == int(step.numpy())
    assert after.steps_run == 0 and after.losses.shape == (0,) and after.last_loss is None


@pytest.mark.parametrize("tf1_equality", [False, True])
def test_train_loop_outfeeds_host_call_every_n_steps(strategy, tf1_equality):
    """Also under TF1 tensor equality (`disable_v2_behavior()`, as tensorflow/tpu's
    resnet_main.py calls), where `tensor == 0` is an identity test giving a Python bool."""
    loop, _, _ = _train_loop(strategy, host_call=True, every_n=2)
    if tf1_equality:
        tf.compat.v1.disable_tensor_equality()
    try:
        with strategy.scope():
            iterator = iter(_dataset(strategy, 64))
            result = loop(iterator, 5)
    finally:
        tf.compat.v1.enable_tensor_equality()
    assert result.steps_run == 5
    # Loop steps 0, 2 and 4, each with the labels of every replica, in input order.
    assert len(result.host_calls) == 3
    assert [sorted(values[0].tolist()) for values in result.host_calls] == [
        list(range(0, 8)), list(range(16, 24)), list(range(32, 40))]


def test_train_loop_is_traced_once_for_new_iterators_and_step_counts():
    strategy = tf.distribute.get_strategy()
    loop, _, _ = _train_loop(strategy)
    for n in (3, 1, 3):
        loop(iter(_dataset(strategy, 64)), n)
    assert loop._run_steps._fn.experimental_get_tracing_count() == 1  # pylint: disable=protected-access


def test_loops_around_one_traced_step_trace_it_once_and_inline_it(strategy):
    """Two loops built around one `TracedTrainStep` (train_session builds a second one for the
    host_call or summaries the first trace found) run the step's Python once; TensorFlow
    inlines the traced step into the loop it runs, so the loop has no per-step call."""
    from tensorflow.python.eager import context  # Run metadata: the optimised graphs.

    with strategy.scope():
        total = tf.Variable(0.0, aggregation=tf.VariableAggregation.SUM)
    traces = []

    def train_step(features, labels):
        traces.append(labels)
        update = total.assign_add(tf.reduce_sum(features))
        with tf.control_dependencies([update]):
            return {"loss": tf.reduce_mean(features), "host_call": [tf.identity(labels)]}

    traced = loop_lib.TracedTrainStep(strategy, train_step)
    plain = loop_lib.make_multi_step_train_fn(strategy, traced)
    with_host_call = loop_lib.make_multi_step_train_fn(
        strategy, traced, host_call_specs=[tf.TensorSpec([None], tf.int64)])
    ctx = context.context()
    with strategy.scope():
        iterator = iter(_dataset(strategy, 64))
        plain.trace(iterator)
        ctx.enable_run_metadata()
        try:
            result = with_host_call(iterator, 2)
            graphs = [g.post_optimization_graph
                      for g in ctx.export_run_metadata().function_graphs]
        finally:
            ctx.disable_run_metadata()
    assert len(traces) == strategy.num_replicas_in_sync
    np.testing.assert_allclose(result.losses, [3.5, 11.5])
    assert [sorted(v[0].tolist()) for v in result.host_calls] == [list(range(8)),
                                                                    list(range(8, 16))]
    loop_graph = max(graphs, key=lambda g: len(g.node))
    assert any(node.op == "IteratorGetNextAsOptional" for node in loop_graph.node)
    calls = [node.op for node in loop_graph.node if "PartitionedCall" in node.op]
    assert not calls and not loop_graph.library.function


def test_loop_does_not_keep_the_iterator_alive_after_its_caller_drops_it(strategy):
    loop, _, _ = _train_loop(strategy)
    with strategy.scope():
        iterator = iter(_dataset(strategy, 64))
        loop(iterator, 2)
    dispatch = loop._run_steps  # pylint: disable=protected-access
    assert dispatch._flat  # pylint: disable=protected-access
    dropped = weakref.ref(iterator)
    del iterator
    gc.collect()
    # Its flat tensors hold its resources (buffers, prefetch threads): released with it.
    assert dropped() is None and not dispatch._flat  # pylint: disable=protected-access


def test_inference_loop_gathers_outputs_and_stops_at_end_of_input(strategy):
    def step(features, labels):
        return {"loss": tf.reduce_mean(features), "predictions": {"ids": labels}}

    loop = inference_loop.InferenceLoop(strategy, step, padded=False)
    with strategy.scope():
        iterator = iter(_dataset(strategy, 24))  # Three global batches of 8.
        first = loop(iterator, 2)
        rest = loop(iterator, 5)
    assert (first.steps_run, rest.steps_run) == (2, 1)
    assert sorted(first.gathered[0].tolist()) == list(range(16))
    assert first.rows.tolist() == [8, 8] and first.mask.all()
    np.testing.assert_allclose(first.losses, [3.5, 11.5])
    assert [len(leaves[0]) for leaves, _ in rest.per_step()] == [8]


def test_padded_inference_loop_stops_at_the_first_all_padding_batch(strategy):
    def step(features, labels):
        return {"predictions": {"x": features}}

    per_replica = 8 // strategy.num_replicas_in_sync
    rows = tf.data.Dataset.range(20).map(lambda x: (tf.cast(x, tf.float32), True))
    padding = tf.data.Dataset.from_tensors((-1.0, False)).repeat()
    data = rows.concatenate(padding).map(
        lambda x, m: {"features": x, "padding_mask": m}).batch(per_replica)
    loop = inference_loop.InferenceLoop(strategy, step, padded=True)
    with strategy.scope():
        iterator = iter(strategy.distribute_datasets_from_function(lambda _: data))
        result = loop(iterator, 10)
    assert result.steps_run == 3  # 20 real rows: two full global batches and a partial one.
    assert sorted(result.gathered[0][result.mask].tolist()) == list(range(20))


def test_inference_loop_splits_steps_by_each_leafs_own_rows():
    """Legacy Estimator's predictions need not be batch-major: a leaf with rows of its own
    (here as many as the step's index plus one, unknown statically) comes apart per step
    by the rows it had, off TPU on one replica; on TPU such a leaf is refused."""
    strategy = tf.distribute.get_strategy()

    def step(features, labels):
        del labels
        first = tf.cast(features[0], tf.int32)
        return {"predictions": {"grow": tf.range(first // 4 + 1), "x": features}}

    data = tf.data.Dataset.range(12).map(lambda x: (tf.cast(x, tf.float32), x)).batch(4)
    loop = inference_loop.InferenceLoop(strategy, step, padded=False,
                                        batch_major_predictions=False)
    result = loop(iter(data), 3)
    steps = result.per_step()
    assert [leaves[0].tolist() for leaves, _ in steps] == [[0], [0, 1], [0, 1, 2]]
    assert [len(leaves[1]) for leaves, _ in steps] == [4, 4, 4]
    fixed = inference_loop.InferenceLoop(
        strategy, lambda f, l: {"predictions": {"one": tf.zeros([1])}}, padded=False)
    with pytest.raises(ValueError, match=r"must have batch dimension for every tensor"):
        fixed(iter(data), 1)


def test_inference_loop_counts_a_scalar_feature_as_one_example():
    """Legacy's plain Estimator took unbatched examples (`Dataset.range(10)`), one per
    session.run: a step of rank-0 features is one row."""
    def step(features, labels):
        del labels
        return {"loss": tf.cast(features, tf.float32), "metrics": [tf.reshape(features, [1])]}

    loop = inference_loop.InferenceLoop(tf.distribute.get_strategy(), step, padded=False)
    data = tf.data.Dataset.range(3).map(lambda x: (x, x))
    result = loop(iter(data), 5)
    assert result.steps_run == 3 and result.rows.tolist() == [1, 1, 1]
    np.testing.assert_allclose(result.losses, [0.0, 1.0, 2.0])


@pytest.mark.slow_cases('mirrored8')
def test_inference_loop_passes_one_value_per_step_leaves_through(strategy):
    """A leaf whose axis 0 is not the batch (one value per replica per step) is split per
    step by its own size, not by the step's rows."""
    def step(features, labels):
        return {"metrics": [labels, tf.reshape(tf.reduce_sum(features), [1])]}

    loop = inference_loop.InferenceLoop(strategy, step, padded=False)
    with strategy.scope():
        iterator = iter(_dataset(strategy, 48, batch=16))  # Three global batches of 16.
        result = loop(iterator, 5)
    assert result.per_example == (True, False)
    replicas = strategy.num_replicas_in_sync
    steps = result.per_step()
    assert [(len(leaves[0]), len(leaves[1])) for leaves, _ in steps] == [(16, replicas)] * 3
    # Each step's sums add up to that step's features: rows 16i..16i+15.
    assert [leaves[1].sum() for leaves, _ in steps] == [sum(range(16 * i, 16 * i + 16))
                                                       for i in range(3)]
    # A padded loop passes them too: whether a step had padding rows is known per step,
    # on the host (the inference session refuses such a step; see test_inference).
    padded = inference_loop.InferenceLoop(strategy, step, padded=True)
    data = tf.data.Dataset.range(16).map(
        lambda x: {"features": tf.cast(x, tf.float32), "labels": x, "padding_mask": True})
    with strategy.scope():
        padded.trace(iter(strategy.distribute_datasets_from_function(
            lambda _: data.batch(16 // strategy.num_replicas_in_sync))))
    assert padded.per_example() == (True, False)


def _while_loops(concrete: tf.types.experimental.ConcreteFunction) -> list[set[str]]:
    """Per while loop of the function's own graph: the op types its body runs, nested
    functions (conds, calls) included."""
    graph_def = concrete.graph.as_graph_def()
    functions = {f.signature.name: f for f in graph_def.library.function}

    def ops_of(name: str, seen: set[str]) -> set[str]:
        if name in seen or name not in functions:
            return set()
        seen.add(name)
        ops = set()
        for node in functions[name].node_def:
            ops.add(node.op)
            for value in node.attr.values():
                names = [value.func.name] + [f.name for f in value.list.func]
                for called in filter(None, names):
                    ops |= ops_of(called, seen)
        return ops

    return [ops_of(node.attr["body"].func.name, set()) for node in graph_def.node
            if node.op in ("While", "StatelessWhile")]


@pytest.mark.parametrize("steps_per_call", [1, None])
def test_metric_inputs_are_updated_after_the_steps_in_step_order(steps_per_call):
    """A step's `metric_inputs` reach `metric_update` after the loop's steps, one step at a
    time in step order, and each step's values are those after its own update. The updates
    stay out of the steps' while body, where a stateful op ends its iteration only when it
    ran and so kept consecutive steps from overlapping."""
    strategy = tf.distribute.get_strategy()
    total, top = tf.Variable(0.0), tf.Variable(0.0)

    def step(features, labels):
        return {"loss": tf.reduce_mean(features),
                "metric_inputs": [features, tf.reduce_max(features)]}  # A scalar too.

    def update(leaves):
        rows, largest = leaves
        assert rows.shape.as_list() == [8] and largest.shape.rank == 0  # As traced.
        added = total.assign_add(tf.reduce_sum(rows))
        with tf.control_dependencies([added]):
            latest = top.assign(largest)
        return {"sum": tf.identity(added), "top": tf.identity(latest)}

    loop = inference_loop.InferenceLoop(strategy, step, padded=False,
                                        steps_per_call=steps_per_call, metric_update=update)
    iterator = iter(_dataset(strategy, 24))  # Three batches of 8: 0-7, 8-15, 16-23.
    if steps_per_call == 1:
        results = [loop(iterator, 1) for _ in range(3)]
        last = [np.concatenate(values) for values in zip(*(r.last for r in results))]
    else:
        result = loop(iterator, 5)
        assert result.steps_run == 3
        last = result.last
        loops = _while_loops(loop._run_steps.concrete(iterator))  # pylint: disable=protected-access
        steps = [ops for ops in loops if "IteratorGetNextAsOptional" in ops]
        updates = [ops for ops in loops if "AssignAddVariableOp" in ops]
        assert len(steps) == 1 and len(updates) == 1 and steps != updates, loops
    np.testing.assert_array_equal(last[0], [28.0, 120.0, 276.0])  # Running sums.
    np.testing.assert_array_equal(last[1], [7.0, 15.0, 23.0])


def _fixed_batches_of_unknown_count(strategy: tf.distribute.Strategy, rows: int,
                                    per_replica: int) -> tuple[tf.data.Dataset, tf.TensorSpec]:
    """Per-replica batches of `per_replica` rows (drop_remainder) whose number is unknown.

    A `filter` (like TF1's `Dataset.map`) leaves the cardinality unknown, so the loop checks
    for the end of input at every step.
    """
    data = tf.data.Dataset.range(rows).filter(lambda x: x >= 0).map(
        lambda x: (tf.cast(tf.fill([3], x), tf.float32), x))

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        return data.shard(context.num_input_pipelines, context.input_pipeline_id).batch(
            per_replica, drop_remainder=True)

    spec = dataset_fn(tf.distribute.InputContext()).element_spec
    return strategy.distribute_datasets_from_function(dataset_fn), spec


def test_fixed_size_batches_keep_static_shapes_through_end_of_input_checks(strategy):
    """Legacy's TPU infeed gave model_fn static per-core shapes; `get_next_as_optional`
    over several replicas gives `(None, 3)` unless the loop restores them. A step runs only
    when every replica got a batch: 3 full steps of 25 single-row batches on 8 replicas
    (before, a 4th step ran with 7 empty replicas and a NaN loss)."""
    replicas = strategy.num_replicas_in_sync
    shapes = []

    def train_step(features, labels):
        shapes.append((features.shape.as_list(), labels.shape.as_list()))
        bs, width = features.get_shape().as_list()  # retinanet's idiom
        return {"loss": tf.reduce_mean(tf.reshape(features, [bs, width, -1]))}

    dataset, spec = _fixed_batches_of_unknown_count(strategy, 3 * replicas + 1, 1)
    loop = loop_lib.make_multi_step_train_fn(strategy, train_step, input_spec=spec)
    with strategy.scope():
        result = loop(iter(dataset), 10)
    assert shapes and set(map(str, shapes)) == {str(([1, 3], [1]))}
    expected_steps = 3 if replicas > 1 else 3 * replicas + 1
    assert result.steps_run == expected_steps and np.isfinite(result.losses).all()
    np.testing.assert_allclose(result.losses[:3], [np.mean(range(k * replicas,
                                                                 (k + 1) * replicas))
                                                   for k in range(3)])


def test_a_step_that_pins_the_batch_size_runs_on_no_partial_round(strategy):
    """The step adds a tensor of the batch's static shape (an `AddN`: its shape function
    merges the input's batch dimension with the static one). Grappler's shape inference
    then took the empty dummies of a partial round as full batches, folded the every-replica-
    fed check to True and ran the step on them ("Inputs to operation AddN must have the same
    size and shape"). 3 rounds and 1 batch of single rows: 3 steps on 8 replicas."""
    replicas = strategy.num_replicas_in_sync

    def train_step(features, labels):
        pinned = tf.add_n([features, tf.zeros(features.shape)])
        return {"loss": tf.reduce_mean(pinned) + tf.cast(tf.reduce_mean(labels), tf.float32)}

    dataset, spec = _fixed_batches_of_unknown_count(strategy, 3 * replicas + 1, 1)
    loop = loop_lib.make_multi_step_train_fn(strategy, train_step, input_spec=spec)
    with strategy.scope():
        result = loop(iter(dataset), 10)
    expected_steps = 3 if replicas > 1 else 3 * replicas + 1
    assert result.steps_run == expected_steps
    np.testing.assert_allclose(result.losses, [2 * np.mean(range(k * replicas,
                                                                 (k + 1) * replicas))
                                               for k in range(expected_steps)])


def test_fixed_size_batches_keep_static_shapes_in_the_inference_loop(strategy):
    shapes = []

    def step(features, labels):
        shapes.append(features.shape.as_list())
        return {"loss": tf.reduce_mean(features), "predictions": {"ids": labels}}

    replicas = strategy.num_replicas_in_sync
    dataset, spec = _fixed_batches_of_unknown_count(strategy, 2 * 2 * replicas, 2)
    loop = inference_loop.InferenceLoop(strategy, step, padded=False, input_spec=spec)
    with strategy.scope():
        result = loop(iter(dataset), 10)
    assert shapes and all(shape == [2, 3] for shape in shapes), shapes
    assert result.steps_run == 2
    assert sorted(result.gathered[0].tolist()) == list(range(4 * replicas))


def test_a_pinning_inference_step_runs_on_no_partial_round(strategy):
    """As `test_a_step_that_pins_the_batch_size_runs_on_no_partial_round`, for the
    inference loop over unpadded input (2 rounds and 3 batches of 2 rows on 8 replicas)."""

    def step(features, labels):
        pinned = tf.add_n([features, tf.zeros(features.shape)])
        return {"loss": tf.reduce_mean(pinned), "predictions": {"ids": labels}}

    replicas = strategy.num_replicas_in_sync
    dataset, spec = _fixed_batches_of_unknown_count(strategy, 2 * 2 * replicas + 2 * 3, 2)
    loop = inference_loop.InferenceLoop(strategy, step, padded=False, input_spec=spec)
    with strategy.scope():
        result = loop(iter(dataset), 10)
    rows = 2 * 2 * replicas if replicas > 1 else 2 * 2 + 2 * 3
    assert result.steps_run == rows // (2 * replicas)
    assert sorted(result.gathered[0].tolist()) == list(range(rows))


def test_batches_of_unknown_size_still_run_partial_steps(strategy):
    """Without drop_remainder nothing is static to keep: a last partial step still runs,
    with the rows that are there (the shapes stay unknown, as before)."""
    data = tf.data.Dataset.range(10).filter(lambda x: x >= 0).map(
        lambda x: (tf.cast(x, tf.float32), x))

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        return data.batch(1)  # Same rows on every pipeline; one row per replica.

    seen = []
    spec = dataset_fn(tf.distribute.InputContext()).element_spec
    loop = loop_lib.make_multi_step_train_fn(
        strategy, lambda f, l: seen.append(f.shape.as_list()) or {"loss": tf.reduce_mean(f)},
        input_spec=spec)
    with strategy.scope():
        result = loop(iter(strategy.distribute_datasets_from_function(dataset_fn)), 20)
    replicas = strategy.num_replicas_in_sync
    assert result.steps_run == -(-10 // replicas) and seen[0] == [None]


def test_unknown_batch_axes_match_under_tf1_tensor_shapes():
    """After `disable_v2_tensorshape()` (TF1 mode, `disable_v2_behavior()`) axes are
    Dimensions, and `Dimension(None) == Dimension(None)` is unknown, not True: predictions
    with an unknown batch axis were refused as not batch-major."""
    structure = {"mask": tf.TensorSpec([None], tf.bool),
                 "predictions": {"classes": tf.TensorSpec([None]),
                                 "logits": tf.TensorSpec([None, 3])}}
    tf.compat.v1.disable_v2_tensorshape()
    try:
        flags = inference_loop._per_example_leaves(structure, padded=False)  # pylint: disable=protected-access
    finally:
        tf.compat.v1.enable_v2_tensorshape()
    assert flags == (True, True)


@dataclasses.dataclass
class _Policy:
    saved: list[int] = dataclasses.field(default_factory=list)

    def should_save(self, step: int) -> bool:
        return False

    def steps_until_due(self, step: int) -> int | None:
        return None

    def save(self, step: int) -> str:
        self.saved.append(step)
        return ""


def _fake_run(results: list[loop_lib.LoopResult]):
    calls = []

    def run(n: int) -> loop_lib.LoopResult:
        calls.append(n)
        return results[len(calls) - 1]

    return run, calls


def test_driver_takes_the_global_step_from_the_loop_result():
    reads = []
    run, calls = _fake_run([
        loop_lib.LoopResult(4, np.ones(4, np.float32), global_step=4),
        loop_lib.LoopResult(4, np.ones(4, np.float32), global_step=8),
        loop_lib.LoopResult(2, np.ones(2, np.float32), global_step=10)])
    driver = driver_lib.TrainDriver(run_steps=run, read_step=lambda: reads.append(1) or 0,
                                  checkpoint=_Policy())
    assert driver.run(target_step=10, iterations_per_loop=4) == 10
    assert calls == [4, 4, 2]
    assert len(reads) == 1  # Only the starting step is read from the host.


def test_driver_reads_the_step_when_the_loop_does_not_return_it():
    steps = iter([0, 3])
    run, _ = _fake_run([loop_lib.LoopResult(3, np.ones(3, np.float32))])
    driver = driver_lib.TrainDriver(run_steps=run, read_step=lambda: next(steps),
                                  checkpoint=_Policy())
    assert driver.run(target_step=3, iterations_per_loop=5) == 3


def test_driver_stops_at_end_of_input_and_raises_on_nan_loss():
    run, calls = _fake_run([loop_lib.LoopResult(2, np.ones(2, np.float32), global_step=2)])
    driver = driver_lib.TrainDriver(run_steps=run, read_step=lambda: 0, checkpoint=_Policy())
    assert driver.run(target_step=100, iterations_per_loop=5) == 2 and calls == [5]

    run, _ = _fake_run([loop_lib.LoopResult(3, np.array([1.0, np.nan, 1.0], np.float32),
                                            global_step=13)])
    driver = driver_lib.TrainDriver(run_steps=run, read_step=lambda: 10, checkpoint=_Policy(),
                                  stop_on_nan_loss=True)
    with pytest.raises(nan_loss.NanLossError, match="global step 12"):
        driver.run(target_step=20, iterations_per_loop=3)


def test_hooks_see_a_diverged_loop_before_the_nan_error_and_nothing_is_saved():
    """Legacy Estimator appended its NanTensorHook after the user's hooks: their after_run
    saw the diverged step; other listeners (saving, summaries) see nothing of it."""
    seen = []

    class Hooks:
        observes_diverged_runs = True

        def after_loop(self, step, result, seconds):
            seen.append(("hooks", step, result.steps_run))

    class Other:
        def after_loop(self, step, result, seconds):
            seen.append(("other", step))

    run, _ = _fake_run([loop_lib.LoopResult(1, np.ones(1, np.float32), global_step=1),
                        loop_lib.LoopResult(1, np.array([np.nan], np.float32), global_step=2)])
    class EveryStep(_Policy):
        def should_save(self, step):
            return True

    policy = EveryStep()
    driver = driver_lib.TrainDriver(run_steps=run, read_step=lambda: 0, checkpoint=policy,
                                    listeners=[Hooks(), Other()], stop_on_nan_loss=True)
    with pytest.raises(nan_loss.NanLossError, match="global step 2"):
        driver.run(target_step=5, iterations_per_loop=1)
    assert seen == [("hooks", 1, 1), ("other", 1), ("hooks", 2, 1)]
    assert policy.saved == [1]


@dataclasses.dataclass
class _DuePolicy(_Policy):
    every: int = 2

    def steps_until_due(self, step: int) -> int | None:
        last = self.saved[-1] if self.saved else 0
        return max(1, last + self.every - step)

    def should_save(self, step: int) -> bool:
        last = self.saved[-1] if self.saved else 0
        return step >= last + self.every


def test_driver_ends_loops_where_the_policy_says_a_save_falls_due():
    """A loop never runs past a due save; a loop whose steps did not all advance the global
    step (gradient accumulation) ends short of it, and the next runs the rest."""
    run, calls = _fake_run([
        loop_lib.LoopResult(2, np.ones(2, np.float32), global_step=1,
                            step_starts=np.array([0, 0])),
        loop_lib.LoopResult(1, np.ones(1, np.float32), global_step=2,
                            step_starts=np.array([1])),
        loop_lib.LoopResult(2, np.ones(2, np.float32), global_step=4),
        loop_lib.LoopResult(1, np.ones(1, np.float32), global_step=5)])
    policy = _DuePolicy()
    driver = driver_lib.TrainDriver(run_steps=run, read_step=lambda: 0, checkpoint=policy)
    assert driver.run(target_step=5, iterations_per_loop=5) == 5
    assert calls == [2, 1, 2, 1]
    assert policy.saved == [2, 4]


def test_loop_result_starts_and_nan_step_follow_the_reported_global_steps():
    reported = loop_lib.LoopResult(3, np.array([1.0, 1.0, np.nan], np.float32),
                                   global_step=2, step_starts=np.array([0, 1, 1]))
    assert list(reported.starts(2)) == [0, 1, 1]
    assert nan_loss.first_nan_loss(reported.losses, reported.starts(2)).step == 2
    assumed = loop_lib.LoopResult(3, np.ones(3, np.float32), global_step=13)
    assert list(assumed.starts(13)) == [10, 11, 12]


def _shared_state_model_fn(state):
    """google/compare_gan `ModularGAN.model_fn`, reduced, with its state in a dict model_fn
    closes over (a method model_fn's object is copied per replica: test_replica_step.py):
    summary entries reset at the top of model_fn and added to after the all-reduce."""

    def model_fn(features, labels, mode, params):
        del labels, params
        from tpu_estimator_compat import TPUEstimatorSpec

        state["entries"] = []
        w = tf.compat.v1.get_variable("w", initializer=tf.ones([2]))
        loss = tf.reduce_mean(features * w)
        train_op = tf.compat.v1.tpu.CrossShardOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(0.1)).minimize(
                loss, global_step=tf.compat.v1.train.get_global_step())
        state["entries"].append(tf.reshape(loss, [1]))
        step = tf.reshape(tf.compat.v1.train.get_global_step(), [1])
        return TPUEstimatorSpec(mode, loss=loss, train_op=train_op,
                                host_call=(lambda s, *xs: tf.no_op(), [step] + state["entries"]))

    return model_fn


def test_model_fn_state_shared_between_replicas_is_named(tmp_path, strategy):
    """With several replicas the second replica's call resets `entries` while the first
    is paused at its all-reduce, so both add to one list and the replicas return different
    host_call nests. TensorFlow's own regroup check said only `AssertionError: len(v) == 3,
    len(v0) == 2`; the shim's error says why and what to do. One replica trains."""
    from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator

    config = RunConfig(model_dir=str(tmp_path), train_distribute=strategy,
                       tpu_config=TPUConfig(iterations_per_loop=1))
    est = TPUEstimator(model_fn=_shared_state_model_fn({}), config=config, use_tpu=True,
                       train_batch_size=8)

    def train():
        est.train(lambda params: tf.data.Dataset.from_tensors(tf.ones([2])).repeat().batch(
            params["batch_size"], drop_remainder=True), max_steps=1)

    if strategy.num_replicas_in_sync == 1:
        train()
        return
    with pytest.raises(loop_lib.ReplicaStructureError,
                       match=r"(?s)host_call tensors: 2 and 3.*once per replica.*local variables"):
        train()


def test_compiling_prepares_the_loop_on_a_thread_without_a_step(strategy):
    """While the body runs (the step-0 checkpoint), a zero-step call on a thread of its own
    prepares the graph: no input read, no variable written, and the first real call takes
    the input's first batch."""
    loop, total, step = _train_loop(strategy, host_call=True)
    threads: list[str] = []
    original = loop._run_steps  # pylint: disable=protected-access

    class Recording:
        def __getattr__(self, name):
            return getattr(original, name)

        def __call__(self, iterator, n=1):
            return original(iterator, n)

        def prepared(self, iterator, n=1):
            run = original.prepared(iterator, n)

            def recorded():
                threads.append((threading.current_thread().name, n))
                return run()

            return recorded

    loop._run_steps = Recording()  # pylint: disable=protected-access
    with strategy.scope():
        iterator = iter(_dataset(strategy, 64))
        loop.trace(iterator)
    with loop_lib.compiling(loop, iterator):
        pass
    assert threads == [("train_compile", 0)]
    assert int(step.numpy()) == 0 and float(total.numpy()) == 0.0
    with strategy.scope():
        first = loop(iterator, 2)
    np.testing.assert_allclose(first.losses, [3.5, 11.5])  # Rows 0..15: nothing was taken.
    assert first.global_step == 2


def test_compiling_raises_the_threads_error_after_the_body_and_the_bodys_first():
    strategy = tf.distribute.get_strategy()
    loop, _, _ = _train_loop(strategy)
    iterator = iter(_dataset(strategy, 64))
    loop.trace(iterator)

    original = loop._run_steps  # pylint: disable=protected-access

    class Failing:
        def __getattr__(self, name):
            return getattr(original, name)

        def prepared(self, iterator, n=1):
            def run():
                raise tf.errors.ResourceExhaustedError(None, None,
                                                       "out of memory while compiling")

            return run

    loop._run_steps = Failing()  # pylint: disable=protected-access
    body_ran = []
    with pytest.raises(tf.errors.ResourceExhaustedError, match="while compiling"):
        with loop_lib.compiling(loop, iterator):
            body_ran.append(True)
    assert body_ran == [True]
    with pytest.raises(OSError, match="disk full"):
        with loop_lib.compiling(loop, iterator):
            raise OSError("disk full")

