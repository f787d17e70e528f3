"""The plain `tf.estimator.Estimator` on the engine: legacy argument matching, train,
evaluate with `eval_metric_ops`, predict, export, and `RunConfig(train_distribute=...)`.

Every test runs for real and reads what was written back with TensorFlow's own readers.
"""

import inspect
import os

import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator_compat
from tpu_estimator_compat import TPUEstimator, TPUEstimatorSpec
from tpu_estimator_compat.api.estimator import Estimator

tpu_estimator_compat.install_aliases()
v1 = tf.compat.v1

_RNG = np.random.RandomState(0)
X = _RNG.rand(64, 3).astype(np.float32)
Y = (X.sum(axis=1) > 1.5).astype(np.int32)
BATCH = 8


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(BATCH)


def linear_model_fn(features, labels, mode):
    """Two-class logistic regression in tf.compat.v1 layers, as r1 tutorials wrote it."""
    logits = v1.layers.dense(features["x"], 2, kernel_initializer=v1.zeros_initializer())
    classes = tf.argmax(logits, axis=1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"classes": classes,
                                                             "logits": logits})
    loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = v1.train.GradientDescentOptimizer(0.5).minimize(
        loss, global_step=v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(
        mode, loss=loss, train_op=train_op,
        eval_metric_ops={"accuracy": v1.metrics.accuracy(labels, classes)})


def checkpoint_values(path):
    reader = tf.train.load_checkpoint(path)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _logits(values, x):
    return x @ values["dense/kernel"] + values["dense/bias"]


def test_public_paths_serve_the_one_estimator():
    from tensorflow_estimator.python.estimator import estimator as estimator_module

    assert tf.estimator.Estimator is Estimator
    assert tf.compat.v1.estimator.Estimator is Estimator
    assert estimator_module.Estimator is Estimator
    assert estimator_module.EstimatorV2 is Estimator
    assert issubclass(TPUEstimator, Estimator)  # As legacy's class tree had it.


def test_train_evaluate_predict_one_replica(tmp_path):
    est = tf.estimator.Estimator(linear_model_fn, model_dir=str(tmp_path),
                                 config=tf.estimator.RunConfig(tf_random_seed=3))
    est.train(input_fn, steps=5)
    values = checkpoint_values(est.latest_checkpoint())
    assert est.latest_checkpoint() == os.path.join(str(tmp_path), "model.ckpt-5")
    assert sorted(est.get_variable_names()) == ["dense/bias", "dense/kernel", "global_step"]
    assert values["global_step"] == 5
    np.testing.assert_array_equal(est.get_variable_value("dense/kernel"),
                                  values["dense/kernel"])
    assert np.abs(values["dense/kernel"]).sum() > 0  # It learnt from the zero start.

    expected_classes = np.argmax(_logits(values, X), axis=1)
    metrics = est.evaluate(input_fn)
    assert metrics["global_step"] == 5
    np.testing.assert_allclose(metrics["accuracy"], np.mean(expected_classes == Y), rtol=1e-6)
    assert tf.io.gfile.glob(os.path.join(est.eval_dir(), "events.out.tfevents.*"))

    predictions = list(est.predict(input_fn))
    assert len(predictions) == len(X)  # Every example once, in order.
    np.testing.assert_array_equal([p["classes"] for p in predictions], expected_classes)
    np.testing.assert_allclose([p["logits"] for p in predictions], _logits(values, X),
                               rtol=1e-5, atol=1e-6)


def test_train_until_input_ends_and_resume_to_max_steps(tmp_path):
    est = tf.estimator.Estimator(linear_model_fn, model_dir=str(tmp_path))
    est.train(input_fn)  # No steps: until input_fn's 8 batches are used up.
    assert checkpoint_values(est.latest_checkpoint())["global_step"] == len(X) // BATCH
    est.train(lambda: input_fn().repeat(), max_steps=11)
    assert checkpoint_values(est.latest_checkpoint())["global_step"] == 11


def test_train_distribute_feeds_each_replica_one_input_fn_batch(tmp_path, strategy):
    """Legacy's distributed Estimator gave each replica its own element of input_fn's
    dataset and averaged the replicas' gradients: one step on R replicas equals one step on
    the concatenation of R batches."""
    replicas = strategy.num_replicas_in_sync
    config = tf.estimator.RunConfig(train_distribute=strategy)
    est = tf.estimator.Estimator(linear_model_fn, model_dir=str(tmp_path / "dist"),
                                 config=config)
    est.train(input_fn, steps=1)
    distributed = checkpoint_values(est.latest_checkpoint())
    assert distributed["global_step"] == 1

    def global_input_fn():
        return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(BATCH * replicas)

    ref = tf.estimator.Estimator(linear_model_fn, model_dir=str(tmp_path / "one"))
    ref.train(global_input_fn, steps=1)
    one = checkpoint_values(ref.latest_checkpoint())
    for name in ("dense/kernel", "dense/bias"):
        np.testing.assert_allclose(distributed[name], one[name], rtol=1e-5, atol=1e-6)
    # Without eval_distribute, legacy evaluated on one device: every example once.
    metrics = est.evaluate(input_fn)
    expected = np.argmax(_logits(distributed, X), axis=1)
    np.testing.assert_allclose(metrics["accuracy"], np.mean(expected == Y), rtol=1e-6)


def _features_only_model_fn(features):
    loss = tf.reduce_mean(v1.layers.dense(features["x"], 1))
    return tf.estimator.EstimatorSpec(
        "train", loss=loss, train_op=v1.assign_add(v1.train.get_global_step(), 1))


@pytest.mark.parametrize("model_fn, params", [
    (lambda features, labels, mode, params, config: linear_model_fn(features, labels, mode),
     {"lr": 1}),
    (lambda features, labels: linear_model_fn(features, labels, "train"), None),
    (lambda features, labels, config: linear_model_fn(features, labels, "train"), None),
])
def test_model_fn_gets_the_arguments_it_names(tmp_path, model_fn, params):
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path), params=params)
    est.train(input_fn, steps=1)
    assert checkpoint_values(est.latest_checkpoint())["global_step"] == 1


