"""Tests for `tpu_estimator_compat.checkpoint.checkpoints`: v1-named checkpoints, legacy files.

The checkpoints must be interchangeable with what TF1's `tf.compat.v1.train.Saver` wrote, so
several tests write with one side and read with the other inside a `tf.Graph`/`Session`.
"""
import glob
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from conftest import make_strategy
from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator, TPUEstimatorSpec
from tpu_estimator_compat.checkpoint import meta as checkpoint_meta
from tpu_estimator_compat.checkpoint.checkpoints import (CheckpointManager, V1Saver,
                                              checkpoint_step)

_BF16 = tf.bfloat16.as_numpy_dtype
_RNG = np.random.default_rng(0)

# v1 name -> initial value of the plain/mirrored variables.
PLAIN = {
    "conv2d/kernel": _RNG.standard_normal((3, 3, 2, 4)).astype(np.float32),
    "dense/kernel": _RNG.standard_normal((4, 3)).astype(np.float32),
    "dense/kernel/Momentum": _RNG.standard_normal((4, 3)).astype(np.float32),
    "beta1_power": np.float32(0.9),
    "global_step": np.int64(42),
    "half/w": np.array([1.5, -2.25], np.float16),
    "bf16/w": np.array([0.5, 3.0], _BF16),
    "counts": np.array([1, 2, 3], np.int32),
    "flags": np.array([True, False]),
    "vocab": np.array([b"alpha", b"beta"], object),
}
MEAN_NAME = "batch_normalization/moving_mean"
SUM_NAME = "metrics/total"
MEAN_BASE = np.array([1.0, 2.0, 3.0, 4.0], np.float32)


def _zeros(value: np.ndarray) -> np.ndarray:
    value = np.asarray(value)
    if value.dtype == object:
        return np.full(value.shape, b"", object)
    return np.zeros_like(value)


def _num_replicas(strategy: tf.distribute.Strategy) -> int:
    return strategy.num_replicas_in_sync


def make_variables(strategy, *, zero: bool = False) -> dict[str, tf.Variable]:
    """The test model's variables, created in `strategy.scope()`.

    The sync-on-read variables get a different value on every replica (replica r holds
    MEAN_BASE + r and r + 1), so saving must aggregate them, not take one copy.
    """
    with strategy.scope():
        variables = {name: tf.Variable(_zeros(v) if zero else v)
                     for name, v in PLAIN.items()}
        variables[MEAN_NAME] = tf.Variable(
                np.zeros(4, np.float32), synchronization=tf.VariableSynchronization.ON_READ,
                aggregation=tf.VariableAggregation.MEAN)
        variables[SUM_NAME] = tf.Variable(
                0.0, synchronization=tf.VariableSynchronization.ON_READ,
                aggregation=tf.VariableAggregation.SUM)
    if not zero:
        mean_var, sum_var = variables[MEAN_NAME], variables[SUM_NAME]

        def per_replica():
            rid = tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group,
                          tf.float32)
            mean_var.assign(MEAN_BASE + rid)
            sum_var.assign(rid + 1.0)

        strategy.run(per_replica)
    return variables


def expected_saved(strategy) -> dict[str, np.ndarray]:
    n = _num_replicas(strategy)
    return {**PLAIN, MEAN_NAME: MEAN_BASE + (n - 1) / 2.0,
            SUM_NAME: np.float32(n * (n + 1) / 2)}


def assert_value(name, actual, expected):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, name
    if expected.dtype == object or expected.dtype.kind == "S":
        assert list(actual.ravel()) == list(expected.ravel()), name
    else:
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                                   rtol=1e-6, err_msg=name)


# ---------------------------------------------------------------------------------------
# V1Saver.


def test_save_writes_exactly_the_v1_names_and_values(strategy, tmp_path):
    variables = make_variables(strategy)
    prefix = str(tmp_path / "model.ckpt-42")
    with strategy.scope():
        assert V1Saver(variables).save(prefix) == prefix
    assert sorted(os.listdir(tmp_path)) == ["model.ckpt-42.data-00000-of-00001",
                                            "model.ckpt-42.index"]
    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    assert set(shapes) == set(variables)  # No object graph or other extra keys.
    expected = expected_saved(strategy)
    for name, var in variables.items():
        assert shapes[name] == var.shape.as_list(), name
        assert dtypes[name] == var.dtype, name
        assert_value(name, reader.get_tensor(name), expected[name])


