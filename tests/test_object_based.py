"""Object-based checkpoints through `Scaffold(saver=...)` (checkpoint/object_based.py).

The models are tests/legacy_recorder/object_checkpoints.py's, replayed on the library; its
golden (tests/goldens/object_checkpoints/legacy.json) holds the keys, shapes, dtypes and
object-graph attributes of the checkpoints TF 2.15.1 + tensorflow-estimator 2.15.0 wrote for
them. Every checkpoint here is read back with TensorFlow's own readers
(`tf.train.load_checkpoint`, `tf.train.Checkpoint.restore`, Keras `load_weights`), on the
default strategy and on MirroredStrategy over conftest's logical CPUs.
"""

from __future__ import annotations

import os
import types

import numpy as np
import pytest
import tensorflow as tf

from conftest import legacy_recorder, make_strategy
from tpu_estimator_compat._tf import object_graph
from tpu_estimator_compat.checkpoint import checkpoints as checkpoints_lib
from tpu_estimator_compat.checkpoint import object_based

recorder, LEGACY = legacy_recorder("object_checkpoints")
KEY = object_based.OBJECT_GRAPH_KEY


@pytest.fixture
def config(strategy):
    """The RunConfig of a run on conftest's strategies: the default one, or MirroredStrategy
    over its logical CPUs (the process-wide instance: one over fewer of the same CPUs would
    take the same collective group key)."""
    if strategy is tf.distribute.get_strategy():
        return None
    return tf.estimator.RunConfig(train_distribute=strategy)


def _trained(name: str, model_dir: str, config=None, steps: int = recorder.STEPS):
    est = recorder.estimator(name, model_dir, config)
    est.train(recorder.INPUT_FNS[name], steps=steps)
    return est


@pytest.mark.slow_cases("mirrored8-checkpoint", "mirrored8-keras")  # 13-14 s each.
@pytest.mark.parametrize("name", ["checkpoint", "docs", "keras"])
def test_checkpoint_holds_legacys_keys_and_object_graph(tmp_path, config, name):
    """Each model's checkpoint has legacy's keys (shapes, dtypes), no v1 names, the object
    graph proto naming the same variables, and its step key at the steps trained."""
    _trained(name, str(tmp_path), config)
    latest = tf.train.latest_checkpoint(str(tmp_path))
    found = recorder.describe(latest)
    assert found["keys"] == LEGACY[name]["keys"]
    assert found["attributes"] == LEGACY[name]["attributes"]
    assert os.path.basename(latest) == LEGACY[name]["checkpoint"]
    assert int(tf.train.load_variable(latest, recorder.STEP_KEYS[name])) == recorder.STEPS
    assert "global_step" not in dict(tf.train.list_variables(latest))
    # The `.meta` beside it restores it in a TF1 session, under the same keys.
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        tf.compat.v1.train.import_meta_graph(latest + ".meta").restore(session, latest)
        names = {v.op.name for v in tf.compat.v1.global_variables()}
    assert names == set(found["keys"]) - {KEY}


def _fresh_checkpoint():
    """object_checkpointing_test's objects, built, as a TF2 program restores them."""
    model = recorder.SubclassedModel()
    optimizer = tf.keras.optimizers.Adam(0.01)
    checkpoint = tf.train.Checkpoint(step=tf.Variable(0, dtype=tf.int64),
                                     optimizer=optimizer, model=model)
    model(tf.constant([[1.]]))
    optimizer.build(model.trainable_variables)
    checkpoint.save_counter  # pylint: disable=pointless-statement
    return checkpoint


