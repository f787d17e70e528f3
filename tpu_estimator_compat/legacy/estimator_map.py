"""Every legacy `tf.estimator` name and estimator module path: served or refused. Data only.

    from tpu_estimator_compat.legacy import estimator_map
    estimator_map.verdict("tpu.TPUEstimator")          # ('served', '')
    estimator_map.verdict("DNNClassifier")             # ('refused', 'Write the model as ...')
    estimator_map.private_verdict("estimator", "_load_global_step_from_checkpoint_dir")

`estimator_names.py` builds the served `tf.estimator` namespace from these tables and
`import_hook.py` serves the private module paths (`tensorflow_estimator.python.estimator.*`,
`tensorflow.python.estimator.*`, TF 2.15's `tensorflow.python.tpu` stubs) they list; a tool
that reads code without running it (`tpu_estimator_compat.scan`) reads the same tables, so
what it predicts and what the launcher does cannot drift (tests/test_scan_names.py builds the
namespaces and checks both ways). Like `contrib_map.py` it imports nothing but the standard
library and can be loaded by file path without TensorFlow.

Names are relative to `tf.estimator` (`tpu.TPUEstimator`, `export.PredictOutput`). A verdict:
- SERVED: the name is this library's or TensorFlow's object;
- CHANGED: it runs, and `CHANGED` says what differs and where the guide says so;
- REFUSED: importing and subclassing work, constructing or calling raises
  `LegacySymbolUnavailableError` with the hint; a name the table does not know raises
  `LegacySymbolError` with `ESTIMATOR_HINT` (or the namespace's hint) at the attribute.
"""

import functools

SERVED = "served"
CHANGED = "changed"
REFUSED = "refused"

ESTIMATOR_MODULE = "tensorflow.compat.v1.estimator"
ESTIMATOR_MODULE_V2 = "tensorflow.estimator"
# The importable names of the two estimator namespaces (the nested API roots such as
# `tf.compat.v2.compat.v1` are attributes only: no code imports them by module name). As on
# legacy, `tf.estimator` and `tf.compat.v2.estimator` are the v2 namespace,
# `tf.compat.v1.estimator` the v1 one.
ESTIMATOR_MODULE_NAMES_V1 = (ESTIMATOR_MODULE,)
ESTIMATOR_MODULE_NAMES_V2 = (ESTIMATOR_MODULE_V2, "tensorflow.compat.v2.estimator")
ESTIMATOR_MODULE_NAMES = ESTIMATOR_MODULE_NAMES_V1 + ESTIMATOR_MODULE_NAMES_V2

# Legacy `tf.estimator` re-exported these `tf.compat.v1.train` session hooks under its own name.
V1_TRAIN_HOOK_NAMES = (
    "CheckpointSaverHook", "CheckpointSaverListener", "FeedFnHook", "FinalOpsHook",
    "GlobalStepWaiterHook", "LoggingTensorHook", "NanLossDuringTrainingError", "NanTensorHook",
    "ProfilerHook", "SecondOrStepTimer", "SessionRunArgs", "SessionRunContext", "SessionRunHook",
    "SessionRunValues", "StepCounterHook", "StopAtStepHook", "SummarySaverHook")

EXPORT_NAMES = (
    "ClassificationOutput", "ExportOutput", "PredictOutput", "RegressionOutput",
    "ServingInputReceiver", "TensorServingInputReceiver",
    "build_parsing_serving_input_receiver_fn", "build_raw_serving_input_receiver_fn")

# TPUEstimator and its configuration and spec: legacy `tf.estimator.tpu`'s own names.
TPU_NAMES = ("InputPipelineConfig", "RunConfig", "TPUConfig", "TPUEstimator", "TPUEstimatorSpec")
TRAINING_NAMES = ("train_and_evaluate", "TrainSpec", "EvalSpec", "LatestExporter",
                  "BestExporter")  # All in api/train_and_eval.py.
# The other names of `tf.estimator` this library serves (estimator_names.py says from where).
TOP_NAMES = ("Estimator", "ModeKeys", "EstimatorSpec", "RunConfig", "Exporter", "VocabInfo",
             "WarmStartSettings")
EMBEDDING_NAMES = ("EmbeddingConfigSpec",)  # `tf.estimator.tpu.experimental`.
# `tf.estimator.experimental` names of this library's own (`spec.call_logit_fn`: legacy kept it
# in `model_fn.py`, an engine module served by this library).
EXPERIMENTAL_NAMES = ("call_logit_fn",)

