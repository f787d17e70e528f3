"""Host-side evaluation of `eval_metrics=(metric_fn, tensors)` over gathered numpy batches.

Legacy TPUEstimator shipped the `eval_metrics` tensors off the device every step, concatenated
the replicas' pieces along axis 0 and ran `metric_fn`'s update ops on the host; at the end of
evaluation it read the metric values and added the `loss` (mean of the step losses) and
`global_step` entries. This module owns exactly that host half: `HostMetrics` builds
`metric_fn` once in a private v1 graph fed by placeholders (so `tf.compat.v1.metrics.*` keep
their graph-mode semantics and local variables), `MeanLoss` reproduces the float32 arithmetic
of the legacy `loss` metric, and `finalize_eval_dict` assembles the dict `evaluate()` returned.
On legacy's CPU path (`use_tpu=False`, one device) metric_fn ran in model_fn's graph instead;
`build_in_step` builds it there, in the traced step, for the caller that knows it is on that
path.

It must not know about strategies, replicas, loops, checkpoints or model_fns: callers hand it
already-gathered numpy batches and plain step losses.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

import numpy as np
import tensorflow as tf

from tpu_estimator_compat._tf import private as _tf_private
from tpu_estimator_compat import log as logging
from tpu_estimator_compat import shapes as shapes_lib
from tpu_estimator_compat import spec as spec_lib
from tpu_estimator_compat.step import eval_metric_ops

LOSS_KEY = "loss"
GLOBAL_STEP_KEY = "global_step"


def _check_reserved_names(names: Any) -> None:
    """Raises legacy Estimator's errors for metric names it reserved for itself."""
    # Legacy raised both while building the eval graph, before any step ran.
    if LOSS_KEY in names:
        raise ValueError(
                'Metric with name "%s" is not allowed, because Estimator ' % LOSS_KEY +
                "already defines a default metric with the same name. Rename the metric "
                "returned by metric_fn.")
    if GLOBAL_STEP_KEY in names:
        raise ValueError(
                "Metric with name `global_step` is not allowed, because Estimator "
                "already defines a default metric with the same name. Rename the metric "
                "returned by metric_fn.")


def _is_keras_metric(value: Any) -> bool:
    # Duck-typed so neither Keras 2 nor Keras 3 has to be importable here.
    return all(callable(getattr(value, name, None)) for name in ("update_state", "result")) \
        and hasattr(value, "variables")


def _is_graph_element(value: Any) -> bool:
    return tf.is_tensor(value) or isinstance(value, (tf.Variable, tf.Operation))


def _placeholder_name(path: Any) -> str:
    name = re.sub(r"[^A-Za-z0-9_.\-/]", "_", "_".join(str(p) for p in path)) or "tensor"
    return "eval_metrics/" + (name if name[0].isalnum() or name[0] == "." else "t" + name)


# Row counts metric_fn is built for besides the full batch (padded last batches of
# different evaluations); past this many, an unknown batch axis takes every other count.
_MAX_STATIC_VARIANTS = 8


class _VariantMismatch(ValueError):
    """metric_fn made other variables for another batch size: they cannot be shared."""


class _SharedVariables:
    """Lets metric_fn be built for several batch sizes over one set of metric variables.

    The first build records every variable it creates; each later build gets those same
    variables back in creation order, so all builds accumulate into one set of totals.
    Variables are created through the graph's variable-creator stack whether they come from
    `tf.compat.v1.metrics`, `get_variable` or a tf-keras Metric's `add_weight`.
    """

    def __init__(self) -> None:
        self.created: list[Any] = []

    def recording(self) -> Any:
        def creator(next_creator: Callable[..., Any], **kwargs: Any) -> Any:
            variable = next_creator(**kwargs)
            self.created.append(variable)
            return variable

        return tf.variable_creator_scope(creator)

    def reusing(self, used: list[Any]) -> Any:
        """A creator scope handing out the recorded variables; `used` collects them."""
        def creator(next_creator: Callable[..., Any], **kwargs: Any) -> Any:
            del next_creator
            if len(used) == len(self.created):
                raise _VariantMismatch(
                        "metric_fn created more variables than for the first batch size "
                        "({})".format(len(self.created)))
            variable = self.created[len(used)]
            dtype = kwargs.get("dtype")
            if dtype is not None and tf.as_dtype(dtype).base_dtype != variable.dtype.base_dtype:
                raise _VariantMismatch(
                        "metric_fn's variable #{} is {}, but {} for the first batch size"
                        .format(len(used), tf.as_dtype(dtype).name, variable.dtype.name))
            used.append(variable)
            return variable

        return tf.variable_creator_scope(creator)


