"""scaffold_fn + init_from_checkpoint (the BERT pattern) and warm_start_from, values checked."""

import os

import numpy as np
import pytest
import tensorflow as tf

import models
from tpu_estimator_compat import (EstimatorSpec, RunConfig, TPUConfig, TPUEstimator,
                                  TPUEstimatorSpec)
from tpu_estimator_compat.checkpoint.warm_start import WarmStartSettings
from tpu_estimator_compat.export import serving

v1 = tf.compat.v1


def write_pretrained(path):
    """A checkpoint from 'another model': encoder/w and encoder/b under other names + extras."""
    rng = np.random.RandomState(0)
    values = {"bert/encoder/w": rng.randn(64, 10).astype(np.float32),
              "bert/encoder/b": rng.randn(10).astype(np.float32),
              "cls/other": np.ones([3], np.float32)}
    with tf.Graph().as_default(), v1.Session() as sess:
        variables = [v1.get_variable(k, initializer=v) for k, v in values.items()]
        sess.run(v1.global_variables_initializer())
        v1.train.Saver(variables).save(sess, path)
    return values


def encoder_model_fn(features, labels, mode, params):
    with v1.variable_scope("bert/encoder"):
        w = v1.get_variable("w", [64, 10], initializer=v1.zeros_initializer())
        b = v1.get_variable("b", [10], initializer=v1.zeros_initializer())
    head = v1.get_variable("head", [10], initializer=v1.zeros_initializer())
    logits = tf.matmul(features, w) + b + head
    loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    train_op = v1.train.GradientDescentOptimizer(0.0).minimize(
        loss, global_step=v1.train.get_global_step())
    init_checkpoint = params.get("init_checkpoint")
    scaffold_fn = None
    if init_checkpoint and params["where"] == "scaffold":
        def scaffold_fn():
            v1.train.init_from_checkpoint(init_checkpoint, {"bert/": "bert/"})
            return v1.train.Scaffold()
    elif init_checkpoint:
        v1.train.init_from_checkpoint(init_checkpoint,
                                      {"bert/encoder/w": "bert/encoder/w",
                                       "bert/encoder/b": "bert/encoder/b"})
    return TPUEstimatorSpec(mode, loss=loss, train_op=train_op, scaffold_fn=scaffold_fn)


@pytest.mark.parametrize("where", ["scaffold", "model_fn"])
def test_init_from_checkpoint_loads_values(tmp_path, strategy, where):
    pretrained = write_pretrained(str(tmp_path / "pretrained" / "model.ckpt"))
    config = RunConfig(model_dir=str(tmp_path / "run"), train_distribute=strategy,
                       tpu_config=TPUConfig(iterations_per_loop=1))
    est = TPUEstimator(model_fn=encoder_model_fn, config=config, train_batch_size=64,
                       params={"init_checkpoint": str(tmp_path / "pretrained" / "model.ckpt"),
                               "where": where})
    est.train(models.digits_input_fn(64, flat=True), steps=1)  # lr 0: values stay.
    reader = tf.train.load_checkpoint(str(tmp_path / "run" / "model.ckpt-0"))
    np.testing.assert_array_equal(reader.get_tensor("bert/encoder/w"), pretrained["bert/encoder/w"])
    np.testing.assert_array_equal(reader.get_tensor("bert/encoder/b"), pretrained["bert/encoder/b"])
    np.testing.assert_array_equal(reader.get_tensor("head"), np.zeros([10], np.float32))


