"""Tests for tpu_estimator_compat.step.metrics: host-side metric_fn evaluation and the eval dict."""

import numpy as np
import pytest
import tensorflow as tf

from conftest import make_strategy
from tpu_estimator_compat import (EstimatorSpec, RunConfig, TPUConfig, TPUEstimator,
                                  TPUEstimatorSpec)
from tpu_estimator_compat.summary import background as background_lib
from tpu_estimator_compat.step import metrics as metrics_lib
from tpu_estimator_compat.step.metrics import HostMetrics, MeanLoss, finalize_eval_dict

NUM_CLASSES = 10
# Uneven sizes, a zero-row batch and a total (1000) that 128 does not divide.
BATCH_SIZES = [128, 128, 7, 0, 100, 1, 128, 128, 128, 128, 124]


def _mnist_specs():
    return [tf.TensorSpec([None], tf.int32), tf.TensorSpec([None, NUM_CLASSES], tf.float32)]


def _mnist_batches(seed=0, sizes=BATCH_SIZES):
    rng = np.random.default_rng(seed)
    return [[rng.integers(0, NUM_CLASSES, size=n).astype(np.int32),
             rng.normal(size=(n, NUM_CLASSES)).astype(np.float32)] for n in sizes]


def _accuracy_metric_fn(labels, logits):
    return {"accuracy": tf.compat.v1.metrics.accuracy(labels, tf.argmax(logits, 1))}


def _numpy_accuracy(batches):
    labels = np.concatenate([b[0] for b in batches])
    logits = np.concatenate([b[1] for b in batches])
    correct = np.sum(np.argmax(logits, 1) == labels)
    return np.float32(correct) / np.float32(len(labels))


def _run(host, batches):
    host.reset()
    for batch in batches:
        host.update(batch)
    return host.result()


def test_accuracy_over_uneven_batches_equals_numpy_exactly():
    batches = _mnist_batches()
    with HostMetrics(_accuracy_metric_fn, ["labels", "logits"], _mnist_specs()) as host:
        result = _run(host, batches)
    assert set(result) == {"accuracy"}
    assert result["accuracy"] == _numpy_accuracy(batches)
    assert type(result["accuracy"]) is np.float32


def test_dict_tensors_call_metric_fn_by_keyword():
    seen = {}

    def metric_fn(labels, logits):
        seen["labels"], seen["logits"] = labels, logits
        return _accuracy_metric_fn(labels, logits)

    specs = dict(zip(["labels", "logits"], _mnist_specs()))
    # Key order differs from metric_fn's argument order: only keywords can bind these.
    structure = {"logits": None, "labels": None}
    batches = [{"labels": b[0], "logits": b[1]} for b in _mnist_batches(1)]
    with HostMetrics(metric_fn, structure, specs) as host:
        result = _run(host, batches)
    assert seen["labels"].dtype == tf.int32 and seen["logits"].shape.as_list() == [None, 10]
    assert result["accuracy"] == _numpy_accuracy([[b["labels"], b["logits"]] for b in batches])


def test_positional_list_keeps_order_and_tuple_batches_are_accepted():
    def metric_fn(logits, labels):  # Reversed names: binding is by position only.
        return _accuracy_metric_fn(logits, labels)

    batches = _mnist_batches(2)
    with HostMetrics(metric_fn, ("a", "b"), tuple(_mnist_specs())) as host:
        result = _run(host, [tuple(b) for b in batches])
    assert result["accuracy"] == _numpy_accuracy(batches)


def test_weighted_mean_recall_and_auc():
    rng = np.random.default_rng(3)
    sizes = [64, 17, 128, 0, 91]
    data = [(rng.normal(size=n).astype(np.float32), rng.uniform(size=n).astype(np.float32),
             rng.integers(0, 2, size=n).astype(np.int64), rng.uniform(size=n).astype(np.float32))
            for n in sizes]

    def metric_fn(values, weights, labels, probs):
        return {
                "wmean": tf.compat.v1.metrics.mean(values, weights),
                "recall": tf.compat.v1.metrics.recall(labels, probs > 0.5),
                "auc": tf.compat.v1.metrics.auc(labels, probs),
        }

    specs = [tf.TensorSpec([None], tf.float32), tf.TensorSpec([None], tf.float32),
             tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.float32)]
    with HostMetrics(metric_fn, [0, 1, 2, 3], specs) as host:
        result = _run(host, [list(d) for d in data])
        assert host.names == ["auc", "recall", "wmean"]

    values, weights, labels, probs = (np.concatenate(c) for c in zip(*data))
    np.testing.assert_allclose(result["wmean"], np.sum(values * weights) / np.sum(weights),
                               rtol=1e-5)
    tp = np.sum((probs > 0.5) & (labels == 1))
    fn = np.sum((probs <= 0.5) & (labels == 1))
    assert result["recall"] == np.float32(tp) / np.float32(tp + fn)

    # Streaming AUC must equal the one-shot AUC over all rows: the counts are integer sums.
    with tf.Graph().as_default() as graph:
        auc, update = tf.compat.v1.metrics.auc(tf.constant(labels), tf.constant(probs))
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.local_variables_initializer())
            sess.run(update)
            assert result["auc"] == sess.run(auc)
    assert 0.4 < result["auc"] < 0.6  # Random labels.


