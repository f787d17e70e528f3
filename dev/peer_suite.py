"""Runs tensorflow-estimator 2.15.0's own unit tests against this library.

    python dev/peer_suite.py --jobs 2 --out /tmp/peer.json            # every file
    python dev/peer_suite.py tests/estimator_test.py canned/dnn_test_fc_v2.py
    python dev/peer_suite.py --jobs 2 --check tests/goldens/peer_suite/record.json
    python dev/peer_suite.py --jobs 2 --write-record tests/goldens/peer_suite/record.json
    python dev/peer_suite.py --write-record tests/goldens/peer_suite/record.json canned/x_test

The suite is `../shared/peer_suite` beside the repository (or the directory named by
TPU_ESTIMATOR_COMPAT_PEER_SUITE): the test files verbatim under `tests/`, and
`legacy_baseline.json`, every test's outcome on TF 2.15.1 + tensorflow-estimator 2.15.0.
Each file runs as the baseline ran it (the suite's README): its own pytest process, from a
directory holding `tests/` (a symlink: the files are never copied or changed) and a bare
`pytest.ini`, with `-q -rfE -p no:cacheprovider --junitxml`. One thing is added:
`-p peer_suite_plugin` (dev/peer_suite_plugin.py) installs the library's aliases before
pytest imports a test file, so `tensorflow_estimator.python.estimator.*` is whatever the
library serves at those paths.

Each file's junit XML becomes the baseline's ids (`tests/<relpath>::<Class>::<test>`), and
the report counts, per file, the tests that pass on legacy and of those the ones that pass
here. `--check RECORD` fails (exit 1) when a test the record holds as passing no longer
passes; a file with such a drop is run a second time first, so a test that passes in
either run is not a drop. It runs the record's files with at least one passing test unless
files are named. `--write-record` with files named re-records those files only.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree

REPO = pathlib.Path(__file__).resolve().parent.parent
ENV_VAR = "TPU_ESTIMATOR_COMPAT_PEER_SUITE"
RECORD = "tests/goldens/peer_suite/record.json"
PLUGIN = "peer_suite_plugin"
DEFAULT_TIMEOUT = 600  # The baseline's limit per file.
DEFAULT_TEST_TIMEOUT = 120  # One test past this is killed and its file runs on without it.
PROGRESS_VAR = "TPU_ESTIMATOR_COMPAT_PEER_PROGRESS"  # Both read by dev/peer_suite_plugin.py.
SKIP_VAR = "TPU_ESTIMATOR_COMPAT_PEER_SKIP"
# Outcomes from worst to best: a test reported twice (a teardown error after its call
# passed) keeps the worse one.
_RANK = {"hung": -1, "error": 0, "failed": 1, "skipped": 2, "passed": 3}
_SCRUB_ENV = ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT",
              "PYTEST_CURRENT_TEST", "PYTEST_PLUGINS")


def suite_dir() -> pathlib.Path | None:
    """The peer suite: $TPU_ESTIMATOR_COMPAT_PEER_SUITE, else ../shared/peer_suite."""
    for candidate in (os.environ.get(ENV_VAR), REPO.parent / "shared" / "peer_suite"):
        if candidate and (pathlib.Path(candidate) / "legacy_baseline.json").is_file():
            return pathlib.Path(candidate).resolve()
    return None


def load_json(path: pathlib.Path | str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def file_of(test_id: str) -> str:
    return test_id.split("::", 1)[0]


def legacy_files(baseline: dict[str, str]) -> list[str]:
    """The suite's test files (`tests/<relpath>`), as the baseline ran them."""
    return sorted({file_of(test_id) for test_id in baseline})


def resolve_files(names: list[str], known: list[str]) -> list[str]:
    """`tests/x.py`, `x.py` or `canned/x` → the baseline's `tests/...` name."""
    chosen = []
    for name in names:
        stem = name if name.endswith(".py") else name + ".py"
        stem = stem[len("tests/"):] if stem.startswith("tests/") else stem
        match = [f for f in known if f == "tests/" + stem or f.endswith("/" + stem)]
        if len(match) != 1:
            raise SystemExit(f"peer_suite: {name!r} names {len(match)} of the suite's files "
                             f"(expected 1): {match or 'see legacy_baseline.json'}")
        chosen.append(match[0])
    return chosen