def test_params_reach_model_fn_and_input_fn_as_given(tmp_path):
    seen = {}

    def model_fn(features, labels, mode, params, config):
        seen["model_fn"] = (dict(params), config.model_dir)
        return linear_model_fn(features, labels, mode)

    def my_input_fn(params, mode, config):
        seen["input_fn"] = (dict(params), mode, config.model_dir)
        return input_fn()

    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path), params={"units": 2})
    est.train(my_input_fn, steps=1)
    # No batch_size, use_tpu or context: those were TPUEstimator's.
    assert seen["model_fn"] == ({"units": 2}, str(tmp_path))
    assert seen["input_fn"] == ({"units": 2}, "train", str(tmp_path))
    assert est.params == {"units": 2}


def test_features_only_model_fn_with_labelless_input(tmp_path):
    est = tf.estimator.Estimator(_features_only_model_fn, model_dir=str(tmp_path))
    est.train(lambda: tf.data.Dataset.from_tensor_slices({"x": X}).batch(BATCH), steps=2)
    assert checkpoint_values(est.latest_checkpoint())["global_step"] == 2
    with pytest.raises(ValueError, match="model_fn does not take labels"):
        est.train(input_fn, steps=1)


@pytest.mark.parametrize("model_fn, params, match", [
    (lambda labels, mode: None, None, "must include features argument"),
    (lambda features, labels: None, {"a": 1}, "does not include params argument, but params"),
    (lambda features, labels, hparams: None, None, r"not expected args: \['hparams'\]"),
])
def test_bad_model_fn_signature_gets_legacy_error(tmp_path, model_fn, params, match):
    with pytest.raises(ValueError, match=match):
        tf.estimator.Estimator(model_fn, model_dir=str(tmp_path), params=params)


def test_bad_construction_gets_legacy_errors(tmp_path):
    with pytest.raises(ValueError, match="model_fn must be provided to Estimator"):
        tf.estimator.Estimator(None)
    with pytest.raises(ValueError, match="config must be an instance of `RunConfig`"):
        tf.estimator.Estimator(linear_model_fn, config={"model_dir": str(tmp_path)})


def test_tpu_estimator_spec_is_refused_as_legacy_refused_it(tmp_path):
    def model_fn(features, labels, mode):
        spec = linear_model_fn(features, labels, mode)
        return TPUEstimatorSpec(mode, loss=spec.loss, train_op=spec.train_op)

    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    with pytest.raises(ValueError, match="model_fn should return an EstimatorSpec"):
        est.train(input_fn, steps=1)


