"""The values a legacy `model_fn` returns: `ModeKeys`, `EstimatorSpec`, `TPUEstimatorSpec`.

This module owns the fields, defaults and construction-time validation of the two spec types,
the CPU conversion `TPUEstimatorSpec.as_estimator_spec()`, and the checks an estimator applies
to whatever `model_fn` returned. It must not know how specs are executed: no strategies,
loops, sessions, checkpoints or configuration. Tensors here usually live in a `tf.function`
FuncGraph rather than a legacy default graph; legacy's "must be from the default graph" check
accepts there a tensor of the graph being built or of a graph it is nested in (a function
captures those on use), as it is a tensor of model_fn's own graph either way.
"""
from __future__ import annotations

import collections
import collections.abc
import inspect
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import tensorflow as tf

from tpu_estimator_compat import log as logging
from tpu_estimator_compat._tf import private as _tf_private


class ModeKeys:
    """The three modes a `model_fn` is called in, with the legacy string values.

    The values are part of the contract: legacy code compares `mode == 'infer'` and writes
    them into exported signatures.
    """
    TRAIN = "train"
    EVAL = "eval"
    PREDICT = "infer"


_VALID_MODES = (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT)
_HOOK_METHODS = ("begin", "before_run", "after_run", "end")


def _is_tensor(value: Any) -> bool:
    return tf.is_tensor(value) or isinstance(value, tf.Variable)


def _is_dense_tensor(value: Any) -> bool:
    """A Tensor or Variable, as legacy's `isinstance(x, Tensor)`: a SparseTensor or a
    RaggedTensor is not one (an exporter and a loss need dense values)."""
    return isinstance(value, (tf.__internal__.types.Tensor, tf.Variable))


# Legacy's words, then what to do (legacy model_fn.py: _default_graph_error_message_template).
_DEFAULT_GRAPH_MESSAGE = (
    '{0} with "{1}" must be from the default graph. Possible causes of this error include: '
    "\n\n1) {0} was created outside the context of the default graph.\n\n2) The object "
    'passed through to EstimatorSpec was not created in the most recent call to "model_fn". '
    "Build every tensor of the spec inside model_fn, from its arguments.")


def _check_default_graph(value: Any, what: str, name: Any = None) -> None:
    """Raises legacy's ValueError for a tensor or op of a graph model_fn is not building.

    Accepted: eager values, and the default graph or a graph it is nested in (a FuncGraph's
    `outer_graph` chain: a function captures an outer tensor where it is used).
    """
    if tf.executing_eagerly():
        return
    try:
        graph = value.graph
    except AttributeError:  # An EagerTensor (eager-created variable) has no graph.
        return
    current = tf.compat.v1.get_default_graph()
    while current is not None:
        if current is graph:
            return
        current = getattr(current, "outer_graph", None)
    raise ValueError(_DEFAULT_GRAPH_MESSAGE.format(
        what, name if name is not None else getattr(value, "name", value)))


def _validate_mode(mode: Any) -> None:
    # None: a model_fn without a `mode` argument has no mode to give (legacy's
    # `EstimatorSpec(mode=None, ...)` idiom); no field is then required by it.
    if mode is not None and mode not in _VALID_MODES:
        raise ValueError(
                "`mode` must be one of ModeKeys.TRAIN ('train'), ModeKeys.EVAL ('eval') or "
                "ModeKeys.PREDICT ('infer'), given: {!r}. Pass the `mode` your model_fn "
                "received.".format(mode))


def _validate_train_op(train_op: Any, mode: str) -> Any:
    if train_op is None:
        if mode == ModeKeys.TRAIN:
            raise ValueError(
                    "Missing train_op. `train_op` is required when `mode` is TRAIN; return "
                    "the op from optimizer.minimize(...) or apply_gradients(...).")
        return None
    if not (_is_dense_tensor(train_op) or isinstance(train_op, tf.Operation)):
        raise TypeError(
                "train_op must be Operation or Tensor, given: {!r}.".format(train_op))
    _check_default_graph(train_op, "train_op")
    return train_op


