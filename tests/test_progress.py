"""Progress output: legacy's progress lines at legacy's steps, the bar, quiet."""

import io
import logging

import numpy as np
import pytest

from tpu_estimator_compat.summary import progress


@pytest.fixture(autouse=True)
def reset_mode():
    yield
    progress.set_mode(None)


def test_bar_redraws_and_ends_with_newline():
    progress.set_mode("bar")
    out = io.StringIO()
    progress.report(step=5, target=10, loss=0.5, steps_per_sec=2.0, stream=out)
    progress.report(step=10, target=10, loss=0.25, steps_per_sec=2.0, stream=out)
    text = out.getvalue()
    assert text.count("\r") == 2 and text.endswith("\n")
    assert "[###############...............] 5/10 loss 0.5" in text
    assert "10/10 loss 0.25" in text


def test_bad_mode(monkeypatch):
    monkeypatch.setenv(progress.ENV_VAR, "loud")
    with pytest.raises(ValueError, match=r"TPU_ESTIMATOR_COMPAT_PROGRESS must be one of"):
        progress.mode()


def _loops(train_log, loops, seconds=1.0):
    """[(step, message)] the log would print for loops of (first step, steps, losses)."""
    lines, now = [], 1000.0
    for first, count in loops:
        now += seconds
        end = first + count
        lines += [(line.at, line.msg % line.args) for line in train_log.lines(
            end, np.full(count, 0.5, np.float32), np.arange(first, end), now, seconds)]
    return lines


def test_cpu_path_rates_every_ceil_log_steps_over_iterations_per_loop():
    """use_tpu=False: legacy's StepCounterHook decided per step; the first run is the
    baseline. log_step_count_steps=5, iterations_per_loop=2: every 3 global steps."""
    log = progress.TrainLog(log_step_count_steps=5, iterations_per_loop=2, use_tpu=False,
                            examples_per_step=8)
    lines = _loops(log, [(0, 2), (2, 2), (4, 2), (6, 2)], seconds=2.0)
    assert [step for step, _ in lines] == [4, 4, 7, 7]
    assert lines[:2] == [(4, "global_step/sec: 1"), (4, "examples/sec: 8")]


def test_tpu_path_logs_loss_and_rates_per_loop():
    """use_tpu=True: one legacy run per loop. LoggingTensorHook: the loop's last loss and the
    global step after it, on the first run and every ceil(100/50)=2 runs, with the seconds
    since its last line; the rates every 2 global steps from the first run's end."""
    log = progress.TrainLog(log_step_count_steps=100, iterations_per_loop=50, use_tpu=True,
                            examples_per_step=None)
    lines = _loops(log, [(0, 50), (50, 50), (100, 50)], seconds=2.0)
    assert lines == [(50, "loss = 0.5, step = 50"),
                     (100, "global_step/sec: 25"),
                     (150, "loss = 0.5, step = 150 (4.000 sec)"),
                     (150, "global_step/sec: 25")]


def test_no_log_step_count_steps_no_lines():
    log = progress.TrainLog(log_step_count_steps=None, iterations_per_loop=2, use_tpu=True,
                            examples_per_step=8)
    assert _loops(log, [(0, 2), (2, 2)]) == []


def test_after_loop_prints_the_last_runs_lines_after_the_caller_saves(caplog):
    log = progress.TrainLog(log_step_count_steps=1, iterations_per_loop=1, use_tpu=False,
                            examples_per_step=None)
    with caplog.at_level(logging.INFO, logger="tensorflow"):
        for end in (1, 2, 3):
            rest = progress.after_loop(log, end=end, target=3, losses=[0.5],
                                       starts=[end - 1], end_time=float(end), seconds=1.0)
            logging.getLogger("tensorflow").info("saved %d", end)
            rest()
    assert [r.getMessage() for r in caplog.records] == [
        "saved 1", "saved 2", "global_step/sec: 1", "saved 3", "global_step/sec: 1"]


@pytest.mark.parametrize("chosen", ["quiet", "bar"])
def test_quiet_and_bar_print_no_progress_lines(caplog, chosen):
    progress.set_mode(chosen)
    log = progress.TrainLog(log_step_count_steps=1, iterations_per_loop=1, use_tpu=True,
                            examples_per_step=None)
    with caplog.at_level(logging.INFO, logger="tensorflow"):
        progress.after_loop(log, end=1, target=None, losses=[0.5], starts=[0],
                            end_time=1.0, seconds=1.0)()
        progress.EvalLog(3, on_tpu=False).after_loop(3)
    assert caplog.records == []


@pytest.mark.parametrize("steps,on_tpu,loops,expected", [
    (2, False, [1, 1], ["Evaluation [1/2]", "Evaluation [2/2]"]),
    (25, False, [10, 10, 5], ["Evaluation [2/25]", "Evaluation [4/25]", "Evaluation [6/25]",
                              "Evaluation [8/25]", "Evaluation [10/25]", "Evaluation [12/25]",
                              "Evaluation [14/25]", "Evaluation [16/25]", "Evaluation [18/25]",
                              "Evaluation [20/25]", "Evaluation [22/25]", "Evaluation [24/25]",
                              "Evaluation [25/25]"]),
    (None, False, [3], []),          # steps=None: legacy had no stop-after-N hook to log.
    (25, True, [10, 10, 5], ["Evaluation [25/25]"]),  # One TPU run evaluated all N batches.
])
def test_evaluation_lines(caplog, steps, on_tpu, loops, expected):
    with caplog.at_level(logging.INFO, logger="tensorflow"):
        log = progress.EvalLog(steps, on_tpu=on_tpu)
        for n in loops:
            log.after_loop(n)
        log.finish()
    assert [r.getMessage() for r in caplog.records] == expected


@pytest.mark.parametrize("every,loops", [(1, [5, 5]), (3, [4, 7, 1]), (50, [100, 100])])
def test_a_loop_logs_what_its_steps_one_run_each_would(every, loops):
    """The per-step rule computed per loop (`TrainLog._contiguous`) equals legacy's walk
    over the loop's steps, one run each."""
    whole = progress.TrainLog(log_step_count_steps=every * 2, iterations_per_loop=2,
                              use_tpu=False, examples_per_step=4)
    walked = progress.TrainLog(log_step_count_steps=every * 2, iterations_per_loop=2,
                               use_tpu=False, examples_per_step=4)
    got, expected, step, now = [], [], 0, 0.0
    for count in loops:
        now += count * 0.5
        got += whole.lines(step + count, np.zeros(count), np.arange(step, step + count), now,
                           count * 0.5)
        for k in range(count):
            expected += walked._after_run(step + k, step + k + 1, 0.0,
                                          now - count * 0.5 + 0.5 * (k + 1))
        step += count
    assert got == expected and got