def test_training_chief_hooks_run_on_the_chief(tmp_path):
    class CountHook(v1.train.SessionRunHook):
        runs = 0

        def after_run(self, run_context, run_values):
            CountHook.runs += 1

    def model_fn(features, labels, mode):
        spec = linear_model_fn(features, labels, mode)
        return spec._replace(training_chief_hooks=[CountHook()])

    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(input_fn, steps=3)
    assert CountHook.runs == 3  # One step per session.run, as legacy.

    class NotChief(tf.estimator.RunConfig):  # Legacy read the config's is_chief.
        @property
        def is_chief(self):
            return False

    tf.estimator.Estimator(model_fn, model_dir=str(tmp_path / "worker"),
                           config=NotChief()).train(input_fn, steps=2)
    assert CountHook.runs == 3


def test_export_saved_model_serves_the_checkpoint(tmp_path):
    est = tf.estimator.Estimator(linear_model_fn, model_dir=str(tmp_path / "model"))
    est.train(input_fn, steps=3)
    values = checkpoint_values(est.latest_checkpoint())

    def receiver():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        return tf.estimator.export.ServingInputReceiver({"x": x}, {"x": x})

    path = est.export_saved_model(str(tmp_path / "export"), receiver)
    loaded = tf.saved_model.load(path.decode() if isinstance(path, bytes) else path)
    out = loaded.signatures["serving_default"](x=tf.constant(X[:4]))
    np.testing.assert_allclose(out["logits"].numpy(), _logits(values, X[:4]), rtol=1e-5,
                               atol=1e-6)


def _matmul_attrs(export_dir):
    """The attribute names of the exported serving graph's MatMul node."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    (matmul,) = [n for n in proto.meta_graphs[0].graph_def.node if n.op == "MatMul"]
    return set(matmul.attr)


def test_export_savedmodel_takes_tf1_s_strip_default_attrs(tmp_path):
    """TF 1.x's `export_savedmodel(..., strip_default_attrs=True)` (tensorflow/models'
    official r1 programs call it so) was refused as an unexpected keyword. Legacy's keeps a
    node's default-valued attributes unless told to strip them; `export_saved_model` always
    strips them."""
    est = tf.estimator.Estimator(linear_model_fn, model_dir=str(tmp_path / "model"))
    est.train(input_fn, steps=2)
    def receiver():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        return tf.estimator.export.ServingInputReceiver({"x": x}, {"x": x})

    stripped = est.export_savedmodel(str(tmp_path / "a"), receiver, strip_default_attrs=True)
    kept = est.export_savedmodel(str(tmp_path / "b"), receiver)
    v2 = est.export_saved_model(str(tmp_path / "c"), receiver)
    assert {"transpose_a", "transpose_b"} <= _matmul_attrs(kept.decode())
    assert not {"transpose_a", "transpose_b"} & _matmul_attrs(stripped.decode())
    assert _matmul_attrs(v2.decode()) == _matmul_attrs(stripped.decode())
    loaded = tf.saved_model.load(stripped.decode())
    out = loaded.signatures["serving_default"](x=tf.constant(X[:4]))
    values = checkpoint_values(est.latest_checkpoint())
    np.testing.assert_allclose(out["logits"].numpy(), _logits(values, X[:4]), rtol=1e-5,
                               atol=1e-6)
    with pytest.raises(ValueError, match="An input_receiver_fn must be defined."):
        est.export_savedmodel(str(tmp_path / "d"), None)


# Replayed against tests/goldens/estimator_plain/legacy.json (recorded by
# tests/legacy_recorder/estimator_plain.py on the legacy stack, TF_ENABLE_ONEDNN_OPTS=0).

def test_plain_estimator_matches_legacy_bit_for_bit(tmp_path):
    """The r1 script unchanged: per-step losses, evaluate()'s metrics (a train_op built in
    every mode, never run outside TRAIN), predictions and the checkpoint's names, shapes and
    values equal legacy's on one replica."""
    from conftest import legacy_recorder

    recorder, golden = legacy_recorder("estimator_plain")
    shim, legacy = recorder.run(str(tmp_path)), golden["legacy"]
    np.testing.assert_array_equal(np.float32(shim["losses"]), np.float32(legacy["losses"]))
    assert shim["metrics"].keys() == legacy["metrics"].keys()
    for name, value in legacy["metrics"].items():
        assert np.float32(shim["metrics"][name]) == np.float32(value), name
    assert shim["global_step"] == legacy["global_step"] == recorder.STEPS
    _assert_outputs_match_legacy(shim, legacy, golden)