def _validate_loss(loss: Any, mode: str) -> Any:
    if loss is None:
        if mode in (ModeKeys.TRAIN, ModeKeys.EVAL):
            raise ValueError(
                    "Missing loss. `loss` is required when `mode` is TRAIN or EVAL; return a "
                    "scalar loss Tensor.")
        return None
    if not _is_dense_tensor(loss):
        raise TypeError("loss must be Tensor, given: {!r}. Return a scalar dense Tensor, "
                        "e.g. tf.reduce_mean(...).".format(loss))
    _check_default_graph(loss, "loss")
    shape = loss.shape
    if shape.num_elements() not in (None, 1):
        raise ValueError(
                "Loss must be scalar, given: {} with shape {}. Reduce `loss` with "
                "tf.reduce_mean or tf.reduce_sum.".format(loss, shape))
    if not shape.is_compatible_with(tf.TensorShape([])):
        # Legacy accepted shape [1] and handed a scalar onwards; keep both views identical.
        if tf.is_symbolic_tensor(loss):
            with loss.graph.as_default():
                loss = tf.reshape(loss, [])
        else:
            loss = tf.reshape(loss, [])
    return loss


def _validate_predictions(predictions: Any, mode: str) -> Any:
    if predictions is None:
        if mode == ModeKeys.PREDICT:
            raise ValueError(
                    "Missing predictions. `predictions` is required when `mode` is PREDICT; "
                    "return a Tensor or a dict of Tensors.")
        return {}
    if isinstance(predictions, dict):
        for key, value in predictions.items():
            if not _is_dense_tensor(value):
                raise TypeError(
                        "predictions[{}] must be Tensor, given: {!r}. Return dense Tensors "
                        "(tf.sparse.to_dense for a SparseTensor).".format(key, value))
        for key, value in predictions.items():
            _check_default_graph(value, "prediction values",
                                 "{}: {}".format(key, getattr(value, "name", value)))
        return predictions
    if not _is_dense_tensor(predictions):
        raise TypeError(
                "predictions must be Tensor or dict of Tensors, given: {!r}."
                .format(predictions))
    _check_default_graph(predictions, "prediction values")
    return predictions


def validate_export_outputs(export_outputs: Any, predictions: Any, mode: str) -> Any:
    """Legacy `get_export_outputs` in PREDICT mode: a default `PredictOutput` of the
    predictions when none is given, a lone output also named the default signature, and
    several outputs only with one of them named the default. The exporter
    (`export/saved_model.py`) reads a spec's outputs through it too."""
    # Like legacy, only prediction (export) uses them, so other modes pass them through.
    if mode != ModeKeys.PREDICT:
        return export_outputs
    if export_outputs is None:
        return {tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY:
                _tf_private.default_predict_output(predictions)}
    if not isinstance(export_outputs, dict):
        raise TypeError(
                "export_outputs must be dict, given: {!r}. Map signature names to "
                "ExportOutput objects.".format(export_outputs))
    for key, value in export_outputs.items():
        # Duck-typed: TensorFlow's ExportOutput classes (the heads') and this library's.
        if not callable(getattr(value, "as_signature_def", None)):
            raise TypeError(
                    "Values in export_outputs must be ExportOutput objects. Given: {!r} of "
                    "type {} for key {!r}. Wrap tensors in an ExportOutput such as "
                    "PredictOutput.".format(value, type(value).__name__, key))
    default_key = tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY
    if len(export_outputs) == 1:  # Legacy added the default key to the dict it was given.
        (value,) = export_outputs.values()
        export_outputs.setdefault(default_key, value)
    elif default_key not in export_outputs:
        raise ValueError(
                "Multiple export_outputs were provided, but none of them is specified as the "
                "default.  Do this by naming one of them with "
                "signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY ({!r}); given: {}."
                .format(default_key, sorted(export_outputs)))
    return export_outputs


def _is_hook(hook: Any) -> bool:
    return all(callable(getattr(hook, name, None)) for name in _HOOK_METHODS)


