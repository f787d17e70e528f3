"""Tests for eager_scope: the estimator works in scripts that turn eager execution off.

Turning eager off (`disable_eager_execution`, `disable_v2_behavior`) is process-wide, so the
acceptance runs are child processes running the fixture scripts in tests/scripts/eager_off/,
started together by one module fixture so their TensorFlow start-ups overlap; each test reads
back what its child wrote (report JSON, checkpoints, loss events, SavedModels). What can be
shown inside this process (a `with tf.Graph().as_default():` block also means "not executing
eagerly") is tested in-process.
"""
import glob
import json
import logging
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from tpu_estimator_compat.v1_state import eager_scope

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "scripts", "eager_off")
SWITCHES = os.path.join(SCRIPTS, "switches.py")
TIMEOUT_S = 420
LOG_LINE = "TensorFlow is not executing eagerly here"


class _Child:
    """One child process whose output goes to files (no pipe can fill up and block)."""

    def __init__(self, name, argv, out_dir, env):
        self.name = name
        self.report = os.path.join(out_dir, f"{name}.json")
        self.model_dir = os.path.join(out_dir, name)
        argv = [a.format(report=self.report, model_dir=self.model_dir) for a in argv]
        self._stdout = os.path.join(out_dir, f"{name}.stdout")
        self._stderr = os.path.join(out_dir, f"{name}.stderr")
        with open(self._stdout, "w") as out, open(self._stderr, "w") as err:
            self.process = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=out_dir)
        self.started = time.monotonic()
        self._result = None

    def result(self):
        """(report dict, stderr) of a child that exited 0; fails the test otherwise."""
        if self._result is None:
            try:
                self.process.wait(timeout=max(TIMEOUT_S - (time.monotonic() - self.started), 1))
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                pytest.fail(f"{self.name} did not finish within {TIMEOUT_S}s")
            with open(self._stdout) as out, open(self._stderr) as err:
                stdout, stderr = out.read(), err.read()
            assert self.process.returncode == 0, (
                f"{self.name} exited {self.process.returncode}:\n{stdout[-2000:]}\n"
                f"{stderr[-5000:]}")
            with open(self.report) as f:
                self._result = json.load(f), stderr
        return self._result


# The children each test reads: the fixture starts only those of the selected tests (the
# default run selects two of the five tests, so five of the seven children would be wasted).
_NEEDS = {
    "test_eager_off_trains_to_the_same_losses_as_eager_on": ("baseline", "eager_off"),
    "test_tf1_switches_with_eager_on_change_nothing_the_estimator_computes":
        ("baseline", "individual"),
    "test_disable_v2_behavior_trains_the_same_with_eager_off_as_on":
        ("v2_off", "v2_off_eager_on"),
    "test_tf1_script_with_its_own_graph_code_around_the_estimator": ("tf1",),
    "test_library_imported_after_eager_was_turned_off_runs_inside_a_user_graph": ("late",),
    "test_eager_off_strategy_on_an_absent_gpu_places_on_the_cpu": ("absent_gpu",),
}


@pytest.fixture(scope="module")
def children(tmp_path_factory, request):
    wanted = {name for item in request.session.items if item.module is request.module
              for name in _NEEDS.get(item.originalname, ())}
    out = str(tmp_path_factory.mktemp("eager_off"))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0",
               PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=os.path.dirname(HERE))
    python = [sys.executable]
    launcher = python + ["-m", "tpu_estimator_compat.run"]
    specs = {
        # The reference: TF2 behaviour, with the (no-op) enable switches thrown.
        "baseline": python + [SWITCHES, "baseline", "{model_dir}", "{report}"],
        "eager_off": launcher + ["--tf1_mode=off", SWITCHES, "eager_off", "{model_dir}",
                                 "{report}"],
        "individual": python + [SWITCHES, "individual", "{model_dir}", "{report}"],
        "v2_off": launcher + ["--tf1_mode=on", SWITCHES, "v2_off", "{model_dir}", "{report}"],
        "v2_off_eager_on": python + [SWITCHES, "v2_off_eager_on", "{model_dir}", "{report}"],
        # TF1 mode auto (on), absl app.run, 2 replicas, graph code around the estimator.
        "tf1": launcher + ["--cpu_replicas=2", os.path.join(SCRIPTS, "tf1_script.py"),
                           "--model_dir={model_dir}", "--report={report}"],
        # Imported after disable_eager_execution, estimator driven from a user graph block.
        "late": python + [os.path.join(SCRIPTS, "import_late.py"), "{model_dir}", "{report}"],
        "absent_gpu": python + [os.path.join(SCRIPTS, "absent_gpu.py"), "{model_dir}",
                                "{report}"],
    }
    started = {name: _Child(name, argv, out, env) for name, argv in specs.items()
               if name in wanted}
    yield started
    for child in started.values():
        if child.process.poll() is None:
            child.process.kill()
            child.process.wait()