def _assert_outputs_match_legacy(shim, legacy, golden):
    """The checkpoint's name, the predictions and the checkpoint's variables of a replay
    against its golden, bit for bit on the golden's CPU kind (`assert_legacy_equal`)."""
    from conftest import assert_legacy_equal

    assert shim["checkpoint"] == legacy["checkpoint"]
    for key in ("class_ids", "logits"):
        assert_legacy_equal(shim["predictions"][key], legacy["predictions"][key], golden, key)
    # From bit-equal logits, TF 2.21's softmax kernel rounds ~1 in 8 values 1 ulp apart
    # from TF 2.15's (measured: at most 1.5e-8 absolute): the kernel's, not the engine's.
    np.testing.assert_array_max_ulp(
        np.asarray(shim["predictions"]["probabilities"], np.float32),
        np.asarray(legacy["predictions"]["probabilities"], np.float32), maxulp=2)
    assert sorted(shim["variables"]) == sorted(legacy["variables"])
    for name, want in legacy["variables"].items():
        got = shim["variables"][name]
        assert got["shape"] == want["shape"], name
        assert_legacy_equal(got["value"], want["value"], golden, name)


# ----------------------------------------------------------------------------------------
# Legacy Estimator's contracts (tensorflow-estimator 2.15.0's estimator.py).


def constant_input_fn():
    """Tensors, not a dataset: legacy's session ran them at every step (the same batch)."""
    return {"x": tf.constant([[1.0], [2.0]])}, tf.constant([[1], [0]])


def constant_predictions_model_fn(predictions):
    def model_fn(features, labels, mode):
        weight = v1.get_variable("w", [], initializer=v1.constant_initializer(2.0))
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions=predictions(weight))
        loss = tf.reduce_mean(features["x"]) * weight
        return tf.estimator.EstimatorSpec(
            mode, loss=loss, train_op=v1.assign_add(v1.train.get_global_step(), 1))
    return model_fn


def test_predictions_need_not_have_the_features_batch(tmp_path):
    # Legacy yielded each step's own rows: one row here for a batch of two.
    est = Estimator(constant_predictions_model_fn(lambda w: tf.reshape(w * 5.0, [1, 1])),
                    model_dir=str(tmp_path))
    est.train(constant_input_fn, steps=1)
    assert next(est.predict(constant_input_fn)) == pytest.approx([10.0])
    dicts = Estimator(constant_predictions_model_fn(
        lambda w: {"a": tf.fill([3], w), "b": tf.zeros([3, 2])}), model_dir=str(tmp_path))
    batch = next(dicts.predict(constant_input_fn, yield_single_examples=False))
    assert batch["a"].tolist() == [2.0, 2.0, 2.0] and batch["b"].shape == (3, 2)
    rows = dicts.predict(constant_input_fn)
    assert [sorted(next(rows)) for _ in range(4)] == [["a", "b"]] * 4  # Same batch again.


def test_prediction_keys_of_different_lengths_get_legacys_error(tmp_path):
    est = Estimator(constant_predictions_model_fn(
        lambda w: {"y1": tf.fill([1, 1], w), "y2": tf.fill([2, 1], w)}),
        model_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"^Batch length of predictions should be same\. "
                                         r"y2 has different batch length"):
        next(est.predict(constant_input_fn))


def test_predict_keys_as_legacy_chose_them(tmp_path):
    dict_est = Estimator(constant_predictions_model_fn(
        lambda w: {"y1": tf.fill([2], w), "y2": tf.fill([2], -w)}), model_dir=str(tmp_path))
    assert next(dict_est.predict(constant_input_fn, predict_keys=["y1", "nope"])) == {
        "y1": 2.0}
    assert sorted(next(dict_est.predict(constant_input_fn, predict_keys=[]))) == ["y1", "y2"]
    with pytest.raises(ValueError, match=r"^Expected to run at least one output from "
                                         r"\['y1', 'y2'\], provided \['y3'\]"):
        next(dict_est.predict(constant_input_fn, predict_keys=["y3"]))
    tensor_est = Estimator(constant_predictions_model_fn(lambda w: tf.fill([2], w)),
                           model_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"^predict_keys argument is not valid in case of "
                                         r"non-dict predictions"):
        next(tensor_est.predict(constant_input_fn, predict_keys=["y"]))


