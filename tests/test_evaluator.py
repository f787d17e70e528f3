"""Tests for tpu_estimator_compat.api.evaluator: legacy's continuous evaluation.

The loop's rules run against a scripted estimator with a fake clock (no sleeping); a real
trainer and a real `checkpoints_iterator` evaluation loop then run side by side as two
processes on one model_dir, as the ResNet script's `--mode=eval` did.
"""

import json
import re

import pytest
import tensorflow as tf

import cluster_job
import tpu_estimator_compat
from tpu_estimator_compat.api import evaluator as evaluator_lib
from tpu_estimator_compat.api.estimator import Estimator
from tpu_estimator_compat.api import train_and_eval


class _Clock:
    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(round(seconds, 3))
        self.now += seconds


class _Trainer:
    """An estimator whose model_dir gains a checkpoint each time the evaluator looks."""

    def __init__(self, clock, checkpoints, seconds_per_eval=2.0, vanished=()):
        self.model_dir = "/m"
        self._clock = clock
        self._checkpoints = list(checkpoints)
        self._seconds = seconds_per_eval
        self._vanished = set(vanished)
        self.calls = []

    def latest_checkpoint(self):
        return self._checkpoints.pop(0) if len(self._checkpoints) > 1 else (
            self._checkpoints[0] if self._checkpoints else None)

    def evaluate(self, input_fn, steps=None, name=None, checkpoint_path=None, hooks=None):
        if checkpoint_path in self._vanished:
            raise tf.errors.NotFoundError(None, None, f"{checkpoint_path}.index not found")
        self.calls.append((checkpoint_path, steps, name, tuple(hooks)))
        self._clock.now += self._seconds
        return {"loss": 1.0, "global_step": int(checkpoint_path.rsplit("-", 1)[1])}


class _Exporter(train_and_eval.Exporter):
    def __init__(self):
        self.exports = []

    @property
    def name(self):
        return "recorder"

    def export(self, estimator, export_path, checkpoint_path, eval_result,
               is_the_final_export):
        self.exports.append((export_path, checkpoint_path, eval_result["global_step"],
                             is_the_final_export))
        return export_path


_HOOK = tf.compat.v1.train.SessionRunHook()


def _spec(**kwargs):
    defaults = dict(steps=7, name="held_out", hooks=[_HOOK], exporters=[_Exporter()],
                    start_delay_secs=30, throttle_secs=10)
    defaults.update(kwargs)
    return train_and_eval.EvalSpec(lambda params: None, **defaults)


def _evaluated(loop):
    return [r.checkpoint_path for r in loop.results
            if r.status == evaluator_lib.EvalStatus.EVALUATED]


def test_evaluates_each_new_checkpoint_until_max_steps_with_delay_and_throttle():
    clock = _Clock()
    # What the evaluator sees at each look: nothing yet, 0, 0 again, 50, 100 (the last).
    trainer = _Trainer(clock, [None, "/m/model.ckpt-0", "/m/model.ckpt-0", "/m/model.ckpt-50",
                               "/m/model.ckpt-100"])
    spec = _spec()
    loop = evaluator_lib.ContinuousEvaluation(trainer, spec, max_steps=100, clock=clock,
                                              sleep=clock.sleep)
    last = loop.run()
    assert [c[0] for c in trainer.calls] == ["/m/model.ckpt-0", "/m/model.ckpt-50",
                                             "/m/model.ckpt-100"]
    assert trainer.calls[0][1:] == (7, "held_out", (_HOOK,))
    assert last.metrics == {"loss": 1.0, "global_step": 100}
    assert last.checkpoint_path == "/m/model.ckpt-100"
    assert spec.exporters[0].exports == [
        ("/m/export/recorder", "/m/model.ckpt-0", 0, False),
        ("/m/export/recorder", "/m/model.ckpt-50", 50, False),
        ("/m/export/recorder", "/m/model.ckpt-100", 100, True)]
    # start_delay_secs, then throttle_secs from the start of each pass (an evaluation takes
    # 2 s of it), after the final one too, as legacy's loop waited before it looked again.
    assert clock.sleeps == [30, 10, 8, 10, 8, 8]
    assert [r.status for r in loop.results] == [
        evaluator_lib.EvalStatus.MISSING_CHECKPOINT, evaluator_lib.EvalStatus.EVALUATED,
        evaluator_lib.EvalStatus.NO_NEW_CHECKPOINT, evaluator_lib.EvalStatus.EVALUATED,
        evaluator_lib.EvalStatus.EVALUATED]


def test_a_checkpoint_deleted_before_it_was_read_is_skipped():
    clock = _Clock()
    trainer = _Trainer(clock, ["/m/model.ckpt-10", "/m/model.ckpt-20"],
                       vanished={"/m/model.ckpt-10"})
    loop = evaluator_lib.ContinuousEvaluation(trainer, _spec(start_delay_secs=0), max_steps=20,
                                              clock=clock, sleep=clock.sleep)
    loop.run()
    assert _evaluated(loop) == ["/m/model.ckpt-20"]


