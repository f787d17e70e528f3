"""loop/error_rendezvous.py: the root cause of several threads' errors is raised."""

import threading

import pytest
import tensorflow as tf

from tpu_estimator_compat.loop import error_rendezvous


def _raise_in(rendezvous, source, error):
    with rendezvous.catch_errors(source=source):
        raise error


def test_root_cause_wins_over_cancellation():
    rendezvous = error_rendezvous.ErrorRendezvous(2)
    _raise_in(rendezvous, "main", tf.errors.CancelledError(None, None, "cancelled"))
    _raise_in(rendezvous, "infeed", tf.errors.NotFoundError(None, None, "no such file"))
    with pytest.raises(tf.errors.NotFoundError, match="no such file"):
        rendezvous.raise_errors()


def test_cancellation_alone_is_raised():
    rendezvous = error_rendezvous.ErrorRendezvous(1)
    _raise_in(rendezvous, "main", tf.errors.CancelledError(None, None, "cancelled"))
    with pytest.raises(tf.errors.CancelledError):
        rendezvous.raise_errors()


def test_aborted_and_unavailable_are_not_kept():
    rendezvous = error_rendezvous.ErrorRendezvous(2)
    _raise_in(rendezvous, "a", tf.errors.AbortedError(None, None, "aborted"))
    _raise_in(rendezvous, "b", tf.errors.UnavailableError(None, None, "unavailable"))
    rendezvous.record_done("a")
    rendezvous.raise_errors()  # Nothing to raise.


def test_waits_for_sources_from_other_threads():
    rendezvous = error_rendezvous.ErrorRendezvous(2)
    rendezvous.record_done("main")
    worker = threading.Thread(
        target=_raise_in, args=(rendezvous, "outfeed", ValueError("outfeed broke")))
    worker.start()
    worker.join()
    with pytest.raises(ValueError, match="outfeed broke"):
        rendezvous.raise_errors(timeout_sec=1)


def test_a_failure_closes_the_session(monkeypatch):
    monkeypatch.setattr(error_rendezvous, "CLOSE_SESSION_AFTER_SECS", 0.0)
    closed = threading.Event()

    class Session:
        def close(self):
            closed.set()

    rendezvous = error_rendezvous.ErrorRendezvous(1)
    with rendezvous.catch_errors(source="infeed", session=Session()):
        raise RuntimeError("boom")
    assert closed.wait(5)
