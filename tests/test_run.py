"""Tests for tpu_estimator_compat.run: unchanged legacy scripts run through the launcher.

The acceptance runs are real subprocesses (`python -m tpu_estimator_compat.run SCRIPT ...`),
started together by one module fixture so their TensorFlow start-ups overlap on a 2-core
machine; each test then waits for its own. The command-line handling and the TF1-mode
choice are tested in-process.
"""
import hashlib
import importlib.util
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import tensorflow as tf

from tpu_estimator_compat import run as run_lib
from tpu_estimator_compat.legacy import tf1_mode

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MNIST = os.path.join(REPO, "legacy_models", "mnist", "mnist_tpu.py")
TF1_SCRIPT = os.path.join(HERE, "scripts", "tf1_project", "train_tf1.py")
COMPAT_V1_SCRIPT = os.path.join(HERE, "scripts", "compat_v1", "train_compat_v1.py")
CONSOLE_SCRIPT = os.path.join(os.path.dirname(sys.executable), "tpu-estimator-compat-run")
TIMEOUT_S = 420


def _load_test_module(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Launch:
    """One launcher subprocess whose output goes to files (no pipe can fill up and block)."""

    def __init__(self, name, argv, out_dir, env):
        self.name = name
        self.stdout_path = os.path.join(out_dir, f"{name}.stdout")
        self.stderr_path = os.path.join(out_dir, f"{name}.stderr")
        with open(self.stdout_path, "w") as out, open(self.stderr_path, "w") as err:
            self.process = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=out_dir)
        self.started = time.monotonic()

    def wait(self):
        """Returns (returncode, stdout, stderr); kills the process at the deadline."""
        remaining = TIMEOUT_S - (time.monotonic() - self.started)
        try:
            self.process.wait(timeout=max(remaining, 1))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"{self.name} did not finish within {TIMEOUT_S}s")
        with open(self.stdout_path) as out, open(self.stderr_path) as err:
            return self.process.returncode, out.read(), err.read()


def _tree_digest(root):
    """Names and contents of every file under root, so a run that writes there is caught."""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(root)):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            digest.update(path.encode())
            with open(path, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()


def _fixture_digest():
    return [_tree_digest(os.path.dirname(script)) for script in (TF1_SCRIPT, COMPAT_V1_SCRIPT)]


# The launches each test reads: the fixture starts only those of the selected tests (three
# of the four serve `slow` tests; the default run started them all for nothing).
# test_user_files_are_not_modified reads whichever were started.
_NEEDS = {
    "test_mnist_runs_unchanged_with_use_tpu_on_a_machine_without_tpu": ("mnist",),
    "test_mnist_trains_from_data_dir_idx_files": ("mnist_idx",),
    "test_tf1_idiom_script_and_its_helper_package_see_the_v1_api": ("tf1",),
    "test_compat_v1_script_runs_on_cpu_replicas_via_console_script": ("compat_v1",),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, request):
    wanted = {name for item in request.session.items if item.module is request.module
              for name in _NEEDS.get(item.originalname, ())}
    out = str(tmp_path_factory.mktemp("launcher"))
    idx_dir = os.path.join(out, "mnist_idx")
    os.makedirs(idx_dir)
    mnist_data_test = _load_test_module("test_mnist_data")
    for split, seed in (("train", 0), ("test", 1)):
        mnist_data_test.write_idx(idx_dir, split, *mnist_data_test.tiny_mnist(32, seed),
                                  gzipped=(split == "test"))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0",
               PYTHONDONTWRITEBYTECODE="1")
    env.pop("TF_USE_LEGACY_KERAS", None)  # The launcher must set it itself.
    launcher = [sys.executable, "-m", "tpu_estimator_compat.run"]
    fixtures_before = _fixture_digest()
    specs = {
        "mnist": launcher + [MNIST, f"--model_dir={out}/mnist", "--use_tpu=true",
                             "--num_shards=8", "--train_steps=20", "--iterations=10"],
        "mnist_idx": launcher + [MNIST, f"--model_dir={out}/mnist_idx", "--use_tpu=false",
                                 f"--data_dir={idx_dir}", "--train_steps=4",
                                 "--iterations=2", "--batch_size=8"],
        "tf1": launcher + [TF1_SCRIPT, f"--model_dir={out}/tf1"],
        "compat_v1": [CONSOLE_SCRIPT, "--cpu_replicas=4", COMPAT_V1_SCRIPT,
                      f"--model_dir={out}/compat_v1"],
    }
    launches = {name: _Launch(name, argv, out, env) for name, argv in specs.items()
                if name in wanted}
    yield {"launches": launches, "out": out, "results": {},
           "fixtures_before": fixtures_before}
    for launch in launches.values():
        if launch.process.poll() is None:
            launch.process.kill()
            launch.process.wait()


