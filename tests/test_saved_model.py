"""SavedModel export: `export_saved_model` end to end (receivers and outputs: test_serving.py).

Nothing is trained: a module fixture builds the TF1 graph of a tiny PREDICT model_fn, gives it
random variables and saves `model.ckpt-5` with a TF1 Saver, as a legacy Estimator would have
left it. Each export is then checked against numpy logits computed from the checkpoint values,
through `tf.saved_model.load`, `saved_model_cli` and a fresh process that never imports this
library.
"""
import functools
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from tpu_estimator_compat import EstimatorSpec, TPUEstimatorSpec
from tpu_estimator_compat.export import saved_model as export_lib
from tpu_estimator_compat.step.replica_step import ModelFnCaller

v1 = tf.compat.v1
VENV_BIN = os.path.dirname(sys.executable)
NUM_IN, NUM_CLASSES = 4, 3
FEATURE_SPEC = {"x": tf.io.FixedLenFeature([NUM_IN], tf.float32)}


def _logits_graph(features):
    x = features["x"] if isinstance(features, dict) else features
    w = v1.get_variable("w", [NUM_IN, NUM_CLASSES],
                        initializer=v1.random_normal_initializer(seed=1))
    b = v1.get_variable("b", [NUM_CLASSES], initializer=v1.random_normal_initializer(seed=2))
    return tf.matmul(x, w) + b


def make_model_fn(export_outputs_fn=None, seen_params=None, spec_cls=TPUEstimatorSpec,
                  dict_predictions=True):
    """An r1 PREDICT model_fn; `export_outputs_fn(logits, class_ids)` builds export_outputs."""

    def model_fn(features, labels, mode, params):
        if seen_params is not None:
            seen_params.append(dict(params))
        logits = _logits_graph(features)
        class_ids = tf.argmax(logits, axis=1)
        predictions = ({"logits": logits, "class_ids": class_ids} if dict_predictions
                       else logits)
        export_outputs = export_outputs_fn(logits, class_ids) if export_outputs_fn else None
        return spec_cls(mode=mode, predictions=predictions, export_outputs=export_outputs)

    return model_fn


def bind(model_fn, params=None):
    """What the estimator passes: a ModelFnCaller bound in export mode."""
    caller = ModelFnCaller(model_fn=model_fn, params=dict(params or {"learning_rate": 0.1}),
                           config=None, use_tpu=False)
    return functools.partial(caller, batch_size=None, export_mode=True)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """`(prefix, w, b)`: model.ckpt-5 saved by a TF1 Saver from the model_fn's own graph."""
    model_dir = str(tmp_path_factory.mktemp("model_dir"))
    with tf.Graph().as_default() as graph:
        step = v1.train.get_or_create_global_step()
        x = v1.placeholder(tf.float32, [None, NUM_IN])
        make_model_fn()({"x": x}, None, "infer", {})
        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())
            session.run(step.assign(5))
            prefix = v1.train.Saver().save(session, os.path.join(model_dir, "model.ckpt"),
                                           global_step=step)
    assert prefix.endswith("model.ckpt-5")
    reader = tf.train.load_checkpoint(prefix)
    return prefix, reader.get_tensor("w"), reader.get_tensor("b")


def numpy_logits(checkpoint, xs):
    _, w, b = checkpoint
    return xs @ w + b


def examples(xs):
    return [tf.train.Example(features=tf.train.Features(feature={
            "x": tf.train.Feature(float_list=tf.train.FloatList(value=row))})
    ).SerializeToString() for row in xs]


XS = np.random.RandomState(0).randn(5, NUM_IN).astype(np.float32)


def run_quiet(args, **kwargs):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_ENABLE_ONEDNN_OPTS="0")
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=120,
                          check=True, **kwargs)


