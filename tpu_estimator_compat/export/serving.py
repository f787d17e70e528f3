"""What legacy users imported from `tf.estimator.export`: serving receivers and export outputs.

Synopsis::

    receiver_fn = serving.build_raw_serving_input_receiver_fn({"x": tf.zeros([1, 4])})
    outputs = {"serving_default": serving.PredictOutput({"logits": logits})}

This module owns the value types a `serving_input_receiver_fn` and a PREDICT-mode
`EstimatorSpec.export_outputs` hand to the exporter (`ServingInputReceiver`,
`TensorServingInputReceiver`, `build_raw_serving_input_receiver_fn`,
`build_parsing_serving_input_receiver_fn`, `PredictOutput`, `ClassificationOutput`,
`RegressionOutput`), with legacy's validation and error wording, and the rule that turns
`export_outputs` into the signatures to write. It must not know how a SavedModel is written,
where checkpoints are, or how model_fn is called: that is `saved_model.py`.
"""
from __future__ import annotations

import abc
import collections
from typing import Any, Callable, Mapping

import tensorflow as tf

SINGLE_FEATURE_DEFAULT_NAME = "feature"
"""Key a non-dict `ServingInputReceiver.features` is wrapped under, as legacy did."""

SINGLE_RECEIVER_DEFAULT_NAME = "input"
"""Key a non-dict `receiver_tensors` (or alternative) is wrapped under, as legacy did."""

DEFAULT_SERVING_SIGNATURE_DEF_KEY = tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY


_SINGLE_TENSOR_DEFAULT_NAMES = {
        "feature": SINGLE_FEATURE_DEFAULT_NAME,
        "receiver_tensor": SINGLE_RECEIVER_DEFAULT_NAME,
        "receiver_tensors_alternative": SINGLE_RECEIVER_DEFAULT_NAME,
}

_INPUT_TENSOR_TYPES = (tf.Tensor, tf.sparse.SparseTensor, tf.RaggedTensor)


# --------------------------------------------------------------------------------------------
# Serving input receivers.
# --------------------------------------------------------------------------------------------


def _check_input_tensor(value: Any, field_name: str, key: Any) -> None:
    if not isinstance(value, _INPUT_TENSOR_TYPES):
        where = field_name if key is None else "{}[{!r}]".format(field_name, key)
        raise ValueError(
                "{} must be a Tensor, SparseTensor, or RaggedTensor, received {!r} of type "
                "{}. Build it in the serving_input_receiver_fn, e.g. with "
                "tf.compat.v1.placeholder.".format(where, value, type(value).__name__))


def _wrap_and_check_input_tensors(tensors: Any, field_name: str,
                                  allow_int_keys: bool = False) -> dict:
    """Returns `tensors` as a new `{key: tensor}` dict, wrapping a single tensor legacy-style."""
    if tensors is None:
        raise ValueError(
                "{}s must be defined, received None. Pass a tensor or a dict of tensors."
                .format(field_name))
    if not isinstance(tensors, dict):
        tensors = {_SINGLE_TENSOR_DEFAULT_NAMES[field_name]: tensors}
    for key, value in tensors.items():
        key_ok = isinstance(key, str) or (
                allow_int_keys and isinstance(key, int) and not isinstance(key, bool))
        if not key_ok:
            raise ValueError(
                    "{} keys must be strings{}, received key {!r} of type {}."
                    .format(field_name, " or ints" if allow_int_keys else "", key,
                            type(key).__name__))
        _check_input_tensor(value, field_name, key)
    return dict(tensors)


def _wrap_alternatives(alternatives: Any) -> dict | None:
    if alternatives is None:
        return None
    if not isinstance(alternatives, dict):
        raise ValueError(
                "receiver_tensors_alternatives must be a dict of name -> tensor or dict of "
                "tensors, received {!r}.".format(alternatives))
    return {name: _wrap_and_check_input_tensors(value, "receiver_tensors_alternative")
            for name, value in alternatives.items()}