def _result(runs, name):
    if name not in runs["results"]:
        runs["results"][name] = runs["launches"][name].wait()
    return runs["results"][name]


def _assert_ok(runs, name):
    returncode, stdout, stderr = _result(runs, name)
    assert returncode == 0, f"{name} exited {returncode}:\n{stdout[-2000:]}\n{stderr[-5000:]}"
    return stdout, stderr


def _checkpoint_names(model_dir):
    return {name for name, _ in tf.train.list_variables(tf.train.latest_checkpoint(model_dir))}


@pytest.mark.slow
def test_mnist_runs_unchanged_with_use_tpu_on_a_machine_without_tpu(runs):
    stdout, stderr = _assert_ok(runs, "mnist")
    predictions = re.findall(r"^Prediction (\d): class \d \(p=[01]\.\d{3}\), label \d$",
                             stdout, re.M)
    assert predictions == [str(i) for i in range(10)]
    assert "Evaluation results: {'accuracy'" in stdout
    assert "NoTPUClusterResolver(tpu=None)" in stderr  # Constructed unconditionally, no crash.
    assert "TF1 mode: off (auto: 3 file(s) scanned" in stderr
    assert "TPUConfig num_shards=8 but _DefaultDistributionStrategy has 1 replica(s)" in stderr
    names = _checkpoint_names(os.path.join(runs["out"], "mnist"))
    assert {"conv2d/kernel", "dense_1/bias", "global_step"} <= names


@pytest.mark.slow
def test_mnist_trains_from_data_dir_idx_files(runs):
    stdout, _ = _assert_ok(runs, "mnist_idx")
    # numpy scalars print as the legacy stack (numpy 1.x) printed them.
    assert re.search(r"Evaluation results: \{'accuracy': [0-9.e+-]+, 'loss': [0-9.e+-]+, "
                     r"'global_step': 4\}", stdout), stdout
    assert len(re.findall(r"^Prediction \d: ", stdout, re.M)) == 10


@pytest.mark.slow
def test_tf1_idiom_script_and_its_helper_package_see_the_v1_api(runs):
    stdout, stderr = _assert_ok(runs, "tf1")
    match = re.search(r"TF1 script evaluation: accuracy=([\d.]+) global_step=20", stdout)
    assert match and float(match.group(1)) > 0.7, stdout
    view = re.search(r"TF1 script view: dropout\(x, 0.9\) kept=([\d.]+) "
                     r"metrics.accuracy=(\S+) shape\[-1\].value=3", stdout)
    assert view, stdout
    assert 0.85 <= float(view.group(1)) <= 0.95  # keep_prob=0.9, not TF2's rate=0.9.
    assert view.group(2) == "tensorflow.python.ops.metrics_impl"  # v1 streaming metric.
    # contrib.layers.layer_norm came from tf-slim under its TF1 variable names.
    assert {"LayerNorm/beta", "LayerNorm/gamma", "hidden/kernel", "logits/bias"} <= (
        _checkpoint_names(os.path.join(runs["out"], "tf1")))
    assert "NoTPUClusterResolver(tpu=None)" in stderr
    assert re.search(r"TF1 mode: on \(auto: train_tf1\.py:\d+ tf\.\w+", stderr)


def test_compat_v1_script_runs_on_cpu_replicas_via_console_script(runs):
    stdout, stderr = _assert_ok(runs, "compat_v1")
    assert ("compat.v1 script trained to step 30, loss variable names: linear/bias,"
            "linear/kernel") in stdout
    assert "MirroredStrategy with 4 replica(s)" in stderr


def test_user_files_are_not_modified(runs):
    for name in runs["launches"]:
        _result(runs, name)
    assert _fixture_digest() == runs["fixtures_before"]


# ---------------------------------------------------------------------------------------------
# In-process: command line and mode choice.


def test_launcher_options_go_before_the_script_and_the_rest_is_passed_unchanged():
    args = run_lib._parser().parse_args(
        ["--cpu_replicas=8", "--tf1_mode=on", "s.py", "--use_tpu=true", "--cpu_replicas=2",
         "positional", "-x"])
    assert (args.cpu_replicas, args.tf1_mode, args.script) == (8, "on", "s.py")
    assert args.script_args == ["--use_tpu=true", "--cpu_replicas=2", "positional", "-x"]