def test_reset_restarts_metrics_between_evaluations():
    def metric_fn(labels, logits):
        rows = tf.compat.v1.Variable(
                0, dtype=tf.int64, trainable=False, name="rows",
                collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES])
        ops = _accuracy_metric_fn(labels, logits)
        ops["rows"] = (rows.read_value(),
                       rows.assign_add(tf.shape(labels, out_type=tf.int64)[0]))
        return ops

    first, second = _mnist_batches(4), _mnist_batches(5, sizes=[50, 3])
    with HostMetrics(metric_fn, [0, 1], _mnist_specs()) as host:
        assert host.result()["rows"] == 0
        r1 = _run(host, first)
        r2 = _run(host, second)
        again = _run(host, first)
    assert r1["rows"] == sum(BATCH_SIZES) and r2["rows"] == 53
    assert r2["accuracy"] == _numpy_accuracy(second)
    assert again == r1
    assert type(r1["rows"]) is np.int64 and type(r1["accuracy"]) is np.float32


def test_tf_keras_metric_objects_are_supported():
    def metric_fn(values):
        mean = tf.keras.metrics.Mean(name="kmean")
        mean.update_state(values)
        return {"kmean": mean, "v1mean": tf.compat.v1.metrics.mean(values)}

    batches = [[np.arange(n, dtype=np.float32)] for n in (4, 0, 9)]
    with HostMetrics(metric_fn, [0], [tf.TensorSpec([None], tf.float32)]) as host:
        r1 = _run(host, batches)
        r2 = _run(host, batches[:1])
    assert r1["kmean"] == r1["v1mean"] == np.float32(42.0) / np.float32(13.0)
    assert r2["kmean"] == np.float32(1.5)


def test_keras_metric_without_update_state_raises_legacy_error():
    def metric_fn(values):
        return {"m": tf.keras.metrics.Mean(name="never_updated")}

    with pytest.raises(ValueError, match=r'Please call update_state\(\.\.\.\) on the '
                                         r'"never_updated" metric'):
        HostMetrics(metric_fn, [0], [tf.TensorSpec([None], tf.float32)])


@pytest.mark.parametrize("bad", ["tensor", "list", "triple"])
def test_metric_fn_returning_non_pair_raises_clear_error(bad):
    def metric_fn(labels, logits):
        value, update = tf.compat.v1.metrics.accuracy(labels, tf.argmax(logits, 1))
        return {"acc": {"tensor": value, "list": [value, update],
                        "triple": (value, update, update)}[bad]}

    with pytest.raises(TypeError, match=r"Values of eval_metric_ops must be \(metric_value, "
                                        r"update_op\) tuples, given: .* for key: acc"):
        HostMetrics(metric_fn, [0, 1], _mnist_specs())


def test_metric_fn_returning_non_dict_or_non_tensors_raises():
    with pytest.raises(TypeError, match="eval_metric_ops must be a dict, given"):
        HostMetrics(lambda labels, logits: [labels], [0, 1], _mnist_specs())
    with pytest.raises(TypeError, match="tuples of Tensors or Operations, given.*key: x"):
        HostMetrics(lambda labels, logits: {"x": (1.0, 2.0)}, [0, 1], _mnist_specs())


def test_metric_fn_must_build_metrics_in_the_host_graph():
    outside = tf.Graph()
    with outside.as_default():
        captured = tf.constant(1.0)
    with pytest.raises(ValueError, match='"x: Const:0" must be from the default graph'):
        HostMetrics(lambda labels, logits: {"x": (captured, captured.op)}, [0, 1],
                    _mnist_specs())


def test_metric_fn_none_means_no_metrics():
    with HostMetrics(lambda labels, logits: None, [0, 1], _mnist_specs()) as host:
        host.update(_mnist_batches()[0])
        assert host.result() == {}


@pytest.mark.parametrize("name,pattern", [
        ("loss", 'Metric with name "loss" is not allowed'),
        ("global_step", "Metric with name `global_step` is not allowed"),
])
def test_reserved_metric_names_raise_legacy_error(name, pattern):
    def metric_fn(labels, logits):
        return {name: tf.compat.v1.metrics.accuracy(labels, tf.argmax(logits, 1))}

    with pytest.raises(ValueError, match=pattern):
        HostMetrics(metric_fn, [0, 1], _mnist_specs())
    with pytest.raises(ValueError, match=pattern):
        finalize_eval_dict({name: np.float32(1.0)}, np.float32(0.5), 3)


def test_structure_and_spec_errors():
    with pytest.raises(ValueError, match=r"eval_metrics\[1\] should be tuple or list, or dict"):
        HostMetrics(_accuracy_metric_fn, "labels", _mnist_specs())
    with pytest.raises(ValueError, match="`specs` must match the structure"):
        HostMetrics(_accuracy_metric_fn, [0, 1], _mnist_specs()[:1])
    with pytest.raises(RuntimeError, match="should preserve batch size dimension, but got "
                                           r"scalar .* at eval_metrics\[1\]\[0\]"):
        HostMetrics(_accuracy_metric_fn, [0, 1], [tf.TensorSpec([], tf.int32),
                                                  _mnist_specs()[1]])


