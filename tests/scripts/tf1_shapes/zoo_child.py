# Fixture for tests/test_shapes.py: the model zoo under one process-wide TensorShape mode.
"""python zoo_child.py MODE REPORT.json REPLICAS CASE[,CASE...]

MODE is thrown first, as real scripts do: `baseline` (TF2, nothing switched),
`v2_tensorshape_off` (`tf.compat.v1.disable_v2_tensorshape()`) or `v2_behavior_off`
(`tf.compat.v1.disable_v2_behavior()`: also eager execution, resource variables and control
flow v2 off). Then each zoo case (tests/test_model_zoo.py's CASES) trains, evaluates the
zoo's own input (its last batch is partial) and predicts, on 1 and/or 2 replicas (REPLICAS:
"1", "2" or "1,2"). A second estimator on the same model_dir then evaluates FIXED_ROWS rows
in full batches only, as legacy TPU evaluation required (tensorflow/tpu unet3d's input).

model_fn and metric_fn are wrapped to record the static shapes they were given. Where legacy
gave metric_fn a static batch axis (its TPU path; and every path for full batches) metric_fn
also takes the idiom of tensorflow/tpu unet3d's metrics, `tf.size(x, out_type=tf.float32)`,
which only a fully defined shape allows, as the extra metric `static_size`. Each case's
outcome, or its traceback, goes to REPORT.json; the child exits 0 unless it cannot start.
"""

import functools
import inspect
import json
import os
import sys
import tempfile
import traceback

import numpy as np
import tensorflow as tf

MODE = sys.argv[1]
if MODE == "v2_tensorshape_off":
    tf.compat.v1.disable_v2_tensorshape()
elif MODE == "v2_behavior_off":
    tf.compat.v1.disable_v2_behavior()
elif MODE != "baseline":
    raise SystemExit(f"unknown mode {MODE}")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # tests/: conftest, the zoo.

# For its side effects: the test environment's variables and 8 logical CPUs.
import conftest  # noqa: E402,F401  # pylint: disable=unused-import
import test_model_zoo as tmz  # noqa: E402
import zoo_models as zoo  # noqa: E402
from tpu_estimator_compat.session import strategy as strategy_lib  # noqa: E402

v1 = tf.compat.v1
SEED = 5
FIXED_ROWS = 80  # 2 full global batches of 32, on 1 replica and on 2.


def _first_leaf(nest):
    return tf.nest.flatten(nest)[0] if nest is not None else None


def _axes(tensor):
    """Static axes as the user's code reads them: the type of `shape[-1]` and its values."""
    shape = tensor.shape
    if shape.rank is None:
        return {"rank": None}
    last = shape[-1] if shape.rank else None
    return {"rank": shape.rank, "type": type(last).__name__ if shape.rank else None,
            "dims": shape.as_list()}


def observed(case, seen, key, static_metric):
    """The case's model_fn, recording what it saw under `key` (with the mode).

    `static_metric` wraps its eval metric_fn (`_static_metric_fn`).
    """
    model_fn = case.model_fn
    signature = inspect.signature(model_fn)

    @functools.wraps(model_fn)
    def wrapper(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        mode = bound.arguments["mode"]
        features = bound.arguments["features"]
        entry = _axes(_first_leaf(features))
        if MODE != "baseline" and entry.get("rank"):
            # TF1 code reads static axes as Dimensions: `x.shape[-1].value`.
            entry["last_value"] = _first_leaf(features).shape[-1].value
        seen.setdefault("model_fn", {}).setdefault(f"{key}/{mode}", []).append(entry)
        spec = model_fn(*args, **kwargs)
        if mode == zoo.EVAL and spec.eval_metrics is not None and static_metric:
            builds = seen.setdefault("metric_fn", {}).setdefault(key, [])
            spec = spec._replace(eval_metrics=(
                _static_metric_fn(spec.eval_metrics[0], builds), spec.eval_metrics[1]))
        return spec

    return wrapper


def _static_metric_fn(metric_fn, builds):
    """metric_fn recording each build's axes in `builds`, with unet3d's static idiom."""
    def wrapper(*args, **kwargs):
        leaf = _first_leaf(list(args) + [kwargs[k] for k in sorted(kwargs)])
        builds.append(_axes(leaf))
        metrics = dict(metric_fn(*args, **kwargs))
        # tensorflow/tpu unet3d metrics.adaptive_dice32: a float size needs a static shape.
        metrics["static_size"] = v1.metrics.mean(tf.size(leaf, out_type=tf.float32))
        return metrics
    return wrapper


def fixed_batches(input_fn):
    """The zoo's eval input_fn with every batch full, as legacy TPU evaluation needed."""
    def fixed(params):
        return input_fn(params).unbatch().take(FIXED_ROWS).batch(params["batch_size"],
                                                                 drop_remainder=True)
    return fixed


def run_case(name, replicas):
    case = tmz.CASES[name]
    seen = {}
    case = tmz.dataclasses.replace(case, config=dict(case.config, tf_random_seed=SEED))
    strategy = (tf.distribute.get_strategy() if replicas == 1 else strategy_lib.mirrored_over(
        [d.name for d in tf.config.list_logical_devices("CPU")[:replicas]]))
    model_dir = tempfile.mkdtemp(prefix=f"{name}_{replicas}_")
    out = {"steps": []}
    try:
        # Legacy TPU gave metric_fn a static batch axis; its CPU path gave model_fn's.
        on_tpu = case.use_tpu and case.eval_on_tpu
        est = tmz.make_estimator(tmz.dataclasses.replace(
            case, model_fn=observed(case, seen, "zoo", on_tpu)), strategy, model_dir)
        est.train(case.train_input, max_steps=tmz.STEPS)
        out["steps"].append("train")
        out["eval"] = _floats(est.evaluate(case.eval_input))
        out["steps"].append("evaluate")
        predictions = list(est.predict(case.predict_input))
        out["predictions"] = [
            {k: np.asarray(v).tolist() for k, v in p.items()} if isinstance(p, dict)
            else np.asarray(p).tolist() for p in predictions]
        out["steps"].append("predict")
        fixed = tmz.make_estimator(tmz.dataclasses.replace(
            case, model_fn=observed(case, seen, "fixed", True)), strategy, model_dir)
        out["eval_fixed"] = _floats(fixed.evaluate(fixed_batches(case.eval_input)))
        out["steps"].append("evaluate_fixed")
    except Exception:  # pylint: disable=broad-except  # Reported, then the next case.
        out["error"] = traceback.format_exc()
    out["seen"] = seen
    return out


def _floats(results):
    return {k: float(v) for k, v in results.items()}


def main():
    report_path, replica_counts, names = sys.argv[2], sys.argv[3], sys.argv[4].split(",")
    report = {"mode": MODE, "dimension": isinstance(tf.TensorShape([1])[0],
                                                     tf.compat.v1.Dimension),
              "eager": tf.executing_eagerly(), "cases": {}}
    for replicas in (int(r) for r in replica_counts.split(",")):
        for name in names:
            report["cases"][f"{name}@{replicas}"] = run_case(name, replicas)
    with open(report_path, "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main()