def test_the_listener_stops_the_loop_before_or_after_a_pass():
    class StopAfter(evaluator_lib.ContinuousEvalListener):
        def __init__(self, before, after):
            self.before, self.after, self.heard = before, after, []

        def before_eval(self):
            self.before -= 1
            return self.before >= 0

        def after_eval(self, eval_result):
            self.heard.append(eval_result.status)
            self.after -= 1
            return self.after > 0

    for before, after, evaluated in ((1, 9, ["/m/model.ckpt-10"]), (9, 1, ["/m/model.ckpt-10"]),
                                     (0, 9, [])):
        clock = _Clock()
        trainer = _Trainer(clock, ["/m/model.ckpt-10", "/m/model.ckpt-20"])
        listener = StopAfter(before, after)
        loop = evaluator_lib.ContinuousEvaluation(trainer, _spec(start_delay_secs=0),
                                                  max_steps=20, listener=listener,
                                                  clock=clock, sleep=clock.sleep)
        loop.run()
        assert _evaluated(loop) == evaluated
        assert listener.heard == [evaluator_lib.EvalStatus.EVALUATED] * len(evaluated)


@pytest.mark.parametrize("metrics,error,match", [
    ({}, ValueError, r"should never return empty metrics"),
    (123, TypeError, r"`Estimator.evaluate` should return dict"),
    ({"loss": 1.0}, ValueError, r"result should have `global_step`"),
])
def test_an_evaluation_without_a_global_step_dict_is_an_error(metrics, error, match):
    class Bad:
        model_dir = "/m"

        def latest_checkpoint(self):
            return "/m/model.ckpt-1"

        def evaluate(self, **kwargs):
            return metrics

    with pytest.raises(error, match=match):
        evaluator_lib.Evaluator(Bad(), _spec(), 10).evaluate_and_export()


def test_only_evaluator_zero_may_run(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({
        "cluster": {"chief": ["h:0"]}, "task": {"type": "evaluator", "index": 1}}))
    estimator = Estimator(model_fn=lambda features, labels, mode: None,
                          config=tpu_estimator_compat.RunConfig())
    with pytest.raises(ValueError, match=r"^For distributed training, there can only be one "
                                         r"`evaluator` task \(with task id 0\).  Given task id 1"):
        train_and_eval.train_and_evaluate(estimator,
                                          train_and_eval.TrainSpec(lambda params: None, 10),
                                          _spec())


@pytest.mark.slow
def test_a_checkpoints_iterator_loop_follows_a_trainer_to_its_last_checkpoint(tmp_path):
    """`for ckpt in tf.train.checkpoints_iterator(model_dir): estimator.evaluate(...)`."""
    job = cluster_job.Job(tmp_path)
    model_dir = tmp_path / "model"
    common = [f"--model_dir={model_dir}", "--train_steps=60", "--iterations=5",
              "--save_steps=10"]
    try:
        job.launch("trainer", "legacy_cluster.py",
                   common + ["--mode=train", "--sleep_per_loop=0.3"])
        job.launch("eval_loop", "legacy_cluster.py", common + ["--mode=eval_loop"])
        job.wait("trainer", "eval_loop", timeout=240)
    finally:
        job.close()
    found = re.findall(r"Evaluation of model\.ckpt-(\d+): \{.*'global_step': (\d+)\}",
                       job.log("eval_loop"))
    assert found and all(a == b for a, b in found), found
    steps = [int(a) for a, _ in found]
    assert len(steps) >= 2 and steps[-1] == 60 and steps == sorted(set(steps)), steps


@pytest.mark.slow
def test_evaluator_task_beside_a_multi_worker_job(tmp_path):
    """chief + worker on MultiWorkerMirroredStrategy + an evaluator listed in the cluster."""
    job = cluster_job.Job(tmp_path)
    spec = cluster_job.cluster(chief=1, worker=1, evaluator=1)
    flags = [f"--model_dir={tmp_path / 'model'}", "--train_steps=60", "--iterations=5",
             "--save_steps=20", "--sleep_per_loop=0.3"]
    tasks = {"chief": ("chief", 0), "worker0": ("worker", 0), "evaluator": ("evaluator", 0)}
    try:
        for name, (task_type, index) in tasks.items():
            job.launch(name, "legacy_cluster.py", flags,
                       cluster_job.tf_config(spec, task_type, index), cpus=2)
        job.wait(*tasks, timeout=240)
    finally:
        job.close()
    assert ("runs on MultiWorkerMirroredStrategy with 4 replica(s): cluster of 2 workers"
            in job.log("chief"))
    evaluated = [int(s) for s in re.findall(r"\] Saving dict for global step (\d+):",
                                            job.log("evaluator"))]
    assert len(evaluated) >= 2 and evaluated[-1] == 60 and evaluated == sorted(set(evaluated))
    assert "Exiting evaluation, global_step=60 >= train max_steps=60" in job.log("evaluator")
