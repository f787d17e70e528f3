"""A Scaffold's `init_fn` and `saver` in a run (checkpoint/scaffold_parts.py).

The Estimator cases are tests/legacy_recorder/scaffold_parts.py's, replayed on the library;
its golden (tests/goldens/scaffold_parts/legacy.json) holds what TF 2.15.1 +
tensorflow-estimator 2.15.0 did: when init_fn ran and what it saw, and the checkpoints a
Scaffold Saver with a var_list wrote. Checkpoints are read back with `tf.train.load_checkpoint`,
on the default strategy and on MirroredStrategy over conftest's logical CPUs.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf

from conftest import legacy_recorder
from tpu_estimator_compat.checkpoint import scaffold_parts
from tpu_estimator_compat.checkpoint import warm_start

recorder, LEGACY = legacy_recorder("scaffold_parts")
v1 = tf.compat.v1


@pytest.fixture
def config(strategy):
    """None on the default strategy, else MirroredStrategy over conftest's logical CPUs."""
    return None if strategy is tf.distribute.get_strategy() else strategy


@pytest.fixture
def pretrained(tmp_path):
    return recorder.write_pretrained(str(tmp_path / "pretrained" / "model.ckpt"))


def _close(got, want):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=2e-5, atol=1e-6)


def _assert_checkpoints(got, want, one_replica=True):
    """Files and keys; values on one replica only: legacy's golden trained one, and with
    `train_distribute` each of 8 replicas takes an input_fn batch (8x the global batch)."""
    assert got["files"] == want["files"]
    assert got["latest"] == want["latest"]
    assert sorted(got["values"]) == sorted(want["values"])
    for key, value in want["values"].items():
        if one_replica or key == "global_step":
            _close(got["values"][key], value)


@pytest.mark.slow_cases("mirrored8-scaffold_fn_init_fn", "mirrored8-evaluate_fresh")
@pytest.mark.parametrize("name", ["init_fn_saver", "scaffold_fn_init_fn", "evaluate_fresh"])
def test_init_fn_runs_once_for_a_fresh_model_as_legacys(tmp_path, pretrained, config, name):
    """init_fn restores through model_fn's (scaffold_fn's) Saver and reads the variable back;
    it runs for the fresh model only (not when train() or evaluate() restores), and its
    values are the first checkpoint's and the trained model's start."""
    if name == "scaffold_fn_init_fn" and config is not None:
        pytest.skip("A TPUEstimator's strategy comes from its own config, not train_distribute.")
    found = recorder.run(name, str(tmp_path / "model"), pretrained, config)
    want = LEGACY[name]
    for key in ("calls_after_evaluate", "calls_after_train", "calls_after_second_train",
                "calls_at_end"):
        assert found.get(key) == want.get(key), key
    assert [c["scaffold_saver"] for c in found["seen"]] == [
        c["scaffold_saver"] for c in want["seen"]]
    for got, expected in zip(found["seen"], want["seen"]):
        _close(got["w"], expected["w"])
    _close(found["first_checkpoint_w"], want["first_checkpoint_w"])
    _assert_checkpoints(found["checkpoints"], want["checkpoints"], config is None)
    for key in ("evaluate", "evaluate_after"):
        if key in want and (config is None or key == "evaluate"):
            _close(found[key]["w0"] if key == "evaluate" else found[key],
                   want[key]["w0"] if key == "evaluate" else want[key])


def test_a_scaffold_saver_var_list_writes_its_keys_and_resumes_as_legacy(
        tmp_path, pretrained, config):
    """`Saver({'renamed/w': w, 'global_step': step}, max_to_keep=2, pad_step_number=True)`:
    its keys only, its retention and 8-digit file names; a second train() fails as legacy's
    did, `b` having no value."""
    model_dir = str(tmp_path / "model")
    found = recorder.run("saver_var_list", model_dir, pretrained, config)
    assert found["resume"] == LEGACY["saver_var_list"]["resume"]
    _assert_checkpoints(found["checkpoints"], LEGACY["saver_var_list"]["checkpoints"],
                        config is None)
    est = recorder.estimator("saver_var_list", model_dir, pretrained, config)
    with pytest.raises(RuntimeError, match=r"Variables not initialized: b\. .*warm_start_from"):
        est.train(recorder.input_fn, steps=1)


