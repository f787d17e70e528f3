"""The scan's verdicts against real code whose launcher runs are recorded.

`../shared/realworld` (or TPU_ESTIMATOR_COMPAT_REALWORLD) holds tensorflow/tpu code bases that
tests/test_realworld.py runs unchanged through the launcher (all pass: migration_guide/
real_world.md); `legacy_models/` is run by tests/test_legacy_models.py. The scan must call
each of them "runs unchanged" (the launcher runs them), see the import forms and semantics
each case's README records, and exit 0 on them. The `slow` cases run one script per verdict
class through the launcher: "should run" runs, "refused X" / "absent X" fails on X.
"""
import os
import subprocess
import sys

import pytest

from tpu_estimator_compat.scan import cli
from tpu_estimator_compat.scan import codebase

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
ENV_VAR = "TPU_ESTIMATOR_COMPAT_REALWORLD"


def _realworld_dir():
    for candidate in (os.environ.get(ENV_VAR), os.path.join(REPO, "..", "shared", "realworld")):
        if candidate and os.path.isfile(os.path.join(candidate, "README.md")):
            return os.path.abspath(candidate)
    return None


REALWORLD = _realworld_dir()
needs_realworld = pytest.mark.skipif(REALWORLD is None, reason=(
    f"the public cases are not here: put shared/realworld next to this checkout "
    f"(../shared/realworld) or set {ENV_VAR}"))


def _by_case(paths):
    results, problems = cli.scan(paths)
    assert not problems
    return {os.path.basename(r.name): r for r in results}


@needs_realworld
def test_realworld_cases_should_run_as_the_launcher_runs_them():
    cases = _by_case([REALWORLD])
    assert set(cases) >= {"efficientnet", "mobilenet", "tpu_embedding"}
    for name in ("efficientnet", "mobilenet", "tpu_embedding"):
        assert cases[name].status != codebase.REFUSES, (name, cases[name].blockers())
        assert not [f.path for f in cases[name].files if f.problem]


@needs_realworld
def test_realworld_import_forms_and_semantics_the_cases_record():
    cases = _by_case([REALWORLD])
    uses = {name: {u.name: u for f in r.files for u in f.uses.values()}
            for name, r in cases.items()}
    # efficientnet: `from tensorflow.python.estimator import estimator` + the private helper,
    # `from tensorflow.contrib.tpu.python.tpu import async_checkpoint` (README, real_world.md).
    eff = uses["efficientnet"]
    assert eff["tensorflow_estimator.python.estimator.estimator."
               "_load_global_step_from_checkpoint_dir"].status == "served"
    assert eff["tf.contrib.tpu.python.tpu.async_checkpoint.AsyncCheckpointSaverHook"
               ].status == "changed"
    # Bigtable input: an optional path behind `except ImportError`, never taken by the runs.
    big = eff["tf.contrib.cloud.BigtableClient"]
    assert big.status == "refused" and big.guarded and not big.blocks
    # tpu_embedding: EmbeddingConfigSpec (changed: not on TPU cores), eager off.
    emb = uses["tpu_embedding"]
    assert emb["tf.estimator.tpu.experimental.EmbeddingConfigSpec"].status == "changed"
    assert cases["tpu_embedding"].eager_off


@needs_realworld
def test_scan_of_realworld_exits_0():
    done = subprocess.run([sys.executable, "-m", "tpu_estimator_compat.scan", REALWORLD],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": REPO})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "should run unchanged" in done.stdout


def test_legacy_models_should_run():
    cases = _by_case([os.path.join(REPO, "legacy_models")])
    assert set(cases) == {"bert", "mnist", "resnet", "tf_docs"}
    for name in ("bert", "mnist", "resnet"):
        result = cases[name]
        assert result.status == codebase.RUNS, (name, result.blockers(), result.limits())
    # tensorflow/docs' TF1 programs (migration_guide/tf_docs.md): object-based checkpoints
    # through a Scaffold's saver are no limit; `eval_metric_ops` (several replicas' padded
    # batches) is one the scan sees in their code, not one they reach.
    assert cases["tf_docs"].limits() == ["eval_metric_ops"]


# One class each of what the scan reports, as real code writes it: (source, the scan's
# verdict on the code base, the blocker it names, what the launcher's run prints).
LAUNCHER_CASES = {
    "refused": ("import tensorflow as tf\nopt = tf.contrib.opt.LazyAdamOptimizer(0.1)\n",
                codebase.REFUSES, "tf.contrib.opt.LazyAdamOptimizer", "LazyAdamOptimizer"),
    # tensorflow/tpu amoeba_net's host_call: TF 2.21's v1 summary module has no writer.
    "absent": ("import tensorflow.compat.v1 as tf\n"
               "w = tf.summary.create_file_writer('/tmp/unused')\n", codebase.REFUSES,
               "tf.compat.v1.summary.create_file_writer", "AttributeError"),
    # efficientnet's optional Bigtable input: refused, but under `except ImportError`.
    "runs": ("try:\n  from tensorflow.contrib.cloud import BigtableClient\n"
             "except ImportError:\n  BigtableClient = None\n"
             "import tensorflow as tf\nconfig = tf.estimator.tpu.RunConfig(\n"
             "    tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=2))\n"
             "print('RAN', type(config).__name__)\n", codebase.RUNS, None, "RAN RunConfig"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(LAUNCHER_CASES))
def test_scan_verdict_is_what_the_launcher_run_does(tmp_path, case):
    """"Should run" runs through the launcher; "refused X" fails on X, with our hint."""
    source, status, blocker, printed = LAUNCHER_CASES[case]
    script = tmp_path / "train.py"
    script.write_text(source)
    (result,), _ = cli.scan([str(script)])
    assert result.status == status, result.blockers()
    done = subprocess.run([sys.executable, "-m", "tpu_estimator_compat.run", str(script)],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": REPO, "TF_CPP_MIN_LOG_LEVEL": "2"})
    output = done.stdout + done.stderr
    assert printed in output, output[-3000:]
    if blocker is None:
        assert done.returncode == 0, output[-3000:]
        return
    assert done.returncode != 0
    assert list(result.blockers()) == [blocker]
    last = output.strip().splitlines()[-1]  # The exception that stopped the run.
    assert blocker.rpartition(".")[2] in last, last
    note = result.blockers()[blocker]
    if status == codebase.REFUSES and "TensorFlow 2.21 has no" not in note:
        assert note.split(" See ")[0] in output, (note, output[-3000:])