@pytest.mark.parametrize("where", ["scaffold", "model_fn"])
def test_predict_without_checkpoint_applies_init_from_checkpoint(tmp_path, strategy, where):
    """predict() on a model_dir with no checkpoint ("running initialization to predict"):
    init_from_checkpoint set the initializers in legacy's fresh graph, so the predictions
    come from the init checkpoint (canine/tydiqa run_tydi.py --do_predict
    --init_checkpoint=<fine-tuned model>)."""
    pretrained = write_pretrained(str(tmp_path / "pretrained" / "model.ckpt"))

    def model_fn(features, mode, params):
        with v1.variable_scope("bert/encoder"):
            w = v1.get_variable("w", [64, 10], initializer=v1.zeros_initializer())
            b = v1.get_variable("b", [10], initializer=v1.zeros_initializer())
        amap = {"bert/": "bert/"}
        scaffold_fn = None
        if where == "scaffold":
            def scaffold_fn():
                v1.train.init_from_checkpoint(params["init_checkpoint"], amap)
                return v1.train.Scaffold()
        else:
            v1.train.init_from_checkpoint(params["init_checkpoint"], amap)
        return TPUEstimatorSpec(mode, predictions={"logits": tf.matmul(features, w) + b},
                                scaffold_fn=scaffold_fn)

    config = RunConfig(model_dir=str(tmp_path / "run"), eval_distribute=strategy,
                       tpu_config=TPUConfig(iterations_per_loop=1))
    est = TPUEstimator(model_fn=model_fn, config=config, train_batch_size=64,
                       predict_batch_size=64,
                       params={"init_checkpoint": str(tmp_path / "pretrained" / "model.ckpt")})
    x, _ = models.digits(64, flat=True)
    logits = np.stack([p["logits"] for p in est.predict(
        lambda params: tf.data.Dataset.from_tensor_slices(x).batch(params["batch_size"]))])
    np.testing.assert_allclose(
        logits, x @ pretrained["bert/encoder/w"] + pretrained["bert/encoder/b"],
        rtol=1e-5, atol=1e-5)



def test_init_from_checkpoint_ignored_when_model_dir_has_checkpoint(tmp_path, strategy):
    write_pretrained(str(tmp_path / "pretrained" / "model.ckpt"))
    config = RunConfig(model_dir=str(tmp_path / "run"), train_distribute=strategy,
                       tpu_config=TPUConfig(iterations_per_loop=1))
    plain = TPUEstimator(model_fn=encoder_model_fn, config=config, train_batch_size=64,
                         params={"where": "scaffold"})
    plain.train(models.digits_input_fn(64, flat=True), steps=1)
    again = TPUEstimator(model_fn=encoder_model_fn, config=config, train_batch_size=64,
                         params={"init_checkpoint": str(tmp_path / "pretrained" / "model.ckpt"),
                                 "where": "scaffold"})
    again.train(models.digits_input_fn(64, flat=True), steps=1)
    w = tf.train.load_checkpoint(again.latest_checkpoint()).get_tensor("bert/encoder/w")
    np.testing.assert_array_equal(w, np.zeros([64, 10], np.float32))


def test_scaffold_fn_init_fn_runs_for_a_fresh_model_only(tmp_path):
    """Legacy's session manager ran it once, for the session that restored no checkpoint
    (tests/test_scaffold_parts.py checks what it restores against legacy's)."""
    calls = []

    def model_fn(features, labels, mode, params):
        spec = encoder_model_fn(features, labels, mode, dict(params, where="x"))
        return spec._replace(scaffold_fn=lambda: v1.train.Scaffold(
            init_fn=lambda scaffold, session: calls.append(session)))

    est = TPUEstimator(model_fn=model_fn, config=RunConfig(model_dir=str(tmp_path)),
                       use_tpu=False, train_batch_size=64)
    est.train(models.digits_input_fn(64, flat=True), steps=1)
    est.train(models.digits_input_fn(64, flat=True), steps=1)
    assert len(calls) == 1 and hasattr(calls[0], "run")