def test_save_outside_strategy_scope_is_cross_replica_too(tmp_path):
    strategy = make_strategy("mirrored8")
    variables = make_variables(strategy)
    prefix = V1Saver(variables).save(str(tmp_path / "ckpt"))
    reader = tf.train.load_checkpoint(prefix)
    assert_value(MEAN_NAME, reader.get_tensor(MEAN_NAME), MEAN_BASE + 3.5)


@pytest.mark.parametrize("src,dst", [("mirrored8", "default"), ("default", "mirrored8"),
                                     ("mirrored8", "mirrored8")])
def test_restore_on_other_strategy_sets_every_replica(src, dst, tmp_path):
    src_strategy, dst_strategy = make_strategy(src), make_strategy(dst)
    with src_strategy.scope():
        prefix = V1Saver(make_variables(src_strategy)).save(str(tmp_path / "model.ckpt-1"))
    expected = expected_saved(src_strategy)
    restored = make_variables(dst_strategy, zero=True)
    with dst_strategy.scope():
        V1Saver(restored).restore(prefix)
    n = _num_replicas(dst_strategy)
    for name, var in restored.items():
        local = dst_strategy.experimental_local_results(var)
        assert len(local) == n
        per_replica = expected[name] / n if name == SUM_NAME else expected[name]
        for copy in local:
            assert_value(name, copy.numpy(), per_replica)
        assert_value(name, var.read_value().numpy(), expected[name])


def test_tf1_saver_restores_our_checkpoint(strategy, tmp_path):
    with strategy.scope():
        prefix = V1Saver(make_variables(strategy)).save(str(tmp_path / "model.ckpt-42"))
    expected = expected_saved(strategy)
    with tf.Graph().as_default():
        graph_vars = {}
        for name, value in expected.items():
            dtype = tf.string if name == "vocab" else tf.as_dtype(np.asarray(value).dtype)
            graph_vars[name] = tf.compat.v1.get_variable(
                    name, shape=np.shape(value), dtype=dtype,
                    initializer=tf.compat.v1.zeros_initializer())
        assert {v.op.name for v in graph_vars.values()} == set(expected)
        saver = tf.compat.v1.train.Saver(list(graph_vars.values()))  # Keys = op names.
        with tf.compat.v1.Session() as sess:
            saver.restore(sess, prefix)
            values = sess.run(graph_vars)
    for name, value in values.items():
        assert_value(name, value, expected[name])


def _write_tf1_checkpoint(model_dir: str, step: int) -> dict[str, np.ndarray]:
    """Writes a checkpoint as legacy Estimator's Scaffold saver did; returns its values."""
    values = {"dense/kernel": _RNG.standard_normal((4, 3)).astype(np.float32),
              "dense/kernel/Momentum": _RNG.standard_normal((4, 3)).astype(np.float32),
              "global_step": np.int64(step)}
    with tf.Graph().as_default():
        graph_vars = [tf.compat.v1.get_variable(name, initializer=tf.constant(value))
                      for name, value in values.items()]
        saver = tf.compat.v1.train.Saver(graph_vars, sharded=True, max_to_keep=5,
                                         save_relative_paths=True)
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saver.save(sess, os.path.join(model_dir, "model.ckpt"), global_step=step)
    return values


def test_manager_restores_tf1_saver_checkpoint_and_manages_its_files(strategy, tmp_path):
    model_dir = str(tmp_path)
    values = _write_tf1_checkpoint(model_dir, step=7)
    assert os.path.exists(os.path.join(model_dir, "model.ckpt-7.meta"))
    with strategy.scope():
        variables = {name: tf.Variable(_zeros(v)) for name, v in values.items()}
    manager = CheckpointManager(model_dir, V1Saver(variables), keep_checkpoint_max=1)
    assert _listed(model_dir) == ["model.ckpt-7"]
    with strategy.scope():
        assert manager.restore_latest() == 7
    for name, var in variables.items():
        for copy in strategy.experimental_local_results(var):
            assert_value(name, copy.numpy(), values[name])
    with strategy.scope():
        manager.save(8)
    # The TF1 Saver's checkpoint 7, .meta included, is pruned as legacy pruned it.
    assert sorted(os.listdir(model_dir)) == ["checkpoint", "model.ckpt-8.data-00000-of-00001",
                                             "model.ckpt-8.index", "model.ckpt-8.meta"]


