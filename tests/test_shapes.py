"""Tests for tpu_estimator_compat.shapes, and the model zoo under TF1's `TensorShape`s.

The helpers are tested in this process under both TensorShape modes (the conftest
`tensorshape` fixture switches and restores the process-wide mode). The zoo runs in child
processes, one per global mode, as real scripts switch it before anything else:
`disable_v2_tensorshape()` and `disable_v2_behavior()` (which also turns eager execution off)
cannot be undone reliably inside one test process. Each child trains, evaluates and predicts
zoo models on 1 and 2 replicas (tests/scripts/tf1_shapes/zoo_child.py) and reports what
model_fn and metric_fn saw; the default run takes two cases, one per eval path (the TPU
path's host metric_fn, the CPU path's metric_fn in the step); the `full` set (pytest.ini) takes
every zoo case and a TF2 baseline the v1-TensorShape results must equal.
"""

import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import test_model_zoo as tmz
from tpu_estimator_compat import shapes

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "scripts", "tf1_shapes", "zoo_child.py")
TIMEOUT_S = 600  # The default run's children: 35-45 s each on an idle 2-core machine.
# The sweep's: each child takes ~170 s of CPU (measured: 906 s wall on a machine with a load
# of 10 on 2 cores).
SWEEP_TIMEOUT_S = 2400
TF1_MODES = ("v2_tensorshape_off", "v2_behavior_off")
# One case per eval path: host metric_fn over gathered replicas (TPU path: dict
# eval_metrics, three metrics) and metric_fn in the step (use_tpu=False, eval_on_tpu=False).
DEFAULT_CASES = ("siamese", "segmenter_cpu")
FIXED_ROWS = 80  # zoo_child.FIXED_ROWS: two global batches of 32.


# ---------------------------------------------------------------------------------------------
# The helpers, in this process.


def test_static_dim_gives_ints_and_none_in_both_modes(tensorshape):
    shape = tf.TensorShape([3, None, 5])
    assert isinstance(shape[0], tf.compat.v1.Dimension) == (tensorshape == "tf1")
    dims = [shapes.static_dim(shape, i) for i in (0, 1, 2, -1)]
    assert dims == [3, None, 5, 5]
    assert [type(d) for d in dims] == [int, type(None), int, int]
    assert {shapes.static_dim(shape, 0): "a key"}  # Hashable: a Dimension is not.
    assert shapes.static_dim(shape, 1) is None  # `shape[1] is None` is False for TF1.
    assert shapes.static_dim(tf.TensorShape(None), 0) is None
    assert shapes.static_dim(tf.TensorSpec([7], tf.int32).shape, 0) == 7
    assert shapes.static_dim([tf.compat.v1.Dimension(4), None], 0) == 4
    with pytest.raises(IndexError):
        shapes.static_dim(tf.TensorShape([]), 0)


def test_static_dims_and_with_rows(tensorshape):
    assert shapes.static_dims(tf.TensorShape([None, 8, 1])) == [None, 8, 1]
    assert shapes.static_dims(tf.TensorShape([])) == []
    assert shapes.static_dims(tf.TensorShape(None)) is None
    assert shapes.static_dims([tf.compat.v1.Dimension(2), tf.compat.v1.Dimension(None)]) == [
        2, None]
    assert shapes.with_rows(tf.TensorShape([4, 3]), None).as_list() == [None, 3]
    assert shapes.with_rows(tf.TensorShape([None, 3]), 8).as_list() == [8, 3]
    assert shapes.with_rows(tf.TensorShape(None), 8).rank is None
    with pytest.raises(ValueError, match="scalar shape has no batch axis"):
        shapes.with_rows(tf.TensorShape([]), 8)


def test_traced_tensors_give_the_same_reads(tensorshape):
    """Inside a traced function, as the library reads model_fn's tensors."""
    reads = []

    @tf.function(input_signature=[tf.TensorSpec([None, 6], tf.float32)])
    def f(x):
        reads.append((shapes.static_dim(x.shape, 0), shapes.static_dim(x.shape, 1),
                      shapes.static_dims(tf.reshape(x, [-1, 2, 3]).shape)))
        return x

    f.get_concrete_function()
    assert reads == [(None, 6, [None, 2, 3])]


# ---------------------------------------------------------------------------------------------
# The zoo in child processes.


class _Child:
    """One zoo_child.py process; output to files, so no pipe can fill up and block it."""

    def __init__(self, mode, replicas, cases, out_dir, timeout_s):
        self.name = f"{mode}_{replicas.replace(',', '_')}"
        self.report = os.path.join(out_dir, f"{self.name}.json")
        self._log = os.path.join(out_dir, f"{self.name}.log")
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0",
                   PYTHONDONTWRITEBYTECODE="1",
                   PYTHONPATH=os.pathsep.join(filter(None, [os.path.dirname(HERE),
                                                            os.environ.get("PYTHONPATH")])))
        with open(self._log, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, CHILD, mode, self.report, replicas, ",".join(cases)],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=out_dir)
        self.started = time.monotonic()
        self.timeout_s = timeout_s
        self._result = None

    def result(self):
        if self._result is None:
            try:
                self.process.wait(
                    timeout=max(self.timeout_s - (time.monotonic() - self.started), 1))
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                pytest.fail(f"{self.name} did not finish within {self.timeout_s}s")
            with open(self._log) as f:
                log = f.read()
            assert self.process.returncode == 0, f"{self.name}:\n{log[-5000:]}"
            with open(self.report) as f:
                self._result = json.load(f)
        return self._result

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _start(out_dir, specs, timeout_s):
    return {(mode, replicas): _Child(mode, replicas, cases, out_dir, timeout_s)
            for mode, replicas, cases in specs}