def test_batch_errors_name_the_offending_tensor():
    labels, logits = _mnist_batches(sizes=[8])[0]
    with HostMetrics(_accuracy_metric_fn, {"labels": 0, "logits": 1},
                     dict(zip(["labels", "logits"], _mnist_specs()))) as host:
        with pytest.raises(ValueError, match="`batch` must match the structure"):
            host.update([labels, logits])
        with pytest.raises(ValueError, match=r"`batch`\['logits'\] has shape \(8, 3\)"):
            host.update({"labels": labels, "logits": logits[:, :3]})
        with pytest.raises(ValueError, match=r"`batch`\['labels'\] has dtype float32"):
            host.update({"labels": labels.astype(np.float32), "logits": logits})
        # Same-kind casts (what np.asarray gives for Python ints/floats) are fine.
        host.update({"labels": labels.astype(np.int64), "logits": logits.astype(np.float64)})
        assert host.result()["accuracy"] == _numpy_accuracy([[labels, logits]])
    with pytest.raises(RuntimeError, match="HostMetrics is closed"):
        host.update({"labels": labels, "logits": logits})
    host.close()  # Idempotent.


def test_mean_loss_matches_float32_metrics_mean_bit_for_bit():
    rng = np.random.default_rng(6)
    losses = (rng.lognormal(size=997) * 3.3).astype(np.float32)
    mean_loss = MeanLoss()
    assert mean_loss.result() == np.float32(0.0)
    for loss in losses:
        mean_loss.update(float(loss))
    result = mean_loss.result()

    total, count = np.float32(0), np.float32(0)
    for loss in losses:
        total, count = np.float32(total + loss), np.float32(count + 1)
    assert type(result) is np.float32 and result == total / count

    with tf.Graph().as_default() as graph:
        step_loss = tf.compat.v1.placeholder(tf.float32, [])
        value, update = tf.compat.v1.metrics.mean(step_loss)
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.local_variables_initializer())
            run_update = sess.make_callable(update, feed_list=[step_loss])
            for loss in losses:
                run_update(loss)
            assert result == sess.run(value)

    mean_loss.reset()
    mean_loss.update(np.array([2.0]))
    assert mean_loss.result() == np.float32(2.0)
    with pytest.raises(ValueError, match="`step_loss` must be a single value"):
        mean_loss.update(np.ones(2))


def test_finalize_eval_dict_has_legacy_keys_order_and_dtypes():
    mean_loss = MeanLoss()
    mean_loss.update(1.0)
    mean_loss.update(2.0)
    result = finalize_eval_dict({"zeta": np.float32(0.5), "accuracy": np.float32(0.25)},
                                mean_loss, 1200)
    assert list(result) == ["accuracy", "loss", "zeta", "global_step"]
    assert result["loss"] == np.float32(1.5) and type(result["loss"]) is np.float32
    assert result["global_step"] == 1200 and type(result["global_step"]) is np.int64
    assert finalize_eval_dict({}, 0.25, 0) == {"loss": np.float32(0.25), "global_step": 0}
    assert metrics_lib.LOSS_KEY == "loss"


def test_update_feeds_strided_and_string_arrays_through_the_compiled_callable():
    def metric_fn(names, values):
        lengths = tf.cast(tf.strings.length(names), tf.float32)
        return {"length": tf.compat.v1.metrics.mean(lengths),
                "value": tf.compat.v1.metrics.mean(values)}

    specs = [tf.TensorSpec([None], tf.string), tf.TensorSpec([None, 2], tf.float32)]
    with HostMetrics(metric_fn, [0, 1], specs) as host:
        wide = np.arange(12, dtype=np.float64).reshape(3, 4)
        host.update([np.array([b"ab", b"abcd", b""], dtype=object), wide[:, ::2]])  # Strided.
        host.update([np.array(["xyz"]), np.array([[1.0, 2.0]], np.float32)])
        result = host.result()
    assert result["length"] == np.float32(9 / 4)
    assert result["value"] == np.float32((wide[:, ::2].sum() + 3) / 8)


def test_host_metrics_updated_in_the_background_equal_updates_in_line():
    specs = {"labels": tf.TensorSpec([None], tf.int64), "logits": tf.TensorSpec([None, 3])}

    def metric_fn(labels, logits):
        return {"accuracy": tf.compat.v1.metrics.accuracy(labels, tf.argmax(logits, 1)),
                "mean": tf.compat.v1.metrics.mean(logits)}

    rng = np.random.default_rng(0)
    batches = [{"labels": rng.integers(0, 3, 16), "logits": rng.normal(size=(16, 3))}
               for _ in range(30)]
    results = []
    for in_background in (False, True):
        host = HostMetrics(metric_fn, dict(specs), specs)
        host.reset()
        with background_lib.InOrder() as background:
            for batch in batches:
                if in_background:
                    background.submit(host.update, batch)
                else:
                    host.update(batch)
            background.drain()
        results.append(host.result())
        host.close()
    assert results[0] == results[1]