def test_bad_tf1_mode_is_rejected(capsys):
    with pytest.raises(SystemExit):
        run_lib._parser().parse_args(["--tf1_mode=maybe", "s.py"])
    assert "invalid choice: 'maybe'" in capsys.readouterr().err


def test_missing_script_names_the_path(tmp_path):
    args = run_lib._parser().parse_args([str(tmp_path / "nope.py")])
    with pytest.raises(FileNotFoundError, match=r"Script '.*nope\.py' not found"):
        run_lib.run(args)


def test_cpu_replicas_must_be_positive():
    with pytest.raises(ValueError, match=r"`--cpu_replicas` must be a positive integer; "
                                         r"received 0"):
        run_lib.split_cpu(0)


@pytest.mark.parametrize("script,mode,expected", [
    (TF1_SCRIPT, "auto", True), (COMPAT_V1_SCRIPT, "auto", False), (MNIST, "auto", False),
    (MNIST, "on", True), (TF1_SCRIPT, "off", False)])
def test_tf1_mode_choice(script, mode, expected):
    user_code = tf1_mode.UserCode.for_script(script)
    assert run_lib._choose_tf1_mode(mode, script, user_code) is expected


def test_script_runs_as_main_with_its_argv_and_directory(tmp_path, monkeypatch):
    monkeypatch.delenv(run_lib._BFC_ENV, raising=False)  # run() sets it; undone afterwards.
    script = tmp_path / "echo_script.py"
    script.write_text(
        "import sys\n"
        "import tensorflow.compat.v1 as tf\n"
        "RESULT = (__name__, list(sys.argv), sys.path[0], hasattr(tf, 'estimator'))\n")
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    namespace = run_lib.run(run_lib._parser().parse_args(
        ["--tf1_mode=off", str(script), "--flag=1", "arg"]))
    assert namespace["RESULT"] == ("__main__", [str(script), "--flag=1", "arg"],
                                   str(tmp_path), True)


@pytest.mark.parametrize("env, choice, replicas, expected", [
    (None, None, 8, ("bfc", "true")),        # The launcher's default on several replicas,
    (None, None, 2, ("bfc", "true")),
    (None, None, None, ("malloc", None)),    # and TensorFlow's own on one device.
    (None, None, 1, ("malloc", None)),
    ("false", None, 8, ("malloc", "false")),  # A variable the user set is kept.
    ("true", None, None, ("bfc", "true")),
    ("true", "malloc", 8, ("malloc", "false")),  # The flag wins.
    (None, "bfc", None, ("bfc", "true")),
])
def test_cpu_allocator_choice(monkeypatch, env, choice, replicas, expected):
    if env is None:
        monkeypatch.delenv(run_lib._BFC_ENV, raising=False)
    else:
        monkeypatch.setenv(run_lib._BFC_ENV, env)
    assert (run_lib.cpu_allocator(choice, replicas),
            os.environ.get(run_lib._BFC_ENV)) == expected


@pytest.mark.parametrize("env, choice, expected", [
    (None, None, "off"),   # The launcher's default,
    ("on", None, "on"),    # unless the user set the variable,
    ("on", "off", "off"),  # and the flag wins.
    (None, "on", "on"),
])
def test_tfg_optimizer_choice(monkeypatch, env, choice, expected):
    if env is None:
        monkeypatch.delenv(run_lib._TFG_ENV, raising=False)
    else:
        monkeypatch.setenv(run_lib._TFG_ENV, env)
    assert run_lib.tfg_optimizer(choice) == os.environ[run_lib._TFG_ENV] == expected


# One launch per outcome in the default run (each is a TensorFlow process); the rule that
# picks the allocator is test_cpu_allocator_choice's, all of its cases.
@pytest.mark.slow
@pytest.mark.parametrize("flags, bfc", [
    (["--cpu_replicas=2"], True),
    pytest.param([], False, marks=pytest.mark.slow),
    (["--cpu_replicas=2", "--cpu_allocator=malloc"], False),
    pytest.param(["--cpu_allocator=bfc"], True, marks=pytest.mark.slow)])
