# A TF2 script using the canned estimators as legacy TF2 users did (no tpu_estimator_compat).
"""Legacy's two estimator namespaces and what a v2 canned classifier saves.

    TF_ENABLE_ONEDNN_OPTS=0 /work/main/.venv-legacy/bin/python \\
        tests/legacy_recorder/estimator_namespaces.py   # records
    (tests/test_estimator_namespaces.py and tests/test_canned_import.py replay it)

On TF 2.15 + tensorflow-estimator 2.15.0 `tf.estimator` (and `tf.compat.v2.estimator`) is the
package's `_api.v2` tree and `tf.compat.v1.estimator` its `_api.v1` tree: the same names mostly,
but at v2 the canned classes are the `V2` ones (`DNNClassifier` is `canned.dnn.DNNClassifierV2`)
and some names exist in one tree only. Recorded:

* `namespaces`: for `v1` (`tf.compat.v1.estimator`) and `v2` (`tf.estimator`), every
  sub-namespace's public names, each with the `module:qualname` of the object it is.
* `v2_is_compat_v2`: whether `tf.compat.v2.estimator` is `tf.estimator`'s tree.
* `canned`: `DNNClassifier` reached at each root, on scikit-learn's digits (64 rows, batch 32,
  a numeric column `pixels`, hidden units [16], 10 classes), trained 2 steps with a Keras
  legacy `Adagrad` instance at v2 and a v1 `AdagradOptimizer` at v1, then evaluated 1 step:
  the checkpoint's variable names and shapes, and `evaluate()`'s keys.
* `keras_new_optimizer`: the error legacy's v2 class gave for a (non-legacy)
  `tf.keras.optimizers.Adam()` instance (model_fn runs in a graph).

Output: tests/goldens/estimator_namespaces/legacy.json.
"""

from __future__ import annotations

import json
import os
import tempfile
import types

import numpy as np
import tensorflow as tf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "goldens",
                   "estimator_namespaces", "legacy.json")
SUBSPACES = ("", "tpu", "tpu.experimental", "export", "experimental", "inputs")


def _target(obj) -> str:
    module = getattr(obj, "__module__", None) or ""
    return f"{module}:{getattr(obj, '__qualname__', type(obj).__name__)}"


def _namespace(root) -> dict:
    """{sub-namespace: {name: target}}, module members recorded as sub-namespaces."""
    found = {}
    for sub in SUBSPACES:
        obj = root
        try:
            for part in filter(None, sub.split(".")):
                obj = getattr(obj, part)
        except AttributeError:
            continue
        names = {}
        for name in sorted(n for n in dir(obj) if not n.startswith("_")):
            value = getattr(obj, name)
            if isinstance(value, types.ModuleType):
                continue  # A sub-namespace, recorded on its own.
            names[name] = _target(value)
        found[sub] = names
    return found


def _digits():
    from sklearn.datasets import load_digits

    data = load_digits()
    return (data.data[:64] / 16.0).astype(np.float32), data.target[:64].astype(np.int32)


def _input_fn():
    x, y = _digits()
    return tf.data.Dataset.from_tensor_slices(({"pixels": x}, y)).batch(32)


def _classifier(root, optimizer, model_dir):
    columns = [tf.feature_column.numeric_column("pixels", shape=(64,))]
    return root.DNNClassifier([16], columns, n_classes=10, optimizer=optimizer,
                              model_dir=model_dir)


def _canned(root, optimizer) -> dict:
    with tempfile.TemporaryDirectory() as model_dir:
        est = _classifier(root, optimizer, model_dir)
        est.train(_input_fn, steps=2)
        metrics = est.evaluate(_input_fn, steps=1)
        variables = {name: list(shape)
                     for name, shape in tf.train.list_variables(est.latest_checkpoint())}
        return {"class": _target(type(est)), "variables": variables,
                "evaluate_keys": sorted(metrics)}


def _new_optimizer_error() -> str:
    with tempfile.TemporaryDirectory() as model_dir:
        est = _classifier(tf.estimator, tf.keras.optimizers.Adam(), model_dir)
        try:
            est.train(_input_fn, steps=1)
        except ValueError as e:
            return str(e)
    return ""


def main() -> None:
    record = {
        "tensorflow": tf.__version__,
        "namespaces": {"v1": _namespace(tf.compat.v1.estimator),
                       "v2": _namespace(tf.estimator)},
        "v2_is_compat_v2": _namespace(tf.compat.v2.estimator) == _namespace(tf.estimator),
        "canned": {
            "v1": _canned(tf.compat.v1.estimator, tf.compat.v1.train.AdagradOptimizer(0.05)),
            "v2": _canned(tf.estimator, tf.keras.optimizers.legacy.Adagrad(0.05)),
        },
        "keras_new_optimizer": _new_optimizer_error(),
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