@pytest.fixture(scope="module")
def children(tmp_path_factory, request):
    """The selected TF1 modes, 1 and 2 replicas, the default cases: a process per mode, side
    by side (the default run selects one mode; the other is `slow`)."""
    modes = {item.callspec.params["mode"] for item in request.session.items
             if item.module is request.module and "children" in item.fixturenames
             and "mode" in getattr(getattr(item, "callspec", None), "params", {})}
    started = _start(str(tmp_path_factory.mktemp("tf1_shapes")),
                     [(mode, "1,2", DEFAULT_CASES) for mode in TF1_MODES if mode in modes],
                     TIMEOUT_S)
    yield started
    for child in started.values():
        child.kill()


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Every zoo case in both TF1 modes and the TF2 baseline, 1 and 2 replicas."""
    cases = list(tmz.CASES)
    started = _start(str(tmp_path_factory.mktemp("tf1_shapes_sweep")),
                     [(mode, "1,2", cases) for mode in ("baseline",) + TF1_MODES],
                     SWEEP_TIMEOUT_S)
    yield started
    for child in started.values():
        child.kill()


def _on_tpu(case):
    return case.use_tpu and case.eval_on_tpu


def _check_case(mode, key, outcome):
    """What legacy would have given this case's model_fn and metric_fn, and its results."""
    name = key.split("@")[0]
    case = tmz.CASES[name]
    assert "error" not in outcome, f"{mode} {key}:\n{outcome['error']}"
    assert outcome["steps"] == ["train", "evaluate", "predict", "evaluate_fixed"]
    seen = outcome["seen"]
    # model_fn got TF1 shapes: Dimensions, and `.value` works, whatever the estimator did.
    entries = [e for calls in seen["model_fn"].values() for e in calls]
    assert entries and all(e["type"] == "Dimension" and e["last_value"] == e["dims"][-1]
                           for e in entries if e["rank"]), (mode, key, seen["model_fn"])
    # metric_fn got a static batch axis where legacy gave one: TPU evaluation concatenated
    # the replicas' fixed batches (the zoo's partial last batch: its 4 real rows), and full
    # batches on every path.
    builds = {k: [b["dims"][0] for b in v] for k, v in seen["metric_fn"].items()}
    if _on_tpu(case):
        assert builds["zoo"] == [tmz.EVAL_BATCH, tmz.NUM_EVAL % tmz.EVAL_BATCH], (mode, key)
        # Three full batches and the last one's 4 rows: unet3d's float size, per update.
        assert outcome["eval"]["static_size"] == (3 * 32 + 4) / 4 * _row_size(outcome)
    assert builds["fixed"] and set(builds["fixed"]) == {tmz.EVAL_BATCH}, (mode, key, builds)
    for results, extra in ((outcome["eval"], ("static_size",) if _on_tpu(case) else ()),
                           (outcome["eval_fixed"], ("static_size",))):
        assert sorted(results) == sorted(case.metrics + ("loss", "global_step") + extra)
        assert results["global_step"] == tmz.STEPS
        assert all(math.isfinite(v) for v in results.values()), results
    assert outcome["eval_fixed"]["static_size"] == tmz.EVAL_BATCH * _row_size(outcome)
    assert len(outcome["predictions"]) == tmz.NUM_PREDICT


def _row_size(outcome):
    """Elements per row of the first eval_metrics tensor (its static shape's tail)."""
    dims = outcome["seen"]["metric_fn"]["fixed"][0]["dims"]
    return int(np.prod(dims[1:]))


@pytest.mark.slow
@pytest.mark.slow_cases('v2_tensorshape_off')
@pytest.mark.parametrize("mode", TF1_MODES)
def test_zoo_trains_evaluates_and_predicts_with_tf1_shapes(children, mode):
    report = children[(mode, "1,2")].result()
    assert report["dimension"] is True
    assert report["eager"] is (mode == "v2_tensorshape_off")
    assert sorted(report["cases"]) == sorted(f"{n}@{r}" for n in DEFAULT_CASES for r in (1, 2))
    for key, outcome in report["cases"].items():
        _check_case(mode, key, outcome)
    for name in DEFAULT_CASES:  # The same 80 rows, after the same steps, on 1 and 2.
        one, two = (report["cases"][f"{name}@{r}"]["eval_fixed"] for r in (1, 2))
        assert one.keys() == two.keys()
        for metric in one:
            np.testing.assert_allclose(two[metric], one[metric], rtol=1e-4, err_msg=metric)


@pytest.mark.full  # ~500 s of CPU for the three children.
@pytest.mark.parametrize("mode", TF1_MODES)
def test_every_zoo_model_with_tf1_shapes(sweep, mode):
    report = sweep[(mode, "1,2")].result()
    for key, outcome in report["cases"].items():
        _check_case(mode, key, outcome)


@pytest.mark.full
def test_tf1_tensorshape_computes_what_tf2_does(sweep):
    """TF1 shapes alone change nothing the estimator computes, bit for bit."""
    baseline = sweep[("baseline", "1,2")].result()
    tf1 = sweep[("v2_tensorshape_off", "1,2")].result()
    assert baseline["dimension"] is False
    for key, outcome in tf1["cases"].items():
        reference = baseline["cases"][key]
        assert "error" not in reference, f"baseline {key}:\n{reference['error']}"
        for part in ("eval", "eval_fixed", "predictions"):
            assert outcome[part] == reference[part], (key, part)
