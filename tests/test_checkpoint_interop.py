"""Checkpoint interop with the real legacy stack, both directions.

Legacy -> shim (default run): tests/goldens/tiny_cnn/legacy_model_dir/ is a model_dir written
by TF 2.15.1's TPUEstimator at global step 30 (Momentum slots included). The shim resumes it
and trains 10 more steps; the losses and final weights must equal, bit for bit, the legacy
run continued from the same model_dir (recorded in the golden). Eigen's conv kernels round
per CPU kind, so each recording is tried, primary first, then the per-CPU variants under
tests/goldens/tiny_cnn/cpu/<label>/ (`parity.resume_golden`): one of them must match exactly.

Shim -> legacy (`-m legacy`, needs .venv-legacy): a checkpoint written by the shim is restored
by the legacy stack, whose evaluate() and predict() must give the shim's results. The same
run is recorded as tests/goldens/<name>/shim_to_legacy.json by dev/record_goldens.sh; the
default run checks that recorded result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

from tpu_estimator_compat import parity

ROOT = Path(__file__).resolve().parent.parent
GOLDENS = ROOT / "tests" / "goldens"
INTEROP_MODEL = GOLDENS / "tiny_cnn"
LEGACY_PYTHON = ROOT / ".venv-legacy" / "bin" / "python"
S2L_MODELS = sorted(d.name for d in GOLDENS.iterdir() if (d / parity.INTEROP_JSON).exists())


def _parity(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ, **parity.REPEATABLE_ENV, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, "-m", "tpu_estimator_compat.parity", *args],
                            cwd=cwd, env=env, capture_output=True, text=True)
    print(result.stdout)
    return result


@pytest.mark.parametrize("label,golden_dir", parity.golden_candidates(str(INTEROP_MODEL)))
def test_committed_model_dir_is_a_legacy_checkpoint(label, golden_dir):
    model_dir = Path(golden_dir) / parity.LEGACY_MODEL_DIR
    latest = tf.train.latest_checkpoint(str(model_dir))
    assert latest is not None and latest.endswith("model.ckpt-30")
    reader = tf.train.load_checkpoint(latest)
    names = reader.get_variable_to_shape_map()
    assert reader.get_tensor("global_step") == 30
    assert "dense/kernel/Momentum" in names
    size = sum(f.stat().st_size for f in model_dir.iterdir())
    assert size < 100_000, size


@pytest.mark.slow
def test_legacy_model_dir_resumes_on_shim_bit_exact(tmp_path):
    result = _parity("resume", f"--golden_dir={INTEROP_MODEL}", f"--work_dir={tmp_path}",
                     f"--out={tmp_path / 'out'}")
    assert result.returncode == 0, result.stdout + result.stderr[-4000:]
    replay = parity.Record.load(str(tmp_path / "out"))
    # The recording the resumed run reproduced: the primary or this CPU kind's variant.
    golden_dir = dict(parity.golden_candidates(str(INTEROP_MODEL)))[replay.data["golden"]]
    _, golden = parity.load_golden(golden_dir)
    assert replay.data["resume/checkpoint_steps"] == golden.data["resume/checkpoint_steps"]
    assert len(replay.data["resume/losses"]) == 10
    assert replay.data["resume/losses"] == golden.data["resume/losses"]


@pytest.mark.parametrize("model", S2L_MODELS)
def test_recorded_shim_to_legacy_result(model):
    """The recorded run: legacy evaluate() of the shim's checkpoint equals the shim's own."""
    with open(GOLDENS / model / parity.INTEROP_JSON) as f:
        recorded = json.load(f)
    assert recorded["ok"], recorded["report"]
    assert recorded["legacy_versions"].get(
        "tensorflow-cpu", recorded["legacy_versions"].get("tensorflow")).startswith("2.15.")
    assert recorded["legacy_eval_of_shim_checkpoint"] == recorded["shim_eval"]
    # The shim checkpoint that legacy restored is the one 1-replica parity reproduces
    # (batch-norm moving statistics aside: a known ~1 ulp gap, see test_parity.py).
    recipe, golden = parity.load_golden(str(GOLDENS / model))
    expected = {name: entry["sha256"] for name, entry in golden.data["checkpoint"].items()}
    assert sorted(recorded["shim_checkpoint_sha256"]) == sorted(expected)
    if recipe.single_replica_inexact:
        return  # Not bit-exact even on one replica; see the recipe's reason.
    differing = [n for n in expected if recorded["shim_checkpoint_sha256"][n] != expected[n]]
    assert all(n.endswith(("/moving_mean", "/moving_variance")) for n in differing), differing


@pytest.mark.legacy
@pytest.mark.parametrize("model", sorted(d.name for d in GOLDENS.iterdir()
                                         if (d / parity.RECIPE_JSON).exists()))
def test_shim_checkpoint_restores_on_legacy(model, tmp_path):
    if not LEGACY_PYTHON.exists():
        pytest.skip("needs .venv-legacy: bash dev/build_legacy_venv.sh")
    result = _parity("shim-to-legacy", f"--golden_dir={GOLDENS / model}",
                     f"--legacy_python={LEGACY_PYTHON}", f"--work_dir={tmp_path}")
    assert result.returncode == 0, result.stdout + result.stderr[-4000:]
    recorded_path = GOLDENS / model / parity.INTEROP_JSON
    if recorded_path.exists():
        recorded = json.loads(recorded_path.read_text())
        assert "PASS" in result.stdout
        assert str(recorded["legacy_eval_of_shim_checkpoint"]["loss"]["value"]) in result.stdout