@pytest.mark.slow_cases("mirrored8")
def test_tf_checkpoint_restores_every_value(tmp_path, config):
    """`tf.train.Checkpoint.restore` of the estimator's checkpoint consumes every value."""
    _trained("checkpoint", str(tmp_path), config)
    latest = tf.train.latest_checkpoint(str(tmp_path))
    checkpoint = _fresh_checkpoint()
    checkpoint.restore(latest).assert_consumed()
    assert int(checkpoint.step) == recorder.STEPS
    reader = tf.train.load_checkpoint(latest)
    dense_two = checkpoint.model.dense_two
    np.testing.assert_array_equal(
        dense_two.bias.numpy(),
        reader.get_tensor("model/dense_two/bias/.ATTRIBUTES/VARIABLE_VALUE"))
    # The loss is the output's sum over 10 (each replica: its own 10) rows of [1.]: Adam moved
    # the bias by about lr per step from 0.
    assert dense_two.bias.numpy()[0] == pytest.approx(-0.01 * recorder.STEPS, abs=2e-3)


@pytest.mark.slow_cases("mirrored8")
def test_train_resumes_and_predict_restores_from_object_checkpoints(tmp_path, config):
    """A second train() restores the object-based checkpoint (the step goes on); predict
    restores one written by a TF2 program's `Checkpoint.save` (two-way compatibility)."""
    est = _trained("checkpoint", str(tmp_path / "est"), config)
    est.train(recorder.checkpoint_input_fn, steps=2)
    latest = tf.train.latest_checkpoint(str(tmp_path / "est"))
    assert latest.endswith(f"model.ckpt-{recorder.STEPS + 2}")
    assert int(tf.train.load_variable(latest, "step/.ATTRIBUTES/VARIABLE_VALUE")) == (
        recorder.STEPS + 2)

    checkpoint = _fresh_checkpoint()
    checkpoint.restore(latest).assert_consumed()
    checkpoint.step.assign(40)
    checkpoint.model.dense_two.bias.assign([13.])
    checkpoint.save(str(tmp_path / "tf2") + "/")
    loaded = recorder.estimator("checkpoint", str(tmp_path / "tf2"), config)
    prediction = next(loaded.predict(recorder.checkpoint_input_fn))
    np.testing.assert_allclose(prediction["bias"], [13.])


def test_docs_checkpoint_value_by_object_key(tmp_path, config):
    """The docs' `est.get_variable_value('var_list/var/.ATTRIBUTES/VARIABLE_VALUE')`."""
    est = _trained("docs", str(tmp_path), config)
    assert est.get_variable_value("var_list/var/.ATTRIBUTES/VARIABLE_VALUE") == (
        2 * recorder.STEPS)  # Legacy's train_op adds 2 per step.


def test_warm_start_from_an_object_based_model_dir(tmp_path, config):
    """A name-based model warm-starts from object-based checkpoints through the names their
    object graph records (legacy's warm start did the same)."""
    _trained("docs", str(tmp_path / "object"), config)

    def model_fn(features, labels, mode):
        del features, labels
        v = tf.compat.v1.get_variable("var", shape=[], initializer=tf.zeros_initializer())
        step = tf.compat.v1.train.get_or_create_global_step()
        return tf.estimator.EstimatorSpec(mode, predictions=v, loss=tf.constant(1.),
                                          train_op=tf.group(v.assign_add(1), step.assign_add(1)))

    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path / "named"), config=config,
                                 warm_start_from=str(tmp_path / "object"))
    est.train(recorder.docs_input_fn, steps=1)
    assert est.get_variable_value("var") == 2 * recorder.STEPS + 1


def test_keras_load_weights_and_evaluate_from_the_estimators_checkpoint(tmp_path):
    """model_to_estimator's default format: Keras `load_weights` reads the checkpoint, and
    evaluate restores it (the loss is the loaded model's)."""
    est = _trained("keras", str(tmp_path))
    latest = tf.train.latest_checkpoint(str(tmp_path))
    model = recorder.keras_model(compiled=False)
    model.load_weights(latest)
    # The checkpoint's slots are a legacy optimizer's (keras_lib trains with one).
    model.compile(tf.keras.optimizers.legacy.RMSprop(), loss="categorical_crossentropy")
    reader = tf.train.load_checkpoint(latest)
    np.testing.assert_array_equal(
        model.layers[1].kernel.numpy(),
        reader.get_tensor("layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE"))
    features, labels = next(iter(recorder.keras_input_fn().unbatch().batch(16)))
    expected = model.evaluate(features["x"], labels, verbose=0)
    results = est.evaluate(lambda: recorder.keras_input_fn().take(4), steps=4)
    assert results["global_step"] == recorder.STEPS
    assert results["loss"] == pytest.approx(expected, rel=1e-5)


