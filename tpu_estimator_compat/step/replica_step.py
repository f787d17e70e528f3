"""Turns a legacy `model_fn` into one replica step function per mode.

A replica step is what one TPU core ran per iteration: call model_fn on one replica's batch,
inside `variables.replica_scope`, and return the tensors the loop needs. One function per
mode (`train_step`, and the eval/predict steps next to it), not one closure switching on mode.

This module owns calling model_fn the legacy way (argument matching, `params` copies with
`batch_size`/`use_tpu`/`context`, legacy errors for a bad signature or a bad return value),
and nothing about loops, input pipelines, checkpoints or host-side work.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import inspect
import re
import threading
import types
import weakref
from typing import Any, Callable, Iterable, Iterator

import tensorflow as tf

from tpu_estimator_compat._tf import patches as _tf_patches
from tpu_estimator_compat.cluster import workers as cluster
from tpu_estimator_compat.contrib import hub
from tpu_estimator_compat.step import cross_shard
from tpu_estimator_compat.step import global_step_reads
from tpu_estimator_compat.step import metric_reads
from tpu_estimator_compat.step import optimizer_apply
from tpu_estimator_compat.v1_state import graph_names
from tpu_estimator_compat.v1_state import keras_env
from tpu_estimator_compat import log as logging
from tpu_estimator_compat.step import metrics as metrics_lib
from tpu_estimator_compat import shapes as shapes_lib
from tpu_estimator_compat import spec as spec_lib
from tpu_estimator_compat.v1_state import variables as variables_lib
from tpu_estimator_compat.checkpoint import warm_start as warm_start_lib
from tpu_estimator_compat.inputs.context import BATCH_SIZE_KEY, CONTEXT_KEY, USE_TPU_KEY
from tpu_estimator_compat.inputs.context import copy_params, set_param

ModeKeys = spec_lib.ModeKeys


def model_fn_args(model_fn: Callable[..., Any]) -> set[str]:
    fn = model_fn.func if hasattr(model_fn, "func") else model_fn
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


def check_model_fn_signature(model_fn: Callable[..., Any]) -> None:
    """Raises the legacy error for a model_fn that cannot receive `params`."""
    args = model_fn_args(model_fn)
    if "features" not in args:
        raise ValueError(
            f"model_fn ({model_fn}) must include features argument. Define it as "
            "`def model_fn(features, labels, mode, params):`.")
    if "params" not in args:
        raise ValueError(
            f"model_fn ({model_fn}) does not include params argument, required by "
            "TPUEstimator to pass batch size as params['batch_size']. Define it as "
            "`def model_fn(features, labels, mode, params):`.")


@dataclasses.dataclass(frozen=True)
class ModelFnCaller:
    """Everything needed to call the user's model_fn the way legacy TPUEstimator did."""

    model_fn: Callable[..., Any]
    params: dict[str, Any]
    config: Any
    use_tpu: bool
    context_factory: Callable[[str], Any] | None = None
    # An `embedding.engine.EmbeddingEngine` when the estimator has an `embedding_config_spec`
    # and use_tpu=True: it swaps the sparse features for their activations before model_fn
    # and adds the table update to its train_op after.
    embedding: Any = None
    # `summaries.ModelFnWriters`: the summary writers model_fn creates (SimCLR's idiom).
    summary_writers: Any = None
    # Legacy plain `Estimator` (`BatchPlan.plain`): `params` only when model_fn takes it,
    # without the keys TPUEstimator added, and an `EstimatorSpec` required back.
    plain: bool = False
    # model_fn's owner as it was before the first replica's call, per traced graph.
    _owners: "ReplicaOwners" = dataclasses.field(default_factory=lambda: ReplicaOwners(),
                                                 compare=False, repr=False)

    def __call__(self, features: Any, labels: Any, mode: str, batch_size: int | None,
                 export_mode: bool = False) -> Any:
        args = model_fn_args(self.model_fn)
        kwargs: dict[str, Any] = {}
        if "labels" in args:
            kwargs["labels"] = labels
        elif labels is not None:
            raise ValueError(
                "model_fn does not take labels, but input_fn returns labels. Either add a "
                "`labels` argument to model_fn or return only features from input_fn.")
        if "mode" in args:
            kwargs["mode"] = mode
        if "config" in args:
            kwargs["config"] = copy.deepcopy(self.config)
        if not self.plain:
            kwargs["params"] = self._tpu_params(mode, batch_size, export_mode)
        elif "params" in args:
            kwargs["params"] = copy_params(self.params)

        model_fn = self._owners.model_fn_for_this_replica(self.model_fn)

        def call(features: Any) -> Any:
            result = model_fn(features=features, **kwargs)
            spec_lib.validate_spec_type(
                result, mode, require_tpu_spec=self.use_tpu and not export_mode,
                plain_estimator=self.plain)
            return result

        # Keras and TF1 code in model_fn see the TF1 graph legacy built it in; with use_tpu,
        # the TPU shard count it ran under (cross-replica batch norm reads it).
        shards = (cross_shard.shard_count(tf.distribute.get_strategy().num_replicas_in_sync)
                  if self.use_tpu and not export_mode else contextlib.nullcontext())
        writers = (self.summary_writers.applied()
                   if self.summary_writers is not None and not export_mode
                   else contextlib.nullcontext())
        # A Saver model_fn builds (`Scaffold(saver=Saver(ema.variables_to_restore()))`, or
        # `Saver(max_to_keep=...)`) is recorded, not built: its restore ops would run at
        # every step of the traced function. Its var_list and retention are honoured. The
        # export graph is a TF1 graph: there a real Saver restores and saves the export.
        # Outside TRAIN a train_op model_fn builds anyway must not run (legacy never ran it).
        no_train = (optimizer_apply.not_training()
                    if mode != ModeKeys.TRAIN else contextlib.nullcontext())
        recording = (_tf_patches.applied("warm_start.Saver") if not export_mode
                     else contextlib.nullcontext())
        with keras_env.tf1_graph_keras(), shards, writers, no_train, recording:
            if (self.embedding is not None and self.use_tpu and not export_mode
                    and self.embedding.applies_to(mode)):
                step = self.embedding.look_up(features, mode)
                with step.reading_activations():
                    spec = call(step.features)
                return self.embedding.after_model_fn(step, spec)
            return call(features)

    def _tpu_params(self, mode: str, batch_size: int | None, export_mode: bool) -> Any:
        """A copy of `params` with the keys legacy TPUEstimator set in it."""
        params = copy_params(self.params)
        if batch_size is not None:
            set_param(params, BATCH_SIZE_KEY, batch_size)
        # Legacy export built a CPU graph: no batch_size, and use_tpu False.
        set_param(params, USE_TPU_KEY, self.use_tpu and not export_mode)
        if self.use_tpu and not export_mode and self.context_factory is not None:
            set_param(params, CONTEXT_KEY, self.context_factory(mode))
        return params


