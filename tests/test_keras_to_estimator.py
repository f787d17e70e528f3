"""`tf.keras.estimator.model_to_estimator` against the legacy stack:
tests/goldens/keras_to_estimator/legacy.json.

Recorded by tests/legacy_recorder/keras_to_estimator.py on TF 2.15.1 + tensorflow-estimator
2.15.0 (TF_ENABLE_ONEDNN_OPTS=0; legacy repeated itself bit for bit), replayed here on the
library after `install_aliases()`: a compiled tf_keras `Sequential` MLP with numpy start
weights, `train(steps=6)` twice, `evaluate()` and `predict()`, in each checkpoint format.
Compared, on one replica, bit for bit: each step's `loss` summary (tag included: legacy's
Estimator named its own summary `loss_1`, Keras having taken `loss`), every metric, every
prediction, and the final checkpoint's names, shapes and values.
"""

import numpy as np
import pytest

from conftest import assert_legacy_equal, legacy_recorder
from tpu_estimator_compat.legacy import estimator_map

pytestmark = pytest.mark.skipif(not estimator_map.package_installed(),
                                reason="tensorflow-estimator 2.15.0 is not installed")
RECORDER, GOLDEN = legacy_recorder("keras_to_estimator")


def _equal(got, want, what):
    """Bit for bit on the recording's CPU kind (conftest.assert_legacy_equal)."""
    assert_legacy_equal(got, want, GOLDEN, err_msg=what)


@pytest.mark.parametrize("checkpoint_format", ["saver", "checkpoint"])
def test_model_to_estimator_matches_legacy(tmp_path, checkpoint_format):
    assert all(d["max_abs"] == 0.0
               for d in GOLDEN["run_to_run"][checkpoint_format].values())
    got = RECORDER.run(str(tmp_path), checkpoint_format)
    want = GOLDEN["legacy"][checkpoint_format]
    assert [row[:2] for row in got["losses"]] == [row[:2] for row in want["losses"]]
    _equal([row[2] for row in got["losses"]], [row[2] for row in want["losses"]], "losses")
    assert got["metrics"].keys() == want["metrics"].keys()
    for name, value in want["metrics"].items():
        _equal(got["metrics"][name], value, name)
    assert got["global_step"] == want["global_step"] == 2 * RECORDER.STEPS_PER_TRAIN
    assert got["checkpoint"] == want["checkpoint"]
    assert sorted(got["predictions"]) == sorted(want["predictions"]) == ["logits"]
    _equal(got["predictions"]["logits"], want["predictions"]["logits"], "logits")
    assert sorted(got["variables"]) == sorted(want["variables"])
    for name, expected in want["variables"].items():
        assert got["variables"][name]["shape"] == expected["shape"], name
        if expected["value"] is not None:  # The object graph's proto is compared by name.
            _equal(got["variables"][name]["value"], expected["value"], name)
