"""The compiled evaluate/predict loop: up to `n` steps of the eval or predict step per call.

Synopsis::

    loop = InferenceLoop(strategy, eval_step, padded=True, steps_per_call=10)
    result = loop(iterator, 10)           # InferenceResult: gathered leaves, masks, losses
    for leaves, mask in result.per_step(): ...

One function per call, as the train loop (`train_loop.py`): a `tf.while_loop` around
`strategy.run`, the step count a tensor, called through its flat signature
(`plumbing.Dispatch`). With `steps_per_call=1` (`iterations_per_loop=1`, legacy's one step per
`session.run`) a call runs one step in a function without the loop and its accumulators,
which on a small model cost more than the step itself. It knows nothing of metrics, hooks,
checkpoints or model_fns: `session/inference.py` consumes its results (the prediction keys
to yield and legacy's row check are `select_prediction_keys`, `check_prediction_rows`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf

from tpu_estimator_compat._tf import random_streams
from tpu_estimator_compat._tf import strategies as _tf_strategies
from tpu_estimator_compat.cluster import workers as cluster_lib
from tpu_estimator_compat.inputs import call as call_lib
from tpu_estimator_compat.inputs import pad as pad_lib
from tpu_estimator_compat.loop.plumbing import Dispatch, FixedBatches, empty_batch
from tpu_estimator_compat.loop.plumbing import gather_replicas, stack_steps
from tpu_estimator_compat import shapes as shapes_lib


@dataclasses.dataclass(frozen=True)
class InferenceResult:
    """One compiled eval/predict call, host side.

    `gathered` leaves are concatenated over the steps run, in input order, with padding rows
    still present; `mask` marks the real rows and `rows` gives each step's row count, so the
    host can replay per-step updates (legacy updated metrics once per step). A leaf whose
    `per_example` flag is False is not batch-major (e.g. `tf.reshape(loss, [1])`): every
    step added the same number of rows to it, which `mask` does not describe.
    """

    steps_run: int
    losses: np.ndarray
    rows: np.ndarray
    mask: np.ndarray
    gathered: list[np.ndarray]
    last: list[np.ndarray]
    per_example: tuple[bool, ...] = ()
    # hook_tensors[j][k]: the j-th tensor hooks fetched, at the k-th step (replica 0's).
    hook_tensors: list[np.ndarray] = dataclasses.field(default_factory=list)
    # leaf_rows[k][j]: the rows the j-th gathered leaf got at the k-th step (its axis 0).
    leaf_rows: np.ndarray | None = None

    def per_step(self) -> list[tuple[list[np.ndarray], np.ndarray]]:
        """[(leaves of step i, mask of step i)]: each leaf's own rows of the step.

        A leaf's rows of a step are its axis 0 as the step gave it, the per-example rows or
        any other count (a non-batch-major tensor's), so steps of any sizes come apart.
        """
        if self.steps_run == 1 and len(self.rows) == 1:  # A one-step loop: all of it.
            return [(list(self.gathered), self.mask)]
        bounds = _bounds(self.rows)
        leaf_bounds = ([_bounds(self.leaf_rows[:, j]) for j in range(len(self.gathered))]
                       if self.leaf_rows is not None else [bounds] * len(self.gathered))
        return [([leaf[lb[i]:lb[i + 1]] for leaf, lb in zip(self.gathered, leaf_bounds)],
                 self.mask[a:b])
                for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))]


def _bounds(rows: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)


def _element_parts(element: Any, padded: bool) -> tuple[Any, Any, Any]:
    if padded:
        return element["features"], element.get("labels"), element[pad_lib.MASK_KEY]
    features, labels = call_lib.split_element(element)
    return features, labels, None


def _rows_of(strategy: tf.distribute.Strategy, mask: Any) -> tf.Tensor:
    """Real rows of a step over all replicas (of every worker: they must stop together)."""
    return cluster_lib.count_rows(strategy, mask)


GATHERED_KEYS = ("metrics", "predictions", "host_call")
_LEAF_NAMES = {"metrics": "eval_metrics[1]", "predictions": "predictions",
               "host_call": "host_call[1]"}


def _per_example_leaves(structure: dict[str, Any], padded: bool,
                        batch_major_predictions: bool = True) -> tuple[bool, ...]:
    """Whether each gathered leaf has the per-replica batch (the mask's length) as axis 0.

    A leaf with another static axis 0 (one value per step, `tf.reshape(d_loss, [1])`, or
    BERT's per-token `[batch * max_predictions]` losses) is passed to the host as it is, as
    legacy passed it to metric_fn; the host refuses it for a step that actually had padding
    rows, which it can only remove by axis 0. Legacy TPU yielded predictions per row of the
    batch, so there (`batch_major_predictions`) they must be batch-major; legacy's
    Estimator path yielded the rows each step's predictions had, whatever the features'
    batch, which one replica does too. Several replicas' rows are concatenated and padded
    by the features' batch, which only batch-major predictions survive.

    Raises:
      ValueError: such a leaf in `predictions`, with `batch_major_predictions` or `padded`.
    """
    # Plain ints: after `disable_v2_tensorshape()` (TF1 mode, `disable_v2_behavior()`) axes
    # are Dimensions, and two unknown Dimensions compare as unknown, not equal.
    batch = shapes_lib.static_dim(structure["mask"].shape, 0)
    flags = []
    for key in GATHERED_KEYS:
        if key not in structure:
            continue
        specs = tf.nest.flatten(structure[key])
        paths = tf.nest.flatten(_leaf_paths(structure[key]))
        for path, spec in zip(paths, specs):
            rows = shapes_lib.static_dim(spec.shape, 0) if spec.shape.rank else None
            flags.append(rows is None or rows == batch)
            if flags[-1] or key != "predictions" or not (batch_major_predictions or padded):
                continue
            where = _LEAF_NAMES[key] + "".join(f"[{p!r}]" for p in path.keys if p != "")
            if batch_major_predictions:
                raise ValueError(
                    f"The estimator_spec.predictions must have batch dimension for every "
                    f"tensor; `{where}` has shape {spec.shape}, whose axis 0 is not the "
                    f"per-replica batch ({batch}). Return one row per example.")
            raise ValueError(
                f"`{where}` has shape {spec.shape}, whose axis 0 is not the per-replica "
                f"batch ({batch}), and predict runs on several replicas, whose rows are "
                "concatenated and padded by the features' batch. Legacy's Estimator "
                "predicted on one device: predict on one replica, or return one row per "
                "example.")
    return tuple(flags)


@dataclasses.dataclass(frozen=True)
class _Path:
    """A leaf's key path (not a sequence, so that tf.nest keeps it as one leaf)."""

    keys: tuple


def leaf_names(nest: Any, root: str) -> list[str]:
    """`root[...]` names of `nest`'s leaves in `tf.nest.flatten` order, for error messages."""
    return [root + "".join(f"[{p!r}]" for p in path.keys if p != "")
            for path in tf.nest.flatten(_leaf_paths(nest))]


def _leaf_paths(nest: Any, prefix: tuple = ()) -> Any:
    """`nest` with every leaf replaced by its key path (for error messages)."""
    if isinstance(nest, dict):
        return {k: _leaf_paths(v, prefix + (k,)) for k, v in nest.items()}
    if isinstance(nest, (list, tuple)):
        items = [_leaf_paths(v, prefix + (i,)) for i, v in enumerate(nest)]
        return type(nest)(*items) if hasattr(nest, "_fields") else type(nest)(items)
    return _Path(prefix)


class InferenceLoop:
    """An eval or predict step compiled into one function running up to `n` steps per call.

    The step is called as `step(features, labels)` (with `step_takes_mask`, as
    `step(features, labels, mask)`) and returns `{'loss'?: scalar, 'metrics'?: nest,
    'predictions'?: nest, 'metric_values'?: nest, 'hook_tensors'?: list}`. `metrics` and
    `predictions` are gathered from every replica (concatenated on axis 0 in replica order,
    which is input order); `metric_values` and `hook_tensors` are kept per step from the
    first replica; `loss` is the global-batch loss (row-weighted over replicas when batches
    are padded, or weighted by the step's `loss_weight` output). A step may instead return `metric_inputs` (one replica), a list of tensors
    for `metric_update(list) -> {name: value after the update}`, which the loop calls on
    each step's list once the steps ran, in step order: its stateful updates then do not
    end each loop iteration, and consecutive steps overlap
    (`replica_step.make_metric_update`).
    `trace()` traces the step once in a probe, to create its variables and learn its output
    structure before the loop's accumulators are built. The step (`strategy.run` of the
    replica step, and what the loop reads from it) is one `tf.function` that the probe and
    the loop both call with the same input element: its trace is cached, so model_fn's
    Python runs once per trace, as legacy built its evaluation graph once per call (a
    model_fn that counts, logs or prints does so once; once per replica on several).
    TensorFlow inlines the call into the loop body when it instantiates the loop. metric_fn
    built after the steps (`metric_update`) is traced once the same way.

    With `steps_per_call=1` the one-step function stands in for the loop: MLP evaluation at
    one step per call took 0.55 ms a step through the loop, whose `while`, TensorArrays and
    end-of-call `cond`s ran every call (legacy's whole step, one `session.run`: 0.26 ms).
    Its results are the loop's for `n=1`, value for value.
    """

    def __init__(self, strategy: tf.distribute.Strategy,
                 step: Callable[[Any, Any], dict[str, Any]], *, padded: bool,
                 input_spec: Any = None, steps_per_call: int | None = None,
                 endless: bool = False, step_takes_mask: bool = False,
                 metric_update: Callable[[list[tf.Tensor]], dict[str, Any]] | None = None,
                 batch_major_predictions: bool = True) -> None:
        self._strategy = strategy
        self._metric_update = (None if metric_update is None else
                               tf.autograph.experimental.do_not_convert(metric_update))
        self._padded = padded
        self._batch_major_predictions = batch_major_predictions
        self._endless = endless
        self._replica_fn = tf.autograph.experimental.do_not_convert(
            _with_row_count(step, step_takes_mask))
        # Taken through `get_next_as_optional`, fixed-size batches keep their static shapes.
        self._fixed = None if endless else FixedBatches.of(strategy, input_spec)
        self._loop_replica_fn = self._replica_fn
        if self._fixed is not None:
            self._loop_replica_fn = self._fixed.with_static_shapes(
                self._replica_fn, _element_parts(self._fixed.spec, padded))
        self._structure: dict[str, Any] = {}
        # No AutoGraph: the loop is an explicit while_loop (see make_multi_step_train_fn).
        self._probe = tf.function(self._probe_fn, autograph=False)
        self._traced_step = tf.function(self._step, autograph=False)
        self._traced_update = tf.function(self._updated, autograph=False)
        self._replica_structure: dict[str, Any] = {}  # Replica 0's outputs' specs.
        self._run_steps = Dispatch(tf.function(self._run_steps_fn, autograph=False))
        self._run_one = Dispatch(tf.function(self._run_one_fn, autograph=False), counted=False)
        self._one_step = steps_per_call == 1
        self._per_example: tuple[bool, ...] = ()

    def trace(self, iterator: Any) -> dict[str, Any]:
        """Traces the step and the loop (creating variables); returns the output TensorSpecs.

        Both traces happen here, so a caller can wrap every model_fn call of this loop
        (e.g. to capture `init_from_checkpoint`).
        """
        if not self._structure:
            # The loops reuse this trace of the step: its seeded random ops are built as
            # twins here, as inside a loop's own trace (`plumbing.Dispatch`).
            with random_streams.random_op_twins():
                self._probe.get_concrete_function(iterator)
            structure = self._replica_structure
            self._per_example = _per_example_leaves(structure, self._padded,
                                                    self._batch_major_predictions)
            self._structure.update(structure)
        (self._run_one if self._one_step else self._run_steps).concrete(iterator)
        return self._structure

    def per_example(self) -> tuple[bool, ...]:
        """Per gathered leaf (as `leaf_slices`): whether its axis 0 is the batch."""
        return self._per_example

    def leaf_slices(self) -> dict[str, slice]:
        """Where each gathered output's flattened leaves sit in `InferenceResult.gathered`."""
        slices, start = {}, 0
        for key in GATHERED_KEYS:
            if key in self._structure:
                count = len(tf.nest.flatten(self._structure[key]))
                slices[key] = slice(start, start + count)
                start += count
        return slices

    def ready(self, iterator: Any, n: int) -> bool:
        """Whether a call for `iterator` and `n` steps runs without tracing anything."""
        return bool(self._structure) and self._dispatch(n).traced_for(iterator)

    def _dispatch(self, n: int) -> Dispatch:
        # A 1-step chunk of a longer-looping call keeps the traced loop (no second trace).
        return self._run_one if n == 1 and self._one_step else self._run_steps

    def __call__(self, iterator: Any, n: int) -> InferenceResult:
        self.trace(iterator)
        steps, losses, rows, mask, gathered, last, hooked, leaf_rows = (
            self._dispatch(n)(iterator, n))
        return InferenceResult(int(steps), losses.numpy(), rows.numpy(), mask.numpy(),
                               [g.numpy() for g in gathered], [t.numpy() for t in last],
                               self._per_example, [t.numpy() for t in hooked],
                               leaf_rows.numpy())

    def _probe_fn(self, iterator: Any) -> None:
        """Traces the step on an element taken as the loop takes it (so that the loop's
        call finds this trace), and metric_update on its `metric_inputs`; the step's trace
        notes replica 0's output specs (`_replica_structure`). Never run."""
        element = (iterator.get_next() if self._endless
                   else iterator.get_next_as_optional().get_value())
        out = self._call_step(*_element_parts(element, self._padded))
        if out["inputs"]:
            values = self._call_update(out["inputs"])
            self._replica_structure["metric_values"] = tf.nest.map_structure(
                lambda t: tf.TensorSpec(t.shape, t.dtype), values)

    def _call_step(self, features: Any, labels: Any, mask: Any) -> dict[str, Any]:
        """`_step`'s outputs, through its one trace, from the loop's control flow."""
        return _tf_strategies.call_in_control_flow(self._traced_step, features, labels, mask)

    def _call_update(self, inputs: list[tf.Tensor]) -> Any:
        """`_updated`'s outputs, through its one trace, from the loop's control flow."""
        return _tf_strategies.call_in_control_flow(self._traced_update, list(inputs))

    def _updated(self, inputs: list[tf.Tensor]) -> Any:
        """`metric_update` on one step's `metric_inputs`, on the (one) replica."""
        if self._metric_update is None:
            raise ValueError("The step returned `metric_inputs` but the InferenceLoop was "
                             "built without `metric_update`.")
        return self._strategy.experimental_local_results(
            self._strategy.run(self._metric_update, args=(list(inputs),)))[0]

    def _specs(self) -> tuple[list[tf.TensorSpec], list[tf.TensorSpec], list[tf.TensorSpec]]:
        """(gathered, replica 0's per-step values, hooks' tensors): their probed specs."""
        structure = self._structure
        gathered = [s for k in GATHERED_KEYS if k in structure
                    for s in tf.nest.flatten(structure[k])]
        return (gathered, tf.nest.flatten(structure.get("metric_values", {})),
                list(structure.get("hook_tensors", [])))

    def _step(self, features: Any, labels: Any, mask: Any) -> dict[str, Any]:
        """One step, as the host sees it: every replica's leaves gathered, replica 0's
        per-step values, the step's mask and row count, and its global loss.

        Traced once, as `_traced_step`; the trace notes replica 0's output specs."""
        strategy = self._strategy
        out = strategy.run(self._loop_replica_fn, args=(features, labels, mask))
        first = strategy.experimental_local_results(out)[0]
        self._replica_structure.update(tf.nest.map_structure(
            lambda t: tf.TensorSpec(t.shape, t.dtype), first))
        step_mask = gather_replicas(strategy, out["mask"])
        gathered = [gather_replicas(strategy, leaf)
                    for k in GATHERED_KEYS if k in out
                    for leaf in tf.nest.flatten(out[k], expand_composites=False)]
        result = {
            "gathered": gathered, "leaf_rows": _leaf_rows(gathered),
            "last": tf.nest.flatten(first.get("metric_values", {})),
            "mask": step_mask, "rows": tf.shape(step_mask)[0],
            "hooks": list(first.get("hook_tensors", [])),
            "inputs": list(first.get("metric_inputs", [])),
        }
        if "loss" in out:
            total = cluster_lib.reduce_to_host(strategy, tf.distribute.ReduceOp.SUM,
                                               out["loss_sum"])
            count = cluster_lib.reduce_to_host(strategy, tf.distribute.ReduceOp.SUM,
                                               out["loss_weight"])
            result["loss"] = total / tf.maximum(count, 1.0)
        return result

    def _next_step(self, iterator: Any, run: Callable[..., tuple],
                   stop: Callable[[], tuple]) -> tuple:
        """`run(features, labels, mask)` on the next element if there is one whose step runs
        (every replica fed; not all padding), else `stop()`.

        Input known to be endless (`repeat()`ed, or padded with endless all-padding batches)
        is read with plain `get_next()`: no end-of-input `cond` around the step (at one step
        per call that check was a fifth of a small model's call).
        """

        def step_on(element: Any) -> tuple:
            features, labels, mask = _element_parts(element, self._padded)
            step = lambda: run(features, labels, mask)  # noqa: E731
            if self._fixed is not None:
                step = self._fixed.guard(element, step, stop)
            if self._padded:  # An all-padding batch: every real row was seen.
                return tf.cond(_rows_of(self._strategy, mask) > 0, step, stop)
            return step()

        if self._endless:
            return step_on(iterator.get_next())
        optional = iterator.get_next_as_optional()
        return tf.cond(optional.has_value(), lambda: step_on(optional.get_value()), stop)

    def _run_one_fn(self, iterator: Any) -> Any:
        """The loop's outputs for `n=1`, without the loop."""
        gather_specs, last_specs, hook_specs = self._specs()
        with_loss = "loss" in self._structure

        def run(features: Any, labels: Any, mask: Any) -> tuple:
            out = self._call_step(features, labels, mask)
            loss = tf.reshape(out["loss"], [1]) if with_loss else tf.zeros([0], tf.float32)
            last = (tf.nest.flatten(self._call_update(out["inputs"])) if out["inputs"]
                    else out["last"])
            return (tf.constant(1), loss, tf.reshape(out["rows"], [1]), out["mask"],
                    out["gathered"], [tf.expand_dims(t, 0) for t in last],
                    [tf.expand_dims(t, 0) for t in out["hooks"]],
                    tf.expand_dims(out["leaf_rows"], 0))

        def stop() -> tuple:
            return (tf.constant(0), tf.zeros([0], tf.float32), tf.zeros([0], tf.int32),
                    tf.zeros([0], tf.bool),
                    [empty_batch(s.shape, s.dtype) for s in gather_specs],
                    [empty_batch(tf.TensorShape([None]).concatenate(s.shape), s.dtype)
                     for s in last_specs],
                    [empty_batch(tf.TensorShape(None), s.dtype) for s in hook_specs],
                    tf.zeros([0, len(gather_specs)], tf.int32))

        return self._next_step(iterator, run, stop)

    def _run_steps_fn(self, iterator: Any, n: tf.Tensor) -> Any:
        gather_specs, last_specs, hook_specs = self._specs()
        with_loss = "loss" in self._structure
        arrays = {
            "gathered": [tf.TensorArray(s.dtype, size=0, dynamic_size=True, infer_shape=False)
                         for s in gather_specs],
            "last": [tf.TensorArray(s.dtype, size=0, dynamic_size=True) for s in last_specs],
            "masks": tf.TensorArray(tf.bool, size=0, dynamic_size=True, infer_shape=False),
            "losses": tf.TensorArray(tf.float32, size=0, dynamic_size=True),
            "rows": tf.TensorArray(tf.int32, size=0, dynamic_size=True),
            "leaf_rows": tf.TensorArray(tf.int32, size=0, dynamic_size=True,
                                        element_shape=[len(gather_specs)]),
            "hooks": [tf.TensorArray(s.dtype, size=0, dynamic_size=True, infer_shape=False)
                      for s in hook_specs],
            "inputs": [tf.TensorArray(s.dtype, size=0, dynamic_size=True, infer_shape=False)
                       for s in self._input_specs()],
        }
        input_shapes: list[tf.TensorShape] = []  # As the step traced them.

        def body(more: tf.Tensor, i: tf.Tensor, arrays: dict[str, Any]) -> tuple:
            def run(features: Any, labels: Any, mask: Any) -> tuple:
                out = self._call_step(features, labels, mask)
                written = {
                    "gathered": [ta.write(i, leaf)
                                 for ta, leaf in zip(arrays["gathered"], out["gathered"])],
                    # With `metric_inputs` the values come after the loop.
                    "last": (arrays["last"] if out["inputs"] else
                             [ta.write(i, leaf) for ta, leaf in zip(arrays["last"], out["last"])]),
                    "masks": arrays["masks"].write(i, out["mask"]),
                    "rows": arrays["rows"].write(i, out["rows"]),
                    "leaf_rows": arrays["leaf_rows"].write(i, out["leaf_rows"]),
                    "losses": (arrays["losses"].write(i, out["loss"]) if with_loss
                               else arrays["losses"]),
                    "hooks": [ta.write(i, t) for ta, t in zip(arrays["hooks"], out["hooks"])],
                    "inputs": [ta.write(i, t)
                               for ta, t in zip(arrays["inputs"], out["inputs"])],
                }
                input_shapes[:] = [t.shape for t in out["inputs"]]
                return tf.constant(True), i + 1, written

            return self._next_step(iterator, run, lambda: (tf.constant(False), i, arrays))

        _, steps, arrays = tf.while_loop(
            lambda more, i, _: tf.logical_and(more, i < n), body,
            (tf.constant(True), tf.constant(0, tf.int32), arrays))
        if arrays["inputs"]:
            arrays["last"] = self._update_per_step(arrays["inputs"], input_shapes, steps,
                                                   arrays["last"])
        losses_out = (stack_steps(arrays["losses"], steps, tf.TensorShape([])) if with_loss
                      else tf.zeros([0], tf.float32))
        return (steps, losses_out,
                stack_steps(arrays["rows"], steps, tf.TensorShape([])),
                _concat(arrays["masks"], steps, tf.TensorShape([None])),
                [_concat(g, steps, s.shape) for g, s in zip(arrays["gathered"], gather_specs)],
                [stack_steps(t, steps, s.shape) for t, s in zip(arrays["last"], last_specs)],
                [stack_steps(t, steps, tf.TensorShape(None)) for t in arrays["hooks"]],
                stack_steps(arrays["leaf_rows"], steps, tf.TensorShape([len(gather_specs)])))

    def _input_specs(self) -> list[tf.TensorSpec]:
        return tf.nest.flatten(self._structure.get("metric_inputs", []))

    def _update_per_step(self, inputs: list[tf.TensorArray], shapes: list[tf.TensorShape],
                         steps: tf.Tensor, last: list[tf.TensorArray]) -> list[tf.TensorArray]:
        """`metric_update` on each step's carried `metric_inputs`, in step order, in a loop
        of its own after the steps: `last` written with each step's values."""

        def body(j: tf.Tensor, last: list[tf.TensorArray]) -> tuple:
            leaves = []
            for ta, shape in zip(inputs, shapes):
                leaf = ta.read(j)
                leaf.set_shape(shape)
                leaves.append(leaf)
            values = tf.nest.flatten(self._call_update(leaves))
            return j + 1, [ta.write(j, v) for ta, v in zip(last, values)]

        _, last = tf.while_loop(lambda j, _: j < steps, body, (tf.constant(0, tf.int32), last))
        return last


def _leaf_rows(leaves: list[tf.Tensor]) -> tf.Tensor:
    """Each gathered leaf's axis 0 this step (1 for a scalar), an int32 vector."""
    if not leaves:
        return tf.zeros([0], tf.int32)
    return tf.stack([tf.shape(leaf)[0] if leaf.shape.rank != 0 else tf.constant(1)
                     for leaf in leaves])


def _concat(ta: tf.TensorArray, steps: tf.Tensor, shape: tf.TensorShape) -> tf.Tensor:
    """`ta.concat()`, or an empty batch when no step ran (TensorArrays cannot concat none)."""
    return tf.cond(steps > 0, ta.concat, lambda: empty_batch(shape, ta.dtype))


def _with_row_count(step: Callable[..., dict[str, Any]],
                    takes_mask: bool = False) -> Callable[..., Any]:
    """Adds the replica's real-row count (and row-weighted loss) to the step's outputs.

    With `takes_mask` the step is called as `step(features, labels, mask)`, `mask` being
    this replica's real rows (None when batches are not padded).
    """

    def replica_fn(features: Any, labels: Any, mask: Any) -> dict[str, Any]:
        out = dict(step(features, labels, mask) if takes_mask else step(features, labels))
        if mask is None:
            # The first tensor's batch; one row when the dataset carries none (input_fn's
            # Python values, held out of it: `inputs.call.HeldValues`).
            leaf = next((t for t in tf.nest.flatten((features, labels)) if t is not None),
                        None)
            rows = (tf.shape(leaf)[0] if leaf is not None and leaf.shape.rank != 0
                    else tf.constant(1))
            mask = tf.ones([rows], tf.bool)
        out["mask"] = mask
        out["rows"] = tf.reduce_sum(tf.cast(mask, tf.float32))
        if "loss" in out:
            # A step's `loss_weight` (1: a plain Estimator's replica batch, whatever its
            # rows, as legacy's distributed Estimator averaged them) or its real rows.
            out["loss_weight"] = out.get("loss_weight", out["rows"])
            out["loss_sum"] = out["loss"] * out["loss_weight"]
        return out

    return replica_fn


def select_prediction_keys(keys: list[str], predict_keys: Sequence[str] | None,
                           is_dict: bool = True) -> list[str]:
    """The prediction keys to yield, as legacy's Estimator chose them.

    No (or empty) `predict_keys`: every key. Otherwise the keys of the predictions dict it
    names, in the dict's order; names the dict lacks are left out, as legacy left them.
    """
    if not predict_keys:
        return keys
    if not is_dict:
        raise ValueError(
            "predict_keys argument is not valid in case of non-dict predictions. model_fn "
            f"returned one tensor as predictions; predict_keys={predict_keys!r} was given. "
            "Pass predict_keys=None, or return a dict of predictions.")
    if isinstance(predict_keys, str):
        predict_keys = [predict_keys]
    chosen = [k for k in keys if k in predict_keys]
    if not chosen:
        raise ValueError(
            f"Expected to run at least one output from {keys}, provided {list(predict_keys)}. "
            "Pass `predict_keys` from the predictions dict's keys.")
    return chosen


def check_prediction_rows(batch: dict[str, np.ndarray]) -> None:
    """Legacy's check before yielding a dict of predictions row by row: one row count.

    Batch-major predictions always agree; others (legacy's Estimator path allowed any axis
    0) must agree among themselves, or rows would be dropped silently.
    """
    lengths = {key: len(value) for key, value in batch.items()}
    for key, length in lengths.items():
        if length != next(iter(lengths.values())):
            raise ValueError(
                f"Batch length of predictions should be same. {key} has different batch "
                f"length than others (rows per key: {lengths}). Return predictions with the "
                "same axis 0, or pass yield_single_examples=False to get whole batches.")