class ReplicaOwners:
    """Gives each replica after the first its own copy of a method model_fn's object.

    Legacy TPU called model_fn once for all cores. MirroredStrategy calls it once per
    replica, in threads that take turns at every all-reduce, so state model_fn keeps on its
    object across an optimizer step (`self.loss = ...` before `minimize`, read after;
    google/compare_gan's `self._tpu_summary`) is overwritten by the next replica: replica 0
    silently returned replica 1's loss, or its host_call got every replica's entries. Replica
    0 calls the object itself (what legacy's one call changed, it changes); every other
    replica a shallow copy of the object as it was before replica 0's call in the same
    traced graph. Attributes model_fn rebinds are then each replica's own; objects they
    share (lists made in `__init__`, layers) stay shared, as they were.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._before: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def model_fn_for_this_replica(self, model_fn: Callable[..., Any]) -> Callable[..., Any]:
        owner, rebind = _owner_of(model_fn)
        if (owner is None or not tf.distribute.has_strategy()
                or tf.distribute.in_cross_replica_context()
                or tf.distribute.get_replica_context().num_replicas_in_sync == 1):
            return model_fn
        graph = tf.compat.v1.get_default_graph()
        first = _is_first_replica()
        with self._lock:
            if first:
                try:
                    self._before[graph] = copy.copy(owner)
                except Exception as e:  # pylint: disable=broad-except
                    logging.warning("model_fn's object %s cannot be copied (%s): every "
                                    "replica's model_fn call shares it", type(owner).__name__, e)
                    self._before[graph] = None
                return model_fn
            before = self._before.get(graph)
        if before is None:
            return model_fn
        return rebind(copy.copy(before))


def _owner_of(model_fn: Any) -> tuple[Any, Callable[[Any], Any] | None]:
    """The object a model_fn keeps state on, and how to make the model_fn of a copy of it.

    A bound method's object, a callable object (`model_fn=Model()` with `__call__`), or
    either inside `functools.partial`; (None, None) for plain functions, classes, modules
    and `tf.Module`s (Keras layers: copying them would fork their tracking).
    """
    if isinstance(model_fn, functools.partial):
        owner, rebind = _owner_of(model_fn.func)
        if owner is None:
            return None, None
        args, keywords = model_fn.args, model_fn.keywords
        return owner, lambda copied: functools.partial(rebind(copied), *args, **keywords)
    if inspect.ismethod(model_fn):
        owner = model_fn.__self__
        if isinstance(owner, (type, types.ModuleType, tf.Module)):
            return None, None
        function = model_fn.__func__
        return owner, lambda copied: types.MethodType(function, copied)
    if (callable(model_fn) and not isinstance(model_fn, (type, types.ModuleType, tf.Module))
            and not inspect.isroutine(model_fn)):
        return model_fn, lambda copied: copied
    return None, None


@contextlib.contextmanager
def _replica_scope(registry: variables_lib.VariableRegistry, global_step: tf.Variable,
                   training: bool = True) -> Iterator[None]:
    """`variables.replica_scope`, in which a TF1 `hub.Module` model_fn builds uses the
    replica's variables (`contrib/hub.py`); outside TRAIN `metric_reads.outside_training`."""
    frozen = (metric_reads.outside_training(global_step) if not training
              else contextlib.nullcontext())
    with variables_lib.replica_scope(registry, global_step), hub.applied(), frozen:
        yield