ESTIMATOR_HINT = (
    "tpu_estimator_compat serves legacy tf.estimator's names (the canned estimators with "
    "tensorflow-estimator 2.15.0 installed); this name is not one of them. Run the model as a "
    "model_fn with `tf.estimator.Estimator(model_fn=...)`.")
TPU_HINT = ("Only TPUEstimator, TPUEstimatorSpec, RunConfig, TPUConfig and "
            "InputPipelineConfig are provided.")

_MODEL_FN_HINT = (
    "Write the model as a model_fn (tf.compat.v1.layers or tf.keras layers inside it) and run "
    "it with `tf.estimator.Estimator(model_fn=...)`.")
_HOOK_HINT = ("Stop training with `max_steps`/`steps`, or write a "
              "`tf.compat.v1.train.SessionRunHook` that requests a stop.")
_FEATURE_HINT = "Build the parse spec with `tf.compat.v1.feature_column.make_parse_example_spec`."

# Public legacy `tf.estimator` / `tf.compat.v1.estimator` names (tensorflow-estimator 2.15.0,
# `dir()` of both namespaces) the library cannot run, by namespace: placeholders with a hint.
UNAVAILABLE_CLASSES: dict[str, dict[str, str]] = {
    "": {
        **{name: _MODEL_FN_HINT for name in (
            "BaselineClassifier", "BaselineEstimator", "BaselineRegressor",
            "DNNClassifier", "DNNEstimator", "DNNRegressor", "DNNLinearCombinedClassifier",
            "DNNLinearCombinedEstimator", "DNNLinearCombinedRegressor", "LinearClassifier",
            "LinearEstimator", "LinearRegressor", "Head", "BinaryClassHead",
            "LogisticRegressionHead", "MultiClassHead", "MultiHead", "MultiLabelHead",
            "PoissonRegressionHead", "RegressionHead")},
        "FinalExporter": "Use `tf.estimator.LatestExporter(name, serving_input_receiver_fn, "
                         "exports_to_keep=1)`.",
    },
    "experimental": {
        "KMeans": _MODEL_FN_HINT, "LinearSDCA": _MODEL_FN_HINT,
        "RNNClassifier": _MODEL_FN_HINT, "RNNEstimator": _MODEL_FN_HINT,
    },
    "export": {"EvalOutput": "Export the serving graph only (`export_saved_model`)."},
}
UNAVAILABLE_FUNCTIONS: dict[str, dict[str, str]] = {
    "": {"add_metrics": "Return the metrics from model_fn's `eval_metrics` / "
                        "`eval_metric_ops` instead.",
         "classifier_parse_example_spec": _FEATURE_HINT,
         "regressor_parse_example_spec": _FEATURE_HINT},
    "experimental": {
        "build_raw_supervised_input_receiver_fn": "Export the serving graph with "
                                                  "`build_raw_serving_input_receiver_fn`.",
        "dnn_logit_fn_builder": _MODEL_FN_HINT,
        "linear_logit_fn_builder": _MODEL_FN_HINT,
        **{name: _HOOK_HINT for name in (
            "make_early_stopping_hook", "stop_if_higher_hook", "stop_if_lower_hook", "stop_if_no_decrease_hook",
            "stop_if_no_increase_hook")},
    },
}
# Legacy names this library re-implements in modules loaded on first use, by namespace
# (`module:attribute`): legacy's feed queue runners, which this engine never runs, replaced by
# tf.data (migration_guide/estimator.md); legacy `hooks/hooks.py`'s, whose evaluation runs on
# this engine (`api/in_memory_eval.py`).
_IN_MEMORY_EVAL = "tpu_estimator_compat.api.in_memory_eval"
LIBRARY_LAZY_NAMES: dict[str, dict[str, str]] = {
    "inputs": {"numpy_input_fn": "tpu_estimator_compat.inputs.numpy_io:numpy_input_fn",
               "pandas_input_fn": "tpu_estimator_compat.inputs.pandas_io:pandas_input_fn"},
    "experimental": {
        "InMemoryEvaluatorHook": f"{_IN_MEMORY_EVAL}:InMemoryEvaluatorHook",
        "make_stop_at_checkpoint_step_hook":
            f"{_IN_MEMORY_EVAL}:make_stop_at_checkpoint_step_hook"},
}
# The names legacy's `tf.compat.v1.estimator` took from tensorflow-estimator's MODEL code
# (`module:attribute`, relative to `TFE_PRIVATE`), by namespace: with tensorflow-estimator
# 2.15.0 installed they are the package's own objects, imported on first use and built on this
# library's engine modules (`ENGINE_MODULES`); without it they stay the placeholders above.
# `tf.estimator` (v2) took the `V2` classes for the ones in `PACKAGE_NAMES_V2` (Keras
# optimizers, v2 heads, Keras metrics); the launcher's TF1 mode gives `import tensorflow` the
# v1 namespace, whose classes take the v1 optimizers TF1 scripts pass.
_CANNED = {"Baseline": "baseline", "DNN": "dnn", "DNNLinearCombined": "dnn_linear_combined",
           "Linear": "linear"}