def _losses(model_dir):
    """{step: loss} from the training events the child wrote."""
    losses = {}
    for path in glob.glob(os.path.join(model_dir, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == "loss":
                    losses[event.step] = value.simple_value
    return losses


def _checkpoint_step(model_dir):
    return int(tf.train.load_variable(tf.train.latest_checkpoint(model_dir), "global_step"))


def _served(export_dir, x):
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], export_dir)
        signature = meta.signature_def["serving_default"]
        return session.run(signature.outputs["logits"].name, {signature.inputs["x"].name: x})


# ---------------------------------------------------------------------------------------------
# Child processes.


@pytest.mark.slow
def test_eager_off_trains_to_the_same_losses_as_eager_on(children):
    baseline, baseline_err = children["baseline"].result()
    eager_off, eager_off_err = children["eager_off"].result()
    assert eager_off["view"]["executing_eagerly"] is False
    assert eager_off["view_after"]["executing_eagerly"] is False  # Nothing switched back.
    losses = _losses(children["eager_off"].model_dir)
    assert sorted(losses) == list(range(1, 11))
    assert losses == _losses(children["baseline"].model_dir)  # Bit for bit, 1 replica.
    assert eager_off["eval"] == baseline["eval"]
    assert eager_off["eval"]["global_step"] == 10 == _checkpoint_step(
        children["eager_off"].model_dir)
    assert eager_off["predictions"] == baseline["predictions"]
    x = np.array(eager_off["predictions"], np.float32)
    served = _served(eager_off["export_dir"], np.array(eager_off["predict_inputs"], np.float32))
    np.testing.assert_allclose(served, x, rtol=1e-5, atol=1e-6)
    assert eager_off_err.count(LOG_LINE) == 1
    assert "eager execution off" in eager_off_err
    assert LOG_LINE not in baseline_err


@pytest.mark.slow
def test_tf1_switches_with_eager_on_change_nothing_the_estimator_computes(children):
    baseline, _ = children["baseline"].result()
    individual, stderr = children["individual"].result()
    assert individual["view"] == {"executing_eagerly": True, "dimension_shapes": True,
                                  "control_flow_v2": False, "resource_variables": False}
    # model_fn sees TF1 shapes; its variables are the registry's resource variables (the
    # reference variable is the TF1 export graph's, where reference variables were asked for).
    assert ["Dimension", "ResourceVariable", "float32"] in individual["model_fn_saw"]
    assert _losses(children["individual"].model_dir) == _losses(
        children["baseline"].model_dir)
    assert individual["predictions"] == baseline["predictions"]
    assert LOG_LINE not in stderr


