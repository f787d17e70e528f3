# An r1 canned-estimator script, written as TF1 users wrote it (no tpu_estimator_compat import).
"""Canned estimators on scikit-learn's digits, recorded on the legacy stack.

    TF_ENABLE_ONEDNN_OPTS=0 .venv-legacy/bin/python tests/legacy_recorder/canned_parity.py
    (tests/test_canned_parity.py replays it on the library, after `install_aliases()`)

Canned estimators initialise their weights randomly, and a seeded draw depends on the op
count of the graph it is drawn in, so both stacks start from one written start instead:
each case first trains 1 step in a scratch directory (for the names and shapes of its model
weights), then writes those weights' start values (numpy, seeded per case) to a checkpoint
with `SaveV2` and trains from `warm_start_from=` it (BaselineClassifier, whose one bias
starts at zeros, takes no warm start and needs none). The names and shapes go into the golden;
the replay writes the same values the same way.

Recorded per case: the loss of each of STEPS steps (a hook fetching the head's loss tensor by
its legacy name), `evaluate()` over held-out digits (a partial last batch), the predictions
for 24 examples, and the checkpoint's variable names, shapes and values (optimizer slots
included: legacy's names are what a legacy model_dir holds).

Cases: v1 and v2 `DNNClassifier`, v1 `DNNRegressor` with Adam, v1 `LinearClassifier` with a
crossed column (bucketized pixel x vocabulary shade), v1 `DNNLinearCombinedClassifier`, v1
`BaselineClassifier`, and a v2 `DNNEstimator` with a `MultiHead` of two heads.

Then `early_stopping`: `train_and_evaluate` with `stop_if_no_decrease_hook` (the step where
it stops), and `resume`: a v1 DNNClassifier model_dir (committed under
tests/goldens/canned_parity/legacy_model_dir) trained RESUME_STEPS more steps, and a fresh
estimator warm-started from it. Output: tests/goldens/canned_parity/legacy.json.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1
HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN_DIR = os.path.join(HERE, "..", "goldens", "canned_parity")
OUT = os.path.join(GOLDEN_DIR, "legacy.json")
MODEL_DIR = os.path.join(GOLDEN_DIR, "legacy_model_dir")
NUM_TRAIN = 1200
BATCH = 32
STEPS = 8
RESUME_STEPS = 4
_OPTIMIZER_TOKENS = ("global_step", "/t_0/", "/part_0/", "training/", "Adagrad", "Ftrl", "Adam",
                     "beta1_power", "beta2_power")


def _digits(split):
    from sklearn.datasets import load_digits

    data = load_digits()
    x = (data.data / 16.0).astype(np.float32)
    y = data.target.astype(np.int32)
    return (x[:NUM_TRAIN], y[:NUM_TRAIN]) if split == "train" else (x[NUM_TRAIN:],
                                                                    y[NUM_TRAIN:])


def _features(x):
    """The pixels, one pixel as a number, and a string shade of another (a vocabulary)."""
    shade = np.where(x[:, 36] < 0.3, "dark", np.where(x[:, 36] < 0.7, "mid", "light"))
    return {"pixels": x, "p20": x[:, 20:21] * 16.0, "shade": shade.reshape(-1, 1)}


def _labels(y, kind):
    if kind == "regression":
        return y.astype(np.float32).reshape(-1, 1)
    if kind == "binary":
        return (y >= 5).astype(np.int32).reshape(-1, 1)
    if kind == "multi":
        return {"digit": y.reshape(-1, 1), "big": (y >= 5).astype(np.int32).reshape(-1, 1)}
    return y.reshape(-1, 1)


def make_input_fn(split, kind, batch, repeat=False, count=None):
    def input_fn():
        x, y = _digits(split)
        if count is not None:
            x, y = x[:count], y[:count]
        dataset = tf.data.Dataset.from_tensor_slices((_features(x), _labels(y, kind)))
        return (dataset.repeat() if repeat else dataset).batch(batch)
    return input_fn


def predict_input_fn():
    x, _ = _digits("test")
    return tf.data.Dataset.from_tensor_slices(_features(x[:24])).batch(10)


def _pixels():
    return tf.feature_column.numeric_column("pixels", shape=[64])


def _crossed_columns():
    bucketized = tf.feature_column.bucketized_column(
        tf.feature_column.numeric_column("p20"), boundaries=[4.0, 8.0, 12.0])
    shade = tf.feature_column.categorical_column_with_vocabulary_list(
        "shade", ["dark", "mid", "light"])
    crossed = tf.feature_column.crossed_column([bucketized, shade], hash_bucket_size=16)
    return [bucketized, shade, crossed]


def _multi_head():
    return tf.estimator.MultiHead([
        tf.estimator.MultiClassHead(10, name="digit"),
        tf.estimator.BinaryClassHead(name="big")])


# name -> (labels kind, the head's loss tensor in legacy's graph, a builder of the estimator)
CASES = {
    "dnn_classifier_v1": ("classes", "dnn/head/weighted_loss/Sum:0", lambda **kw:
                          v1.estimator.DNNClassifier([16], [_pixels()], n_classes=10, **kw)),
    "dnn_classifier_v2": ("classes", "head/losses/weighted_loss/value:0", lambda **kw:
                          tf.estimator.DNNClassifier([16], [_pixels()], n_classes=10, **kw)),
    "dnn_regressor_v1_adam": ("regression", "dnn/head/weighted_loss/Sum:0", lambda **kw:
                              v1.estimator.DNNRegressor([16], [_pixels()], optimizer="Adam",
                                                        **kw)),
    "linear_classifier_v1_crossed": ("binary", "linear/head/weighted_loss/Sum:0", lambda **kw:
                                     v1.estimator.LinearClassifier(_crossed_columns(), **kw)),
    "dnn_linear_combined_classifier_v1": (
        "classes", "head/weighted_loss/Sum:0", lambda **kw:
        v1.estimator.DNNLinearCombinedClassifier(
            linear_feature_columns=_crossed_columns(), dnn_feature_columns=[_pixels()],
            dnn_hidden_units=[8], n_classes=10, **kw)),
    "baseline_classifier_v1": ("classes", "head/weighted_loss/Sum:0", lambda **kw:
                               v1.estimator.BaselineClassifier(n_classes=10, **kw)),
    "multi_head_v2": ("multi", "digit_big/merge_losses/AddN:0", lambda **kw:
                      tf.estimator.DNNEstimator(_multi_head(), [16], [_pixels()], **kw)),
}


# Their weights start at zeros on both stacks (and BaselineClassifier takes no warm start).
ZERO_START = {"baseline_classifier_v1"}


class LossRecorder(v1.train.SessionRunHook):
    """Fetches the head's loss tensor, by name, at every step."""

    def __init__(self, name, losses):
        self._name, self._losses = name, losses

    def before_run(self, run_context):
        return v1.train.SessionRunArgs(self._name)

    def after_run(self, run_context, run_values):
        self._losses.append(_jsonable(run_values.results)[0])


