# An r1 canned-estimator script, written as TF1 users wrote it (no tpu_estimator_compat import).
"""canned_parity.py's canned estimators trained and evaluated with
`RunConfig(train_distribute=MirroredStrategy, eval_distribute=...)` over 2 logical CPUs,
recorded on the legacy stack.

    TF_ENABLE_ONEDNN_OPTS=0 .venv-legacy/bin/python tests/legacy_recorder/canned_mirrored.py
    (tests/test_canned_parity.py replays it on the library, after `install_aliases()`)

The cases are canned_parity.py's (DNN v1 and v2, DNNRegressor with Adam, LinearClassifier
on crossed columns, DNNLinearCombined, Baseline, a MultiHead DNNEstimator), started the same
way: the model weights' start values (numpy, seeded per case) written with `SaveV2` under
legacy's names and trained from `warm_start_from=` them (Baseline from zeros).
Each replica takes one batch of BATCH from input_fn's dataset per step (legacy's
`make_input_fn_iterator`), as in evaluation; prediction ran on one device.

Recorded per case: the head's loss tensor fetched by a `train(hooks=...)` hook by its legacy
name (the first replica's), every scalar summary naming a loss (save_summary_steps=1),
`evaluate()`'s metrics (597 digits in batches of 100), 24 predictions and the checkpoint's
names, shapes and values. Run twice; `run_to_run` holds how far the second run drifted
from the first. Output: tests/goldens/canned_mirrored/legacy.json.
"""

from __future__ import annotations

import os
import sys

import tensorflow as tf

# A sibling recorder, found on sys.path as a script or through conftest.legacy_recorder;
# its `_sibling` imports the others later, when that path is gone.
from estimator_mirrored import _sibling

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "goldens",
                   "canned_mirrored", "legacy.json")
CASES = ("dnn_classifier_v1", "dnn_classifier_v2", "dnn_regressor_v1_adam",
         "linear_classifier_v1_crossed", "dnn_linear_combined_classifier_v1",
         "baseline_classifier_v1", "multi_head_v2")
# Legacy's evaluate() under `eval_distribute` fails for a binary head: its
# `accuracy_baseline` metric value is a PerReplica that the final-ops hook cannot fetch
# ("Argument `fetch` = PerReplica ... has invalid type"). Those cases train on 2 replicas
# and evaluate on one device, as a legacy user had to.
EVAL_ON_ONE_DEVICE = {"linear_classifier_v1_crossed", "multi_head_v2"}


def run_case(name, workdir, shapes, mirrored=None):
    """Trains canned_parity's case `name` STEPS steps on 2 replicas, evaluates, predicts.

    `shapes`: the case's model weights {name: shape}; `mirrored`: the 2-replica
    MirroredStrategy (estimator_mirrored's `mirrored2()` when None).
    """
    canned = _sibling("canned_parity")
    helpers = _sibling("estimator_mirrored")
    if mirrored is None:
        mirrored = helpers.mirrored2()
    kind, loss_name, build = canned.CASES[name]
    start = {}
    if name not in canned.ZERO_START:
        os.makedirs(os.path.join(workdir, "start"), exist_ok=True)
        start["warm_start_from"] = canned.write_start(
            name, shapes, os.path.join(workdir, "start", "start"))
    model_dir = os.path.join(workdir, "model")
    config = tf.estimator.RunConfig(
        save_summary_steps=1, train_distribute=mirrored,
        eval_distribute=None if name in EVAL_ON_ONE_DEVICE else mirrored)
    estimator = build(model_dir=model_dir, config=config, **start)
    losses = []
    estimator.train(canned.make_input_fn("train", kind, canned.BATCH, repeat=True),
                    steps=canned.STEPS, hooks=[canned.LossRecorder(loss_name, losses)])
    metrics = estimator.evaluate(canned.make_input_fn("test", kind, 100))
    predictions = list(estimator.predict(canned.predict_input_fn))
    return {
        "losses": helpers.summary_losses(model_dir),
        "replica0_losses": losses,
        "metrics": {k: canned._jsonable(v)[0] for k, v in metrics.items()
                    if k != "global_step"},
        "global_step": int(metrics["global_step"]),
        "predictions": {canned._key(key): [canned._jsonable(p[key]) for p in predictions]
                        for key in sorted(predictions[0])},
        "checkpoint": os.path.basename(estimator.latest_checkpoint()),
        "variables": canned._checkpoint(estimator.latest_checkpoint()),
    }


def main():
    import tempfile

    helpers = _sibling("estimator_mirrored")
    helpers._split_cpu()
    canned = _sibling("canned_parity")
    shapes = {}
    for name in CASES:
        with tempfile.TemporaryDirectory() as scratch:
            shapes[name] = canned.weight_shapes(name, scratch)

    def run_all(workdir):
        return {name: run_case(name, os.path.join(workdir, name), shapes[name])
                for name in CASES}

    golden = helpers.record(run_all)
    golden["shapes"] = {name: {n: list(s) for n, s in shapes[name].items()} for name in CASES}
    helpers.write(golden, OUT)


if __name__ == "__main__":
    main()
