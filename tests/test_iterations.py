"""loop/iterations.py: loop sizes for a step count or a time budget, and the TF1 hook."""

import pytest
import tensorflow as tf

from tpu_estimator_compat.loop import iterations
from tpu_estimator_compat.tpu_config import parse_iterations_per_loop


def test_estimator_starts_at_one_step_and_moves_to_the_budget():
    estimator = iterations.IterationCountEstimator(capacity=3)
    assert estimator.get(10) == 1  # No sample yet.
    estimator.update(2.0, 4)  # 0.5 s per step.
    assert estimator.get(10) == 20
    estimator.update(0.0, 4)  # Ignored: no time.
    estimator.update(1.0, 0)  # Ignored: no steps.
    assert estimator._sample_count == 1


def test_estimator_ring_keeps_the_last_capacity_samples():
    estimator = iterations.IterationCountEstimator(capacity=2)
    for seconds in (1.0, 2.0, 3.0):
        estimator.update(seconds, 1)
    assert [s.runtime_secs for s in estimator._buffer_wheel] == [2.0, 3.0]
    assert estimator._mean_step_time_secs() == 2.5


def test_estimator_rejects_bad_arguments():
    with pytest.raises(ValueError, match="capacity"):
        iterations.IterationCountEstimator(capacity=0)
    with pytest.raises(ValueError, match="total_secs"):
        iterations.IterationCountEstimator().get(0)


def test_estimator_settles_when_steady_near_the_budget():
    estimator = iterations.IterationCountEstimator(capacity=3)
    for _ in range(2):  # 0.1 s per step; not yet settled (no more samples than capacity).
        estimator.update(1.0, 10)
    assert estimator.get(1.0) == 10
    for _ in range(2):  # 8% over the budget, step time steady: the estimate is kept...
        estimator.update(1.08, 10)
    assert estimator.get(1.0) == 10
    assert int(1.0 / estimator._mean_step_time_secs() + 0.5) == 9  # ...not moved to this.


def test_sizer_count_caps_at_remaining():
    sizer = iterations.LoopSizer(parse_iterations_per_loop(4))
    assert [sizer.next_count(r) for r in (10, 4, 3, 0)] == [4, 4, 3, 0]
    sizer.record(5.0, 4)  # A count learns nothing.
    assert sizer.next_count(10) == 4 and sizer.estimator is None


def test_sizer_budget_learns_from_recorded_loops():
    sizer = iterations.LoopSizer(parse_iterations_per_loop("1m"))
    assert sizer.iterations_per_loop.value == 60
    assert sizer.next_count(1000) == 1
    sizer.record(2.0, 1)  # 2 s per step: 30 steps fill a minute.
    assert sizer.next_count(1000) == 30
    assert sizer.next_count(7) == 7


def test_sizer_rejects_unknown_unit():
    with pytest.raises(ValueError, match="`count` or `seconds`"):
        iterations.LoopSizer(parse_iterations_per_loop(3)._replace(unit="secs"))


class _RunContext:
    def __init__(self, session):
        self.session = session
        self.stop = False

    def request_stop(self):
        self.stop = True


@pytest.mark.parametrize("value", [2, "1s"])
def test_hook_sizes_loops_and_stops_at_the_final_step(value, monkeypatch):
    now = [100.0]
    monkeypatch.setattr(iterations.time, "time", lambda: now[0])
    with tf.Graph().as_default():
        step = tf.compat.v1.train.get_or_create_global_step()
        hook = iterations.TPUStopAtStepHook(parse_iterations_per_loop(value), num_steps=3)
        with tf.compat.v1.Session() as sess:
            sess.run(step.initializer)
            hook.begin()
            hook.after_create_session(sess, None)
            assert hook._next_iteration_count == (2 if value == 2 else 1)
            ran = []
            while True:
                context = _RunContext(sess)
                hook.before_run(context)
                n = hook._next_iteration_count
                ran.append(n)
                now[0] += 0.5 * n  # 0.5 s per step.
                step.load(sess.run(step) + n, sess)
                hook.after_run(context, None)
                if context.stop:
                    break
    assert sum(ran) == 3
    assert ran == ([2, 1] if value == 2 else [1, 2])  # 1 s budget at 0.5 s per step: 2.
    assert hook._next_iteration_count == ran[-1]


def test_hook_argument_checks():
    counter = parse_iterations_per_loop(10)
    with pytest.raises(ValueError, match="One of"):
        iterations.TPUStopAtStepHook(counter)
    with pytest.raises(ValueError, match="Only one of"):
        iterations.TPUStopAtStepHook(counter, num_steps=1, final_step=2)
    assert iterations.TPUStopAtStepHook(counter, final_step=2)._iteration_count_estimator is None
