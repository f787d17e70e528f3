"""Legacy names for unchanged TF1 scripts: `tf.estimator`, `tf.contrib.*`, a safe TPU resolver.

    import tpu_estimator_compat
    tpu_estimator_compat.install_aliases()
    import tensorflow.compat.v1 as tf
    from tensorflow.compat.v1 import estimator as tf_estimator   # now resolves
    tf_estimator.tpu.TPUEstimator is tpu_estimator_compat.TPUEstimator   # True

This module owns the alias namespaces (`tf.compat.v1.estimator` with `tpu` and `export`,
`tf.compat.v1.contrib` with the submodules TPU models used), the `TPUClusterResolver` that
returns a no-TPU stand-in instead of raising when there is no TPU, and `install_aliases()`, the
one function that puts them onto the real TensorFlow modules through `_tf_patches` (the
`aliases.*` patches, whose replacements are built here) and installs the import hook of
`legacy_imports.py` (which serves the same namespaces under module paths such as
`tensorflow.contrib.tpu`). Nothing happens at import time. The whole public legacy
`tf.estimator` surface exists, so libraries that subclass its classes at import time
(tensorflow_hub subclasses `Exporter`) import; names the library cannot run are placeholders
that raise `LegacySymbolUnavailableError` when constructed or called. It must not know about
scripts, how the import hook works or TF1 mode (`tf1_mode.py`), nor how the estimator runs: it
only maps legacy names onto this library, TensorFlow and tf-slim.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import types
from typing import Any, Callable, Iterable, Mapping

import tensorflow as tf

from tpu_estimator_compat import _tf_patches
from tpu_estimator_compat import _tf_private
from tpu_estimator_compat import log as logging

_ESTIMATOR_MODULE = "tensorflow.compat.v1.estimator"
# Every importable name of the estimator namespace (the nested API roots such as
# `tf.compat.v2.compat.v1` are attributes only: no code imports them by module name).
ESTIMATOR_MODULE_NAMES = (_ESTIMATOR_MODULE, "tensorflow.estimator",
                          "tensorflow.compat.v2.estimator")
_CONTRIB_MODULE = "tensorflow.contrib"
_DMI_PRODUCT_NAME = "/sys/class/dmi/id/product_name"
_GUIDE = "migration_guide/launcher.md"

# Legacy `tf.estimator` re-exported these `tf.compat.v1.train` session hooks under its own name.
_V1_TRAIN_HOOK_NAMES = (
    "CheckpointSaverHook", "CheckpointSaverListener", "FeedFnHook", "FinalOpsHook",
    "GlobalStepWaiterHook", "LoggingTensorHook", "NanLossDuringTrainingError", "NanTensorHook",
    "ProfilerHook", "SecondOrStepTimer", "SessionRunArgs", "SessionRunContext", "SessionRunHook",
    "SessionRunValues", "StepCounterHook", "StopAtStepHook", "SummarySaverHook")

_EXPORT_NAMES = (
    "ClassificationOutput", "ExportOutput", "PredictOutput", "RegressionOutput",
    "ServingInputReceiver", "TensorServingInputReceiver",
    "build_parsing_serving_input_receiver_fn", "build_raw_serving_input_receiver_fn")

_TPU_ESTIMATOR_NAMES = (
    "InputPipelineConfig", "RunConfig", "TPUConfig", "TPUEstimator", "TPUEstimatorSpec")

# Aliased from the library when present at `install_aliases()` time, else a stub that raises.
_TRAINING_NAMES = ("train_and_evaluate", "TrainSpec", "EvalSpec", "LatestExporter",
                   "BestExporter")  # All in train_and_eval.py.

ESTIMATOR_HINT = (
    "tpu_estimator_compat re-implements TPUEstimator only: the plain `Estimator` and the "
    "canned estimators are not provided. Run a plain model_fn with "
    "`tf.estimator.tpu.TPUEstimator(..., use_tpu=False)`.")


class LegacySymbolError(AttributeError):
    """A legacy TF1 name that no alias serves; the message names it and says what to do.

    An AttributeError so that `hasattr()` and `getattr(x, name, default)` keep working.
    """


class LegacySymbolUnavailableError(NotImplementedError):
    """A legacy class or function that exists so code imports, but was constructed or called.

    Libraries subclass legacy classes at import time (tensorflow_hub: `class
    LatestModuleExporter(tf_estimator.Exporter)`); failing there would break every script that
    imports them, so the failure waits until the symbol is really used.
    """


def unavailable_class(display_name: str, hint: str) -> type:
    """A subclassable stand-in for legacy class `display_name` that raises when constructed."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        del self, args, kwargs
        raise LegacySymbolUnavailableError(
            f"`{display_name}` is not available on TensorFlow 2 through tpu_estimator_compat "
            f"(it was constructed). {hint}")

    name = display_name.rpartition(".")[2]
    return type(name, (), {"__init__": __init__, "__module__": display_name.rpartition(".")[0],
                           "__doc__": f"Placeholder for legacy `{display_name}`. {hint}"})