def _validate_hooks(hooks: Any, name: str) -> tuple:
    if hooks is None:
        return ()
    if (isinstance(hooks, (str, bytes)) or _is_hook(hooks)
            or not isinstance(hooks, collections.abc.Iterable)):
        raise TypeError(
                "`{}` must be a list or tuple of SessionRunHook instances, given: {!r}. Wrap "
                "a single hook in a list.".format(name, hooks))
    hooks = tuple(hooks)
    for hook in hooks:
        if not _is_hook(hook):
            raise TypeError(
                    "All hooks must be SessionRunHook instances, given: {!r} in `{}`. A hook "
                    "needs callable `begin`, `before_run`, `after_run` and `end` methods; "
                    "subclass tf.compat.v1.train.SessionRunHook to get them.".format(hook, name))
    return hooks


def _is_metric_object(value: Any) -> bool:
    return callable(getattr(value, "update_state", None)) and callable(
            getattr(value, "result", None))


class _MetricPair(tuple):
    """`(metric.result(), update_op)`: what legacy made of a Keras `Metric` in
    `eval_metric_ops`, with the Metric itself kept (`keras_metric_of`) so the engine reads
    it again after every replica's update (`step/metrics.py`)."""

    keras_metric: Any = None


def keras_metric_of(value: Any) -> Any:
    """The Keras Metric an `eval_metric_ops` pair was made of, or None."""
    return getattr(value, "keras_metric", None) if isinstance(value, _MetricPair) else None


def _metric_pair(key: str, metric: Any) -> _MetricPair:
    """Legacy's conversion of a Keras Metric: its `result()` and its first update op.

    In a graph (legacy's mode) tf_keras records `update_state`'s ops, and legacy refused a
    Metric with none. In a `tf.function` (the engine's step) it records none (the function
    runs them by itself), so the pair's update is a no-op there.
    """
    updates = _tf_private.keras_metric_updates(metric)
    if tf.executing_eagerly() and not updates:
        updates = []  # Legacy's `updates` of an eager Metric: always empty.
    if updates is not None and not updates:
        raise ValueError(
                'Please call update_state(...) on the "{metric_name}" metric (eval_metric_ops'
                "[{key!r}]) inside model_fn, before returning the EstimatorSpec."
                .format(metric_name=metric.name, key=key))
    for op in updates or ():
        _check_default_graph(op, "eval_metric_ops",
                             "{}: {}".format(key, getattr(op, "name", op)))
    pair = _MetricPair((metric.result(), updates[0] if updates else tf.no_op()))
    pair.keras_metric = metric
    return pair


def _validate_eval_metric_ops(eval_metric_ops: Any) -> dict:
    if eval_metric_ops is None:
        return {}
    if not isinstance(eval_metric_ops, dict):
        raise TypeError(
                "eval_metric_ops must be a dict, given: {!r}. Map metric names to "
                "(metric_value, update_op) tuples.".format(eval_metric_ops))
    converted, metric_variables = {}, []
    for key, value in eval_metric_ops.items():
        if _is_metric_object(value):
            converted[key] = _metric_pair(key, value)
            metric_variables.extend(value.variables)
            continue
        if not isinstance(value, tuple) or len(value) != 2:
            raise TypeError(
                    "Values of eval_metric_ops must be (metric_value, update_op) tuples, "
                    "given: {!r} for key: {}. Return e.g. tf.compat.v1.metrics.accuracy(...) "
                    "or a Metric object.".format(value, key))
        for part in tf.nest.flatten(value):
            if not (_is_tensor(part) or isinstance(part, tf.Operation)):
                raise TypeError(
                        "Values of eval_metric_ops must be (metric_value, update_op) tuples "
                        "of Tensors or Operations, given: {!r} for key: {}."
                        .format(value, key))
            _check_default_graph(part, "eval_metric_ops",
                                 "{}: {}".format(key, getattr(part, "name", part)))
        converted[key] = value
    if metric_variables and not (tf.executing_eagerly() or tf.inside_function()):
        # Legacy's graph mode: LOCAL_VARIABLES gets them initialized, METRIC_VARIABLES is
        # what TFMA reads. A function's collections feed nothing; the engine makes its own.
        for collection in (tf.compat.v1.GraphKeys.LOCAL_VARIABLES,
                           tf.compat.v1.GraphKeys.METRIC_VARIABLES):
            present = {v.ref() for v in tf.compat.v1.get_collection(collection)}
            for variable in metric_variables:
                if variable.ref() not in present:
                    tf.compat.v1.add_to_collection(collection, variable)
                    present.add(variable.ref())
    return converted