class _Variant:
    """metric_fn built for one batch size: placeholders, the update call and the values."""

    def __init__(self, placeholders: list[Any], shapes: list[tuple | None], update_op: Any,
                 value_ops: dict[str, Any], names: list[str], keras_variables: list[Any]
                 ) -> None:
        self.placeholders = placeholders
        self.keras_variables = keras_variables
        self.shapes = shapes
        self.update_op = update_op
        self.value_ops = value_ops
        self.names = names
        self.run_update: Callable[..., Any] | None = None


def _check_structure(structure: Any, specs: Any) -> None:
    """`eval_metrics[1]` must be a list/tuple/dict, and `specs` must match it."""
    if not isinstance(structure, (tuple, list, dict)):
        raise ValueError(
                "eval_metrics[1] should be tuple or list, or dict, given: {!r}. Pass the "
                "`tensors` of `eval_metrics=(metric_fn, tensors)` as `structure`."
                .format(structure))
    try:
        _assert_same_structure(structure, specs)
    except (ValueError, TypeError) as e:
        raise ValueError(
                "`specs` must match the structure of the eval_metrics tensors, given "
                "specs {!r} for tensors {!r} ({}). Build them with "
                "tf.nest.map_structure(tf.TensorSpec.from_tensor, tensors)."
                .format(specs, structure, e)) from e


