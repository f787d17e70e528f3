# A Keras-to-Estimator script, written as TF1-era users wrote it (no tpu_estimator_compat import).
"""`tf.keras.estimator.model_to_estimator` on a small `Sequential` of Dense layers, recorded
on the legacy stack in both checkpoint formats.

    TF_ENABLE_ONEDNN_OPTS=0 .venv-legacy/bin/python tests/legacy_recorder/keras_to_estimator.py
    (tests/test_keras_to_estimator.py replays it on the library, after `install_aliases()`)

The model is estimator_plain.py's MLP as Keras layers (input `pixels`, Dense 16 relu, Dense 10
logits), compiled with a legacy Keras Adam, a sparse cross-entropy from logits and
`accuracy`. Its weights are set from estimator_plain's numpy start, so both stacks start from
the same values: model_to_estimator writes them to `model_dir/keras/` and warm-starts from
them. Per format (`saver`: name-based checkpoints; `checkpoint`: object-based ones, the v2
default): `train(steps=6)` twice (the second resumes from the first's checkpoint), then
`evaluate()` (597 held-out digits, a partial last batch) and 40 predictions.

Recorded: each step's `loss` summary (save_summary_steps=1), the metrics, the predictions
(keyed by the output layer's name) and the final checkpoint's names, shapes and values. Run
twice; `run_to_run` holds how far the second run drifted from the first.
Output: tests/goldens/keras_to_estimator/legacy.json.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import tensorflow as tf

# A sibling recorder, found on sys.path as a script or through conftest.legacy_recorder;
# its `_sibling` imports the others later, when that path is gone.
from estimator_mirrored import _sibling

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "goldens",
                   "keras_to_estimator", "legacy.json")
FORMATS = ("saver", "checkpoint")
STEPS_PER_TRAIN = 6


def make_keras_model():
    """The compiled Sequential MLP, holding estimator_plain's numpy start values."""
    plain = _sibling("estimator_plain")
    model = tf.keras.Sequential([
        tf.keras.layers.InputLayer(input_shape=(64,), name="pixels"),
        tf.keras.layers.Dense(plain.HIDDEN, activation="relu", name="hidden"),
        tf.keras.layers.Dense(10, name="logits"),
    ])
    weights = plain._initial_weights()
    model.set_weights([*weights["hidden"], *weights["logits"]])
    model.compile(optimizer=tf.keras.optimizers.legacy.Adam(0.01),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def run(workdir, checkpoint_format):
    """model_to_estimator in `checkpoint_format`; trains twice, evaluates, predicts."""
    plain = _sibling("estimator_plain")
    mirrored = _sibling("estimator_mirrored")
    config = tf.estimator.RunConfig(tf_random_seed=1, save_summary_steps=1)
    estimator = tf.keras.estimator.model_to_estimator(
        keras_model=make_keras_model(), model_dir=workdir, config=config,
        checkpoint_format=checkpoint_format)
    for _ in range(2):
        estimator.train(plain.train_input_fn, steps=STEPS_PER_TRAIN)
    metrics = estimator.evaluate(plain.eval_input_fn)
    predictions = list(estimator.predict(plain.predict_input_fn))
    return {
        "losses": mirrored.summary_losses(workdir),
        "metrics": {k: mirrored.jsonable(np.float32(v))[0] for k, v in metrics.items()
                    if k != "global_step"},
        "global_step": int(metrics["global_step"]),
        "predictions": {key: [mirrored.jsonable(p[key]) for p in predictions]
                        for key in sorted(predictions[0])},
        "checkpoint": os.path.basename(estimator.latest_checkpoint()),
        "variables": mirrored.checkpoint(estimator.latest_checkpoint()),
    }


def run_all(workdir):
    return {fmt: run(os.path.join(workdir, fmt), fmt) for fmt in FORMATS}


def main():
    mirrored = _sibling("estimator_mirrored")
    mirrored.write(mirrored.record(run_all), OUT)


if __name__ == "__main__":
    main()