def _tf_slim_model_fn(features, labels, mode, params):
    """tf_slim's `assign_from_checkpoint_fn` in model_fn, its callback as init_fn (research
    code's `Scaffold(init_fn=lambda _, sess: init_fn(sess))`)."""
    import tf_slim as slim

    w, _, loss, train_op = recorder._linear(features, labels, mode)
    restore = slim.assign_from_checkpoint_fn(params["pretrained"], {"pre/w": w},
                                             ignore_missing_vars=True)
    return tf.estimator.EstimatorSpec(
        mode, loss=loss, train_op=train_op,
        scaffold=v1.train.Scaffold(init_fn=lambda scaffold, session: restore(session)))


def test_tf_slims_assign_from_checkpoint_fn_initialises_the_model(tmp_path, pretrained,
                                                                  config):
    est = tf.estimator.Estimator(_tf_slim_model_fn, model_dir=str(tmp_path / "model"),
                                 config=tf.estimator.RunConfig(train_distribute=config),
                                 params={"pretrained": pretrained})
    est.train(recorder.input_fn, steps=1)
    _close(recorder.first_checkpoint_w(str(tmp_path / "model")), recorder.PRETRAINED_W.ravel())


def _graph_op_model_fn(features, labels, mode):
    """An init_fn running a tensor model_fn built (as `session.run(assign_op)` would)."""
    _, _, loss, train_op = recorder._linear(features, labels, mode)
    return tf.estimator.EstimatorSpec(
        mode, loss=loss, train_op=train_op,
        scaffold=v1.train.Scaffold(init_fn=lambda scaffold, session: session.run(loss)))


def test_init_fn_running_an_op_of_model_fns_graph_is_a_clear_error(tmp_path):
    est = tf.estimator.Estimator(_graph_op_model_fn, model_dir=str(tmp_path))
    with pytest.raises(NotImplementedError, match=r"an op or tensor of the graph model_fn "
                                                  r"was traced in.*init_from_checkpoint"):
        est.train(recorder.input_fn, steps=1)


def test_init_session_reads_variables_and_refuses_what_it_cannot_run():
    session = scaffold_parts.InitSession()
    w = tf.Variable([1.0, 2.0])
    got = session.run({"w": w, "both": [w, tf.constant(3)]})
    np.testing.assert_array_equal(got["w"], [1.0, 2.0])
    assert got["both"][1] == 3
    with pytest.raises(TypeError, match="Fetch argument None has invalid type"):
        session.run(None)
    with pytest.raises(NotImplementedError, match=r"with feed_dict=.*init_from_checkpoint"):
        session.run(w, feed_dict={"x:0": 1})
    with pytest.raises(AttributeError, match="has no 'graph': there is no TF1 session"):
        session.graph  # pylint: disable=pointless-statement


def test_training_saver_takes_the_recorded_savers_settings():
    a, b = tf.Variable(1.0), tf.Variable(2.0)
    variables = {"a": a, "b": b}
    default = scaffold_parts.training_saver(None, variables, (), 7, 3.0)
    assert sorted(default.saver.variables) == ["a", "b"]
    assert (default.keep_checkpoint_max, default.keep_checkpoint_every_n_hours) == (7, 3.0)
    saver = warm_start.saver_over({"x/a": a})
    saver.max_to_keep, saver.pad_step_number = 1, True
    chosen = scaffold_parts.training_saver(saver, variables, (), 7, 3.0)
    assert chosen.saver.variables == {"x/a": a} and chosen.var_list_given
    assert (chosen.keep_checkpoint_max, chosen.pad_step_number) == (1, True)
    saver.write_version = v1.train.SaverDef.V1
    with pytest.raises(NotImplementedError, match="write_version=SaverDef.V1"):
        scaffold_parts.training_saver(saver, variables, (), 7, 3.0)
    with pytest.raises(ValueError, match="No variables to save"):
        scaffold_parts.training_saver(warm_start.saver_over([]), variables, (), 7, 3.0)
    with pytest.raises(ValueError, match="not variables of the model"):
        scaffold_parts.training_saver(warm_start.saver_over({"t": tf.constant(1.0)}),
                                      variables, (), 7, 3.0)


