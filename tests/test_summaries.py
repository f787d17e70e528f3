"""host_call and the legacy training summaries, read back with TensorFlow's summary iterator."""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf

import models
from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator, TPUEstimatorSpec

v1 = tf.compat.v1


def events(directory):
    """[(step, tag, value)] of every summary value in every events file of `directory`."""
    found = []
    for path in sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*"))):
        for event in v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    number = value.simple_value
                else:
                    number = float(tf.make_ndarray(value.tensor))
                found.append((event.step, value.tag, number))
    return found


def host_call_model_fn(features, labels, mode, params):
    spec = models.linear_model_fn(features, labels, mode, params)
    gs = tf.reshape(v1.train.get_global_step(), [1])
    loss = tf.reshape(spec.loss, [1])
    model_dir = params["model_dir"]

    def host_call_fn(gs, loss):
        with tf.compat.v2.summary.create_file_writer(model_dir).as_default():
            with tf.compat.v2.summary.record_if(True):
                tf.compat.v2.summary.scalar("host_loss", loss[0], step=gs[0])
                tf.compat.v2.summary.scalar("rows", tf.cast(tf.size(loss), tf.float32),
                                            step=gs[0])
                return v1.summary.all_v2_summary_ops()

    return TPUEstimatorSpec(mode, loss=spec.loss, train_op=spec.train_op,
                            host_call=(host_call_fn, [gs, loss]))


@pytest.mark.parametrize("every_n, expected_steps", [
    (1, list(range(1, 43))),
    # Legacy outfed on loop steps i % every_n == 0: steps 1, 3, ..., 21 of each 21-step loop.
    (2, [1 + i for i in range(0, 21, 2)] + [22 + i for i in range(0, 21, 2)]),
])
def test_host_call_event_steps_match_legacy(tmp_path, strategy, every_n, expected_steps):
    config = RunConfig(model_dir=str(tmp_path), train_distribute=strategy,
                       save_summary_steps=1000, log_step_count_steps=1000,
                       tpu_config=TPUConfig(iterations_per_loop=21,
                                            experimental_host_call_every_n_steps=every_n))
    est = TPUEstimator(model_fn=host_call_model_fn, config=config, train_batch_size=64,
                       params={"model_dir": str(tmp_path)})
    est.train(models.digits_input_fn(256, flat=True), max_steps=42)
    found = events(str(tmp_path))
    host_losses = [(step, value) for step, tag, value in found if tag == "host_loss"]
    assert [step for step, _ in host_losses] == expected_steps
    # The tensors were gathered from every replica: one row per replica.
    rows = {value for _, tag, value in found if tag == "rows"}
    assert rows == {float(strategy.num_replicas_in_sync)}
    # One events file per train() call for the host_call's writer (plus the loss writer).
    assert len(glob.glob(os.path.join(str(tmp_path), "events.out.tfevents.*"))) == 2


def test_loss_and_step_rate_summaries(tmp_path, strategy):
    config = RunConfig(model_dir=str(tmp_path), train_distribute=strategy,
                       save_summary_steps=4, log_step_count_steps=4,
                       tpu_config=TPUConfig(iterations_per_loop=4))
    est = TPUEstimator(model_fn=models.linear_model_fn, config=config, train_batch_size=64)
    est.train(models.digits_input_fn(256, flat=True), max_steps=12)
    found = events(str(tmp_path))
    # Legacy: loss after the first step, then every save_summary_steps; step rate with the
    # first step as baseline, then every log_step_count_steps.
    assert [s for s, tag, _ in found if tag == "loss"] == [1, 5, 9]
    assert [s for s, tag, _ in found if tag == "global_step/sec"] == [5, 9]
    assert [s for s, tag, _ in found if tag == "examples/sec"] == [5, 9]
    rates = {s: v for s, tag, v in found if tag == "global_step/sec"}
    examples = {s: v for s, tag, v in found if tag == "examples/sec"}
    assert examples[5] == pytest.approx(64 * rates[5], rel=1e-5)
    assert all(np.isfinite(v) and v > 0 for v in rates.values())


def test_scalar_host_call_tensor_rejected(tmp_path):
    def model_fn(features, labels, mode, params):
        spec = models.linear_model_fn(features, labels, mode, params)
        return TPUEstimatorSpec(mode, loss=spec.loss, train_op=spec.train_op,
                                host_call=(lambda loss: [], [spec.loss]))

    est = TPUEstimator(model_fn=model_fn, config=RunConfig(model_dir=str(tmp_path)),
                       use_tpu=False, train_batch_size=64)
    with pytest.raises(RuntimeError, match=r"should preserve batch size dimension"):
        est.train(models.digits_input_fn(64, flat=True), steps=1)


def test_v1_summaries_in_model_fn_are_dropped_with_warning(tmp_path, monkeypatch):
    from tpu_estimator_compat import replica_step

    warnings = []
    monkeypatch.setattr(replica_step.logging, "warning",
                        lambda fmt, *a: warnings.append(fmt % a))

    def model_fn(features, labels, mode, params):
        spec = models.linear_model_fn(features, labels, mode, params)
        v1.summary.scalar("my_loss", spec.loss)
        return spec

    est = TPUEstimator(model_fn=model_fn, config=RunConfig(model_dir=str(tmp_path)),
                       use_tpu=False, train_batch_size=64)
    est.train(models.digits_input_fn(64, flat=True), steps=2)
    assert any("tf.compat.v1.summary op(s)" in w and "host_call" in w for w in warnings)
    assert "my_loss" not in {tag for _, tag, _ in events(str(tmp_path))}


def test_host_call_in_eval(tmp_path, strategy):
    """host_call works in EVAL too: the fn runs per eval step with real rows only."""

    def model_fn(features, labels, mode, params):
        spec = models.linear_full_model_fn(features, labels, mode, params)
        if mode != "eval":
            return spec
        model_dir = params["model_dir"]

        def host_call_fn(labels):
            with tf.compat.v2.summary.create_file_writer(model_dir + "/eval_hc").as_default():
                tf.compat.v2.summary.scalar("rows", tf.cast(tf.size(labels), tf.float32),
                                            step=0)
            return []

        return spec._replace(host_call=(host_call_fn, [labels]))

    config = RunConfig(model_dir=str(tmp_path), train_distribute=strategy,
                       eval_distribute=strategy, tpu_config=TPUConfig(iterations_per_loop=2))
    est = TPUEstimator(model_fn=model_fn, config=config, train_batch_size=64,
                       eval_batch_size=64, params={"model_dir": str(tmp_path)})
    est.train(models.digits_input_fn(256, flat=True), steps=2)
    est.evaluate(lambda params: tf.data.Dataset.from_tensor_slices(
        models.digits(150, flat=True)).batch(params["batch_size"]))
    rows = [v for _, tag, v in events(str(tmp_path / "eval_hc")) if tag == "rows"]
    assert rows == [64.0, 64.0, 22.0]  # 150 examples: every one once, padding removed.
