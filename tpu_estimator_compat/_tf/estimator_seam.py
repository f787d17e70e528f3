"""What tensorflow-estimator 2.15.0's model code needs of TensorFlow that TF 2.16 removed.

    from tpu_estimator_compat._tf import estimator_seam
    estimator_seam.install()     # before the real package's first module is imported

The library serves its own modules at tensorflow-estimator's engine paths (the estimator,
its run config, training, the TPU modules: `legacy/estimator_map.py`), and lets the package's
model code (canned estimators, heads, early stopping, export helpers) import normally. That
code still needs two TensorFlow names TF 2.16 dropped together with the Estimator:

- `tf_export.ESTIMATOR_API_NAME` and its entries in `API_ATTRS` / `API_ATTRS_V1`:
  `estimator_export.py` (imported by `mode_keys.py`, so by every model module) subclasses
  `tf_export.api_export` with `api_name=ESTIMATOR_API_NAME`, and the decorator looks the name
  up in both tables. The attribute names are TF 2.15's own, so decorated symbols carry the
  same `_estimator_api_names` as on the legacy stack.
- `tensorflow.python.distribute.estimator_training`: the package's generated API tree and its
  `training.py` / `run_config.py` / `estimator.py` import it. Those three are served by this
  library; the import hook serves the module's RunConfig side at that path
  (`legacy/estimator_training.py`, which the package's own tests call). Without the hook an
  empty module lets any straggler import.

`install()` adds only what is absent (a TensorFlow that still has them is left alone) and is
idempotent. It is called by the import hook when the real package is about to be imported,
never at `import tpu_estimator_compat` (which must not import TensorFlow). It rebinds nothing
TensorFlow already has, which is why it is not a patch of `patch_table.py` (those replace a
binding and restore it; these names are added once and stay).
"""

from __future__ import annotations

import sys
import threading
import types

ESTIMATOR_API_NAME = "estimator"
# TF 2.15's attribute names (tensorflow/python/util/tf_export.py: API_ATTRS, API_ATTRS_V1).
_API_ATTRS = ("_estimator_api_names", "_estimator_api_constants")
_API_ATTRS_V1 = ("_estimator_api_names_v1", "_estimator_api_constants_v1")
ESTIMATOR_TRAINING = "tensorflow.python.distribute.estimator_training"

_lock = threading.Lock()


def _install_api_name() -> None:
    from tensorflow.python.util import tf_export  # pylint: disable=g-direct-tensorflow-import

    if not hasattr(tf_export, "ESTIMATOR_API_NAME"):
        tf_export.ESTIMATOR_API_NAME = ESTIMATOR_API_NAME
    name = tf_export.ESTIMATOR_API_NAME
    # pylint: disable=protected-access  # `_Attributes` is the tables' own value type.
    tf_export.API_ATTRS.setdefault(name, tf_export._Attributes(*_API_ATTRS))
    tf_export.API_ATTRS_V1.setdefault(name, tf_export._Attributes(*_API_ATTRS_V1))


def _install_estimator_training() -> None:
    import importlib.util

    import tensorflow.python.distribute as distribute  # pylint: disable=g-direct-tensorflow-import

    if ESTIMATOR_TRAINING in sys.modules:
        return
    if importlib.util.find_spec(ESTIMATOR_TRAINING):  # TF's own, or the import hook's.
        importlib.import_module(ESTIMATOR_TRAINING)
        return
    module = types.ModuleType(
        ESTIMATOR_TRAINING,
        "Stand-in for TF 2.15's distribute coordinator glue of the legacy Estimator engine "
        "(tpu_estimator_compat serves the modules that called it).")
    module.__file__ = __file__
    sys.modules[ESTIMATOR_TRAINING] = module
    setattr(distribute, "estimator_training", module)


_gauges: dict[str, object] = {}


def api_gauges() -> tuple[object, object]:
    """(`_estimator_api_gauge`, `_canned_estimator_api_gauge`) of legacy `estimator.py`.

    The canned estimators' constructors record their kind on the second
    (`estimator._canned_estimator_api_gauge.get_cell('Classifier').set('DNN')`), so the module
    served at that path must carry both. TensorFlow's monitoring cells are private
    (`tensorflow.python.eager.monitoring`); the metric names are legacy's, made once per
    process (TensorFlow refuses a second metric of the same name).
    """
    from tensorflow.python.eager import monitoring  # pylint: disable=g-direct-tensorflow-import

    with _lock:
        if not _gauges:
            _gauges["api"] = monitoring.BoolGauge(
                "/tensorflow/api/estimator", "estimator api usage", "method")
            _gauges["canned"] = monitoring.StringGauge(
                "/tensorflow/api/estimator/canned_estimator",
                "Gauge to track the type of canned estimator used", "ClassType")
        return _gauges["api"], _gauges["canned"]


def install() -> None:
    """Adds the names above where this TensorFlow lacks them. Idempotent."""
    with _lock:
        _install_api_name()
        _install_estimator_training()