def _table_input_fn(params, rows=16):
    x = tf.random.stateless_normal([rows, 4], seed=[1, 2])
    y = tf.cast(x[:, 0] > 0, tf.int64)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(params["batch_size"],
                                                            drop_remainder=rows % 8 == 0)


def _table_model_fn(features, labels, mode, params, table_in_metric_fn=False):
    """metric_fn looks predictions up in a table model_fn made (google-research/bigbird
    summarization's metric_fn decodes with the sentencepiece tokenizer model_fn made), or
    one it makes itself."""
    v1 = tf.compat.v1
    logits = v1.layers.dense(features, 2)
    predictions = tf.argmax(logits, axis=-1)
    if mode == "infer":
        return TPUEstimatorSpec(mode, predictions={"predictions": predictions})
    loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == "train":
        train_op = v1.train.GradientDescentOptimizer(0.5).minimize(
                loss, v1.train.get_global_step())
        return TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

    def make_table():
        return tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
            tf.constant([0, 1], tf.int64), ["neg", "pos"]), "?")

    names = None if table_in_metric_fn else make_table()

    def metric_fn(labels, predictions):
        pos = tf.equal((names or make_table()).lookup(predictions), "pos")
        rows = tf.keras.metrics.Sum(name="rows")
        rows.update_state(tf.ones_like(predictions, tf.float32))
        return {"accuracy": v1.metrics.accuracy(labels, predictions),
                "pos_rate": v1.metrics.mean(tf.cast(pos, tf.float32)),
                # Counts, not ratios: an example counted twice, or a padding row, would show.
                "true_pos": v1.metrics.true_positives(labels, predictions),
                "rows": rows}

    return TPUEstimatorSpec(mode, loss=loss, eval_metrics=(metric_fn, [labels, predictions]))


def _expected_table_metrics(est, rows=16):
    labels = np.concatenate([y.numpy() for _, y in _table_input_fn({"batch_size": 8}, rows)])
    predictions = np.array([p["predictions"] for p in est.predict(
            lambda params: _table_input_fn(params, rows).map(lambda x, y: x))])
    assert len(predictions) == len(labels) == rows
    return {"accuracy": np.float32(np.sum(predictions == labels)) / np.float32(rows),
            "pos_rate": np.float32(np.sum(predictions == 1)) / np.float32(rows),
            "true_pos": np.float32(np.sum((predictions == 1) & (labels == 1))),
            "rows": np.float32(rows)}


def test_metric_fn_using_a_table_model_fn_made_on_the_cpu_path(tmp_path):
    """Legacy's CPU path called metric_fn in model_fn's graph; the shim builds it in the
    eval step there, where the table is reachable."""
    est = TPUEstimator(model_fn=_table_model_fn, use_tpu=False, train_batch_size=8,
                       eval_batch_size=8, predict_batch_size=8,
                       config=RunConfig(model_dir=str(tmp_path)))
    est.train(_table_input_fn, max_steps=3)
    results = est.evaluate(_table_input_fn)
    assert sorted(results) == ["accuracy", "global_step", "loss", "pos_rate", "rows",
                               "true_pos"]
    expected = _expected_table_metrics(est)
    assert {k: results[k] for k in expected} == expected
    assert est.evaluate(_table_input_fn) == results  # Accumulators reset per evaluate.


@pytest.mark.parametrize("table_in_metric_fn", [False, True])
@pytest.mark.parametrize("iterations_per_loop", [1, 3])
def test_cpu_path_metrics_built_after_the_steps_count_every_row_once(
        tmp_path, iterations_per_loop, table_in_metric_fn):
    """On one device metric_fn is built after the loop's steps, on the tensors they passed
    it (a partial last batch included); one that reaches model_fn's table is built in the
    step instead. Either way legacy's values."""
    est = TPUEstimator(model_fn=lambda features, labels, mode, params: _table_model_fn(
            features, labels, mode, params, table_in_metric_fn=table_in_metric_fn),
            use_tpu=False, train_batch_size=8, eval_batch_size=8, predict_batch_size=8,
            config=RunConfig(model_dir=str(tmp_path),
                             tpu_config=TPUConfig(iterations_per_loop=iterations_per_loop)))
    est.train(_table_input_fn, max_steps=3)
    results = est.evaluate(lambda params: _table_input_fn(params, 20))  # 8, 8 and 4 rows.
    expected = _expected_table_metrics(est, 20)
    assert {k: results[k] for k in expected} == expected
    assert est.evaluate(lambda params: _table_input_fn(params, 20)) == results


def test_cpu_path_metrics_of_an_empty_evaluation_are_their_initial_values(tmp_path):
    """Legacy read metrics once after the last update: with no step, as initialised (TF 2.15
    legacy: `{'accuracy': 0.0, 'loss': 0.0, 'tp': 0.0, 'global_step': 1}`)."""
    est = TPUEstimator(model_fn=_table_model_fn, use_tpu=False, train_batch_size=8,
                       eval_batch_size=8, config=RunConfig(model_dir=str(tmp_path)))
    est.train(_table_input_fn, max_steps=1)
    results = est.evaluate(lambda params: _table_input_fn(params).take(0))
    assert results == {"accuracy": 0.0, "loss": 0.0, "pos_rate": 0.0, "rows": 0.0,
                       "true_pos": 0.0, "global_step": 1}
    assert type(results["true_pos"]) is np.float32