@pytest.mark.slow_cases('mirrored8-<lambda>0')
@pytest.mark.parametrize("settings", [
    lambda d: d,
    lambda d: WarmStartSettings(d, vars_to_warm_start="bert/encoder/w.*",
                                var_name_to_prev_var_name={}),
])
def test_warm_start_from(tmp_path, strategy, settings):
    source = tmp_path / "source"
    config = RunConfig(model_dir=str(source), train_distribute=strategy,
                       tpu_config=TPUConfig(iterations_per_loop=1))
    write_pretrained(str(tmp_path / "pretrained" / "model.ckpt"))
    TPUEstimator(model_fn=encoder_model_fn, config=config, train_batch_size=64,
                 params={"init_checkpoint": str(tmp_path / "pretrained" / "model.ckpt"),
                         "where": "scaffold"}).train(
        models.digits_input_fn(64, flat=True), steps=1)
    target = RunConfig(model_dir=str(tmp_path / "target"), train_distribute=strategy,
                       tpu_config=TPUConfig(iterations_per_loop=1))
    est = TPUEstimator(model_fn=encoder_model_fn, config=target, train_batch_size=64,
                       params={"where": "none"}, warm_start_from=settings(str(source)))
    est.train(models.digits_input_fn(64, flat=True), steps=1)
    src = tf.train.load_checkpoint(str(source / "model.ckpt-1"))
    dst = tf.train.load_checkpoint(str(tmp_path / "target" / "model.ckpt-0"))
    np.testing.assert_array_equal(dst.get_tensor("bert/encoder/w"), src.get_tensor("bert/encoder/w"))
    assert dst.get_tensor("global_step") == 0  # Not a resume: only variables are copied.


def ema_model_fn(features, labels, mode, params):
    """The ResNet/EfficientNet pattern: EMA in training, EMA weights restored for eval."""
    spec = models.linear_full_model_fn(features, labels, mode, params)
    ema = v1.train.ExponentialMovingAverage(0.5, num_updates=v1.train.get_global_step())
    if mode == "train":
        with tf.control_dependencies([spec.train_op]):
            return spec._replace(train_op=ema.apply(v1.trainable_variables()))
    restore = ema.variables_to_restore(v1.trainable_variables())
    return spec._replace(scaffold_fn=lambda: v1.train.Scaffold(saver=v1.train.Saver(restore)))


def ema_in_scaffold_model_fn(features, labels, mode, params):
    """google/automl efficientdet: `ema.variables_to_restore(ema_vars)` inside scaffold_fn."""
    spec = models.linear_full_model_fn(features, labels, mode, params)
    ema = v1.train.ExponentialMovingAverage(0.5, num_updates=v1.train.get_global_step())
    ema_vars = v1.trainable_variables()
    if mode == "train":
        with tf.control_dependencies([spec.train_op]):
            return spec._replace(train_op=ema.apply(ema_vars))

    def scaffold_fn():
        return v1.train.Scaffold(saver=v1.train.Saver(ema.variables_to_restore(ema_vars)))

    return spec._replace(scaffold_fn=scaffold_fn)


@pytest.mark.slow_cases('mirrored8-ema_model_fn', 'mirrored8-ema_in_scaffold_model_fn')
@pytest.mark.parametrize("model_fn", [ema_model_fn, ema_in_scaffold_model_fn])
def test_ema_scaffold_restores_averages_for_predict(tmp_path, strategy, model_fn):
    """Also with `ema.variables_to_restore()` called inside scaffold_fn: legacy called
    scaffold_fn in model_fn's graph, where TF's own version hashed the variables and read
    `v.op.name`, which eager variables refuse."""
    config = RunConfig(model_dir=str(tmp_path), train_distribute=strategy,
                       eval_distribute=strategy, tpu_config=TPUConfig(iterations_per_loop=2))
    est = TPUEstimator(model_fn=model_fn, config=config, train_batch_size=64,
                       eval_batch_size=64, predict_batch_size=64)
    est.train(models.digits_input_fn(256, flat=True), steps=4)
    reader = tf.train.load_checkpoint(est.latest_checkpoint())
    w_ema = reader.get_tensor("w/ExponentialMovingAverage")
    b_ema = reader.get_tensor("b/ExponentialMovingAverage")
    assert not np.allclose(w_ema, reader.get_tensor("w"))
    x, _ = models.digits(64, flat=True)
    predictions = est.predict(
        lambda params: tf.data.Dataset.from_tensor_slices(x).batch(params["batch_size"]))
    logits = np.stack([p["logits"] for p in predictions])
    np.testing.assert_allclose(logits, x @ w_ema + b_ema, rtol=1e-5, atol=1e-5)
    results = est.evaluate(lambda params: tf.data.Dataset.from_tensor_slices(
        models.digits(128, flat=True)).batch(params["batch_size"]))
    assert results["global_step"] == 4