_HEADS = {"Head": "base_head", "BinaryClassHead": "binary_class_head",
          "LogisticRegressionHead": "regression_head", "MultiClassHead": "multi_class_head",
          "MultiHead": "multi_head", "MultiLabelHead": "multi_label_head",
          "PoissonRegressionHead": "regression_head", "RegressionHead": "regression_head"}
_EARLY_STOPPING = ("make_early_stopping_hook", "stop_if_higher_hook", "stop_if_lower_hook",
                   "stop_if_no_decrease_hook", "stop_if_no_increase_hook")
PACKAGE_NAMES: dict[str, dict[str, str]] = {
    "": {
        **{f"{family}{kind}": f"canned.{module}:{family}{kind}"
           for family, module in _CANNED.items()
           for kind in ("Classifier", "Estimator", "Regressor")},
        **{name: f"head.{module}:{name}" for name, module in _HEADS.items()},
        "FinalExporter": "exporter:FinalExporter",
        "add_metrics": "extenders:add_metrics",
        "classifier_parse_example_spec": "canned.parsing_utils:classifier_parse_example_spec",
        "regressor_parse_example_spec": "canned.parsing_utils:regressor_parse_example_spec",
    },
    "experimental": {
        "KMeans": "canned.kmeans:KMeansClustering",
        "LinearSDCA": "canned.linear:LinearSDCA",
        # Legacy v2 only (`V2_ONLY_NAMES`).
        "RNNClassifier": "canned.rnn:RNNClassifier", "RNNEstimator": "canned.rnn:RNNEstimator",
        "build_raw_supervised_input_receiver_fn":
            "export.export:build_raw_supervised_input_receiver_fn",
        "dnn_logit_fn_builder": "canned.dnn:dnn_logit_fn_builder",
        "linear_logit_fn_builder": "canned.linear:linear_logit_fn_builder",
        **{name: f"early_stopping:{name}" for name in _EARLY_STOPPING},
    },
    "export": {"EvalOutput": "export.export_output:EvalOutput"},
}
# Where legacy `tf.estimator` (v2) took another object of the package: the `V2` classes.
PACKAGE_NAMES_V2 = {
    **{f"{family}{kind}": f"canned.{module}:{family}{kind}V2"
       for family, module in _CANNED.items() for kind in ("Classifier", "Estimator", "Regressor")},
    "classifier_parse_example_spec": "canned.parsing_utils:classifier_parse_example_spec_v2",
    "regressor_parse_example_spec": "canned.parsing_utils:regressor_parse_example_spec_v2",
}
# Names legacy had in one of its two namespaces only (tensorflow-estimator 2.15.0's `_api/v1`
# and `_api/v2` trees; tests/goldens/estimator_namespaces/legacy.json records both), by
# namespace. The other namespace raises `LegacySymbolError` for them, naming where they are.
V1_ONLY_NAMES: dict[str, tuple[str, ...]] = {
    "experimental": ("KMeans", "dnn_logit_fn_builder", "linear_logit_fn_builder")}
V2_ONLY_NAMES: dict[str, tuple[str, ...]] = {"experimental": ("RNNClassifier", "RNNEstimator")}
# Legacy's v2 namespace had no `tpu` and no `inputs` (TF 1.x's `tf.estimator` had both). This
# library serves them at the v2 roots too, the same modules as at v1: a TF 1.x-era script whose
# `import tensorflow` the launcher leaves as TF2 (`--tf1_mode=off`, or auto finding no TF1-only
# name) still reaches `tf.estimator.tpu.TPUEstimator`; nothing that ran on legacy changes.
V2_EXTRA_NAMESPACES = ("tpu", "tpu.experimental", "inputs")