class HostMetrics:
    """Runs a legacy `metric_fn` on the host over a stream of gathered numpy batches.

    The graph, placeholders, metric ops and session are built in `__init__`; each `update`
    is then a single pre-compiled session call, so per-batch cost stays at feeding the
    arrays. `metric_fn` is called exactly as legacy's outfeed host call did: positionally
    when `structure` is a list/tuple, by keyword when it is a dict.

    With a static batch axis (`static_replicas`), a batch of another row count (a padded
    last batch's real rows) gets metric_fn built again for that count, over the same metric
    variables: metric_fn always sees a static axis 0, as legacy TPU always gave it (some
    metric_fns branch on it, e.g. google/automl efficientdet's `batch_map_fn`).

    Attributes:
        names: The metric names, sorted (legacy sorted them to keep the graph stable).
    """

    def __init__(self, metric_fn: Callable[..., Any], structure: Any, specs: Any, *,
                 static_replicas: int | None = None) -> None:
        """Builds the metric graph and session.

        Args:
            metric_fn: `eval_metrics[0]`: returns a dict of name -> `(value, update_op)`
                (e.g. `tf.compat.v1.metrics.accuracy(...)`) or tf-keras `Metric` objects on
                which `update_state` was called.
            structure: `eval_metrics[1]`, the user's list/tuple/dict of tensors; only its
                container type and keys are used.
            specs: A nest matching `structure` of `tf.TensorSpec`s with the full tensor
                shape, axis 0 being the batch axis (its size is ignored), e.g.
                `tf.nest.map_structure(tf.TensorSpec.from_tensor, structure)`.
            static_replicas: None (default): metric_fn sees axis 0 as unknown, so any
                number of rows may be fed. An int N: metric_fn sees axis 0 as N times the
                spec's (static) axis 0, as legacy TPU's metric_fn saw the concatenated
                outfeed of N cores' fixed-shape batches; a batch of another row count is
                fed to metric_fn built again for that count (see the class docstring).

        Raises:
            ValueError: If `structure` is not a list/tuple/dict, `specs` does not match it,
                a metric name is 'loss' or 'global_step', a Metric object was never
                updated, or a metric tensor comes from another graph.
            ModelFnObjectsError: If metric_fn uses a tensor or object model_fn made.
            RuntimeError: If a spec is scalar (it has no batch axis to concatenate).
            TypeError: If `metric_fn` returns neither None nor a dict of `(value, update_op)`
                tuples of Tensors/Operations or Metric objects.
        """
        _check_structure(structure, specs)
        self._metric_fn = metric_fn
        self._structure = structure
        paths_and_specs = _flatten_with_paths(specs)
        self._paths = [path for path, _ in paths_and_specs]
        self._specs: list[tuple[tf.TensorShape, tf.DType]] = []
        for path, spec in paths_and_specs:
            shape = tf.TensorShape(spec.shape)
            if shape.rank == 0:
                raise RuntimeError(
                        "All tensors outfed from TPU should preserve batch size "
                        "dimension, but got scalar {} at eval_metrics[1]{}. Give it a "
                        "leading batch axis, e.g. tf.reshape(x, [1]).".format(
                                spec, "".join("[{!r}]".format(p) for p in path)))
            self._specs.append((shape, tf.as_dtype(spec.dtype)))
        self._dtypes = [np.dtype(dtype.as_numpy_dtype) for _, dtype in self._specs]
        # Rows per leaf of the main build (plain ints: they key `_variants`); None for an
        # unknown axis 0.
        self._rows: tuple[int | None, ...] | None = None
        if static_replicas is not None:
            per_replica = [shapes_lib.static_dim(shape, 0) for shape, _ in self._specs]
            self._rows = tuple(None if rows is None else rows * static_replicas
                               for rows in per_replica)
            if all(rows is None for rows in self._rows):
                self._rows = None
        self._start()
        self.reset()
        logging.info("Built host eval metrics: %s", ", ".join(self.names) or "(none)")

    def _start(self) -> None:
        """Builds metric_fn's main graph (for `self._rows`) and the session that runs it."""
        self._graph = tf.Graph()
        self._session: tf.compat.v1.Session | None = None
        self._shared = _SharedVariables()
        self._variants: dict[tuple | None, _Variant | Exception] = {}
        with self._graph.as_default(), tf.device("/device:CPU:0"):
            with self._shared.recording():
                main = self._build(self._rows, scope=None)
            self.names: list[str] = main.names
            self._value_ops = main.value_ops
            reset_op = tf.group(tf.compat.v1.local_variables_initializer(),
                                tf.compat.v1.variables_initializer(main.keras_variables))
            global_variables = tf.compat.v1.global_variables()
            global_init = tf.compat.v1.variables_initializer(global_variables)
            # Tables metric_fn made (a vocabulary): legacy's Scaffold initialised them once
            # per session, in its local_init_op.
            tables = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.TABLE_INITIALIZERS)
            self._tables_initialized = len(tables)
            tables_init = tf.group(*tables) if tables else None
        # Not finalized: a padded last batch may need metric_fn built for its row count.
        # The metric ops are tiny: one inter-op thread halves a step's latency. A per-session
        # pool keeps that choice from sizing the process-wide pool other sessions share.
        self._session = tf.compat.v1.Session(
                graph=self._graph,
                config=tf.compat.v1.ConfigProto(allow_soft_placement=True,
                                                inter_op_parallelism_threads=1,
                                                use_per_session_threads=True))
        if global_variables:
            # Nothing restores them here; legacy would have read them from the checkpoint.
            logging.warning(
                    "metric_fn created global variables %s; they are initialised from their "
                    "initializers on the host, not restored from a checkpoint.",
                    [v.name for v in global_variables])
            self._session.run(global_init)
        if tables_init is not None:
            self._session.run(tables_init)
        self._main = main
        self._variants[self._rows] = main
        self._run_values = self._session.make_callable(
                {name: self._value_ops[name] for name in self.names})
        self._run_reset = self._session.make_callable(reset_op)

    def _build(self, rows: tuple | None, scope: str | None) -> _Variant:
        """Builds metric_fn on placeholders with `rows` as axis 0 (None: unknown)."""
        placeholders, shapes = [], []
        for index, (path, (shape, dtype)) in enumerate(zip(self._paths, self._specs)):
            shape = shapes_lib.with_rows(shape, None if rows is None else rows[index])
            placeholders.append(tf.compat.v1.placeholder(
                    dtype, shape, name=_placeholder_name(path)))
            dims = shapes_lib.static_dims(shape)
            shapes.append(None if dims is None else tuple(dims))
        args = tf.nest.pack_sequence_as(self._structure, placeholders)
        try:
            if scope is None:
                metric_ops = spec_lib.call_host_fn(self._metric_fn, args, "eval_metrics")
            else:
                # A scope of its own keeps `get_variable`'s names apart from the first
                # build's, so they too reach the sharing creator.
                with tf.compat.v1.variable_scope(scope):
                    metric_ops = spec_lib.call_host_fn(self._metric_fn, args, "eval_metrics")
        except (ValueError, TypeError) as e:
            if isinstance(e, _VariantMismatch) or not uses_another_graph(e):
                raise
            raise ModelFnObjectsError(
                    "{}\n\nmetric_fn (eval_metrics[0]) uses a tensor or object (a lookup "
                    "table, a tokenizer) that model_fn created, which HostMetrics' graph "
                    "of its own cannot reach. Build metric_fn where model_fn's tensors "
                    "live (`metrics.build_in_step`), or create the object inside "
                    "metric_fn.".format(e)) from e
        value_ops, update_ops, keras_variables = _split_metric_ops(metric_ops, self._graph)
        names = sorted(value_ops)
        update_op = tf.group(*[update_ops[name] for name in names])
        return _Variant(placeholders, shapes, update_op, value_ops, names, keras_variables)

    def _variant_for(self, rows: tuple) -> _Variant | Exception:
        """The build of metric_fn taking `rows` rows per leaf, made on first use."""
        if self._rows is None:
            return self._main
        key: tuple | None = rows if len(self._variants) <= _MAX_STATIC_VARIANTS else None
        if key in self._variants:
            return self._variants[key]
        variant: _Variant | Exception
        try:
            variant = self._build_shared(key)
        except Exception as e:  # pylint: disable=broad-except
            if key is None:
                variant = e
            else:
                # A metric_fn that cannot take this static count may take an unknown one.
                variant = self._variants.get(None) or e
                if None not in self._variants:
                    try:
                        variant = self._build_shared(None)
                    except Exception:  # pylint: disable=broad-except
                        variant = e
                    self._variants[None] = variant
        self._variants[key] = variant
        return variant

    def _build_shared(self, rows: tuple | None) -> _Variant:
        used: list[Any] = []
        scope = "rows_" + ("unknown" if rows is None else "_".join(map(str, rows)))
        with self._graph.as_default(), tf.device("/device:CPU:0"):
            with self._shared.reusing(used):
                variant = self._build(rows, scope=scope)
            if len(used) != len(self._shared.created):
                raise _VariantMismatch(
                        "metric_fn created {} variables for batches of {} rows, {} for the "
                        "first batch size".format(len(used), rows, len(self._shared.created)))
            if variant.names != self.names:
                raise _VariantMismatch(
                        "metric_fn returned metrics {} for batches of {} rows, {} for the "
                        "first batch size".format(variant.names, rows, self.names))
            tables = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.TABLE_INITIALIZERS)
            new_tables = tables[self._tables_initialized:]
            self._tables_initialized = len(tables)
        if new_tables:
            self._session.run(new_tables)
        logging.info("metric_fn built again for a batch of %s rows (legacy TPU gave it a "
                     "static batch axis), sharing the metric variables", rows or "unknown")
        return variant

    def reset(self) -> None:
        """Zeroes every metric's accumulators; legacy metrics restarted at each evaluate."""
        self._require_open()
        self._run_reset()

    def update(self, batch: Any) -> None:
        """Accumulates one gathered batch into every metric, in one session call.

        Args:
            batch: A nest matching `structure` of numpy arrays (anything `np.asarray`
                accepts), each concatenated over replicas along axis 0. A batch whose arrays
                all have zero rows is skipped.

        Raises:
            ValueError: If `batch` does not match `structure`, an array's dtype or shape
                does not fit its spec, or metric_fn cannot be built for its row count.
        """
        self._require_open()
        try:
            _assert_same_structure(self._structure, batch)
        except (ValueError, TypeError) as e:
            raise ValueError(
                    "`batch` must match the structure of the eval_metrics tensors {!r}, "
                    "given: {!r} ({}). Pass one gathered numpy array per tensor."
                    .format(self._structure, batch, e)) from e
        arrays = []
        empty = True
        for path, leaf, dtype, (shape, _) in zip(self._paths, tf.nest.flatten(batch),
                                                 self._dtypes, self._specs):
            array = np.asarray(leaf)
            if array.dtype != dtype:
                if not np.can_cast(array.dtype, dtype, casting="same_kind"):
                    raise ValueError(
                            "`batch`{} has dtype {}, but its spec has dtype {}. Feed the "
                            "gathered values of the eval_metrics tensor unchanged.".format(
                                    _path_str(path), array.dtype, dtype))
                array = array.astype(dtype)
            if shape.rank is not None and (array.ndim != shape.rank or any(
                    d is not None and d != a for d, a in zip(shape.as_list()[1:],
                                                             array.shape[1:]))):
                raise ValueError(
                        "`batch`{} has shape {}, but its spec needs {} (batch axis first). "
                        "Concatenate the replicas' values along axis 0.".format(
                                _path_str(path), array.shape, [None] + shape.as_list()[1:]))
            if array.ndim == 0 or array.shape[0]:
                empty = False
            arrays.append(np.require(array, requirements="C"))
        if empty and arrays:
            return
        variant = self._variant_for(tuple(a.shape[0] if a.ndim else None for a in arrays))
        if isinstance(variant, Exception):
            raise ValueError(
                    "`batch` has {} rows, but metric_fn was built for batches of {} and "
                    "cannot be built for this many ({}: {}). It needs a static batch axis, "
                    "as legacy TPU gave it: full batches only. Give full batches "
                    "(`batch(..., drop_remainder=True)`, as legacy TPU evaluation required) "
                    "or evaluate a number of steps the input fills.".format(
                            [a.shape[0] for a in arrays], list(self._rows or ()),
                            type(variant).__name__, str(variant).splitlines()[0]
                            if str(variant) else "")) from variant
        if variant.run_update is None:
            # Not `make_callable(feed_list=...)`: that is a full Session.run per call (see
            # _tf_private.make_fed_callable); this is one C++ call per batch.
            variant.run_update = _tf_private.make_fed_callable(
                    self._session, variant.placeholders, [variant.update_op])
        variant.run_update(*arrays)

    def result(self) -> dict[str, np.generic | np.ndarray]:
        """Reads every metric value: numpy scalars of each value's dtype, keyed by name."""
        self._require_open()
        # A Session cannot run an empty fetch list, and metric_fn may legally return None.
        return self._run_values() if self.names else {}

    def close(self) -> None:
        """Releases the session; further calls raise. Safe to call twice."""
        if self._session is not None:
            self._session.close()
            self._session = None

    def __enter__(self) -> "HostMetrics":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _require_open(self) -> None:
        if self._session is None:
            raise RuntimeError(
                    "HostMetrics is closed. Build a new HostMetrics for another evaluation, "
                    "or call reset() instead of close() between evaluations.")