# Each flag's path runs in the default run; the mixed pairs are opt-in (`-m slow`).
@pytest.mark.slow
@pytest.mark.parametrize("use_tpu, table_in_metric_fn", [
    (False, False), (True, True),
    pytest.param(True, False, marks=pytest.mark.slow),
    pytest.param(False, True, marks=pytest.mark.slow)])
def test_metric_fn_using_a_table_on_several_replicas(tmp_path, use_tpu, table_in_metric_fn):
    """On TPU (legacy: the host part of the TPU computation's graph) and on several replicas
    metric_fn sees every replica's real rows once, padding dropped. A table metric_fn makes
    works in the host graph (initialised once, as legacy's Scaffold did); for model_fn's
    table metric_fn is built in the step, where that table is reachable."""
    strategy = make_strategy("mirrored8")
    config = RunConfig(model_dir=str(tmp_path), tpu_config=TPUConfig(iterations_per_loop=2),
                       **({} if use_tpu else {"train_distribute": strategy,
                                              "eval_distribute": strategy}))
    est = TPUEstimator(model_fn=lambda features, labels, mode, params: _table_model_fn(
            features, labels, mode, params, table_in_metric_fn=table_in_metric_fn),
            use_tpu=use_tpu, train_batch_size=8, eval_batch_size=8, predict_batch_size=8,
            config=config)
    est.train(_table_input_fn, max_steps=3)
    # 20 rows in batches of 8: the last step has 4 real rows and 4 padding rows.
    results = est.evaluate(lambda params: _table_input_fn(params, 20))
    assert sorted(results) == ["accuracy", "global_step", "loss", "pos_rate", "rows",
                               "true_pos"]
    expected = _expected_table_metrics(est, 20)
    assert {k: results[k] for k in expected} == expected
    assert est.evaluate(lambda params: _table_input_fn(params, 20)) == results


def test_cpu_path_metric_fn_may_use_model_fn_tensors_modules_and_keras_metrics(tmp_path):
    """On legacy's CPU path metric_fn ran in model_fn's graph: it could read any model_fn
    tensor or object, not only the `tensors` passed to it. tf.keras Metric variables were
    local there (unsaved, reset per evaluate), as the v1 metrics' own."""
    v1 = tf.compat.v1

    class Vocab(tf.Module):  # A resource-holding object, as tf_text tokenizers are.
        def __init__(self):
            super().__init__()
            self.table = tf.lookup.experimental.MutableHashTable(tf.int64, tf.float32, -1.0)
            self.init = self.table.insert(tf.constant([0, 1], tf.int64), [10.0, 20.0])

    def model_fn(features, labels, mode, params):
        logits = v1.layers.dense(features, 2)
        predictions = tf.argmax(logits, axis=-1)
        if mode == "infer":
            return TPUEstimatorSpec(mode, predictions={"predictions": predictions})
        loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
        if mode == "train":
            return TPUEstimatorSpec(mode, loss=loss, train_op=v1.train.GradientDescentOptimizer(
                    0.5).minimize(loss, v1.train.get_global_step()))
        vocab = Vocab()

        def metric_fn(labels):
            with tf.control_dependencies([vocab.init]):
                score = vocab.table.lookup(predictions)  # `predictions`: captured, not passed.
            mean = tf.keras.metrics.Mean(name="score_mean")
            mean.update_state(score)
            return {"score": mean, "accuracy": v1.metrics.accuracy(labels, predictions)}

        return TPUEstimatorSpec(mode, loss=loss, eval_metrics=(metric_fn, [labels]))

    est = TPUEstimator(model_fn=model_fn, use_tpu=False, train_batch_size=8,
                       eval_batch_size=8, predict_batch_size=8,
                       config=RunConfig(model_dir=str(tmp_path)))
    est.train(_table_input_fn, max_steps=3)
    results = est.evaluate(_table_input_fn)
    expected = _expected_table_metrics(est)
    assert results["accuracy"] == expected["accuracy"]
    np.testing.assert_allclose(results["score"], 10.0 + 10.0 * expected["pos_rate"], rtol=1e-6)
    assert est.evaluate(_table_input_fn) == results  # The Keras metric was reset too.
    est.train(_table_input_fn, max_steps=4)  # Its checkpoint leaves the metrics out.
    saved = {name for name, _ in tf.train.list_variables(str(tmp_path))}
    assert "global_step" in saved
    assert not any("score_mean" in name or "accuracy" in name for name in saved), saved


