"""The error table of migration_guide/errors.md: each mistake raises early with a clear message.

Plus a hypothesis fuzz test: malformed constructor arguments and specs always end in one of
our documented exception types with a message naming the argument, never a TF internal error.
"""

import os

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import models
from tpu_estimator_compat import (RunConfig, TPUConfig, TPUEstimator, TPUEstimatorSpec,
                                  EstimatorSpec)
from tpu_estimator_compat.export import saved_model as export_lib

v1 = tf.compat.v1


def make(model_dir, model_fn=models.linear_full_model_fn, **kwargs):
    config = RunConfig(model_dir=str(model_dir), tpu_config=TPUConfig(iterations_per_loop=2))
    return TPUEstimator(model_fn=model_fn, config=config, use_tpu=False, train_batch_size=64,
                        eval_batch_size=64, predict_batch_size=64, **kwargs)


def other_model_fn(features, labels, mode, params):
    """A different model: its variables have other names and shapes."""
    w = v1.get_variable("other/w", [64, 3])
    loss = tf.reduce_mean(tf.matmul(features, w))
    return TPUEstimatorSpec(mode, loss=loss, train_op=v1.assign_add(
        v1.train.get_global_step(), 1))


def test_model_dir_with_another_models_checkpoint_lists_variables(tmp_path):
    make(tmp_path, other_model_fn).train(models.digits_input_fn(64, flat=True), steps=1)
    with pytest.raises(ValueError) as caught:
        make(tmp_path).train(models.digits_input_fn(64, flat=True), steps=1)
    message = str(caught.value)
    assert "w" in message and "b" in message and "model_dir" in message


def test_shape_mismatch_lists_both_shapes(tmp_path):
    def wider(features, labels, mode, params):
        w = v1.get_variable("w", [64, 12])
        loss = tf.reduce_mean(tf.matmul(features, w))
        return TPUEstimatorSpec(mode, loss=loss, train_op=v1.assign_add(
            v1.train.get_global_step(), 1))

    make(tmp_path, wider).train(models.digits_input_fn(64, flat=True), steps=1)
    with pytest.raises(ValueError, match=r"\[64, 12\]|\(64, 12\)"):
        make(tmp_path).train(models.digits_input_fn(64, flat=True), steps=1)


def test_corrupt_checkpoint_is_a_clear_error(tmp_path):
    est = make(tmp_path)
    est.train(models.digits_input_fn(64, flat=True), steps=2)
    with open(est.latest_checkpoint() + ".index", "wb") as f:
        f.write(b"garbage")
    with pytest.raises(Exception, match=r"model.ckpt-2"):
        make(tmp_path).train(models.digits_input_fn(64, flat=True), steps=1)


def test_eval_creating_variables_train_did_not(tmp_path):
    def model_fn(features, labels, mode, params):
        spec = models.linear_full_model_fn(features, labels, mode, params)
        if mode == "eval":
            v1.get_variable("eval_only", [3])
        return spec

    est = make(tmp_path, model_fn)
    est.train(models.digits_input_fn(64, flat=True), steps=1)
    with pytest.raises(ValueError, match=r"eval_only"):
        est.evaluate(models.digits_input_fn(64, repeat=False, flat=True))


def test_dataset_of_wrong_structure(tmp_path):
    def input_fn(params):
        x, y = models.digits(64, flat=True)
        return tf.data.Dataset.from_tensor_slices((x, y, y)).batch(params["batch_size"])

    with pytest.raises(ValueError, match=r"yields a tuple of 3 elements"):
        make(tmp_path).train(input_fn, steps=1)


def test_labels_given_to_model_fn_without_labels(tmp_path):
    def model_fn(features, mode, params):
        return models.linear_full_model_fn(features, None, mode, params)

    with pytest.raises(ValueError, match=r"model_fn does not take labels, but input_fn "
                                         r"returns labels"):
        make(tmp_path, model_fn).train(models.digits_input_fn(64, flat=True), steps=1)


def test_metric_fn_returning_non_pairs(tmp_path):
    def model_fn(features, labels, mode, params):
        spec = models.linear_full_model_fn(features, labels, mode, params)
        if mode != "eval":
            return spec
        return spec._replace(eval_metrics=(lambda labels: {"m": tf.reduce_mean(
            tf.cast(labels, tf.float32))}, [labels]))

    est = make(tmp_path, model_fn)
    est.train(models.digits_input_fn(64, flat=True), steps=1)
    with pytest.raises(TypeError, match=r"Values of eval_metric_ops must be \(metric_value, "
                                        r"update_op\) tuples"):
        est.evaluate(models.digits_input_fn(64, repeat=False, flat=True))