def unavailable_function(display_name: str, hint: str) -> Callable[..., Any]:
    """A stand-in for legacy function `display_name` that raises when called."""

    def unavailable(*args: Any, **kwargs: Any) -> Any:
        del args, kwargs
        raise LegacySymbolUnavailableError(
            f"`{display_name}` is not available on TensorFlow 2 through tpu_estimator_compat "
            f"(it was called). {hint}")

    unavailable.__name__ = unavailable.__qualname__ = display_name.rpartition(".")[2]
    unavailable.__doc__ = f"Placeholder for legacy `{display_name}`. {hint}"
    return unavailable


class AliasNamespace(types.ModuleType):
    """A module of aliases whose unknown names fail with a message naming the legacy symbol.

    Members come from `members` first and then from each of `sources` in order, so a namespace
    can list the names this library serves and defer everything else to a maintained module.
    """

    def __init__(self, name: str, display_name: str, doc: str,
                 members: Mapping[str, Any] | None = None,
                 sources: Iterable[Callable[[], Any]] = (),
                 hint: str = "") -> None:
        super().__init__(name, doc)
        self.__dict__.update(members or {})
        self.__dict__["_alias_display_name"] = display_name
        self.__dict__["_alias_sources"] = tuple(sources)
        self.__dict__["_alias_hint"] = hint

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")
        for source in self._alias_sources:
            value = getattr(source(), attr, _MISSING)
            if value is not _MISSING:
                return value
        raise LegacySymbolError(f"`{self._alias_display_name}.{attr}` is not available on "
                                f"TensorFlow 2 through tpu_estimator_compat. {self._alias_hint}")

    def __dir__(self) -> list[str]:
        names = set(super().__dir__())
        for source in self._alias_sources:
            names.update(n for n in dir(source()) if not n.startswith("_"))
        return sorted(names)

    def __repr__(self) -> str:
        return f"<alias module {self._alias_display_name!r} (tpu_estimator_compat)>"


_MISSING = object()


# ---------------------------------------------------------------------------------------------
# TPUClusterResolver that does not crash an unchanged script on a machine without a TPU.
# ---------------------------------------------------------------------------------------------


def _real_resolver_class() -> type:
    return tf.distribute.cluster_resolver.TPUClusterResolver


class NoTPUClusterResolver(tf.distribute.cluster_resolver.TPUClusterResolver):
    """What `TPUClusterResolver(...)` returns when there is no TPU to resolve.

    A legacy script builds the resolver unconditionally and passes it on as
    `RunConfig(cluster=...)`. This stand-in reports the local master (`''`) and an empty
    cluster, so `RunConfig` and `get_master()` callers see "no remote TPU"; anything that
    needs the TPU itself (TensorFlow's TPU initialisation, which the estimator's strategy
    choice tries) raises ValueError with `no_tpu_reason`, and the estimator falls back to GPUs
    or the CPU. It subclasses the real resolver so `isinstance` checks in scripts and in
    TensorFlow accept it; the real constructor, which would contact Google Cloud, never runs.
    """

    def __init__(self, tpu: Any, reason: str) -> None:  # pylint: disable=super-init-not-called
        self.tpu = tpu
        self.no_tpu_reason = reason
        self.task_type = "worker"
        self.task_id = 0
        self.rpc_layer = None

    def _no_tpu(self) -> ValueError:
        return ValueError(self.no_tpu_reason)

    @property
    def _tpu(self) -> str:  # Read by tf.tpu.experimental.initialize_tpu_system.
        raise self._no_tpu()

    @property
    def tpu_hardware_feature(self) -> Any:
        raise self._no_tpu()

    def get_tpu_system_metadata(self) -> Any:
        raise self._no_tpu()

    def cluster_spec(self) -> tf.train.ClusterSpec:
        return tf.train.ClusterSpec({})

    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        del task_type, task_id, rpc_layer  # There is one answer: the local process.
        return ""

    get_master = master  # The TF1 resolver's name for `master`.

    def get_job_name(self) -> str:
        return self.task_type

    def num_accelerators(self, task_type: str | None = None, task_id: int | None = None,
                         config_proto: Any = None) -> dict[str, int]:
        del task_type, task_id, config_proto
        return {}

    @property
    def environment(self) -> str:
        return ""

    def __repr__(self) -> str:
        return f"NoTPUClusterResolver(tpu={self.tpu!r})"


def _on_google_cloud() -> bool:
    """True on a GCE VM (where the real resolver may ask the metadata server), read offline."""
    if os.environ.get("GCE_METADATA_HOST") or os.environ.get("GCE_METADATA_IP"):
        return True
    try:
        with open(_DMI_PRODUCT_NAME, encoding="utf-8") as f:
            return "Google" in f.read()
    except OSError:
        return False


def _has_local_tpu() -> bool:
    return bool(tf.config.list_physical_devices("TPU"))


