"""The legacy estimator namespaces: v1 and v2 (with `tpu`, `export`, `experimental`, `inputs`).

`build_estimator_namespace(v2)` maps every public name (the table is `estimator_map.py`, data
that tools read without TensorFlow) of tensorflow-estimator 2.15.0's `tf.compat.v1.estimator`
or, with `v2`, its `tf.estimator` onto this library (`Estimator`, TPUEstimator, their specs
and configuration, train_and_evaluate, the export receivers), onto TensorFlow (the v1 session
hooks), onto tensorflow-estimator's model code (canned estimators, heads, early stopping:
loaded on first use, built on this library's engine through the import hook) or, without that
package, onto a placeholder that raises with a hint when used. `legacy/aliases.py` installs
both; the import hook serves them under module paths. It knows nothing of how the names are
installed or served.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping

import tensorflow as tf

from tpu_estimator_compat import config as config_lib
from tpu_estimator_compat import spec as spec_lib
from tpu_estimator_compat import tpu_config as tpu_config_lib
from tpu_estimator_compat.api import estimator as estimator_lib
from tpu_estimator_compat.api import train_and_eval as training_lib
from tpu_estimator_compat.checkpoint import warm_start as warm_start_lib
from tpu_estimator_compat.embedding import config as embedding_config
from tpu_estimator_compat.export import saved_model as export_lib
from tpu_estimator_compat.legacy import estimator_map
from tpu_estimator_compat.legacy.namespaces import (AliasNamespace, LegacySymbolError,
                                                    installed, unavailable_class,
                                                    unavailable_function)

_ESTIMATOR_MODULE = estimator_map.ESTIMATOR_MODULE
ESTIMATOR_MODULE_NAMES = estimator_map.ESTIMATOR_MODULE_NAMES
ESTIMATOR_MODULE_NAMES_V1 = estimator_map.ESTIMATOR_MODULE_NAMES_V1
ESTIMATOR_MODULE_NAMES_V2 = estimator_map.ESTIMATOR_MODULE_NAMES_V2
ESTIMATOR_HINT = estimator_map.ESTIMATOR_HINT


def tpu_estimator_members() -> dict[str, Any]:
    """TPUEstimator and its configuration and spec: legacy `tf.estimator.tpu`'s own names."""
    return {"InputPipelineConfig": tpu_config_lib.InputPipelineConfig,
            "RunConfig": config_lib.RunConfig, "TPUConfig": tpu_config_lib.TPUConfig,
            "TPUEstimator": estimator_lib.TPUEstimator,
            "TPUEstimatorSpec": spec_lib.TPUEstimatorSpec}


def _unavailable_members(namespace: str, v2: bool = False) -> dict[str, Any]:
    prefix = "tf.estimator." + (f"{namespace}." if namespace else "")
    classes = estimator_map.UNAVAILABLE_CLASSES.get(namespace, {})
    return {n: (unavailable_class if n in classes else unavailable_function)(prefix + n, hint)
            for n, hint in estimator_map.refused_names(v2)[namespace].items()}


def _elsewhere_hints(namespace: str, v2: bool) -> dict[str, str]:
    """Hints for the names only the other legacy namespace had (`tf.estimator.experimental.
    KMeans` was v1's): the error says where they are."""
    other = (estimator_map.V1_ONLY_NAMES if v2 else estimator_map.V2_ONLY_NAMES)
    return {n: estimator_map.only_elsewhere_hint(namespace, n, v2)
            for n in other.get(namespace, ())}


def _package_loader(target: str) -> Callable[[], Any]:
    """Loads `module:attribute` of tensorflow-estimator's tree on first use.

    The package's model modules import its engine paths, which the import hook serves from
    this library; without the hook they would load the package's own engine, which does not
    import on this TensorFlow. So the load refuses until `install_aliases` has run.
    """
    module, _, attribute = target.partition(":")

    def load() -> Any:
        if not installed():
            raise LegacySymbolError(
                f"`{estimator_map.TFE_PRIVATE}.{module}.{attribute}` is served on this "
                "library's engine once legacy names are installed: call "
                "`tpu_estimator_compat.install_aliases()` first.")
        return getattr(importlib.import_module(f"{estimator_map.TFE_PRIVATE}.{module}"),
                       attribute)

    return load


def _package_members(namespace: str, v2: bool = False) -> dict[str, Callable[[], Any]]:
    """The lazy members tensorflow-estimator supplies, when it is installed."""
    if not estimator_map.package_installed():
        return {}
    return {name: _package_loader(target)
            for name, target in estimator_map.package_names(v2).get(namespace, {}).items()}