def test_restore_mismatch_lists_every_bad_variable_and_assigns_nothing(tmp_path):
    prefix = V1Saver({"a": tf.Variable(np.ones(2, np.float32)),
                      "b": tf.Variable(1.0),
                      "extra_in_checkpoint": tf.Variable(0)}).save(str(tmp_path / "c-1"))
    model = {"a": tf.Variable(np.zeros(3, np.float32)),
             "b": tf.Variable(0, dtype=tf.int32),
             "c": tf.Variable(np.zeros(2, np.float32))}
    with pytest.raises(ValueError) as info:
        V1Saver(model).restore(prefix)
    message = str(info.value)
    assert "3 variable(s)" in message
    assert "'a': model has [3] float32; checkpoint has [2] float32" in message
    assert "'b': model has [] int32; checkpoint has [] float32" in message
    assert "'c': model has [2] float32; checkpoint has no such variable" in message
    assert "model_dir" in message and "warm_start_from" in message
    assert "extra_in_checkpoint" not in message
    np.testing.assert_array_equal(model["a"].numpy(), np.zeros(3))


def test_restore_missing_variable(tmp_path):
    prefix = V1Saver({"dense/kernel": tf.Variable(np.ones(2, np.float32))}).save(
            str(tmp_path / "c-1"))
    model = {"dense/kernel": tf.Variable(np.zeros(2, np.float32)),
             "dense/bias": tf.Variable(np.zeros(2, np.float32))}
    with pytest.raises(ValueError, match=r"'dense/bias': .*no such variable"):
        V1Saver(model).restore(prefix)


def test_restore_unreadable_checkpoint_names_the_prefix(tmp_path):
    with pytest.raises(ValueError, match="cannot read a checkpoint at"):
        V1Saver({"v": tf.Variable(1.0)}).restore(str(tmp_path / "nothing-here"))


def test_saver_argument_errors():
    with pytest.raises(ValueError, match="no variables"):
        V1Saver({})
    with pytest.raises(ValueError, match="':0'"):
        V1Saver({"w:0": tf.Variable(1.0)})
    with pytest.raises(TypeError, match="tf.Variable"):
        V1Saver({"w": tf.constant(1.0)})


def test_save_in_replica_context_is_refused(tmp_path):
    strategy = make_strategy("mirrored8")
    with strategy.scope():
        saver = V1Saver({"w": tf.Variable(1.0)})
    with pytest.raises(RuntimeError, match="replica context"):
        strategy.run(lambda: saver.save(str(tmp_path / "c")))


# ---------------------------------------------------------------------------------------
# checkpoint_step.


def test_checkpoint_step_from_path_and_from_global_step(tmp_path):
    assert checkpoint_step("/a/b/model.ckpt-1200") == 1200
    assert checkpoint_step("/a/b/model.ckpt-1200.index") == 1200
    assert checkpoint_step("model.ckpt-7.data-00000-of-00001") == 7
    plain = V1Saver({"global_step": tf.Variable(31, dtype=tf.int64)}).save(
            str(tmp_path / "final"))
    assert checkpoint_step(plain) == 31
    other = V1Saver({"w": tf.Variable(1.0)}).save(str(tmp_path / "other"))
    with pytest.raises(ValueError, match="no 'global_step' variable"):
        checkpoint_step(other)


# ---------------------------------------------------------------------------------------
# CheckpointManager.


def _files(model_dir) -> list[str]:
    return sorted(os.listdir(model_dir))


def _ckpt_files(*steps) -> list[str]:
    return sorted(f"model.ckpt-{s}.{suffix}" for s in steps
                  for suffix in ("index", "data-00000-of-00001", "meta"))


def _listed(model_dir) -> list[str]:
    """The checkpoints the state file lists, as TF's own reader sees them."""
    state = tf.train.get_checkpoint_state(str(model_dir))
    return [os.path.basename(p) for p in state.all_model_checkpoint_paths]


def _plain_saver():
    return V1Saver({"w": tf.Variable(np.arange(3, dtype=np.float32)),
                    "global_step": tf.Variable(0, dtype=tf.int64)})


