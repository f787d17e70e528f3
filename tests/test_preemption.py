"""Preemption on MultiWorkerMirroredStrategy: real chief + worker processes on 127.0.0.1.

The job is `tests/scripts/multi_worker/legacy_cluster.py`, an unchanged TF1 script, started
per task through the launcher with only TF_CONFIG differing (2 logical CPUs each: 4
replicas). It is stopped by SIGTERM to the worker (a preemption) or, opt-in (`-m slow`), by
Ctrl-C (SIGINT) to the worker (the case that used to hang the chief's final save), then
restarted to the end; its final weights must equal an uninterrupted 1-process 4-replica
run's. The
script's input_fn skips the batches trained before the checkpoint it resumes from, so the
restarted job sees the same batches as the uninterrupted one.

`AgreedStop` itself is also tested in-process on one client.
"""

import re
import time

import numpy as np
import pytest
import tensorflow as tf

import cluster_job
from conftest import make_strategy
from tpu_estimator_compat.checkpoint import checkpoints as checkpoints_lib
from tpu_estimator_compat.cluster import preemption
from tpu_estimator_compat.checkpoint import safety

STOP_TIMEOUT = 60  # Every process must be gone this long after the signal.
JOB_TIMEOUT = 240
REPLICA_TOLERANCE = dict(rtol=1e-4, atol=1e-5)  # As tests/test_multi_worker.py.
FLAGS = ["--mode=train", "--train_steps=60", "--iterations=2", "--save_steps=10",
         "--batch_size=32"]


def _initial_values(seed=5):
    rng = np.random.default_rng(seed)
    return {"dense/kernel": rng.normal(0, 0.2, [64, 32]).astype(np.float32),
            "dense/bias": np.zeros([32], np.float32),
            "dense_1/kernel": rng.normal(0, 0.2, [32, 10]).astype(np.float32),
            "dense_1/bias": np.zeros([10], np.float32),
            "global_step": np.int64(0)}


def _write_checkpoint(model_dir, values):
    variables = {name: tf.Variable(value) for name, value in values.items()}
    checkpoints_lib.CheckpointManager(str(model_dir),
                                      checkpoints_lib.V1Saver(variables)).save(0)


def _values(path):
    reader = tf.train.load_checkpoint(str(path))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _latest_step(model_dir):
    path = tf.train.latest_checkpoint(str(model_dir))
    return None if path is None else checkpoints_lib.checkpoint_step(path)


def _trained(job, name):
    # Legacy's TPU progress line, `loss = ..., step = N` after every loop here.
    return max([int(s) for s in re.findall(r", step = (\d+)", job.log(name))] or [0])


def _start_pair(job, phase, spec, model_dir, extra=()):
    flags = FLAGS + [f"--model_dir={model_dir}"] + list(extra)
    for task in ("chief", "worker"):
        job.launch(f"{phase}_{task}", "legacy_cluster.py", flags,
                   cluster_job.tf_config(spec, task), cpus=2)


def _signal_when_trained(job, phase, past, signum):
    deadline = time.monotonic() + JOB_TIMEOUT
    while _trained(job, f"{phase}_chief") < past:
        assert time.monotonic() < deadline, job.log(f"{phase}_chief")[-3000:]
        for task in ("chief", "worker"):
            assert job.procs[f"{phase}_{task}"].poll() is None, job.log(f"{phase}_{task}")[-3000:]
        time.sleep(0.05)
    job.procs[f"{phase}_worker"].send_signal(signum)
    return time.monotonic()


def _stopped_step(job, name, signal_name):
    found = re.findall(r"Training stopped at global step (\d+) because worker/0 received "
                       + signal_name + r"; the chief saved (\S+)\. Every task of the job exits",
                       job.log(name))
    assert found, job.log(name)[-3000:]
    return int(found[-1][0]), found[-1][1]


# (signal, the signalled worker's exit status, the chief's, the name in the messages).
# SIGTERM (a preemption) in the default run; Ctrl-C (the case that used to hang the chief's
# final save) opt-in: each variant is 5 TensorFlow processes, ~70 s on a 2-core machine.
STOPS = [pytest.param(15, 143, 143, "SIGTERM", id="sigterm"),
         pytest.param(2, 130, 143, "SIGINT", id="ctrl_c", marks=pytest.mark.slow)]


