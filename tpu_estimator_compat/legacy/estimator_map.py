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

SERVED = "served"
CHANGED = "changed"
REFUSED = "refused"

ESTIMATOR_MODULE = "tensorflow.compat.v1.estimator"
# Every importable name of the estimator namespace (the nested API roots such as
# `tf.compat.v2.compat.v1` are attributes only: no code imports them by module name).
ESTIMATOR_MODULE_NAMES = (ESTIMATOR_MODULE, "tensorflow.estimator",
                          "tensorflow.compat.v2.estimator")

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

ESTIMATOR_HINT = (
    "tpu_estimator_compat runs `Estimator` and `TPUEstimator`: the canned estimators are not "
    "provided yet. Run a plain model_fn with `tf.estimator.Estimator(model_fn=...)`.")
TPU_HINT = ("Only TPUEstimator, TPUEstimatorSpec, RunConfig, TPUConfig and "
            "InputPipelineConfig are provided.")

_MODEL_FN_HINT = (
    "Write the model as a model_fn (tf.compat.v1.layers or tf.keras layers inside it) and run "
    "it with `tf.estimator.Estimator(model_fn=...)`.")
_INPUT_HINT = ("Return a `tf.data.Dataset` from your input_fn instead (e.g. "
               "`tf.data.Dataset.from_tensor_slices((features, labels)).batch(n)`).")
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
        "InMemoryEvaluatorHook": "Call `estimator.evaluate(...)` between `train` calls.",
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
        "call_logit_fn": _MODEL_FN_HINT, "dnn_logit_fn_builder": _MODEL_FN_HINT,
        "linear_logit_fn_builder": _MODEL_FN_HINT,
        **{name: _HOOK_HINT for name in (
            "make_early_stopping_hook", "make_stop_at_checkpoint_step_hook",
            "stop_if_higher_hook", "stop_if_lower_hook", "stop_if_no_decrease_hook",
            "stop_if_no_increase_hook")},
    },
    "inputs": {"numpy_input_fn": _INPUT_HINT, "pandas_input_fn": _INPUT_HINT},
}
# The sub-namespaces, each a module of its own (`from tensorflow.compat.v1.estimator import tpu`).
NAMESPACES = ("", "tpu", "tpu.experimental", "export", "experimental", "inputs")

# Served names that run differently, with the guide's row.
CHANGED_NOTES = {
    "tpu.experimental.EmbeddingConfigSpec": (
        "TPU embeddings run on GPUs and CPU replicas (use_tpu=False: ordinary columns; "
        "use_tpu=True: the TPU engine's semantics); not on TPU cores. "
        "migration_guide/embeddings.md"),
}


def served_names() -> dict[str, tuple[str, ...]]:
    """The names each namespace serves (not the placeholders), by namespace."""
    return {"": (("tpu", "export", "experimental", "inputs") + TOP_NAMES + V1_TRAIN_HOOK_NAMES
                 + TRAINING_NAMES),
            "tpu": ("experimental",) + TPU_NAMES, "tpu.experimental": EMBEDDING_NAMES,
            "export": EXPORT_NAMES, "experimental": (), "inputs": ()}


def refused_names() -> dict[str, dict[str, str]]:
    """{namespace: {name: hint}}: the placeholders each namespace holds."""
    return {ns: {**UNAVAILABLE_CLASSES.get(ns, {}), **UNAVAILABLE_FUNCTIONS.get(ns, {})}
            for ns in NAMESPACES}


def namespace_hint(namespace: str) -> str:
    """The hint of the error for a name `tf.estimator.<namespace>` does not have."""
    return TPU_HINT if namespace == "tpu" else ESTIMATOR_HINT


def verdict(name: str) -> tuple[str, str]:
    """(status, note) for `tf.estimator.<name>`; a longer chain is the attribute of a name."""
    namespace = ""
    for part in name.split("."):
        full = f"{namespace}.{part}".strip(".")
        if full in NAMESPACES:
            namespace = full
            continue
        if part in served_names()[namespace]:
            return (CHANGED, CHANGED_NOTES[full]) if full in CHANGED_NOTES else (SERVED, "")
        hint = refused_names()[namespace].get(part)
        return REFUSED, hint or namespace_hint(namespace)
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

# Names of this library's embedding config (`embedding/config.py`) legacy's private TPU modules
# re-exported, by module.
TPU_EMBEDDING_EXPORTS = ("AdagradParameters", "AdamParameters", "EmbeddingConfigSpec",
                         "StochasticGradientDescentParameters")
PRIVATE_EMBEDDING_NAMES = {
    "tpu.tpu_estimator": TPU_EMBEDDING_EXPORTS,
    "tpu._tpu_estimator_embedding": TPU_EMBEDDING_EXPORTS + ("FtrlParameters",
                                                             "EmbeddingConfig"),
}
# Private helpers real code called through the private module paths, by module
# (`import_hook.py` defines them).
PRIVATE_HELPER_NAMES = {
    "estimator": ("_load_global_step_from_checkpoint_dir", "EstimatorV2"),
    "tpu.tpu_estimator": ("ExportSavedModelApiVersion",),
}
# Where a private module's public names are looked up, in order (legacy private modules
# defined their classes under their public names: `tpu.tpu_estimator.TPUEstimator`).
PRIVATE_SOURCES = ("", "tpu", "export", "experimental", "inputs", "tpu.experimental")


def private_verdict(module: str, name: str) -> tuple[str, str]:
    """(status, note) for `name` in `tensorflow_estimator.python.estimator.<module>`;
    an empty `name` is the module itself."""
    if module not in PRIVATE_ESTIMATOR_MODULES:
        return REFUSED, ESTIMATOR_HINT
    if not name:
        return SERVED, ""
    if name in PRIVATE_EMBEDDING_NAMES.get(module, ()):
        full = f"tpu.experimental.{name}"
        return (CHANGED, CHANGED_NOTES[full]) if full in CHANGED_NOTES else (SERVED, "")
    if name in PRIVATE_HELPER_NAMES.get(module, ()):
        return SERVED, ""
    for namespace in PRIVATE_SOURCES:
        if name in served_names()[namespace] or name in refused_names()[namespace]:
            return verdict(f"{namespace}.{name}".strip("."))
    return REFUSED, ESTIMATOR_HINT