def _reason_not_to_try(tpu: Any) -> str | None:
    """Why the real resolver must not be built for `tpu`, or None to try it.

    The real resolver asks the GCE metadata server for the project and zone of any named TPU
    and for the name itself when none is given. Off Google Cloud that is a network call that
    can only fail (slowly), so it is skipped; an explicit `grpc://` address and a local TPU
    are tried.
    """
    name = tpu[0] if isinstance(tpu, (list, tuple)) and len(tpu) == 1 else tpu
    if isinstance(name, bytes):
        name = name.decode("utf-8")
    if isinstance(name, str) and name.startswith("grpc://"):
        return None
    if _has_local_tpu():
        return None
    if name == "local":
        return "tpu='local' but this machine has no TPU devices"
    if _on_google_cloud():
        return None
    return "no TPU devices here and not on Google Cloud, so there is no TPU to resolve"


class _ResolverMeta(type):
    """Makes `isinstance(r, TPUClusterResolver)` true for what the factory returns."""

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, _real_resolver_class())


class TPUClusterResolver(metaclass=_ResolverMeta):
    """`TPUClusterResolver(tpu, zone, project, ...)` that never fails for lack of a TPU.

    Returns the real `tf.distribute.cluster_resolver.TPUClusterResolver` when a TPU can be
    resolved, else a `NoTPUClusterResolver` (logged once per call), so a legacy script that
    constructs a resolver unconditionally still runs on a laptop.
    """

    def __new__(cls, tpu: Any = None, zone: str | None = None, project: str | None = None,
                *args: Any, **kwargs: Any) -> Any:
        reason = _reason_not_to_try(tpu)
        if reason is None:
            try:
                return _real_resolver_class()(tpu, zone, project, *args, **kwargs)
            except Exception as e:  # pylint: disable=broad-except
                # Any failure to resolve (no name, unknown TPU, no credentials) means "no TPU
                # here": the estimator falls back, as the script's author expects off-TPU.
                reason = f"{type(e).__name__}: {e}"
        logging.warning("TPUClusterResolver(tpu=%r) found no TPU (%s); returning a "
                        "NoTPUClusterResolver so the estimator falls back to GPUs or the CPU.",
                        tpu, reason)
        return NoTPUClusterResolver(tpu, reason)


# ---------------------------------------------------------------------------------------------
# tf.estimator
# ---------------------------------------------------------------------------------------------


_MODEL_FN_HINT = (
    "Write the model as a model_fn (tf.compat.v1.layers or tf.keras layers inside it) and run "
    "it with `tf.estimator.tpu.TPUEstimator(model_fn=..., use_tpu=False)`.")
_INPUT_HINT = ("Return a `tf.data.Dataset` from your input_fn instead (e.g. "
               "`tf.data.Dataset.from_tensor_slices((features, labels)).batch(n)`).")
_HOOK_HINT = ("Stop training with `max_steps`/`steps`, or write a "
              "`tf.compat.v1.train.SessionRunHook` that requests a stop.")
_FEATURE_HINT = "Build the parse spec with `tf.compat.v1.feature_column.make_parse_example_spec`."

# Public legacy `tf.estimator` / `tf.compat.v1.estimator` names (tensorflow-estimator 2.15.0,
# `dir()` of both namespaces) the library cannot run, by namespace: placeholders with a hint.
_UNAVAILABLE_CLASSES: dict[str, dict[str, str]] = {
    "": {
        **{name: _MODEL_FN_HINT for name in (
            "Estimator", "BaselineClassifier", "BaselineEstimator", "BaselineRegressor",
            "DNNClassifier", "DNNEstimator", "DNNRegressor", "DNNLinearCombinedClassifier",
            "DNNLinearCombinedEstimator", "DNNLinearCombinedRegressor", "LinearClassifier",
            "LinearEstimator", "LinearRegressor", "Head", "BinaryClassHead",
            "LogisticRegressionHead", "MultiClassHead", "MultiHead", "MultiLabelHead",
            "PoissonRegressionHead", "RegressionHead")},
        "FinalExporter": "Use `tf.estimator.LatestExporter(name, serving_input_receiver_fn, "
                         "exports_to_keep=1)`.",
    },
    "experimental": {
        "InMemoryEvaluatorHook": "Call `estimator.evaluate(...)` between `train` calls.",
        "KMeans": _MODEL_FN_HINT, "LinearSDCA": _MODEL_FN_HINT,
        "RNNClassifier": _MODEL_FN_HINT, "RNNEstimator": _MODEL_FN_HINT,
    },
    "export": {"EvalOutput": "Export the serving graph only (`export_saved_model`)."},
}
_UNAVAILABLE_FUNCTIONS: dict[str, dict[str, str]] = {
    "": {"add_metrics": "Return the metrics from model_fn's `eval_metrics` / "
                        "`eval_metric_ops` instead.",
         "classifier_parse_example_spec": _FEATURE_HINT,
         "regressor_parse_example_spec": _FEATURE_HINT},
    "experimental": {
        "build_raw_supervised_input_receiver_fn": "Export the serving graph with "
                                                  "`build_raw_serving_input_receiver_fn`.",
        "call_logit_fn": _MODEL_FN_HINT, "dnn_logit_fn_builder": _MODEL_FN_HINT,
        "linear_logit_fn_builder": _MODEL_FN_HINT,
        **{name: _HOOK_HINT for name in (
            "make_early_stopping_hook", "make_stop_at_checkpoint_step_hook",
            "stop_if_higher_hook", "stop_if_lower_hook", "stop_if_no_decrease_hook",
            "stop_if_no_increase_hook")},
    },
    "inputs": {"numpy_input_fn": _INPUT_HINT, "pandas_input_fn": _INPUT_HINT},
}


