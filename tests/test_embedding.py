"""TPU embedding (`embedding_config_spec`): configuration, TPU semantics off TPU, files.

The model is tests/legacy_recorder/embedding_parity.py: a table shared by `f1` and `f2`
(combiner mean, some rows empty) and a weighted feature `f3` (sqrtn). With use_tpu=True each
optimization parameter class is checked against a NumPy reference of the update rule legacy
TPU's embedding engine applied: gradients of the loss w.r.t. the activations, summed over
every replica and feature per row, then the optimizer, with clipping limits, learning rate
functions of the global step and the gradient multiplier. Tables and slots are read back from
the checkpoints with TensorFlow's own reader. The use_tpu=False path is the parity golden's
(tests/test_parity.py); here its checkpoints are resumed on the TPU path.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator_compat as tec
from tpu_estimator_compat.embedding import engine as embedding
from tpu_estimator_compat.embedding import config as ec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "legacy_recorder"))
tec.install_aliases()
import embedding_parity as model  # noqa: E402  (needs the aliases)

from conftest import make_strategy  # noqa: E402

SHARED = "f1_f2_shared_embedding"
WEIGHTED = "dense_features/f3_weighted_by_w3_embedding/embedding_weights"
BATCH, STEPS = 16, 3
COEF = np.linspace(-1.0, 1.0, 20).astype(np.float32)  # Activations (f1 | f2 | f3) -> output.


# ---------------------------------------------------------------------------------------------
# Data and a model whose activation gradients NumPy can compute.


def _batches():
    """STEPS batches of BATCH examples: lists of ids / weights per feature, and targets."""
    rng = np.random.RandomState(11)
    out = []
    for _ in range(STEPS):
        b = {"f1": [], "f2": [], "f3": [], "w3": []}
        for _ in range(BATCH):
            b["f1"].append(list(rng.randint(model.SHARED_ROWS, size=rng.randint(1, 4))))
            b["f2"].append(list(rng.randint(model.SHARED_ROWS, size=rng.randint(0, 3))))
            ids = list(rng.randint(model.WEIGHTED_ROWS, size=rng.randint(1, 4)))
            b["f3"].append(ids)
            b["w3"].append(list(rng.uniform(0.5, 2.0, size=len(ids)).astype(np.float32)))
        b["y"] = rng.uniform(-1, 1, size=BATCH).astype(np.float32)
        out.append(b)
    return out


def _input_fn(params):
    batches = _batches()
    features = {k: tf.sparse.concat(0, [model._sparse(b[k], np.float32 if k == "w3"
                                                        else np.int64) for b in batches],
                                    expand_nonconcat_dims=True) for k in ("f1", "f2", "f3", "w3")}
    labels = np.concatenate([b["y"] for b in batches])
    ds = tf.data.Dataset.from_tensor_slices((features, labels))
    return ds.batch(params["batch_size"], drop_remainder=True)


def _model_fn(features, labels, mode, params):
    columns = model.feature_columns() if "columns" not in params else params["columns"]()
    activations = tf.compat.v1.keras.layers.DenseFeatures(columns)(features)
    prediction = tf.reduce_sum(activations * COEF, axis=1)
    loss = tf.reduce_mean(tf.square(prediction - labels))
    if mode == tec.ModeKeys.PREDICT:
        return tec.TPUEstimatorSpec(mode, predictions={"prediction": prediction})
    if mode == tec.ModeKeys.EVAL:
        return tec.TPUEstimatorSpec(mode, loss=loss)
    optimizer = tf.compat.v1.tpu.CrossShardOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(0.0))
    return tec.TPUEstimatorSpec(
        mode, loss=loss, train_op=optimizer.minimize(
            loss, global_step=tf.compat.v1.train.get_global_step()))


def _estimator(strategy, model_dir, spec, model_fn=_model_fn, params=None, use_tpu=True,
               eval_batch=BATCH):
    replicas = strategy.num_replicas_in_sync
    config = tec.RunConfig(
        model_dir=str(model_dir), tf_random_seed=1, save_checkpoints_steps=1000,
        train_distribute=strategy, eval_distribute=strategy,
        tpu_config=tec.TPUConfig(iterations_per_loop=STEPS,
                                 num_shards=replicas if replicas > 1 else None))
    return tec.TPUEstimator(model_fn=model_fn, config=config, params=dict(params or {}),
                            use_tpu=use_tpu, train_batch_size=BATCH, eval_batch_size=eval_batch,
                            predict_batch_size=BATCH, embedding_config_spec=spec)


# ---------------------------------------------------------------------------------------------
# The NumPy reference of legacy TPU's embedding engine.


def _lookup(table, rows, weights, combiner):
    out = np.zeros((len(rows), table.shape[1]))
    scales = []
    for b, ids in enumerate(rows):
        w = np.ones(len(ids)) if weights is None else np.asarray(weights[b], np.float64)
        total = {"mean": w.sum(), "sqrtn": np.sqrt((w ** 2).sum())}[combiner] if ids else 0
        scale = w / total if ids else w
        scales.append(scale)
        for i, s in zip(ids, scale):
            out[b] += s * table[i]
    return out, scales


def _row_gradients(rows, scales, d_act, size):
    grad = np.zeros((size, d_act.shape[1]))
    for b, ids in enumerate(rows):
        for i, s in zip(ids, scales[b]):
            grad[i] += s * d_act[b]
    return grad


def _ftrl(p, w, acc, lin, g, lr, touched):
    l2 = p.l2_regularization_strength + p.beta / (2 * lr)
    power = -p.learning_rate_power
    new_acc = acc + g * g
    if p.multiply_linear_by_learning_rate:
        lin = lin + g * lr - (new_acc ** power - acc ** power) * w
        quadratic = new_acc ** power + 2 * l2 * lr
        l1 = p.l1_regularization_strength * lr
    else:
        lin = lin + g - (new_acc ** power - acc ** power) / lr * w
        quadratic = new_acc ** power / lr + 2 * l2
        l1 = p.l1_regularization_strength
    new_w = np.where(np.abs(lin) > l1, (np.sign(lin) * l1 - lin) / quadratic, 0.0)
    keep = ~touched[:, None]
    return (np.where(keep, w, new_w), np.where(keep, acc, new_acc),
            lin)  # `lin` of untouched rows is unchanged: their g and w terms are 0.


def _apply(p, w, slots, g, lr, touched):
    """One table update of legacy TPU's engine; rows not in `touched` had no id this step."""
    clip = lambda x, lo, hi: np.clip(x, -np.inf if lo is None else lo,  # noqa: E731
                                     np.inf if hi is None else hi)
    g = clip(g, p.clip_gradient_min, p.clip_gradient_max) * touched[:, None]
    rows = touched
    if isinstance(p, ec.AdagradParameters):
        acc = slots[0] + g * g
        w = np.where(touched[:, None], w - lr * g / np.sqrt(acc), w)
        slots = [acc]
    elif isinstance(p, ec.AdamParameters):
        m = p.beta1 * slots[0] + (1 - p.beta1) * g
        v = p.beta2 * slots[1] + (1 - p.beta2) * g * g
        step = m / (np.sqrt(v + p.epsilon ** 2) if p.sum_inside_sqrt else
                    np.sqrt(v) + p.epsilon)
        if p.lazy_adam:
            keep = ~touched[:, None]
            m, v = np.where(keep, slots[0], m), np.where(keep, slots[1], v)
            w = np.where(keep, w, w - lr * step)
        else:
            w, rows = w - lr * step, np.ones_like(touched)
        slots = [m, v]
    elif isinstance(p, ec.FtrlParameters):
        w, acc, lin = _ftrl(p, w, slots[0], slots[1], g, lr, touched)
        slots = [acc, lin]
    else:
        w = w - lr * g
    w = np.where(rows[:, None], clip(w, p.clip_weight_min, p.clip_weight_max), w)
    return w, slots