@pytest.mark.parametrize("spec_type", ["eval_metrics", "eval_metric_ops"])
def test_cpu_path_metrics_read_after_the_last_update(tmp_path, spec_type):
    """In a traced step `true_positives` reads its variable for its value before it assigns
    (its update op returns the new count), and `mean_iou`'s update op is the confusion
    matrix (its value is read after it): both must end at legacy's final value. So must an
    F1 made from `precision` and `recall` values with `tf.group` of their updates
    (google-research/goemotions `get_f1`): its value was the one before the last batch."""
    v1 = tf.compat.v1

    def model_fn(features, labels, mode, params):
        spec = _table_model_fn(features, labels, mode, params)
        if mode != "eval":
            return spec
        predictions = spec.eval_metrics[1][1]

        def metric_fn(labels, predictions):
            p, r = (v1.metrics.precision(labels, predictions),
                    v1.metrics.recall(labels, predictions))
            return {"tp": v1.metrics.true_positives(labels, predictions),
                    "iou": v1.metrics.mean_iou(labels, predictions, 2),
                    "accuracy": v1.metrics.accuracy(labels, predictions),
                    "f1": (2 * p[0] * r[0] / (p[0] + r[0] + 1e-5), tf.group(p[1], r[1]))}

        if spec_type == "eval_metrics":
            return TPUEstimatorSpec(mode, loss=spec.loss,
                                    eval_metrics=(metric_fn, [labels, predictions]))
        return EstimatorSpec(mode, loss=spec.loss,
                             eval_metric_ops=metric_fn(labels, predictions))

    est = TPUEstimator(model_fn=model_fn, use_tpu=False, train_batch_size=8,
                       eval_batch_size=8, predict_batch_size=8,
                       config=RunConfig(model_dir=str(tmp_path)))
    est.train(_table_input_fn, max_steps=3)
    results = est.evaluate(_table_input_fn)
    labels = np.concatenate([y.numpy() for _, y in _table_input_fn({"batch_size": 8})])
    predictions = np.array([p["predictions"] for p in est.predict(
            lambda params: _table_input_fn(params).map(lambda x, y: x))])
    assert results["tp"] == np.sum((predictions == 1) & (labels == 1))
    assert results["accuracy"] == _expected_table_metrics(est)["accuracy"]
    ious = []
    for c in (0, 1):
        union = np.sum((predictions == c) | (labels == c))
        if union:
            ious.append(np.sum((predictions == c) & (labels == c)) / union)
    np.testing.assert_allclose(results["iou"], np.mean(ious), rtol=1e-6)
    assert results["iou"].shape == ()
    tp = np.sum((predictions == 1) & (labels == 1))
    precision, recall = tp / np.sum(predictions == 1), tp / np.sum(labels == 1)
    np.testing.assert_allclose(results["f1"], 2 * precision * recall
                               / (precision + recall + 1e-5), rtol=1e-6)


def test_static_replicas_gives_metric_fn_the_concatenated_batch_axis(tensorshape):
    """`static_replicas=N`: metric_fn sees axis 0 as N times each spec's, as legacy TPU's
    metric_fn saw N cores' fixed-shape outfeeds concatenated. Another row count (a padded
    last batch's real rows) gets metric_fn built again for it, into the same totals. The
    same with TF1's shapes, where metric_fn gets `Dimension`s (tensorflow/tpu unet3d after
    `disable_v2_behavior()`: `unhashable type: 'Dimension'` once)."""
    seen = []

    def metric_fn(x):
        assert isinstance(x.shape[0], tf.compat.v1.Dimension) == (tensorshape == "tf1")
        seen.append(x.shape.as_list())
        return {"n": tf.compat.v1.metrics.mean(tf.size(x, out_type=tf.float32))}

    with HostMetrics(metric_fn, [0], [tf.TensorSpec([3, 2], tf.float32)],
                     static_replicas=2) as host:
        assert seen == [[6, 2]]
        assert _run(host, [[np.ones((6, 2), np.float32)]] * 2) == {"n": np.float32(12.0)}
        assert _run(host, [[np.ones((6, 2), np.float32)], [np.ones((4, 2), np.float32)],
                           [np.ones((6, 2), np.float32)], [np.ones((4, 2), np.float32)]]
                    ) == {"n": np.float32(10.0)}
        assert seen == [[6, 2], [4, 2]]  # Built once per row count.
        with pytest.raises(ValueError, match=r"has shape \(4, 3\), but its spec needs "
                                             r"\[None, 2\]"):
            host.update([np.ones((4, 3), np.float32)])


def test_static_replicas_with_an_unknown_batch_axis_builds_it_unknown(tensorshape):
    """Specs whose axis 0 is unknown (with TF1's shapes a `Dimension(None)`, which is not
    None) get metric_fn built once, with axis 0 unknown, for every row count."""
    seen = []

    def metric_fn(x, y):
        seen.append((x.shape.as_list(), y.shape.rank))
        return {"m": tf.compat.v1.metrics.mean(x), "n": tf.compat.v1.metrics.mean(y)}

    specs = [tf.TensorSpec([None, 2], tf.float32), tf.TensorSpec(None, tf.float32)]
    with HostMetrics(metric_fn, [0, 0], specs, static_replicas=2) as host:
        result = _run(host, [[np.ones((5, 2), np.float32), np.full(5, 2.0, np.float32)],
                             [np.ones((3, 2), np.float32), np.full(3, 2.0, np.float32)]])
    assert result == {"m": np.float32(1.0), "n": np.float32(2.0)}
    assert seen == [([None, 2], None)]


