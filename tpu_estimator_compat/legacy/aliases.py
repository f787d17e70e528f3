"""Legacy names for unchanged TF1 scripts: `tf.estimator`, `tf.contrib.*`, a safe TPU resolver.

    import tpu_estimator_compat
    tpu_estimator_compat.install_aliases()
    import tensorflow.compat.v1 as tf
    from tensorflow.compat.v1 import estimator as tf_estimator   # now resolves
    tf_estimator.tpu.TPUEstimator is tpu_estimator_compat.TPUEstimator   # True

This module owns the alias namespaces (`tf.compat.v1.estimator` with `tpu` and `export`;
`tf.compat.v1.contrib`, whose modules `contrib_namespace.py` builds from the table of
`contrib_map.py`), the `TPUClusterResolver` that
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

from tpu_estimator_compat._tf import patches as _tf_patches
from tpu_estimator_compat.legacy import contrib_map
from tpu_estimator_compat import log as logging

_ESTIMATOR_MODULE = "tensorflow.compat.v1.estimator"
# Every importable name of the estimator namespace (the nested API roots such as
# `tf.compat.v2.compat.v1` are attributes only: no code imports them by module name).
ESTIMATOR_MODULE_NAMES = (_ESTIMATOR_MODULE, "tensorflow.estimator",
                          "tensorflow.compat.v2.estimator")
_CONTRIB_MODULE = "tensorflow.contrib"
_DMI_PRODUCT_NAME = "/sys/class/dmi/id/product_name"

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
    from tpu_estimator_compat.export import saved_model as export_lib

    from tpu_estimator_compat.api import train_and_eval as training_lib

    from tpu_estimator_compat.embedding import config as embedding_config

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

CONTRIB_HINT = contrib_map.GENERIC_HINT


def build_contrib_namespace() -> AliasNamespace:
    """Builds `tf.contrib`: the namespaces of `contrib_namespace.py`, decided by the table of
    `contrib_map.py` (TensorFlow's v1 API, tf_keras, tf-slim and this library's stand-ins)."""
    from tpu_estimator_compat.legacy import contrib_namespace  # pylint: disable=import-outside-toplevel

    return contrib_namespace.ContribTree().root()


# ---------------------------------------------------------------------------------------------
# tf.compat.v1.tpu.experimental
# ---------------------------------------------------------------------------------------------

# The TPU embedding optimization parameters TF 2.21 dropped from `tf.compat.v1.tpu.experimental`
# (tensorflow/python/tpu/tpu_embedding.py is gone); `EmbeddingConfigSpec` takes them.


def _served_parameters(name: str) -> Callable[[Any], Any]:
    def build(original: Any) -> Any:
        """`tf.compat.v1.tpu.experimental.<name>`: this library's (TF 2.16+ has none)."""
        del original  # Absent in TF 2.16+.
        from tpu_estimator_compat.embedding import config as embedding_config

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
        # pylint: disable-next=import-outside-toplevel
        from tpu_estimator_compat.legacy import import_hook as legacy_imports

        legacy_imports.install_finder()
        logging.debug("Installed tf.estimator, tf.compat.v1.estimator, tf.compat.v1.contrib "
                      "and the no-crash TPUClusterResolver aliases.")