@pytest.mark.slow
def test_disable_v2_behavior_trains_the_same_with_eager_off_as_on(children):
    v2_off, stderr = children["v2_off"].result()
    eager_on, _ = children["v2_off_eager_on"].result()
    assert v2_off["view"]["executing_eagerly"] is False and eager_on["view"][
        "executing_eagerly"] is True
    assert _losses(children["v2_off"].model_dir) == _losses(
        children["v2_off_eager_on"].model_dir)
    assert v2_off["eval"] == eager_on["eval"] and v2_off["predictions"] == eager_on[
        "predictions"]
    # tf_keras's v1 dtype behaviour: a float64 input made a float64 layer, saved as such.
    assert ["Dimension", "ResourceVariable", "float64"] in v2_off["model_fn_saw"]
    checkpoint = tf.train.latest_checkpoint(children["v2_off"].model_dir)
    assert tf.train.load_variable(checkpoint, "wide/kernel").dtype == np.float64
    assert "TF1 mode: on (--tf1_mode=on)" in stderr
    assert stderr.count(LOG_LINE) == 1
    assert ("eager execution off, v2 behaviour off, TF1 TensorShape, v1 control flow, "
            "reference variables") in stderr


def test_tf1_script_with_its_own_graph_code_around_the_estimator(children):
    report, stderr = children["tf1"].result()
    assert report["tf_is_v1"] == "Tf1Module"  # TF1 mode auto switched on.
    assert report["pre"] == 1.0  # Placeholder + Session in the default graph, before.
    assert report["eval"]["global_step"] == 6 == _checkpoint_step(children["tf1"].model_dir)
    assert set(report["eval"]) == {"accuracy", "loss", "global_step"}
    assert ["Dimension", "MirroredVariable", "float64"] in report["model_fn_saw"]
    # The estimator added nothing to the script's default graph: no ops, no variables, so
    # the script's own `global_variables_initializer()` afterwards still works.
    assert report["ops_after_estimator"] == report["ops_before"]
    assert report["user_graph_global_variables"] == ["own"] and report["own_value"] == 6.0
    # The script's own tf.cond is v1 control flow, as it asked.
    assert {"Switch", "Merge"} <= set(report["user_graph_op_types"])
    assert not {"If", "StatelessIf"} & set(report["user_graph_op_types"])
    # predict's items were consumed by graph-mode code; eager never leaked out to it.
    assert report["eager_between_items"] == [False] * 10
    assert report["eager_after_close"] is False
    assert report["served_classes"] == report["classes"]
    assert report["trained_step"] == 6 and report["hidden_in_checkpoint"] is True
    assert stderr.count(LOG_LINE) == 1


def test_library_imported_after_eager_was_turned_off_runs_inside_a_user_graph(children):
    report, stderr = children["late"].result()
    model_dir = children["late"].model_dir
    assert report["eval"]["global_step"] == 10 == _checkpoint_step(model_dir)
    assert ["int", "MirroredVariable", "float32"] in report["model_fn_saw"]  # 2 replicas.
    assert report["in_graph"] is True and report["summed"] == 10.0
    assert report["ops_after"] == report["ops_before"]
    assert report["graph_collections"] == []  # No v1 collections written into it.
    assert len(report["classes"]) == 10
    assert report["exports"] and all(
        os.path.isfile(os.path.join(path, "saved_model.pb")) for path in report["exports"])
    assert glob.glob(os.path.join(model_dir, "eval", "events.out.tfevents.*"))
    assert f"train_and_evaluate: {LOG_LINE}" in stderr and stderr.count(LOG_LINE) == 1


def test_eager_off_strategy_on_an_absent_gpu_places_on_the_cpu(children):
    """tensorflow/models' r1 cifar10_test.py: eager off and a session run first fixed
    TensorFlow's soft placement off, so the estimator's variables on the strategy's
    `device:GPU:0` failed ("Could not satisfy device specification"); legacy's session
    (allow_soft_placement=True) put them on the CPU. The script's own graph mode keeps its
    setting afterwards."""
    report, _ = children["absent_gpu"].result()
    assert report == {"step": 3, "soft_placement_after": False}


# ---------------------------------------------------------------------------------------------
# In-process: a user's graph block is "not executing eagerly" too.


@pytest.fixture
def fresh_log(monkeypatch):
    monkeypatch.setattr(eager_scope, "_logged", type(eager_scope._logged)())  # pylint: disable=protected-access


