"""The legacy `tf.estimator` namespace (with `tpu`, `export`, `experimental`, `inputs`).

`build_estimator_namespace()` maps every public name of tensorflow-estimator 2.15.0's
`tf.estimator` / `tf.compat.v1.estimator` onto this library (`Estimator`, TPUEstimator, their
specs and configuration, train_and_evaluate, the export receivers), onto TensorFlow (the v1
session hooks) or onto a placeholder that raises with a hint when used (the canned estimators this
library does not run). `legacy/aliases.py` installs it; the import hook serves it under module
paths. It knows nothing of how the names are installed or served.
"""

from __future__ import annotations

from typing import Any, Mapping

import tensorflow as tf

from tpu_estimator_compat import config as config_lib
from tpu_estimator_compat import spec as spec_lib
from tpu_estimator_compat import tpu_config as tpu_config_lib
from tpu_estimator_compat.api import estimator as estimator_lib
from tpu_estimator_compat.api import train_and_eval as training_lib
from tpu_estimator_compat.checkpoint import warm_start as warm_start_lib
from tpu_estimator_compat.embedding import config as embedding_config
from tpu_estimator_compat.export import saved_model as export_lib
from tpu_estimator_compat.legacy.namespaces import (AliasNamespace, unavailable_class,
                                                    unavailable_function)

_ESTIMATOR_MODULE = "tensorflow.compat.v1.estimator"
# Every importable name of the estimator namespace (the nested API roots such as
# `tf.compat.v2.compat.v1` are attributes only: no code imports them by module name).
ESTIMATOR_MODULE_NAMES = (_ESTIMATOR_MODULE, "tensorflow.estimator",
                          "tensorflow.compat.v2.estimator")

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



def tpu_estimator_members() -> dict[str, Any]:
    """TPUEstimator and its configuration and spec: legacy `tf.estimator.tpu`'s own names."""
    return {"InputPipelineConfig": tpu_config_lib.InputPipelineConfig,
            "RunConfig": config_lib.RunConfig, "TPUConfig": tpu_config_lib.TPUConfig,
            "TPUEstimator": estimator_lib.TPUEstimator,
            "TPUEstimatorSpec": spec_lib.TPUEstimatorSpec}


# Aliased from the library when present at `install_aliases()` time, else a stub that raises.
_TRAINING_NAMES = ("train_and_evaluate", "TrainSpec", "EvalSpec", "LatestExporter",
                   "BestExporter")  # All in api/train_and_eval.py.

ESTIMATOR_HINT = (
    "tpu_estimator_compat runs `Estimator` and `TPUEstimator`: the canned estimators are not "
    "provided yet. Run a plain model_fn with `tf.estimator.Estimator(model_fn=...)`.")


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
_UNAVAILABLE_CLASSES: dict[str, dict[str, str]] = {
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
    tpu = AliasNamespace(
        f"{_ESTIMATOR_MODULE}.tpu", "tf.estimator.tpu", "TPUEstimator and its configuration.",
        members={"experimental": _sub_namespace(
                     "tpu.experimental", "TPU embedding.",
                     {"EmbeddingConfigSpec": embedding_config.EmbeddingConfigSpec}),
                 **tpu_estimator_members()},
        hint="Only TPUEstimator, TPUEstimatorSpec, RunConfig, TPUConfig and "
             "InputPipelineConfig are provided.")
    members: dict[str, Any] = {
        "tpu": tpu,
        "export": _sub_namespace("export", "Serving input receivers and export outputs.",
                                 {name: getattr(export_lib, name) for name in _EXPORT_NAMES}),
        "experimental": _sub_namespace("experimental", "Legacy experimental estimators.", {}),
        "inputs": _sub_namespace("inputs", "Legacy numpy/pandas input_fns.", {}),
        "Estimator": estimator_lib.Estimator,
        "ModeKeys": spec_lib.ModeKeys,
        "EstimatorSpec": spec_lib.EstimatorSpec,
        "RunConfig": config_lib.RunConfig,
        "Exporter": training_lib.Exporter,
        "VocabInfo": tf.compat.v1.train.VocabInfo,
    }
    members.update(_unavailable_members(""))
    members.update({name: getattr(tf.compat.v1.train, name) for name in _V1_TRAIN_HOOK_NAMES})
    members.update({name: getattr(training_lib, name) for name in _TRAINING_NAMES})
    members["WarmStartSettings"] = warm_start_lib.WarmStartSettings
    return AliasNamespace(_ESTIMATOR_MODULE, "tf.estimator",
                          "Legacy tf.estimator names served by tpu_estimator_compat.",
                          members=members, hint=ESTIMATOR_HINT)
