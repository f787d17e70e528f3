"""An EstimatorSpec's `eval_metric_ops` on the engine: `(value, update_op)` pairs beside
tf_keras Metric objects, on one replica and merged across replicas (`eval_distribute`), as
legacy's Estimator and its distributed Estimator evaluated them.

Every test evaluates for real; the distributed results are compared with a one-replica
evaluation of the same data and with a golden recorded on the legacy stack.
"""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

import tpu_estimator_compat
from tpu_estimator_compat import TPUEstimator
from tpu_estimator_compat.session import strategy as strategy_lib

tpu_estimator_compat.install_aliases()
v1 = tf.compat.v1

# Counts: exact on any number of replicas (integer-valued float32 sums). Means of floats:
# summed in another order across replicas, so within float32 rounding.
COUNTED = ("accuracy", "auc", "k_accuracy", "k_auc", "k_precision", "k_recall", "k_count")
SUMMED = ("k_mean_label", "mean_label")
# Initial weights: class 1 when x0 + x1 > 1 (labels say x0 + x1 + x2 > 1.5): a fair model.
KERNEL = np.float32([[0, 1], [0, 1], [0, 0]])
BIAS = np.float32([0, -1])


def _two_replicas() -> tf.distribute.Strategy:
    return strategy_lib.mirrored_over([d.name for d in tf.config.list_logical_devices("CPU")[:2]])


@pytest.fixture(params=["default", "mirrored2"])
def eval_strategy(request):
    return None if request.param == "default" else _two_replicas()


def _data(rows: int):
    rng = np.random.RandomState(0)
    x = rng.rand(rows, 3).astype(np.float32)
    return x, (x.sum(axis=1) > 1.5).astype(np.int32)


def _input_fn(rows: int, batch: int = 8):
    x, y = _data(rows)
    return lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(batch)


def model_fn(features, labels, mode):
    """Mixed eval_metric_ops, the Keras ones made and updated here as v2 heads do."""
    logits = v1.layers.dense(features["x"], 2, kernel_initializer=v1.constant_initializer(
        KERNEL), bias_initializer=v1.constant_initializer(BIAS))
    classes = tf.argmax(logits, axis=1)
    probability = tf.nn.softmax(logits)[:, 1]
    loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = v1.train.GradientDescentOptimizer(0.5).minimize(
        loss, global_step=v1.train.get_global_step())
    keras = {"k_mean_label": tf_keras.metrics.Mean(name="k_mean_label"),
             "k_accuracy": tf_keras.metrics.Accuracy(name="k_accuracy"),
             "k_auc": tf_keras.metrics.AUC(name="k_auc"),
             "k_precision": tf_keras.metrics.Precision(name="k_precision"),
             "k_recall": tf_keras.metrics.Recall(name="k_recall"),
             "k_count": tf_keras.metrics.Sum(name="k_count")}
    keras["k_mean_label"].update_state(tf.cast(labels, tf.float32))
    keras["k_accuracy"].update_state(labels, classes)
    for name in ("k_auc", "k_precision", "k_recall"):
        keras[name].update_state(labels, probability)
    keras["k_count"].update_state(tf.ones_like(probability))
    metrics = dict(keras, accuracy=v1.metrics.accuracy(labels, classes),
                   auc=v1.metrics.auc(labels, probability),
                   mean_label=v1.metrics.mean(labels))
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op,
                                      eval_metric_ops=metrics)


def _expected(rows: int) -> dict:
    """What the metrics must be, from numpy: the model's initial weights are fixed."""
    x, y = _data(rows)
    logits = x @ KERNEL + BIAS
    classes = logits.argmax(axis=1)
    return {"accuracy": np.mean(classes == y), "k_accuracy": np.mean(classes == y),
            "mean_label": y.mean(), "k_mean_label": y.mean(), "k_count": float(rows)}


@pytest.mark.slow_cases("mirrored2-56")
@pytest.mark.slow_cases("*-64")
@pytest.mark.parametrize("rows", [64, 60, 56])  # Full steps; a partial batch; an odd count.
def test_mixed_metrics_count_every_example_once(tmp_path, eval_strategy, rows):
    """On 2 replicas each takes its own input_fn batch (a partial one, or none past the end
    of the input); the merged metrics equal the one-replica evaluation."""
    one = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    reference = one.evaluate(_input_fn(rows))
    config = tf.estimator.RunConfig(eval_distribute=eval_strategy)
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path), config=config)
    metrics = est.evaluate(_input_fn(rows), name="distributed")
    for name, value in _expected(rows).items():
        np.testing.assert_allclose(metrics[name], value, rtol=1e-6, err_msg=name)
    for name in COUNTED:
        assert metrics[name] == reference[name], name
    for name in SUMMED:
        np.testing.assert_allclose(metrics[name], reference[name], rtol=1e-6, err_msg=name)
    assert 0.5 < metrics["auc"] <= 1 and 0 < metrics["k_precision"] < 1


