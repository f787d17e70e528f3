"""Test-process set-up shared by every test module.

Pins the environment the parity contract depends on (oneDNN off, legacy Keras) and the
launcher's process settings before TensorFlow loads, and splits the host CPU into 8 logical
devices so MirroredStrategy can stand in for the 8 cores of a TPU. Tests take the `strategy`
fixture to run once on the default strategy and once on MirroredStrategy over the 8 logical
CPUs.
"""
import fnmatch
import os

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# As the launcher runs scripts: Grappler's TFG pass pipeline off (session/strategy_state.py).
# It rewrites none of these graphs and costs time (test_estimator, test_inference and test_model_zoo took
# 4:48 without it against 4:59 and 5:31 with it); tests/test_strategy_state.py checks that both
# settings compute the same bits.
os.environ.setdefault("TPU_ESTIMATOR_COMPAT_TFG_OPTIMIZER", "off")

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

NUM_LOGICAL_CPUS = 8


def _split_cpu() -> None:
    cpus = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(
                cpus[0], [tf.config.LogicalDeviceConfiguration()] * NUM_LOGICAL_CPUS)
    except RuntimeError:
        pass  # Already initialised by an earlier import; devices stay as they are.


_split_cpu()


def make_strategy(name: str) -> tf.distribute.Strategy:
    """Returns a fresh strategy by short name: 'default' or 'mirrored8'."""
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored8":
        # The library's process-wide instance: MirroredStrategy instances over the same
        # devices share collective keys and must not coexist.
        from tpu_estimator_compat.session import strategy as strategy_lib
        return strategy_lib.mirrored_over(
                [d.name for d in tf.config.list_logical_devices("CPU")])
    raise ValueError(name)


@pytest.fixture(params=["default", "mirrored8"])
def strategy(request) -> tf.distribute.Strategy:
    return make_strategy(request.param)


def tensorshape_mode() -> str:
    """'tf1' when `TensorShape[i]` is a `Dimension` (TF1's shapes), else 'v2'."""
    return "tf1" if isinstance(tf.TensorShape([1])[0], tf.compat.v1.Dimension) else "v2"


@pytest.fixture(params=["v2", "tf1"])
def tensorshape(request):
    """Runs the test with TF2's `TensorShape`s and again with TF1's, as scripts switch them.

    `tf.compat.v1.disable_v2_tensorshape()` (also `disable_v2_behavior()` and the launcher's
    TF1 mode) is process-wide: `shape[i]` becomes a `Dimension`. The mode found before the
    test is restored after it, and checked, so the switch cannot leak into later tests of
    the same process. Child processes test the other process-wide switches.
    """
    before = tensorshape_mode()
    if request.param == "tf1":
        tf.compat.v1.disable_v2_tensorshape()
    else:
        tf.compat.v1.enable_v2_tensorshape()
    try:
        assert tensorshape_mode() == request.param
        yield request.param
    finally:
        if before == "tf1":
            tf.compat.v1.disable_v2_tensorshape()
        else:
            tf.compat.v1.enable_v2_tensorshape()
    assert tensorshape_mode() == before


@pytest.fixture
def job(tmp_path):
    """The processes of one multi-process test (`cluster_job.Job`); killed at the end if running."""
    import cluster_job  # tests/cluster_job.py, beside this file.

    job = cluster_job.Job(tmp_path)
    try:
        yield job
    finally:
        job.close()


def legacy_recorder(name: str):
    """`tests/legacy_recorder/<name>.py` and its golden, for replaying it on the shim.

    The recorders are r1 scripts written as TF1 users wrote them; on the shim they run after
    `install_aliases()`. Returns (module, the parsed `tests/goldens/<name>/legacy.json`).
    """
    import importlib
    import json
    import sys

    import tpu_estimator_compat

    tpu_estimator_compat.install_aliases()
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "legacy_recorder"))
    try:
        module = importlib.import_module(name)
    finally:
        sys.path.pop(0)
    path = legacy_golden_path(name)
    with open(path) as f:
        golden = json.load(f)
    golden["_recorded_on_this_cpu_kind"] = _recorded_on_this_cpu_kind(golden, path)
    return module, golden


# Two CPU kinds' legacy runs of the same script differ by Eigen's rounding: measured up to
# 1.2e-7 absolute on estimator_plain's logits and 4e-6 on a canned loss 30 steps after a
# resume, between an AMD EPYC with AVX-512 and the CPU of older recordings.
CROSS_CPU_TOLERANCE = {"rtol": 2e-5, "atol": 1e-6}


def _recorded_on_this_cpu_kind(golden: dict, path: str) -> bool:
    """Whether `golden` is this CPU kind's recording: its own variant, or a primary whose
    recorded CPU (`versions.cpu`) is this kind. A primary that names no CPU predates that
    field and is held to bit-exactness as before."""
    from tpu_estimator_compat.parity import golden as golden_lib

    if os.sep + golden_lib.VARIANTS_DIR + os.sep in path:
        return True
    recorded = golden.get("versions", {}).get("cpu")
    if not recorded:
        return True
    kind = golden_lib.cpu_kind()
    has_avx512f = "avx512f" in kind["flags"]
    return recorded.get("model") == kind["model"] and recorded.get("avx512f") == has_avx512f


def assert_legacy_equal(got, want, golden: dict, err_msg: str = "") -> None:
    """Bit for bit on the CPU kind `golden` was recorded on; elsewhere within the rounding
    two CPU kinds' legacy runs differ by (`CROSS_CPU_TOLERANCE`), since legacy itself is not
    bit-reproducible across CPU kinds. `dev/record_cpu_variant.sh` records a CPU kind's own."""
    import numpy as np

    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    assert got.shape == want.shape, err_msg
    if golden.get("_recorded_on_this_cpu_kind", True):
        np.testing.assert_array_equal(got, want, err_msg=err_msg)
    else:
        np.testing.assert_allclose(got, want, err_msg=err_msg, **CROSS_CPU_TOLERANCE)


