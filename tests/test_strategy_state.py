"""session/strategy_state.py: the process settings a run applies before its first compiled call."""

import json
import os
import subprocess
import sys

import pytest

from tpu_estimator_compat.session import strategy_state as runtime

HERE = os.path.dirname(os.path.abspath(__file__))

_CHILD = """
import hashlib, json, os, sys
sys.path.insert(0, {tests!r})
import models
import tensorflow as tf
import tpu_estimator_compat as tec
from tpu_estimator_compat._tf import private as _tf_private

config = tec.RunConfig(model_dir={model_dir!r}, tpu_config=tec.TPUConfig(iterations_per_loop=2))
est = tec.TPUEstimator(model_fn=models.linear_model_fn, config=config, use_tpu=False,
                       train_batch_size=64, eval_batch_size=64)
est.train(models.digits_input_fn(64, flat=True), max_steps=4)
metrics = est.evaluate(models.digits_input_fn(64, flat=True), steps=2)
reader = tf.train.load_checkpoint(est.latest_checkpoint())
print("RESULT " + json.dumps({{
    "skipped": bool(_tf_private.tfg_optimizer_disabled()),
    "weights": {{n: hashlib.sha256(reader.get_tensor(n).tobytes()).hexdigest()
                for n in ("w", "b")}},
    "loss": float(metrics["loss"])}}))
"""


def _train_in_child(tmp_path, setting):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE="meta_optimizer=1")
    env[runtime.TFG_OPTIMIZER_ENV] = setting
    model_dir = tmp_path / setting
    done = subprocess.run(
        [sys.executable, "-c", _CHILD.format(tests=HERE, model_dir=str(model_dir))],
        capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.split("RESULT ", 1)[1])
    return result, done.stderr.count("] tfg_optimizer{")


@pytest.mark.slow
def test_tfg_optimizer_off_skips_the_pipeline_and_computes_the_same(tmp_path):
    """Grappler says in its own log which passes ran on each graph (meta_optimizer=1)."""
    on, runs_on = _train_in_child(tmp_path, "on")
    off, runs_off = _train_in_child(tmp_path, "off")
    assert (on["skipped"], off["skipped"]) == (False, True)
    # tf.data's own graph rewrites keep TensorFlow's settings; the estimator's functions
    # (the train loop, the evaluation loop) no longer go through the pipeline.
    assert 0 < runs_off < runs_on, (runs_off, runs_on)
    assert off["weights"] == on["weights"]  # Bit for bit: the pipeline rewrote nothing.
    assert off["loss"] == on["loss"]


def test_tfg_optimizer_setting_is_checked(monkeypatch):
    monkeypatch.setenv(runtime.TFG_OPTIMIZER_ENV, "disabled")
    with pytest.raises(ValueError, match=r"^`TPU_ESTIMATOR_COMPAT_TFG_OPTIMIZER` is "
                                         r"'disabled'\. Set it to 'off'"):
        runtime.apply_process_settings()