def _validate_scaffold(scaffold: Any) -> Any:
    """The scaffold, or an empty one as legacy filled in (canned heads' tests and model code
    call `spec.scaffold.finalize()` on a spec built without one)."""
    if scaffold is None:
        return tf.compat.v1.train.Scaffold()
    if not isinstance(scaffold, tf.compat.v1.train.Scaffold):
        raise TypeError(
                "scaffold must be tf.train.Scaffold. Given: {!r}. Pass a "
                "tf.compat.v1.train.Scaffold or None.".format(scaffold))
    return scaffold


class EstimatorSpec(collections.namedtuple("EstimatorSpec", [
        "mode", "predictions", "loss", "train_op", "eval_metric_ops", "export_outputs",
        "training_chief_hooks", "training_hooks", "scaffold", "evaluation_hooks",
        "prediction_hooks",
])):
    """What a plain (non-TPU) legacy `model_fn` returns.

    Validated at construction so a bad `model_fn` fails where it was written, not deep inside
    the training loop. Missing optional fields are normalised the legacy way: `predictions`
    and `eval_metric_ops` become `{}`, hook fields become tuples, and a `[1]`-shaped loss
    becomes a scalar.
    """
    __slots__ = ()

    def __new__(cls,
                mode: str,
                predictions: Any = None,
                loss: Any = None,
                train_op: Any = None,
                eval_metric_ops: Mapping[str, Any] | None = None,
                export_outputs: Mapping[str, Any] | None = None,
                training_chief_hooks: Iterable[Any] | None = None,
                training_hooks: Iterable[Any] | None = None,
                scaffold: Any = None,
                evaluation_hooks: Iterable[Any] | None = None,
                prediction_hooks: Iterable[Any] | None = None) -> "EstimatorSpec":
        """Creates a validated spec; see the class docstring.

        Raises:
            ValueError: If a field required by `mode` is missing, `mode` is unknown or the
                loss is not scalar.
            TypeError: If a field has the wrong type.
        """
        _validate_mode(mode)
        return super().__new__(
                cls,
                mode=mode,
                predictions=_validate_predictions(predictions, mode),
                loss=_validate_loss(loss, mode),
                train_op=_validate_train_op(train_op, mode),
                eval_metric_ops=_validate_eval_metric_ops(eval_metric_ops),
                export_outputs=validate_export_outputs(export_outputs, predictions, mode),
                training_chief_hooks=_validate_hooks(training_chief_hooks,
                                                     "training_chief_hooks"),
                training_hooks=_validate_hooks(training_hooks, "training_hooks"),
                scaffold=_validate_scaffold(scaffold),
                evaluation_hooks=_validate_hooks(evaluation_hooks, "evaluation_hooks"),
                prediction_hooks=_validate_hooks(prediction_hooks, "prediction_hooks"))

    def _replace(self, **kwargs: Any) -> "EstimatorSpec":
        """Returns a re-validated copy; the mode is fixed, as in legacy."""
        if "mode" in kwargs and kwargs["mode"] != self.mode:
            raise ValueError(
                    "mode of EstimatorSpec cannot be changed: it is {!r}, `_replace` got {!r}. "
                    "Build a new EstimatorSpec instead.".format(self.mode, kwargs["mode"]))
        unknown = set(kwargs) - set(self._fields)
        if unknown:
            raise ValueError("Got unexpected field names: {}".format(sorted(unknown)))
        fields = self._asdict()
        fields.update(kwargs)
        return EstimatorSpec(**fields)


# The metric keys legacy `model_fn.py` defined (the heads read them from that module).
LOSS_METRIC_KEY = "loss"
AVERAGE_LOSS_METRIC_KEY = "average_loss"


