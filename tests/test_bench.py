"""Smoke test for `python -m bench`: a tiny configuration end to end, in a subprocess.

Runs the real harness (data generation, two contender processes, report) on the MLP with
short windows, and checks the table it prints has rows with numeric ratios and verdicts.
It does not check the ratios' values: timings on a shared CI machine are noise at this size.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from bench import harness

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROW = re.compile(r"^\| mlp \| 1 \| 10 \| (?P<figure>[^|]+?) \| shim (?P<shim>[^|]+) \| "
                 r"(?P<ref>[^|]+) \| (?P<ratio>[0-9.]+)(?: \[[^]]*\])? \| [^|]+ \| "
                 r"(?P<result>PASS|FAIL) \|$", re.M)


# The whole harness end to end (~35-65 s on a busy 2-core machine); the default run
# keeps the unit tests of its parts.
@pytest.mark.slow
def test_bench_prints_ratio_rows():
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--workloads", "mlp", "--contenders", "shim,tf2",
         "--steps-per-call", "10", "--replicas", "1", "--repeats", "1", "--scale", "0.1",
         "--cpu-allocator", "bfc"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=170)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {m["figure"]: m for m in ROW.finditer(proc.stdout)}
    assert set(rows) == {"train steps/s", "peak RSS"}, proc.stdout
    assert "CPU allocator bfc (`TF_CPU_ALLOCATOR_USE_BFC`=true" in proc.stdout, proc.stdout
    for row in rows.values():
        assert float(row["ratio"]) > 0, row.group(0)
        assert row["ref"].startswith("tf2 "), row.group(0)


@pytest.mark.parametrize("allocator, value", [("malloc", "false"), ("bfc", "true")])
@pytest.mark.parametrize("stack", ["new", "legacy"])
def test_cpu_allocator_pinned_for_every_contender(monkeypatch, stack, allocator, value):
    # The caller's own setting must not leak into one contender and not the other.
    monkeypatch.setenv("TF_CPU_ALLOCATOR_USE_BFC", "false" if value == "true" else "true")
    env = harness._env(stack, "/code", allocator)
    assert env["TF_CPU_ALLOCATOR_USE_BFC"] == value
    assert env["TF_ENABLE_ONEDNN_OPTS"] == "0"


def test_marginal_rate_keeps_each_size_s_fastest_call(monkeypatch):
    """A call that ran at half speed (finding 15: one core idle) must not set the figure."""
    from bench import common

    durations = iter([0.1, 2.0, 0.1, 1.0, 0.1, 1.0])  # small, big (slow), small, big, ...
    monkeypatch.setattr(common, "timed", lambda fn: next(durations))
    rate, overhead = common.marginal_rate(lambda steps: None, small=1, big=101,
                                          batch_size=128, repeats=3)
    assert rate == pytest.approx(100 * 128 / 0.9)
    assert overhead == pytest.approx(0.1 - 0.9 / 100)


def test_launcher_mode_gives_the_shim_what_its_launcher_picks_and_others_tf_defaults():
    """The launcher turns BFC on for several CPU replicas only (run.cpu_allocator)."""
    assert harness.allocator_for("launcher", "shim", 8) == "bfc"
    assert harness.allocator_for("launcher", "shim_nosum", 2) == "bfc"
    assert harness.allocator_for("launcher", "shim", 1) == "malloc"
    assert {harness.allocator_for("launcher", c, 8) for c in ("tf2", "raw", "keras", "legacy")} == {
        "malloc"}
    assert harness.allocator_for("malloc", "shim", 8) == "malloc"
    assert harness.allocator_for("bfc", "tf2", 1) == "bfc"


def test_launcher_mode_gives_the_shim_the_launchers_tfg_setting_only(monkeypatch):
    """run.tfg_optimizer's default, under the variable the library reads (strategy_state.py)."""
    from tpu_estimator_compat.session import strategy_state as runtime

    assert harness.TFG_ENV == runtime.TFG_OPTIMIZER_ENV
    assert harness.launcher_env("launcher", "shim") == {harness.TFG_ENV: "off"}
    assert harness.launcher_env("launcher", "shim_nosum") == {harness.TFG_ENV: "off"}
    assert all(harness.launcher_env("launcher", c) == {} for c in ("tf2", "raw", "legacy"))
    assert harness.launcher_env("bfc", "shim") == harness.launcher_env("malloc", "shim") == {}
    # The caller's own setting reaches no contender; the launcher's reaches the shim's.
    monkeypatch.setenv(harness.TFG_ENV, "off")
    assert harness.TFG_ENV not in harness._env("new", "/code", "malloc")
    assert harness._env("new", "/code", "bfc", {harness.TFG_ENV: "off"})[harness.TFG_ENV] == "off"


