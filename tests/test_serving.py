"""Serving receivers and export outputs (serving.py): wrapping, validation, SignatureDefs.

Graph-only checks of the `tf.estimator.export` value types; writing a SavedModel with them is
tests/test_saved_model.py.
"""
import pytest
import tensorflow as tf

from tpu_estimator_compat.export import serving

v1 = tf.compat.v1
NUM_IN = 4
FEATURE_SPEC = {"x": tf.io.FixedLenFeature([NUM_IN], tf.float32)}


def test_receivers_wrap_single_tensors_and_validate():
    with tf.Graph().as_default():
        x = v1.placeholder(tf.float32, [None, 2])
        s = v1.placeholder(tf.string, [None])
        receiver = serving.ServingInputReceiver(x, s, {"alt": x})
        assert receiver.features == {"feature": x}
        assert receiver.receiver_tensors == {"input": s}
        assert receiver.receiver_tensors_alternatives == {"alt": {"input": x}}
        assert serving.ServingInputReceiver({1: x}, {"s": s}).features == {1: x}
        tensor_receiver = serving.TensorServingInputReceiver(x, {"s": s})
        assert tensor_receiver.features is x
        with pytest.raises(ValueError, match="receiver_tensors must be defined"):
            serving.ServingInputReceiver(x, None)
        with pytest.raises(ValueError, match=r"feature\['a'\] must be a Tensor"):
            serving.ServingInputReceiver({"a": [1.0]}, s)
        with pytest.raises(ValueError, match="receiver_tensor keys must be strings"):
            serving.ServingInputReceiver(x, {1: s})
        with pytest.raises(ValueError, match="must be a dict"):
            serving.ServingInputReceiver(x, s, [x])
        with pytest.raises(ValueError, match="features must be a Tensor"):
            serving.TensorServingInputReceiver({"x": x}, s)

        raw = serving.build_raw_serving_input_receiver_fn(
                {"x": tf.TensorSpec([7, 3], tf.int64)}, default_batch_size=2)()
        assert raw.features["x"].shape.as_list() == [2, 3]
        assert raw.features["x"].dtype == tf.int64
        assert raw.receiver_tensors["x"] is raw.features["x"]
        parsing = serving.build_parsing_serving_input_receiver_fn(FEATURE_SPEC)()
        assert parsing.receiver_tensors["examples"].op.name == "input_example_tensor"
        assert parsing.features["x"].shape.as_list() == [None, NUM_IN]
    with pytest.raises(TypeError, match="must be a dict"):
        serving.build_raw_serving_input_receiver_fn(tf.zeros([1]))
    with pytest.raises(TypeError, match="must be a dict"):
        serving.build_parsing_serving_input_receiver_fn([FEATURE_SPEC])


def test_export_outputs_validate_and_build_signatures():
    with tf.Graph().as_default():
        s = v1.placeholder(tf.string, [None])
        f = v1.placeholder(tf.float32, [None, 2])
        ints = tf.constant([1])
        for build, match in [
                (lambda: serving.ClassificationOutput(), "At least one"),
                (lambda: serving.ClassificationOutput(scores=ints), "float32 Tensor"),
                (lambda: serving.ClassificationOutput(classes=f), "string Tensor"),
                (lambda: serving.RegressionOutput(ints), "float32 Tensor"),
                (lambda: serving.PredictOutput({"a": 1.0}), "must be a Tensor"),
                (lambda: serving.PredictOutput({3: f}), "key must be a string")]:
            with pytest.raises(ValueError, match=match):
                build()

        predict = serving.PredictOutput(f)
        assert set(predict.outputs) == {"output"}
        assert serving.PredictOutput({("head", "probs"): f}).outputs.keys() == {"head/probs"}
        sig = predict.as_signature_def({"f": f})
        assert sig.method_name == "tensorflow/serving/predict" and set(sig.inputs) == {"f"}
        sig = serving.RegressionOutput(f).as_signature_def(s)
        assert sig.method_name == "tensorflow/serving/regress"
        assert set(sig.inputs) == {"inputs"} and set(sig.outputs) == {"outputs"}
        sig = serving.ClassificationOutput(scores=f).as_signature_def({"examples": s})
        assert sig.method_name == "tensorflow/serving/classify"
        assert set(sig.outputs) == {"scores"}
        with pytest.raises(ValueError, match="single tensor input of type tf.string"):
            serving.ClassificationOutput(scores=f).as_signature_def({"f": f})
        assert isinstance(predict, serving.ExportOutput)
