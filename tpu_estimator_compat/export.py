"""SavedModel export for legacy `model_fn`s: receivers, export outputs and the exporter.

This module owns what legacy users imported from `tf.estimator.export` (`ServingInputReceiver`,
`TensorServingInputReceiver`, `build_raw_serving_input_receiver_fn`,
`build_parsing_serving_input_receiver_fn`, and the `ExportOutput` classes `PredictOutput`,
`ClassificationOutput`, `RegressionOutput`), and `export_saved_model`, which writes a TF1
SavedModel the way legacy `Estimator.export_saved_model` did: a fresh `tf.Graph` with a global
step, the receiver, `model_fn` in PREDICT mode, one SignatureDef per export output (plus the
`receiver_tensors_alternatives` combinations), variables restored from a checkpoint by a TF1
`Saver`, written by `tf.compat.v1.saved_model.Builder` into `temp-<timestamp>` and renamed to
`<timestamp>` under `export_dir_base`. The result loads with `tf.saved_model.load`, TF Serving
and `saved_model_cli` without this library.

It must not know how the estimator finds checkpoints, how `params` are built, or how training
runs: the caller passes a `call_model_fn(features, labels, mode)` (a `ModelFnCaller` bound with
`export_mode=True`) and a checkpoint path. Graph building happens in graph mode because that is
what serving input receivers and r1 `model_fn`s expect (`tf.compat.v1.placeholder`,
`tf.compat.v1.get_variable`); checkpoints written by this library use the TF1 variable names, so
a plain `Saver` in that graph restores them.

Not written: the `{serve, tpu}` MetaGraph legacy TPUEstimator added when `export_to_tpu=True`.
Legacy built it by calling `model_fn` inside a `_TPUInferenceContext` and wrapping it in
`tpu.rewrite`/`TPUPartitionedCall`, which needs the TF1 TPU graph rewriter this library does
not use (it runs model_fns through `tf.distribute`). Writing a CPU graph under the `tpu` tag
would make TPU model servers pick a graph that was never rewritten for TPU, so only the
`{serve}` MetaGraph (legacy's `export_to_cpu` graph, the one CPU/GPU servers load) is written.
"""
from __future__ import annotations

import abc
import collections
import os
import time
from typing import Any, Callable, Mapping

import tensorflow as tf
from absl import logging

from tpu_estimator_compat import spec as spec_lib

SINGLE_FEATURE_DEFAULT_NAME = "feature"
"""Key a non-dict `ServingInputReceiver.features` is wrapped under, as legacy did."""

SINGLE_RECEIVER_DEFAULT_NAME = "input"
"""Key a non-dict `receiver_tensors` (or alternative) is wrapped under, as legacy did."""

DEFAULT_SERVING_SIGNATURE_DEF_KEY = tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY

# Legacy retried this often (sleeping a second each time) before giving up on finding a free
# timestamped directory.
_MAX_DIRECTORY_CREATION_ATTEMPTS = 10

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


# --------------------------------------------------------------------------------------------
# Signatures.
# --------------------------------------------------------------------------------------------


def _is_export_output(value: Any) -> bool:
    # Duck-typed so ExportOutputs from TensorFlow's own model_utils (which some libraries
    # still build) are accepted like ours.
    return isinstance(value, ExportOutput) or callable(getattr(value, "as_signature_def", None))


def _get_export_outputs(export_outputs: Any, predictions: Any) -> dict:
    """Legacy `get_export_outputs`: validate, default to PredictOutput, pick the default key."""
    if export_outputs is None:
        return {DEFAULT_SERVING_SIGNATURE_DEF_KEY: PredictOutput(predictions)}
    if not isinstance(export_outputs, dict):
        raise TypeError(
                "`export_outputs` must be dict, received: {!r} of type {}. Return "
                "export_outputs={{'serving_default': PredictOutput(...)}} from model_fn."
                .format(export_outputs, type(export_outputs).__name__))
    for key, value in export_outputs.items():
        if not _is_export_output(value):
            raise TypeError(
                    "Values in `export_outputs` must be ExportOutput objects, received {!r} "
                    "of type {} for key {!r}. Wrap the tensors in PredictOutput, "
                    "ClassificationOutput or RegressionOutput from "
                    "tpu_estimator_compat.export.".format(value, type(value).__name__, key))
    export_outputs = dict(export_outputs)
    if len(export_outputs) == 1:
        (value,) = export_outputs.values()
        export_outputs.setdefault(DEFAULT_SERVING_SIGNATURE_DEF_KEY, value)
    elif DEFAULT_SERVING_SIGNATURE_DEF_KEY not in export_outputs:
        raise ValueError(
                "Multiple `export_outputs` were provided ({}), but none of them is specified "
                "as the default. Use the key tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY "
                "('serving_default') for one of them.".format(sorted(export_outputs)))
    return export_outputs