def parse_junit(xml_path: pathlib.Path, rel: str) -> tuple[dict[str, str], dict[str, str]]:
    """(outcome by id, first failure line by id) from one file's junit XML.

    pytest's junit classname is the test's module path dotted plus its class
    (`tests.canned.dnn_test_fc_v2.DNNModelFnTest`); the baseline's id drops that module
    prefix. A file that fails to import is one id: the file itself.
    """
    module = rel[:-len(".py")].replace("/", ".")
    outcomes: dict[str, str] = {}
    messages: dict[str, str] = {}
    for case in ElementTree.parse(xml_path).getroot().iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        if classname == module or classname.startswith(module + "."):
            cls = classname[len(module) + 1:]
            test_id = "::".join(filter(None, (rel, cls, name)))
        else:  # A collection error: classname "" and the module as the name.
            test_id = rel
        outcome, message = "passed", ""
        for tag in ("skipped", "failure", "error"):
            found = case.find(tag)
            if found is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
                message = _first_line(found.get("message"), found.text)
                if tag != "skipped":
                    break
        if test_id in outcomes and _RANK[outcomes[test_id]] <= _RANK[outcome]:
            continue
        outcomes[test_id] = outcome
        if outcome != "passed":
            messages[test_id] = message
    return outcomes, messages


def _first_line(message: str | None, text: str | None) -> str:
    """A failure's message attribute's first line; for a collection error (message
    "collection failure"), the traceback's last `E` line: the import that failed."""
    lines = (text or "").splitlines()
    if message == "collection failure" and lines:
        found = [line[1:].strip() for line in lines if line.startswith("E ")]
        message = found[-1] if found else lines[-1]
    return (message or "").strip().split("\n")[0][:300]


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB_ENV}
    path = [str(REPO), str(REPO / "dev")] + [p for p in env.get("PYTHONPATH", "").split(
        os.pathsep) if p]
    env.update(PYTHONPATH=os.pathsep.join(path), TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONDONTWRITEBYTECODE="1")
    return env


def make_run_dir(suite: pathlib.Path) -> pathlib.Path:
    """A directory holding `tests/` (a symlink to the suite's) and a bare `pytest.ini`:
    the repository's own pytest.ini (xdist, markers, `-m`) must not apply."""
    run_dir = pathlib.Path(tempfile.mkdtemp(prefix="peer_suite_"))
    (run_dir / "tests").symlink_to(suite / "tests", target_is_directory=True)
    (run_dir / "pytest.ini").write_text("[pytest]\n")
    (run_dir / "junit").mkdir()
    return run_dir


def run_file(run_dir: pathlib.Path, rel: str, timeout: float, python: str,
             test_timeout: float = DEFAULT_TEST_TIMEOUT,
             known_hung: frozenset[str] = frozenset()) -> dict:
    """One test file in pytest processes: its outcomes, or why there are none.

    A test that runs past `test_timeout` (one that waits for a cluster that legacy's test
    only mocked one layer down) is killed with its process; the file then runs again
    without it and without the tests already reported, so one hang costs one test, not the
    file. Tests in `known_hung` (hung when the record was made) are not run at all: they
    cannot drop, and each would cost `test_timeout`. `timeout` bounds the file's whole time,
    as the baseline's limit did.
    """
    start = time.monotonic()
    outcomes = {test_id: "hung" for test_id in known_hung if file_of(test_id) == rel}
    messages = {test_id: "hung in the record: not run" for test_id in outcomes}
    while True:
        status, returncode, output, lines = _pytest_once(
            run_dir, rel, python, sorted(outcomes), start + timeout, test_timeout)
        reported, reasons, running = progress_outcomes(lines)
        outcomes.update(reported)
        messages.update(reasons)
        if status != "hung":
            break
        outcomes[running] = "hung"
        messages[running] = f"hung: no end in {test_timeout:.0f} s; killed, the file ran on"
    xml_path = _junit_path(run_dir, rel)
    if status == "ok" and xml_path.is_file():
        junit_outcomes, junit_messages = parse_junit(xml_path, rel)
        outcomes.update(junit_outcomes)
        messages.update(junit_messages)
    elif status == "ok":
        status = "no junit"  # The process died before pytest wrote its report.
    result = {"file": rel, "status": status, "returncode": returncode,
              "seconds": round(time.monotonic() - start, 1), "outcomes": outcomes,
              "messages": messages}
    if status != "ok":
        result["tail"] = output[-2000:]
    return result


def _junit_path(run_dir: pathlib.Path, rel: str) -> pathlib.Path:
    return run_dir / "junit" / (rel.replace("/", "__") + ".xml")