def test_manager_prunes_and_writes_relative_state(tmp_path):
    model_dir = str(tmp_path / "model")
    manager = CheckpointManager(model_dir, _plain_saver(), keep_checkpoint_max=2)
    assert manager.latest_checkpoint() is None and manager.restore_latest() is None
    for step in (1, 2, 3, 4):
        manager.save(step)
    assert _files(model_dir) == sorted(["checkpoint", *_ckpt_files(3, 4)])
    state_text = open(os.path.join(model_dir, "checkpoint")).read()
    assert 'model_checkpoint_path: "model.ckpt-4"' in state_text
    assert state_text.count("all_model_checkpoint_paths:") == 2
    assert 'all_model_checkpoint_paths: "model.ckpt-3"' in state_text
    assert state_text.count("all_model_checkpoint_timestamps:") == 2
    assert "last_preserved_timestamp:" in state_text
    assert manager.latest_checkpoint() == os.path.join(model_dir, "model.ckpt-4")
    assert tf.train.latest_checkpoint(model_dir) == manager.latest_checkpoint()


def test_second_manager_keeps_pruning_old_files(tmp_path):
    model_dir = str(tmp_path)
    first = CheckpointManager(model_dir, _plain_saver(), keep_checkpoint_max=3)
    for step in (1, 2, 3):
        first.save(step)
    second = CheckpointManager(model_dir, _plain_saver(), keep_checkpoint_max=2)
    assert _listed(model_dir) == [
            "model.ckpt-1", "model.ckpt-2", "model.ckpt-3"]
    second.save(4)
    assert _files(model_dir) == sorted(["checkpoint", *_ckpt_files(3, 4)])


def test_keep_checkpoint_max_zero_keeps_everything(tmp_path):
    manager = CheckpointManager(str(tmp_path), _plain_saver(), keep_checkpoint_max=0)
    for step in range(1, 8):
        manager.save(step)
    assert _files(tmp_path) == sorted(["checkpoint", *_ckpt_files(*range(1, 8))])
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["model.ckpt-7"]


def test_keep_checkpoint_every_n_hours(tmp_path):
    now = [1000.0]
    manager = CheckpointManager(str(tmp_path), _plain_saver(), keep_checkpoint_max=1,
                                keep_checkpoint_every_n_hours=1, clock=lambda: now[0])
    for step, t in ((1, 1000), (2, 2000), (3, 5000), (4, 6000), (5, 7000)):
        now[0] = float(t)
        manager.save(step)
    # Step 3 was written after 1000 + 3600 s, so it survived being pushed out.
    assert _files(tmp_path) == sorted(["checkpoint", *_ckpt_files(3, 5)])
    assert _listed(tmp_path) == ["model.ckpt-5"]


def test_saving_the_same_step_twice_is_harmless(tmp_path):
    saver = _plain_saver()
    manager = CheckpointManager(str(tmp_path), saver, keep_checkpoint_max=3)
    manager.save(5)
    manager.save(6)
    saver.variables["w"].assign([7.0, 8.0, 9.0])
    manager.save(5)
    assert _listed(tmp_path) == ["model.ckpt-6", "model.ckpt-5"]
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == [
            "model.ckpt-6", "model.ckpt-5"]
    saver.variables["w"].assign([0.0, 0.0, 0.0])
    assert manager.restore_latest() == 0  # The stored global_step, not the path suffix.
    np.testing.assert_array_equal(saver.variables["w"].numpy(), [7, 8, 9])


def test_half_written_checkpoint_is_ignored(tmp_path):
    model_dir = str(tmp_path)
    saver = _plain_saver()
    saver.variables["global_step"].assign(5)
    manager = CheckpointManager(model_dir, saver)
    manager.save(5)
    for suffix in (".index", ".data-00000-of-00001"):
        with open(os.path.join(model_dir, "model.ckpt-99" + suffix), "wb") as f:
            f.write(b"\x00garbage")
    fresh = CheckpointManager(model_dir, saver)
    assert fresh.latest_checkpoint() == os.path.join(model_dir, "model.ckpt-5")
    assert _listed(model_dir) == ["model.ckpt-5"]
    assert fresh.restore_latest() == 5
    fresh.save(99)  # Overwrites the garbage with a real checkpoint.
    assert fresh.restore_latest() == 5  # global_step value stored in it.
    assert fresh.latest_checkpoint().endswith("model.ckpt-99")