def _info_tensor_names(info: Any) -> list[str]:
    encoding = info.WhichOneof("encoding")
    if encoding == "name":
        return [info.name]
    if encoding == "coo_sparse":
        sparse = info.coo_sparse
        return [sparse.values_tensor_name, sparse.indices_tensor_name,
                sparse.dense_shape_tensor_name]
    if encoding == "composite_tensor":
        return [n for c in info.composite_tensor.components for n in _info_tensor_names(c)]
    return []


def _ensure_servable(graph: tf.Graph, input_tensors: list, signature: Any) -> None:
    """Raises ValueError if an output needs a placeholder that is not a signature input.

    Legacy dropped such signatures (e.g. an alternative receiver that feeds only some of the
    features), since a server could never feed the missing placeholder.
    """
    fed = {t.name for t in tf.nest.flatten(input_tensors, expand_composites=True)}
    stack = [graph.get_tensor_by_name(n) for info in signature.outputs.values()
             for n in _info_tensor_names(info)]
    seen_ops = set()
    while stack:
        tensor = stack.pop()
        if tensor.name in fed or tensor.op.name in seen_ops:
            continue
        seen_ops.add(tensor.op.name)
        if tensor.op.type == "Placeholder":
            raise ValueError(
                    "The signature's input tensors {} are insufficient to compute its "
                    "outputs {} because they depend on placeholder {!r}, which is not a "
                    "signature input.".format(sorted(fed), sorted(signature.outputs),
                                              tensor.op.name))
        stack.extend(tensor.op.inputs)


def _build_all_signature_defs(graph: tf.Graph, receiver_tensors: dict, export_outputs: dict,
                              alternatives: dict | None) -> dict:
    """One SignatureDef per (receiver, export output); unservable ones are dropped, as legacy.

    Legacy silently excluded signatures that cannot be served (a ClassificationOutput over a
    non-string receiver, outputs needing unfed placeholders); they are logged here as warnings.
    """
    candidates = [(str(key), receiver_tensors, output) for key, output in export_outputs.items()]
    for alt_name, alt_tensors in (alternatives or {}).items():
        candidates += [("{}:{}".format(alt_name, key), alt_tensors, output)
                       for key, output in export_outputs.items()]
    signatures, excluded = {}, {}
    for name, receivers, output in candidates:
        try:
            signature = output.as_signature_def(receivers)
            _ensure_servable(graph, list(receivers.values()), signature)
        except ValueError as e:
            excluded[name] = str(e)
            continue
        if tf.compat.v1.saved_model.is_valid_signature(signature):
            signatures[name] = signature
        else:
            excluded[name] = "not a valid Predict/Classify/Regress signature for serving"
    logging.info("Signatures included in export: %s", sorted(signatures))
    for name, reason in excluded.items():
        logging.warning("Signature %r excluded from export, it cannot be served: %s",
                        name, reason)
    if not signatures:
        raise ValueError(
                "Export includes no servable signatures (excluded: {}). Return export_outputs "
                "whose ExportOutput types match the serving_input_receiver_fn (Classify/"
                "Regress need a single string receiver tensor; PredictOutput takes any)."
                .format(excluded))
    if DEFAULT_SERVING_SIGNATURE_DEF_KEY not in signatures:
        logging.warning("Export includes no default signature (%r)!",
                        DEFAULT_SERVING_SIGNATURE_DEF_KEY)
    return signatures


# --------------------------------------------------------------------------------------------
# Export.
# --------------------------------------------------------------------------------------------


def _resolve_checkpoint(checkpoint_path: str | None) -> str:
    """The checkpoint prefix to restore; a directory means its latest checkpoint."""
    if not checkpoint_path:
        raise ValueError(
                "Couldn't find trained model: checkpoint_path is {!r}. Train first (the "
                "model_dir has no checkpoint), or pass checkpoint_path= an existing "
                "checkpoint prefix.".format(checkpoint_path))
    path = os.fspath(checkpoint_path)
    if isinstance(path, bytes):
        path = path.decode("utf-8")
    if tf.io.gfile.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if not latest:
            raise ValueError(
                    "Couldn't find trained model at {}. Train first, or pass checkpoint_path= "
                    "an existing checkpoint prefix.".format(path))
        return latest
    if not (tf.io.gfile.exists(path + ".index") or tf.io.gfile.exists(path)):
        raise ValueError(
                "Couldn't find trained model at {} (no {}.index). Train first, or pass "
                "checkpoint_path= an existing checkpoint prefix such as "
                "<model_dir>/model.ckpt-<step>.".format(path, path))
    return path


