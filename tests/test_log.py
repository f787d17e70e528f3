"""Logging under the launcher is the legacy stack's `python SCRIPT.py` logging, line for line.

The cases of tests/legacy_recorder/log_lines.py (scripts that set no verbosity, set
`tf.logging.set_verbosity` or absl's, pass `--verbosity=-1`, `-v=1` or `--logtostderr`, skip
`app.run`, and a tiny TPUEstimator with and without `app.run`) run through the launcher,
one process each, all started together by a module fixture so their TensorFlow start-ups
overlap; each test compares its case's log lines, stdout and final logger state with the
legacy run recorded in tests/goldens/log_lines/legacy.json. In-process tests check that
neither of the library's channels (`log.py`) touches the logging set-up.
"""
import ast
import contextlib
import importlib.util
import io
import json
import logging
import os
import pathlib
import subprocess
import sys
import time

import pytest
from absl import flags
from absl import logging as absl_logging

from tpu_estimator_compat import log
from tpu_estimator_compat.summary import progress

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT_S = 300


def _recorder():
    spec = importlib.util.spec_from_file_location(
        "log_lines_recorder", os.path.join(HERE, "legacy_recorder", "log_lines.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECORDER = _recorder()
with open(os.path.join(HERE, "goldens", "log_lines", "legacy.json")) as _f:
    GOLDEN = json.load(_f)["cases"]


class _Launch:
    """One launcher subprocess whose output goes to files (no pipe can fill up and block)."""

    def __init__(self, case, out_dir, env):
        self.case = case
        self.model_dir = os.path.join(out_dir, case)
        self.paths = [os.path.join(out_dir, f"{case}.{s}") for s in ("stdout", "stderr")]
        argv = [sys.executable, "-m", "tpu_estimator_compat.run",
                *RECORDER.command(case, self.model_dir)]
        with open(self.paths[0], "w") as out, open(self.paths[1], "w") as err:
            self.process = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=out_dir)
        self.started = time.monotonic()

    def result(self):
        try:
            self.process.wait(timeout=max(TIMEOUT_S - (time.monotonic() - self.started), 1))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"{self.case} did not finish within {TIMEOUT_S}s")
        with open(self.paths[0]) as out, open(self.paths[1]) as err:
            stdout, stderr = out.read(), err.read()
        assert self.process.returncode == 0, f"{self.case}:\n{stderr[-4000:]}"
        return RECORDER.result(self.case, stdout, stderr, self.model_dir), stderr


@pytest.fixture(scope="module")
def launched(tmp_path_factory, request):
    """The selected tests' cases, all started at once."""
    out = str(tmp_path_factory.mktemp("log_lines"))
    env = dict(os.environ, **RECORDER.ENV)
    env.pop("TF_USE_LEGACY_KERAS", None)  # The launcher sets it, as for any script.
    env.pop(progress.ENV_VAR, None)
    wanted = {"sets_nothing"} | {
        item.callspec.params["case"] for item in request.session.items
        if item.module is request.module
        and "case" in getattr(getattr(item, "callspec", None), "params", {})}
    launches = {case: _Launch(case, out, env) for case in RECORDER.CASES if case in wanted}
    yield launches
    for launch in launches.values():
        if launch.process.poll() is None:
            launch.process.kill()
            launch.process.wait()


# Opt-in (`-m slow`): cases whose class another default case already covers (the flag
# parsed after an import-time setting, the launcher's pre-script work without app.run).
_SLOW = ("tf_info_at_import", "v_flag", "no_app_run")


@pytest.mark.slow_cases("absl_verbosity")
@pytest.mark.slow_cases('tf_info_in_main_verbosity_flag')
@pytest.mark.slow_cases('tf_warn_at_import')
@pytest.mark.slow_cases('sets_nothing')
@pytest.mark.parametrize("case", [
    pytest.param(c, marks=pytest.mark.slow) if c in _SLOW else c
    for c in RECORDER.CASES if c not in RECORDER.ESTIMATOR_CASES])
def test_script_logging_is_the_legacy_scripts(launched, case):
    """Every line Python's logging printed, in order, and the loggers' final state."""
    got, stderr = launched[case].result()
    assert got["stdout"] == GOLDEN[case]["stdout"], stderr[-3000:]
    assert got["stderr"] == GOLDEN[case]["stderr"], stderr[-3000:]


@pytest.mark.parametrize("case", RECORDER.ESTIMATOR_CASES)
def test_tpu_estimator_progress_lines_are_legacys(launched, case):
    """Legacy's progress lines at its steps, in its channels; the results printed alike; and
    every `INFO:tensorflow:` line is one legacy printed (the library's own lines are absl's)."""
    got, stderr = launched[case].result()
    assert got["stdout"] == GOLDEN[case]["stdout"]
    assert got["stderr"] == GOLDEN[case]["stderr"], stderr[-3000:]
    everything = RECORDER.normalise(stderr, model_dir=launched[case].model_dir)
    ours = {line for line in everything if line.startswith("INFO:tensorflow:")}
    assert ours <= set(GOLDEN[case]["stderr"]), ours - set(GOLDEN[case]["stderr"])