def _as_float_loss(loss: Any) -> tf.Tensor:
    loss = tf.convert_to_tensor(loss)
    loss = tf.reshape(loss, [])
    return tf.cast(loss, tf.float32)


def make_train_step(caller: ModelFnCaller, registry: variables_lib.VariableRegistry,
                    global_step: tf.Variable, batch_size: int | None, *,
                    record: "TraceRecord",
                    hook_tensor_names: tuple[str, ...] = (),
                    write_summaries: bool = False) -> Callable[[Any, Any], dict[str, Any]]:
    """Returns `step(features, labels) -> {loss, step[, host_call][, hook_tensors][,
    summaries]}` for TRAIN.

    The returned tensors run after the spec's `train_op`, so reading them means the update
    ran. The trace records `host_call` and `scaffold_fn` in `record`; a spec's host_call
    tensors are returned too, for the host to gather (a loop built before the trace told it
    of them leaves them unused: `loop.train_loop.TracedTrainStep`). Within model_fn every
    read of the global step sees the step's starting value (`global_step_reads`), so
    host_call tensors carry the step legacy logged (0 for the first step). `step` is that
    starting value: the host places each step's summaries by it, since a model_fn need not
    advance the global step by one per step (gradient accumulation).

    `hook_tensor_names` are names of model_fn tensors that SessionRunHooks fetch (legacy's
    CPU path let `before_run` fetch any graph tensor); each replica returns its own copy of
    each, found by name under the replica's root scope, and the trace records the graph
    model_fn was built in (`record.model_graph`) so the host can resolve hooks' fetches.

    `write_summaries` (legacy's CPU path, `use_tpu=False`): model_fn's v1 summary ops
    (`tf.compat.v1.summary.scalar`, ...: the graph's SUMMARIES collection) are kept, as
    legacy's Estimator wrote `merge_all()` with its loss summary every
    `save_summary_steps`; the trace records that there are some (`record.model_summaries`)
    and each step returns them merged (`summaries`, a serialized `Summary`, empty when there
    are none). Without it they are dropped with a warning, as legacy did on a TPU.
    """

    def train_step(features: Any, labels: Any) -> dict[str, Any]:
        with _replica_scope(registry, global_step):
            # Global-step reads (host_call's `tf.reshape(get_global_step(), [1])`) see the
            # step's starting value, as in legacy's graph, wherever model_fn wrote them.
            with global_step_reads.step_start_reads(global_step) as start, \
                    _names_taken() as names:
                spec = caller(features, labels, ModeKeys.TRAIN, batch_size)
            record.observe_names(names.table)
            if spec.loss is None:
                raise ValueError(
                    "model_fn returned a spec without `loss` in TRAIN mode. Return "
                    "`TPUEstimatorSpec(mode, loss=..., train_op=...)`.")
            if spec.train_op is None:
                raise ValueError(
                    "model_fn returned a spec without `train_op` in TRAIN mode. Return "
                    "`TPUEstimatorSpec(mode, loss=..., train_op=optimizer.minimize(...))`.")
            record.observe(spec, ModeKeys.TRAIN,
                           config_is_chief=bool(getattr(caller.config, "is_chief", True)))
            record.observe_graph(spec)
            summary_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SUMMARIES)
            if write_summaries:
                record.observe_summaries(summary_ops)
            else:
                _warn_dropped_summaries()
            with tf.control_dependencies([spec.train_op]):
                outputs: dict[str, Any] = {"loss": _as_float_loss(spec.loss),
                                           "step": tf.identity(start)}
                if getattr(spec, "host_call", None) is not None:
                    outputs["host_call"] = tf.nest.map_structure(
                        tf.identity, record.host_call_tensors(spec))
                outputs.update(_hook_tensors(hook_tensor_names))
                if write_summaries:
                    outputs["summaries"] = (tf.compat.v1.summary.merge(summary_ops,
                                                                       collections=[])
                                            if summary_ops else tf.constant(b""))
            return outputs

    return train_step