class ModelFnObjectsError(ValueError):
    """metric_fn uses a tensor or object model_fn made: it cannot run in a graph of its own.

    A lookup table made in model_fn has its resource handle made eagerly (under
    `init_scope`), which a v1 Session cannot take, and its other tensors (`default_value`)
    in the traced step's graph; a tokenizer's resources are the same.
    """


def uses_another_graph(error: Exception) -> bool:
    """Whether metric_fn failed on a tensor of another graph or an eager resource handle."""
    message = str(error)
    return ("must be from the same graph" in message  # A tensor of the step's FuncGraph.
            or "Eager-defined Tensor during graph construction" in message  # A handle
            or "dtype resource" in message  # made under init_scope (tables do that).
            # A tensor of the traced step, from a function traced beside it.
            or "is out of scope and cannot be used here" in message)


def _split_metric_ops(metric_ops: Any, graph: tf.Graph | None) -> tuple[dict, dict, list]:
    """Checks metric_fn's result like legacy EstimatorSpec and splits value/update ops.

    `graph`: the host graph every metric must be built in; None when metric_fn runs in the
    traced step itself (`build_in_step`), where a tf.keras Metric's updates are applied by
    the function's automatic control dependencies rather than listed in `Metric.updates`.
    """
    if metric_ops is None:
        # Legacy treated a None result as "no metrics" on both the CPU and TPU paths.
        return {}, {}, []
    if not isinstance(metric_ops, dict):
        raise TypeError(
                "eval_metric_ops must be a dict, given: {}. metric_fn (eval_metrics[0]) "
                "must return a dict mapping metric names to (metric_value, update_op) "
                "tuples such as tf.compat.v1.metrics.accuracy(...).".format(metric_ops))
    _check_reserved_names(metric_ops)
    value_ops, update_ops, keras_variables = {}, {}, []
    for key, value in metric_ops.items():
        # A Metric EstimatorSpec paired: read again after every replica's update (merge_call).
        if spec_lib.keras_metric_of(value) is not None:
            value = spec_lib.keras_metric_of(value)
        if _is_keras_metric(value):
            # In the host graph `updates` is read while it is the default one (tf-keras
            # checks graph consistency); in a traced step the list it keeps (the public
            # property refuses ops of the loop's while body).
            updates = (list(getattr(value, "updates", None) or []) if graph is not None
                       else _tf_private.keras_metric_updates(value))
            if updates is not None and not updates:
                raise ValueError(
                        'Please call update_state(...) on the "{metric_name}" metric'
                        .format(metric_name=value.name))
            keras_variables.extend(value.variables)
            # Legacy used the first update only (Metric.updates[0]).
            value = (value.result(), updates[0] if updates else tf.no_op())
        if not isinstance(value, tuple) or len(value) != 2:
            raise TypeError(
                    "Values of eval_metric_ops must be (metric_value, update_op) tuples, "
                    "given: {} for key: {}. Return e.g. the pair from "
                    "tf.compat.v1.metrics.accuracy(...), or a tf.keras Metric after "
                    "calling its update_state(...).".format(value, key))
        for part in tf.nest.flatten(value):  # A metric's value may be a nest (legacy).
            if not _is_graph_element(part):
                raise TypeError(
                        "Values of eval_metric_ops must be (metric_value, update_op) "
                        "tuples of Tensors or Operations, given: {!r} for key: {}."
                        .format(value, key))
            if graph is not None and getattr(part, "graph", None) is not graph:
                raise ValueError(
                        'eval_metric_ops with "{}: {}" must be from the default graph. '
                        "metric_fn runs on the host in its own graph: build every metric "
                        "from the tensors passed to metric_fn, not from tensors captured "
                        "from model_fn.".format(key, getattr(part, "name", part)))
        value_ops[key], update_ops[key] = value
    return value_ops, update_ops, keras_variables