def only_elsewhere_hint(namespace: str, name: str, v2: bool) -> str:
    """The hint for a name the other legacy namespace has, '' when neither or both have it."""
    other = (V1_ONLY_NAMES if v2 else V2_ONLY_NAMES).get(namespace, ())
    if name not in other:
        return ""
    where = "tf.compat.v1.estimator" if v2 else "tf.compat.v2.estimator"
    this = "tf.estimator (v2)" if v2 else "tf.compat.v1.estimator"
    full = ".".join(filter(None, [where, namespace, name]))
    return (f"Legacy's {this} had no such name; it is `{full}` (legacy's "
            f"{'v1' if v2 else 'v2'} namespace, served here too).")


PACKAGE_HINT = ("Install tensorflow-estimator==2.15.0 (a dependency of tpu_estimator_compat: "
                "`pip install --no-deps tensorflow-estimator==2.15.0`) to run it on this "
                "library's engine.")

# The sub-namespaces, each a module of its own (`from tensorflow.compat.v1.estimator import tpu`).
NAMESPACES = ("", "tpu", "tpu.experimental", "export", "experimental", "inputs")

# Served names that run differently, with the guide's row.
CHANGED_NOTES = {
    "tpu.experimental.EmbeddingConfigSpec": (
        "TPU embeddings run on GPUs and CPU replicas (use_tpu=False: ordinary columns; "
        "use_tpu=True: the TPU engine's semantics); not on TPU cores. "
        "migration_guide/embeddings.md"),
}


@functools.lru_cache(maxsize=None)
def package_installed() -> bool:
    """True when tensorflow-estimator is importable from `sys.path` (looked up once, not
    imported; the import hook's own `tensorflow_estimator` module does not count)."""
    import importlib.machinery

    return importlib.machinery.PathFinder.find_spec(TFE) is not None


def _without_other(tables: dict[str, dict[str, str]], v2: bool) -> dict[str, dict[str, str]]:
    """`tables` less the names only the other legacy namespace had."""
    other = V2_ONLY_NAMES if not v2 else V1_ONLY_NAMES
    return {ns: {n: v for n, v in table.items() if n not in other.get(ns, ())}
            for ns, table in tables.items()}


def package_names(v2: bool = False) -> dict[str, dict[str, str]]:
    """{namespace: {name: `module:attribute`}}: what the package supplies to the v1 or the v2
    namespace (whether or not it is installed)."""
    names = _without_other(PACKAGE_NAMES, v2)
    if v2:
        names[""] = {**names[""], **PACKAGE_NAMES_V2}
    return names


def served_names(v2: bool = False) -> dict[str, tuple[str, ...]]:
    """The names each namespace serves (not the placeholders), by namespace."""
    package = ({ns: tuple(names) for ns, names in package_names(v2).items()}
               if package_installed() else {})
    return {"": (("tpu", "export", "experimental", "inputs") + TOP_NAMES + V1_TRAIN_HOOK_NAMES
                 + TRAINING_NAMES + package.get("", ())),
            "tpu": ("experimental",) + TPU_NAMES, "tpu.experimental": EMBEDDING_NAMES,
            "export": EXPORT_NAMES + package.get("export", ()),
            "experimental": (EXPERIMENTAL_NAMES + tuple(LIBRARY_LAZY_NAMES["experimental"])
                             + package.get("experimental", ())),
            "inputs": tuple(LIBRARY_LAZY_NAMES["inputs"])}


def refused_names(v2: bool = False) -> dict[str, dict[str, str]]:
    """{namespace: {name: hint}}: the placeholders each namespace holds."""
    installed = package_installed()
    package_tables = package_names(v2)
    classes = _without_other(UNAVAILABLE_CLASSES, v2)
    functions = _without_other(UNAVAILABLE_FUNCTIONS, v2)
    refused = {}
    for ns in NAMESPACES:
        package = package_tables.get(ns, {})
        hints = {**classes.get(ns, {}), **functions.get(ns, {})}
        refused[ns] = {name: f"{PACKAGE_HINT} {hint}" if name in package else hint
                       for name, hint in hints.items()
                       if not (installed and name in package)}
    return refused


def namespace_hint(namespace: str) -> str:
    """The hint of the error for a name `tf.estimator.<namespace>` does not have."""
    return TPU_HINT if namespace == "tpu" else ESTIMATOR_HINT