def _hook_tensors(names: tuple[str, ...]) -> dict[str, Any]:
    """`{'hook_tensors': [...]}`: this replica's copies of the tensors hooks fetch."""
    if not names:
        return {}
    return {"hook_tensors": [tf.identity(_replica_tensor(name)) for name in names]}


LOSS_SUMMARY_NAME = "loss"


def _replica_tensor(name: str) -> tf.Tensor:
    """This replica's copy of the model_fn tensor that replica 0 named `name`.

    Replicas after the first build their graph under a root scope of their own
    (`replica_1/...`); their values are not reported, so a tensor their graph lacks under
    that scope stands in as an empty one.
    """
    graph = tf.compat.v1.get_default_graph()
    scope = graph.get_name_scope()
    if not scope or _is_first_replica():
        return graph.get_tensor_by_name(name)
    try:
        return graph.get_tensor_by_name(f"{scope}/{name}")
    except (KeyError, ValueError):
        return tf.zeros([0], graph.get_tensor_by_name(name).dtype)


def _names_taken() -> Any:
    """Records the names model_fn takes in its trace (`TraceRecord.observe_names`)."""
    return graph_names.recording(tf.compat.v1.get_default_graph())


_LATER_REPLICA = re.compile(r"replica_[1-9][0-9]*(/|$)")


def _warn_dropped_summaries() -> None:
    """v1 summary ops in model_fn are not written, as legacy dropped them on TPU."""
    summaries = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SUMMARIES)
    if summaries:
        logging.warning(
            "model_fn created %d tf.compat.v1.summary op(s) (%s); they are not written. "
            "TPUEstimator did not run summaries inside the TPU computation either: write "
            "them from host_call=(fn, tensors).", len(summaries),
            ", ".join(sorted({t.op.name.split("/")[-1] for t in summaries})))