def _pytest_once(run_dir: pathlib.Path, rel: str, python: str, deselect: list[str],
                 deadline: float, test_timeout: float) -> tuple[str, int, str, list[str]]:
    """One pytest process: (status, returncode, output, progress lines). Status is `ok`,
    `timeout` (the file's deadline passed) or `hung` (one test ran past `test_timeout`)."""
    xml_path = _junit_path(run_dir, rel)
    xml_path.unlink(missing_ok=True)
    progress = run_dir / "junit" / (rel.replace("/", "__") + ".progress")
    progress.write_text("")
    command = [python, "-m", "pytest", rel, "-q", "-rfE", "-p", "no:cacheprovider",
               "-p", PLUGIN, f"--junitxml={xml_path}"]
    skip = progress.with_suffix(".skip")
    skip.write_text("".join(f"{test_id}\n" for test_id in deselect))
    env = dict(_child_env(), **{PROGRESS_VAR: str(progress), SKIP_VAR: str(skip)})
    status = "ok"
    with tempfile.TemporaryFile() as out:
        # A session of its own, so that a kill ends the test process and its children only.
        proc = subprocess.Popen(command, cwd=run_dir, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        while proc.poll() is None:
            time.sleep(0.5)
            lines = progress.read_text(encoding="utf-8").splitlines()
            if time.monotonic() > deadline:
                status = "timeout"
            elif _running_for(lines) > test_timeout:
                status = "hung"
            else:
                continue
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        out.seek(0)
        output = out.read().decode("utf-8", "replace")
    return status, proc.returncode, output, progress.read_text(encoding="utf-8").splitlines()


def _running_for(lines: list[str]) -> float:
    """Seconds the test that started last and has not ended has run; 0 when none runs."""
    for line in reversed(lines):
        fields = line.split("\t")
        if fields[0] == "end":
            return 0.0
        if fields[0] == "start":
            return time.time() - float(fields[2])
    return 0.0


def progress_outcomes(lines: list[str]) -> tuple[dict[str, str], dict[str, str], str | None]:
    """(outcome by id of every test the plugin saw report, first failure line by id, the
    test still running or None).

    Junit's rules: a failed call is `failed`, a failed setup or teardown `error`, a skip in
    any phase `skipped`; a test reported twice keeps the worse outcome.
    """
    outcomes: dict[str, str] = {}
    messages: dict[str, str] = {}
    running = None
    for line in lines:
        fields = line.split("\t")
        if fields[0] == "start":
            running = fields[1]
        elif fields[0] == "end":
            running = None
        elif fields[0] == "report" and len(fields) == 5:
            nodeid, when, outcome, message = fields[1:]
            if outcome == "failed":
                outcome = "failed" if when == "call" else "error"
            elif outcome == "passed" and when != "call":
                continue
            if nodeid not in outcomes or _RANK[outcome] < _RANK[outcomes[nodeid]]:
                outcomes[nodeid] = outcome
                if message:
                    messages[nodeid] = message
    return outcomes, messages, running


def run_files(suite: pathlib.Path, files: list[str], jobs: int, timeout: float,
              python: str, weights: dict[str, int],
              test_timeout: float = DEFAULT_TEST_TIMEOUT,
              known_hung: frozenset[str] = frozenset()) -> dict[str, dict]:
    """Runs the files, `jobs` processes at a time, the biggest first; results by file."""
    run_dir = make_run_dir(suite)
    results: dict[str, dict] = {}
    try:
        order = sorted(files, key=lambda f: -weights.get(f, 0))
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(run_file, run_dir, rel, timeout, python, test_timeout,
                                   known_hung): rel
                       for rel in order}
            for future in concurrent.futures.as_completed(futures):
                result = future.result()
                results[result["file"]] = result
                counts = collections.Counter(result["outcomes"].values())
                print(f"peer_suite: {result['file']}: {result['status']} in "
                      f"{result['seconds']} s {dict(sorted(counts.items()))}", flush=True)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    return results


def outcomes_of(results: dict[str, dict]) -> dict[str, str]:
    """Every test's outcome; a file without a (whole) report is also one id, its status."""
    merged: dict[str, str] = {}
    for rel, result in results.items():
        merged.update(result["outcomes"])  # A timed-out file keeps the tests that ended.
        if result["status"] != "ok":
            merged[rel] = result["status"]
    return merged


