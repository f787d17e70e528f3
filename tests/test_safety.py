"""Faults and data safety: NaN loss, model_dir lock, SIGTERM, SIGKILL, unwritable model_dir."""

import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import models
from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator, TPUEstimatorSpec
from tpu_estimator_compat.checkpoint import safety
from tpu_estimator_compat.loop.nan_loss import NanLossError

v1 = tf.compat.v1
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts", "train_forever.py")


def nan_input_fn(params):
    x, y = models.digits(64 * 8, flat=True)
    x = x.copy()
    x[64 * 5:64 * 6] = np.nan  # Step 6's batch.
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(params["batch_size"],
                                                           drop_remainder=True)


def make(model_dir, strategy=None, **kwargs):
    config = RunConfig(model_dir=str(model_dir), train_distribute=strategy,
                       save_checkpoints_steps=1, tpu_config=TPUConfig(iterations_per_loop=2),
                       **kwargs)
    return TPUEstimator(model_fn=models.linear_model_fn, config=config, train_batch_size=64)


def test_nan_loss_stops_by_default_before_saving_it(tmp_path, strategy):
    est = make(tmp_path, strategy)
    with pytest.raises(NanLossError, match=r"global step 6 is nan") as caught:
        est.train(nan_input_fn, steps=8)
    assert caught.value.step == 6
    latest = tf.train.latest_checkpoint(str(tmp_path))
    assert latest.endswith("model.ckpt-4")  # The loop holding step 6 was never saved.
    assert np.isfinite(tf.train.load_checkpoint(latest).get_tensor("w")).all()


def test_stop_on_nan_loss_false_trains_on(tmp_path):
    est = make(tmp_path, stop_on_nan_loss=False)
    est.train(nan_input_fn, steps=8)
    assert tf.train.load_checkpoint(est.latest_checkpoint()).get_tensor("global_step") == 8


def test_second_trainer_on_same_model_dir_is_refused(tmp_path):
    with safety.ModelDirLock(str(tmp_path)):
        with pytest.raises(safety.ModelDirInUseError, match=r"is being trained by another"):
            make(tmp_path).train(models.digits_input_fn(64, flat=True), steps=1)
    make(tmp_path).train(models.digits_input_fn(64, flat=True), steps=1)  # Released.


def test_lock_is_released_when_holder_is_killed(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; sys.path.insert(0, %r)\n"
        "from tpu_estimator_compat.checkpoint import safety\n"
        "with safety.ModelDirLock(%r):\n"
        "    print('LOCKED', flush=True); time.sleep(60)\n") % (
            os.path.dirname(os.path.dirname(SCRIPT)), str(tmp_path))],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "LOCKED"
        with pytest.raises(safety.ModelDirInUseError):
            with safety.ModelDirLock(str(tmp_path)):
                pass
        holder.kill()
        holder.wait(timeout=30)
        with safety.ModelDirLock(str(tmp_path)):
            pass
    finally:
        holder.kill()


def test_unwritable_model_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(PermissionError, match=r"`model_dir` .* is not writable"):
        make(blocker / "model").train(models.digits_input_fn(64, flat=True), steps=1)


def _default_signal_handlers():
    """Runs in the child before exec: the signals these tests send act as in a terminal.

    A suite started in the background or under nohup has SIGINT ignored, and children
    inherit that (Python then installs no KeyboardInterrupt handler), so the child would
    never stop.
    """
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


def _start(model_dir, max_steps, save_steps=1, stderr=subprocess.DEVNULL):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TPU_ESTIMATOR_COMPAT_PROGRESS="quiet")
    proc = subprocess.Popen(
        [sys.executable, SCRIPT, str(model_dir), str(max_steps), str(save_steps)],
        stdout=subprocess.PIPE, stderr=stderr, text=True, env=env,
        preexec_fn=_default_signal_handlers)
    assert proc.stdout.readline().strip() == "READY"
    return proc


def _step(model_dir):
    path = tf.train.latest_checkpoint(str(model_dir))
    return None if path is None else int(tf.train.load_checkpoint(path).get_tensor("global_step"))


@pytest.mark.slow
def test_sigterm_checkpoints_and_exits(tmp_path):
    proc = _start(tmp_path, 100000)
    try:
        deadline = time.time() + 60
        while (_step(tmp_path) or 0) < 3 and time.time() < deadline:
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        proc.kill()
    step = _step(tmp_path)
    assert 3 <= step < 100000
    # The final checkpoint is the state at its step: resuming continues from there.
    est = make(tmp_path, keep_checkpoint_max=3)
    est.train(models.digits_input_fn(64, flat=True), steps=1)
    assert _step(tmp_path) == step + 1


@pytest.mark.slow
def test_ctrl_c_checkpoints_the_steps_done_and_reraises(tmp_path):
    """SIGINT (Ctrl-C) between saves: the step reached is checkpointed, with its weights.

    Checkpoints are due only every 10**6 steps, so the only one after step 0 is the one the
    interrupt writes; its weights must equal a straight run of the same number of steps.
    """
    interrupted = tmp_path / "interrupted"
    proc = _start(interrupted, 10**7, save_steps=10**6, stderr=subprocess.PIPE)
    try:
        time.sleep(6)  # Past tracing and some hundreds of steps.
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode != 0 and "KeyboardInterrupt" in stderr, stderr[-3000:]
    assert "Interrupted: writing a checkpoint at global step" in stderr, stderr[-3000:]
    step = _step(interrupted)
    assert 0 < step < 10**6
    straight = tmp_path / "straight"
    _start(straight, step, save_steps=10**6).wait(timeout=300)
    assert _step(straight) == step
    a = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(interrupted)))
    b = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(straight)))
    for name in ("w", "b"):
        np.testing.assert_array_equal(a.get_tensor(name), b.get_tensor(name))


@pytest.mark.slow
def test_sigkill_at_random_points_leaves_a_resumable_model_dir(tmp_path):
    """Killed with SIGKILL 3 times at random moments; every restart resumes; final weights
    equal an uninterrupted run's exactly (same batch each step, one replica, oneDNN off)."""
    target = 40
    rng = random.Random(0)
    killed_dir = tmp_path / "killed"
    for _ in range(3):
        proc = _start(killed_dir, target)
        time.sleep(rng.uniform(0.5, 4.0))
        proc.kill()
        proc.wait(timeout=30)
        before = _step(killed_dir)
        assert before is None or before <= target
    _start(killed_dir, target).wait(timeout=300)
    straight = tmp_path / "straight"
    _start(straight, target).wait(timeout=300)
    assert _step(killed_dir) == _step(straight) == target
    a = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(killed_dir)))
    b = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(straight)))
    for name in ("w", "b"):
        np.testing.assert_array_equal(a.get_tensor(name), b.get_tensor(name))