@dataclasses.dataclass
class TraceRecord:
    """What a trace of model_fn told the host about its outputs.

    Filled in while the step is traced (Python runs once per trace); the host reads it to
    build metric_fn's graph and to name prediction outputs. Replicas trace identical specs.
    """

    metric_fn: Callable[..., Any] | None = None
    metric_structure: Any = None
    # (metric_fn, its tensors' nest) when the step returns metric_fn's inputs for
    # `make_metric_update` to build metric_fn after the step (one device).
    deferred_metrics: tuple[Callable[..., Any], Any] | None = None
    metric_op_names: tuple[str, ...] = ()
    prediction_keys: tuple[str, ...] = ()
    predictions_are_dict: bool = True
    host_call: Any = None  # (fn, tensors) of the first replica's spec.
    eval_metrics: Any = None  # (metric_fn, tensors) of the first replica's spec.
    # The names model_fn took after the global step's (`observe_names`).
    model_names: graph_names.NameTable = dataclasses.field(default_factory=graph_names.NameTable)
    scaffold_fn: Callable[[], Any] | None = None
    saver: Any = None  # `warm_start._RecordingSaver` of an EstimatorSpec's Scaffold.
    scaffold: Any = None  # That Scaffold itself (its init_fn, ...: `scaffold_parts.py`).
    scaffold_saver: Any = None  # Its `saver` as given (`checkpoint/object_based.py`).
    hooks: tuple[Any, ...] = ()
    model_graph: Any = None  # The graph replica 0's model_fn built.
    loss_name: str | None = None  # The name of its spec.loss tensor there.
    model_summaries: bool = False  # Replica 0's model_fn made v1 summary ops (TRAIN, CPU).
    loss_summary_made: bool = False  # One of them is named exactly `loss`.
    summary_names: tuple[str, ...] = ()  # Their tensors' names in `model_graph`.

    def observe_summaries(self, summary_ops: list[Any]) -> None:
        """Notes replica 0's v1 summary ops, which legacy's CPU path wrote.

        Legacy's Estimator added its own `loss` summary only when none was named exactly
        `loss` (estimator.py, `_train_with_estimator_spec`).
        """
        if _is_first_replica() and summary_ops:
            self.model_summaries = True
            self.summary_names = tuple(t.name for t in summary_ops)
            self.loss_summary_made |= any(t.op.name == LOSS_SUMMARY_NAME
                                          for t in summary_ops)

    def observe_names(self, taken: graph_names.NameTable) -> None:
        """Keeps the names the first replica's model_fn took (after the global step's).

        Legacy built model_fn into one TF1 graph and later summaries there (host_call's,
        its own loss summary) by name, so they were suffixed where model_fn had taken the
        name. Later replicas trace under `replica_<k>/` in the same graph, interleaved with
        the first at every merge_call: their names are left out.
        """
        if _is_first_replica():
            self.model_names = taken.without(_LATER_REPLICA.match)

    def host_graph_names(self, *, use_tpu: bool,
                         variable_names: Iterable[str]) -> graph_names.NameTable:
        """The names legacy's graph held when it built host_call's fn (EVAL: metric_fn).

        `use_tpu=False`: the CPU path called them in model_fn's graph, after model_fn: the
        global step's name and every name model_fn took. `use_tpu=True`: they were built in
        the outer graph after the TPU computation, whose while loop ran model_fn: with TF2
        control flow (TF 2's default) in a `while_v2` body graph of its own, whose names
        stayed there, except the variables' (created in the outer graph); with v1 control
        flow (`disable_v2_behavior()`, `disable_control_flow_v2()`) in the outer graph, as
        on the CPU. (The TPU computation's own op names there, `cluster`, `OutfeedDequeue
        Tuple`, ..., and those of the input pipeline on the CPU are not reproduced.)
        `variable_names`: the v1 names of the variables (the registry's).
        """
        taken = self.model_names
        if use_tpu and tf.compat.v1.control_flow_v2_enabled():
            # The global step's one entry is NAMES_BEFORE_MODEL_FN's: a model_fn op named
            # `global_step` stayed in the body graph.
            taken = taken.only(name for name in variable_names
                               if name != variables_lib.GLOBAL_STEP_NAME)
        return variables_lib.NAMES_BEFORE_MODEL_FN + taken

    def observe_graph(self, spec: Any) -> None:
        """Keeps replica 0's graph and loss name, where hooks look fetches up by name."""
        if _is_first_replica():
            self.model_graph = tf.compat.v1.get_default_graph()
            loss = getattr(spec, "loss", None)
            self.loss_name = loss.name if tf.is_symbolic_tensor(loss) else None

    def observe(self, spec: Any, mode: str | None = None, config_is_chief: bool = True) -> None:
        """Keeps what the host needs from a spec: host_call, scaffold_fn, hooks.

        `mode`: the run's (the spec's by default; legacy let a model_fn without `mode` return
        `EstimatorSpec(mode=None)`, and went by the run's).
        `config_is_chief`: the RunConfig's `is_chief`, which legacy's Estimator read to run
        `training_chief_hooks` (a RunConfig subclass may say otherwise than the cluster).

        From the first replica only: legacy TPU traced model_fn once, and what the other
        replicas return is the same code over their own copies of the graph's names (their
        EMA `variables_to_restore` would carry their own root scope, `replica_1/...`).
        """
        host_call = getattr(spec, "host_call", None)
        if host_call is not None:
            spec_lib.check_eval_metrics_tensors_have_batch_dim(host_call, "host_call")
        if not _is_first_replica():
            return
        self.host_call = host_call
        self.eval_metrics = getattr(spec, "eval_metrics", None)
        self.scaffold_fn = getattr(spec, "scaffold_fn", None)
        scaffold = getattr(spec, "scaffold", None)  # An EstimatorSpec's (legacy's CPU path).
        self.saver = warm_start_lib.recorded_saver(scaffold)
        self.scaffold = scaffold
        self.scaffold_saver = getattr(scaffold, "saver", None)
        mode = mode or spec.mode
        mode_hooks = {ModeKeys.TRAIN: "training_hooks", ModeKeys.EVAL: "evaluation_hooks",
                      ModeKeys.PREDICT: "prediction_hooks"}[mode]
        self.hooks = tuple(getattr(spec, mode_hooks, None) or ())
        if (mode == ModeKeys.TRAIN and config_is_chief
                and cluster.is_chief(tf.distribute.get_strategy())):
            # Only a plain Estimator's spec gets here with them: legacy ran them on the chief.
            self.hooks += tuple(getattr(spec, "training_chief_hooks", None) or ())

    @staticmethod
    def host_call_tensors(spec: Any) -> Any:
        return tf.nest.map_structure(tf.convert_to_tensor, spec.host_call[1])


