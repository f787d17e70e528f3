"""Tests for tpu_estimator_compat.v1_state.replica_state: each replica's own collections.

MirroredStrategy traces every replica's model_fn into one graph, on threads that interleave
at every all-reduce. These tests pin what each TPU core's model_fn saw: the collections of
its own graph, under every key, including keys the script invents. They train through
TPUEstimator with use_tpu=True on the default strategy and on 8 MirroredStrategy replicas.
(The variable stores and the standard collections are also covered in tests/test_variables.py.)
"""

import threading

import numpy as np
import pytest
import tensorflow as tf

from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator, TPUEstimatorSpec
from tpu_estimator_compat._tf import private as _tf_private
from tpu_estimator_compat.v1_state import replica_state

v1 = tf.compat.v1

BATCH = 16
STEPS = 3
LR = 0.1
W0 = np.array([0.5, -0.25], np.float32)
H0 = np.array([1.0, 2.0], np.float32)
X = np.arange(BATCH * 2, dtype=np.float32).reshape(BATCH, 2) / 10.0


def _input_fn(params):
    del params  # Every step sees the same global batch: the whole of X.
    labels = np.zeros([BATCH], np.int32)
    return tf.data.Dataset.from_tensor_slices((X, labels)).repeat().batch(
            BATCH, drop_remainder=True)


def _estimator(model_dir, strategy, model_fn, use_tpu=True):
    config = RunConfig(model_dir=str(model_dir), train_distribute=strategy,
                       eval_distribute=strategy,
                       tpu_config=TPUConfig(iterations_per_loop=STEPS))
    return TPUEstimator(model_fn=model_fn, config=config, use_tpu=use_tpu,
                        train_batch_size=BATCH, eval_batch_size=BATCH)


def _head_vars_model_fn(seen):
    """SimCLR's fine-tuning idiom: the head's variables, collected under a key of its own."""

    def model_fn(features, labels, mode, params):
        del labels, params
        with v1.variable_scope("base"):
            base = v1.get_variable("w", initializer=tf.constant(W0))
        with v1.variable_scope("head"):
            head = v1.get_variable("w", initializer=tf.constant(H0))
        for var in v1.trainable_variables():  # model_util.supervised_head
            if var.name.startswith("head"):
                v1.add_to_collection("head_vars", var)
        var_list = v1.get_collection("head_vars")
        seen.append([v.name for v in var_list])
        loss = tf.reduce_mean(tf.linalg.matvec(features, base + head))
        optimizer = v1.tpu.CrossShardOptimizer(v1.train.GradientDescentOptimizer(LR))
        train_op = optimizer.minimize(loss, global_step=v1.train.get_global_step(),
                                      var_list=var_list)
        return TPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)

    return model_fn


def test_a_scripts_collection_of_variables_is_each_replicas_own(tmp_path, strategy):
    """Each replica lists the head once; only the head trains.

    With one list shared by the replicas, the second listed the head twice, made one more
    gradient all-reduce than the first, and MirroredStrategy failed
    (`AssertionError: v[0].keys: {...} v[i].keys: set()`).
    """
    seen = []
    estimator = _estimator(tmp_path, strategy, _head_vars_model_fn(seen))
    estimator.train(_input_fn, max_steps=STEPS)
    assert seen and all(names == ["head/w:0"] for names in seen), seen
    reader = tf.train.load_checkpoint(estimator.latest_checkpoint())
    np.testing.assert_array_equal(reader.get_tensor("base/w"), W0)
    grad = X.mean(axis=0)  # CrossShardOptimizer.minimize averages over the replicas.
    np.testing.assert_allclose(reader.get_tensor("head/w"), H0 - LR * STEPS * grad,
                               rtol=1e-6)


def _summed_losses_model_fn(seen):
    """A loss summed from a collection of the script's own (`tf.add_n(get_collection)`)."""

    def model_fn(features, labels, mode, params):
        del labels, params
        w = v1.get_variable("w", initializer=tf.constant(W0))
        v1.add_to_collection("my_losses", tf.reduce_mean(tf.linalg.matvec(features, w)))
        seen.append(len(v1.get_collection("my_losses")))
        loss = tf.add_n(v1.get_collection("my_losses"))
        optimizer = v1.tpu.CrossShardOptimizer(v1.train.GradientDescentOptimizer(LR))
        train_op = optimizer.minimize(loss, global_step=v1.train.get_global_step())
        return TPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)

    return model_fn


@pytest.mark.slow_cases('mirrored8')
def test_a_scripts_collection_of_tensors_is_each_replicas_own(tmp_path, strategy):
    """Each replica sums only its own loss: the evaluated loss is the global batch's.

    With one shared list every replica after the first also summed the first one's tensor,
    silently: the loss was wrong, nothing failed.
    """
    seen = []
    estimator = _estimator(tmp_path, strategy, _summed_losses_model_fn(seen))
    estimator.train(_input_fn, max_steps=STEPS)
    result = estimator.evaluate(_input_fn, steps=1)
    w = W0 - LR * STEPS * X.mean(axis=0)
    np.testing.assert_allclose(result["loss"], (X @ w).mean(), rtol=1e-5)
    assert seen and set(seen) == {1}, seen