def _timestamped_export_dirs(export_dir_base: str) -> tuple[str, str]:
    """Legacy `get_timestamped_export_dir`: `<base>/<int seconds>`, waiting while it exists.

    Integer seconds since the epoch are the version numbers TF Serving orders exports by, so a
    taken second is waited out rather than suffixed. The `temp-` sibling is checked too: it
    belongs to an export still being written.
    """
    for attempt in range(_MAX_DIRECTORY_CREATION_ATTEMPTS):
        timestamp = str(int(time.time()))
        export_dir = os.path.join(export_dir_base, timestamp)
        temp_dir = os.path.join(export_dir_base, "temp-" + timestamp)
        if not (tf.io.gfile.exists(export_dir) or tf.io.gfile.exists(temp_dir)):
            return export_dir, temp_dir
        logging.warning("Directory %s already exists; retrying (attempt %d/%d)", export_dir,
                        attempt + 1, _MAX_DIRECTORY_CREATION_ATTEMPTS)
        time.sleep(1)
    raise RuntimeError(
            "Failed to obtain a unique export directory name under {} after {} attempts. "
            "Another process may be exporting there; use a different export_dir_base."
            .format(export_dir_base, _MAX_DIRECTORY_CREATION_ATTEMPTS))


def _check_receiver(receiver: Any) -> None:
    if not (hasattr(receiver, "features") and isinstance(
            getattr(receiver, "receiver_tensors", None), dict)):
        raise TypeError(
                "serving_input_receiver_fn must return a ServingInputReceiver or "
                "TensorServingInputReceiver, received {!r} of type {}."
                .format(receiver, type(receiver).__name__))


def _as_estimator_spec(spec: Any) -> spec_lib.EstimatorSpec:
    if isinstance(spec, spec_lib.TPUEstimatorSpec):
        # Legacy exported the CPU graph, where a TPUEstimatorSpec is converted in place.
        return spec.as_estimator_spec()
    if isinstance(spec, spec_lib.EstimatorSpec):
        return spec
    raise ValueError(
            "model_fn should return an EstimatorSpec or a TPUEstimatorSpec in PREDICT mode, "
            "given: {} ({!r}).".format(type(spec).__name__, spec))


def _copy_assets_extra(assets_extra: Mapping[str, str], export_dir: str) -> None:
    if not isinstance(assets_extra, Mapping):
        raise TypeError(
                "assets_extra must be a dict of destination path (relative to assets.extra) "
                "-> source file path, received {!r}.".format(assets_extra))
    root = os.path.join(export_dir, "assets.extra")
    for dest_relative, source in assets_extra.items():
        dest_relative = os.fsdecode(dest_relative)
        normalized = os.path.normpath(dest_relative)
        if os.path.isabs(dest_relative) or normalized.startswith(".."):
            raise ValueError(
                    "assets_extra keys must be paths relative to assets.extra/, received {!r}. "
                    "Use e.g. {{'vocab/words.txt': '/path/to/words.txt'}}."
                    .format(dest_relative))
        source = os.fsdecode(source)
        if not tf.io.gfile.exists(source):
            raise ValueError(
                    "assets_extra[{!r}] = {!r} does not exist. Pass the full path of the file "
                    "to copy.".format(dest_relative, source))
        dest = os.path.join(root, normalized)
        tf.io.gfile.makedirs(os.path.dirname(dest))
        tf.io.gfile.copy(source, dest)


