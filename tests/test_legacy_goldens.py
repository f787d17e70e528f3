"""Which legacy recording a bit-exact replay is held to, per CPU kind (tests/conftest.py).

Legacy's own runs round an ulp apart on another CPU kind (Eigen picks its kernels' summation
order from the instruction set), so a replay is bit-exact against its CPU kind's recording
and within `CROSS_CPU_TOLERANCE` of another kind's.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import conftest
from tpu_estimator_compat.parity import golden as golden_lib


def _golden_of(model: str, avx512f: bool) -> dict:
    golden = {"versions": {"tensorflow": "2.15.1", "cpu": {"model": model, "avx512f": avx512f}}}
    golden["_recorded_on_this_cpu_kind"] = conftest._recorded_on_this_cpu_kind(
        golden, "/x/goldens/name/legacy.json")
    return golden


def test_this_cpu_kinds_recording_is_held_bit_for_bit():
    kind = golden_lib.cpu_kind()
    golden = _golden_of(kind["model"], "avx512f" in kind["flags"])
    assert golden["_recorded_on_this_cpu_kind"]
    one_ulp = np.nextafter(np.float32(0.5), np.float32(1))
    with pytest.raises(AssertionError):
        conftest.assert_legacy_equal([one_ulp], [0.5], golden)
    conftest.assert_legacy_equal([0.5], [0.5], golden)


def test_another_cpu_kinds_recording_is_held_within_its_rounding():
    golden = _golden_of("Some Other CPU", True)
    assert not golden["_recorded_on_this_cpu_kind"]
    conftest.assert_legacy_equal([0.5000001], [0.5], golden)
    with pytest.raises(AssertionError):
        conftest.assert_legacy_equal([0.5001], [0.5], golden)


def test_a_primary_naming_no_cpu_and_a_variant_are_held_bit_for_bit():
    assert conftest._recorded_on_this_cpu_kind({"versions": {}}, "/x/legacy.json")
    variant = os.path.join("/x", golden_lib.VARIANTS_DIR, "label", "legacy.json")
    assert conftest._recorded_on_this_cpu_kind(_golden_of("Some Other CPU", True), variant)


def test_a_cpu_variant_is_chosen_on_its_cpu_kind():
    label = golden_lib.cpu_kind()["label"]
    path = conftest.legacy_golden_path("estimator_plain")
    variant_dir = os.path.join(os.path.dirname(conftest.__file__), "goldens", "estimator_plain",
                               golden_lib.VARIANTS_DIR, label)
    expected = (os.path.join(variant_dir, "legacy.json") if os.path.isdir(variant_dir)
                else os.path.join(os.path.dirname(variant_dir), os.pardir, "legacy.json"))
    assert os.path.normpath(path) == os.path.normpath(expected)