def test_a_hook_reads_model_fns_own_collection_after_the_step(tmp_path, strategy):
    """What model_fn collected stays in its graph for hooks, as legacy's graph kept it."""

    class CountLosses(v1.train.SessionRunHook):
        def __init__(self):
            self.counts = []

        def begin(self):
            self.counts.append(len(v1.get_collection("my_losses")))

    hook = CountLosses()

    def model_fn(features, labels, mode, params):
        spec = _summed_losses_model_fn([])(features, labels, mode, params)
        return spec._replace(training_hooks=[hook])

    _estimator(tmp_path, strategy, model_fn, use_tpu=False).train(_input_fn, max_steps=2)
    assert hook.counts == [1]


def test_every_key_is_each_replica_threads_own_in_a_graph():
    """Two replica threads in one graph, whatever the key and however it is reached.

    Pins how `tf.Graph` creates a key (`add_to_collection`, `get_collection_ref`) and that
    `tf.cond` branches share the graph's collections: the per-replica views rely on both.
    """
    graph = tf.Graph()
    graph.add_to_collection("earlier", "before the step")
    graph.add_to_collection(v1.GraphKeys.LOSSES, "earlier loss")
    inside, resume = threading.Event(), threading.Event()
    seen = {}

    def replica_0():
        with graph.as_default(), replica_state.own_collections(graph):
            graph.add_to_collection("custom", "r0")
            graph.get_collection_ref("by_ref").append("r0")
            graph.add_to_collection(v1.GraphKeys.LOSSES, "r0 loss")
            inside.set()
            resume.wait(timeout=60)
            seen[0] = {key: graph.get_collection(key) for key in ("custom", "by_ref")}

    def replica_1():
        with graph.as_default(), replica_state.own_collections(graph):
            seen["1 before"] = [graph.get_collection(k) for k in ("custom", "by_ref",
                                                                  "earlier")]
            graph.add_to_collection("custom", "r1")
            tf.cond(tf.constant(True),
                    lambda: (v1.add_to_collection("custom", "r1 branch"), tf.constant(1))[1],
                    lambda: tf.constant(0))
            graph.get_collection_ref("by_ref").append("r1")
            graph.add_to_collection(v1.GraphKeys.GLOBAL_STEP, "step")
            seen[1] = {key: graph.get_collection(key) for key in ("custom", "by_ref")}
            graph.clear_collection("custom")
            seen["1 cleared"] = graph.get_collection("custom")

    first = threading.Thread(target=replica_0)
    first.start()
    assert inside.wait(timeout=60)
    second = threading.Thread(target=replica_1)
    second.start()
    second.join(timeout=60)
    # A thread of no replica (the main thread running merge_fn) sees the first replica's.
    assert graph.get_collection("custom") == ["r0"]
    resume.set()
    first.join(timeout=60)

    assert seen["1 before"] == [[], [], []]
    assert seen[1] == {"custom": ["r1", "r1 branch"], "by_ref": ["r1"]}
    assert seen["1 cleared"] == []
    assert seen[0] == {"custom": ["r0"], "by_ref": ["r0"]}
    # After the step: the first replica's entries after the earlier ones, per-step keys as
    # they were, shared keys shared, and the graph's own dict back in place.
    assert graph.get_collection("custom") == ["r0"]
    assert graph.get_collection("by_ref") == ["r0"]
    assert graph.get_collection("earlier") == ["before the step"]
    assert graph.get_collection(v1.GraphKeys.LOSSES) == ["earlier loss"]
    assert graph.get_collection(v1.GraphKeys.GLOBAL_STEP) == ["step"]
    assert type(_tf_private.graph_collections(graph)) is dict  # pylint: disable=unidiomatic-typecheck


def test_replica_steps_one_after_the_other_leave_only_replica_0s_entries():
    """A replica step with no all-reduce (predict) ends before the next replica's begins.

    Each replica then has a step of its own; the graph must still end as legacy's one trace
    left it (replica 0's entries), not with every replica's, and no replica sees another's.
    """
    graph = tf.Graph()
    seen = {}

    def replica(index):
        with graph.as_default(), replica_state.own_collections(graph, keep=index == 0):
            seen[index] = graph.get_collection("custom")
            graph.add_to_collection("custom", f"r{index}")

    for index in range(3):
        thread = threading.Thread(target=replica, args=(index,))
        thread.start()
        thread.join(timeout=60)
    assert seen == {0: [], 1: [], 2: []}
    assert graph.get_collection("custom") == ["r0"]