def call_logit_fn(logit_fn: Callable, features: Any, mode: str, params: Any,
                  config: Any) -> Any:
    """Legacy `tf.estimator.experimental.call_logit_fn`: calls `logit_fn(features=...)` with
    whichever of `mode`, `params` and `config` it names, and checks it returned logits.

    Legacy kept it in `model_fn.py`, a module this library serves at that path.

    Raises:
        ValueError: `logit_fn` returned neither a Tensor nor a dict of str to Tensors.
    """
    try:
        names = set(inspect.signature(logit_fn).parameters)
    except (TypeError, ValueError):
        names = set()
    offered = {"mode": mode, "params": params, "config": config}
    logits = logit_fn(features=features, **{k: v for k, v in offered.items() if k in names})
    is_dict = isinstance(logits, dict) and all(
        isinstance(k, str) and _is_tensor(v) for k, v in logits.items())
    if not (is_dict or _is_tensor(logits)):
        raise ValueError(
            "logit_fn should return a Tensor or a dictionary mapping strings to Tensors.  "
            "logit_fn returned: {}".format(logits))
    return logits


def _positional_arg_count(fn: Callable) -> int | None:
    """Counts the positional parameters of `fn`; None if it takes *args or is opaque."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return None
    return sum(p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                          inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params)


def validate_host_call(host_call: Any, name: str) -> None:
    """Checks an `eval_metrics` or `host_call` value: `(fn, tensors)` with matching arity.

    Both are shipped from the device to the host and replayed there, so their structure must
    be fixed and their function callable with exactly the tensors given.

    Args:
        host_call: The `(fn, list_tuple_or_dict_of_tensors)` pair.
        name: 'eval_metrics' or 'host_call', used in the messages.

    Raises:
        ValueError: If it is not a 2-element tuple/list whose second item is a
            list/tuple/dict.
        TypeError: If the first element is not callable.
        RuntimeError: If a positional tensor list does not match the function's arguments.
    """
    if not isinstance(host_call, (tuple, list)):
        raise ValueError(
                "{} should be tuple or list, given: {!r}. Pass `{}=(fn, tensors)`."
                .format(name, host_call, name))
    if len(host_call) != 2:
        raise ValueError(
                "{} should have two elements, given {}: {!r}. Pass `{}=(fn, tensors)`."
                .format(name, len(host_call), host_call, name))
    fn, tensors = host_call
    if not callable(fn):
        raise TypeError("{}[0] should be callable, given: {!r}.".format(name, fn))
    if not isinstance(tensors, (tuple, list, dict)):
        raise ValueError(
                "{}[1] should be tuple or list, or dict, given: {!r}.".format(name, tensors))
    if isinstance(tensors, (tuple, list)):
        expected = _positional_arg_count(fn)
        if expected is not None and expected != len(tensors):
            raise RuntimeError(
                    "In TPUEstimatorSpec.{}, length of tensors {} does not match method args "
                    "of the function, which takes {}. Pass one tensor per argument of `{}[0]`."
                    .format(name, len(tensors), expected, name))


def call_host_fn(fn: Callable, tensors: Any, name: str) -> Any:
    """Calls `name=(fn, tensors)`'s fn as legacy did: by keyword for a dict, else positionally."""
    if isinstance(tensors, dict):
        try:
            return fn(**tensors)
        except TypeError as e:
            logging.warning(
                    "Exception while calling %s: %s. It is likely the tensors (%s[1]) do not "
                    "match the function's arguments", name, e, name)
            raise
    return fn(*tensors)


class HostCallHook(tf.compat.v1.train.SessionRunHook):
    """Carries the outputs of a `host_call` run on the host, as legacy CPU mode did.

    Legacy attached such a hook so the host_call outputs (usually summary ops) were fetched
    on every step. The tensors are also exposed as `tensors` so a TF2 loop can run them
    without a session.
    """

    def __init__(self, tensors: Any) -> None:
        self.tensors = tensors

    def before_run(self, run_context: Any) -> tf.compat.v1.train.SessionRunArgs:
        return tf.compat.v1.train.SessionRunArgs(self.tensors)