def build_in_step(metric_fn: Callable[..., Any], tensors: Any) -> dict[str, tf.Tensor]:
    """Calls `metric_fn` on model_fn's own tensors, in the graph being traced: legacy's CPU path.

    With `use_tpu=False` on one device legacy called metric_fn inside model_fn's graph
    (`TPUEstimatorSpec.as_estimator_spec`), so metric_fn could use anything model_fn made:
    a lookup table, a tokenizer's resources, any tensor. Built here, in the traced step, it
    still can; `HostMetrics`' graph of its own cannot reach them (a model_fn table's tensors
    live in the step's FuncGraph, its handle is eager, and a v1 Session can take neither).
    On TPU or several replicas the caller passes every replica's rows (legacy's host
    metric_fn on real TPU shared the TPU computation's graph, and so model_fn's objects).

    Returns:
        name -> the metric's value after this call's update. The last step's is the
        evaluation's result, what legacy read once after its last update.

    Raises:
        As `HostMetrics`: TypeError for a result that is not None or a dict of
        `(value, update_op)` pairs or Metric objects, ValueError for a reserved name.
    """
    try:
        return values_after_update(spec_lib.call_host_fn(metric_fn, tensors, "eval_metrics"))
    except (TypeError, ValueError) as e:
        if uses_another_graph(e):
            raise  # The caller builds metric_fn elsewhere (`make_metric_update`).
        specs = tf.nest.map_structure(
            lambda t: tf.TensorSpec(getattr(t, "shape", None), getattr(t, "dtype", None))
            if tf.is_tensor(t) else t, tensors)
        raise metric_fn_error(e, metric_fn, specs, None) from e


