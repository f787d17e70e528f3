"""inputs/stopping_signals.py: pad_and_mask's stream with legacy's signals, read in TF1."""

import numpy as np
import pytest
import tensorflow as tf

from tpu_estimator_compat.inputs import stopping_signals


def _dataset(rows, batch):
    x = np.arange(rows, dtype=np.float32)
    return tf.data.Dataset.from_tensor_slices(({"x": x}, x * 10)).batch(batch)


def _read_all(inputs, sliced=False):
    features, labels = inputs.features_and_labels()
    signals = inputs.signals()
    if sliced:
        features = stopping_signals.PaddingSignals.slice_tensor_or_dict(features, signals)
    out = []
    with tf.compat.v1.Session() as sess:
        sess.run(inputs.dataset_initializer_op)
        while True:
            try:
                out.append(sess.run([features, labels, signals]))
            except tf.errors.OutOfRangeError:
                return out


def _inputs(rows, batch, **kwargs):
    inputs = stopping_signals.InputsWithStoppingSignals(_dataset(rows, batch), batch, **kwargs)
    inputs.dataset_initializer_op = inputs.dataset_initializer()
    return inputs


def test_padded_batches_then_one_stopping_batch():
    with tf.Graph().as_default():
        out = _read_all(_inputs(5, 2, add_padding=True))
    assert len(out) == 4  # 2 + 2 + 1 real rows, then the stop.
    features, labels, signals = out[2]
    np.testing.assert_array_equal(features["x"], [4, 0])
    np.testing.assert_array_equal(labels, [40, 0])
    np.testing.assert_array_equal(signals["padding_mask"], [0, 1])
    assert not signals["stopping"].any()
    assert out[3][2]["stopping"].all() and out[3][2]["padding_mask"].all()
    assert out[3][2]["stopping"].shape == (2, 1)


def test_without_padding_batches_keep_their_size():
    with tf.Graph().as_default():
        inputs = _inputs(3, 2)
        assert inputs.dataset.element_spec["features"]["x"].shape.as_list() == [None]
        out = _read_all(inputs)
    assert [len(f["x"]) for f, _, _ in out] == [2, 1, 0]
    assert [bool(s["stopping"].all()) for _, _, s in out] == [False, False, True]
    assert "padding_mask" not in out[0][2]


def test_several_invocations_per_step_get_2n_minus_1_stopping_batches():
    with tf.Graph().as_default():
        out = _read_all(_inputs(3, 2, add_padding=True, num_invocations_per_step=2),
                        sliced=True)
    assert [bool(s["stopping"].all()) for _, _, s in out] == [False, False, True, True, True]
    assert [len(f["x"]) for f, _, _ in out[:2]] == [2, 1]  # The partial batch is cut.


def test_signals_follow_features_and_labels():
    with tf.Graph().as_default():
        inputs = _inputs(2, 2)
        with pytest.raises(RuntimeError, match="features_and_labels"):
            inputs.signals()
        inputs.features_and_labels()
        with pytest.raises(RuntimeError, match="not been consumed"):
            inputs.features_and_labels()