def v1_metrics_model_fn(features, labels, mode):
    """tf.compat.v1.metrics whose values read their accumulators in other shapes: a
    confusion matrix (`mean_iou`, `mean_per_class_accuracy`), a sqrt (`rmse`), counts."""
    logits = v1.layers.dense(features["x"], 2, kernel_initializer=v1.constant_initializer(
        KERNEL), bias_initializer=v1.constant_initializer(BIAS))
    classes = tf.argmax(logits, axis=1)
    probability = tf.nn.softmax(logits)[:, 1]
    loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
    metrics = {
        "mean_iou": v1.metrics.mean_iou(labels, classes, num_classes=2),
        "per_class": v1.metrics.mean_per_class_accuracy(labels, classes, num_classes=2),
        "precision": v1.metrics.precision(labels, classes),
        "recall": v1.metrics.recall(labels, classes),
        "false_negatives": v1.metrics.false_negatives(labels, classes),
        "rmse": v1.metrics.root_mean_squared_error(tf.cast(labels, tf.float32), probability),
        "at_threshold": v1.metrics.precision_at_thresholds(labels, probability, [0.3, 0.6]),
    }
    p, r = metrics["precision"], metrics["recall"]  # goemotions' get_f1: values, then group.
    metrics["f1"] = (2 * p[0] * r[0] / (p[0] + r[0] + 1e-5), tf.group(p[1], r[1]))
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=tf.no_op(),
                                      eval_metric_ops=metrics)


def test_v1_metrics_merge_across_replicas_as_one_replica(tmp_path):
    one = tf.estimator.Estimator(v1_metrics_model_fn, model_dir=str(tmp_path))
    reference = one.evaluate(_input_fn(60))
    config = tf.estimator.RunConfig(eval_distribute=_two_replicas())
    est = tf.estimator.Estimator(v1_metrics_model_fn, model_dir=str(tmp_path), config=config)
    metrics = est.evaluate(_input_fn(60), name="distributed")
    assert metrics.keys() == reference.keys()
    for name in ("mean_iou", "per_class", "precision", "recall", "false_negatives"):
        assert metrics[name] == reference[name], name
    np.testing.assert_allclose(metrics["rmse"], reference["rmse"], rtol=1e-6)
    np.testing.assert_array_equal(metrics["at_threshold"], reference["at_threshold"])
    assert 0 < metrics["mean_iou"] < 1 and metrics["false_negatives"] > 0
    f1 = 2 * reference["precision"] * reference["recall"] / (
        reference["precision"] + reference["recall"] + 1e-5)  # Of the final values, as legacy.
    np.testing.assert_allclose([reference["f1"], metrics["f1"]], [f1, f1], rtol=1e-6)


def test_value_through_a_stateful_op_is_refused_across_replicas(tmp_path):
    """A value that cannot be computed again after the updates is refused, not misread."""
    def printing(features, labels, mode):
        loss = tf.reduce_mean(v1.layers.dense(features["x"], 1))
        value, update = v1.metrics.mean(labels)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=tf.no_op(), eval_metric_ops={
            "printed": (v1.Print(value, [value]), update)})

    config = tf.estimator.RunConfig(eval_distribute=_two_replicas())
    est = tf.estimator.Estimator(printing, model_dir=str(tmp_path), config=config)
    with pytest.raises(NotImplementedError, match=r"eval_metric_ops\['printed'\].*stateful"):
        est.evaluate(_input_fn(16))


@pytest.mark.slow_cases("mirrored2")
def test_keras_metric_state_is_local_not_saved_and_reset(tmp_path, eval_strategy):
    """As legacy's EstimatorSpec made them: LOCAL variables. Training (which builds the
    metrics too) leaves them out of the checkpoint, and each evaluate starts them at 0."""
    config = tf.estimator.RunConfig(eval_distribute=eval_strategy)
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path), config=config)
    est.train(_input_fn(64), steps=3)
    assert sorted(est.get_variable_names()) == ["dense/bias", "dense/kernel", "global_step"]
    first, second = est.evaluate(_input_fn(64)), est.evaluate(_input_fn(64))
    assert first["k_count"] == second["k_count"] == 64
    assert first == second


def test_predict_on_eval_distribute_yields_every_example_once_in_order(tmp_path):
    def predict_model_fn(features, labels, mode):
        if mode == tf.estimator.ModeKeys.PREDICT:
            logits = v1.layers.dense(features["x"], 2, kernel_initializer=v1.constant_initializer(
                KERNEL), bias_initializer=v1.constant_initializer(BIAS))
            return tf.estimator.EstimatorSpec(mode, predictions={"logits": logits})
        return model_fn(features, labels, mode)

    config = tf.estimator.RunConfig(eval_distribute=_two_replicas())
    est = tf.estimator.Estimator(predict_model_fn, model_dir=str(tmp_path), config=config)
    x, _ = _data(56)  # 7 batches: the second replica's last one is empty.
    logits = np.stack([p["logits"] for p in est.predict(_input_fn(56))])
    np.testing.assert_allclose(logits, x @ KERNEL + BIAS, rtol=1e-6)