def metric_fn_error(error: Exception, metric_fn: Any, specs: Any,
                    replicas: int | None) -> Exception:
    """`error` (a TypeError or ValueError metric_fn raised), restated: the argument, the
    tensors metric_fn was given, and the fix; metrics are never dropped silently.

    The same class, so callers' handlers still catch it. `replicas`: how many replicas'
    rows axis 0 concatenates (`specs` are per replica), None when `specs` are as given.
    """
    def described(spec: Any) -> str:
        if not isinstance(spec, tf.TensorSpec):
            return repr(spec)
        dims = shapes_lib.static_dims(spec.shape)
        if replicas and dims and dims[0] is not None:
            dims = [dims[0] * replicas] + dims[1:]
        return f"{spec.dtype.name}{dims if dims is not None else '[unknown rank]'}"

    rows = (f"axis 0 the rows of {replicas} replica(s) concatenated; "
            if replicas else "")
    message = (
        f"eval_metrics: metric_fn {getattr(metric_fn, '__name__', metric_fn)!r} "
        f"(eval_metrics[0]) raised {type(error).__name__} when called on eval_metrics[1] "
        f"= {tf.nest.map_structure(described, specs)} (dtype[shape] per tensor; {rows}"
        f"the error: {str(error).rstrip('.')}). Fix metric_fn so it takes these tensors "
        "(positionally for a list or tuple, by keyword for a dict) and returns a dict of "
        "name -> (value, update_op) or tf-keras Metric objects: without it no metric of "
        "this evaluation can be reported.")
    try:
        return type(error)(message)
    except Exception:  # pylint: disable=broad-except  # A class with another signature.
        return error


