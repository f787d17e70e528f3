"""SavePolicy: legacy CheckpointSaverHook's cadence at loop granularity, with a fake clock."""

import pytest

from tpu_estimator_compat.checkpoint.save_policy import SavePolicy


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class Writer:
    def __init__(self):
        self.saved = []

    def save(self, step):
        self.saved.append(step)
        return f"model.ckpt-{step}"


class Listener:
    def __init__(self, stop_after=None):
        self.calls = []
        self._stop_after = stop_after

    def begin(self):
        self.calls.append("begin")

    def before_save(self, session, step):
        self.calls.append(("before_save", step))

    def after_save(self, session, step):
        self.calls.append(("after_save", step))
        return step == self._stop_after

    def end(self, session, step):
        self.calls.append(("end", step))


def test_policy_by_steps_saves_start_boundaries_and_end():
    writer = Writer()
    policy = SavePolicy(writer, save_steps=100, save_secs=None, clock=FakeClock())
    policy.begin(0)  # Legacy saved the starting state.
    assert writer.saved == [0]
    assert not policy.should_save(0) and not policy.should_save(99)
    assert policy.should_save(100)
    policy.save(100)
    assert not policy.should_save(150) and policy.should_save(250)  # Loop granularity.
    policy.save(250)
    policy.end(250)  # The final step was just saved: not again.
    assert writer.saved == [0, 100, 250]
    policy.end(260)
    assert writer.saved == [0, 100, 250, 260]


def test_policy_by_seconds_with_fake_clock():
    clock = FakeClock()
    writer = Writer()
    policy = SavePolicy(writer, save_steps=None, save_secs=600, clock=clock)
    policy.save(10)
    clock.now += 599
    assert not policy.should_save(1000)
    clock.now += 1
    assert policy.should_save(1000)
    assert not policy.should_save(10)  # Never twice for the same step.
    policy.save(1000)
    assert not policy.should_save(2000)


def test_policy_disabled_and_bad_arguments():
    writer = Writer()
    off = SavePolicy(writer, save_steps=None, save_secs=None)
    assert not off.enabled
    off.begin(0)
    assert not off.should_save(10**6)
    off.end(5)
    assert writer.saved == []  # Legacy added no saver hook: not even start or end.
    with pytest.raises(ValueError, match="only one"):
        SavePolicy(writer, save_steps=1, save_secs=1.0)
    assert not SavePolicy(writer, save_steps=0, save_secs=0).enabled  # Legacy: falsy disables.
    assert SavePolicy(writer, save_steps=0, save_secs=60).enabled
    with pytest.raises(ValueError, match="save_steps=-1"):
        SavePolicy(writer, save_steps=-1, save_secs=None)


def test_listeners_hear_every_save_and_can_stop():
    listener = Listener(stop_after=4)
    policy = SavePolicy(Writer(), save_steps=2, save_secs=None, listeners=[listener])
    policy.begin(0)
    assert not policy.after_loop(2, None, 1.0)
    policy.save(4)
    assert policy.after_loop(4, None, 1.0)  # after_save returned True: training stops.
    policy.end(4)
    assert listener.calls == ["begin", ("before_save", 0), ("after_save", 0),
                              ("before_save", 4), ("after_save", 4), ("end", 4)]


def test_chief_decision_is_every_workers():
    """On a cluster `agree` maps this worker's decision to the chief's."""
    asked = []

    def chief_says_no(decision):
        asked.append(decision)
        return False

    policy = SavePolicy(Writer(), save_steps=1, save_secs=None, agree=chief_says_no)
    policy.begin(0)
    assert not policy.should_save(5) and asked == [True]


def test_per_step_policy_ends_loops_where_a_save_falls_due():
    """Legacy's CPU path asked its saver hook after every step: with save_steps=2 and
    iterations_per_loop=5 it saved at 2, 4, 6, ...; the driver ends loops there."""
    writer = Writer()
    policy = SavePolicy(writer, save_steps=2, save_secs=None, clock=FakeClock(), per_step=True)
    assert policy.steps_until_due(0) is None  # Nothing saved yet: begin() saves first.
    policy.begin(0)
    assert policy.steps_until_due(0) == 2
    assert policy.steps_until_due(1) == 1  # A loop that advanced the step by one only.
    policy.save(2)
    assert policy.steps_until_due(2) == 2
    assert policy.steps_until_due(7) == 1  # Overdue (a step that advanced by more).
    # Between loops only: on TPU (steps_per_run=iterations_per_loop), or by time.
    assert SavePolicy(Writer(), save_steps=2, save_secs=None).steps_until_due(0) is None
    by_time = SavePolicy(Writer(), save_steps=None, save_secs=5, per_step=True)
    by_time.begin(0)
    assert by_time.steps_until_due(0) is None
