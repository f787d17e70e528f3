"""`pandas_input_fn` (tpu_estimator_compat/inputs/pandas_io.py) against legacy's recorded batches
(tests/legacy_recorder/numpy_input.py, its pandas cases), and through the plain Estimator.

Skipped without pandas, which is not a requirement of the library.
"""

import re

import numpy as np
import pytest
import tensorflow as tf

pd = pytest.importorskip("pandas")

from conftest import legacy_recorder  # noqa: E402
from test_numpy_io import engine_draw, linear_model_fn  # noqa: E402
from tpu_estimator_compat.api.estimator import Estimator  # noqa: E402
from tpu_estimator_compat.inputs import pandas_io  # noqa: E402

RECORDER, GOLDEN = legacy_recorder("numpy_input")
DRAWS = {"tf1_session": RECORDER.session_draw, "engine": engine_draw}


@pytest.fixture(scope="module", params=sorted(DRAWS))
def replay(request):
    out = {"pandas": {}, "pandas_errors": {}}
    for shuffled, cases in ((False, RECORDER.PANDAS_CASES), (True, RECORDER.PANDAS_SHUFFLED)):
        for name, data, kwargs, limit in cases:
            out["pandas"][name] = RECORDER._case_row(
                pandas_io.pandas_input_fn, RECORDER.pandas_data(data), kwargs, limit,
                DRAWS[request.param], shuffled)
    for name, data, kwargs in RECORDER.PANDAS_ERRORS:
        x, y = RECORDER.pandas_data(data)
        out["pandas_errors"][name] = RECORDER._error_row(
            pandas_io.pandas_input_fn, lambda make: make(x, y, **kwargs)())
    return out


@pytest.mark.parametrize("case", [name for name, *_ in RECORDER.PANDAS_CASES])
def test_unshuffled_batches_equal_legacys(replay, case):
    assert replay["pandas"][case] == GOLDEN["pandas"][case]


@pytest.mark.parametrize("case", [name for name, *_ in RECORDER.PANDAS_SHUFFLED])
def test_shuffled_batches_have_legacys_structure(replay, case):
    ours, legacy = replay["pandas"][case], GOLDEN["pandas"][case]
    for key in ("structure", "batch_sizes", "end", "counts"):
        assert ours[key] == legacy[key], key


def _without_index_dtype(message):
    """pandas 3 prints a string Index as `dtype='str'`; the golden's pandas 2.2 `'object'`."""
    return re.sub(r"dtype='(str|object)'", "dtype=<strings>", message)


@pytest.mark.parametrize("case", [name for name, *_ in RECORDER.PANDAS_ERRORS])
def test_errors_are_legacys_word_for_word(replay, case):
    ours, legacy = replay["pandas_errors"][case], GOLDEN["pandas_errors"][case]
    assert ours["error"] == legacy["error"]
    assert _without_index_dtype(ours["message"]) == _without_index_dtype(legacy["message"])


def test_x_is_left_unchanged():
    x = pd.DataFrame({"a": np.arange(4)})
    pandas_io.pandas_input_fn(x, pd.Series(np.arange(4)), shuffle=False)()
    assert list(x.columns) == ["a"]


def test_estimator_trains_evaluates_and_predicts_a_dataframe(tmp_path):
    rng = np.random.RandomState(0)
    frame = pd.DataFrame(rng.rand(30, 3).astype(np.float32), columns=["u", "v", "w"])
    labels = pd.Series((frame.sum(axis=1) > 1.5).astype(np.int32))

    def model_fn(features, labels, mode):
        stacked = tf.stack([features["u"], features["v"], features["w"]], axis=1)
        return linear_model_fn({"x": stacked}, labels, mode)

    est = Estimator(model_fn, model_dir=str(tmp_path))
    est.train(pandas_io.pandas_input_fn(frame, labels, batch_size=8, num_epochs=2,
                                        shuffle=True))
    reader = tf.train.load_checkpoint(est.latest_checkpoint())
    assert reader.get_tensor("global_step") == 8  # 60 rows: 7 batches of 8 and one of 4.
    kernel, bias = reader.get_tensor("dense/kernel"), reader.get_tensor("dense/bias")
    logits = frame.to_numpy() @ kernel + bias
    metrics = est.evaluate(pandas_io.pandas_input_fn(frame, labels, batch_size=7,
                                                     shuffle=False))
    np.testing.assert_allclose(metrics["accuracy"],
                               np.mean(np.argmax(logits, 1) == labels.to_numpy()), rtol=1e-6)
    predictions = list(est.predict(pandas_io.pandas_input_fn(frame, batch_size=7,
                                                             shuffle=False)))
    np.testing.assert_allclose(np.stack([p["logits"] for p in predictions]), logits,
                               rtol=1e-5, atol=1e-6)