def _unavailable_members(namespace: str) -> dict[str, Any]:
    prefix = "tf.estimator." + (f"{namespace}." if namespace else "")
    members = {n: unavailable_class(prefix + n, hint)
               for n, hint in _UNAVAILABLE_CLASSES.get(namespace, {}).items()}
    members.update({n: unavailable_function(prefix + n, hint)
                    for n, hint in _UNAVAILABLE_FUNCTIONS.get(namespace, {}).items()})
    return members


def _sub_namespace(name: str, doc: str, members: Mapping[str, Any]) -> AliasNamespace:
    return AliasNamespace(f"{_ESTIMATOR_MODULE}.{name}", f"tf.estimator.{name}", doc,
                          members={**_unavailable_members(name), **members},
                          hint=ESTIMATOR_HINT)


def build_estimator_namespace() -> AliasNamespace:
    """Builds `tf.compat.v1.estimator` (with `.tpu` and `.export`) over this library."""
    import tpu_estimator_compat
    from tpu_estimator_compat import export as export_lib

    from tpu_estimator_compat import train_and_eval as training_lib

    from tpu_estimator_compat import embedding_config

    tpu = AliasNamespace(
        f"{_ESTIMATOR_MODULE}.tpu", "tf.estimator.tpu", "TPUEstimator and its configuration.",
        members={"experimental": _sub_namespace(
                     "tpu.experimental", "TPU embedding.",
                     {"EmbeddingConfigSpec": embedding_config.EmbeddingConfigSpec}),
                 **{name: getattr(tpu_estimator_compat, name) for name in _TPU_ESTIMATOR_NAMES}},
        hint="Only TPUEstimator, TPUEstimatorSpec, RunConfig, TPUConfig and "
             "InputPipelineConfig are provided.")
    members: dict[str, Any] = {
        "tpu": tpu,
        "export": _sub_namespace("export", "Serving input receivers and export outputs.",
                                 {name: getattr(export_lib, name) for name in _EXPORT_NAMES}),
        "experimental": _sub_namespace("experimental", "Legacy experimental estimators.", {}),
        "inputs": _sub_namespace("inputs", "Legacy numpy/pandas input_fns.", {}),
        "ModeKeys": tpu_estimator_compat.ModeKeys,
        "EstimatorSpec": tpu_estimator_compat.EstimatorSpec,
        "RunConfig": tpu_estimator_compat.RunConfig,
        "Exporter": training_lib.Exporter,
        "VocabInfo": tf.compat.v1.train.VocabInfo,
    }
    members.update(_unavailable_members(""))
    members.update({name: getattr(tf.compat.v1.train, name) for name in _V1_TRAIN_HOOK_NAMES})
    members.update({name: getattr(training_lib, name) for name in _TRAINING_NAMES})
    members["WarmStartSettings"] = tpu_estimator_compat.WarmStartSettings
    return AliasNamespace(_ESTIMATOR_MODULE, "tf.estimator",
                          "Legacy tf.estimator names served by tpu_estimator_compat.",
                          members=members, hint=ESTIMATOR_HINT)


# ---------------------------------------------------------------------------------------------
# tf.contrib
# ---------------------------------------------------------------------------------------------

_CONTRIB_SERVED = ("tpu", "cluster_resolver", "layers", "framework", "metrics", "data", "slim",
                   "training", "summary", "rnn", "stateless", "util", "image", "lookup",
                   "learn.RunConfig", "estimator.clip_gradients_by_norm")
CONTRIB_HINT = (
    "tf.contrib was removed in TensorFlow 2 and no maintained library keeps this symbol under "
    "its legacy name (served: tf.contrib.{}). Replace it in your code with its TF2 or tf-slim "
    f"equivalent; see {_GUIDE}.".format(", ".join(_CONTRIB_SERVED)))


def _tf_slim() -> Any:
    try:
        return importlib.import_module("tf_slim")
    except ImportError as e:
        raise LegacySymbolError(
            "tf.contrib.layers/framework/metrics/slim are served by tf-slim, which is not "
            f"installed ({e}). Run `pip install tf-slim==1.1.0`.") from e


def _tf_slim_module(name: str) -> Callable[[], Any]:
    def load() -> Any:
        _tf_slim()  # Fails with the install command when tf-slim is missing.
        return importlib.import_module(f"tf_slim.{name}")

    return load