def test_the_launcher_names_the_tf1_mode_in_absls_format_before_the_script(launched):
    _, stderr = launched["sets_nothing"].result()
    first = [line for line in stderr.splitlines() if "TF1 mode: " in line]
    assert len(first) == 1 and first[0].startswith("I"), first
    assert "run.py:" in first[0] and first[0].endswith("`import tensorflow`).")


# ----------------------------------------------------------------------------------------
# The two channels, in process.


def _absl_state():
    root = logging.getLogger()
    return (list(root.handlers), root.level, flags.FLAGS["verbosity"].value,
            flags.FLAGS["verbosity"].using_default_value,
            absl_logging.get_absl_logger().level)


def test_neither_channel_changes_handlers_levels_or_absls_flag(monkeypatch):
    # absl's module functions call logging.basicConfig() on a bare root logger: log.py's
    # must not. Bare it for the duration (pytest's own handlers are put back after).
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    before = _absl_state()
    log.debug("own debug %d", 1)
    log.info("own info %d", 2)
    log.warning("own warning %d", 3)
    log.legacy_info("legacy info %d", 4)
    log.legacy_warning("legacy warning %d", 5)
    assert _absl_state() == before and root.handlers == []


def test_legacy_lines_go_through_tensorflows_logger_and_own_lines_through_absls(caplog):
    with caplog.at_level(logging.INFO):
        log.legacy_info("Loss for final step: %s.", 0.5)
        log.info("TPUEstimator runs on %s.", "something")
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("tensorflow", "Loss for final step: 0.5."), ("absl", "TPUEstimator runs on something.")]
    # Both name the caller, not log.py, as the line's source (absl's format shows it).
    assert {r.filename for r in caplog.records} == {os.path.basename(__file__)}


def test_legacy_lines_reach_a_replaced_v1_logging_function(monkeypatch, caplog):
    """As on legacy, code that replaces `tf.compat.v1.logging.warning` gets the line."""
    import tensorflow as tf

    heard = []
    monkeypatch.setattr(tf.compat.v1.logging, "warning", lambda *a: heard.append(a))
    with caplog.at_level(logging.INFO):
        log.legacy_warning("No new checkpoint %s.", "yet")
        log.legacy_info("Loss for final step: %s.", 0.5)
    assert heard == [("No new checkpoint %s.", "yet")]
    assert [r.getMessage() for r in caplog.records] == ["Loss for final step: 0.5."]


def test_no_library_module_logs_through_absls_module_functions():
    # `absl.logging.info(...)` and friends call logging.basicConfig() on a bare root logger
    # (see log.py), so a module that logs through them can double every `tensorflow` line of
    # a script. Only log.py and the launcher's stderr writer may import absl's logging; the
    # parity tool runs as its own program (also on the legacy stack) and configures logging.
    package = pathlib.Path(log.__file__).parent
    allowed = {package / "log.py", package / "run.py"}
    offenders = []
    for path in sorted(package.rglob("*.py")):
        if path in allowed or "parity" in path.relative_to(package).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == "absl" and any(
                    a.name == "logging" for a in node.names):
                offenders.append(f"{path.relative_to(package)}:{node.lineno}")
            elif isinstance(node, ast.Import) and any(
                    a.name == "absl.logging" for a in node.names):
                offenders.append(f"{path.relative_to(package)}:{node.lineno}")
    assert not offenders, (f"Log through tpu_estimator_compat.log, not absl.logging: "
                           f"{offenders}")


def test_own_lines_reach_stderr_at_the_scripts_absl_verbosity_without_a_handler(
        monkeypatch):
    # A script without app.run that asks for absl INFO (`absl.logging.set_verbosity(INFO)`,
    # the cluster tests' worker) sees the library's INFO lines, in absl's format, and the
    # root logger still has no handler afterwards (no doubled `tensorflow` lines).
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    absl_logger = absl_logging.get_absl_logger()
    level = absl_logger.level
    absl_logger.setLevel(logging.INFO)  # (setLevel: the loggers' level caches are cleared.)
    try:
        with contextlib.redirect_stderr(io.StringIO()) as written:
            log.info("own info %d", 7)
            log.debug("own debug %d", 8)
    finally:
        absl_logger.setLevel(level)
    assert root.handlers == []
    written = written.getvalue()
    assert "own info 7" in written and "test_log.py:" in written
    assert "own debug 8" not in written