def test_eager_callers_run_unchanged(fresh_log, caplog):
    graph = tf.compat.v1.get_default_graph()
    with caplog.at_level(logging.INFO), eager_scope.running_eagerly("f"):
        assert tf.executing_eagerly()
        assert tf.compat.v1.get_default_graph() is graph
    assert LOG_LINE not in caplog.text


def test_inside_a_user_graph_work_runs_eagerly_in_a_private_graph(fresh_log, caplog):
    lifted = []

    @tf.function
    def trace():
        with tf.init_scope():
            lifted.append(tf.executing_eagerly())
        return tf.constant(1)

    with tf.Graph().as_default() as user_graph:
        tf.compat.v1.placeholder(tf.float32)
        with caplog.at_level(logging.INFO):
            with eager_scope.running_eagerly("TPUEstimator.train"):
                assert tf.executing_eagerly()
                assert tf.compat.v1.get_default_graph() is not user_graph
                tf.compat.v1.add_to_collection("estimator_private", 1)
                assert int(trace()) == 1
            with eager_scope.running_eagerly("TPUEstimator.evaluate"):
                pass
        assert not tf.executing_eagerly()
        assert tf.compat.v1.get_default_graph() is user_graph
    assert lifted == [True]  # init_scope in the trace lifts to the eager switch.
    assert user_graph.get_all_collection_keys() == []
    assert [op.type for op in user_graph.get_operations()] == ["Placeholder"]
    assert caplog.text.count(LOG_LINE) == 1
    assert "TPUEstimator.train: " in caplog.text and "tf.Graph().as_default()" in caplog.text


class _Source:
    def __init__(self):
        self.closed_eagerly = None

    @eager_scope.eager_generator
    def items(self, n):
        try:
            for i in range(0, n, 2):  # Chunks of two items, each chunk made eagerly.
                yield [(j, tf.executing_eagerly()) for j in range(i, min(i + 2, n))]
        finally:
            self.closed_eagerly = tf.executing_eagerly()


def test_generator_makes_each_chunk_eagerly_and_never_runs_eager_between_items():
    source = _Source()
    with tf.Graph().as_default():
        between = []
        items = []
        for item in source.items(3):
            items.append(item)
            between.append(tf.executing_eagerly())
        assert items == [(0, True), (1, True), (2, True)] and between == [False] * 3
        assert source.closed_eagerly is True
        abandoned = _Source()
        generator = abandoned.items(5)
        assert next(generator) == (0, True)
        generator.close()
        assert abandoned.closed_eagerly is True and not tf.executing_eagerly()


def test_called_inside_a_tf_function_is_refused_with_the_fix():
    @tf.function
    def traced():
        with eager_scope.running_eagerly("TPUEstimator.train"):
            return tf.constant(0)

    with pytest.raises(RuntimeError, match=r"`TPUEstimator.train\(\)` was called inside a "
                                           r"tf.function.*outside any tf.function"):
        traced()


def test_tf1_switches_names_what_is_on():
    assert eager_scope.tf1_switches() == []
    tf.compat.v1.disable_v2_tensorshape()
    try:
        assert eager_scope.tf1_switches() == ["TF1 TensorShape"]
    finally:
        tf.compat.v1.enable_v2_tensorshape()


def test_on_own_thread_runs_outside_the_callers_scopes_and_raises_its_error():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    seen = {}

    def inner():
        seen["eager"] = tf.executing_eagerly()
        seen["strategy"] = tf.distribute.get_strategy()
        seen["graph"] = tf.compat.v1.get_default_graph()
        seen["scope"] = tf.compat.v1.get_variable_scope().name
        return 42

    outer_graph = tf.Graph()
    with strategy.scope(), outer_graph.as_default(), tf.compat.v1.variable_scope("outer"):
        assert eager_scope.on_own_thread("test", inner) == 42
        with pytest.raises(ValueError, match="from the thread"):
            eager_scope.on_own_thread("test", lambda: (_ for _ in ()).throw(
                ValueError("from the thread")))
    assert seen["eager"] is True and seen["scope"] == ""
    assert seen["strategy"] is not strategy and seen["graph"] is not outer_graph