class ServingInputReceiver(collections.namedtuple(
        "ServingInputReceiver",
        ["features", "receiver_tensors", "receiver_tensors_alternatives"])):
    """What a `serving_input_receiver_fn` returns: model features and the tensors to feed.

    Kept as the legacy namedtuple because ported scripts construct it positionally and read
    its fields. `features` and `receiver_tensors` are normalised to dicts so every signature
    input has a name: a single feature tensor becomes `{'feature': t}` (the model_fn then
    receives that dict; use `TensorServingInputReceiver` to pass the tensor as is), a single
    receiver tensor becomes `{'input': t}`. `receiver_tensors_alternatives` maps a name to
    more receiver tensors, each producing extra signatures named `'<name>:<output key>'`,
    typically to feed raw features downstream of `tf.io.parse_example`.
    """
    __slots__ = ()

    def __new__(cls, features: Any, receiver_tensors: Any,
                receiver_tensors_alternatives: Mapping[str, Any] | None = None
                ) -> "ServingInputReceiver":
        """Validates and normalises the fields; see the class docstring.

        Raises:
            ValueError: A field is None, has a non-tensor value or a bad key.
        """
        return super().__new__(
                cls,
                features=_wrap_and_check_input_tensors(features, "feature",
                                                       allow_int_keys=True),
                receiver_tensors=_wrap_and_check_input_tensors(receiver_tensors,
                                                               "receiver_tensor"),
                receiver_tensors_alternatives=_wrap_alternatives(
                        receiver_tensors_alternatives))


class TensorServingInputReceiver(collections.namedtuple(
        "TensorServingInputReceiver",
        ["features", "receiver_tensors", "receiver_tensors_alternatives"])):
    """A `ServingInputReceiver` whose single feature reaches `model_fn` as a bare tensor.

    For model_fns written for an `input_fn` that returned a tensor rather than a dict; the
    receiver tensors are still named (wrapped as `{'input': t}`) because signature inputs
    need names.
    """
    __slots__ = ()

    def __new__(cls, features: Any, receiver_tensors: Any,
                receiver_tensors_alternatives: Mapping[str, Any] | None = None
                ) -> "TensorServingInputReceiver":
        """Validates the fields; `features` must be one tensor, not a dict.

        Raises:
            ValueError: As `ServingInputReceiver`, or `features` is None or not a tensor.
        """
        if features is None:
            raise ValueError(
                    "features must be defined, received None. Pass the single feature "
                    "tensor the model_fn expects.")
        _check_input_tensor(features, "features", None)
        receiver = ServingInputReceiver(features, receiver_tensors,
                                        receiver_tensors_alternatives)
        return super().__new__(
                cls,
                features=receiver.features[SINGLE_FEATURE_DEFAULT_NAME],
                receiver_tensors=receiver.receiver_tensors,
                receiver_tensors_alternatives=receiver.receiver_tensors_alternatives)


def _placeholder_like(key: str, value: Any, default_batch_size: int | None) -> tf.Tensor:
    """A placeholder with `value`'s dtype and shape, its leading (batch) dim replaced."""
    dtype = getattr(value, "dtype", None)
    shape = getattr(value, "shape", None)
    if dtype is None or shape is None:
        raise TypeError(
                "build_raw_serving_input_receiver_fn(features=...) values must have a dtype "
                "and a shape (a Tensor, tf.TensorSpec or numpy array), received {!r} of type "
                "{} for key {!r}.".format(value, type(value).__name__, key))
    shape = tf.TensorShape(shape)
    if shape.rank is None:
        full_shape = tf.TensorShape(None)
    else:
        full_shape = tf.TensorShape([default_batch_size]).concatenate(shape[1:])
    # Legacy reused the graph tensor's op name. Eager tensors have none; the feature key is
    # then a stable, readable name instead of 'Placeholder_<n>'.
    try:
        name = value.op.name
    except AttributeError:
        name = getattr(value, "name", None) or key
    return tf.compat.v1.placeholder(dtype=tf.as_dtype(dtype), shape=full_shape, name=name)