def _is_first_replica() -> bool:
    if tf.distribute.in_cross_replica_context():
        return True
    replica = tf.distribute.get_replica_context().replica_id_in_sync_group
    return tf.get_static_value(replica) in (0, None)


def _check_eval_spec(spec: Any) -> None:
    if spec.loss is None:
        raise ValueError(
            "model_fn returned a spec without `loss` in EVAL mode. Return "
            "`TPUEstimatorSpec(mode, loss=..., eval_metrics=(metric_fn, tensors))`.")


def _unpadded(mask: Any) -> Any:
    """An op failing on a step with padding rows: model_fn saw them (a TPUEstimator's batches
    are padded; a plain Estimator's never are), and `eval_metric_ops` would count them."""
    return tf.debugging.assert_equal(tf.reduce_all(mask), True, message=(
        "EstimatorSpec.eval_metric_ops on several replicas count every row model_fn gets, "
        "and this step's batch was padded (a partial last batch). Give full batches "
        "(`batch(..., drop_remainder=True)`), or return "
        "`TPUEstimatorSpec(eval_metrics=(metric_fn, tensors))`, whose padding rows are "
        "dropped."))


def make_eval_step(caller: ModelFnCaller, registry: variables_lib.VariableRegistry,
                   global_step: tf.Variable, batch_size: int | None, *,
                   record: TraceRecord,
                   hook_tensor_names: tuple[str, ...] = (),
                   metrics_in_step: bool = False) -> Callable[..., dict[str, Any]]:
    """Returns `step(features, labels) -> {loss, metrics, metric_values}` for EVAL.

    `metrics` are the `eval_metrics` tensors for the host (TPU or several replicas);
    `metric_inputs` the flattened `eval_metrics` tensors for `make_metric_update` (one
    device: legacy's CPU path, use_tpu=False; `record.deferred_metrics` is set);
    `metric_values` the values after this step's update of an EstimatorSpec's
    `eval_metric_ops` or of the metrics `metric_fn` built in the step (`metrics_in_step`,
    or one device when its tensors are not all tensors; `record.metric_fn` stays None);
    `hook_tensors` the model_fn tensors hooks fetch by those names (as in TRAIN).

    `metrics_in_step`: metric_fn is built in the step, for a metric_fn that uses objects
    model_fn made (`metrics.ModelFnObjectsError`); on TPU or several replicas over every
    replica's real rows (`mask`: this replica's real rows; None when no batch is padded).
    """

    def eval_step(features: Any, labels: Any, mask: Any = None) -> dict[str, Any]:
        with _replica_scope(registry, global_step, training=False):
            with _names_taken() as names:
                spec = caller(features, labels, ModeKeys.EVAL, batch_size)
            record.observe_names(names.table)
            _check_eval_spec(spec)
            record.observe(spec, ModeKeys.EVAL)
            record.observe_graph(spec)
            outputs: dict[str, Any] = {"loss": _as_float_loss(spec.loss)}
            if caller.plain:  # Legacy's loss: `metrics.mean(loss)` per replica, each batch once.
                outputs["loss_weight"] = tf.constant(1.0)
            eval_metrics = getattr(spec, "eval_metrics", None)
            one_device = (not caller.use_tpu and tf.distribute.get_replica_context()
                          .num_replicas_in_sync == 1)
            if (eval_metrics is not None and one_device and not metrics_in_step
                    and _deferrable(eval_metrics[1])):
                # Built after the step (`make_metric_update`), on the tensors the step
                # returns: see `make_metric_update` for why.
                record.deferred_metrics = (eval_metrics[0], eval_metrics[1])
                outputs["metric_inputs"] = tf.nest.flatten(eval_metrics[1])
            elif eval_metrics is not None and (one_device or metrics_in_step):
                # Legacy's CPU path (use_tpu=False, one device) called metric_fn in model_fn's
                # graph on its tensors as they were (scalars included: bigbird's scalar
                # losses), so metric_fn could use what model_fn made (a lookup table, a
                # tokenizer). Built here, in the step, it still can; its accumulators are
                # local variables, reset at every evaluate.
                tensors = eval_metrics[1]
                if not one_device:
                    spec_lib.check_eval_metrics_tensors_have_batch_dim(eval_metrics)
                    tensors = _every_replicas_rows(tensors, mask)
                with registry.local_variables():
                    values = metrics_lib.build_in_step(eval_metrics[0], tensors)
                record.metric_op_names = tuple(values)  # Sorted, as tf.nest flattens them.
                outputs["metric_values"] = values
            elif eval_metrics is not None:
                # On TPU (or several replicas) metric_fn runs on the host over every replica's
                # rows (`metrics.HostMetrics`), which needs a batch axis to concatenate along.
                spec_lib.check_eval_metrics_tensors_have_batch_dim(eval_metrics)
                if _is_first_replica():  # As `observe`: legacy traced model_fn once.
                    record.metric_fn = eval_metrics[0]
                    record.metric_structure = eval_metrics[1]
                outputs["metrics"] = tf.nest.map_structure(tf.convert_to_tensor,
                                                           eval_metrics[1])
            if record.host_call is not None:
                outputs["host_call"] = record.host_call_tensors(spec)
            metric_ops = getattr(spec, "eval_metric_ops", None)
            if metric_ops:
                record.metric_op_names = tuple(sorted(metric_ops))
                replicas = tf.distribute.get_replica_context().num_replicas_in_sync
                guard = (tf.control_dependencies([_unpadded(mask)])
                         if replicas > 1 and mask is not None else contextlib.nullcontext())
                with guard:
                    outputs["metric_values"] = metrics_lib.values_after_update(
                        metric_ops, across_replicas=replicas > 1)
            outputs.update(_hook_tensors(hook_tensor_names))
            return outputs

    return eval_step