def test_predict_takes_no_eval_distribute_as_legacy(tmp_path):
    """Legacy's Estimator.predict built no strategy, `eval_distribute` included: one device,
    so a non-batch-major prediction yields its own rows per step, as on one device (several
    replicas would refuse it: their rows are concatenated by the features' batch)."""
    from conftest import make_strategy

    config = tf.estimator.RunConfig(eval_distribute=make_strategy("mirrored8"))
    est = Estimator(constant_predictions_model_fn(lambda w: tf.fill([1], w)),
                    model_dir=str(tmp_path), config=config)

    def dataset_input_fn():
        return tf.data.Dataset.from_tensor_slices({"x": X}).batch(BATCH)

    assert list(est.predict(dataset_input_fn)) == [2.0] * -(-len(X) // BATCH)


def test_constant_tensors_evaluate_steps_times(tmp_path):
    def model_fn(features, labels, mode):
        counter = v1.Variable(0.0, name="counter", collections=[v1.GraphKeys.LOCAL_VARIABLES])
        loss = 2.0 * v1.assign_add(counter, 1.0)  # 2, 4, 6, 8, 10 over five steps.
        return tf.estimator.EstimatorSpec(
            mode, loss=loss, train_op=v1.assign_add(v1.train.get_global_step(), 1))

    est = Estimator(model_fn, model_dir=str(tmp_path))
    est.train(constant_input_fn, steps=1)
    assert est.evaluate(constant_input_fn, steps=5)["loss"] == pytest.approx(6.0)


def test_nested_metric_values_come_back_nested(tmp_path):
    def model_fn(features, labels, mode):
        return tf.estimator.EstimatorSpec(
            mode, loss=tf.constant(1.0),
            train_op=v1.assign_add(v1.train.get_global_step(), 1),
            eval_metric_ops={"nested": (((tf.constant(2.0), tf.constant(1)),
                                         tf.constant(3.0, tf.float64)), tf.no_op()),
                             "vector": (tf.constant([1.0, 0.5]), tf.no_op())})

    est = Estimator(model_fn, model_dir=str(tmp_path))
    est.train(constant_input_fn, steps=1)
    (two, one), three = est.evaluate(constant_input_fn, steps=1)["nested"]
    assert (float(two), int(one), float(three)) == (2.0, 1, 3.0)
    events = [v for path in tf.io.gfile.glob(os.path.join(est.eval_dir(), "events*"))
              for e in tf.compat.v1.train.summary_iterator(path) for v in e.summary.value]
    assert "nested" not in {v.tag for v in events}  # Legacy wrote no summary for a nest.
    vector = [v for v in events if v.tag == "vector"]
    assert tf.make_ndarray(vector[0].tensor).tolist() == [1.0, 0.5]


def test_mode_less_model_fn_may_return_a_spec_without_mode(tmp_path):
    def model_fn(features):
        return tf.estimator.EstimatorSpec(
            mode=None, predictions=tf.constant(0.0), loss=tf.reduce_sum(features["x"]) * 0.0,
            train_op=v1.assign_add(v1.train.get_global_step(), 1))

    est = Estimator(model_fn, model_dir=str(tmp_path))
    est.train(lambda: {"x": tf.constant([[4.0]])}, steps=2)
    assert est.get_variable_value("global_step") == 2


def test_train_arguments_get_legacys_errors(tmp_path):
    est = Estimator(constant_predictions_model_fn(lambda w: w), model_dir=str(tmp_path))
    with pytest.raises(TypeError, match=r"^Hooks must be a SessionRunHook, given: 'hook'"):
        est.train(constant_input_fn, steps=1, hooks=["hook"])
    with pytest.raises(TypeError, match=r"^saving_listeners must be a list of "
                                        r"CheckpointSaverListener, given: 'listener'"):
        est.train(constant_input_fn, steps=1, saving_listeners=["listener"])
    with pytest.raises(ValueError, match=r"^input_fn should return \(features, labels\) as "
                                         r"a len 2 tuple; received a tuple of 3"):
        est.train(lambda: (4, 5, 6), steps=1)
    no_saves = Estimator(constant_predictions_model_fn(lambda w: w), model_dir=str(tmp_path),
                         config=tf.estimator.RunConfig(save_checkpoints_steps=None,
                                                       save_checkpoints_secs=None))
    with pytest.raises(ValueError, match=r"^There should be a CheckpointSaverHook to use "
                                         r"saving_listeners"):
        no_saves.train(constant_input_fn, steps=1,
                       saving_listeners=[v1.train.CheckpointSaverListener()])


def test_train_on_an_evaluator_task_points_to_train_and_evaluate(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"chief": ["localhost:2222"]}, '
                                    '"task": {"type": "evaluator", "index": 0}}')
    est = Estimator(constant_predictions_model_fn(lambda w: w), model_dir=str(tmp_path),
                    config=tf.estimator.RunConfig())
    with pytest.raises(ValueError, match=r"Please use tf\.estimator\.train_and_evaluate"):
        est.train(constant_input_fn, steps=1)


