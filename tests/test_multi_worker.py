"""Multi-worker training on tf.distribute's own engine, with real worker processes on localhost.

Each test starts worker processes of `tests/scripts/multi_worker/worker.py` (an unchanged r1
model_fn under TPUEstimator) with a `TF_CONFIG` naming two workers on free 127.0.0.1 ports.
Each worker splits its CPU into 2 logical devices, so the job has 4 replicas, as a 2-host
TPU slice with 2 cores per host; the frozen-task test runs the legacy script of
`tests/test_preemption.py` through the launcher instead. Every child process is killed in
`finally`, every wait has a timeout. The killed-worker test and the frozen-chief variant are
`slow` (opt-in).
"""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import cluster_job
from tpu_estimator_compat.checkpoint import checkpoints as checkpoints_lib

WORKER = pathlib.Path(__file__).parent / "scripts" / "multi_worker" / "worker.py"
JOB_TIMEOUT = 240  # Seconds for one job to finish; it takes ~20 s on an idle 2-core machine.
DEATH_TIMEOUT = 60  # Seconds a surviving worker may take to notice a dead peer (~3 s seen).
REPLICA_TOLERANCE = dict(rtol=1e-4, atol=1e-5)  # As test_one_vs_eight_replicas_same_weights.

SPEC = dict(batch=32, ipl=2, max_steps=12, save_steps=4, lr=0.1, train_examples=512,
            eval_from=1500, evaluate=True)
# The r1 model_fn's variables under their TF1 names, and the values the job starts from.
_BN = "batch_normalization/"


def _tf_config(ports, index):
    return {"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
            "task": {"type": "worker", "index": index}}


class Job(cluster_job.Job):
    """`cluster_job.Job` running the worker script on a JSON spec, one report file each."""

    def start(self, name, spec, tf_config=None, trace=False):
        spec_path = self.root / f"{name}.spec.json"
        spec_path.write_text(json.dumps(spec))
        command = [sys.executable, str(WORKER), str(spec_path), str(self.report_path(name))]
        if trace:
            # Every file this process creates, writes, renames or deletes.
            command = ["strace", "-f", "-qq", "-o", str(self.root / f"{name}.strace"), "-e",
                       "trace=openat,creat,rename,renameat,renameat2,mkdir,mkdirat,unlink,"
                       "unlinkat"] + command
        return super().start(name, command, tf_config)

    def report_path(self, name):
        return self.root / f"{name}.report.json"

    def report(self, name):
        return json.loads(self.report_path(name).read_text())

    def wait(self, *names, timeout=JOB_TIMEOUT, codes=(0,)):
        return super().wait(*names, timeout=timeout, codes=codes)


@pytest.fixture
def job(tmp_path):
    job = Job(tmp_path)
    try:
        yield job
    finally:
        job.close()


def _initial_values(seed=3):
    rng = np.random.default_rng(seed)
    return {
        "w": rng.normal(0, 0.05, [64, 10]).astype(np.float32),
        "b": rng.normal(0, 0.05, [10]).astype(np.float32),
        _BN + "gamma": rng.uniform(0.5, 1.5, [64]).astype(np.float32),
        _BN + "beta": rng.normal(0, 0.1, [64]).astype(np.float32),
        _BN + "moving_mean": rng.uniform(0, 0.5, [64]).astype(np.float32),
        _BN + "moving_variance": rng.uniform(0.5, 1.5, [64]).astype(np.float32),
        "global_step": np.int64(0),
    }


def _write_checkpoint(model_dir, values):
    """model_dir/model.ckpt-0, written by the library's own saver from plain variables."""
    variables = {name: tf.Variable(value) for name, value in values.items()}
    saver = checkpoints_lib.V1Saver(variables)
    checkpoints_lib.CheckpointManager(str(model_dir), saver).save(0)