@pytest.mark.slow
def test_raw_receiver_export_serves_checkpoint_values(checkpoint, tmp_path):
    prefix, _, _ = checkpoint
    seen_params = []
    asset = tmp_path / "vocab.txt"
    asset.write_text("a\nb\nc\n")
    base = tmp_path / "export"
    path = export_lib.export_saved_model(
            call_model_fn=bind(make_model_fn(seen_params=seen_params)),
            checkpoint_path=prefix, export_dir_base=str(base),
            serving_input_receiver_fn=export_lib.build_raw_serving_input_receiver_fn(
                    {"x": tf.TensorSpec([None, NUM_IN], tf.float32)}),
            assets_extra={"sub/vocab.txt": str(asset)})

    assert isinstance(path, bytes)
    path = path.decode()
    assert os.path.dirname(path) == str(base) and os.path.basename(path).isdigit()
    assert os.listdir(base) == [os.path.basename(path)]  # temp- dir renamed away
    assert (tmp_path / "export" / os.path.basename(path) / "assets.extra" / "sub" /
            "vocab.txt").read_text() == "a\nb\nc\n"
    assert seen_params == [{"learning_rate": 0.1, "use_tpu": False}]  # legacy export graph: no batch_size, use_tpu False

    outputs = tf.saved_model.load(path).signatures["serving_default"](x=tf.constant(XS))
    np.testing.assert_allclose(outputs["logits"].numpy(), numpy_logits(checkpoint, XS),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(outputs["class_ids"].numpy(),
                                  numpy_logits(checkpoint, XS).argmax(1))

    # The SavedModel stands alone: saved_model_cli and a process without this library.
    cli = run_quiet([os.path.join(VENV_BIN, "saved_model_cli"), "show", "--dir", path,
                     "--all"]).stdout
    assert "signature_def['serving_default']" in cli and "tensorflow/serving/predict" in cli
    tag_sets = run_quiet([os.path.join(VENV_BIN, "saved_model_cli"), "show", "--dir",
                          path]).stdout
    assert "serve" in tag_sets and "tpu" not in tag_sets
    script = textwrap.dedent("""
        import json, sys
        import numpy as np, tensorflow as tf
        xs = np.array(json.loads(sys.argv[2]), np.float32)
        out = tf.saved_model.load(sys.argv[1]).signatures["serving_default"](x=tf.constant(xs))
        assert not any(m.startswith("tpu_estimator_compat") for m in sys.modules)
        print(json.dumps(out["logits"].numpy().tolist()))
    """)
    result = run_quiet([sys.executable, "-c", script, path, json.dumps(XS.tolist())],
                       cwd=str(tmp_path))
    np.testing.assert_allclose(np.array(json.loads(result.stdout.strip().splitlines()[-1])),
                               numpy_logits(checkpoint, XS), rtol=1e-5, atol=1e-6)


def test_custom_receiver_with_classification_predict_and_alternatives(checkpoint, tmp_path):
    def serving_input_receiver_fn():
        serialized = v1.placeholder(tf.string, [None], name="serialized")
        features = tf.io.parse_example(serialized, FEATURE_SPEC)
        return export_lib.ServingInputReceiver(
                features, {"examples": serialized},
                receiver_tensors_alternatives={"raw": {"x": features["x"]}})

    def export_outputs_fn(logits, class_ids):
        labels = tf.tile(tf.constant([["a", "b", "c"]]), [tf.shape(logits)[0], 1])
        return {"serving_default": export_lib.ClassificationOutput(
                        scores=tf.nn.softmax(logits), classes=labels),
                "predict": export_lib.PredictOutput({"logits": logits})}

    path = export_lib.export_saved_model(
            call_model_fn=bind(make_model_fn(export_outputs_fn)),
            checkpoint_path=os.path.dirname(checkpoint[0]),  # a model_dir: latest checkpoint
            export_dir_base=str(tmp_path), serving_input_receiver_fn=serving_input_receiver_fn,
            as_text=True).decode()

    assert os.path.exists(os.path.join(path, "saved_model.pbtxt"))
    signatures = tf.saved_model.load(path).signatures
    # A Classify signature cannot take the float 'raw' alternative, so legacy dropped it.
    assert set(signatures) == {"serving_default", "predict", "raw:predict"}
    want = numpy_logits(checkpoint, XS)
    probs = np.exp(want) / np.exp(want).sum(1, keepdims=True)
    classify = signatures["serving_default"](inputs=tf.constant(examples(XS)))
    np.testing.assert_allclose(classify["scores"].numpy(), probs, rtol=1e-5, atol=1e-6)
    assert classify["classes"].numpy()[0].tolist() == [b"a", b"b", b"c"]
    predict = signatures["predict"](examples=tf.constant(examples(XS)))
    np.testing.assert_allclose(predict["logits"].numpy(), want, rtol=1e-5, atol=1e-6)
    raw = signatures["raw:predict"](x=tf.constant(XS))
    np.testing.assert_allclose(raw["logits"].numpy(), want, rtol=1e-5, atol=1e-6)


def test_parsing_receiver_with_default_predict_output(checkpoint, tmp_path):
    path = export_lib.export_saved_model(
            call_model_fn=bind(make_model_fn()), checkpoint_path=checkpoint[0],
            export_dir_base=str(tmp_path),
            serving_input_receiver_fn=export_lib.build_parsing_serving_input_receiver_fn(
                    FEATURE_SPEC)).decode()
    signature = tf.saved_model.load(path).signatures["serving_default"]
    outputs = signature(examples=tf.constant(examples(XS)))
    np.testing.assert_allclose(outputs["logits"].numpy(), numpy_logits(checkpoint, XS),
                               rtol=1e-5, atol=1e-6)


def test_tensor_receiver_and_single_tensor_predictions(checkpoint, tmp_path):
    """A bare feature tensor reaches model_fn; tensor predictions are served as 'output'."""
    def serving_input_receiver_fn():
        x = v1.placeholder(tf.float32, [None, NUM_IN])
        return export_lib.TensorServingInputReceiver(x, x)

    model_fn = make_model_fn(spec_cls=EstimatorSpec, dict_predictions=False)
    path = export_lib.export_saved_model(
            call_model_fn=bind(model_fn), checkpoint_path=checkpoint[0],
            export_dir_base=str(tmp_path),
            serving_input_receiver_fn=serving_input_receiver_fn).decode()
    outputs = tf.saved_model.load(path).signatures["serving_default"](input=tf.constant(XS))
    np.testing.assert_allclose(outputs["output"].numpy(), numpy_logits(checkpoint, XS),
                               rtol=1e-5, atol=1e-6)


RAW = export_lib.build_raw_serving_input_receiver_fn({"x": tf.zeros([1, NUM_IN])})


@pytest.mark.parametrize("where", ["none", "empty_dir", "missing_prefix"])
def test_missing_checkpoint_is_a_clear_error(tmp_path, where):
    path = {"none": None, "empty_dir": str(tmp_path),
            "missing_prefix": str(tmp_path / "model.ckpt-7")}[where]
    with pytest.raises(ValueError, match="Couldn't find trained model.*Train first"):
        export_lib.export_saved_model(
                call_model_fn=bind(make_model_fn()), checkpoint_path=path,
                export_dir_base=str(tmp_path / "export"), serving_input_receiver_fn=RAW)
    assert not (tmp_path / "export").exists()


def test_variable_missing_from_checkpoint_fails_and_leaves_no_temp_dir(checkpoint, tmp_path):
    def model_fn(features, labels, mode, params):
        extra = v1.get_variable("not_in_checkpoint", [1])
        return TPUEstimatorSpec(mode, predictions={"y": _logits_graph(features) + extra})

    with pytest.raises(ValueError, match="Could not load all requested variables"):
        export_lib.export_saved_model(
                call_model_fn=bind(model_fn), checkpoint_path=checkpoint[0],
                export_dir_base=str(tmp_path), serving_input_receiver_fn=RAW)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("export_outputs,error,match", [
    ({"serving_default": "not an output"}, TypeError,
     "Given: 'not an output' of type str for key 'serving_default'.*PredictOutput"),
    ({"serving_default": {"logits": 1}}, TypeError, "must be ExportOutput objects"),
    ("multi", ValueError, "none of them is specified as the default"),
])
def test_bad_export_outputs_are_clear_errors(checkpoint, tmp_path, export_outputs, error,
                                             match):
    def export_outputs_fn(logits, class_ids):
        if export_outputs == "multi":
            return {"a": export_lib.PredictOutput(logits),
                    "b": export_lib.PredictOutput(logits)}
        return export_outputs

    with pytest.raises(error, match=match):
        export_lib.export_saved_model(
                call_model_fn=bind(make_model_fn(export_outputs_fn)),
                checkpoint_path=checkpoint[0], export_dir_base=str(tmp_path),
                serving_input_receiver_fn=RAW)
    assert os.listdir(tmp_path) == []


def test_spec_level_export_outputs_check_still_applies(checkpoint, tmp_path):
    model_fn = make_model_fn(lambda logits, ids: {"serving_default": logits})
    with pytest.raises(TypeError, match="ExportOutput"):
        export_lib.export_saved_model(
                call_model_fn=bind(model_fn), checkpoint_path=checkpoint[0],
                export_dir_base=str(tmp_path), serving_input_receiver_fn=RAW)


def test_timestamp_collision_waits_for_the_next_second(monkeypatch, tmp_path):
    now = [1_700_000_000.5]
    sleeps = []

    class FakeTime:
        @staticmethod
        def time():
            return now[0]

        @staticmethod
        def sleep(seconds):
            sleeps.append(seconds)
            now[0] += seconds

    monkeypatch.setattr(export_lib, "time", FakeTime)
    (tmp_path / "1700000000").mkdir()
    export_dir, temp_dir = export_lib._timestamped_export_dirs(str(tmp_path))
    assert export_dir == str(tmp_path / "1700000001")
    assert temp_dir == str(tmp_path / "temp-1700000001")
    assert sleeps == [1]
