"""Progress output: log line, bar, quiet."""

import io

import pytest

from tpu_estimator_compat.summary import progress


@pytest.fixture(autouse=True)
def reset_mode():
    yield
    progress.set_mode(None)


def test_bar_redraws_and_ends_with_newline():
    progress.set_mode("bar")
    out = io.StringIO()
    progress.report(step=5, target=10, loss=0.5, steps_per_sec=2.0, examples_per_sec=None,
                    stream=out)
    progress.report(step=10, target=10, loss=0.25, steps_per_sec=2.0, examples_per_sec=None,
                    stream=out)
    text = out.getvalue()
    assert text.count("\r") == 2 and text.endswith("\n")
    assert "[###############...............] 5/10 loss 0.5" in text
    assert "10/10 loss 0.25" in text


def test_quiet_writes_nothing(monkeypatch):
    monkeypatch.setenv(progress.ENV_VAR, "quiet")
    out = io.StringIO()
    logged = []
    monkeypatch.setattr(progress.logging, "info", lambda *a: logged.append(a))
    progress.report(step=1, target=2, loss=1.0, steps_per_sec=1.0, examples_per_sec=8.0,
                    stream=out)
    assert out.getvalue() == "" and logged == []


def test_log_line(monkeypatch):
    logged = []
    monkeypatch.setattr(progress.logging, "info", lambda fmt, *a: logged.append(fmt % a))
    progress.report(step=4, target=None, loss=0.125, steps_per_sec=3.0, examples_per_sec=192.0)
    assert logged == ["global_step = 4, loss = 0.125, global_step/sec = 3, examples/sec = 192"]


def test_bad_mode(monkeypatch):
    monkeypatch.setenv(progress.ENV_VAR, "loud")
    with pytest.raises(ValueError, match=r"TPU_ESTIMATOR_COMPAT_PROGRESS must be one of"):
        progress.mode()


def test_legacy_lines_use_tensorflows_logger_when_the_script_turned_it_on(caplog):
    """Legacy wrote `INFO:tensorflow:Loss for final step: ...`; log scrapers look for it."""
    import logging as py_logging

    import tensorflow as tf

    logger = tf.get_logger()
    previous = logger.level
    try:
        logger.setLevel(py_logging.INFO)
        with caplog.at_level(py_logging.INFO, logger="tensorflow"):
            progress.legacy_info("Loss for final step: %s.", 0.5)
        assert [(r.name, r.getMessage()) for r in caplog.records] == [
            ("tensorflow", "Loss for final step: 0.5.")]
    finally:
        logger.setLevel(previous)