def verdict(name: str, v2: bool = False) -> tuple[str, str]:
    """(status, note) for `name` in `tf.compat.v1.estimator` (`tf.estimator` in TF1 mode) or,
    with `v2`, in the v2 `tf.estimator`; a longer chain is the attribute of a name."""
    namespace = ""
    served, refused = served_names(v2), refused_names(v2)
    for part in name.split("."):
        full = f"{namespace}.{part}".strip(".")
        if full in NAMESPACES:
            namespace = full
            continue
        if part in served[namespace]:
            return (CHANGED, CHANGED_NOTES[full]) if full in CHANGED_NOTES else (SERVED, "")
        hint = refused[namespace].get(part)
        return REFUSED, (hint or only_elsewhere_hint(namespace, part, v2)
                         or namespace_hint(namespace))
    return SERVED, ""  # A namespace itself.


# ---------------------------------------------------------------------------------------------
# Module paths: tensorflow-estimator's private tree, served by `import_hook.py`.
# ---------------------------------------------------------------------------------------------

TFE = "tensorflow_estimator"
TFE_PRIVATE = "tensorflow_estimator.python.estimator"
TF_PRIVATE_ESTIMATOR = "tensorflow.python.estimator"
TF_PRIVATE_TPU = "tensorflow.python.tpu"
# TensorFlow up to 2.15 kept stubs under `tensorflow.python.tpu` that re-exported
# tensorflow-estimator's TPU modules (`from tensorflow_estimator.python.estimator.tpu.tpu_config
# import *`); TF 2.16 dropped them. mesh_tensorflow (`transformer/utils.py`: `from
# tensorflow.python.tpu import tpu_config, tpu_estimator`) imports them; they serve the same
# modules as `tensorflow_estimator.python.estimator.tpu.<name>`, only where TensorFlow itself
# has no module of that name.
TF_TPU_STUBS = frozenset(("error_handling", "tpu_config", "tpu_context", "tpu_estimator",
                          "util"))
# TF 2.15 `tensorflow.python.tpu` modules TF 2.16 removed whose names this library implements,
# by module: {name: "library module:attribute"}, served only where TensorFlow has no such
# module. `tpu_embedding`'s table and feature configs and optimizer parameters are the
# embedding spec's (`embedding/config.py`); tensorflow-estimator's TPU embedding tests build
# them there.
_EMBEDDING_CONFIG = "tpu_estimator_compat.embedding.config"
TF_TPU_LIBRARY_NAMES: dict[str, dict[str, str]] = {
    "tpu_embedding": {name: f"{_EMBEDDING_CONFIG}:{name}" for name in (
        "TableConfig", "FeatureConfig", "AdagradParameters", "AdamParameters",
        "FtrlParameters", "StochasticGradientDescentParameters")},
}
# TF 2.15 `tensorflow.python.distribute` modules TF 2.16 removed whose names this library
# implements, by module, as `TF_TPU_LIBRARY_NAMES`: `estimator_training`, the distribute
# coordinator's RunConfig side, which tensorflow-estimator's code and tests import first.
TF_PRIVATE_DISTRIBUTE = "tensorflow.python.distribute"
_ESTIMATOR_TRAINING = "tpu_estimator_compat.legacy.estimator_training"
TF_DISTRIBUTE_LIBRARY_NAMES: dict[str, dict[str, str]] = {
    "estimator_training": {name: f"{_ESTIMATOR_TRAINING}:{name}" for name in (
        "CHIEF", "EVALUATOR", "PS", "WORKER", "init_run_config",
        "should_run_distribute_coordinator")},
}
# TF 2.15 `tensorflow.python.eager` modules TF 2.16 removed whose names this library
# implements, as `TF_TPU_LIBRARY_NAMES`: `profiler`, which tensorflow/models' official
# `keras_utils.py` imports at module level.
TF_PRIVATE_EAGER = "tensorflow.python.eager"
_EAGER_PROFILER = "tpu_estimator_compat.legacy.eager_profiler"
TF_EAGER_LIBRARY_NAMES: dict[str, dict[str, str]] = {
    "profiler": {name: f"{_EAGER_PROFILER}:{name}" for name in (
        "start", "stop", "save", "maybe_create_event_file", "start_profiler_server",
        "ProfilerAlreadyRunningError", "ProfilerNotRunningError")},
}
# What a name these modules lack says, where the estimator hint would mislead.
TF_LIBRARY_HINTS = {
    "estimator_training": "The distribute coordinator itself is not served: call "
                          "`tf.estimator.train_and_evaluate`; a TF_CONFIG cluster trains "
                          "through the strategy tpu_estimator_compat picks for it.",
    "profiler": "Use TF 2's profiler: `tf.profiler.experimental.start(logdir)` / `stop()`, "
                "or `tf.profiler.experimental.Profile(logdir)`.",
}