# ----------------------------------------------------------------------------------------
# Legacy run semantics, replayed against tests/goldens/run_semantics/legacy.json
# (recorded by tests/legacy_recorder/run_semantics.py on the legacy stack).

def _run_semantics(scenario, workdir):
    from conftest import legacy_recorder

    recorder, golden = legacy_recorder("run_semantics")
    return recorder.run(scenario, str(workdir)), golden[scenario]


def _assert_same_numbers(shim, legacy, path=""):
    if isinstance(legacy, dict):
        assert sorted(shim) == sorted(legacy), path
        for key in legacy:
            _assert_same_numbers(shim[key], legacy[key], f"{path}/{key}")
    else:
        np.testing.assert_allclose(np.asarray(shim, np.float64),
                                   np.asarray(legacy, np.float64), rtol=2e-6, atol=1e-7,
                                   err_msg=path)


@pytest.mark.parametrize("scenario", ["init_in_model_fn", "init_in_scaffold_fn",
                                      "init_by_name_in_scaffold_fn"])
def test_init_from_checkpoint_maps_what_legacy_mapped(tmp_path, scenario):
    """In model_fn: only variables built so far (slots start at zero); in scaffold_fn (run
    after model_fn, as on legacy TPU): every variable, slots included. A scaffold_fn that
    builds its map from the collections (SimCLR: `{v.op.name: v.op.name for v in
    tf.trainable_variables(scope)}`) sees the model's variables there, as in legacy's graph
    (before, the collections were empty on the host and nothing was restored)."""
    shim, legacy = _run_semantics(scenario, tmp_path)
    _assert_same_numbers(shim, legacy)


def test_evaluate_and_predict_without_checkpoint_initialise_as_legacy(tmp_path):
    """No checkpoint in model_dir: fresh variables, global_step 0, even after a train()
    that saved nothing (legacy's "Could not find trained model" path)."""
    shim, legacy = _run_semantics("eval_without_checkpoint", tmp_path)
    assert shim.pop("checkpoint_after_train") is None
    assert shim["eval_after_train"]["global_step"] == 0
    _assert_same_numbers(shim, legacy)


@pytest.mark.parametrize("scenario", ["init_without_checkpoint_in_model_fn",
                                      "init_without_checkpoint_in_scaffold_fn"])
def test_evaluate_and_predict_without_checkpoint_apply_init_from_checkpoint(tmp_path, scenario):
    """No checkpoint in model_dir, but model_fn (or a scaffold_fn it returns in every mode)
    maps every layer from another run: legacy's fresh variables took those values as their
    initialisers, so evaluate() and predict() give the source run's results (google-research
    language canine/tydiqa's predict step; before, the shim used the random initialisers)."""
    shim, legacy = _run_semantics(scenario, tmp_path)
    _assert_same_numbers(shim, legacy)


def write_checkpoint_at_step_3(path):
    """Another run's checkpoint at global step 3 (its `w`, its `global_step`)."""
    w = np.random.RandomState(1).randn(64, 10).astype(np.float32)
    with tf.Graph().as_default(), v1.Session() as sess:
        v1.get_variable("w", initializer=w)
        step = v1.train.get_or_create_global_step()
        sess.run(v1.global_variables_initializer())
        sess.run(step.assign(3))
        v1.train.Saver().save(sess, path)
    return w


def every_global_variable_model_fn(features, labels, mode, params):
    """rowanz/grover's (and imcaspar/gpt2-ml's) `model_fn`: the init_from_checkpoint map is
    built in model_fn from every global variable by name, so it names `global_step` too;
    applied in model_fn (CPU path) or in a scaffold_fn (use_tpu)."""
    w = v1.get_variable("w", [64, 10], initializer=v1.zeros_initializer())
    logits = tf.matmul(features, w)
    loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    train_op = None
    if mode == "train":
        train_op = v1.train.GradientDescentOptimizer(0.0).minimize(
            loss, global_step=v1.train.get_global_step())
    amap = ({"/": "/"} if params["root_scope_map"] else
            {v.op.name: v.op.name for v in v1.global_variables()})
    scaffold_fn = None
    if params["use_tpu"]:
        def scaffold_fn():
            v1.train.init_from_checkpoint(params["init_checkpoint"], amap)
            return v1.train.Scaffold()
    else:
        v1.train.init_from_checkpoint(params["init_checkpoint"], amap)
    metrics = (lambda labels, logits: {"acc": v1.metrics.accuracy(
        labels, tf.argmax(logits, -1))}, [labels, logits])
    return TPUEstimatorSpec(mode, loss=loss, train_op=train_op, scaffold_fn=scaffold_fn,
                            eval_metrics=metrics if mode == "eval" else None)