def _deferrable(tensors: Any) -> bool:
    """Whether metric_fn's `tensors` can be carried out of the step to build it afterwards.

    Only a nest of plain tensors: a Python value, a variable or a composite tensor reaches
    metric_fn in the step as it was, which a loop's accumulators cannot carry.
    """
    leaves = tf.nest.flatten(tensors)
    return bool(leaves) and all(isinstance(leaf, tf.Tensor) and tf.is_symbolic_tensor(leaf)
                                for leaf in leaves)


def make_metric_update(registry: variables_lib.VariableRegistry, global_step: tf.Variable,
                       record: TraceRecord) -> Callable[[list[tf.Tensor]], dict[str, Any]]:
    """Returns `update(leaves) -> {name: value after the update}`: metric_fn built on one
    step's `metric_inputs`, after the step, for one device (use_tpu=False).

    Legacy's CPU path built metric_fn in model_fn's graph, and the shim builds it in the
    step's trace when it must (`metrics_in_step`). In a loop of steps that costs the overlap
    of consecutive steps: a traced loop's iteration ends when all its stateful ops ran, so
    the metrics' `assign_add`s, which wait for the step's last layer, kept the next step's
    input and first layers from starting on the core the step left idle (ResNet eval at
    iterations_per_loop=100 ran ~1 ms a batch slower than predict). Built here, in a second
    loop over the carried tensors, the updates run in the same order on the same values.
    A metric_fn that reaches a tensor model_fn made other than its `tensors` (a lookup
    table's) cannot be built apart from the step: tracing the loop raises a ValueError for
    which `metrics.uses_another_graph` is true, and the caller builds it in the step.
    """

    def update(leaves: list[tf.Tensor]) -> dict[str, Any]:
        metric_fn, structure = record.deferred_metrics
        tensors = tf.nest.pack_sequence_as(structure, list(leaves))
        with _replica_scope(registry, global_step, training=False), registry.local_variables():
            values = metrics_lib.build_in_step(metric_fn, tensors)
        record.metric_op_names = tuple(values)  # Sorted, as tf.nest flattens them.
        return values

    return update