class TPUEstimatorSpec(collections.namedtuple("TPUEstimatorSpec", [
        "mode", "predictions", "loss", "train_op", "eval_metrics", "export_outputs",
        "scaffold_fn", "host_call", "training_hooks", "evaluation_hooks", "prediction_hooks",
])):
    """What a legacy TPU `model_fn` returns.

    Differs from `EstimatorSpec` because on a TPU, metrics and summaries cannot run on the
    device: `eval_metrics` and `host_call` are `(fn, tensors)` pairs whose tensors are
    gathered from every replica (concatenated along the batch axis) and passed to `fn` on the
    host. `scaffold_fn` defers building the Scaffold to the host for the same reason.
    """
    __slots__ = ()

    def __new__(cls,
                mode: str,
                predictions: Any = None,
                loss: Any = None,
                train_op: Any = None,
                eval_metrics: tuple | list | None = None,
                export_outputs: Mapping[str, Any] | None = None,
                scaffold_fn: Callable[[], Any] | None = None,
                host_call: tuple | list | None = None,
                training_hooks: Iterable[Any] | None = None,
                evaluation_hooks: Iterable[Any] | None = None,
                prediction_hooks: Iterable[Any] | None = None) -> "TPUEstimatorSpec":
        """Creates a validated spec; see the class docstring.

        Raises:
            ValueError, TypeError, RuntimeError: As `EstimatorSpec` and `validate_host_call`.
        """
        _validate_mode(mode)
        if eval_metrics is not None:
            validate_host_call(eval_metrics, "eval_metrics")
        if host_call is not None:
            validate_host_call(host_call, "host_call")
        if scaffold_fn is not None and not callable(scaffold_fn):
            raise TypeError(
                    "`scaffold_fn` must be callable (returning a tf.train.Scaffold), given: "
                    "{!r}.".format(scaffold_fn))
        return super().__new__(
                cls,
                mode=mode,
                predictions=_validate_predictions(predictions, mode),
                loss=_validate_loss(loss, mode),
                train_op=_validate_train_op(train_op, mode),
                eval_metrics=eval_metrics,
                export_outputs=validate_export_outputs(export_outputs, predictions, mode),
                scaffold_fn=scaffold_fn,
                host_call=host_call,
                training_hooks=_validate_hooks(training_hooks, "training_hooks"),
                evaluation_hooks=_validate_hooks(evaluation_hooks, "evaluation_hooks"),
                prediction_hooks=_validate_hooks(prediction_hooks, "prediction_hooks"))

    def as_estimator_spec(self) -> EstimatorSpec:
        """Builds the equivalent `EstimatorSpec`, running the host-side functions in place.

        This is what legacy did when `use_tpu=False`: with no device/host split, `metric_fn`
        is called directly on the tensors to produce `eval_metric_ops`, `host_call` outputs
        are attached to every hook list via a `HostCallHook`, and `scaffold_fn` is called to
        build the scaffold. Call it inside the graph or function that owns the tensors.
        """
        eval_metric_ops = None
        if self.eval_metrics is not None:
            metric_fn, tensors = self.eval_metrics
            eval_metric_ops = call_host_fn(metric_fn, tensors, "eval_metrics")
        extra_hooks: tuple = ()
        if self.host_call is not None:
            host_fn, tensors = self.host_call
            extra_hooks = (HostCallHook(call_host_fn(host_fn, tensors, "host_call")),)
        scaffold = self.scaffold_fn() if self.scaffold_fn else None
        return EstimatorSpec(
                mode=self.mode,
                predictions=self.predictions,
                loss=self.loss,
                train_op=self.train_op,
                eval_metric_ops=eval_metric_ops,
                export_outputs=self.export_outputs,
                scaffold=scaffold,
                training_hooks=self.training_hooks + extra_hooks,
                evaluation_hooks=self.evaluation_hooks + extra_hooks,
                prediction_hooks=self.prediction_hooks + extra_hooks)