def test_metric_without_update_state_gets_legacy_error(tmp_path):
    def no_update(features, labels, mode):
        loss = tf.reduce_mean(v1.layers.dense(features["x"], 1))
        return tf.estimator.EstimatorSpec(
            mode, loss=loss, train_op=tf.no_op(),
            eval_metric_ops={"mean": tf_keras.metrics.Mean(name="mean")})

    est = tf.estimator.Estimator(no_update, model_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r'Please call update_state\(...\) on the "mean"'):
        est.evaluate(_input_fn(16))


@pytest.mark.slow
def test_tpu_estimator_padded_step_refuses_to_count_padding(tmp_path):
    """A TPUEstimator's batches are padded on several replicas; its EstimatorSpec
    eval_metric_ops would count the padding rows: such a step fails with the fix."""
    def tpu_model_fn(features, labels, mode, params):
        del params
        return model_fn(features, labels, mode)

    strategy = _two_replicas()
    config = tpu_estimator_compat.RunConfig(
        model_dir=str(tmp_path), train_distribute=strategy, eval_distribute=strategy)
    est = TPUEstimator(model_fn=tpu_model_fn, config=config, use_tpu=False,
                       train_batch_size=16, eval_batch_size=16)

    def input_fn(params):
        x, y = _data(60)
        return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(params["batch_size"])

    with pytest.raises(tf.errors.InvalidArgumentError, match="padding|padded"):
        est.evaluate(input_fn)
    full = est.evaluate(lambda params: input_fn(params).take(3))  # 3 full batches of 8.
    np.testing.assert_allclose(full["accuracy"], _expected(48)["accuracy"], rtol=1e-6)
    assert full["k_count"] == 48


# Replayed against tests/goldens/estimator_keras_metrics/legacy.json (recorded by
# tests/legacy_recorder/estimator_keras_metrics.py on the legacy stack,
# TF_ENABLE_ONEDNN_OPTS=0).

def test_mixed_metrics_match_legacy(tmp_path):
    """The r1 script unchanged: evaluate() on one replica equals legacy's bit for bit; on 2
    replicas (eval_distribute) the counted metrics are bit-equal to legacy's too, and the
    float means within float32 rounding."""
    from conftest import legacy_recorder

    recorder, golden = legacy_recorder("estimator_keras_metrics")
    shim, legacy = recorder.run(str(tmp_path), _two_replicas()), golden["legacy"]
    assert shim["global_step"] == legacy["global_step"] == recorder.STEPS
    for key in ("one_replica", "two_replicas"):
        assert shim[key].keys() == legacy[key].keys(), key
    for name, value in legacy["one_replica"].items():
        assert np.float32(shim["one_replica"][name]) == np.float32(value), name
    for name, value in legacy["two_replicas"].items():
        exact = name not in ("loss", "k_mean_loss")
        np.testing.assert_allclose(np.float32(shim["two_replicas"][name]), np.float32(value),
                                   rtol=0 if exact else 2e-6, err_msg=name)


# `read_after`, one replica: a value made before a write its update waits for is read again.
from tpu_estimator_compat.step import eval_metric_ops  # noqa: E402


def _step(build):
    """Runs `build(v)` in a traced function on a variable holding 1.0; returns its result."""
    v = tf.Variable(1.0)
    return tf.function(lambda: build(v))().numpy()


def test_a_value_read_before_the_write_is_read_again_after_it():
    def build(v):
        value = v.read_value() * 2.0 + 1.0      # Reads 1.0: made before the write.
        update = v.assign_add(4.0).op
        return tf.stack([value, eval_metric_ops.read_after(value, update, "m")])
    assert list(_step(build)) == [3.0, 11.0]


def test_a_value_read_after_the_write_is_kept():
    def build(v):
        update = v.assign_add(4.0).op
        value = v.read_value() * 2.0            # Already reads 5.0.
        assert not eval_metric_ops._stale_handles(value, update)
        return eval_metric_ops.read_after(value, update, "m")
    assert _step(build) == 10.0


def test_a_write_the_update_does_not_wait_for_is_not_a_reason():
    w = tf.Variable(0.0)

    def build(v):
        value = v.read_value() + 1.0
        v.assign_add(4.0)                       # Not part of `update`.
        update = w.assign_add(1.0).op
        assert not eval_metric_ops._stale_handles(value, update)
        return eval_metric_ops.read_after(value, update, "m")
    assert _step(build) == 2.0


def test_a_stale_value_through_a_stateful_op_is_kept_not_run_twice():
    def build(v):
        read = v.read_value()
        draws = tf.random.uniform(tf.cast(read, tf.int32)[None])  # Stateful, fed by the read.
        value = read + 0.0 * tf.reduce_sum(draws)
        update = v.assign_add(4.0).op
        assert eval_metric_ops._stale_handles(value, update)
        return eval_metric_ops.read_after(value, update, "m")
    assert _step(build) == 1.0