# Each flag's path runs in the default run; the mixed pairs are opt-in (`-m slow`).
@pytest.mark.slow_cases('mirrored8-False-False', 'mirrored8-True-True')
@pytest.mark.parametrize("use_tpu, root_scope_map", [
    (False, False), (True, True),
    pytest.param(True, False, marks=pytest.mark.slow),
    pytest.param(False, True, marks=pytest.mark.slow)])
def test_init_from_checkpoint_naming_the_global_step_resumes_its_count(tmp_path, strategy,
                                                                        use_tpu, root_scope_map):
    """A map naming `global_step`, or the root scope `{'/': '/'}`, set it from the checkpoint,
    as any variable (legacy made it with `get_variable` before model_fn). Legacy (checked on
    TF 2.15, use_tpu=False, both maps): max_steps=5 trains steps 3 to 5 and saves
    model.ckpt-{3,4,5}; steps=2 counts from step 3 (its stop hook read the step once the
    session existed); evaluate() with no checkpoint reports global_step 3. Before, the
    model_fn path raised "variable 'global_step' ... is not a variable of this model_fn" (by
    name) or silently started from step 0 (root scope), and steps=2 stopped at step 3."""
    source = str(tmp_path / "source" / "model.ckpt-3")
    w = write_checkpoint_at_step_3(source)

    def estimator(name):
        config = RunConfig(model_dir=str(tmp_path / name), train_distribute=strategy,
                           eval_distribute=strategy, save_checkpoints_steps=1,
                           tpu_config=TPUConfig(iterations_per_loop=1))
        return TPUEstimator(model_fn=every_global_variable_model_fn, config=config,
                            use_tpu=use_tpu, train_batch_size=64, eval_batch_size=64,
                            params={"init_checkpoint": source,
                                    "root_scope_map": root_scope_map})

    def saved_steps(name):
        state = v1.train.get_checkpoint_state(str(tmp_path / name))
        return [int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths]

    estimator("max_steps").train(models.digits_input_fn(64, flat=True), max_steps=5)
    assert saved_steps("max_steps") == [3, 4, 5]
    np.testing.assert_array_equal(  # lr 0: the source's values throughout.
        tf.train.load_checkpoint(str(tmp_path / "max_steps" / "model.ckpt-5")).get_tensor("w"), w)
    estimator("steps").train(models.digits_input_fn(64, flat=True), steps=2)
    assert saved_steps("steps") == [3, 4, 5]
    result = estimator("eval").evaluate(models.digits_input_fn(64, flat=True), steps=1)
    assert result["global_step"] == 3


def _scaffold_saver_model_fn(features, labels, mode, params):
    """TF1 EMA training and evaluation with a Scaffold Saver built in model_fn (tensorflow/tpu
    QANet): `Saver(max_to_keep=2)` in training, `Saver(ema.variables_to_restore())` in
    evaluation, which restores the EMA values into the model's variables."""
    v1 = tf.compat.v1
    w = v1.get_variable("w", [2, 1], initializer=v1.ones_initializer())
    loss = tf.reduce_mean(tf.square(tf.matmul(features, w) - labels))
    ema = v1.train.ExponentialMovingAverage(0.5)
    if mode == "train":
        step = v1.train.GradientDescentOptimizer(0.1).minimize(loss, v1.train.get_global_step())
        with tf.control_dependencies([step]):
            train_op = ema.apply([w])
        return EstimatorSpec(mode, loss=loss, train_op=train_op,
                             scaffold=v1.train.Scaffold(saver=v1.train.Saver(max_to_keep=2)))
    saver = v1.train.Saver(ema.variables_to_restore())
    return EstimatorSpec(mode, loss=loss, scaffold=v1.train.Scaffold(saver=saver),
                         eval_metric_ops={"w0": v1.metrics.mean(w[0, 0])})


