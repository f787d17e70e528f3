"""Soak (opt-in, `-m slow`): repeated train/evaluate/predict cycles on one model_dir.

Checks, over cycles: resident memory does not grow (least-squares slope of RSS after warm-up),
model_fn is not traced again after the first cycle (no retrace per call), and model_dir's
file count stays bounded by keep_checkpoint_max. Bounded by SOAK_SECONDS (default 180, about
250 cycles on 2 cores; 600 for a longer look). CI runs the default strategy; the 8-replica
case is `full` (pytest.ini: `-m "slow and not legacy"` runs it).
Figures are printed, and written to bench/results/SOAK.json when SOAK_RECORD=1.

    SOAK_SECONDS=600 SOAK_RECORD=1 .venv/bin/python -m pytest tests/test_soak.py -m slow -s
"""

import json
import os
import pathlib
import time

import numpy as np
import pytest
import tensorflow as tf

import models
from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator

pytestmark = pytest.mark.slow


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_soak(tmp_path, strategy):
    seconds = float(os.environ.get("SOAK_SECONDS", "180"))
    traces = []

    def model_fn(features, labels, mode, params):
        traces.append(mode)
        return models.linear_full_model_fn(features, labels, mode, params)

    config = RunConfig(model_dir=str(tmp_path), train_distribute=strategy,
                       eval_distribute=strategy, save_checkpoints_steps=5,
                       keep_checkpoint_max=3, tpu_config=TPUConfig(iterations_per_loop=5))
    est = TPUEstimator(model_fn=model_fn, config=config, train_batch_size=64,
                       eval_batch_size=64, predict_batch_size=64)
    x, _ = models.digits(100, flat=True)

    def predict_input_fn(params):
        return tf.data.Dataset.from_tensor_slices(x).batch(params["batch_size"])

    def eval_input_fn(params):
        return tf.data.Dataset.from_tensor_slices(models.digits(200, flat=True)).batch(
            params["batch_size"])

    rss, files, traces_after = [], [], []
    start = time.time()
    cycles = 0
    while time.time() - start < seconds or cycles < 4:
        est.train(models.digits_input_fn(512, flat=True), steps=20)
        est.evaluate(eval_input_fn)
        assert len(list(est.predict(predict_input_fn))) == 100
        cycles += 1
        rss.append(rss_mb())
        files.append(len(os.listdir(tmp_path)))
        traces_after.append(len(traces))
    warm = rss[2:]
    slope = float(np.polyfit(np.arange(len(warm)), warm, 1)[0]) if len(warm) > 1 else 0.0
    figures = {"strategy": type(strategy).__name__, "cycles": cycles,
               "seconds": round(time.time() - start, 1),
               "rss_mb_first": round(rss[0], 1), "rss_mb_last": round(rss[-1], 1),
               "rss_slope_mb_per_cycle_after_warmup": round(slope, 3),
               "model_fn_traces_after_cycle_1": traces_after[0],
               "model_fn_traces_at_end": traces_after[-1],
               "max_files_in_model_dir": max(files)}
    print(json.dumps(figures))
    if os.environ.get("SOAK_RECORD") == "1":
        out = pathlib.Path(__file__).resolve().parent.parent / "bench" / "results" / "SOAK.json"
        recorded = json.loads(out.read_text()) if out.exists() else {}
        recorded[figures["strategy"]] = figures
        out.write_text(json.dumps(recorded, indent=2, sort_keys=True) + "\n")
    assert traces_after[-1] == traces_after[0], "model_fn was traced again after cycle 1"
    # checkpoint + lock + <= keep_checkpoint_max x (index, data, meta: legacy's MetaGraph per
    # checkpoint, checkpoint/meta.py) + events + eval dir.
    assert max(files) <= 1 + 1 + 3 * 3 + 2 + 1 + 1
    assert slope < 2.0, f"RSS grows {slope:.2f} MB per cycle"