def _shared_state_metric_fn(labels, values):
    """v1 metrics, a `get_variable` and a tf-keras Metric: every kind of metric variable."""
    v1 = tf.compat.v1
    total = v1.get_variable("total", [], tf.float32, v1.zeros_initializer(),
                            collections=[v1.GraphKeys.LOCAL_VARIABLES], trainable=False)
    rows = tf.keras.metrics.Sum(name="rows")
    rows.update_state(tf.ones_like(values))
    # A static axis 0 unrolls per row (as efficientdet's batch_map_fn); unknown: vectorized.
    if values.shape[0] is None:
        doubled = values * 2.0
    else:
        doubled = tf.stack([values[i] * 2.0 for i in range(values.shape[0])])
    return {"accuracy": v1.metrics.accuracy(labels, tf.cast(values > 0, tf.int32)),
            "mean": v1.metrics.mean(doubled),
            "total": (tf.identity(total), v1.assign_add(total, tf.reduce_sum(values))),
            "rows": rows}


def test_batches_of_other_sizes_share_the_metric_variables():
    rng = np.random.default_rng(1)
    sizes = [8, 8, 3, 8, 5, 3]
    batches = [[rng.integers(0, 2, n).astype(np.int32), rng.normal(size=n).astype(np.float32)]
               for n in sizes]
    labels = np.concatenate([b[0] for b in batches])
    values = np.concatenate([b[1] for b in batches])
    specs = [tf.TensorSpec([4], tf.int32), tf.TensorSpec([4], tf.float32)]
    with HostMetrics(_shared_state_metric_fn, [0, 0], specs, static_replicas=2) as host:
        for _ in range(2):  # reset() zeroes what every build accumulated.
            results = _run(host, batches)
            assert results["rows"] == np.float32(len(values))
            np.testing.assert_allclose(results["total"], values.sum(), rtol=1e-5)
            np.testing.assert_allclose(results["mean"], 2 * values.mean(), rtol=1e-5)
            assert results["accuracy"] == np.float32(
                    np.sum((values > 0) == labels)) / np.float32(len(values))


def test_a_metric_fn_that_cannot_be_built_for_another_size_names_the_fix():
    def metric_fn(x):
        if x.shape[0] is None or x.shape[0] < 6:
            raise ValueError("needs 6 rows")
        return {"m": tf.compat.v1.metrics.mean(x)}

    with HostMetrics(metric_fn, [0], [tf.TensorSpec([3], tf.float32)],
                     static_replicas=2) as host:
        host.update([np.ones(6, np.float32)])
        with pytest.raises(ValueError, match=r"has \[4\] rows, but metric_fn was built for "
                                             r"batches of \[6\].*needs 6 rows.*drop_remainder"):
            host.update([np.ones(4, np.float32)])
        assert host.result() == {"m": np.float32(1.0)}

    def more_metrics_when_small(x):
        metrics = {"m": tf.compat.v1.metrics.mean(x)}
        if x.shape[0] is None or x.shape[0] < 6:
            metrics["extra"] = tf.compat.v1.metrics.mean(x)
        return metrics

    with HostMetrics(more_metrics_when_small, [0], [tf.TensorSpec([3], tf.float32)],
                     static_replicas=2) as host:
        with pytest.raises(ValueError, match=r"_VariantMismatch: metric_fn created more "
                                             r"variables"):
            host.update([np.ones(4, np.float32)])


def _static_shape_model_fn(features, labels, mode, params):
    """tensorflow/tpu unet3d's metric_fn: `[batch, -1]` tensors reshaped back with a -1, then
    `tf.size(x, out_type=tf.float32)`, which needs the fully defined shape legacy TPU gave."""
    v1 = tf.compat.v1
    logits = v1.layers.dense(features, 2)
    loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == "train":
        return TPUEstimatorSpec(mode, loss=loss, train_op=v1.train.GradientDescentOptimizer(
                0.5).minimize(loss, v1.train.get_global_step()))

    def metric_fn(labels_r2):
        labels_back = tf.reshape(labels_r2, [2, -1])
        size = tf.size(labels_back, out_type=tf.float32)
        return {"size": v1.metrics.mean(size),
                "positives": v1.metrics.mean(tf.reduce_sum(tf.cast(labels_back, tf.float32)))}

    return TPUEstimatorSpec(mode, loss=loss,
                            eval_metrics=(metric_fn, [tf.reshape(labels, [1, -1])]))


def _static_input_fn(params, rows=16, drop_remainder=True):
    x = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4) / 64.0
    y = (np.arange(rows) % 3 == 0).astype(np.int32)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(params["batch_size"],
                                                            drop_remainder=drop_remainder)