def build_raw_serving_input_receiver_fn(features: Mapping[str, Any],
                                        default_batch_size: int | None = None
                                        ) -> Callable[[], ServingInputReceiver]:
    """Builds a `serving_input_receiver_fn` that feeds raw feature tensors directly.

    The returned function runs inside the exporter's graph and creates one placeholder per
    feature, so clients send the features themselves (no `tf.Example` parsing).

    Args:
        features: `{name: Tensor | tf.TensorSpec | array}` giving each feature's dtype and
            shape; the first dimension is the batch and is replaced by `default_batch_size`.
        default_batch_size: Fixed batch size of the placeholders; None (recommended) lets
            clients send any batch size.

    Returns:
        A function taking no arguments and returning a `ServingInputReceiver` whose
        features and receiver tensors are the same placeholders.

    Raises:
        TypeError: `features` is not a dict.
    """
    if not isinstance(features, dict):
        raise TypeError(
                "build_raw_serving_input_receiver_fn(features=...) must be a dict of name -> "
                "Tensor/TensorSpec, received {!r} of type {}. Wrap a single tensor as "
                "{{'x': tensor}}.".format(features, type(features).__name__))
    features = dict(features)

    def serving_input_receiver_fn() -> ServingInputReceiver:
        placeholders = {key: _placeholder_like(key, value, default_batch_size)
                        for key, value in features.items()}
        return ServingInputReceiver(placeholders, placeholders)

    return serving_input_receiver_fn


def build_parsing_serving_input_receiver_fn(feature_spec: Mapping[str, Any],
                                            default_batch_size: int | None = None
                                            ) -> Callable[[], ServingInputReceiver]:
    """Builds a `serving_input_receiver_fn` that accepts serialized `tf.train.Example`s.

    This is the receiver TF Serving's Classify/Regress APIs require: a single string input
    (`examples`, placeholder `input_example_tensor`) parsed into features with
    `tf.io.parse_example`.

    Args:
        feature_spec: `{name: tf.io.FixedLenFeature | tf.io.VarLenFeature | ...}`.
        default_batch_size: Fixed number of examples per request; None (recommended) for any.

    Returns:
        A function taking no arguments and returning a `ServingInputReceiver`.

    Raises:
        TypeError: `feature_spec` is not a dict.
    """
    if not isinstance(feature_spec, dict):
        raise TypeError(
                "build_parsing_serving_input_receiver_fn(feature_spec=...) must be a dict of "
                "name -> tf.io.FixedLenFeature/VarLenFeature, received {!r} of type {}."
                .format(feature_spec, type(feature_spec).__name__))
    feature_spec = dict(feature_spec)

    def serving_input_receiver_fn() -> ServingInputReceiver:
        serialized = tf.compat.v1.placeholder(dtype=tf.string, shape=[default_batch_size],
                                              name="input_example_tensor")
        features = tf.compat.v1.io.parse_example(serialized, feature_spec)
        return ServingInputReceiver(features, {"examples": serialized})

    return serving_input_receiver_fn


# --------------------------------------------------------------------------------------------
# Export outputs.
# --------------------------------------------------------------------------------------------


class ExportOutput(abc.ABC):
    """One serving signature's outputs; subclasses know which SignatureDef kind they build.

    A `model_fn` returns `export_outputs={signature name: ExportOutput}`; the exporter calls
    `as_signature_def(receiver_tensors)` for each, pairing these outputs with the receiver's
    inputs.
    """

    _SEPARATOR_CHAR = "/"

    @abc.abstractmethod
    def as_signature_def(self, receiver_tensors: Any) -> Any:
        """Returns the `SignatureDef` proto of these outputs fed by `receiver_tensors`.

        Args:
            receiver_tensors: A tensor or `{name: tensor}`, the signature's inputs.
        """

    def _check_output_key(self, key: Any, error_label: str) -> str:
        # Multi-head models key outputs by tuples; legacy joined them with '/'.
        if isinstance(key, tuple):
            key = self._SEPARATOR_CHAR.join(key)
        if not isinstance(key, str):
            raise ValueError(
                    "{} output key must be a string; got {!r}. Use string keys (or tuples of "
                    "strings) for outputs.".format(error_label, key))
        return key

    def _wrap_and_check_outputs(self, outputs: Any, single_output_default_name: str,
                                error_label: str | None = None) -> dict:
        if not isinstance(outputs, dict):
            outputs = {single_output_default_name: outputs}
        label = error_label or single_output_default_name
        checked = {}
        for key, value in outputs.items():
            key = self._check_output_key(key, label)
            if not isinstance(value, tf.Tensor):
                raise ValueError(
                        "{} output value must be a Tensor; got {!r} for key {!r}. Pass dense "
                        "graph tensors (read variables with tf.identity, densify sparse "
                        "outputs).".format(label, value, key))
            checked[key] = value
        return checked


def _as_receiver_dict(receiver_tensors: Any) -> dict:
    if isinstance(receiver_tensors, dict):
        return receiver_tensors
    return {SINGLE_RECEIVER_DEFAULT_NAME: receiver_tensors}


