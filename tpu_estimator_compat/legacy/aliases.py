"""Legacy names for unchanged TF1 scripts: `install_aliases()` and the patches it applies.

    import tpu_estimator_compat
    tpu_estimator_compat.install_aliases()
    import tensorflow.compat.v1 as tf
    from tensorflow.compat.v1 import estimator as tf_estimator   # now resolves
    tf_estimator.tpu.TPUEstimator is tpu_estimator_compat.TPUEstimator   # True

This module owns `install_aliases()`, the one function that puts the legacy namespaces onto
the real TensorFlow modules through `_tf/patches.py` (the `aliases.*` patches, whose
replacements are built here): `tf.compat.v1.estimator` (`estimator_names.py`),
`tf.compat.v1.contrib` (`contrib_namespace.py`, from the table of `contrib_map.py`), the
no-crash `TPUClusterResolver` (`cluster/tpu_resolver.py`) and the TPU embedding parameter
classes TF 2.21 dropped; then it installs the import hook (`import_hook.py`), which serves the same namespaces under module paths such as `tensorflow.contrib.tpu`. Nothing
happens at import time. It must not know about scripts or TF1 mode (`tf1_mode.py`), nor what
the namespaces hold or how the estimator runs.
"""

from __future__ import annotations

import importlib
import sys
import threading
from typing import Any, Callable

from tpu_estimator_compat._tf import patches as _tf_patches
from tpu_estimator_compat import log as logging
from tpu_estimator_compat.cluster import tpu_resolver
from tpu_estimator_compat.legacy import contrib_namespace as contrib_tree_lib
from tpu_estimator_compat.legacy import estimator_names
from tpu_estimator_compat.legacy import import_hook
from tpu_estimator_compat.legacy import namespaces as namespaces_lib


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
_built_lock = threading.Lock()
_built: dict[str, Any] = {}


def _namespaces() -> dict[str, Any]:
    """The `estimator` (v1), `estimator_v2` and `contrib` namespaces, built once per process.

    Built once so that `sys.modules` and the `_tf_patches` builders below hand out the same
    objects, however often the patches are installed and uninstalled.
    """
    with _built_lock:
        if not _built:
            estimators = estimator_names.build_estimator_namespaces()
            _built.update(estimator=estimators["v1"], estimator_v2=estimators["v2"],
                          contrib=contrib_tree_lib.ContribTree().root())
        return dict(_built)


def estimator_namespace(original: Any) -> namespaces_lib.AliasNamespace:
    """The replacement of patch `aliases.estimator`: legacy's `tf.compat.v1.estimator`."""
    del original  # Absent on TF 2.16+.
    return _namespaces()["estimator"]


def estimator_v2_namespace(original: Any) -> namespaces_lib.AliasNamespace:
    """The replacement of patch `aliases.estimator_v2`: legacy's v2 `tf.estimator`."""
    del original  # Absent on TF 2.16+.
    return _namespaces()["estimator_v2"]


def _register_estimator_modules(namespaces: dict[str, Any]) -> None:
    """`tensorflow[.compat.v1|.compat.v2].estimator[.tpu|.export]` in `sys.modules`, which
    `from tensorflow.compat.v1 import estimator` needs: each root's own namespace."""
    roots = [(base, namespaces["estimator"])
             for base in estimator_names.ESTIMATOR_MODULE_NAMES_V1]
    roots += [(base, namespaces["estimator_v2"])
              for base in estimator_names.ESTIMATOR_MODULE_NAMES_V2]
    for base, estimator in roots:
        sys.modules[base] = estimator
        sys.modules[f"{base}.tpu"] = estimator.tpu
        sys.modules[f"{base}.export"] = estimator.export
        estimator.__dict__["__path__"] = []  # Packages: submodules resolve through the hook.
        estimator.tpu.__dict__["__path__"] = []
        estimator.export.__dict__["__path__"] = []


def contrib_namespace(original: Any) -> Any:
    """The replacement of patch `aliases.contrib`: the legacy `tf.contrib` namespace."""
    del original  # Absent on TF2.
    return _namespaces()["contrib"]


def no_crash_tpu_cluster_resolver(original: Any) -> type:
    """The replacement of patch `aliases.TPUClusterResolver` (see
    `tpu_resolver.TPUClusterResolver`)."""
    del original  # The replacement finds the real class itself (`_real_resolver_class`).
    return tpu_resolver.TPUClusterResolver


def install_aliases() -> None:
    """Puts the legacy names onto the real TensorFlow modules. Idempotent.

    Sets `tf.compat.v1.estimator` (legacy's v1 namespace) and `tf.estimator` and
    `tf.compat.v2.estimator` (its v2 namespace: the `V2` canned classes), also on the nested
    roots (`tf.compat.v2.compat.v1.estimator`, ...), and registers
    `tensorflow[.compat.v1|.compat.v2].estimator[.tpu|.export]` in `sys.modules`, which
    `from tensorflow.compat.v1 import estimator` needs; `tf.compat.v1.contrib` (also on the
    nested v1 roots); and replaces
    `tf.compat.v1.distribute.cluster_resolver.TPUClusterResolver` with the no-crash resolver,
    and adds the TPU embedding optimization parameter classes
    TF 2.21 dropped (`tf.compat.v1.tpu.experimental.AdagradParameters`, ...), and lets
    `tf.compat.v1.summary.FileWriter` be built with eager execution on
    (`contrib/v1_file_writer.py`).
    The TF2 `tf.distribute.cluster_resolver` is left alone: third-party TF2 code probes for a
    TPU by catching its ValueError. `tf.compat.v1.flags`, `.app` and `.logging` already exist.
    Last, it installs `import_hook.LegacyModuleFinder`, which serves `tensorflow.contrib.*`,
    `tensorflow_estimator.*` and `tensorflow.python.estimator.*` as modules.
    """
    with _lock:
        if namespaces_lib.installed():
            return
        # `import tensorflow.compat.v1`/`v2` re-executes the API module under that name and
        # rebinds `tf.compat.v1`/`v2` to the new object: import both first, so the aliases
        # land on the objects every later import returns.
        import tensorflow.compat.v1  # noqa: F401
        import tensorflow.compat.v2  # noqa: F401

        namespaces = _namespaces()
        _register_estimator_modules(namespaces)
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
        # internals TF 2.21 moved (contrib/tf_slim.py).
        _tf_patches.install("tf_slim_support")
        # TF1 eval loops write Summary protos through a v1 FileWriter with eager still on
        # (contrib/v1_file_writer.py).
        _tf_patches.install("v1_file_writer")
        namespaces_lib.set_installed(namespaces)
        import_hook.install_finder()
        logging.debug("Installed tf.estimator, tf.compat.v1.estimator, tf.compat.v1.contrib "
                      "and the no-crash TPUClusterResolver aliases.")