def values_after_update(metric_ops: Any, *, across_replicas: bool = False
                        ) -> dict[str, tf.Tensor]:
    """name -> value after the update, for metric ops built in a traced step.

    `metric_ops`: what metric_fn returned, or an EstimatorSpec's `eval_metric_ops`: None or
    a dict of `(value, update_op)` pairs or updated tf.keras Metrics, checked as legacy did.
    `across_replicas`: each replica updated with its own rows; the values are read once every
    replica's update ran, from the summed accumulators (`eval_metric_ops`).
    """
    value_ops, update_ops, _ = _split_metric_ops(metric_ops, None)
    if across_replicas and value_ops:
        return eval_metric_ops.values_across_replicas(value_ops, update_ops)
    return {name: _value_after_update(value_ops[name], update_ops[name])
            for name in sorted(value_ops)}


def _value_after_update(value: Any, update: Any) -> tf.Tensor:
    """The metric's value once `update` ran, in a traced function.

    A function orders stateful ops as they were created, and many v1 metrics read their
    variables for `value` before they create `update` (`true_positives`, and `precision`,
    `recall` built on it): their `value` would be the one before this step. Their update op
    returns the updated value instead ("whose value matches" `value`, as tf.compat.v1.metrics
    documents), so an update tensor (or assigned variable) of the value's dtype and shape is
    the value. Otherwise (an Operation, tf.keras Metrics, `mean_iou`'s update, an F1 made
    from `precision` and `recall` values with `tf.group` of their updates) `value` is computed
    again from reads after the update (`eval_metric_ops.read_after`), as legacy's last run did.
    """
    if tf.nest.is_nested(value):  # A nest of values (legacy allowed one): read each after.
        return tf.nest.map_structure(lambda v: eval_metric_ops.read_after(v, update, ""), value)
    value = tf.convert_to_tensor(value)
    if not isinstance(update, tf.Operation):
        # An assign's result (`true_positives`) is an unread variable: reading it now
        # reads after the assign.
        update = tf.convert_to_tensor(update)
        if update.dtype == value.dtype and update.shape.is_compatible_with(value.shape):
            return tf.identity(update)
    return eval_metric_ops.read_after(value, update, "")