def _reference(p, tables, slots, lr_fn, multiplier):
    """Tables and slots after STEPS steps, from their initial values (float64)."""
    t1, t2 = tables
    s1, s2 = slots
    for step, b in enumerate(_batches()):
        a1, sc1 = _lookup(t1, b["f1"], None, "mean")
        a2, sc2 = _lookup(t1, b["f2"], None, "mean")
        a3, sc3 = _lookup(t2, b["f3"], b["w3"], "sqrtn")
        act = np.concatenate([a1, a2, a3], 1)
        d_act = 2 * (act @ COEF - b["y"])[:, None] * COEF / BATCH * multiplier(step)
        g1 = (_row_gradients(b["f1"], sc1, d_act[:, :8], len(t1)) +
              _row_gradients(b["f2"], sc2, d_act[:, 8:16], len(t1)))
        g2 = _row_gradients(b["f3"], sc3, d_act[:, 16:], len(t2))
        used1 = np.zeros(len(t1), bool)
        used1[[i for r in b["f1"] + b["f2"] for i in r]] = True
        used2 = np.zeros(len(t2), bool)
        used2[[i for r in b["f3"] for i in r]] = True
        t1, s1 = _apply(p, t1, s1, g1, lr_fn(step), used1)
        t2, s2 = _apply(p, t2, s2, g2, lr_fn(step), used2)
    return (t1, t2), (s1, s2)


# ---------------------------------------------------------------------------------------------
# Optimizer semantics on the TPU path.