def _is_model_weight(name):
    return not any(token in name for token in _OPTIMIZER_TOKENS)


def weight_shapes(name, workdir):
    """The names and shapes of the case's model weights, from 1 step in a scratch dir."""
    kind, _, build = CASES[name]
    estimator = build(model_dir=workdir)
    estimator.train(make_input_fn("train", kind, BATCH, repeat=True), steps=1)
    return {n: s for n, s in tf.train.list_variables(workdir) if _is_model_weight(n)}


def write_start(name, shapes, prefix):
    """The start values: numpy draws seeded by the case, saved under legacy's names."""
    rng = np.random.RandomState(sum(map(ord, name)))
    names = sorted(shapes)
    values = [rng.normal(0.0, 0.1, shapes[n]).astype(np.float32) for n in names]
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=values)
    return prefix


def _jsonable(value):
    """A flat list; float32 values as their shortest decimal (they read back exactly)."""
    value = np.asarray(value)
    if value.dtype.kind in "SO":
        return [v.decode() if isinstance(v, bytes) else str(v) for v in value.ravel()]
    if value.dtype == np.float32:
        return [float(str(v)) for v in value.ravel()]
    return value.ravel().tolist()


def _key(key):
    return "/".join(key) if isinstance(key, tuple) else key  # MultiHead's (head, key).


def _checkpoint(path):
    reader = tf.train.load_checkpoint(path)
    shapes = reader.get_variable_to_shape_map()
    return {n: {"shape": list(shapes[n]),
                "value": _jsonable(reader.get_tensor(n))}
            for n in sorted(shapes)}


def run_case(name, workdir, shapes):
    """Trains STEPS steps from the written start, evaluates and predicts."""
    kind, loss_name, build = CASES[name]
    start = {}
    if name not in ZERO_START:
        start["warm_start_from"] = write_start(name, shapes,
                                               os.path.join(workdir, "start", "start"))
    estimator = build(model_dir=os.path.join(workdir, "model"), **start)
    losses = []
    estimator.train(make_input_fn("train", kind, BATCH, repeat=True), steps=STEPS,
                    hooks=[LossRecorder(loss_name, losses)])
    metrics = estimator.evaluate(make_input_fn("test", kind, 100))
    predictions = list(estimator.predict(predict_input_fn))
    return {
        "losses": losses,
        "metrics": {k: _jsonable(v)[0] for k, v in metrics.items() if k != "global_step"},
        "global_step": int(metrics["global_step"]),
        "predictions": {_key(key): [_jsonable(p[key]) for p in predictions]
                        for key in sorted(predictions[0])},
        "checkpoint": os.path.basename(estimator.latest_checkpoint()),
        "variables": _checkpoint(estimator.latest_checkpoint()),
    }