def summary_rows(baseline: dict[str, str], outcomes: dict[str, str],
                 files: list[str]) -> list[tuple[str, int, int]]:
    """(file, legacy-passing tests, of those passing here) for each file."""
    rows = []
    for rel in files:
        legacy = [t for t, o in baseline.items() if file_of(t) == rel and o == "passed"]
        rows.append((rel, len(legacy), sum(outcomes.get(t) == "passed" for t in legacy)))
    return rows


def format_table(rows: list[tuple[str, int, int]]) -> str:
    width = max([len(r[0]) for r in rows] + [4])
    lines = [f"{'file':<{width}}  legacy  here      %"]
    for rel, legacy, here in rows:
        percent = f"{100 * here / legacy:5.1f}" if legacy else "    -"
        lines.append(f"{rel:<{width}}  {legacy:6d}  {here:4d}  {percent}")
    legacy = sum(r[1] for r in rows)
    here = sum(r[2] for r in rows)
    total = f"{100 * here / legacy:5.1f}" if legacy else "    -"
    lines.append(f"{'overall':<{width}}  {legacy:6d}  {here:4d}  {total}")
    return "\n".join(lines)


def failure_messages(baseline: dict[str, str], results: dict[str, dict]) -> dict[str, str]:
    """Each legacy-passing test that does not pass here, with why: its first failure line,
    its file's (an import that failed), or the file's status (`timeout`, `no junit`)."""
    found = {}
    for test_id, legacy in baseline.items():
        result = results.get(file_of(test_id))
        if legacy != "passed" or result is None:
            continue
        if result["status"] != "ok" and test_id not in result["outcomes"]:
            found[test_id] = result["status"]
        elif result["outcomes"].get(test_id) != "passed":
            # The test's own message, else its class's or file's (a collection error).
            parts = test_id.split("::")
            owners = ["::".join(parts[:n]) for n in range(len(parts), 0, -1)]
            if test_id not in result["outcomes"]:  # pytest stops after a collection error.
                owners += [o for o, v in result["outcomes"].items()
                           if v == "error" and o.count("::") <= 1]
            found[test_id] = next((result["messages"][o] for o in owners
                                   if result["messages"].get(o)), "not collected")
    return found


def top_messages(baseline: dict[str, str], results: dict[str, dict], count: int) -> str:
    """The commonest failures of legacy-passing tests, numbers and quoted names folded so
    that one cause counts once."""
    counter: collections.Counter = collections.Counter(
        re.sub(r"\d+", "N", re.sub(r"'[^']*'", "'…'", message))[:160]
        for message in failure_messages(baseline, results).values())
    return "\n".join(f"{n:5d}  {m}" for m, n in counter.most_common(count))


def compare(record: dict, outcomes: dict[str, str], files: list[str]) -> tuple[list, list]:
    """(drops, newly passing): ids of the run files the record holds as passing that do
    not pass now, and ids passing now that the record does not hold as passing."""
    recorded = record["outcomes"]
    chosen = set(files)
    drops = sorted(t for t, o in recorded.items()
                   if o == "passed" and file_of(t) in chosen and outcomes.get(t) != "passed")
    new = sorted(t for t, o in outcomes.items() if o == "passed" and recorded.get(t) != "passed")
    return drops, new


def make_record(baseline: dict[str, str], outcomes: dict[str, str], files: list[str],
                old: dict | None = None) -> dict:
    """The record of a run of `files`; with `old`, the old record with those files' entries
    replaced (re-recording some files keeps the others)."""
    if old:
        kept = {t: o for t, o in old["outcomes"].items() if file_of(t) not in set(files)}
        outcomes = {**kept, **outcomes}
        files = sorted(set(old["files"]) | set(files))
    rows = summary_rows(baseline, outcomes, files)
    return {
        "suite": "tensorflow-estimator 2.15.0 unit tests, ../shared/peer_suite (README.md)",
        "command": "python dev/peer_suite.py --jobs 2 --write-record RECORD [FILE ...]",
        # Four files skip their pandas cases' bodies without pandas (legacy ran with it):
        # those pass vacuously, so record with pandas importable.
        "pandas": _pandas_version(),
        "legacy_passing": sum(r[1] for r in rows),
        "passing_of_legacy_passing": sum(r[2] for r in rows),
        "files": {rel: {"legacy_passing": legacy, "passing": here}
                  for rel, legacy, here in rows},
        "outcomes": dict(sorted(outcomes.items())),
    }