def _values(path):
    reader = tf.train.load_checkpoint(str(path))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _writes_under(trace_path, directory):
    """strace lines where the process created, wrote, renamed or deleted under `directory`."""
    found = []
    for line in pathlib.Path(trace_path).read_text().splitlines():
        if str(directory) not in line:
            continue
        call = line.split(None, 1)[1] if " " in line else line
        writes = any(f in call for f in ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC"))
        if writes or not call.startswith("openat("):
            found.append(line)
    return found


@pytest.mark.slow
def test_two_workers_train_like_one_process_of_four_replicas(job, tmp_path):
    """2 workers x 2 CPUs == 1 process x 4 CPUs: same weights, same eval, chief-only files."""
    initial = _initial_values()
    multi_dir, single_dir = tmp_path / "multi", tmp_path / "single"
    for model_dir in (multi_dir, single_dir):
        _write_checkpoint(model_dir, initial)
    ports = cluster_job.free_ports(2)
    trace = shutil.which("strace") is not None
    for index in range(2):
        job.start(f"worker{index}", dict(SPEC, cpus=2, model_dir=str(multi_dir)),
                  _tf_config(ports, index), trace=trace and index == 1)
    job.start("single", dict(SPEC, cpus=4, model_dir=str(single_dir)))
    job.wait("worker0", "worker1", "single")
    chief, other, single = job.report("worker0"), job.report("worker1"), job.report("single")

    # The strategy choice is logged, naming the cluster and this task.
    for name, task in (("worker0", "task worker/0 of 2 workers (chief: worker/0), the chief"),
                       ("worker1", "task worker/1 of 2 workers (chief: worker/0), not the "
                                   "chief")):
        assert ("TPUEstimator runs on MultiWorkerMirroredStrategy with 4 replica(s): cluster "
                f"of 2 workers; this process is {task}, with 2 local replica(s).") in \
            job.log(name)
    assert "runs on MirroredStrategy with 4 replica(s)" in job.log("single")

    # Each host's input_fn ran once, with its own input pipeline and its share of the data.
    calls = [chief["input_calls"], other["input_calls"]]
    assert [len(c) for c in calls] == [1, 1]
    for host, (call,) in enumerate(calls):
        assert call["input_pipeline_id"] == call["current_host"] == host
        assert call["num_input_pipelines"] == call["num_hosts"] == 2
        assert (call["num_replicas"], call["replicas_per_host"]) == (4, 2)
        assert call["batch_size"] == 16  # PER_HOST_V1: global 32 / 2 hosts.
        assert call["deployment"] == [f"/job:worker/replica:0/task:{host}/device:CPU:0",
                                      host, 2, 2]
    shares = [set(c[0]["share"]) for c in calls]
    assert not shares[0] & shares[1]
    assert shares[0] | shares[1] == set(range(SPEC["train_examples"]))
    assert single["input_calls"][0]["batch_size"] == 32

    # Same weights as one process of 4 replicas from the same checkpoint, and they moved.
    multi = _values(multi_dir / "model.ckpt-12")
    reference = _values(single_dir / "model.ckpt-12")
    assert sorted(multi) == sorted(reference) == sorted(initial)
    assert multi["global_step"] == reference["global_step"] == 12
    for name in initial:
        np.testing.assert_allclose(multi[name], reference[name], err_msg=name,
                                   **REPLICA_TOLERANCE)
    assert np.abs(multi["w"] - initial["w"]).max() > 1e-3
    assert np.abs(multi[_BN + "moving_mean"] - initial[_BN + "moving_mean"]).max() > 1e-3

    # Every worker restored the same checkpoint; only the chief wrote checkpoints and events.
    for name in ("worker0", "worker1"):
        assert f"Restored 7 variables from {multi_dir}/model.ckpt-0" in job.log(name)
    assert chief["saves"] == single["saves"] == [0, 4, 8, 12]
    assert other["saves"] == []
    events = [p.name for p in multi_dir.rglob("events.out.tfevents.*")]
    assert len(events) == 2 and all(f".{chief['pid']}." in e for e in events), events
    if trace:
        assert _writes_under(job.root / "worker1.strace", multi_dir) == []

    # Evaluation: metrics once, on the chief, over every worker's examples, each once.
    held_out = 1797 - SPEC["eval_from"]
    assert chief["eval"]["examples"] == single["eval"]["examples"] == held_out
    assert chief["eval"]["accuracy"] == pytest.approx(single["eval"]["accuracy"], abs=1e-6)
    assert chief["eval"]["loss"] == pytest.approx(single["eval"]["loss"], rel=1e-4)
    assert sorted(other["eval"]) == ["global_step", "loss"]
    assert other["eval"]["loss"] == chief["eval"]["loss"]
    # Prediction: every worker gets every example once, in input order.
    assert chief["predictions"] == other["predictions"] == single["predictions"]
    assert len(chief["predictions"]) == held_out


def _latest_step(model_dir):
    state = tf.train.get_checkpoint_state(str(model_dir))
    return None if state is None else checkpoints_lib.checkpoint_step(
        state.model_checkpoint_path)


def _trained_past_a_checkpoint(job, model_dir):
    latest = _latest_step(model_dir)
    try:
        trained = job.report("first0")["loop_steps"]
    except (FileNotFoundError, json.JSONDecodeError):
        return False
    return latest is not None and latest >= 6 and trained and max(trained) > latest


# Opt-in (`-m slow`, ~45 s of 4 processes): the default run keeps its parts elsewhere, a job
# resumed exactly after a stop (test_preemption's SIGTERM variant), a failed peer found in
# time with a clear error (the frozen-worker test below), SIGKILL at random moments
# leaving a resumable model_dir (test_safety).
@pytest.mark.slow
def test_killed_worker_job_restarts_from_last_checkpoint(job, tmp_path):
    """SIGKILL one worker mid-run: the chief fails fast; a restarted job resumes and finishes."""
    model_dir = tmp_path / "model"
    spec = dict(SPEC, cpus=2, model_dir=str(model_dir), max_steps=40, save_steps=6,
                evaluate=False, keep=100, sleep_per_loop=0.3)
    ports = cluster_job.free_ports(2)
    for index in range(2):
        job.start(f"first{index}", spec, _tf_config(ports, index))
    # Kill worker 1 once the job has trained past a checkpoint (saves every 6 steps, loops
    # of 2): those steps are lost and must be trained again, and only those.
    deadline = time.monotonic() + JOB_TIMEOUT
    while not _trained_past_a_checkpoint(job, model_dir):
        assert time.monotonic() < deadline, job.log("first0")[-3000:]
        assert job.procs["first0"].poll() is None, job.log("first0")[-3000:]
        time.sleep(0.05)
    job.procs["first1"].send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    try:
        code = job.procs["first0"].wait(timeout=DEATH_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the chief did not notice its dead peer in {DEATH_TIMEOUT} s")
    noticed = time.monotonic() - killed_at
    assert code != 0
    assert "UnavailableError" in job.log("first0"), job.log("first0")[-3000:]
    last = _latest_step(model_dir)
    trained = job.report("first0")["loop_steps"]
    assert 6 <= last < max(trained) < 40
    print(f"chief exited {noticed:.1f} s after its peer was killed; last checkpoint {last}, "
          f"last step trained {max(trained)}")

    # Restart the whole job (new ports, no slowdown): it resumes from the last checkpoint.
    spec["sleep_per_loop"] = 0.0
    ports = cluster_job.free_ports(2)
    for index in range(2):
        job.start(f"again{index}", spec, _tf_config(ports, index))
    job.wait("again0", "again1")
    chief, other = job.report("again0"), job.report("again1")
    for name in ("again0", "again1"):
        assert f"Restored 7 variables from {model_dir}/model.ckpt-{last}" in job.log(name)
    expected_loops = list(range(last + 2, 41, 2))  # Only steps after the checkpoint re-run.
    assert chief["loop_steps"] == other["loop_steps"] == expected_loops
    saves = [last] + list(range(last + 6, 41, 6))
    assert chief["saves"] == saves + ([40] if saves[-1] != 40 else [])
    assert other["saves"] == []
    assert _values(model_dir / "model.ckpt-40")["global_step"] == 40
    assert _latest_step(model_dir) == 40


PEER_TIMEOUT = 5  # Seconds: the launcher's --peer_timeout_secs in the test below.


@pytest.mark.slow
@pytest.mark.parametrize("frozen", ["worker1", pytest.param("chief", marks=pytest.mark.slow)])
def test_frozen_task_stops_every_other_task_with_a_clear_error_in_time(tmp_path, frozen):
    """SIGSTOP one task of chief + 2 workers: the others fail, naming it, within the timeout.

    The tasks run the unchanged legacy script through the launcher, only TF_CONFIG differing.
    A frozen worker is found by the chief's coordination service; a frozen chief (which runs
    that service) by the workers' unanswered heartbeats.
    """
    job = cluster_job.Job(tmp_path)
    spec = cluster_job.cluster(chief=1, worker=2)
    flags = [f"--model_dir={tmp_path / 'model'}", "--mode=train", "--train_steps=100000",
             "--iterations=2", "--save_steps=10", "--batch_size=30", "--sleep_per_loop=0.1"]
    tasks = {"chief": ("chief", 0), "worker0": ("worker", 0), "worker1": ("worker", 1)}
    try:
        for name, (task_type, index) in tasks.items():
            command = cluster_job.LAUNCHER + [f"--peer_timeout_secs={PEER_TIMEOUT}",
                                              str(cluster_job.SCRIPTS / "legacy_cluster.py")]
            job.start(name, command + flags, cluster_job.tf_config(spec, task_type, index))
        deadline = time.monotonic() + JOB_TIMEOUT
        while ", step = 6" not in job.log("chief"):  # Legacy's TPU progress line.
            assert time.monotonic() < deadline, job.log("chief")[-3000:]
            assert job.procs["chief"].poll() is None, job.log("chief")[-3000:]
            time.sleep(0.05)
        job.procs[frozen].send_signal(signal.SIGSTOP)
        frozen_at = time.monotonic()
        others = [name for name in tasks if name != frozen]
        gone = {}
        for name in others:
            job.wait(name, timeout=PEER_TIMEOUT + 25, codes=(1,))
            gone[name] = time.monotonic() - frozen_at
        lost = "/".join(str(part) for part in tasks[frozen])
        for name in others:
            task = "/".join(str(part) for part in tasks[name])
            assert (f"PeerLostError: Training stopped on task {task}: the cluster lost "
                    f"{lost}. A task that dies, freezes (e.g. SIGSTOP) or is unreachable for "
                    f"longer than the peer timeout ({PEER_TIMEOUT} s, from") in job.log(name)
            assert "Restart the whole job: it resumes from" in job.log(name)
        print(f"peer timeout {PEER_TIMEOUT} s, {frozen} frozen: the others exited "
              + ", ".join(f"{n} after {s:.1f} s" for n, s in gone.items()))
    finally:
        job.close()