def test_session_config_and_model_fn_property_as_legacy(tmp_path):
    seen = {}

    def model_fn(features, labels, mode, params, config):
        seen.update(params=params, config=config, mode=mode)
        return tf.estimator.EstimatorSpec(mode, predictions=features["x"])

    est = Estimator(model_fn, model_dir=str(tmp_path), params={"k": 1})
    assert est._session_config.allow_soft_placement
    assert est.config.session_config.graph_options.rewrite_options.meta_optimizer_iterations == 1
    bound = est.model_fn
    assert list(inspect.signature(bound).parameters) == ["features", "labels", "mode",
                                                         "config"]
    with tf.Graph().as_default():
        spec = bound({"x": tf.constant([[1.0]])}, None, "infer", est.config)
    assert isinstance(spec, tf.estimator.EstimatorSpec)
    assert seen["params"] == {"k": 1} and seen["mode"] == "infer"


def test_subclasses_may_extend_but_not_override(tmp_path):
    class Overriding(Estimator):
        def predict(self, input_fn):
            return None

    class Extending(Estimator):
        def predict_proba(self, input_fn):
            return None

        def latest_checkpoint(self):  # On legacy's allow-list.
            return None

    with pytest.raises(ValueError, match=r"^Subclasses of Estimator cannot override members "
                                         r"of Estimator\. .* does override \['predict'\]"):
        Overriding(linear_model_fn, model_dir=str(tmp_path))
    Extending(linear_model_fn, model_dir=str(tmp_path))


def test_each_run_sets_run_configs_seed_as_the_graph_seed(tmp_path):
    def seed_recording_model_fn(seeds):
        def model_fn(features, labels, mode):
            seeds.append(v1.get_default_graph().seed)
            return tf.estimator.EstimatorSpec(
                mode, loss=tf.constant(0.0),
                train_op=v1.assign_add(v1.train.get_global_step(), 1))
        return model_fn

    unseeded, seeded = [], []
    tf.random.set_seed(7)  # A script's seed: legacy's new graphs never saw it.
    Estimator(seed_recording_model_fn(unseeded), model_dir=str(tmp_path / "none")).train(
        constant_input_fn, steps=1)
    est = Estimator(seed_recording_model_fn(seeded), model_dir=str(tmp_path / "seeded"),
                    config=tf.estimator.RunConfig(tf_random_seed=3))
    est.train(constant_input_fn, steps=1)
    est.evaluate(constant_input_fn, steps=1)  # Restored from the checkpoint: seeded too.
    assert unseeded and set(unseeded) == {None}
    assert seeded and set(seeded) == {3}