def test_crash_during_save_leaves_state_on_last_complete_checkpoint(tmp_path, monkeypatch):
    model_dir = str(tmp_path)
    saver = _plain_saver()
    manager = CheckpointManager(model_dir, saver)
    manager.save(5)
    manager.save(6)

    def crash(prefix):
        with open(prefix + ".data-00000-of-00001", "wb") as f:
            f.write(b"partial")
        raise OSError("simulated crash")

    monkeypatch.setattr(saver, "save", crash)
    with pytest.raises(OSError):
        manager.save(7)
    assert manager.latest_checkpoint().endswith("model.ckpt-6")
    with pytest.raises(OSError):
        manager.save(6)  # Re-saving the latest step: unpublished before being rewritten.
    assert manager.latest_checkpoint().endswith("model.ckpt-5")
    monkeypatch.undo()
    assert CheckpointManager(model_dir, saver).restore_latest() == 0


def test_savev2_publishes_the_index_last_via_rename(tmp_path):
    """Pins the TF behaviour the atomicity argument rests on (see V1Saver.save)."""
    prefix = str(tmp_path / "model.ckpt-1")
    os.mkdir(prefix + ".index")  # Makes the final rename of the index fail.
    with pytest.raises(tf.errors.OpError):
        tf.raw_ops.SaveV2(prefix=prefix, tensor_names=["w"], shape_and_slices=[""],
                          tensors=[tf.constant([1.0])])
    names = os.listdir(tmp_path)
    assert "model.ckpt-1.data-00000-of-00001" in names  # Data is renamed into place first.
    assert any(n.startswith("model.ckpt-1.index.tempstate") for n in names), names
    assert os.path.isdir(prefix + ".index")


def test_manager_argument_errors(tmp_path):
    saver = _plain_saver()
    with pytest.raises(ValueError, match="keep_checkpoint_max=-1"):
        CheckpointManager(str(tmp_path), saver, keep_checkpoint_max=-1)
    with pytest.raises(ValueError, match="keep_checkpoint_every_n_hours=0"):
        CheckpointManager(str(tmp_path), saver, keep_checkpoint_every_n_hours=0)
    with pytest.raises(ValueError, match="basename"):
        CheckpointManager(str(tmp_path), saver, basename="sub/model.ckpt")
    with pytest.raises(TypeError, match="global_step"):
        CheckpointManager(str(tmp_path), saver).save(1.5)


@pytest.mark.slow
def test_saving_logs_no_tensorflow_deprecation_warning(tmp_path):
    """A default run printed TF's deprecation warning for `update_checkpoint_state` with its
    first save. TF prints each such warning once per process, so this runs in a fresh one;
    TF's own reader must still read the state file it writes."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np, tensorflow as tf\n"
        "from tpu_estimator_compat.checkpoint.checkpoints import CheckpointManager, V1Saver\n"
        "saver = V1Saver({'w': tf.Variable(np.arange(3, dtype=np.float32)),\n"
        "                 'global_step': tf.Variable(0, dtype=tf.int64)})\n"
        "manager = CheckpointManager(sys.argv[1], saver, keep_checkpoint_max=2)\n"
        "for step in (1, 2, 3):\n"
        "    manager.save(step)\n")
    model_dir = str(tmp_path / "model")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, "-c", code, model_dir], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "deprecated" not in done.stderr, done.stderr[-3000:]
    state = tf.train.get_checkpoint_state(model_dir)
    assert state.model_checkpoint_path == os.path.join(model_dir, "model.ckpt-3")
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == [
        "model.ckpt-2", "model.ckpt-3"]
    with open(os.path.join(model_dir, "checkpoint")) as f:
        assert f.read().startswith('model_checkpoint_path: "model.ckpt-3"\n')
    assert not [f for f in os.listdir(model_dir) if ".tmp" in f]


# ---------------------------------------------------------------------------------------
# model.ckpt-N.meta


_RESTORE_WITHOUT_THE_LIBRARY = """
import sys
import numpy as np
import tensorflow as tf
prefix = sys.argv[1]
with tf.Graph().as_default():
    saver = tf.compat.v1.train.import_meta_graph(prefix + ".meta")
    with tf.compat.v1.Session() as sess:
        saver.restore(sess, prefix)
        graph_values = {v.op.name: sess.run(v) for v in tf.compat.v1.global_variables()}
        trainable = sorted(v.op.name for v in tf.compat.v1.trainable_variables())
        step = sess.run(tf.compat.v1.train.get_global_step())