def test_a_scaffold_saver_built_in_model_fn_keeps_and_restores_as_legacy(tmp_path):
    """Its restore ops would have run at every step of the traced function (NotFoundError
    in training). Recorded instead: training keeps its max_to_keep checkpoints, evaluation
    restores through its var_list. Numbers recorded on TF 2.15.1 + tensorflow-estimator
    2.15.0 with this model_fn (/tmp probe, not committed)."""
    x = np.random.RandomState(0).randn(32, 2).astype(np.float32)

    def input_fn(params):
        return tf.data.Dataset.from_tensor_slices((x, x[:, :1] * 3)).repeat().batch(
            8, drop_remainder=True)

    est = TPUEstimator(model_fn=_scaffold_saver_model_fn, use_tpu=False, train_batch_size=8,
                       eval_batch_size=8,
                       config=RunConfig(model_dir=str(tmp_path), save_checkpoints_steps=1,
                                        tpu_config=TPUConfig(iterations_per_loop=1)))
    est.train(input_fn, max_steps=5)
    assert sorted(f for f in os.listdir(tmp_path) if f.endswith(".index")) == [
        "model.ckpt-4.index", "model.ckpt-5.index"]
    reader = tf.train.load_checkpoint(str(tmp_path))
    np.testing.assert_allclose(reader.get_tensor("w").ravel(), [2.529889, 0.33327493],
                               rtol=1e-5)
    ema_w = reader.get_tensor("w/ExponentialMovingAverage").ravel()
    np.testing.assert_allclose(ema_w, [2.3720722, 0.41107434], rtol=1e-5)
    results = est.evaluate(input_fn, steps=1)
    np.testing.assert_allclose(results["w0"], 2.3720722, rtol=1e-5)
    np.testing.assert_allclose(results["loss"], 0.55144525, rtol=1e-5)


# Legacy Estimator's `_warm_start_settings`, and warm start in evaluate, predict and export
# (`model_to_estimator` evaluates and exports the Keras weights before any training).


def test_default_warm_start_settings_are_legacy_s(tmp_path):
    from tpu_estimator_compat.checkpoint.warm_start import default_warm_start_settings

    assert default_warm_start_settings(None) is None
    given = WarmStartSettings(str(tmp_path), vars_to_warm_start="w")
    assert default_warm_start_settings(given) is given
    assert default_warm_start_settings(b"/ckpt/model.ckpt-3") == WarmStartSettings(
        "/ckpt/model.ckpt-3")
    saved_model = tmp_path / "1234"  # A SavedModel: its variables are the checkpoint.
    (saved_model / "variables").mkdir(parents=True)
    (saved_model / "variables" / "variables.index").write_bytes(b"")
    assert default_warm_start_settings(str(saved_model)).ckpt_to_initialize_from == str(
        saved_model / "variables" / "variables")
    with pytest.raises(ValueError, match="warm_start_from must be a string or a "
                                         "WarmStartSettings, instead got <class 'int'>"):
        default_warm_start_settings(3)


def _linear_spec_model_fn(features, labels, mode):
    w = v1.get_variable("w", [64, 10], initializer=v1.zeros_initializer())
    logits = tf.matmul(features["x"] if isinstance(features, dict) else features, w)
    if mode == "infer":
        return EstimatorSpec(mode, predictions={"logits": logits})
    loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    train_op = v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=v1.train.get_global_step())
    return EstimatorSpec(mode, loss=loss, train_op=train_op)


def _digits_batches(n=32):
    x, y = models.digits(n, flat=True)
    return x, y, lambda: tf.data.Dataset.from_tensor_slices((x, y)).batch(n)