def test_export_outputs_of_wrong_type(tmp_path):
    def model_fn(features, labels, mode, params):
        if isinstance(features, dict):
            features = features["x"]
        spec = models.linear_full_model_fn(features, labels, mode, params)
        if mode != "infer":
            return spec
        return spec._replace(export_outputs={"serving_default": spec.predictions["logits"]})

    est = make(tmp_path, model_fn)
    est.train(models.digits_input_fn(64, flat=True), steps=1)
    receiver = export_lib.build_raw_serving_input_receiver_fn(
        {"x": tf.TensorSpec([None, 64], tf.float32)})
    with pytest.raises((TypeError, ValueError), match=r"export_outputs"):
        est.export_saved_model(str(tmp_path / "export"), receiver)


@pytest.mark.parametrize("value", [12.5, "64", True, -8, 0])
def test_bad_batch_size_types(value):
    with pytest.raises(ValueError, match=r"`train_batch_size` must be a positive integer"):
        TPUEstimator(model_fn=models.linear_model_fn, config=RunConfig(),
                     train_batch_size=value)


def test_iterations_per_loop_in_seconds_refused_at_train(tmp_path):
    config = RunConfig(model_dir=str(tmp_path), tpu_config=TPUConfig(iterations_per_loop="30s"))
    est = TPUEstimator(model_fn=models.linear_model_fn, config=config, use_tpu=False,
                       train_batch_size=64)
    with pytest.raises(NotImplementedError, match=r"`iterations_per_loop` in seconds"):
        est.train(models.digits_input_fn(64, flat=True), steps=1)


def test_embedding_config_spec_of_the_wrong_type_is_named():
    with pytest.raises(TypeError, match=r"`embedding_config_spec` must be a .*EmbeddingConfigSpec`"
                                        r"; received object\. Build it with"):
        TPUEstimator(model_fn=models.linear_model_fn, config=RunConfig(),
                     train_batch_size=8, embedding_config_spec=object())


@pytest.mark.parametrize("method, message", [
    ("evaluate", r"eval_batch_size in TPUEstimator constructor cannot be `None`"),
    ("predict", r"predict_batch_size in TPUEstimator constructor cannot be `None`"),
])
def test_missing_eval_or_predict_batch_size_on_tpu(tmp_path, method, message):
    est = TPUEstimator(model_fn=models.linear_full_model_fn,
                       config=RunConfig(model_dir=str(tmp_path)), train_batch_size=64)
    with pytest.raises(ValueError, match=message):
        result = getattr(est, method)(models.digits_input_fn(64, repeat=False, flat=True))
        next(iter(result))


# ----------------------------------------------------------------------------------------
# Fuzz: malformed constructor arguments never escape as TF internal errors.

OURS = (ValueError, TypeError, RuntimeError, NotImplementedError)
junk = st.one_of(st.none(), st.integers(-3, 3), st.floats(allow_nan=True), st.text(max_size=3),
                 st.booleans(), st.lists(st.integers(), max_size=2),
                 st.dictionaries(st.sampled_from(["batch_size", "context", "lr"]),
                                 st.integers(), max_size=2))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(params=junk, batch=junk, ipl=junk, use_tpu=st.booleans(), config_is_junk=st.booleans())
def test_fuzz_constructor(params, batch, ipl, use_tpu, config_is_junk):
    try:
        config = "nope" if config_is_junk else RunConfig(
            tpu_config=TPUConfig(iterations_per_loop=ipl))
        TPUEstimator(model_fn=models.linear_model_fn, config=config, params=params,
                     use_tpu=use_tpu, train_batch_size=batch)
    except OURS as e:
        assert str(e) and "tensorflow/core" not in str(e)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(eval_metrics=junk, host_call=junk, loss=junk)
def test_fuzz_spec(eval_metrics, host_call, loss):
    try:
        TPUEstimatorSpec("train", loss=loss if loss is not None else tf.constant(1.0),
                         train_op=tf.constant(1), eval_metrics=eval_metrics,
                         host_call=host_call)
    except OURS as e:
        assert str(e)