def _single_string_input(receiver_tensors: Any, kind: str) -> tf.Tensor:
    """The one string receiver tensor Classify/Regress signatures require."""
    receiver_tensors = _as_receiver_dict(receiver_tensors)
    examples = next(iter(receiver_tensors.values())) if len(receiver_tensors) == 1 else None
    if examples is None or not isinstance(examples, tf.Tensor) or examples.dtype != tf.string:
        raise ValueError(
                "{} signatures can only accept a single tensor input of type tf.string, "
                "received receiver_tensors={!r}. Structure the serving_input_receiver_fn to "
                "create a single string placeholder (e.g. "
                "build_parsing_serving_input_receiver_fn) and parse it with "
                "tf.io.parse_example, or use PredictOutput.".format(kind, receiver_tensors))
    return examples


class ClassificationOutput(ExportOutput):
    """Outputs for TF Serving's Classify API: string class labels and/or float scores.

    Only `scores`: one score per class, in class-id order. Only `classes`: top-k labels in
    descending order. Both: zipped, score i belongs to class i. The receiver must be a single
    string tensor of serialized `tf.Example`s, because that is all the Classify API sends.
    """

    def __init__(self, scores: tf.Tensor | None = None,
                 classes: tf.Tensor | None = None) -> None:
        """Validates and stores the outputs.

        Raises:
            ValueError: Neither is given, `scores` is not a float tensor or `classes` is not
                a string tensor.
        """
        if scores is not None and not (isinstance(scores, tf.Tensor)
                                       and scores.dtype.is_floating):
            raise ValueError(
                    "ClassificationOutput(scores=...) must be a float32 Tensor; got {!r}."
                    .format(scores))
        if classes is not None and not (isinstance(classes, tf.Tensor)
                                        and classes.dtype == tf.string):
            raise ValueError(
                    "ClassificationOutput(classes=...) must be a string Tensor; got {!r}. "
                    "Map class ids to labels, e.g. tf.strings.as_string(class_ids)."
                    .format(classes))
        if scores is None and classes is None:
            raise ValueError(
                    "Cannot create a ClassificationOutput with empty arguments. At least one "
                    "of `scores` and `classes` must be defined.")
        self._scores = scores
        self._classes = classes

    @property
    def scores(self) -> tf.Tensor | None:
        return self._scores

    @property
    def classes(self) -> tf.Tensor | None:
        return self._classes

    def as_signature_def(self, receiver_tensors: Any) -> Any:
        examples = _single_string_input(receiver_tensors, "Classification")
        return tf.compat.v1.saved_model.classification_signature_def(
                examples, self.classes, self.scores)


class RegressionOutput(ExportOutput):
    """Outputs for TF Serving's Regress API: one float value per example."""

    def __init__(self, value: tf.Tensor) -> None:
        """Validates and stores the predicted values.

        Raises:
            ValueError: `value` is not a float tensor.
        """
        if not (isinstance(value, tf.Tensor) and value.dtype.is_floating):
            raise ValueError(
                    "RegressionOutput(value=...) must be a float32 Tensor; got {!r}."
                    .format(value))
        self._value = value

    @property
    def value(self) -> tf.Tensor:
        return self._value

    def as_signature_def(self, receiver_tensors: Any) -> Any:
        examples = _single_string_input(receiver_tensors, "Regression")
        return tf.compat.v1.saved_model.regression_signature_def(examples, self.value)


class PredictOutput(ExportOutput):
    """Outputs for the generic Predict API: any named tensors, any receiver tensors."""

    _SINGLE_OUTPUT_DEFAULT_NAME = "output"

    def __init__(self, outputs: Any) -> None:
        """Validates and stores the outputs; a single tensor is named 'output'.

        Raises:
            ValueError: A key is not a string (or tuple of strings) or a value not a Tensor.
        """
        self._outputs = self._wrap_and_check_outputs(
                outputs, self._SINGLE_OUTPUT_DEFAULT_NAME, error_label="Prediction")

    @property
    def outputs(self) -> dict:
        return self._outputs

    def as_signature_def(self, receiver_tensors: Any) -> Any:
        return tf.compat.v1.saved_model.predict_signature_def(
                _as_receiver_dict(receiver_tensors), self.outputs)