@pytest.mark.slow
@pytest.mark.parametrize("signum, worker_code, chief_code, signal_name", STOPS)
def test_a_signal_stops_the_job_at_one_step_and_it_resumes_exactly(
        job, tmp_path, signum, worker_code, chief_code, signal_name):
    initial = _initial_values()
    model_dir, reference_dir = tmp_path / "model", tmp_path / "reference"
    for directory in (model_dir, reference_dir):
        _write_checkpoint(directory, initial)
    job.launch("reference", "legacy_cluster.py",
               FLAGS + [f"--model_dir={reference_dir}"], cpus=4)
    spec = cluster_job.cluster(chief=1, worker=1)
    slow = ["--sleep_per_loop=0.3"]

    # 1. The signal to the worker: both stop after the same loop, the chief saves that step,
    #    and both exit with a message naming the signalled task (SIGTERM: both 143; Ctrl-C
    #    interrupts no task alone: the worker exits 130, the chief 143).
    _start_pair(job, "first", spec, model_dir, slow)
    signalled = _signal_when_trained(job, "first", 10, signum)
    codes = job.wait("first_chief", timeout=STOP_TIMEOUT, codes=(chief_code,))
    codes.update(job.wait("first_worker", timeout=STOP_TIMEOUT, codes=(worker_code,)))
    stopped_in = time.monotonic() - signalled
    stopped_step, saved = _stopped_step(job, "first_chief", signal_name)
    assert _stopped_step(job, "first_worker", signal_name) == (stopped_step, saved)
    assert 10 <= stopped_step < 60 and saved == str(model_dir / f"model.ckpt-{stopped_step}")
    assert _latest_step(model_dir) == stopped_step
    assert _values(saved)["global_step"] == stopped_step
    if signum == 2:
        assert "SIGINT received" in job.log("first_worker")

    # 2. Restart to the end: same final step, same weights as the uninterrupted run.
    spec = cluster_job.cluster(chief=1, worker=1)
    _start_pair(job, "again", spec, model_dir)
    job.wait("again_chief", "again_worker", "reference", timeout=JOB_TIMEOUT)
    for task in ("chief", "worker"):
        assert f"Restored 5 variables from {model_dir}/model.ckpt-{stopped_step}" in job.log(
            f"again_{task}")
    resumed, reference = _values(model_dir / "model.ckpt-60"), _values(reference_dir /
                                                                      "model.ckpt-60")
    assert resumed["global_step"] == reference["global_step"] == 60
    assert sorted(resumed) == sorted(reference) == sorted(initial)
    for name in initial:
        np.testing.assert_allclose(resumed[name], reference[name], err_msg=name,
                                   **REPLICA_TOLERANCE)
    assert np.abs(resumed["dense/kernel"] - initial["dense/kernel"]).max() > 1e-3
    print(f"stopped at step {stopped_step}; every process gone {stopped_in:.1f} s after "
          f"the signal; exit codes {codes}")


class _Listener:
    def __init__(self, stop):
        self.stop = stop

    def after_loop(self, step, result, seconds):
        return self.stop


def test_agreed_stop_on_one_client_is_the_listeners_own():
    strategy = make_strategy("default")
    listeners = [_Listener(False)]
    assert preemption.agreed_listeners(strategy, listeners) is listeners
    assert preemption.outcome_of(listeners) is None
    preemption.exit_if_stopped(None, step=3, checkpoint=None)  # Nothing happens.


def test_exit_if_stopped_names_the_signalled_task_and_the_checkpoint():
    outcome = preemption.StopOutcome(("worker/1",), "SIGTERM", None)
    with pytest.raises(preemption.JobStopped) as stopped:
        preemption.exit_if_stopped(outcome, step=40, checkpoint="/m/model.ckpt-40")
    assert stopped.value.code == 143
    assert str(stopped.value) == (
        "Training stopped at global step 40 because worker/1 received SIGTERM; the chief "
        "saved /m/model.ckpt-40. Every task of the job exits (status 143 here). Restart the "
        "whole job to resume from global step 40.")
    interrupted = preemption.StopOutcome(("worker/1",), "SIGINT", "SIGINT")
    with pytest.raises(preemption.JobStopped) as stopped:
        preemption.exit_if_stopped(interrupted, step=40, checkpoint=None)
    assert stopped.value.code == 130 and "nothing was saved" in str(stopped.value)


def test_stop_signals_catch_ctrl_c_only_on_a_cluster_and_only_once():
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with safety.StopSignals() as alone:
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        with safety.StopSignals(interrupt_too=True) as signals:
            signal.raise_signal(signal.SIGINT)
            assert signals.terminated and signals.signal_name == "SIGINT"
            # A second Ctrl-C interrupts at once.
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert not alone.terminated
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with safety.StopSignals(interrupt_too=True):  # An ignored SIGINT stays ignored.
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