def test_name_based_checkpoints_stay_name_based(tmp_path):
    """Without an object-based Scaffold saver the checkpoint keeps the v1 names only."""
    def model_fn(features, labels, mode):
        del labels
        v = tf.compat.v1.get_variable("var", shape=[], initializer=tf.zeros_initializer())
        step = tf.compat.v1.train.get_or_create_global_step()
        return tf.estimator.EstimatorSpec(
            mode, predictions=tf.cast(features, tf.float32) + v, loss=tf.constant(1.),
            train_op=tf.group(v.assign_add(2), step.assign_add(1)),
            scaffold=tf.compat.v1.train.Scaffold(saver=tf.compat.v1.train.Saver()))

    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(recorder.docs_input_fn, steps=2)
    assert sorted(dict(tf.train.list_variables(est.latest_checkpoint()))) == [
        "global_step", "var"]


def test_export_keeps_the_object_graph_keys(tmp_path):
    """export_saved_model with a `tf.train.Checkpoint` saver: legacy's Scaffold froze it
    into a Saver, so the SavedModel's variables keep the object-graph keys; it serves."""
    est = _trained("checkpoint", str(tmp_path / "est"))

    def receiver():
        x = tf.compat.v1.placeholder(tf.float32, [None, 1], name="input")
        return tf.estimator.export.ServingInputReceiver({"feature": x}, x)

    export_dir = est.export_saved_model(str(tmp_path / "export"), receiver).decode()
    variables = dict(tf.train.list_variables(os.path.join(export_dir, "variables",
                                                          "variables")))
    assert KEY in variables and "model/dense_one/kernel/.ATTRIBUTES/VARIABLE_VALUE" in variables
    served = tf.saved_model.load(export_dir).signatures["serving_default"](
        tf.constant([[1.]]))
    reader = tf.train.load_checkpoint(est.latest_checkpoint())
    np.testing.assert_allclose(
        served["bias"].numpy()[0],
        reader.get_tensor("model/dense_two/bias/.ATTRIBUTES/VARIABLE_VALUE"))


# ------------------------------------------------------------------------------------------
# ObjectGraphSaver and the object-graph reads, without an estimator.
# ------------------------------------------------------------------------------------------

def _saver_of(root):
    saver = object_based.object_saver(root)
    assert isinstance(saver, object_based.ObjectGraphSaver)
    return saver


def test_object_saver_round_trip_and_tf_restore(tmp_path):
    v = tf.Variable([1., 2.])
    step = tf.Variable(7, dtype=tf.int64)
    root = tf.train.Checkpoint(var_list={"var": v}, step=step)
    root.save_counter  # pylint: disable=pointless-statement  # What restore() makes.
    saver = _saver_of(root)
    keys = ["save_counter/.ATTRIBUTES/VARIABLE_VALUE", "step/.ATTRIBUTES/VARIABLE_VALUE",
            "var_list/var/.ATTRIBUTES/VARIABLE_VALUE"]
    assert sorted(saver.variables) == keys
    prefix = saver.save(str(tmp_path / "ckpt-7"))
    assert sorted(dict(tf.train.list_variables(prefix))) == [KEY] + keys
    v.assign([0., 0.])
    saver.restore(prefix)
    np.testing.assert_array_equal(v.numpy(), [1., 2.])
    other = tf.Variable([0., 0.])
    tf.train.Checkpoint(var_list={"var": other}, step=tf.Variable(0, dtype=tf.int64)).restore(
        prefix).assert_consumed()
    np.testing.assert_array_equal(other.numpy(), [1., 2.])