def validate_spec_type(spec: Any, mode: str, require_tpu_spec: bool = False,
                       plain_estimator: bool = False) -> EstimatorSpec | TPUEstimatorSpec:
    """Checks what a `model_fn` returned before an estimator relies on it.

    Args:
        spec: The `model_fn` return value.
        mode: The mode `model_fn` was called with.
        require_tpu_spec: True when running the TPU path, where legacy demanded a
            `TPUEstimatorSpec` (with dict predictions) for evaluation and prediction.

    Returns:
        `spec`, unchanged.

    Raises:
        ValueError: If `spec` is neither spec type, or an `EstimatorSpec` carries
            `training_chief_hooks` (TPUEstimator never ran them).
        RuntimeError: If `require_tpu_spec` and an `EstimatorSpec` is returned in EVAL or
            PREDICT.
        TypeError: If `require_tpu_spec` and PREDICT predictions are not a dict.

    With `plain_estimator` (legacy `Estimator`) only an `EstimatorSpec` is accepted, and its
    `training_chief_hooks` and `Scaffold` are the estimator's to run.
    """
    if plain_estimator:
        if not isinstance(spec, EstimatorSpec):
            raise ValueError(
                "model_fn should return an EstimatorSpec. Given: {} ({!r}); a TPUEstimatorSpec "
                "runs under TPUEstimator, or call its `as_estimator_spec()`.".format(
                    type(spec).__name__, spec))
        if spec.mode != mode:
            logging.warning("model_fn was called with mode %r but returned a spec with mode "
                            "%r.", mode, spec.mode)
        return spec
    if not isinstance(spec, (EstimatorSpec, TPUEstimatorSpec)):
        raise ValueError(
                "model_fn should return an EstimatorSpec or a TPUEstimatorSpec, given: {} "
                "({!r}).".format(type(spec).__name__, spec))
    if spec.mode != mode:
        logging.warning("model_fn was called with mode %r but returned a spec with mode %r.",
                        mode, spec.mode)
    if isinstance(spec, EstimatorSpec):
        if require_tpu_spec and mode in (ModeKeys.EVAL, ModeKeys.PREDICT):
            what = "evaluation" if mode == ModeKeys.EVAL else "prediction"
            raise RuntimeError(
                    "estimator_spec used by TPU {} must have type `TPUEstimatorSpec`. Got {}. "
                    "Return a TPUEstimatorSpec from model_fn.".format(what, type(spec)))
        if spec.training_chief_hooks:
            raise ValueError(
                    "training_chief_hooks returned by EstimatorSpec is not supported in "
                    "TPUEstimator. If you want to pass training hooks, please pass via "
                    "training_hooks.")
        if spec.scaffold is not None:
            logging.warning("EstimatorSpec.Scaffold is ignored by TPU train/eval. "
                            "Please use TPUEstimatorSpec.")
    elif (require_tpu_spec and mode == ModeKeys.PREDICT
          and not isinstance(spec.predictions, dict)):
        raise TypeError(
                "TPUEstimatorSpec.predictions must be dict of Tensors, given: {!r}. Return "
                "a dict, e.g. predictions={{'predictions': tensor}} (a bare tensor works "
                "only with use_tpu=False, as on legacy TPUEstimator).".format(spec.predictions))
    return spec


def check_eval_metrics_tensors_have_batch_dim(eval_metrics: Any,
                                              name: str = "eval_metrics") -> None:
    """Rejects scalar tensors in the tensors of `eval_metrics` (or `host_call`).

    Per-replica tensors are concatenated along axis 0 before `metric_fn` sees them, which is
    impossible for rank-0 values; legacy failed here too, so models that pass e.g. a scalar
    mean loss learn to pass a `[1]`-shaped or per-example tensor instead.

    Args:
        eval_metrics: A `(fn, tensors)` pair or None.
        name: The field name, used in the message.

    Raises:
        RuntimeError: For the first scalar (rank-0) tensor found.
    """
    if eval_metrics is None:
        return
    validate_host_call(eval_metrics, name)
    tensors = eval_metrics[1]
    items = tensors.items() if isinstance(tensors, dict) else enumerate(tensors)
    for key, value in items:
        rank = value.shape.rank if _is_tensor(value) else np.ndim(value)
        if rank == 0:
            raise RuntimeError(
                    "All tensors outfed from TPU should preserve batch size dimension, but got "
                    "scalar {!s} at `{}[1][{!r}]`. Give it a leading batch axis, e.g. "
                    "tf.reshape(x, [1]) or a per-example tensor.".format(value, name, key))