@pytest.mark.parametrize("loss", ["mean", "summed"])
def test_plain_estimator_on_two_replicas_matches_legacy(tmp_path, loss):
    """The same r1 script with `RunConfig(train_distribute=MirroredStrategy,
    eval_distribute=...)` over 2 logical CPUs (a TF1 script's v1 strategy class), replayed
    against tests/goldens/estimator_mirrored/legacy.json: each step's `loss` summary, the
    loss the first replica's training hook fetched, evaluate()'s metrics, the checkpoint's
    names, shapes and values, bit for bit (legacy repeated itself bit for bit: `run_to_run`
    is 0 everywhere); predictions as on one replica. The reported loss is the replicas' mean
    for the mean-reduced loss, their SUM for a SUM-reduced one (no v1 optimizer scaling),
    as legacy reported it."""
    from conftest import assert_legacy_equal, legacy_recorder

    recorder, golden = legacy_recorder("estimator_mirrored")
    assert all(d["max_abs"] == 0.0 for d in golden["run_to_run"][loss].values())
    plain = recorder._sibling("estimator_plain")
    shim = recorder.run(str(tmp_path), summed=loss == "summed")
    legacy = golden["legacy"][loss]
    assert [row[:2] for row in shim["losses"]] == [row[:2] for row in legacy["losses"]]
    assert_legacy_equal([row[2] for row in shim["losses"]],
                        [row[2] for row in legacy["losses"]], golden, "losses")
    assert_legacy_equal(shim["replica0_losses"], legacy["replica0_losses"], golden,
                        "replica 0's losses")
    assert shim["metrics"].keys() == legacy["metrics"].keys()
    for name, value in legacy["metrics"].items():
        assert_legacy_equal(shim["metrics"][name], value, golden, name)
    assert shim["global_step"] == legacy["global_step"] == plain.STEPS
    _assert_outputs_match_legacy(shim, legacy, golden)


def _partitioned_model_fn(features, labels, mode):
    """A v1 linear model whose weight asks for 2 parts (parameter-server era code)."""
    weight = v1.get_variable("w", [3, 2], initializer=v1.zeros_initializer(),
                             partitioner=v1.fixed_size_partitioner(2))
    logits = tf.matmul(features["x"], weight)
    loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = v1.train.AdagradOptimizer(0.5).minimize(
        loss, global_step=v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def test_train_distribute_drops_partitioners_as_legacys_strategy_scope(tmp_path):
    """Legacy's distributed Estimator built model_fn in the strategy's scope, whose variable
    scope dropped every partitioner: the weight is whole and its slot keeps its own name.
    Without a strategy a partitioner of several parts is refused, naming the variable."""
    from conftest import make_strategy

    config = tf.estimator.RunConfig(train_distribute=make_strategy("mirrored8"))
    est = Estimator(_partitioned_model_fn, model_dir=str(tmp_path / "dist"), config=config)
    est.train(input_fn, steps=1)
    shapes = dict(tf.train.list_variables(est.latest_checkpoint()))
    assert shapes == {"global_step": [], "w": [3, 2], "w/Adagrad": [3, 2]}
    with pytest.raises(ValueError, match=r"get_variable\('w'\) received partitioner"):
        Estimator(_partitioned_model_fn, model_dir=str(tmp_path / "one")).train(input_fn,
                                                                               steps=1)


def test_metrics_made_in_train_mode_count_each_train_call_afresh(tmp_path):
    """tensorflow/models' r1 mnist and resnet log `train_accuracy`, a v1 metric's update op
    made in TRAIN mode. Legacy's every train() ran a new session, whose local_init_op reset
    the metric's local variables; they kept counting across calls (mnist's second
    train() logged a running accuracy over 16 batches where legacy's covered one)."""
    seen = []

    class Recorder(v1.train.SessionRunHook):
        def before_run(self, run_context):
            return v1.train.SessionRunArgs("running_mean:0")

        def after_run(self, run_context, run_values):
            seen.append(float(run_values.results))

    def model_fn(features, labels, mode):
        logits = v1.layers.dense(features["x"], 1)
        loss = v1.losses.mean_squared_error(labels, logits)
        tf.identity(v1.metrics.mean(features["x"])[1], name="running_mean")
        train_op = v1.train.GradientDescentOptimizer(0.01).minimize(
            loss, global_step=v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    def batches():  # Batch k holds the value k: running means 1, 1.5.
        x = np.array([[1.0], [2.0]], np.float32)
        return tf.data.Dataset.from_tensor_slices(({"x": x}, x)).batch(1)

    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(batches, hooks=[Recorder()])
    est.train(batches, hooks=[Recorder()])
    assert seen == [1.0, 1.5, 1.0, 1.5]