reader = tf.train.load_checkpoint(prefix)
names = sorted(reader.get_variable_to_shape_map())
assert sorted(graph_values) == names, (sorted(graph_values), names)
for name in names:
    expected = reader.get_tensor(name)
    assert np.array_equal(graph_values[name], expected), name
assert "tpu_estimator_compat" not in sys.modules
print("RESTORED", len(names), step, ",".join(trainable))
"""


@pytest.mark.slow
def test_meta_graph_restores_the_checkpoint_in_a_process_without_the_library(tmp_path):
    strategy = make_strategy("default")
    variables = make_variables(strategy)
    variables["dense/kernel"] = tf.Variable(PLAIN["dense/kernel"], trainable=True)
    variables["dense/kernel/Momentum"] = tf.Variable(PLAIN["dense/kernel/Momentum"],
                                                     trainable=False)
    manager = CheckpointManager(str(tmp_path), V1Saver(variables))
    prefix = manager.save(42)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([sys.executable, "-c", _RESTORE_WITHOUT_THE_LIBRARY, prefix],
                            capture_output=True, text=True, timeout=240, cwd=str(tmp_path),
                            env=dict(env, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    restored, count, step, trainable = result.stdout.split()
    assert restored == "RESTORED" and int(count) == len(variables) and int(step) == 42
    assert "dense/kernel" in trainable.split(",")
    assert "dense/kernel/Momentum" not in trainable.split(",")


def test_meta_graph_records_names_collections_and_saver(tmp_path):
    manager = CheckpointManager(str(tmp_path), _plain_saver(), keep_checkpoint_max=3,
                                keep_checkpoint_every_n_hours=2.0)
    prefix = manager.save(7)
    meta = tf.compat.v1.MetaGraphDef()
    with open(prefix + ".meta", "rb") as f:
        meta.ParseFromString(f.read())
    assert meta.saver_def.max_to_keep == 3
    assert meta.saver_def.keep_checkpoint_every_n_hours == 2.0
    assert meta.saver_def.version == tf.compat.v1.train.SaverDef.V2
    ops = {node.name for node in meta.graph_def.node}
    assert {"w", "global_step", meta.saver_def.restore_op_name.split(":")[0]} <= ops
    assert set(meta.collection_def) >= {"variables", "trainable_variables", "global_step"}


def test_meta_graph_is_built_once_per_manager_and_written_with_every_checkpoint(
        tmp_path, monkeypatch):
    built = []
    real = checkpoint_meta.meta_graph_bytes
    monkeypatch.setattr(checkpoint_meta, "meta_graph_bytes",
                        lambda *a, **k: built.append(1) or real(*a, **k))
    manager = CheckpointManager(str(tmp_path), _plain_saver(), keep_checkpoint_max=2)
    for step in (1, 2, 3):
        manager.save(step)
    assert len(built) == 1
    metas = sorted(glob.glob(os.path.join(str(tmp_path), "model.ckpt*.meta")))
    assert [os.path.basename(m) for m in metas] == ["model.ckpt-2.meta", "model.ckpt-3.meta"]
    contents = {open(m, "rb").read() for m in metas}
    assert len(contents) == 1


def test_meta_graph_of_the_same_variables_is_reused_across_managers(monkeypatch):
    """train() builds a manager per call; the bytes depend only on the variables' names,
    shapes, dtypes and trainability (and the keep_* settings), so a repeat is not rebuilt."""
    built = []
    real = checkpoint_meta.meta_graph_def
    monkeypatch.setattr(checkpoint_meta, "meta_graph_def",
                        lambda *a, **k: built.append(1) or real(*a, **k))
    monkeypatch.setattr(checkpoint_meta, "_BUILT", type(checkpoint_meta._BUILT)())

    def variables(rows, trainable=True):
        return {"w": tf.Variable(tf.zeros([rows, 2]), trainable=trainable),
                "global_step": tf.Variable(0, dtype=tf.int64, trainable=False)}

    def data(v, keep=5):
        return checkpoint_meta.meta_graph_bytes(v, max_to_keep=keep,
                                                keep_checkpoint_every_n_hours=None)

    first = data(variables(3))
    assert data(variables(3)) == first and len(built) == 1  # New variables, same signature.
    fresh = real(variables(3), max_to_keep=5, keep_checkpoint_every_n_hours=10000.0)
    assert tf.compat.v1.MetaGraphDef.FromString(first) == fresh  # Maps serialize in any order.
    # Anything the graph records is part of the key.
    assert len({first, data(variables(4)), data(variables(3, trainable=False)),
                data(variables(3), keep=2)}) == 4
    assert len(built) == 4


def _tiny_model_fn(features, labels, mode, params):
    del labels, params
    loss = tf.reduce_mean(tf.compat.v1.layers.dense(features, 1))
    train_op = tf.compat.v1.train.MomentumOptimizer(0.1, 0.9).minimize(
        loss, global_step=tf.compat.v1.train.get_or_create_global_step())
    return TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def test_estimator_writes_a_meta_per_checkpoint_that_scripts_glob_rename_and_restore(
        tmp_path):
    model_dir = str(tmp_path)
    est = TPUEstimator(model_fn=_tiny_model_fn, use_tpu=False, train_batch_size=4,
                       config=RunConfig(model_dir=model_dir, save_checkpoints_steps=2,
                                        keep_checkpoint_max=2,
                                        tpu_config=TPUConfig(iterations_per_loop=2)))
    est.train(lambda params: tf.data.Dataset.from_tensors(tf.ones([3])).repeat().batch(
        params["batch_size"]), max_steps=6)
    # google-research/bigbird: the checkpoints to evaluate are found by their .meta.
    metas = sorted(os.path.basename(p) for p in glob.glob(os.path.join(model_dir,
                                                                       "model.ckpt*.meta")))
    assert metas == ["model.ckpt-4.meta", "model.ckpt-6.meta"]
    assert _listed(model_dir) == ["model.ckpt-4", "model.ckpt-6"]
    # google-research/albert run_classifier: keep the best checkpoint by renaming its files.
    for ext in ("meta", "data-00000-of-00001", "index"):
        tf.io.gfile.rename(os.path.join(model_dir, f"model.ckpt-4.{ext}"),
                           os.path.join(model_dir, f"model.ckpt-best.{ext}"), overwrite=True)
    best = os.path.join(model_dir, "model.ckpt-best")
    with tf.Graph().as_default():
        saver = tf.compat.v1.train.import_meta_graph(best + ".meta")
        with tf.compat.v1.Session() as sess:
            saver.restore(sess, best)
            assert sess.run(tf.compat.v1.train.get_global_step()) == 4
            names = sorted(v.op.name for v in tf.compat.v1.global_variables())
    assert names == sorted(tf.train.load_checkpoint(best).get_variable_to_shape_map())
    assert "dense/kernel/Momentum" in names


def test_a_relative_model_dir_keeps_its_checkpoint_state_findable(tmp_path, monkeypatch):
    """`--model_dir=output` (relative): the state file must list `model.ckpt-N`, as legacy's
    Saver wrote it, not `../model.ckpt-N` (TensorFlow relativises the entries against a
    relative directory): latest_checkpoint then found nothing, so evaluate() had no model
    and the next train() started again from scratch."""
    monkeypatch.chdir(tmp_path)
    variables = make_variables(tf.distribute.get_strategy())
    manager = CheckpointManager("output", V1Saver(variables), keep_checkpoint_max=2)
    manager.save(3)
    manager.save(5)
    state = tf.train.get_checkpoint_state("output")
    assert state.model_checkpoint_path == "output/model.ckpt-5"
    assert list(state.all_model_checkpoint_paths) == ["output/model.ckpt-3",
                                                      "output/model.ckpt-5"]
    with open(os.path.join("output", "checkpoint")) as f:
        assert 'model_checkpoint_path: "model.ckpt-5"' in f.read()
    assert tf.train.latest_checkpoint("output") == os.path.join("output", "model.ckpt-5")
    # restore_latest returns the restored global step (the variables' own, 42).
    assert CheckpointManager("output", V1Saver(variables)).restore_latest() == int(
        variables["global_step"].numpy())