def _add_meta_graph(builder: Any, call_model_fn: Callable[[Any, Any, str], Any],
                    checkpoint_path: str, serving_input_receiver_fn: Callable[[], Any],
                    tf_random_seed: int | None) -> None:
    """Legacy `_add_meta_graph_for_mode(mode=PREDICT)`: build, restore, add to `builder`."""
    with tf.Graph().as_default() as graph:
        tf.compat.v1.train.get_or_create_global_step(graph)
        if tf_random_seed is not None:
            tf.compat.v1.random.set_random_seed(tf_random_seed)
        receiver = serving_input_receiver_fn()
        _check_receiver(receiver)
        spec = _as_estimator_spec(call_model_fn(receiver.features,
                                                getattr(receiver, "labels", None),
                                                spec_lib.ModeKeys.PREDICT))
        export_outputs = _get_export_outputs(spec.export_outputs, spec.predictions)
        signatures = _build_all_signature_defs(
                graph, receiver.receiver_tensors, export_outputs,
                getattr(receiver, "receiver_tensors_alternatives", None))

        scaffold = spec.scaffold or tf.compat.v1.train.Scaffold()
        local_init_op = (scaffold.local_init_op if scaffold.local_init_op is not None
                         else tf.compat.v1.train.Scaffold.default_local_init_op())
        # This saver restores now and is stored in the SavedModel, so a custom Scaffold saver
        # is what serving restores with too.
        saver = scaffold.saver or tf.compat.v1.train.Saver(sharded=True)
        if not isinstance(saver, tf.compat.v1.train.Saver):
            raise TypeError(
                    "Scaffold.saver must be a tf.compat.v1.train.Saver for export, received "
                    "{!r}. Leave it unset to use the default Saver.".format(saver))
        with tf.compat.v1.Session(graph=graph) as session:
            try:
                saver.restore(session, checkpoint_path)
            except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError) as e:
                raise ValueError(
                        "Could not load all requested variables from checkpoint {} in mode "
                        "{!r}. Make sure the PREDICT model_fn creates no variables that were "
                        "not saved in the checkpoint (and with the same shapes).\n\n{}"
                        .format(checkpoint_path, spec_lib.ModeKeys.PREDICT, e)) from e
            builder.add_meta_graph_and_variables(
                    session,
                    tags=[tf.saved_model.SERVING],
                    signature_def_map=signatures,
                    assets_collection=tf.compat.v1.get_collection(
                            tf.compat.v1.GraphKeys.ASSET_FILEPATHS),
                    main_op=local_init_op,
                    saver=saver,
                    strip_default_attrs=True)


def export_saved_model(*,
                       call_model_fn: Callable[[Any, Any, str], Any],
                       checkpoint_path: str | None,
                       export_dir_base: str,
                       serving_input_receiver_fn: Callable[[], Any],
                       assets_extra: Mapping[str, str] | None = None,
                       as_text: bool = False,
                       tf_random_seed: int | None = None) -> bytes:
    """Writes a `{serve}` SavedModel of the PREDICT `model_fn` with checkpointed variables.

    Mirrors legacy `Estimator.export_saved_model`; see the module docstring for the steps.
    The SavedModel is written to `<export_dir_base>/temp-<timestamp>` and renamed into place
    only once complete, so TF Serving (which ignores non-integer directories) never loads a
    partial export; a failed export removes its temp directory.

    Args:
        call_model_fn: `(features, labels, mode) -> EstimatorSpec | TPUEstimatorSpec`,
            calling the user's model_fn with export-mode params (no 'batch_size').
        checkpoint_path: Checkpoint prefix to restore, or a directory to take its latest
            checkpoint from.
        export_dir_base: Directory in which the timestamped export directory is created.
        serving_input_receiver_fn: No-argument function returning a `ServingInputReceiver`
            or `TensorServingInputReceiver`; called inside the export graph.
        assets_extra: `{path relative to assets.extra/: source file}` to copy into the export.
        as_text: Write `saved_model.pbtxt` instead of `saved_model.pb`.
        tf_random_seed: Graph-level seed for the export graph (legacy used
            `RunConfig.tf_random_seed`).

    Returns:
        The export directory as bytes, as legacy returned it.

    Raises:
        ValueError: No checkpoint, variables missing from it, bad export outputs, or no
            servable signature.
        TypeError: `serving_input_receiver_fn` or `export_outputs` of the wrong type.
    """
    if not callable(serving_input_receiver_fn):
        raise ValueError(
                "An input_receiver_fn must be defined: serving_input_receiver_fn={!r} is not "
                "callable. Pass e.g. build_raw_serving_input_receiver_fn({{...}})."
                .format(serving_input_receiver_fn))
    checkpoint_path = _resolve_checkpoint(checkpoint_path)
    export_dir_base = os.fsdecode(export_dir_base)
    export_dir, temp_dir = _timestamped_export_dirs(export_dir_base)
    try:
        builder = tf.compat.v1.saved_model.Builder(temp_dir)
        _add_meta_graph(builder, call_model_fn, checkpoint_path, serving_input_receiver_fn,
                        tf_random_seed)
        builder.save(as_text)
        if assets_extra:
            _copy_assets_extra(assets_extra, temp_dir)
        tf.io.gfile.rename(temp_dir, export_dir)
    except BaseException:
        if tf.io.gfile.exists(temp_dir):
            tf.io.gfile.rmtree(temp_dir)
        raise
    logging.info("Exported SavedModel of %s to %s", checkpoint_path, export_dir)
    return tf.compat.as_bytes(export_dir)