def test_object_based_checkpoint_warm_starts_evaluate_and_predict_before_training(tmp_path):
    """A `tf.train.Checkpoint` (Keras `save_weights`) keys `w` by its object path; legacy's
    warm start found it through the checkpoint's object graph."""
    from tpu_estimator_compat.api.estimator import Estimator

    w = np.random.RandomState(0).randn(64, 10).astype(np.float32)
    prefix = tf.train.Checkpoint(layer=tf.Variable(w, name="w")).write(str(tmp_path / "obj"))
    assert "w" not in dict(tf.train.list_variables(prefix))  # Keyed `layer/.ATTRIBUTES/...`.
    est = Estimator(_linear_spec_model_fn, model_dir=str(tmp_path / "model"),
                    warm_start_from=prefix)
    assert est._warm_start_settings == WarmStartSettings(prefix)  # pylint: disable=protected-access
    x, y, input_fn = _digits_batches()
    logits = x @ w
    expected = np.mean(np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1))
                       + logits.max(1) - logits[np.arange(len(y)), y])
    assert est.evaluate(input_fn)["loss"] == pytest.approx(expected, rel=1e-5)
    predicted = np.stack([p["logits"] for p in est.predict(lambda: input_fn().map(
        lambda f, _: f))])
    np.testing.assert_allclose(predicted, logits, rtol=1e-5, atol=1e-5)


def test_export_before_training_exports_the_warm_start_checkpoint(tmp_path):
    from tpu_estimator_compat.api.estimator import Estimator

    w = np.full([64, 10], 0.25, np.float32)
    with tf.Graph().as_default(), v1.Session() as sess:
        v1.get_variable("w", initializer=w)
        v1.train.create_global_step()  # As model_to_estimator's first checkpoint has it.
        sess.run(v1.global_variables_initializer())
        v1.train.Saver().save(sess, str(tmp_path / "ws" / "model.ckpt"))
    est = Estimator(_linear_spec_model_fn, model_dir=str(tmp_path / "model"),
                    warm_start_from=str(tmp_path / "ws"))

    def serving_input_receiver_fn():
        x = v1.placeholder(tf.float32, [None, 64])
        return serving.ServingInputReceiver({"x": x}, {"x": x})

    export_dir = est.export_saved_model(str(tmp_path / "export"), serving_input_receiver_fn)
    variables = os.path.join(export_dir.decode(), "variables", "variables")
    np.testing.assert_array_equal(tf.train.load_variable(variables, "w"), w)


def test_float_steps_train_up_to_legacy_s_stop_step(tmp_path):
    """Legacy's StopAtStepHook stopped at the first step >= start + steps (keras_test trains
    `steps=_TRAIN_SIZE / 16`)."""
    from tpu_estimator_compat.api.estimator import Estimator

    est = Estimator(_linear_spec_model_fn, model_dir=str(tmp_path))
    _, _, input_fn = _digits_batches()
    est.train(lambda: input_fn().repeat(), steps=2.5)
    assert est.get_variable_value("global_step") == 3
    assert est.evaluate(input_fn, steps=0.5)["global_step"] == 3


def test_recorded_saver_describes_itself_and_restores_on_the_host(tmp_path):
    """A Saver model_fn builds is recorded (`warm_start.Saver`): code that reads its
    `saver_def` or calls `restore(sess, path)` (estimator_test's `Mock(wraps=Saver(),
    saver_def=...)`, which evaluate then restores through) gets what a TF1 Saver gave."""
    from unittest import mock

    from tpu_estimator_compat.checkpoint import checkpoints, warm_start

    kept = tf.Variable([1., 2.])
    prefix = checkpoints.V1Saver({"w": kept}).save(str(tmp_path / "ckpt"))
    kept.assign([0., 0.])
    saver = warm_start.recording_saver(None)(var_list={"w": kept}, max_to_keep=3,
                                             sharded=True)
    assert saver.saver_def.max_to_keep == 3
    assert saver.saver_def.sharded and saver.saver_def.version == v1.train.SaverDef.V2
    wrapped = mock.Mock(wraps=saver, saver_def=saver.saver_def)
    assert warm_start.is_saver_like(wrapped)
    assert not warm_start.is_saver_like(saver) and not warm_start.is_saver_like(None)
    wrapped.restore(None, prefix)
    assert wrapped.restore.called
    np.testing.assert_array_equal(kept.numpy(), [1., 2.])