def _library_loader(target: str) -> Callable[[], Any]:
    """Loads `module:attribute` of this library on first use (pandas_io imports pandas)."""
    module, _, attribute = target.partition(":")
    return lambda: getattr(importlib.import_module(module), attribute)


def _sub_namespace(name: str, doc: str, members: Mapping[str, Any], v2: bool = False,
                   module: str = _ESTIMATOR_MODULE) -> AliasNamespace:
    lazy = {**_package_members(name, v2),
            **{n: _library_loader(target)
               for n, target in estimator_map.LIBRARY_LAZY_NAMES.get(name, {}).items()}}
    unavailable = {n: v for n, v in _unavailable_members(name, v2).items() if n not in lazy}
    return AliasNamespace(f"{module}.{name}", f"tf.estimator.{name}", doc,
                          members={**unavailable, **members},
                          hint=ESTIMATOR_HINT, lazy=lazy, hints=_elsewhere_hints(name, v2))


def _shared_members() -> dict[str, AliasNamespace]:
    """The sub-namespaces legacy's v1 and v2 namespaces had alike (`export`), or this library
    serves alike (`tpu`, `inputs`: `estimator_map.V2_EXTRA_NAMESPACES`): one module each."""
    tpu = AliasNamespace(
        f"{_ESTIMATOR_MODULE}.tpu", "tf.estimator.tpu", "TPUEstimator and its configuration.",
        members={"experimental": _sub_namespace(
                     "tpu.experimental", "TPU embedding.",
                     {n: getattr(embedding_config, n) for n in estimator_map.EMBEDDING_NAMES}),
                 **tpu_estimator_members()},
        hint=estimator_map.namespace_hint("tpu"))
    return {"tpu": tpu,
            "export": _sub_namespace("export", "Serving input receivers and export outputs.",
                                     {name: getattr(export_lib, name)
                                      for name in estimator_map.EXPORT_NAMES}),
            "inputs": _sub_namespace("inputs", "Legacy numpy/pandas input_fns.", {})}


def build_estimator_namespace(v2: bool = False,
                              shared: Mapping[str, AliasNamespace] | None = None
                              ) -> AliasNamespace:
    """Builds `tf.compat.v1.estimator` or, with `v2`, the v2 `tf.estimator` (with `.tpu`,
    `.export`, `.experimental` and `.inputs`) over this library.

    The two differ as legacy's did: the v2 one serves the package's `V2` canned classes and
    parse-spec functions (`estimator_map.PACKAGE_NAMES_V2`), and each has the `experimental`
    names only its legacy namespace had. `shared` gives the sub-namespaces both hold alike.
    """
    module = estimator_map.ESTIMATOR_MODULE_V2 if v2 else _ESTIMATOR_MODULE
    members: dict[str, Any] = {
        **(shared or _shared_members()),
        "experimental": _sub_namespace("experimental", "Legacy experimental estimators.",
                                       {"call_logit_fn": spec_lib.call_logit_fn}, v2, module),
        "Estimator": estimator_lib.Estimator,
        "ModeKeys": spec_lib.ModeKeys,
        "EstimatorSpec": spec_lib.EstimatorSpec,
        "RunConfig": config_lib.EstimatorRunConfig,  # tf.estimator.tpu's: config.RunConfig.
        "Exporter": training_lib.Exporter,
        "VocabInfo": tf.compat.v1.train.VocabInfo,
    }
    members.update(_unavailable_members("", v2))
    members.update({name: getattr(tf.compat.v1.train, name)
                    for name in estimator_map.V1_TRAIN_HOOK_NAMES})
    members.update({name: getattr(training_lib, name) for name in estimator_map.TRAINING_NAMES})
    members["WarmStartSettings"] = warm_start_lib.WarmStartSettings
    doc = ("Legacy tf.estimator (v2) names served by tpu_estimator_compat." if v2 else
           "Legacy tf.compat.v1.estimator names served by tpu_estimator_compat.")
    return AliasNamespace(module, "tf.estimator", doc, members=members, hint=ESTIMATOR_HINT,
                          lazy=_package_members("", v2))


def build_estimator_namespaces() -> dict[str, AliasNamespace]:
    """{'v1': ..., 'v2': ...}: both namespaces, sharing their common sub-namespaces."""
    shared = _shared_members()
    return {"v1": build_estimator_namespace(False, shared),
            "v2": build_estimator_namespace(True, shared)}