@pytest.mark.slow
def test_tpu_metric_fn_needing_a_static_batch_axis_gets_legacys(tmp_path):
    """use_tpu=True on 8 replicas: the per-replica `[1, batch]` tensors arrive as `[8, 1]`
    with a static axis 0, so metric_fn's `-1` reshape and float `tf.size` work as on legacy
    TPU; results are the per-step values over every replica's rows."""
    est = TPUEstimator(model_fn=_static_shape_model_fn, use_tpu=True, train_batch_size=8,
                       eval_batch_size=8,
                       config=RunConfig(model_dir=str(tmp_path),
                                        tpu_config=TPUConfig(iterations_per_loop=2)))
    est.train(lambda params: _static_input_fn(params).repeat(), max_steps=2)
    results = est.evaluate(_static_input_fn)
    # Two steps of 8 rows; labels 1 at rows 0, 3, 6 (step 1) and 9, 12, 15 (step 2).
    assert results["size"] == np.float32(8.0)
    assert results["positives"] == np.float32(3.0)
    assert results["global_step"] == 2
    # A partial last batch (20 rows, no drop_remainder): its 4 real rows get metric_fn
    # built for 4 (`[2, 2]`), into the same totals. Labels 1 at rows 0, 3, ..., 18.
    results = est.evaluate(lambda params: _static_input_fn(params, 20, drop_remainder=False))
    np.testing.assert_allclose(results["size"], (8 + 8 + 4) / 3, rtol=1e-6)
    np.testing.assert_allclose(results["positives"], (3 + 3 + 1) / 3, rtol=1e-6)


def _count_positive(row):
    return tf.cast(tf.shape(tf.gather_nd(row, tf.where(row > 0.5)))[0], tf.float32)


def _branching_model_fn(features, labels, mode, params):
    """google/automl efficientdet's metric_fn (`postprocess.batch_map_fn`): an unknown axis 0
    takes `tf.vectorized_map` over a ragged `tf.where`, which builds but fails when run
    (`PartialTensorShape: Incompatible shapes during merge`); a static one a loop per row."""
    v1 = tf.compat.v1
    logits = v1.layers.dense(features, 6, kernel_initializer=v1.ones_initializer())
    loss = tf.reduce_mean(tf.square(logits - tf.cast(labels[:, None], tf.float32)))

    def metric_fn(logits):
        if logits.shape[0] is None:
            counts = tf.vectorized_map(_count_positive, logits)
        else:
            counts = tf.stack([_count_positive(logits[i]) for i in range(logits.shape[0])])
        return {"positives": v1.metrics.mean(counts), "rows": v1.metrics.mean(
                tf.cast(tf.size(counts), tf.float32))}

    if mode == "eval":
        return TPUEstimatorSpec(mode, loss=loss, eval_metrics=(metric_fn, [logits]))
    return TPUEstimatorSpec(mode, loss=loss, train_op=v1.train.GradientDescentOptimizer(
            0.0).minimize(loss, v1.train.get_global_step()))


@pytest.mark.slow
def test_metric_fn_branching_on_a_static_batch_axis_gets_legacys(tmp_path):
    """use_tpu=True on 8 replicas: metric_fn is built with the gathered static axis legacy
    TPU gave it, for full batches and, built again, for a padded last batch's real rows.
    (use_tpu=False on one device builds it on model_fn's own tensors, as legacy did.)"""
    est = TPUEstimator(model_fn=_branching_model_fn, use_tpu=True, train_batch_size=8,
                       eval_batch_size=8,
                       config=RunConfig(model_dir=str(tmp_path),
                                        tpu_config=TPUConfig(iterations_per_loop=2)))
    est.train(lambda params: _static_input_fn(params).repeat(), max_steps=1)
    x = np.arange(20 * 4, dtype=np.float32).reshape(20, 4) / 64.0
    expected = np.sum(x.sum(1, keepdims=True) * np.ones(6) > 0.5, axis=1)
    for rows, drop_remainder, steps in ((16, True, [8, 8]), (20, False, [8, 8, 4])):
        results = est.evaluate(lambda params: _static_input_fn(params, rows, drop_remainder))
        # v1 `metrics.mean` weighs every row once; `rows` is one value per step.
        np.testing.assert_allclose(results["positives"], expected[:rows].mean(), rtol=1e-6)
        np.testing.assert_allclose(results["rows"], np.mean(steps), rtol=1e-6)


@pytest.mark.parametrize("strategy_name", ["default", "mirrored8"])
def test_spec_paired_keras_metric_is_read_after_every_replicas_update(strategy_name):
    """A Metric in EstimatorSpec.eval_metric_ops (made legacy's pair by the spec) evaluated
    in the step: on several replicas the value counts every replica's rows once."""
    strategy = make_strategy(strategy_name)
    with strategy.scope():
        metric = tf.keras.metrics.Mean()

    @tf.function
    def step(values):
        def replica_fn(v):
            metric.update_state(v)
            spec = EstimatorSpec("eval", loss=tf.constant(0.0), eval_metric_ops={"m": metric})
            return metrics_lib.values_after_update(
                spec.eval_metric_ops,
                across_replicas=tf.distribute.get_replica_context().num_replicas_in_sync > 1)
        return strategy.run(replica_fn, args=(values,))

    rows = strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.constant([1.0, 2.0]) * (ctx.replica_id_in_sync_group + 1.0))
    result = strategy.experimental_local_results(step(rows))[0]["m"].numpy()
    replicas = strategy.num_replicas_in_sync  # Replica k adds [k, 2k], k = 1..replicas.
    assert result == pytest.approx(0.75 * (replicas + 1))