def _assert_same_structure(expected: Any, given: Any) -> None:
    """Like tf.nest's check, but a dict never matches a list: they bind differently."""
    # check_types=True would also reject list-vs-tuple, which callers legitimately mix.
    if isinstance(expected, Mapping) != isinstance(given, Mapping):
        raise TypeError("one is a dict and the other is not")
    tf.nest.assert_same_structure(expected, given, check_types=False)


def _flatten_with_paths(nest: Any) -> list[tuple[tuple, Any]]:
    """Flattens like tf.nest (sorted dict keys), keeping each leaf's key path for messages."""
    if isinstance(nest, Mapping):
        return [(((key,) + path), leaf) for key in sorted(nest)
                for path, leaf in _flatten_with_paths(nest[key])]
    if isinstance(nest, (list, tuple)) and not hasattr(nest, "shape"):
        return [(((i,) + path), leaf) for i, item in enumerate(nest)
                for path, leaf in _flatten_with_paths(item)]
    return [((), nest)]


def _path_str(path: tuple) -> str:
    return "".join("[{!r}]".format(p) for p in path)


class MeanLoss:
    """The legacy `loss` entry of `evaluate()`: a running mean of step losses in float32.

    Legacy added `tf.compat.v1.metrics.mean(loss)` and ran its update once per evaluation
    session step. That metric keeps float32 `total` and `count` variables, adds each value
    cast to float32 and divides at the end (`div_no_nan`), so doing the same float32
    operations in the same order reproduces legacy's value bit for bit. On the TPU path a
    "step" was one loop of `iterations_per_loop` steps whose loss was the loop's mean; feed
    whichever loss legacy would have seen.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Restarts the mean, as legacy did at every evaluate."""
        self._total = np.float32(0.0)
        self._count = np.float32(0.0)

    def update(self, step_loss: Any) -> None:
        """Adds one step's loss (a scalar or a one-element array).

        Raises:
            ValueError: If `step_loss` does not hold exactly one value.
        """
        value = np.asarray(step_loss, dtype=np.float32)
        if value.size != 1:
            raise ValueError(
                    "`step_loss` must be a single value (the step's scalar loss), given "
                    "shape {}: {!r}. Reduce it with a mean first.".format(value.shape, step_loss))
        self._total = np.float32(self._total + value.reshape(()))
        self._count = np.float32(self._count + np.float32(1.0))

    def result(self) -> np.float32:
        """The mean so far; 0.0 before any update, like `div_no_nan`."""
        if self._count <= 0:
            return np.float32(0.0)
        return np.float32(self._total / self._count)


def finalize_eval_dict(metrics: Mapping[str, Any], loss: MeanLoss | float | np.floating,
                       global_step: int) -> dict[str, Any]:
    """Builds the dict legacy `evaluate()` returned.

    Legacy read the metric values and the loss mean as one sorted dict and appended the
    global step last, so keys come out as `sorted(metrics + ['loss'])` then `'global_step'`.

    Args:
        metrics: `HostMetrics.result()`, name -> numpy value.
        loss: A `MeanLoss` or its float result; stored as np.float32.
        global_step: The evaluated checkpoint's step; stored as np.int64.

    Returns:
        Every metric plus 'loss' (np.float32) and 'global_step' (np.int64).

    Raises:
        ValueError: If `metrics` already has a 'loss' or 'global_step' key (legacy wording).
    """
    _check_reserved_names(metrics)
    values = dict(metrics)
    values[LOSS_KEY] = np.float32(loss.result() if isinstance(loss, MeanLoss) else loss)
    result = {name: values[name] for name in sorted(values)}
    result[GLOBAL_STEP_KEY] = np.int64(global_step)
    return result