# The private modules of tensorflow-estimator 2.15.0 (its package tree, tests and the generated
# `api` excluded), relative to `tensorflow_estimator.python.estimator`. TF 1.x shipped the same
# tree as `tensorflow.python.estimator`; both prefixes serve it.
PRIVATE_ESTIMATOR_MODULES = frozenset("""
canned canned.baseline canned.dnn canned.dnn_linear_combined canned.head canned.kmeans
canned.linear canned.metric_keys canned.optimizers canned.parsing_utils canned.prediction_keys
canned.rnn canned.saved_model_estimator canned.v1 canned.timeseries canned.timeseries.ar_model
canned.timeseries.estimators canned.timeseries.feature_keys canned.timeseries.head
canned.timeseries.math_utils canned.timeseries.model canned.timeseries.model_utils
canned.timeseries.saved_model_utils canned.timeseries.state_management early_stopping estimator
estimator_export estimator_lib export export.export export.export_lib export.export_output
export.function exporter extenders gc head head.base_head head.binary_class_head
head.head_utils head.multi_class_head head.multi_head head.multi_label_head
head.regression_head head.sequential_head hooks hooks.basic_session_run_hooks hooks.hooks
hooks.session_run_hook inputs inputs.inputs inputs.numpy_io inputs.pandas_io keras_lib
mode_keys model_fn run_config tools tools.checkpoint_converter tpu
tpu._tpu_estimator_embedding tpu.error_handling tpu.iteration_count_estimator tpu.tpu_config
tpu.tpu_context tpu.tpu_estimator tpu.util training util
""".split())

# With tensorflow-estimator 2.15.0 installed, who serves each module of its tree (relative to
# `TFE_PRIVATE`; an entry covers its submodules, the longest entry decides). ENGINE: this
# library's module is served at the path, so the package's model code, which imports the path,
# builds on this library's engine (`class DNNClassifierV2(estimator.EstimatorV2)` subclasses
# our `Estimator`). MODEL: the package's own module, imported by Python as usual. The rule: the
# real module serves when it only builds graph objects in the current graph and calls
# Estimator's public API; ours when it is the engine (Session, queue runners, its training
# loop) or needs a module TF 2.16 removed. migration_guide/estimator.md (Design) gives each
# decision's measurement.
ENGINE = "engine"
MODEL = "model"
HYBRID_MODULES: dict[str, tuple[str, str]] = {
    "estimator": (ENGINE, "Estimator/EstimatorV2 are the base class of every canned estimator"),
    "run_config": (ENGINE, "RunConfig; the real one reads the removed estimator_training"),
    "model_fn": (ENGINE, "EstimatorSpec: the heads build model_fn.EstimatorSpec and "
                         "_TPUEstimatorSpec, which the engine must accept"),
    "training": (ENGINE, "train_and_evaluate runs the engine; the real one a Session loop"),
    "tpu": (ENGINE, "TPUEstimator and its configuration are this library's"),
    "inputs.numpy_io": (ENGINE, "the real one feeds a queue runner"),
    "inputs.pandas_io": (ENGINE, "the real one feeds a queue runner"),
    "canned": (MODEL, "feature columns, Keras layers, a head: graph building only"),
    "head": (MODEL, "losses, metrics, predictions, train_op from an optimizer"),
    "early_stopping": (MODEL, "hooks reading the eval dir's events"),
    "keras_lib": (MODEL, "model_to_estimator: a model_fn over the Keras model"),
    "exporter": (MODEL, "FinalExporter calls Estimator.export_saved_model"),
    "export": (MODEL, "receivers and export outputs (TF's own classes)"),
    "hooks": (MODEL, "TF's session hooks"),
    "hooks.hooks": (ENGINE, "InMemoryEvaluatorHook evaluates on the engine; the real one "
                            "calls Estimator's private graph builders and feeds a Session"),
    "inputs": (MODEL, "re-exports numpy_io/pandas_io"),
    "extenders": (MODEL, "add_metrics wraps a model_fn"),
    "estimator_lib": (MODEL, "re-exports"), "estimator_export": (MODEL, "API decorators"),
    "mode_keys": (MODEL, "constants"), "util": (MODEL, "helpers"), "gc": (MODEL, "helpers"),
    "tools": (MODEL, "checkpoint converter"), "api": (MODEL, "the generated API tree"),
}
# This library's modules served at ENGINE paths that are not alias namespaces (the same
# functions `LIBRARY_LAZY_NAMES` serves at `tf.estimator.inputs`).
HYBRID_LIBRARY_MODULES = {"inputs.numpy_io": "tpu_estimator_compat.inputs.numpy_io",
                          "inputs.pandas_io": "tpu_estimator_compat.inputs.pandas_io"}


