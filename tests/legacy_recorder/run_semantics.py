# An r1 TPUEstimator script, written as TF1 users wrote it (no tpu_estimator_compat import).
"""Legacy run semantics real code depends on, recorded on the legacy stack.

    .venv-legacy/bin/python tests/legacy_recorder/run_semantics.py   # records
    (tests/test_warm_start.py and tests/test_inference.py replay them on the shim)

Scenarios (all `TPUEstimator(use_tpu=False)` on scikit-learn's digits: no TPU is available
to record `use_tpu=True`):

* `eval_without_checkpoint`: `evaluate()` and `predict()` on an empty model_dir, then
  `train()` with checkpoints off (the TF guide's TPUEstimator notebook sets
  `save_checkpoints_steps=None`) and `evaluate()` again. Legacy logs "Could not find trained
  model in model_dir" and evaluates freshly initialised variables (`global_step` 0) each
  time. Initialisers carry explicit op seeds, so fresh values are reproducible.
* `init_in_model_fn`: a model_fn calling `init_from_checkpoint({'hidden/': 'hidden/'})`
  before `minimize()` with Momentum: the checkpoint's `hidden/kernel/Momentum` slot exists
  but only the variables built so far are mapped, so the slots start at zero.
* `init_in_scaffold_fn`: the same call inside `scaffold_fn`, which legacy ran after
  model_fn (on its CPU path when building the spec, on TPU after the shard): the slots exist
  by then and are restored too.
* `init_by_name_in_scaffold_fn`: SimCLR's form, a map built inside `scaffold_fn` from the
  graph's collections, `{v.op.name: v.op.name for v in tf.trainable_variables('hidden')}`:
  the collections hold the model's variables there (slots are not trainable, so they start
  at zero). (With `global_variables` TF1 refuses the map: `hidden/bias` is also the scope
  of its slot `hidden/bias/Momentum`.)
* `init_without_checkpoint_in_model_fn` / `..._in_scaffold_fn`: `evaluate()` and `predict()`
  on an empty model_dir with a model_fn that maps every layer from another run's checkpoint
  (`init_from_checkpoint` in model_fn, or in a scaffold_fn returned in every mode), the
  predict step of google-research/language's canine/tydiqa (`--init_checkpoint` pointing
  at a fine-tuned run). Legacy's fresh variables are initialised, and the initialisers are
  the checkpoint's values: the results are the source run's.

Output: tests/goldens/run_semantics/legacy.json (a few kB). The same code runs on the shim once
`tpu_estimator_compat.install_aliases()` has run (`run(scenario, workdir)`).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "goldens",
                   "run_semantics", "legacy.json")
SCENARIOS = ("eval_without_checkpoint", "init_in_model_fn", "init_in_scaffold_fn",
             "init_by_name_in_scaffold_fn", "init_without_checkpoint_in_model_fn",
             "init_without_checkpoint_in_scaffold_fn")
BATCH = 32
SEED = 3


def _digits(n):
    from sklearn.datasets import load_digits

    data = load_digits()
    x = (data.images[:n] / 16.0).astype(np.float32).reshape(n, 64)
    return x, data.target[:n].astype(np.int32)


def _input_fn(params):
    dataset = tf.data.Dataset.from_tensor_slices(_digits(256))
    return dataset.repeat().batch(params["batch_size"], drop_remainder=True)


def _eval_input_fn(params):
    return tf.data.Dataset.from_tensor_slices(_digits(96)).batch(params["batch_size"])


def _predict_input_fn(params):
    return tf.data.Dataset.from_tensor_slices(_digits(8)[0]).batch(params["batch_size"])


def _model_fn(features, labels, mode, params):
    init = params.get("init")
    ckpt = params.get("ckpt")
    hidden = tf.layers.dense(features, 16, activation=tf.nn.relu, name="hidden",
                             kernel_initializer=tf.glorot_uniform_initializer(seed=7))
    logits = tf.layers.dense(hidden, 10, name="logits",
                             kernel_initializer=tf.glorot_uniform_initializer(seed=8))
    scaffold_fn = None
    if init == "model_fn_every_mode":
        tf.train.init_from_checkpoint(ckpt, {"hidden/": "hidden/", "logits/": "logits/"})
    elif init == "scaffold_fn_every_mode":
        def scaffold_fn():
            tf.train.init_from_checkpoint(ckpt, {"hidden/": "hidden/", "logits/": "logits/"})
            return tf.train.Scaffold()
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.tpu.TPUEstimatorSpec(mode, predictions={"logits": logits},
                                                 scaffold_fn=scaffold_fn)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    if init == "model_fn":
        tf.train.init_from_checkpoint(ckpt, {"hidden/": "hidden/"})
    if mode == tf.estimator.ModeKeys.EVAL:
        def metric_fn(labels, logits):
            return {"accuracy": tf.metrics.accuracy(labels, tf.argmax(logits, 1))}

        return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, scaffold_fn=scaffold_fn,
                                                 eval_metrics=(metric_fn, [labels, logits]))
    optimizer = tf.train.MomentumOptimizer(0.1, momentum=0.9)
    train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
    if init == "scaffold_fn":
        def scaffold_fn():
            tf.train.init_from_checkpoint(ckpt, {"hidden/": "hidden/"})
            return tf.train.Scaffold()
    elif init == "scaffold_fn_by_name":
        def scaffold_fn():
            tf.train.init_from_checkpoint(
                ckpt, {v.op.name: v.op.name for v in tf.trainable_variables("hidden")})
            return tf.train.Scaffold()
    return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op,
                                             scaffold_fn=scaffold_fn)


def _estimator(model_dir, params, **config):
    run_config = tf.estimator.tpu.RunConfig(
        model_dir=model_dir, tf_random_seed=SEED,
        tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=1), **config)
    return tf.estimator.tpu.TPUEstimator(
        model_fn=_model_fn, config=run_config, params=params, use_tpu=False,
        train_batch_size=BATCH, eval_batch_size=BATCH, predict_batch_size=BATCH)


def _plain(results):
    return {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in sorted(results.items())}


def _weights(model_dir):
    reader = tf.train.load_checkpoint(model_dir)
    names = ("hidden/kernel", "hidden/kernel/Momentum", "logits/kernel", "global_step")
    return {n: reader.get_tensor(n).tolist() for n in names}


def run(scenario, workdir):
    """Runs one scenario in `workdir`; returns what legacy is compared on (JSON-able)."""
    if scenario == "eval_without_checkpoint":
        model_dir = os.path.join(workdir, "model")
        no_saves = dict(save_checkpoints_steps=None, save_checkpoints_secs=None)
        estimator = _estimator(model_dir, {}, **no_saves)
        out = {"eval_before_train": _plain(estimator.evaluate(_eval_input_fn, steps=3)),
               "predict_before_train": [p["logits"].tolist()
                                        for p in estimator.predict(_predict_input_fn)]}
        estimator.train(_input_fn, max_steps=3)
        out["checkpoint_after_train"] = tf.train.latest_checkpoint(model_dir)
        out["eval_after_train"] = _plain(estimator.evaluate(_eval_input_fn, steps=3))
        return out
    source = os.path.join(workdir, "source")
    _estimator(source, {}).train(_input_fn, max_steps=4)
    if scenario.startswith("init_without_checkpoint_in_"):
        where = scenario[len("init_without_checkpoint_in_"):]
        estimator = _estimator(os.path.join(workdir, "empty"),
                               {"init": f"{where}_every_mode", "ckpt": source})
        return {"eval": _plain(estimator.evaluate(_eval_input_fn, steps=3)),
                "predict": [p["logits"].tolist() for p in estimator.predict(_predict_input_fn)]}
    target = os.path.join(workdir, "target")
    init = {"init_in_model_fn": "model_fn", "init_in_scaffold_fn": "scaffold_fn",
            "init_by_name_in_scaffold_fn": "scaffold_fn_by_name"}[scenario]
    _estimator(target, {"init": init, "ckpt": source}).train(_input_fn, max_steps=5)
    return {"source": _weights(source), "target": _weights(target)}


def main():
    tf.logging.set_verbosity(tf.logging.ERROR)
    recorded = {"tensorflow": tf.__version__}
    for scenario in SCENARIOS:
        with tempfile.TemporaryDirectory() as workdir:
            result = run(scenario, workdir)
            if scenario == "eval_without_checkpoint":
                result.pop("checkpoint_after_train")  # A temporary path: None is checked.
            recorded[scenario] = result
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(recorded, f, indent=1, sort_keys=True)
    print(f"wrote {os.path.abspath(OUT)}")


if __name__ == "__main__":
    sys.exit(main())