def _columns_with(learning_rate_fn):
    def columns():
        f1 = tf.feature_column.categorical_column_with_identity("f1", model.SHARED_ROWS)
        f2 = tf.feature_column.categorical_column_with_identity("f2", model.SHARED_ROWS)
        f3 = tf.feature_column.weighted_categorical_column(
            tf.feature_column.categorical_column_with_identity("f3", model.WEIGHTED_ROWS), "w3")
        init = tf.compat.v1.random_normal_initializer(0.0, 0.1)
        cols = tf.compat.v1.tpu.experimental.shared_embedding_columns(
            [f1, f2], 8, combiner="mean", initializer=init, learning_rate_fn=learning_rate_fn)
        return cols + [tf.compat.v1.tpu.experimental.embedding_column(
            f3, 4, combiner="sqrtn", initializer=init, learning_rate_fn=learning_rate_fn)]
    return columns


def _decay(step):
    return 0.5 / (1.0 + tf.cast(step, tf.float32))


CASES = {
    "adagrad": (lambda: ec.AdagradParameters(0.5, initial_accumulator=0.1), {}),
    "adagrad_lr_fn_clipping_multiplier": (
        lambda: ec.AdagradParameters(1.0, clip_gradient_min=-0.004, clip_gradient_max=0.004,
                                     clip_weight_min=-0.15, clip_weight_max=0.15),
        {"lr_fn": True, "multiplier": True}),
    "adam_lazy_sum_inside_sqrt": (lambda: ec.AdamParameters(0.05), {}),
    "adam_lazy_epsilon_outside": (lambda: ec.AdamParameters(0.05, sum_inside_sqrt=False), {}),
    "adam_dense_weight_clipping": (
        lambda: ec.AdamParameters(0.05, lazy_adam=False, clip_weight_min=-0.12,
                                  clip_weight_max=0.12), {}),
    "ftrl_beta_l1_l2": (lambda: ec.FtrlParameters(0.5, l1_regularization_strength=0.001,
                                                  l2_regularization_strength=0.01, beta=0.1),
                        {}),
    "ftrl_linear_by_lr_power": (
        lambda: ec.FtrlParameters(0.5, learning_rate_power=-0.3,
                                  multiply_linear_by_learning_rate=True), {}),
    "sgd": (lambda: ec.StochasticGradientDescentParameters(2.0), {}),
    "sgd_without_gradient_accumulation": (
        lambda: ec.StochasticGradientDescentParameters(2.0, use_gradient_accumulation=False),
        {"lr_fn": True}),
}
MIRRORED_CASES = ("adagrad", "adam_dense_weight_clipping", "ftrl_beta_l1_l2")