# contrib.training's train-loop and evaluation functions, which tf-slim keeps.
_SLIM_TRAINING = ("add_gradients_summaries", "clip_gradient_norms", "clip_gradient_norms_fn",
                  "create_train_op", "multiply_gradients", "train")
_SLIM_EVALUATION = ("checkpoints_iterator", "evaluate_once", "evaluate_repeatedly",
                    "get_or_create_eval_step", "StopAfterNEvalsHook", "SummaryAtEndHook",
                    "wait_for_new_checkpoint")


def _tf_slim_names(name: str, names: Iterable[str]) -> Callable[[], Any]:
    """Only `names` of `tf_slim.<name>`, loaded on first use."""
    loaded: list[Any] = []

    def load() -> Any:
        if not loaded:
            module = _tf_slim_module(name)()
            loaded.append(types.SimpleNamespace(**{n: getattr(module, n) for n in names}))
        return loaded[0]

    return load


# tf.contrib.rnn's cells and functions that TensorFlow keeps in `tf.compat.v1.nn`: TF 1.15's
# contrib.rnn re-exported these same classes (its contrib-only cells, LSTMBlockCell,
# LayerNormBasicLSTMCell, AttentionCellWrapper, ..., fail on use by name).
_RNN_CELLS = ("BasicLSTMCell", "BasicRNNCell", "DeviceWrapper", "DropoutWrapper", "GRUCell",
              "LSTMCell", "LSTMStateTuple", "MultiRNNCell", "RNNCell", "ResidualWrapper")
_RNN_FUNCTIONS = ("static_rnn", "static_bidirectional_rnn", "static_state_saving_rnn")


def _rnn_members() -> dict[str, Any]:
    v1 = tf.compat.v1
    members = {name: getattr(v1.nn.rnn_cell, name) for name in _RNN_CELLS}
    members.update({name: getattr(v1.nn, name) for name in _RNN_FUNCTIONS})
    return members


def _framework_members() -> dict[str, Any]:
    """TF 1.15's contrib.framework names that tf-slim does not keep (tf-slim serves its
    variables, arg_scope and checkpoint-assignment functions): the same TensorFlow functions
    under their TF2 names (`sort`, `argsort`, the checkpoint readers, ...) and the deprecation
    decorators and name-scope helpers TensorFlow keeps privately."""
    v1 = tf.compat.v1
    members = {"nest": tf.nest, "sort": tf.sort, "argsort": tf.argsort,
               "is_tensor": tf.is_tensor, "broadcast_to": tf.broadcast_to,
               "convert_to_tensor_or_sparse_tensor": v1.convert_to_tensor_or_sparse_tensor,
               "load_checkpoint": tf.train.load_checkpoint,
               "list_variables": tf.train.list_variables,
               "load_variable": tf.train.load_variable,
               "init_from_checkpoint": v1.train.init_from_checkpoint}
    members.update(_tf_private.contrib_framework_names())
    return members


def _util_members() -> dict[str, Any]:
    """TF 1.15's contrib.util: TensorFlow's tensor_util functions, public in TF2 under these
    names (`constant_value` is `tf.get_static_value`)."""
    return {"constant_value": tf.get_static_value,
            "make_tensor_proto": tf.make_tensor_proto,
            "make_ndarray": tf.make_ndarray}


def _learn_run_config_class() -> type:
    """`tf.contrib.learn.RunConfig`: TF 1.15's was the core RunConfig plus three arguments for
    the `ConfigProto` it built (its `tf_config`); the rest of contrib.learn (Experiment,
    learn_runner, its estimators) fails on use by name. tensor2tensor reads it whenever
    `tensorflow.contrib` imports (`trainer_lib.create_run_config`)."""
    import tpu_estimator_compat

    class RunConfig(tpu_estimator_compat.RunConfig):
        __doc__ = _learn_run_config_class.__doc__

        def __init__(self, master: str | None = None, num_cores: int = 0,
                     log_device_placement: bool = False, gpu_memory_fraction: float = 1,
                     **kwargs: Any) -> None:
            super().__init__(master=master, **kwargs)
            self._learn_tf_config = tf.compat.v1.ConfigProto(
                log_device_placement=log_device_placement,
                inter_op_parallelism_threads=num_cores,
                intra_op_parallelism_threads=num_cores,
                gpu_options=tf.compat.v1.GPUOptions(
                    per_process_gpu_memory_fraction=gpu_memory_fraction))

        @property
        def tf_config(self) -> Any:
            return self._learn_tf_config

    RunConfig.__module__ = f"{_CONTRIB_MODULE}.learn"
    return RunConfig


def replace_monitors_with_hooks(monitors_or_hooks: Any, estimator: Any) -> list:
    """`tf.contrib.learn.monitors.replace_monitors_with_hooks`: the SessionRunHooks as they are.
    contrib.learn's monitors are gone with it; one in the list fails by name."""
    del estimator  # Legacy used it only to convert monitors.
    hooks = list(monitors_or_hooks or [])
    for hook in hooks:
        if not isinstance(hook, tf.compat.v1.train.SessionRunHook):
            raise LegacySymbolError(
                f"`tf.contrib.learn.monitors` ({type(hook).__name__}) is not available on "
                f"TensorFlow 2 through tpu_estimator_compat. {CONTRIB_HINT}")
    return hooks