def legacy_golden_path(name: str) -> str:
    """`tests/goldens/<name>/legacy.json`, or this CPU kind's own recording of it.

    With oneDNN off, Eigen's matmul and conv kernels choose their blocking, so their float
    summation order, from the CPU's instruction set and caches: the same legacy script on
    another CPU kind rounds some values an ulp apart (measured: estimator_plain's logits by up
    to 1.2e-7 between the CPU of the primary recording and an AMD EPYC with AVX-512, where
    the library and legacy agree bit for bit). A recording made on this CPU kind
    (`dev/record_cpu_variant.sh NAME`, under `cpu/<label>/`, the label of
    `parity.golden.cpu_kind`) is then the one a bit-exact comparison is held to; no tolerance
    is widened.
    """
    from tpu_estimator_compat.parity import golden as golden_lib

    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "goldens", name)
    variant = os.path.join(here, golden_lib.VARIANTS_DIR, golden_lib.cpu_kind()["label"],
                           "legacy.json")
    return variant if os.path.exists(variant) else os.path.join(here, "legacy.json")


# Files in order of their measured time on 2 cores, longest first, down to ~20 s (a
# `--durations` run of the default tests at b937fa8; TensorFlow processes, golden replays,
# 8-replica models). `--dist loadfile`
# hands files to the two workers in collection order, one at a time as each worker frees up:
# in alphabetical order test_realworld.py (~2 min alone) came last, and one worker ran it while
# the other sat idle. Longest first, the short files fill in at the end (the longest-job-first
# rule); files not listed keep their alphabetical order after these. Within a file the order
# is unchanged. In the slow set, test_soak.py (180 s of soak) and test_peer_suite.py (a
# pytest process per peer file) came last and ran alone at the end. test_shapes.py was
# placed later, by its measured CPU time (two child processes of ~32 s of CPU each), beside
# test_eager_scope.py's six children.
_HEAVY_FILES_FIRST = (
    "test_realworld.py", "test_soak.py", "test_peer_suite.py", "test_parity.py",
    "test_model_zoo.py", "test_safety.py",
    "test_legacy_models.py", "test_estimator.py", "test_embedding.py", "test_inference.py",
    "test_eval_metric_ops.py", "test_keras_optimizer.py", "test_canned_import.py",
    "test_numpy_io.py", "test_pandas_io.py",
    "test_warm_start.py", "test_summaries.py", "test_hooks.py", "test_migration_guide.py",
    "test_multi_worker.py", "test_metrics.py", "test_optimizer_apply.py", "test_run.py",
    "test_preemption.py", "test_loop.py", "test_eager_scope.py", "test_shapes.py",
    "test_contrib_summary.py", "test_parameter_servers.py", "test_tf_patches.py",
    "test_replica_step.py", "test_variables.py", "test_cross_shard.py", "test_keras_env.py",
    "test_train_and_eval.py", "test_inputs.py", "test_import_hook.py", "test_strategy_state.py",
    "test_saved_model.py", "test_evaluator.py",
)


def _eight_replica_variant_is_opt_in(item) -> bool:
    """True for a `mirrored8` case the test's `eight_replicas` mark leaves out.

    `@pytest.mark.eight_replicas(optimizer=["adam"])` on a test that also takes `strategy`:
    on 8 replicas only the listed values of each named parameter run by default; the other
    8-replica cases are opt-in (`slow`). For parameters that choose something the replica
    count does not touch (which optimizer names its slots, which form an input_fn returns),
    where every value already runs on the default strategy and one value shows it on 8.
    """
    mark = item.get_closest_marker("eight_replicas")
    callspec = getattr(item, "callspec", None)
    if mark is None or callspec is None or callspec.params.get("strategy") != "mirrored8":
        return False
    return any(callspec.params[name] not in values for name, values in mark.kwargs.items())


def _case_is_marked_slow(item) -> bool:
    """True for a case of a parameterized test that its `slow_cases` mark names.

    `@pytest.mark.slow_cases("mirrored8", "bert")`: the cases whose id (the text in the
    brackets of the test id) matches one of the shell-style patterns run in the slow set
    only; the test's other cases stay in the default run. `@pytest.mark.slow` on a test
    moves every case.
    """
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return False
    return any(fnmatch.fnmatchcase(callspec.id, pattern)
               for mark in item.iter_markers("slow_cases") for pattern in mark.args)


def _case_is_full(item) -> bool:
    """True for a `slow` case CI leaves out: the test or its parameter carries the `full`
    mark, or it repeats on 8 replicas a slow test whose other cases CI runs.

    CI's slow set runs each slow test in at least one configuration. The 8-replica repeats
    of tests that run on the default strategy there, and the rest of a test's grid, take
    as long again; they run with `-m "slow and not legacy"` (README).
    """
    if item.get_closest_marker("full"):
        return True
    callspec = getattr(item, "callspec", None)
    return (callspec is not None and "mirrored8" in callspec.id.split("-")
            and item.get_closest_marker("slow") is not None)


# Before the `-m` selection, which reads the `slow` and `full` marks added here.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    del config
    for item in items:
        if _eight_replica_variant_is_opt_in(item) or _case_is_marked_slow(item):
            item.add_marker(pytest.mark.slow)
        if _case_is_full(item):
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.full)
    rank = {name: i for i, name in enumerate(_HEAVY_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # A stable sort.