def run_early_stopping(workdir, shapes):
    """train_and_evaluate with stop_if_no_decrease_hook: the step where training stops."""
    name = "dnn_classifier_v1"
    start = write_start(name, shapes, os.path.join(workdir, "start", "start"))
    config = tf.estimator.RunConfig(save_checkpoints_steps=2, save_summary_steps=2)
    estimator = v1.estimator.DNNClassifier(
        [16], [_pixels()], n_classes=10, optimizer=lambda: v1.train.GradientDescentOptimizer(
            0.05), model_dir=os.path.join(workdir, "model"), config=config,
        warm_start_from=start)
    hook = tf.estimator.experimental.stop_if_no_decrease_hook(
        estimator, "loss", max_steps_without_decrease=4, run_every_secs=None,
        run_every_steps=1)
    losses = []
    train_spec = tf.estimator.TrainSpec(
        make_input_fn("train", "classes", BATCH, repeat=True), max_steps=60,
        hooks=[hook, LossRecorder(CASES[name][1], losses)])
    eval_spec = tf.estimator.EvalSpec(make_input_fn("test", "classes", 50, count=50),
                                      steps=None, throttle_secs=0, start_delay_secs=0)
    tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
    return {"losses": losses, "final_step": int(estimator.get_variable_value("global_step")),
            "eval_losses": _eval_losses(estimator.eval_dir())}


def _eval_losses(eval_dir):
    """(step, loss) of every evaluation written to the eval dir's events."""
    found = []
    for path in sorted(tf.io.gfile.glob(os.path.join(eval_dir, "events.out.tfevents.*"))):
        for event in v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == "loss":
                    loss = _jsonable(np.float32(value.simple_value))[0]
                    found.append([int(event.step), loss])
    return sorted(found)


def resume(model_dir, workdir):
    """From a copy of the legacy model_dir: RESUME_STEPS more steps."""
    kind, loss_name, build = CASES["dnn_classifier_v1"]
    resumed_dir = os.path.join(workdir, "resumed")
    shutil.copytree(model_dir, resumed_dir)
    estimator = build(model_dir=resumed_dir)
    losses = []
    estimator.train(make_input_fn("train", kind, BATCH, repeat=True), steps=RESUME_STEPS,
                    hooks=[LossRecorder(loss_name, losses)])
    return {"losses": losses, "variables": _checkpoint(estimator.latest_checkpoint())}


def warm_start(model_dir, workdir):
    """A fresh estimator `warm_start_from=` the legacy model_dir: RESUME_STEPS steps."""
    kind, loss_name, build = CASES["dnn_classifier_v1"]
    warm = build(model_dir=os.path.join(workdir, "warm"), warm_start_from=model_dir)
    warm_losses = []
    warm.train(make_input_fn("train", kind, BATCH, repeat=True), steps=RESUME_STEPS,
               hooks=[LossRecorder(loss_name, warm_losses)])
    return {"warm_losses": warm_losses, "warm_variables": _checkpoint(warm.latest_checkpoint())}


def write_model_dir(shapes, workdir):
    """The committed legacy model_dir: the v1 DNNClassifier case's STEPS steps, no events."""
    result = run_case("dnn_classifier_v1", workdir, shapes)
    if os.path.exists(MODEL_DIR):
        shutil.rmtree(MODEL_DIR)
    os.makedirs(MODEL_DIR)
    source = os.path.join(workdir, "model")
    prefix = os.path.basename(tf.train.latest_checkpoint(source))
    for entry in os.listdir(source):
        if entry.startswith(prefix + ".") and not entry.endswith(".meta"):
            shutil.copy(os.path.join(source, entry), MODEL_DIR)
    with open(os.path.join(MODEL_DIR, "checkpoint"), "w") as f:
        f.write(f'model_checkpoint_path: "{prefix}"\nall_model_checkpoint_paths: "{prefix}"\n')
    return result


def main():
    golden = {"cases": {}, "shapes": {}}
    for name in CASES:
        with tempfile.TemporaryDirectory() as scratch:
            shapes = weight_shapes(name, scratch)
        golden["shapes"][name] = {n: list(s) for n, s in shapes.items()}
        with tempfile.TemporaryDirectory() as workdir:
            golden["cases"][name] = run_case(name, workdir, shapes)
        print("recorded", name, file=sys.stderr)
    shapes = golden["shapes"]["dnn_classifier_v1"]
    with tempfile.TemporaryDirectory() as workdir:
        golden["early_stopping"] = run_early_stopping(workdir, shapes)
    if not os.environ.get("LEGACY_KEEP_MODEL_DIR"):
        # dev/record_cpu_variant.sh keeps the committed model_dir: a CPU variant resumes
        # and warm-starts from the same files the primary recording did.
        with tempfile.TemporaryDirectory() as workdir:
            write_model_dir(shapes, workdir)
    with tempfile.TemporaryDirectory() as workdir:
        golden["resume"] = resume(MODEL_DIR, workdir)
    with tempfile.TemporaryDirectory() as workdir:
        golden["resume"].update(warm_start(MODEL_DIR, workdir))
    golden["versions"] = {"tensorflow": tf.__version__}
    with open(OUT, "w") as f:
        json.dump(golden, f)
    print("wrote", os.path.relpath(OUT), file=sys.stderr)


if __name__ == "__main__":
    main()