def _learn_members() -> dict[str, Any]:
    monitors = AliasNamespace(f"{_CONTRIB_MODULE}.learn.monitors", "tf.contrib.learn.monitors",
                              "Legacy tf.contrib.learn.monitors.",
                              members={"replace_monitors_with_hooks":
                                       replace_monitors_with_hooks},
                              hint=CONTRIB_HINT)
    return {"RunConfig": _learn_run_config_class(), "monitors": monitors}


def _stateless_members() -> dict[str, Any]:
    """TF 1.15's contrib.stateless: the same `stateless_random_ops` functions TensorFlow keeps
    (same positional arguments; TensorFlow added a keyword-only-in-practice `alg` at the end)."""
    return {"stateless_random_normal": tf.random.stateless_normal,
            "stateless_random_uniform": tf.random.stateless_uniform,
            "stateless_truncated_normal": tf.random.stateless_truncated_normal,
            "stateless_multinomial": tf.compat.v1.random.stateless_multinomial}


class _TransformGradients(tf.compat.v1.train.Optimizer):
    """An optimizer that transforms the (gradient, variable) pairs of another before applying.

    Everything but `compute_gradients` is the wrapped optimizer's, so its slots, their names
    and its checkpointed state are those of the optimizer the model_fn built. `applies_through`
    names it, so `CrossShardOptimizer` knows whose update runs (cross_shard.py).
    """

    def __init__(self, optimizer: Any, transform: Callable[[list], list], name: str) -> None:
        super().__init__(use_locking=False, name=name)
        self._optimizer = optimizer
        self._transform = transform
        self.applies_through = optimizer

    def compute_gradients(self, *args: Any, **kwargs: Any) -> list:
        return self._transform(self._optimizer.compute_gradients(*args, **kwargs))

    def apply_gradients(self, grads_and_vars: Any, global_step: Any = None,
                        name: str | None = None) -> Any:
        return self._optimizer.apply_gradients(grads_and_vars, global_step, name)

    def get_slot(self, *args: Any, **kwargs: Any) -> Any:
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args: Any, **kwargs: Any) -> Any:
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self) -> list:
        return self._optimizer.variables()


def clip_gradients_by_norm(optimizer: Any, clip_norm: float) -> Any:
    """`tf.contrib.estimator.clip_gradients_by_norm`: `optimizer`, its gradients clipped to a
    global norm of `clip_norm` (`tf.clip_by_global_norm`, None gradients left out) first."""

    def clip(grads_and_vars: list) -> list:
        pairs = list(grads_and_vars)
        grads, variables = zip(*pairs) if pairs else ((), ())
        clipped, _ = tf.clip_by_global_norm(list(grads), clip_norm)
        return list(zip(clipped, variables))

    return _TransformGradients(optimizer, clip, name="ClipByNorm" + optimizer.get_name())


class AsyncCheckpointSaverHook(tf.compat.v1.train.CheckpointSaverHook):
    """`tf.contrib.tpu.AsyncCheckpointSaverHook`: legacy's `CheckpointSaverHook` that wrote
    its checkpoints on a background thread.

    Legacy's class subclassed `CheckpointSaverHook` with the same arguments, and the estimator
    took it as one: among the training hooks it replaced the default saver (its directory,
    `save_steps`/`save_secs`, listeners), saving the starting state, every `save_steps`
    steps and at the end. That is how the shim takes it too (see migration_guide/hooks.md);
    the checkpoints are the same, written when due rather than on a thread of the hook's own.
    TPU scripts pass it unconditionally (google/compare_gan `runner_lib.py`, with the
    estimator's own `save_checkpoints_steps` set out of reach) or behind a flag
    (tensorflow/tpu efficientnet `--use_async_checkpointing`).
    """

    def __init__(self, checkpoint_dir: str, save_secs: int | None = None,
                 save_steps: int | None = None, saver: Any = None,
                 checkpoint_basename: str = "model.ckpt", scaffold: Any = None,
                 listeners: Any = None) -> None:
        super().__init__(checkpoint_dir, save_secs=save_secs, save_steps=save_steps,
                         saver=saver, checkpoint_basename=checkpoint_basename,
                         scaffold=scaffold, listeners=listeners)


class _ContribNamespace(AliasNamespace):
    """`tf.contrib`: served submodules are built on first use; others fail on use, by name."""

    def __init__(self, factories: Mapping[str, Callable[[], Any]]) -> None:
        super().__init__(_CONTRIB_MODULE, "tf.contrib", "Legacy tf.contrib names.",
                         hint=CONTRIB_HINT)
        self.__dict__["_contrib_factories"] = dict(factories)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")
        factory = self._contrib_factories.get(attr)
        if factory is None:
            # Unknown submodule: fail where a symbol of it is used, naming that symbol.
            value = AliasNamespace(f"{_CONTRIB_MODULE}.{attr}", f"tf.contrib.{attr}",
                                   "Not served.", hint=CONTRIB_HINT)
        else:
            value = factory()
        self.__dict__[attr] = value
        return value

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._contrib_factories))