def _pandas_version() -> str | None:
    """pandas' version where the test processes run (this interpreter), or None."""
    try:
        from importlib import metadata
        return metadata.version("pandas")
    except Exception:  # pylint: disable=broad-except  # Not installed: no pandas.
        return None


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help="test files (default: every file, or the "
                        "record's files with a passing test under --check)")
    parser.add_argument("--jobs", type=int, default=1, help="pytest processes at a time")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help="seconds per file before its process is killed")
    parser.add_argument("--test-timeout", type=float, default=DEFAULT_TEST_TIMEOUT,
                        help="seconds per test before it is killed and its file runs on")
    parser.add_argument("--out", help="write every file's results (outcomes, first failure "
                        "lines, seconds) as JSON here")
    parser.add_argument("--check", metavar="RECORD", help="exit 1 on a drop below RECORD")
    parser.add_argument("--write-record", metavar="RECORD", help="record this run's level")
    parser.add_argument("--messages", type=int, default=15, metavar="N",
                        help="print the N commonest failures of legacy-passing tests")
    parser.add_argument("--python", default=sys.executable, help="the test processes' python")
    return parser.parse_args(argv)


def _files_to_run(args: argparse.Namespace, known: list[str]) -> list[str]:
    if args.files:
        return resolve_files(args.files, known)
    if args.check:
        passing = {file_of(t) for t, o in load_json(args.check)["outcomes"].items()
                   if o == "passed"}
        return [f for f in known if f in passing]
    return known


def _check(args, suite, baseline, results, files, weights, known_hung) -> int:
    """Compares with the record; files with a drop run once more before it counts."""
    record = load_json(args.check)
    if (record.get("pandas") is None) != (_pandas_version() is None):
        print(f"peer_suite: WARNING: pandas {_pandas_version()} here, {record.get('pandas')} "
              "in the record: the pandas cases of four files differ", flush=True)
    drops, new = compare(record, outcomes_of(results), files)
    again = sorted({file_of(t) for t in drops})
    if again:
        print(f"peer_suite: {len(drops)} recorded passes failed; running {len(again)} "
              "file(s) once more", flush=True)
        second = outcomes_of(run_files(suite, again, args.jobs, args.timeout, args.python,
                                       weights, args.test_timeout, known_hung))
        flaky = [t for t in drops if second.get(t) == "passed"]
        drops = [t for t in drops if t not in flaky]
        for test_id in flaky:
            print(f"peer_suite: flaky (passed on the second run): {test_id}")
    if new:
        print(f"peer_suite: {len(new)} test(s) pass that the record does not hold as passing; "
              f"re-record with: python dev/peer_suite.py --jobs 2 --write-record {args.check}")
    for test_id in drops:
        message = results.get(file_of(test_id), {}).get("messages", {}).get(test_id, "")
        print(f"peer_suite: DROP {test_id}: {message or 'no report'}")
    print(f"peer_suite: {len(drops)} drop(s) below {args.check}")
    return 1 if drops else 0


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    suite = suite_dir()
    if suite is None:
        print(f"peer_suite: no suite: put shared/peer_suite beside this checkout "
              f"(../shared/peer_suite) or set {ENV_VAR}", file=sys.stderr)
        return 2
    baseline = load_json(suite / "legacy_baseline.json")
    known = legacy_files(baseline)
    files = _files_to_run(args, known)
    weights = collections.Counter(file_of(t) for t in baseline)
    start = time.monotonic()
    # Under --check, the tests the record holds as hung are not run (see run_file).
    known_hung = frozenset(t for t, o in load_json(args.check)["outcomes"].items()
                           if o == "hung") if args.check else frozenset()
    results = run_files(suite, files, args.jobs, args.timeout, args.python, weights,
                        args.test_timeout, known_hung)
    wall = time.monotonic() - start
    outcomes = outcomes_of(results)
    rows = summary_rows(baseline, outcomes, files)
    print(format_table(rows))
    print(f"peer_suite: {len(files)} file(s) in {wall:.0f} s wall, --jobs {args.jobs}")
    if args.messages:
        print("peer_suite: commonest failures of legacy-passing tests:")
        print(top_messages(baseline, results, args.messages))
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(
            {"wall_seconds": round(wall, 1), "jobs": args.jobs, "files": results},
            indent=1, sort_keys=True) + "\n")
    if args.write_record:
        path = pathlib.Path(args.write_record)
        old = load_json(path) if args.files and path.is_file() else None
        record = make_record(baseline, outcomes, files, old)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=0, sort_keys=False) + "\n")
    if args.check:
        return _check(args, suite, baseline, results, files, weights, known_hung)
    return 0


if __name__ == "__main__":
    sys.exit(main())