def _every_replicas_rows(tensors: Any, mask: Any) -> Any:
    """`tensors` as legacy's host metric_fn got them, on replica 0; no rows on the others.

    Legacy ran metric_fn once, on the host, over every replica's rows concatenated in
    replica order. Here every replica builds metric_fn (v1 metrics merge_call across
    replicas, so all must), replica 0 over every real row, the others over none: the
    metrics' replica-local accumulators (SyncOnRead, summed when read) then count each
    example once. Padding rows are dropped along axis 0; a leaf whose axis 0 is not the
    per-replica batch is passed as it is, and a step that had padding rows then fails, as on
    the host.
    """
    context = tf.distribute.get_replica_context()
    leaves = [tf.convert_to_tensor(leaf) for leaf in tf.nest.flatten(tensors)]
    if mask is None:
        mask = tf.ones(tf.shape(leaves[0])[:1], tf.bool)
    batch = shapes_lib.static_dim(mask.shape, 0)
    per_example = [not leaf.shape.rank or  # Unknown rank: taken as batch-major.
                   shapes_lib.static_dim(leaf.shape, 0) in (None, batch)
                   for leaf in leaves]

    def gather(strategy: tf.distribute.Strategy, leaves: list[Any], mask: Any) -> list[Any]:
        what = "tensor of eval_metrics"
        real = cluster.gather(strategy, mask, what)
        rows = [tf.boolean_mask(cluster.gather(strategy, leaf, what), real) if batch_major
                else cluster.gather(strategy, leaf, what)
                for leaf, batch_major in zip(leaves, per_example)]
        if all(per_example):
            return rows
        unpadded = tf.debugging.assert_equal(
            tf.reduce_all(real), True, message=(
                "An eval_metrics tensor whose axis 0 is not the per-replica batch cannot have "
                "its padding rows removed: give full batches (`batch(..., "
                "drop_remainder=True)`) or pass one row per example."))
        with tf.control_dependencies([unpadded]):
            return [tf.identity(r) for r in rows]

    rows = context.merge_call(gather, args=(leaves, mask))
    replica = context.replica_id_in_sync_group
    static_replica = tf.get_static_value(replica)  # MirroredStrategy's; a TPU's is not.
    if static_replica is not None:
        rows = rows if static_replica == 0 else [r[:0] for r in rows]
    else:
        keep = tf.cast(tf.equal(replica, 0), tf.int32)
        rows = [r[:tf.shape(r)[0] * keep] for r in rows]
    return tf.nest.pack_sequence_as(tensors, rows)


def _check_predictions(predictions: Any) -> dict[str, tf.Tensor]:
    if predictions is None:
        raise ValueError("model_fn returned a spec without `predictions` in PREDICT mode.")
    if not isinstance(predictions, dict):
        predictions = {"": predictions}  # Legacy yielded the bare value per example.
    for key, tensor in predictions.items():
        tensor = tf.convert_to_tensor(tensor)
        if tensor.shape.rank == 0:
            raise ValueError(
                "The estimator_spec.predictions must have batch dimension for every "
                f"tensor; `{key or 'predictions'}` is a scalar with shape "
                f"{tensor.shape}. Return one row per example, e.g. "
                "`tf.argmax(logits, axis=1)`.")
    return {k: tf.convert_to_tensor(v) for k, v in predictions.items()}


def make_predict_step(caller: ModelFnCaller, registry: variables_lib.VariableRegistry,
                      global_step: tf.Variable, batch_size: int | None, *,
                      record: TraceRecord,
                      hook_tensor_names: tuple[str, ...] = ()) -> Callable[..., dict[str, Any]]:
    """Returns `step(features, labels) -> {predictions[, hook_tensors]}` for PREDICT."""

    def predict_step(features: Any, labels: Any) -> dict[str, Any]:
        with _replica_scope(registry, global_step, training=False):
            spec = caller(features, labels, ModeKeys.PREDICT, batch_size)
            record.observe(spec, ModeKeys.PREDICT)
            record.observe_graph(spec)
            record.predictions_are_dict = isinstance(spec.predictions, dict)
            predictions = _check_predictions(spec.predictions)
            record.prediction_keys = tuple(sorted(predictions))  # tf.nest.flatten order.
            return {"predictions": predictions, **_hook_tensors(hook_tensor_names)}

    return predict_step