def build_contrib_namespace() -> AliasNamespace:
    """Builds `tf.contrib` from this library, TensorFlow's v1 API and tf-slim."""
    import tpu_estimator_compat
    from tpu_estimator_compat import contrib_image
    from tpu_estimator_compat import contrib_lookup
    from tpu_estimator_compat import contrib_summary
    from tpu_estimator_compat import hparams as hparams_lib

    v1 = tf.compat.v1

    def sub(name: str, sources: Iterable[Callable[[], Any]],
            members: Mapping[str, Any] | None = None) -> Callable[[], AliasNamespace]:
        return lambda: AliasNamespace(f"{_CONTRIB_MODULE}.{name}", f"tf.contrib.{name}",
                                      f"Legacy tf.contrib.{name}.", members=members,
                                      sources=sources, hint=CONTRIB_HINT)

    factories: dict[str, Callable[[], Any]] = {
        "tpu": sub("tpu", [lambda: v1.tpu],
                   {"AsyncCheckpointSaverHook": AsyncCheckpointSaverHook,
                    **{name: getattr(tpu_estimator_compat, name)
                       for name in _TPU_ESTIMATOR_NAMES}}),
        "cluster_resolver": sub("cluster_resolver", [lambda: v1.distribute.cluster_resolver],
                                {"TPUClusterResolver": TPUClusterResolver}),
        "layers": sub("layers", [_tf_slim_module("layers"), _tf_slim]),
        "framework": sub("framework", [_tf_slim], _framework_members()),
        "util": lambda: sub("util", [], _util_members())(),
        "learn": lambda: sub("learn", [], _learn_members())(),
        "metrics": sub("metrics", [_tf_slim_module("metrics")]),
        "data": sub("data", [lambda: v1.data.experimental]),
        # HParams is this library's; tf-slim's `training` and `training.evaluation` are
        # copies of contrib.training's train loop and checkpoint-evaluation functions. Only
        # those names: the modules' own imports (`evaluation`, TF's) must not shadow the
        # legacy submodule paths under `tensorflow.contrib.training.python.training`.
        "training": sub("training", [_tf_slim_names("training.training", _SLIM_TRAINING),
                                     _tf_slim_names("training.evaluation", _SLIM_EVALUATION)],
                        {"HParams": hparams_lib.HParams,
                         "parse_values": hparams_lib.parse_values}),
        "slim": _tf_slim,
        # TF 1.x TPU host_calls write summaries with it (contrib_summary.py).
        "summary": lambda: sub("summary", [], contrib_summary.members())(),
        "rnn": lambda: sub("rnn", [], _rnn_members())(),
        "stateless": lambda: sub("stateless", [], _stateless_members())(),
        # Its projective transforms (RandAugment/AutoAugment's rotate, translate, shear) over
        # the kernel TensorFlow keeps (contrib_image.py); the rest fails on use by name.
        "image": lambda: sub("image", [], contrib_image.members())(),
        # TF 1.x's vocabulary tables, which TensorFlow keeps (contrib_lookup.py).
        "lookup": lambda: sub("lookup", [], contrib_lookup.members())(),
        # Only clip_gradients_by_norm: the rest of contrib.estimator built canned estimators,
        # multi-head models and replicated model_fns, which fail on use by name.
        "estimator": sub("estimator", [], {"clip_gradients_by_norm": clip_gradients_by_norm}),
    }
    return _ContribNamespace(factories)


# ---------------------------------------------------------------------------------------------
# tf.compat.v1.tpu.experimental
# ---------------------------------------------------------------------------------------------

# The TPU embedding optimization parameters TF 2.21 dropped from `tf.compat.v1.tpu.experimental`
# (tensorflow/python/tpu/tpu_embedding.py is gone); `EmbeddingConfigSpec` takes them.


def _served_parameters(name: str) -> Callable[[Any], Any]:
    def build(original: Any) -> Any:
        """`tf.compat.v1.tpu.experimental.<name>`: this library's (TF 2.16+ has none)."""
        del original  # Absent in TF 2.16+.
        from tpu_estimator_compat import embedding_config

        return getattr(embedding_config, name)

    build.__name__ = f"served_{name}"
    return build


# Builders named in _tf_patches.PATCHES (`aliases.<name>`).
served_AdagradParameters = _served_parameters("AdagradParameters")
served_AdamParameters = _served_parameters("AdamParameters")
served_FtrlParameters = _served_parameters("FtrlParameters")
served_StochasticGradientDescentParameters = _served_parameters(
    "StochasticGradientDescentParameters")


# ---------------------------------------------------------------------------------------------
# install_aliases
# ---------------------------------------------------------------------------------------------

_lock = threading.Lock()
_installed: dict[str, Any] = {}
_built_lock = threading.Lock()
_built: dict[str, Any] = {}


