"""The peer suite runner (dev/peer_suite.py) and the level it recorded.

`../shared/peer_suite` (or $TPU_ESTIMATOR_COMPAT_PEER_SUITE) holds tensorflow-estimator
2.15.0's own unit tests and their legacy outcomes. tests/goldens/peer_suite/record.json is
the library's level: every test's outcome on the library when it was recorded. The slow test
runs the suite again and fails when a recorded pass no longer passes; it prints how many
tests newly pass and the command that re-records. The fast tests check the runner's junit
reading and comparison on small inputs, and that the record agrees with the baseline.
"""

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
RECORD = REPO / "tests" / "goldens" / "peer_suite" / "record.json"


def _load_runner():
    spec = importlib.util.spec_from_file_location("peer_suite", REPO / "dev" / "peer_suite.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


peer_suite = _load_runner()
SUITE = peer_suite.suite_dir()
needs_suite = pytest.mark.skipif(
    SUITE is None,
    reason=f"the peer suite is not here: put the steering repo's shared/peer_suite next to this "
           f"checkout (../shared/peer_suite) or set {peer_suite.ENV_VAR}=/path/to/peer_suite")

_JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.canned.x_test.ATest" name="test_a" time="0.1" />
<testcase classname="tests.canned.x_test.ATest" name="test_b0 (1, 2)" time="0.1">
  <failure message="AssertionError: 1 != 2&#10;second line">trace</failure></testcase>
<testcase classname="tests.canned.x_test.ATest" name="test_c" time="0.1">
  <skipped type="pytest.skip" message="Not a test.">skip</skipped></testcase>
<testcase classname="tests.canned.x_test.ATest" name="test_d" time="0.1" />
<testcase classname="tests.canned.x_test.ATest" name="test_d" time="0.1">
  <error message="failed on teardown with &quot;boom&quot;">trace</error></testcase>
<testcase classname="tests.canned.x_test" name="test_function" time="0.1" />
</testsuite></testsuites>"""


def test_junit_becomes_the_baselines_ids(tmp_path):
    xml = tmp_path / "x.xml"
    xml.write_text(_JUNIT)
    outcomes, messages = peer_suite.parse_junit(xml, "tests/canned/x_test.py")
    assert outcomes == {
        "tests/canned/x_test.py::ATest::test_a": "passed",
        "tests/canned/x_test.py::ATest::test_b0 (1, 2)": "failed",
        "tests/canned/x_test.py::ATest::test_c": "skipped",
        "tests/canned/x_test.py::ATest::test_d": "error",  # A teardown error after a pass.
        "tests/canned/x_test.py::test_function": "passed",
    }
    assert messages["tests/canned/x_test.py::ATest::test_b0 (1, 2)"] == "AssertionError: 1 != 2"


def test_a_file_that_fails_to_import_is_one_id(tmp_path):
    xml = tmp_path / "x.xml"
    xml.write_text('<testsuites><testsuite><testcase classname="" name="tests.tpu.y_test">'
                   '<error message="collection failure">tests/tpu/y_test.py:3: in &lt;module&gt;\n'
                   'E   ImportError: no module named y</error></testcase>'
                   '</testsuite></testsuites>')
    outcomes, messages = peer_suite.parse_junit(xml, "tests/tpu/y_test.py")
    assert outcomes == {"tests/tpu/y_test.py": "error"}
    assert messages == {"tests/tpu/y_test.py": "ImportError: no module named y"}


def test_why_each_legacy_pass_fails():
    """A test failing names its message; a file that did not import names the import."""
    baseline = {"tests/a.py::T::x": "passed", "tests/a.py::T::y": "passed",
                "tests/a.py::T::z": "failed", "tests/b.py::T::w": "passed",
                "tests/c.py::T::v": "passed", "tests/d.py::K::u": "passed",
                "tests/d.py::L::t": "passed"}
    results = {
        "tests/a.py": {"status": "ok", "outcomes": {"tests/a.py::T::x": "passed",
                                                    "tests/a.py::T::y": "failed",
                                                    "tests/a.py::T::z": "failed"},
                       "messages": {"tests/a.py::T::y": "AssertionError: 1 != 2",
                                    "tests/a.py::T::z": "legacy fails it too"}},
        "tests/b.py": {"status": "ok", "outcomes": {"tests/b.py": "error"},
                       "messages": {"tests/b.py": "ImportError: no module x"}},
        "tests/c.py": {"status": "timeout", "outcomes": {}, "messages": {}},
        # A class that failed to collect (a decorator's argument raised): one id, the class.
        "tests/d.py": {"status": "ok", "outcomes": {"tests/d.py::K": "error"},
                       "messages": {"tests/d.py::K": "LegacySymbolError: parse_spec_v2"}},
    }
    assert peer_suite.failure_messages(baseline, results) == {
        "tests/a.py::T::y": "AssertionError: 1 != 2",
        "tests/b.py::T::w": "ImportError: no module x",
        "tests/c.py::T::v": "timeout",
        "tests/d.py::K::u": "LegacySymbolError: parse_spec_v2",
        # pytest runs no test of a file with a collection error.
        "tests/d.py::L::t": "LegacySymbolError: parse_spec_v2"}


def test_drops_and_new_passes_against_a_record():
    record = {"outcomes": {"tests/a.py::T::x": "passed", "tests/a.py::T::y": "failed",
                           "tests/b.py::T::z": "passed"}}
    now = {"tests/a.py::T::x": "failed", "tests/a.py::T::y": "passed"}
    drops, new = peer_suite.compare(record, now, ["tests/a.py"])
    assert drops == ["tests/a.py::T::x"]  # tests/b.py was not run: not a drop.
    assert new == ["tests/a.py::T::y"]
    # A file that left no report has no passing test: every recorded pass of it drops.
    drops, _ = peer_suite.compare(record, {"tests/b.py": "timeout"}, ["tests/b.py"])
    assert drops == ["tests/b.py::T::z"]


def test_summary_counts_legacy_passing_tests_that_pass():
    baseline = {"tests/a.py::T::x": "passed", "tests/a.py::T::y": "passed",
                "tests/a.py::T::z": "skipped", "tests/b.py": "error"}
    rows = peer_suite.summary_rows(baseline, {"tests/a.py::T::x": "passed",
                                              "tests/a.py::T::z": "passed"},
                                   ["tests/a.py", "tests/b.py"])
    assert rows == [("tests/a.py", 2, 1), ("tests/b.py", 0, 0)]
    assert "overall" in peer_suite.format_table(rows).splitlines()[-1]


def test_re_recording_some_files_keeps_the_others():
    baseline = {"tests/a.py::T::x": "passed", "tests/b.py::T::y": "passed"}
    old = peer_suite.make_record(baseline, {"tests/a.py::T::x": "passed",
                                            "tests/b.py::T::y": "passed"},
                                 ["tests/a.py", "tests/b.py"])
    new = peer_suite.make_record(baseline, {"tests/b.py::T::y": "failed"}, ["tests/b.py"], old)
    assert new["outcomes"] == {"tests/a.py::T::x": "passed", "tests/b.py::T::y": "failed"}
    assert new["files"] == {"tests/a.py": {"legacy_passing": 1, "passing": 1},
                            "tests/b.py": {"legacy_passing": 1, "passing": 0}}
    assert new["passing_of_legacy_passing"] == 1


def test_progress_lines_become_outcomes_as_junit_counts_them():
    lines = ["start\tt.py::A::a\t1.0", "report\tt.py::A::a\tsetup\tpassed\t",
             "report\tt.py::A::a\tcall\tpassed\t", "report\tt.py::A::a\tteardown\tfailed\tboom",
             "end\tt.py::A::a", "start\tt.py::A::b\t2.0",
             "report\tt.py::A::b\tcall\tfailed\tAssertionError: 1 != 2", "end\tt.py::A::b",
             "start\tt.py::A::c\t3.0", "report\tt.py::A::c\tsetup\tskipped\t",
             "end\tt.py::A::c", "start\tt.py::A::d\t4.0",
             "report\tt.py::A::d\tsetup\tpassed\t"]
    outcomes, messages, running = peer_suite.progress_outcomes(lines)
    assert outcomes == {"t.py::A::a": "error", "t.py::A::b": "failed", "t.py::A::c": "skipped"}
    assert messages == {"t.py::A::a": "boom", "t.py::A::b": "AssertionError: 1 != 2"}
    assert running == "t.py::A::d"


_HANGS = """import time
import unittest


class T(unittest.TestCase):

  def test_a(self):
    pass

  def test_b(self):
    time.sleep(600)

  def test_b_after(self):  # pytest's --deselect of test_b would drop this one too.
    pass

  def test_c(self):
    self.assertEqual(1, 2)
"""


@pytest.mark.slow  # Three pytest processes that each import TensorFlow.
def test_a_hung_test_is_killed_and_its_file_runs_on(tmp_path):
    suite = tmp_path / "suite"
    (suite / "tests").mkdir(parents=True)
    (suite / "tests" / "hang_test.py").write_text(_HANGS)
    run_dir = peer_suite.make_run_dir(suite)
    result = peer_suite.run_file(run_dir, "tests/hang_test.py", 300, sys.executable,
                                 test_timeout=20)
    assert result["status"] == "ok", result
    assert result["outcomes"] == {
        "tests/hang_test.py::T::test_a": "passed", "tests/hang_test.py::T::test_b": "hung",
        "tests/hang_test.py::T::test_b_after": "passed",
        "tests/hang_test.py::T::test_c": "failed"}
    assert result["messages"]["tests/hang_test.py::T::test_b"].startswith("hung")
    # A check against a record that holds test_b as hung does not run it again.
    again = peer_suite.run_file(run_dir, "tests/hang_test.py", 300, sys.executable,
                                test_timeout=20,
                                known_hung=frozenset({"tests/hang_test.py::T::test_b"}))
    assert again["outcomes"] == result["outcomes"]
    assert again["seconds"] < result["seconds"]


@needs_suite
def test_record_agrees_with_the_baseline():
    """The record's files and counts are the baseline's, recomputed from its outcomes."""
    record = peer_suite.load_json(RECORD)
    baseline = peer_suite.load_json(SUITE / "legacy_baseline.json")
    files = sorted(record["files"])
    assert set(files) <= set(peer_suite.legacy_files(baseline))
    rows = peer_suite.summary_rows(baseline, record["outcomes"], files)
    assert {rel: {"legacy_passing": a, "passing": b} for rel, a, b in rows} == record["files"]
    assert record["passing_of_legacy_passing"] == sum(b for _, _, b in rows)


# CI's share of the suite: the engine's own files (Estimator, specs, RunConfig, training,
# export, hooks) and one file each of heads, parsing and TPU config, ~6 min of CPU. The canned
# files take 2-4 min each; every file runs in the `full` case (pytest.ini).
CI_FILES = ("tests/estimator_test.py", "tests/model_fn_test.py", "tests/run_config_test.py",
            "tests/training_test.py", "tests/export/export_test.py",
            "tests/export/export_output_test.py", "tests/hooks/basic_session_run_hooks_test.py",
            "tests/head/regression_head_test.py", "tests/canned/parsing_utils_test.py",
            "tests/tpu/tpu_config_test.py")


@pytest.mark.slow
@needs_suite
@pytest.mark.parametrize("files", [pytest.param(CI_FILES, id="ci_files"),
                                   pytest.param((), id="every_file", marks=pytest.mark.full)])
def test_no_recorded_pass_drops(files):
    """Runs the record's files with a passing test (--check; CI: `CI_FILES`) and fails on a
    drop."""
    command = [sys.executable, str(REPO / "dev" / "peer_suite.py"), "--jobs", "2",
               "--messages", "0", "--check", str(RECORD), *files]
    env = dict(os.environ, **{peer_suite.ENV_VAR: str(SUITE)})
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    print(done.stdout[-20000:])
    assert done.returncode == 0, f"recorded passes dropped:\n{done.stdout[-8000:]}\n" \
                                 f"{done.stderr[-3000:]}"


def test_ci_files_are_suite_files_with_recorded_passes():
    record = peer_suite.load_json(RECORD)
    passing = {peer_suite.file_of(t) for t, o in record["outcomes"].items() if o == "passed"}
    assert set(CI_FILES) <= passing, set(CI_FILES) - passing