def test_launched_script_runs_on_the_chosen_cpu_allocator(tmp_path, flags, bfc):
    """TensorFlow itself says which allocator it built (its BFC log line, made visible)."""
    script = tmp_path / "one_op.py"
    script.write_text("import tensorflow as tf\nprint(float(tf.reduce_sum(tf.ones([4]))))\n")
    env = {k: v for k, v in os.environ.items() if k != run_lib._BFC_ENV}
    env.update(TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE="bfc_allocator=1")
    done = subprocess.run([sys.executable, "-m", "tpu_estimator_compat.run", *flags,
                           "--tf1_mode=off", str(script)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("4.0")
    assert ("Creating new BFCAllocator named: bfc_cpu_allocator_for_gpu" in done.stderr) is bfc


def test_peer_timeout_flag_reaches_run_config_through_the_environment(tmp_path, monkeypatch):
    from tpu_estimator_compat import config as config_lib

    script = tmp_path / "timeout_script.py"
    script.write_text("import tpu_estimator_compat as tec\n"
                      "RESULT = tec.RunConfig().peer_timeout_secs\n")
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delenv(config_lib.PEER_TIMEOUT_ENV, raising=False)
    namespace = run_lib.run(run_lib._parser().parse_args(
        ["--tf1_mode=off", "--peer_timeout_secs=12.5", str(script)]))
    assert namespace["RESULT"] == 12.5
    monkeypatch.delenv(config_lib.PEER_TIMEOUT_ENV)
    with pytest.raises(ValueError, match=r"^`--peer_timeout_secs` must be a positive number "
                                         r"of seconds; received 0.0\."):
        run_lib.run(run_lib._parser().parse_args(["--peer_timeout_secs=0", str(script)]))


def _default_signal_handlers():
    """In the child: SIGINT/SIGTERM/SIGHUP end it even if pytest's process ignores them."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


@pytest.mark.slow
def test_tf1_script_writes_summary_protos_with_a_top_level_file_writer(tmp_path):
    """tensorflow/tpu retinanet's eval loop: a v1 FileWriter with eager left on (TF1 mode)."""
    script = tmp_path / "eval_tf1.py"
    script.write_text(textwrap.dedent("""
        import sys
        import tensorflow as tf

        assert tf.executing_eagerly()
        summary_writer = tf.summary.FileWriter(sys.argv[1])
        for step, results in ((1, {"AP": 0.25, "AR": 0.5}), (2, {"AP": 0.75, "AR": 1.0})):
            summary = tf.Summary(value=[tf.Summary.Value(tag=k, simple_value=v)
                                        for k, v in sorted(results.items())])
            summary_writer.add_summary(summary, step)
        summary_writer.flush()
        summary_writer.close()
    """))
    model_dir = tmp_path / "eval"
    done = subprocess.run([sys.executable, "-m", "tpu_estimator_compat.run", str(script),
                           str(model_dir)], capture_output=True, text=True, timeout=240,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), cwd=tmp_path,
                          preexec_fn=_default_signal_handlers)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "TF1 mode: on" in done.stderr + done.stdout
    [path] = model_dir.glob("events.out.tfevents.*")
    found = [(e.step, v.tag, v.simple_value)
             for e in tf.compat.v1.train.summary_iterator(str(path)) for v in e.summary.value]
    assert found == [(1, "AP", 0.25), (1, "AR", 0.5), (2, "AP", 0.75), (2, "AR", 1.0)]


def test_tf1_mode_choice_names_the_packages_the_script_needs_in_tf1_packages(
        tmp_path, monkeypatch, capsys):
    """rowanz/grover `discrimination/run_discrimination.py` failed at import with only
    "module 'tensorflow._api.v2.train' has no attribute 'Optimizer'" (its sibling package
    `lm` keeps the real TF2 API); the launcher now says which flag gives it the TF1 API."""
    repo = tmp_path / "repo"
    for name, text in {"disc/run.py": "import tensorflow as tf\nfrom lm import optim\n"
                                      "FLAGS = tf.flags.FLAGS\n",
                       "lm/__init__.py": "",
                       "lm/optim.py": "import tensorflow as tf\nOPT = tf.train.Optimizer\n"
                       }.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    monkeypatch.syspath_prepend(str(repo))
    script = str(repo / "disc" / "run.py")
    # Written straight to stderr in absl's format: the script's logging is not set up yet.
    assert run_lib._choose_tf1_mode("auto", script, tf1_mode.UserCode.for_script(script))
    assert re.search(r"^W\d{4} .* run\.py:\d+\] Package lm, which the script imports from "
                     r"outside its directory, uses TF1-only names \(optim.py:2 "
                     r"tf.train.Optimizer\).*--tf1_packages=lm", capsys.readouterr().err, re.M)
    assert run_lib._choose_tf1_mode(
        "auto", script, tf1_mode.UserCode.for_script(script, packages=["lm"]))
    assert "--tf1_packages" not in capsys.readouterr().err