def _run_case(strategy, tmp_path, name):
    make, options = CASES[name]
    p = make()
    spec = ec.EmbeddingConfigSpec(
        feature_columns=_columns_with(_decay if options.get("lr_fn") else None)(),
        optimization_parameters=p,
        experimental_gradient_multiplier_fn=(
            (lambda step: 2.0 + tf.cast(step, tf.float32)) if options.get("multiplier")
            else None))
    params = {"columns": _columns_with(_decay if options.get("lr_fn") else None)}
    _estimator(strategy, tmp_path, spec, params=params).train(_input_fn, max_steps=STEPS)
    start = tf.train.load_checkpoint(str(tmp_path / "model.ckpt-0"))
    end = tf.train.load_checkpoint(str(tmp_path / f"model.ckpt-{STEPS}"))
    names = [SHARED, WEIGHTED]
    tables = [start.get_tensor(n).astype(np.float64) for n in names]
    slots = [[start.get_tensor(f"{n}/{s}").astype(np.float64) for s in p.slot_names]
             for n in names]
    lr_fn = ((lambda step: 0.5 / (1.0 + step)) if options.get("lr_fn")
             else (lambda step: p.learning_rate))
    multiplier = (lambda step: 2.0 + step) if options.get("multiplier") else (lambda step: 1.0)
    want_tables, want_slots = _reference(p, tables, slots, lr_fn, multiplier)
    for n, want, before in zip(names, want_tables, tables):
        got = end.get_tensor(n)
        assert not np.allclose(got, before), f"{n} did not move"
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6, err_msg=n)
    for n, wants in zip(names, want_slots):
        for suffix, want in zip(p.slot_names, wants):
            np.testing.assert_allclose(end.get_tensor(f"{n}/{suffix}"), want, rtol=2e-5,
                                       atol=2e-6, err_msg=f"{n}/{suffix}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_tpu_update_rule_matches_numpy_reference_default_strategy(name, tmp_path):
    _run_case(make_strategy("default"), tmp_path, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", MIRRORED_CASES)
def test_tpu_update_rule_sums_over_eight_replicas(name, tmp_path):
    _run_case(make_strategy("mirrored8"), tmp_path, name)


# ---------------------------------------------------------------------------------------------
# Configuration: legacy names, checks and messages.


def test_v1_names_are_served_by_the_aliases():
    experimental = tf.compat.v1.tpu.experimental
    for name in ("AdagradParameters", "AdamParameters", "FtrlParameters",
                 "StochasticGradientDescentParameters"):
        assert getattr(experimental, name) is getattr(ec, name)
    assert tf.compat.v1.estimator.tpu.experimental.EmbeddingConfigSpec is ec.EmbeddingConfigSpec
    from tensorflow_estimator.python.estimator.tpu import tpu_estimator  # legacy re-exports
    assert tpu_estimator.AdagradParameters is ec.AdagradParameters
    assert tpu_estimator.EmbeddingConfigSpec is ec.EmbeddingConfigSpec


def test_spec_and_parameters_validate_like_legacy():
    with pytest.raises(ValueError, match="Exactly one of `feature_columns` and the pair"):
        ec.EmbeddingConfigSpec()
    with pytest.raises(ValueError, match="optimization_parameters must be an instance"):
        ec.EmbeddingConfigSpec(feature_columns=model.feature_columns(),
                               optimization_parameters=tf.compat.v1.train.AdagradOptimizer(1.))
    plain = tf.feature_column.categorical_column_with_identity("x", 3)
    with pytest.raises(TypeError, match="All feature columns must be supported types"):
        ec.EmbeddingConfigSpec(feature_columns=[plain],
                               optimization_parameters=ec.AdagradParameters(0.1))
    with pytest.raises(ValueError, match='Invalid partition_strategy x. Must be one of "mod"'):
        model.embedding_config_spec(partition_strategy="x")
    with pytest.raises(ValueError, match="initial_accumulator must be greater than zero"):
        ec.AdagradParameters(0.1, initial_accumulator=0.0)
    with pytest.raises(ValueError, match="beta1 must be between 0. and 1"):
        ec.AdamParameters(0.1, beta1=1.0)
    with pytest.raises(ValueError, match="clipping limits, gradient +accumulation must be enabled"):
        ec.StochasticGradientDescentParameters(0.1, use_gradient_accumulation=False,
                                               clip_gradient_max=1.0)
    with pytest.raises(ValueError, match="refers to table t2 which is not in"):
        ec.EmbeddingConfigSpec(feature_to_config_dict={"a": ec.FeatureConfig("t2")},
                               table_to_config_dict={"t1": ec.TableConfig(3, 2)})


def test_config_names_tables_as_legacy_and_sums_a_combiner_of_none():
    config = ec.EmbeddingConfig.from_spec(model.embedding_config_spec())
    assert [(t.name, t.features, t.combiner, t.vocabulary_size, t.dimension)
            for t in config.tables] == [
        ("tbl_f1_f2_shared_embedding", ("f1", "f2"), "mean", model.SHARED_ROWS, 8),
        ("tbl_f3_weighted_by_w3", ("f3",), "sqrtn", model.WEIGHTED_ROWS, 4)]
    assert config.features["f3"].weight_key == "w3"
    assert ec.TableConfig(5, 2, combiner=None).combiner is None
    table = ec.EmbeddingConfig.from_spec(ec.EmbeddingConfigSpec(
        feature_to_config_dict={"a": ec.FeatureConfig("t")},
        table_to_config_dict={"t": ec.TableConfig(5, 2, combiner=None)},
        optimization_parameters=ec.AdagradParameters(0.1))).tables[0]
    assert table.tpu_combiner == "sum"  # Legacy `_create_combiners`: None was 'sum' on TPU.


def test_estimator_checks_the_spec_like_legacy(tmp_path):
    spec = model.embedding_config_spec()
    per_shard = tec.RunConfig(model_dir=str(tmp_path), tpu_config=tec.TPUConfig(
        per_host_input_for_training=tec.InputPipelineConfig.PER_SHARD_V1))
    with pytest.raises(ValueError, match="Only PER_HOST_V1 and PER_HOST_V2 is supported"):
        tec.TPUEstimator(model_fn=model.model_fn, config=per_shard, train_batch_size=16,
                         embedding_config_spec=spec)
    with pytest.raises(ValueError, match="Mod sharding of embedding tables not supported on CPU"):
        tec.TPUEstimator(model_fn=model.model_fn, config=tec.RunConfig(model_dir=str(tmp_path)),
                         use_tpu=False,
                         embedding_config_spec=model.embedding_config_spec(
                             partition_strategy="mod"))
    one_shard = tec.RunConfig(model_dir=str(tmp_path), tpu_config=tec.TPUConfig(num_shards=1))
    with pytest.raises(ValueError, match="num_shards==1 is unsupported when embedding_config"):
        tec.TPUEstimator(model_fn=model.model_fn, config=one_shard, train_batch_size=16,
                         embedding_config_spec=spec)
    with pytest.raises(NotImplementedError, match="`weight_decay_factor`"):
        tec.TPUEstimator(model_fn=model.model_fn, config=tec.RunConfig(model_dir=str(tmp_path)),
                         train_batch_size=16, embedding_config_spec=model.embedding_config_spec(
                             ec.AdagradParameters(0.1, weight_decay_factor=0.1)))
    with pytest.raises(TypeError, match="`embedding_config_spec` must be a"):
        tec.TPUEstimator(model_fn=model.model_fn, config=tec.RunConfig(model_dir=str(tmp_path)),
                         train_batch_size=16, embedding_config_spec={"feature_columns": []})


# ---------------------------------------------------------------------------------------------
# Train, evaluate, predict and export on the TPU path; the CPU path reads the same files.


def _serialized_eval_examples(count):
    features, _ = model.examples("eval")
    dense = {k: tf.sparse.to_dense(v).numpy() for k, v in features.items()}
    lengths = {k: np.bincount(v.indices.numpy()[:, 0], minlength=model.NUM_EVAL)
               for k, v in features.items()}
    out = []
    for i in range(count):
        feature = {}
        for k in ("f1", "f2", "f3"):
            feature[k] = tf.train.Feature(int64_list=tf.train.Int64List(
                value=dense[k][i, :lengths[k][i]]))
        feature["w3"] = tf.train.Feature(float_list=tf.train.FloatList(
            value=dense["w3"][i, :lengths["w3"][i]]))
        out.append(tf.train.Example(features=tf.train.Features(feature=feature))
                   .SerializeToString())
    return out


def _serving_input_fn():
    spec = {k: tf.io.VarLenFeature(tf.int64) for k in ("f1", "f2", "f3")}
    spec["w3"] = tf.io.VarLenFeature(tf.float32)
    return tf.compat.v1.estimator.export.build_parsing_serving_input_receiver_fn(spec)()


_LOAD_WITHOUT_LIBRARY = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    assert "tpu_estimator_compat" not in sys.modules
    examples = [bytes.fromhex(h) for h in json.loads(sys.stdin.read())]
    serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
    out = serve(examples=tf.constant(examples))
    assert "tpu_estimator_compat" not in sys.modules
    print(json.dumps(out["logits"].numpy().tolist()))
""")


# 8 replicas opt-in (`-m slow`, ~45 s): the default run has the embedding path on 8 replicas
# in test_parity (the embedding golden's 8-replica replay: losses, evaluate with a padded
# batch, predictions), the update rules summed over 8 replicas above, and the legacy
# checkpoint evaluated and resumed on 8 replicas below.
@pytest.mark.slow
@pytest.mark.parametrize("strategy_name", ["default",
                                           pytest.param("mirrored8", marks=pytest.mark.slow)])
def test_train_evaluate_predict_export_on_the_tpu_path(strategy_name, tmp_path):
    strategy = make_strategy(strategy_name)
    spec = model.embedding_config_spec()
    estimator = _estimator(strategy, tmp_path, spec, model_fn=model.model_fn,
                           params={"learning_rate": 0.1})
    estimator.train(model.train_input_fn, max_steps=2 * STEPS)
    reader = tf.train.load_checkpoint(estimator.latest_checkpoint())
    names = reader.get_variable_to_shape_map()
    assert names[SHARED] == [model.SHARED_ROWS, 8] and names[WEIGHTED] == [model.WEIGHTED_ROWS, 4]
    assert {f"{SHARED}/Adagrad", f"{WEIGHTED}/Adagrad"} <= set(names)
    # Legacy's dummy variables are not saved; the model optimizer's slots for them are.
    dummy = embedding.DUMMY_VARIABLE_PREFIX + "tbl_f1_f2_shared_embedding"
    assert dummy not in names and f"{dummy}/Adagrad" in names
    assert not any(n.startswith("tbl_") for n in names)

    # 200 examples: the last batch (8) is padded, its sparse rows empty, and masked.
    results = estimator.evaluate(model.eval_input_fn)
    full = estimator.evaluate(model.eval_input_fn, steps=12, name="full")
    predictions = np.array([p["logits"] for p in estimator.predict(model.predict_input_fn)])
    assert predictions.shape == (24, 2)
    # The same checkpoint through ordinary embedding columns (use_tpu=False: legacy's CPU
    # path) gives the same numbers: the lookups and combiners are the columns' own math.
    cpu = _estimator(make_strategy("default"), tmp_path, None, model_fn=model.model_fn,
                     params={"learning_rate": 0.1}, use_tpu=False)
    cpu_results = cpu.evaluate(model.eval_input_fn)
    cpu_full = cpu.evaluate(model.eval_input_fn, steps=12, name="full")
    assert results["global_step"] == cpu_results["global_step"] == 2 * STEPS
    assert results["accuracy"] == cpu_results["accuracy"]  # Every example once, padding masked.
    assert full["accuracy"] == cpu_full["accuracy"]
    # The loss of the padded step counts its padding rows, as on a TPU (README): compare the
    # 12 full batches.
    np.testing.assert_allclose(full["loss"], cpu_full["loss"], rtol=1e-5)
    cpu_predictions = np.array([p["logits"] for p in cpu.predict(model.predict_input_fn)])
    np.testing.assert_allclose(predictions, cpu_predictions, rtol=1e-5, atol=1e-6)

    export_dir = estimator.export_saved_model(str(tmp_path / "export"), _serving_input_fn)
    examples = _serialized_eval_examples(24)
    served = subprocess.run(
        [sys.executable, "-c", _LOAD_WITHOUT_LIBRARY, export_dir.decode()],
        input=__import__("json").dumps([e.hex() for e in examples]), capture_output=True,
        text=True, cwd=str(tmp_path), env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert served.returncode == 0, served.stderr[-3000:]
    logits = np.array(__import__("json").loads(served.stdout.strip().splitlines()[-1]))
    np.testing.assert_allclose(logits, predictions, rtol=1e-5, atol=1e-6)


def test_config_dicts_feed_activations_to_model_fn(tmp_path):
    spec = ec.EmbeddingConfigSpec(
        feature_to_config_dict={"f1": ec.FeatureConfig("shared"), "f2": ec.FeatureConfig("shared"),
                                "f3": ec.FeatureConfig("weighted", weight_key="w3")},
        table_to_config_dict={"shared": ec.TableConfig(model.SHARED_ROWS, 8, combiner="mean"),
                              "weighted": ec.TableConfig(model.WEIGHTED_ROWS, 4,
                                                         combiner="sqrtn")},
        optimization_parameters=ec.AdagradParameters(0.5))

    def model_fn(features, labels, mode, params):
        del params
        assert set(features) == {"f1", "f2", "f3"}  # w3 was taken with f3, as legacy did.
        activations = tf.concat([features["f1"], features["f2"], features["f3"]], axis=1)
        loss = tf.reduce_mean(tf.square(tf.reduce_sum(activations * COEF, 1) - labels))
        step = tf.compat.v1.train.get_global_step()
        return tec.TPUEstimatorSpec(mode, loss=loss, train_op=tf.compat.v1.tpu.CrossShardOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(0.0)).minimize(loss, global_step=step))

    _estimator(make_strategy("default"), tmp_path, spec, model_fn=model_fn).train(
        _input_fn, max_steps=STEPS)
    start = tf.train.load_checkpoint(str(tmp_path / "model.ckpt-0"))
    end = tf.train.load_checkpoint(str(tmp_path / f"model.ckpt-{STEPS}"))
    p = spec.optimization_parameters
    tables = [start.get_tensor(n).astype(np.float64) for n in ("shared", "weighted")]
    slots = [[start.get_tensor(f"{n}/Adagrad").astype(np.float64)] for n in ("shared", "weighted")]
    want, _ = _reference(p, tables, slots, lambda step: 0.5, lambda step: 1.0)
    for n, w in zip(("shared", "weighted"), want):
        np.testing.assert_allclose(end.get_tensor(n), w, rtol=2e-5, atol=2e-6)


# ---------------------------------------------------------------------------------------------
# Checkpoints across paths and stacks.


@pytest.mark.slow_cases('mirrored8')
def test_legacy_cpu_checkpoint_evaluates_and_resumes_on_the_tpu_path(strategy, tmp_path):
    """tests/goldens/embedding/legacy_model_dir: TF 2.15's TPUEstimator, use_tpu=False."""
    import json
    import shutil

    golden = ROOT / "tests" / "goldens" / "embedding"
    shutil.copytree(golden / "legacy_model_dir", tmp_path / "model")
    estimator = _estimator(strategy, tmp_path / "model", model.embedding_config_spec(),
                           model_fn=model.model_fn, params={"learning_rate": 0.1},
                           eval_batch=64)
    # Legacy's evaluate over the 3 full batches of 64 (no padding on any strategy).
    recorded = json.loads((golden / "golden.json").read_text())["eval_full_batches"]
    results = estimator.evaluate(model.eval_input_fn, steps=3)
    assert results["global_step"] == 30
    assert results["accuracy"] == recorded["accuracy"]["value"]
    np.testing.assert_allclose(results["loss"], recorded["loss"]["value"], rtol=1e-5)
    estimator.train(model.train_input_fn, steps=STEPS)  # Resumes: no dummy-variable slots.
    assert estimator.latest_checkpoint().endswith(f"model.ckpt-{30 + STEPS}")


@pytest.mark.legacy
def test_tpu_path_checkpoint_restores_on_legacy_cpu(tmp_path):
    """The reverse: the legacy stack (use_tpu=False) evaluates a use_tpu=True checkpoint."""
    legacy = Path(os.environ.get("LEGACY_PYTHON", ROOT / ".venv-legacy" / "bin" / "python"))
    if not legacy.exists():
        pytest.skip(f"no legacy interpreter at {legacy} (set LEGACY_PYTHON)")
    estimator = _estimator(make_strategy("mirrored8"), tmp_path, model.embedding_config_spec(),
                           model_fn=model.model_fn, params={"learning_rate": 0.1})
    estimator.train(model.train_input_fn, max_steps=2 * STEPS)
    ours = _estimator(make_strategy("default"), tmp_path, None, model_fn=model.model_fn,
                      params={"learning_rate": 0.1}, use_tpu=False).evaluate(model.eval_input_fn)
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(ROOT / 'tests' / 'legacy_recorder')!r})
        import tensorflow.compat.v1 as tf
        import embedding_parity as model
        tpu = tf.estimator.tpu
        est = tpu.TPUEstimator(model_fn=model.model_fn, use_tpu=False, params={{"learning_rate": 0.1}},
                               config=tpu.RunConfig(model_dir={str(tmp_path)!r}),
                               train_batch_size={BATCH}, eval_batch_size={BATCH})
        r = est.evaluate(model.eval_input_fn)
        print(json.dumps({{k: float(v) for k, v in r.items()}}))
    """)
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}  # Keras 2.15 there
    result = subprocess.run([str(legacy), "-c", script], capture_output=True, text=True,
                            env=dict(env, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-3000:]
    theirs = __import__("json").loads(result.stdout.strip().splitlines()[-1])
    assert theirs["global_step"] == 2 * STEPS
    assert theirs["accuracy"] == pytest.approx(float(ours["accuracy"]), abs=0)
    assert theirs["loss"] == pytest.approx(float(ours["loss"]), rel=1e-5)


# ---------------------------------------------------------------------------------------------
# Errors.


def _train_with(tmp_path, input_fn, model_fn=_model_fn, spec=None, params=None):
    spec = spec or model.embedding_config_spec()
    _estimator(make_strategy("default"), tmp_path, spec, model_fn=model_fn,
               params=params).train(input_fn, max_steps=1)


def _one_batch(**overrides):
    def input_fn(params):
        features, labels = model.examples("train")
        features.update(overrides)
        return tf.data.Dataset.from_tensor_slices((features, labels.astype(np.float32))).batch(
            params["batch_size"], drop_remainder=True)
    return input_fn


def test_id_outside_the_table_fails_the_step_naming_the_feature(tmp_path):
    features, _ = model.examples("train")
    f1 = features["f1"]
    bad = tf.SparseTensor(f1.indices, tf.where(tf.range(tf.size(f1.values)) == 0,
                                               tf.constant(model.SHARED_ROWS, tf.int64),
                                               f1.values), f1.dense_shape)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"TPU embedding feature `f1` has an id outside the 40 rows "
                             r"\[0, 40\) of table `tbl_f1_f2_shared_embedding`"):
        _train_with(tmp_path, _one_batch(f1=bad))


def test_feature_without_input_names_it(tmp_path):
    def input_fn(params):
        features, labels = model.examples("train")
        del features["f2"]
        return tf.data.Dataset.from_tensor_slices((features, labels.astype(np.float32))).batch(
            params["batch_size"], drop_remainder=True)

    with pytest.raises(KeyError, match="TPU embedding feature `f2` .* is not in the features"):
        _train_with(tmp_path, input_fn)


def test_dense_weights_are_refused_with_legacys_message(tmp_path):
    features, _ = model.examples("train")
    dense_w3 = tf.sparse.to_dense(features["w3"])
    with pytest.raises(ValueError, match="has dense weights. Dense weights are not supported"):
        _train_with(tmp_path, _one_batch(w3=dense_w3))


def test_table_too_big_for_host_memory_is_refused_before_allocation(tmp_path):
    spec = ec.EmbeddingConfigSpec(
        feature_to_config_dict={"f1": ec.FeatureConfig("huge")},
        table_to_config_dict={"huge": ec.TableConfig(10**11, 64)},
        optimization_parameters=ec.AdagradParameters(0.1))

    def model_fn(features, labels, mode, params):
        loss = tf.reduce_mean(features["f1"])
        return tec.TPUEstimatorSpec(mode, loss=loss, train_op=tf.no_op())

    def input_fn(params):
        features, labels = model.examples("train")
        return tf.data.Dataset.from_tensor_slices(({"f1": features["f1"]}, labels)).batch(
            params["batch_size"], drop_remainder=True)

    with pytest.raises(embedding.EmbeddingMemoryError,
                       match=r"need 47683.72 GiB.*largest: `huge`.* Reduce vocabulary_size"):
        _train_with(tmp_path, input_fn, model_fn=model_fn, spec=spec)


def test_two_tables_read_at_one_scope_are_refused(tmp_path):
    """TF2 `tf.keras.layers.DenseFeatures` opens no variable scope: both tables would be
    `embedding_weights`, where legacy failed creating the second."""
    def columns():
        return [tf.compat.v1.tpu.experimental.embedding_column(
            tf.feature_column.categorical_column_with_identity(k, model.SHARED_ROWS), 4)
            for k in ("f1", "f2")]

    def model_fn(features, labels, mode, params):
        net = tf.keras.layers.DenseFeatures(columns())(features)
        loss = tf.reduce_mean(net)
        return tec.TPUEstimatorSpec(mode, loss=loss, train_op=tf.no_op())

    spec = ec.EmbeddingConfigSpec(feature_columns=columns(),
                                  optimization_parameters=ec.AdagradParameters(0.1))
    with pytest.raises(ValueError, match=r"would both be saved as `embedding_weights`.*"
                                         r"tf.compat.v1.keras.layers.DenseFeatures"):
        _train_with(tmp_path, _one_batch(), model_fn=model_fn, spec=spec)


def test_memory_check_counts_slots():
    tables = ec.EmbeddingConfig.from_spec(model.embedding_config_spec()).tables
    need = sum(t.vocabulary_size * t.dimension * 4 * 2 for t in tables)  # table + accumulator
    embedding.check_fits(tables, need)
    with pytest.raises(embedding.EmbeddingMemoryError):
        embedding.check_fits(tables, need - 1)


@pytest.mark.slow
def test_legacy_cpu_checkpoint_resumes_bit_exact_on_the_cpu_path(tmp_path):
    """use_tpu=False: legacy's model_dir at step 30, 10 more steps, as legacy continued them."""
    from tpu_estimator_compat import parity

    env = dict(os.environ, **parity.REPEATABLE_ENV, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(
        [sys.executable, "-m", "tpu_estimator_compat.parity", "resume",
         f"--golden_dir={ROOT / 'tests' / 'goldens' / 'embedding'}", f"--work_dir={tmp_path}",
         f"--out={tmp_path / 'out'}"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr[-4000:]
    assert "PASS (4/4 checks)" in result.stdout and "bit-exact" in result.stdout, result.stdout


def test_sequence_column_gets_padded_truncated_activations_and_lengths(tmp_path):
    """max_sequence_length=3: one activation row per position, zeros past the ids, truncated."""
    rows = [[4, 1], [7, 2, 9, 3, 5], [], [6]]

    def column():
        ids = tf.feature_column.sequence_categorical_column_with_identity("s", 10)
        return tf.compat.v1.tpu.experimental.embedding_column(
            ids, 3, max_sequence_length=3,
            initializer=tf.compat.v1.random_normal_initializer(0.0, 1.0))

    def input_fn(params):
        sparse = model._sparse(rows, np.int64)
        return tf.data.Dataset.from_tensor_slices(
            ({"s": sparse}, np.zeros(4, np.float32))).repeat().batch(params["batch_size"])

    def model_fn(features, labels, mode, params):
        activations, lengths = tf.keras.experimental.SequenceFeatures([column()])(features)
        if mode == tec.ModeKeys.PREDICT:
            return tec.TPUEstimatorSpec(mode, predictions={"a": activations, "n": lengths})
        loss = tf.reduce_mean(activations)
        return tec.TPUEstimatorSpec(mode, loss=loss, train_op=tf.compat.v1.tpu.CrossShardOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(0.0)).minimize(
                loss, global_step=tf.compat.v1.train.get_global_step()))

    spec = ec.EmbeddingConfigSpec(
        feature_columns=[column()],
        optimization_parameters=ec.StochasticGradientDescentParameters(0.0))
    config = tec.RunConfig(model_dir=str(tmp_path), train_distribute=make_strategy("default"),
                           eval_distribute=make_strategy("default"))
    estimator = tec.TPUEstimator(model_fn=model_fn, config=config, train_batch_size=4,
                                 predict_batch_size=4, embedding_config_spec=spec)
    estimator.train(input_fn, max_steps=1)
    table = tf.train.load_checkpoint(estimator.latest_checkpoint()).get_tensor(
        "sequence_features/s_embedding/embedding_weights")
    got = list(estimator.predict(lambda params: input_fn(params).take(1)))
    for row, prediction in zip(rows, got):
        want = np.zeros((3, 3), np.float32)
        for position, i in enumerate(row[:3]):
            want[position] = table[i]
        np.testing.assert_allclose(prediction["a"], want, rtol=1e-6)
        assert prediction["n"] == min(len(row), 3)