def _namespaces() -> dict[str, Any]:
    """The `estimator` and `contrib` namespaces, built once per process.

    Built once so that `sys.modules` and the `_tf_patches` builders below hand out the same
    objects, however often the patches are installed and uninstalled.
    """
    with _built_lock:
        if not _built:
            _built.update(estimator=build_estimator_namespace(),
                          contrib=build_contrib_namespace())
        return dict(_built)


def estimator_namespace(original: Any) -> AliasNamespace:
    """The replacement of patch `aliases.estimator`: the legacy `tf.estimator` namespace."""
    del original  # Absent on TF 2.16+.
    return _namespaces()["estimator"]


def contrib_namespace(original: Any) -> Any:
    """The replacement of patch `aliases.contrib`: the legacy `tf.contrib` namespace."""
    del original  # Absent on TF2.
    return _namespaces()["contrib"]


def no_crash_tpu_cluster_resolver(original: Any) -> type:
    """The replacement of patch `aliases.TPUClusterResolver` (see `TPUClusterResolver`)."""
    del original  # The replacement finds the real class itself (`_real_resolver_class`).
    return TPUClusterResolver


def installed_namespaces() -> dict[str, Any]:
    """The installed `estimator` and `contrib` namespaces (empty before `install_aliases`)."""
    return dict(_installed)


def install_aliases() -> None:
    """Puts the legacy names onto the real TensorFlow modules. Idempotent.

    Sets `tf.estimator`, `tf.compat.v1.estimator` and `tf.compat.v2.estimator`, also on the
    nested roots (`tf.compat.v2.compat.v1.estimator`, ...), and registers
    `tensorflow[.compat.v1|.compat.v2].estimator[.tpu|.export]` in `sys.modules`, which
    `from tensorflow.compat.v1 import estimator` needs; `tf.compat.v1.contrib` (also on the
    nested v1 roots); and replaces
    `tf.compat.v1.distribute.cluster_resolver.TPUClusterResolver` with the no-crash resolver,
    and adds the TPU embedding optimization parameter classes
    TF 2.21 dropped (`tf.compat.v1.tpu.experimental.AdagradParameters`, ...), and lets
    `tf.compat.v1.summary.FileWriter` be built with eager execution on (`v1_file_writer.py`).
    The TF2 `tf.distribute.cluster_resolver` is left alone: third-party TF2 code probes for a
    TPU by catching its ValueError. `tf.compat.v1.flags`, `.app` and `.logging` already exist
    and stay TensorFlow's own: legacy's lines go through TensorFlow's logger (`log.py`).
    Last, it installs `legacy_imports.LegacyModuleFinder`, which serves `tensorflow.contrib.*`,
    `tensorflow_estimator.*` and `tensorflow.python.estimator.*` as modules.
    """
    with _lock:
        if _installed:
            return
        # `import tensorflow.compat.v1`/`v2` re-executes the API module under that name and
        # rebinds `tf.compat.v1`/`v2` to the new object: import both first, so the aliases
        # land on the objects every later import returns.
        import tensorflow.compat.v1  # noqa: F401
        import tensorflow.compat.v2  # noqa: F401

        namespaces = _namespaces()
        estimator = namespaces["estimator"]
        for base in ESTIMATOR_MODULE_NAMES:
            sys.modules[base] = estimator
            sys.modules[f"{base}.tpu"] = estimator.tpu
            sys.modules[f"{base}.export"] = estimator.export
        estimator.__dict__["__path__"] = []  # Packages: submodules resolve through the hook.
        estimator.tpu.__dict__["__path__"] = []
        estimator.export.__dict__["__path__"] = []
        # `from tensorflow.compat.v1.tpu.experimental import AdagradParameters` loads that
        # package through the import system as a module object of its own (and rebinds
        # `tf.compat.v1.tpu` to its parent): load it before the patches bind, so that the
        # embedding parameter classes land on it too.
        importlib.import_module("tensorflow.compat.v1.tpu.experimental")
        _tf_patches.install("aliases")
        # The served `tf.contrib.tpu` and `tensorflow.contrib.tpu.python.ops.tpu_ops` hand out
        # `cross_replica_sum`; scripts bind it at import time (`from ...tpu_ops import
        # cross_replica_sum`), before any estimator exists, so the mapping is in place first.
        _tf_patches.install("cross_shard")
        # tf.contrib.layers/framework/metrics/slim are tf-slim, which calls TensorFlow
        # internals TF 2.21 moved (tf_slim_support.py).
        _tf_patches.install("tf_slim_support")
        # TF1 eval loops write Summary protos through a v1 FileWriter with eager still on
        # (v1_file_writer.py).
        _tf_patches.install("v1_file_writer")
        _installed.update(namespaces)
        from tpu_estimator_compat import legacy_imports  # pylint: disable=import-outside-toplevel

        legacy_imports.install_finder()
        logging.debug("Installed tf.estimator, tf.compat.v1.estimator, tf.compat.v1.contrib "
                      "and the no-crash TPUClusterResolver aliases.")