def test_matrix_runs_each_contender_where_it_applies():
    runs = harness.matrix(harness.Options(workloads=("mlp64", "cnn", "bert", "dlrm")))
    labels = {run.label for run in runs}
    assert "raw/mlp64/r1/k100" in labels and "shim_nosum/mlp64/r1/k100" in labels
    assert not any(l.startswith(("raw/cnn", "shim_nosum/cnn", "raw/mlp64/r8")) for l in labels)
    # bert: start-up on 1, 2 and 8 replicas, legacy on one; dlrm at its own 50 steps a loop.
    assert {l for l in labels if "/bert/" in l} == {
        "shim/bert/r1/k1", "tf2/bert/r1/k1", "legacy/bert/r1/k1", "shim/bert/r2/k1",
        "tf2/bert/r2/k1", "shim/bert/r8/k1", "tf2/bert/r8/k1"}
    assert {l for l in labels if "/dlrm/" in l} == {
        "shim/dlrm/r1/k50", "tf2/dlrm/r1/k50", "shim/dlrm/r8/k50", "tf2/dlrm/r8/k50"}


def test_bert_runner_finds_its_model_from_the_frozen_bench_copy(tmp_path):
    """The harness runs contenders from a copy of bench/ alone (the BERT rows once all failed
    with `No module named 'classifier_model'` that way): run_bert must find legacy_models/bert
    through the repository on PYTHONPATH, as `_env` sets it."""
    code = harness.prepare_code(str(tmp_path), None)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([code, harness.REPO]))
    found = subprocess.run(
        [sys.executable, "-c", "from bench import run_bert; print(run_bert.bert_dir())"],
        cwd=code, env=env, stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
    assert found == os.path.join(harness.REPO, "legacy_models", "bert")


def test_report_has_rows_only_for_the_figures_a_workload_measures():
    """BERT's runner times start-up only: its NaN steps/s must not become n/a target rows."""
    from bench import report

    nan = float("nan")
    results = [
        {"contender": c, "workload": "bert", "replicas": 8, "steps_per_call": 1, "repeat": 0,
         "time_to_first_step": t, "peak_rss_mb": m, "train_steps_per_sec": nan,
         "train_cpu_ms_per_step": nan}
        for c, t, m in (("shim", 80.0, 11000.0), ("tf2", 50.0, 12000.0))]
    figures = {row.target.figure for row in report.rows(results)}
    assert figures == {"time_to_first_step", "peak_rss_mb"}


def test_results_md_part_keeps_the_rows_with_a_target_and_says_where_the_rest_is():
    """RESULTS.md gets the targeted rows; the machine is the one the results recorded."""
    from bench import __main__ as bench_main

    def result(contender, steps, rss):
        return {"contender": contender, "workload": "mlp", "replicas": 1, "steps_per_call": 10,
                "repeat": 0, "load1_before": 1.0, "tf_version": "2.21.0",
                "train_steps_per_sec": steps, "train_cpu_ms_per_step": 1.0,
                "time_to_first_step": 0.3, "peak_rss_mb": rss}

    results = [result("shim", 110.0, 600.0), result("tf2", 100.0, 600.0)]
    # A CNN row and the repeat's peak matmul give the full report its compute efficiency.
    results += [dict(result("shim", 9.0, 800.0), workload="cnn"),
                {"kind": "peak", "repeat": 0, "matmul_flops_per_sec": 1e11, "load1_before": 1.0}]
    context = ["Command: `x`.", "Machine: 2 cores (Some CPU), 24 GiB RAM."]
    part = bench_main.render(results, context, full=False, source="bench/results/r.jsonl")
    full = bench_main.render(results, context)
    assert "### Compute efficiency" in full
    assert "| info |" in full and "| info |" not in part
    assert "### Absolute figures" in full and "### Absolute figures" not in part
    assert "### Compute efficiency" not in part
    assert "| mlp | 1 | 10 | train steps/s | shim 110.0 | tf2 100.0 | 1.10 | >= 0.97 | PASS |" in part
    assert "`.venv/bin/python -m bench --from-json bench/results/r.jsonl`" in part
    assert "- Machine: 2 cores (Some CPU), 24 GiB RAM; TensorFlow 2.21.0" in part
    assert part.count("Machine:") == 1
    unrecorded = bench_main.render(results, context[:1], full=False)
    assert "Machine: not recorded with these results (rendered on " in unrecorded
    assert "the run's printed report (no `--json` file was kept)" in unrecorded

def test_call_cost_fixed_cost_is_the_intercept_of_the_fastest_calls():
    from bench import call_cost

    times = {("shim", "train", 20): [3.5, 3.0], ("shim", "train", 100): [11.0, 12.0],
             ("shim", "evaluate", 1): [0.5], ("shim", "evaluate", 21): [2.5]}
    figures = call_cost.compute_figures(times)["shim"]
    assert figures["train_per_step_s"] == pytest.approx(0.1)
    assert figures["train_fixed_s"] == pytest.approx(1.0)
    assert figures["train_steps_per_sec_100"] == pytest.approx(100 / 11.0)
    assert figures["evaluate_fixed_s"] == pytest.approx(0.4)
    assert "predict_fixed_s" not in figures  # Not measured: no figure, not a wrong one.
    # With a 1-step call the slope stays the 20/100 one; the intercept goes through 1 step.
    times[("shim", "train", 1)] = [1.3, 1.25]
    figures = call_cost.compute_figures(times)["shim"]
    assert figures["train_per_step_s"] == pytest.approx(0.1)
    assert figures["train_fixed_s"] == pytest.approx(1.15)


def test_call_cost_interleave_alternates_sides_and_sizes_and_records_every_call():
    from bench import call_cost

    calls, recorded = [], []

    def side(name):
        def call(kind, n):
            calls.append((name, kind, n))
            return float(len(calls))  # Seconds: the call's position, to check the keys.
        return call

    times = call_cost.interleave({"a": side("a"), "b": side("b")}, 2, recorded.append)
    small, big = call_cost.SMALL, call_cost.BIG
    assert calls[:6] == [("a", "train", 1), ("b", "train", 1), ("a", "train", small),
                         ("b", "train", small), ("a", "train", big), ("b", "train", big)]
    second = calls[14:20]  # The second round reverses the sides and the sizes.
    assert second == [("b", "train", big), ("a", "train", big), ("b", "train", small),
                      ("a", "train", small), ("b", "train", 1), ("a", "train", 1)]
    assert len(calls) == len(recorded) == 2 * 2 * (3 + 2 + 2)
    assert times[("a", "train", small)] == [3.0, 18.0]
    assert [r["round"] for r in recorded[:14]] == [0] * 14
    assert {(r["side"], r["kind"], r["steps"]) for r in recorded} == set(times)


def test_call_cost_children_get_their_users_process_settings():
    """The shim as its launcher runs it on 8 replicas; the hand loop on TF's defaults,
    whatever the caller set."""
    from bench import call_cost

    base = {"TF_CPU_ALLOCATOR_USE_BFC": "true", harness.TFG_ENV: "off", "PYTHONPATH": "/x"}
    shim = call_cost.child_env("shim", 8, base)
    hand = call_cost.child_env("tf2", 8, base)
    assert call_cost.settings_of(shim) == {"TF_CPU_ALLOCATOR_USE_BFC": "true",
                                           harness.TFG_ENV: "off"}
    assert call_cost.settings_of(hand) == {"TF_CPU_ALLOCATOR_USE_BFC": "false",
                                           harness.TFG_ENV: None}
    assert call_cost.child_env("shim_noseed", 8, {})["TF_CPU_ALLOCATOR_USE_BFC"] == "true"
    assert call_cost.child_env("shim", 1, base)["TF_CPU_ALLOCATOR_USE_BFC"] == "false"
    for env in (shim, hand):
        assert env["TF_ENABLE_ONEDNN_OPTS"] == "0"
        assert env["PYTHONPATH"].split(os.pathsep) == [REPO, "/x"]
    # One allocator for both sides (the allocator's share of a ratio), TF's TFG setting.
    for side in ("shim", "tf2"):
        assert call_cost.settings_of(call_cost.child_env(side, 8, base, mode="malloc")) == {
            "TF_CPU_ALLOCATOR_USE_BFC": "false", harness.TFG_ENV: None}
        assert call_cost.child_env(side, 8, base, mode="bfc")["TF_CPU_ALLOCATOR_USE_BFC"] == "true"


def test_call_cost_child_serves_calls_until_end_of_input():
    import io

    from bench import call_cost

    ran = []
    fns = {"train": ran.append, "evaluate": ran.append, "predict": ran.append}
    out = io.StringIO()
    served = call_cost.serve(fns, io.StringIO("train 20\n\nevaluate 1\n"), out)
    lines = out.getvalue().splitlines()
    assert served == 2 and ran == [20, 1]
    assert lines[0] == call_cost.READY
    timed = [json.loads(line[len(call_cost.TIMED):]) for line in lines[1:]]
    assert [(t["kind"], t["steps"]) for t in timed] == [("train", 20), ("evaluate", 1)]
    assert all(t["seconds"] >= 0 for t in timed)
    with pytest.raises(ValueError, match="unknown call kind 'fit'"):
        call_cost.serve(fns, io.StringIO("fit 3\n"), io.StringIO())


def test_probe_step_ops_table_lists_the_costliest_types_and_every_count_that_differs():
    import collections

    from bench import probe_step_ops

    nodes = {"shim": collections.Counter({"MatMul": 4, "ResourceApplyGradientDescent": 8,
                                          "Const": 5}),
             "tf2": collections.Counter({"MatMul": 4, "Mul": 16, "Const": 5})}
    ms = {"shim": collections.Counter({"MatMul": 30.0, "ResourceApplyGradientDescent": 2.0}),
          "tf2": collections.Counter({"MatMul": 28.0, "Mul": 9.0})}
    rows = probe_step_ops.table(nodes, ms, top=1).splitlines()
    assert rows[2] == "| MatMul | 4 | 4 | 30 | 28 |"
    body = {row.split(" | ")[0][2:] for row in rows[3:]}
    assert body == {"Mul", "ResourceApplyGradientDescent", "all"}  # Const: same count, no time.
    assert rows[-1] == "| all | 17 | 25 | 32 | 37 |"
    assert probe_step_ops._OP_EVENT.match("while/body/_1/dense/MatMul:MatMul")["type"] == "MatMul"
    assert probe_step_ops._OP_EVENT.match("Iterator::Root::Prefetch") is None