def test_object_saver_writes_the_proto_tensorflow_writes(tmp_path):
    """The object graph written is TensorFlow's own `Checkpoint.write` proto."""
    root = tf.train.Checkpoint(a=tf.Variable(1.), b={"c": tf.Variable([2, 3])})
    prefix = _saver_of(root).save(str(tmp_path / "mine"))
    theirs = root.write(str(tmp_path / "theirs"))
    mine_reader, their_reader = tf.train.load_checkpoint(prefix), tf.train.load_checkpoint(theirs)
    assert mine_reader.get_tensor(KEY) == their_reader.get_tensor(KEY)
    assert mine_reader.get_variable_to_shape_map() == their_reader.get_variable_to_shape_map()


def test_object_saver_restore_names_missing_keys(tmp_path):
    saver = _saver_of(tf.train.Checkpoint(a=tf.Variable(1.)))
    prefix = checkpoints_lib.V1Saver({"a": tf.Variable(1.)}).save(str(tmp_path / "v1"))
    with pytest.raises(ValueError, match=r"a/\.ATTRIBUTES/VARIABLE_VALUE.*no such variable"):
        saver.restore(prefix)


def test_only_object_based_savers_are_recognised():
    assert object_based.object_saver(None) is None
    assert object_based.object_saver(object()) is None
    named = types.SimpleNamespace(var_list=[tf.Variable(1.)])  # A name-based Saver's list.
    assert object_based.object_saver(named) is None
    frozen = object_graph.frozen_saveables(tf.train.Checkpoint(a=tf.Variable(1.)))
    assert object_graph.is_frozen_object_graph(frozen)
    assert not object_graph.is_frozen_object_graph([tf.Variable(1.)])


def test_a_table_in_the_object_graph_is_refused_by_name():
    table = tf.lookup.experimental.MutableHashTable(tf.string, tf.int64, default_value=-1)
    with pytest.raises(NotImplementedError, match="table.*not one whole variable"):
        object_based.object_saver(tf.train.Checkpoint(table=table))


def test_object_graph_saver_refuses_an_empty_graph():
    with pytest.raises(ValueError, match="empty object graph"):
        object_based.ObjectGraphSaver({"a": tf.Variable(1.)}, b"")


def test_distributed_variables_are_saved_by_value(tmp_path):
    """On MirroredStrategy a mirrored variable is saved by its value and a sync-on-read one
    (batch-norm statistics, metrics) by its aggregate, as the name-based saver does."""
    strategy = make_strategy("mirrored8")
    replicas = strategy.num_replicas_in_sync
    with strategy.scope():
        mirrored = tf.Variable([1., 2.])
        on_read = tf.Variable(0., synchronization=tf.VariableSynchronization.ON_READ,
                              aggregation=tf.VariableAggregation.SUM)
    strategy.run(lambda: on_read.assign(3.))  # Each replica's copy: 3, the SUM: 3 * replicas.
    root = tf.train.Checkpoint(mirrored=mirrored, on_read=on_read)
    saver = _saver_of(root)
    assert {key: id(v) for key, v in saver.variables.items()} == {
        "mirrored/.ATTRIBUTES/VARIABLE_VALUE": id(mirrored),
        "on_read/.ATTRIBUTES/VARIABLE_VALUE": id(on_read)}
    with strategy.scope():
        prefix = saver.save(str(tmp_path / "ckpt"))
    reader = tf.train.load_checkpoint(prefix)
    assert reader.get_tensor("on_read/.ATTRIBUTES/VARIABLE_VALUE") == 3. * replicas
    np.testing.assert_array_equal(reader.get_tensor("mirrored/.ATTRIBUTES/VARIABLE_VALUE"),
                                  [1., 2.])
    with strategy.scope():
        mirrored.assign([0., 0.])
        saver.restore(prefix)
    np.testing.assert_array_equal(mirrored.numpy(), [1., 2.])
    assert float(on_read.read_value()) == 3. * replicas
