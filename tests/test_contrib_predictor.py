"""Tests for tpu_estimator_compat.contrib.predictor: TF 1.x's `tf.contrib.predictor`.

The idiom (google-research/lasertagger `predict_main.py`): a TPUEstimator trains and exports,
then `tf.contrib.predictor.from_saved_model(export_dir)` is called with a dict of numpy
inputs keyed as the serving signature. Its outputs must be the estimator's own `predict`
results for the same rows, whatever strategy trained the model and with eager on.
"""
import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator_compat
from tpu_estimator_compat.contrib import predictor as contrib_predictor
from tpu_estimator_compat.legacy import namespaces

tpu_estimator_compat.install_aliases()
_T = tpu_estimator_compat
_ROWS = np.random.RandomState(0).uniform(-1, 1, size=(12, 4)).astype(np.float32)


def _model_fn(features, labels, mode, params):
    """A tagger-shaped model_fn: v1 dense layer, per-row class and probabilities."""
    logits = tf.compat.v1.layers.dense(features["x"], 3, name="out")
    predictions = {"pred": tf.argmax(logits, axis=-1, output_type=tf.int32),
                   "probs": tf.nn.softmax(logits)}
    if mode == tf.estimator.ModeKeys.PREDICT:
        return _T.TPUEstimatorSpec(mode=mode, predictions=predictions)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.5)
    if params["use_tpu"]:
        optimizer = tf.compat.v1.tpu.CrossShardOptimizer(optimizer)
    train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    return _T.TPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)


def _input_fn(params):
    labels = (np.arange(12) % 3).astype(np.int32)
    data = tf.data.Dataset.from_tensor_slices(({"x": _ROWS}, labels))
    return data.repeat().batch(params["batch_size"], drop_remainder=True)


def _predict_input_fn(params):
    return tf.data.Dataset.from_tensor_slices({"x": _ROWS}).batch(params["batch_size"])


def _serving_input_fn():
    # A placeholder built inside the receiver fn, as TF1 scripts write it.
    x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
    return tf.estimator.export.ServingInputReceiver({"x": x}, {"x": x})


def _trained(tmp_path, strategy, use_tpu):
    config = _T.RunConfig(model_dir=str(tmp_path / "model"), train_distribute=strategy,
                          tpu_config=_T.TPUConfig(iterations_per_loop=2))
    est = _T.TPUEstimator(model_fn=_model_fn, config=config, use_tpu=use_tpu,
                          train_batch_size=8, predict_batch_size=8)
    est.train(_input_fn, max_steps=4)
    return est


def _assert_matches_predict(est, out):
    expected = list(est.predict(_predict_input_fn))
    np.testing.assert_array_equal(out["pred"], [e["pred"] for e in expected])
    np.testing.assert_allclose(out["probs"], [e["probs"] for e in expected], atol=1e-6)


@pytest.mark.slow_cases("mirrored8-True")
@pytest.mark.parametrize("use_tpu", [True, False])
def test_from_saved_model_returns_what_predict_returns(tmp_path, strategy, use_tpu):
    est = _trained(tmp_path, strategy, use_tpu)
    export_dir = est.export_saved_model(str(tmp_path / "export"), _serving_input_fn)
    namespace = {}
    exec("from tensorflow.contrib import predictor", namespace)  # noqa: S102
    predict_fn = namespace["predictor"].from_saved_model(export_dir)
    assert tf.executing_eagerly()
    assert set(predict_fn.feed_tensors) == {"x"}
    assert set(predict_fn.fetch_tensors) == {"pred", "probs"}
    assert predict_fn.graph is predict_fn.session.graph
    out = predict_fn({"x": _ROWS})
    assert isinstance(out["pred"], np.ndarray) and out["probs"].shape == (12, 3)
    _assert_matches_predict(est, out)
    # One row at a time, as lasertagger's predictor calls it.
    one = predict_fn({"x": _ROWS[5:6]})
    np.testing.assert_array_equal(one["pred"], out["pred"][5:6])


def test_from_estimator_exports_the_latest_checkpoint(tmp_path):
    est = _trained(tmp_path, None, use_tpu=False)
    predict_fn = tf.compat.v1.contrib.predictor.from_estimator(est, _serving_input_fn)
    _assert_matches_predict(est, predict_fn({"x": _ROWS}))


def test_signature_choice_and_bad_keys_name_the_argument(tmp_path):
    est = _trained(tmp_path, None, use_tpu=False)
    export_dir = est.export_saved_model(str(tmp_path / "export"), _serving_input_fn)
    with pytest.raises(ValueError, match=r"signature_def_key='nope' .*'serving_default'"):
        contrib_predictor.from_saved_model(export_dir, signature_def_key="nope")
    with pytest.raises(ValueError, match="Cannot specify both"):
        contrib_predictor.from_saved_model(export_dir, signature_def_key="serving_default",
                                           signature_def=object())
    predict_fn = contrib_predictor.from_saved_model(
        export_dir, output_names={"p": predict_fn_name(export_dir)})
    assert set(predict_fn({"x": _ROWS})) == {"p"}
    with pytest.raises(ValueError, match=r"unexpected keys in input_dict: \['y'\]"):
        predict_fn({"x": _ROWS, "y": _ROWS})


def predict_fn_name(export_dir):
    """The tensor name of the serving signature's `pred` output, read from the SavedModel."""
    loaded = contrib_predictor.from_saved_model(export_dir)
    return loaded.fetch_tensors["pred"].name


def test_from_contrib_estimator_is_refused_with_the_replacement():
    with pytest.raises(namespaces.LegacySymbolError, match="from_estimator"):
        tf.compat.v1.contrib.predictor.from_contrib_estimator  # noqa: B018