def hybrid_owner(relative: str) -> str:
    """ENGINE or MODEL for `TFE_PRIVATE.<relative>` when the real package is installed."""
    parts = relative.split(".")
    for i in range(len(parts), 0, -1):
        entry = HYBRID_MODULES.get(".".join(parts[:i]))
        if entry is not None:
            return entry[0]
    return MODEL


# Names of this library's embedding config (`embedding/config.py`) legacy's private TPU modules
# re-exported, by module.
TPU_EMBEDDING_EXPORTS = ("AdagradParameters", "AdamParameters", "EmbeddingConfigSpec",
                         "StochasticGradientDescentParameters")
PRIVATE_EMBEDDING_NAMES = {
    "tpu.tpu_estimator": TPU_EMBEDDING_EXPORTS,
    "tpu._tpu_estimator_embedding": TPU_EMBEDDING_EXPORTS + ("FtrlParameters",
                                                             "EmbeddingConfig"),
}
# Private names that are made by a call rather than read off a module, by module
# (`import_hook.py` makes them); every other private name is in `PRIVATE_LIBRARY_NAMES`.
PRIVATE_HELPER_NAMES = {
    # Made by a call (`_tf/estimator_seam.api_gauges()`), not read off a module.
    "estimator": ("_canned_estimator_api_gauge", "_estimator_api_gauge"),
}
# Private names of legacy's ENGINE modules that this library implements itself, by module:
# {name: "library module:attribute"} (`import_hook.py` imports the module on first use). Legacy's
# own tests and real code reach them (`training._TrainingExecutor`,
# `estimator._write_dict_to_summary`); each is this library's code with legacy's contract.
_IMPORT_HOOK = "tpu_estimator_compat.legacy.import_hook"
_TRAINING = "tpu_estimator_compat.api.train_and_eval"
_EVALUATOR = "tpu_estimator_compat.api.evaluator"
PRIVATE_LIBRARY_NAMES: dict[str, dict[str, str]] = {
    "tpu.util": {
        "parse_iterations_per_loop": "tpu_estimator_compat.tpu_config:parse_iterations_per_loop",
        "IterationsPerLoopCounter": "tpu_estimator_compat.tpu_config:IterationsPerLoop",
    },
    "tpu.iteration_count_estimator": {
        "IterationCountEstimator":
            "tpu_estimator_compat.loop.iterations:IterationCountEstimator",
        "RuntimeCounter": "tpu_estimator_compat.loop.iterations:RuntimeCounter",
    },
    "tpu.error_handling": {
        "ErrorRendezvous": "tpu_estimator_compat.loop.error_rendezvous:ErrorRendezvous",
    },
    "tpu.tpu_estimator": {
        "ExportSavedModelApiVersion": f"{_IMPORT_HOOK}:ExportSavedModelApiVersion",
        "_TPUStopAtStepHook": "tpu_estimator_compat.loop.iterations:TPUStopAtStepHook",
        "_InputsWithStoppingSignals":
            "tpu_estimator_compat.inputs.stopping_signals:InputsWithStoppingSignals",
        "_PaddingSignals": "tpu_estimator_compat.inputs.stopping_signals:PaddingSignals",
        "_WRAP_INPUT_FN_INTO_WHILE_LOOP":
            "tpu_estimator_compat.loop.train_loop:WRAP_INPUT_FN_INTO_WHILE_LOOP",
    },
    "tpu._tpu_estimator_embedding": {
        "get_configs_from_feature_columns":
            "tpu_estimator_compat.embedding.config:configs_from_feature_columns",
    },
    "training": {
        "_TrainingExecutor": f"{_TRAINING}:TrainingExecutor",
        "_StopAtSecsHook": f"{_TRAINING}:StopAtSecsHook",
        "_NewCheckpointListenerForEvaluate": f"{_TRAINING}:NewCheckpointListenerForEvaluate",
        "_ContinuousEvalListener": f"{_EVALUATOR}:ContinuousEvalListener",
        "_EvalResult": f"{_EVALUATOR}:EvalResult",
        "_EvalStatus": f"{_EVALUATOR}:EvalStatus",
    },
    # TPUEstimator's RunConfig; the `run_config` module's is `tf.estimator.RunConfig`.
    "tpu.tpu_config": {"RunConfig": "tpu_estimator_compat.config:RunConfig"},
    "estimator": {
        "_load_global_step_from_checkpoint_dir":
            f"{_IMPORT_HOOK}:_load_global_step_from_checkpoint_dir",
        "EstimatorV2": "tpu_estimator_compat.api.estimator:Estimator",  # Legacy's TF2 class.
        # tensorflow-estimator's early stopping and BestExporter tests write eval dirs so.
        "_write_dict_to_summary": "tpu_estimator_compat.summary.summaries:write_dict_to_summary",
        "_check_hooks_type": "tpu_estimator_compat.loop.hooks:check_hooks_type",
        # `keras_lib.model_to_estimator` builds its Estimator's config with it.
        "maybe_overwrite_model_dir_and_session_config":
            "tpu_estimator_compat.api.estimator_module:"
            "maybe_overwrite_model_dir_and_session_config",
    },
    "hooks.hooks": {name: f"{_IN_MEMORY_EVAL}:{name}" for name in (
        "InMemoryEvaluatorHook", "_StopAtCheckpointStepHook",
        "make_stop_at_checkpoint_step_hook")},
    "run_config": {
        # tensorflow-estimator's keras_test compares a config with it.
        "get_default_session_config": "tpu_estimator_compat.config:default_session_config",
        "TaskType": "tpu_estimator_compat.cluster.tf_config:TaskType",  # Its own tests read it.
    },
    # The heads build `model_fn._TPUEstimatorSpec(...).as_estimator_spec()`.
    "model_fn": {"_TPUEstimatorSpec": "tpu_estimator_compat.spec:TPUEstimatorSpec",
                 "LOSS_METRIC_KEY": "tpu_estimator_compat.spec:LOSS_METRIC_KEY",
                 "AVERAGE_LOSS_METRIC_KEY": "tpu_estimator_compat.spec:AVERAGE_LOSS_METRIC_KEY"},
}