def test_run_init_fn_gives_init_fn_legacys_default_saver(tmp_path):
    """Legacy's `Scaffold.finalize` made a Saver over every variable before init_fn ran:
    `scaffold.saver.restore(session, path)` (SavedModelEstimator's init_fn) restores."""
    w = tf.Variable([0.0, 0.0])
    prefix = str(tmp_path / "ckpt")
    with tf.Graph().as_default(), v1.Session() as sess:
        saved = v1.get_variable("w", initializer=np.array([4.0, 5.0], np.float32))
        sess.run(saved.initializer)
        v1.train.Saver([saved]).save(sess, prefix)
    scaffold = v1.train.Scaffold(
        init_fn=lambda scaffold, session: scaffold.saver.restore(session, prefix))
    assert scaffold_parts.run_init_fn(scaffold, {"w": w})
    np.testing.assert_array_equal(w.numpy(), [4.0, 5.0])
    assert not scaffold_parts.run_init_fn(v1.train.Scaffold(), {"w": w})
    assert not scaffold_parts.run_init_fn(None, {"w": w})


def test_a_checkpoint_in_model_dir_skips_init_fn(tmp_path, pretrained):
    """Legacy's session manager called init_fn only when it restored no checkpoint."""
    calls = []

    def model_fn(features, labels, mode):
        _, _, loss, train_op = recorder._linear(features, labels, mode)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op,
                                          scaffold=v1.train.Scaffold(
                                              init_fn=lambda s, session: calls.append(1)))

    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(recorder.input_fn, steps=1)
    est.train(recorder.input_fn, steps=1)
    est.evaluate(recorder.input_fn, steps=1)
    assert calls == [1]
    assert os.path.exists(str(tmp_path / "model.ckpt-2.index"))


def _scaffold_fn_saver_model_fn(features, labels, mode, params):
    w, _, loss, train_op = recorder._linear(features, labels, mode)

    def scaffold_fn():
        return v1.train.Scaffold(saver=v1.train.Saver(
            {"renamed/w": w, "global_step": v1.train.get_global_step()}, max_to_keep=1))

    return v1.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op,
                                             scaffold_fn=scaffold_fn)


def test_a_scaffold_fn_saver_writes_the_checkpoints_in_training(tmp_path):
    """The Saver a TPUEstimatorSpec's scaffold_fn returns, as an EstimatorSpec's Scaffold
    Saver above: legacy's TPUEstimator (use_tpu=False) passed scaffold_fn's Scaffold on."""
    config = v1.estimator.tpu.RunConfig(model_dir=str(tmp_path), save_checkpoints_steps=1)
    est = v1.estimator.tpu.TPUEstimator(model_fn=_scaffold_fn_saver_model_fn, config=config,
                                        use_tpu=False, train_batch_size=4)
    est.train(recorder.input_fn, steps=2)
    assert sorted(f for f in os.listdir(tmp_path) if f.endswith(".index")) == [
        "model.ckpt-2.index"]
    assert sorted(tf.train.load_checkpoint(str(tmp_path)).get_variable_to_shape_map()) == [
        "global_step", "renamed/w"]


def test_a_scaffolds_own_ops_are_named_as_not_run(caplog):
    """Legacy's session manager ran a Scaffold's init_op, ready_op and local_init_op; here
    there is no session, and a warning names the pieces a model_fn set."""
    with tf.Graph().as_default():
        op = tf.no_op()
        parts = scaffold_parts.ScaffoldParts.of(
            v1.train.Scaffold(init_op=op, local_init_op=op))
    assert parts.unrun == ("init_op", "local_init_op")
    assert scaffold_parts.ScaffoldParts.of(v1.train.Scaffold()).unrun == ()
    with caplog.at_level("WARNING", logger="absl"):
        parts.warn_unrun()
    assert any("sets init_op, local_init_op, which tpu_estimator_compat does not run"
               in r.getMessage() for r in caplog.records)