def private_helper_names(module: str) -> tuple[str, ...]:
    """Every private name served in the ENGINE module `module` (both tables above)."""
    return (PRIVATE_HELPER_NAMES.get(module, ())
            + tuple(PRIVATE_LIBRARY_NAMES.get(module, {})))


# Where a private module's public names are looked up, in order (legacy private modules
# defined their classes under their public names: `tpu.tpu_estimator.TPUEstimator`).
PRIVATE_SOURCES = ("", "tpu", "export", "experimental", "inputs", "tpu.experimental")


def private_verdict(module: str, name: str) -> tuple[str, str]:
    """(status, note) for `name` in `tensorflow_estimator.python.estimator.<module>`;
    an empty `name` is the module itself. With the real package installed, a MODEL module's
    names are its own (the tables do not list them): served."""
    if module not in PRIVATE_ESTIMATOR_MODULES:
        return REFUSED, ESTIMATOR_HINT
    if not name:
        return SERVED, ""
    if package_installed() and hybrid_owner(module) == MODEL:
        return SERVED, ""  # The package's own module, with its own names.
    if name in PRIVATE_EMBEDDING_NAMES.get(module, ()):
        full = f"tpu.experimental.{name}"
        return (CHANGED, CHANGED_NOTES[full]) if full in CHANGED_NOTES else (SERVED, "")
    if name in private_helper_names(module):
        return SERVED, ""
    for v2 in (False, True):  # The v1 namespace's names first, then the v2-only ones.
        served, refused = served_names(v2), refused_names(v2)
        for namespace in PRIVATE_SOURCES:
            if name in served[namespace] or name in refused[namespace]:
                return verdict(f"{namespace}.{name}".strip("."), v2)
    return REFUSED, ESTIMATOR_HINT
