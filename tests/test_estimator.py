"""TPUEstimator.train end to end: unchanged r1 model_fns on the default and 8-replica strategies.

Every test trains for real and reads the checkpoints back with TensorFlow's own reader.
"""

import contextlib
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

import models
from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator, TPUEstimatorSpec

v1 = tf.compat.v1


def make_estimator(model_dir, strategy, model_fn=models.cnn_model_fn, *, batch=64, ipl=4,
                   params=None, use_tpu=True, **config_kwargs):
    config = RunConfig(model_dir=str(model_dir), train_distribute=strategy,
                       tpu_config=TPUConfig(iterations_per_loop=ipl), **config_kwargs)
    return TPUEstimator(model_fn=model_fn, config=config, params=params, use_tpu=use_tpu,
                        train_batch_size=batch)


def checkpoint_values(path):
    reader = tf.train.load_checkpoint(path)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


class StepRecorder(tf.compat.v1.train.CheckpointSaverListener):
    """Records the global step of every checkpoint save, and the values at save time."""

    def __init__(self, model_dir):
        self.steps = []
        self.values = {}
        self._model_dir = model_dir

    def after_save(self, session, global_step_value):
        self.steps.append(global_step_value)
        path = os.path.join(self._model_dir, f"model.ckpt-{global_step_value}")
        self.values[global_step_value] = checkpoint_values(path)


@pytest.mark.slow_cases('mirrored8')
def test_mnist_style_model_trains_and_loss_falls(tmp_path, strategy):
    """The mnist_tpu-style CNN (CrossShardOptimizer, exponential_decay) learns real digits."""
    est = make_estimator(tmp_path, strategy, params={"learning_rate": 0.2}, ipl=10)
    input_fn = models.digits_input_fn(1024, shuffle=True)
    first = _loss_after(est, input_fn, steps=1)
    last = _loss_after(est, input_fn, steps=60)
    assert last < 0.6 * first, (first, last)
    assert checkpoint_values(est.latest_checkpoint())["global_step"] == 61


def _loss_after(est, input_fn, steps):
    """Trains `steps` and returns the mean cross-entropy on a fixed batch, from the checkpoint."""
    est.train(input_fn, steps=steps)
    values = checkpoint_values(est.latest_checkpoint())
    x, y = models.digits(256)
    with tf.Graph().as_default(), v1.Session() as sess:
        features = tf.constant(x)
        v1.train.get_or_create_global_step()
        models.cnn_model_fn(features, tf.constant(y), "train",
                            {"use_tpu": False, "learning_rate": 0.0})
        for variable in v1.global_variables():
            if variable.op.name in values:
                variable.load(values[variable.op.name], sess)
        losses = v1.get_collection(v1.GraphKeys.LOSSES)
        return float(sess.run(losses[0]))


@pytest.mark.slow
def test_one_vs_eight_replicas_same_weights(tmp_path):
    """1 replica at batch 64 and 8 replicas at 8 each, from one initial checkpoint.

    Tolerance: the only difference is float32 summation order (8 partial gradient sums
    all-reduced vs one sum over 64 rows), ~1e-7 relative per step; after 10 SGD steps we
    measured differences below 1e-6 absolute, and allow 1e-5 (rtol 1e-4).
    """
    from conftest import make_strategy

    one_dir, eight_dir = tmp_path / "one", tmp_path / "eight"
    recorder = StepRecorder(str(one_dir))
    est1 = make_estimator(one_dir, make_strategy("default"), ipl=5)
    input_fn = models.digits_input_fn(640)
    est1.train(input_fn, max_steps=10, saving_listeners=[recorder])
    # Seed the 8-replica run with the 1-replica run's initial checkpoint (step 0).
    eight_dir.mkdir()
    for name in os.listdir(one_dir):
        if name.startswith("model.ckpt-0."):
            shutil.copy(one_dir / name, eight_dir / name)
    v1.train.update_checkpoint_state(str(eight_dir), str(eight_dir / "model.ckpt-0"))
    est8 = make_estimator(eight_dir, make_strategy("mirrored8"), ipl=5)
    est8.train(input_fn, max_steps=10)
    one = checkpoint_values(est1.latest_checkpoint())
    eight = checkpoint_values(est8.latest_checkpoint())
    assert sorted(one) == sorted(eight)
    assert one["global_step"] == eight["global_step"] == 10
    moved = False
    for name in one:
        np.testing.assert_allclose(eight[name], one[name], rtol=1e-4, atol=1e-5, err_msg=name)
        moved |= not np.array_equal(one[name], recorder.values[0][name])
    assert moved


def test_global_step_per_loop_and_last_chunk_shortened(tmp_path, strategy):
    recorder = StepRecorder(str(tmp_path))
    est = make_estimator(tmp_path, strategy, models.linear_model_fn, ipl=4,
                         save_checkpoints_steps=1)
    est.train(models.digits_input_fn(256, flat=True), steps=10, saving_listeners=[recorder])
    assert recorder.steps == [0, 4, 8, 10]
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-10")


def test_max_steps_reached_trains_nothing_and_steps_count_from_restore(tmp_path, strategy):
    calls = []

    def input_fn(params):
        calls.append(params["batch_size"])
        return models.digits_input_fn(256, flat=True)(params)

    est = make_estimator(tmp_path, strategy, models.linear_model_fn, ipl=3)
    est.train(input_fn, steps=5)
    assert checkpoint_values(est.latest_checkpoint())["global_step"] == 5
    est.train(input_fn, max_steps=5)  # Already reached: nothing runs, input_fn not called.
    assert len(calls) == 1
    est.train(input_fn, steps=2)
    assert checkpoint_values(est.latest_checkpoint())["global_step"] == 7
    assert len(calls) == 2  # A new train() calls input_fn afresh, as legacy did.


@pytest.mark.slow_cases('mirrored8')
def test_resume_restores_exactly_and_continues_schedule(tmp_path, strategy):
    """10 + 10 steps across two estimators equal 20 uninterrupted steps, bit for bit.

    Every batch is the same 64 examples, so a fresh input_fn sees the same data; the
    learning rate (exponential_decay of the global step) and Momentum slots must carry over.
    """
    params = {"optimizer": "momentum", "learning_rate": 0.1}
    input_fn = models.digits_input_fn(64, flat=True)
    straight = make_estimator(tmp_path / "straight", strategy, models.kitchen_sink_model_fn,
                              params=params, batch=64, ipl=5, tf_random_seed=3)
    straight.train(input_fn, steps=20)

    resumed_dir = tmp_path / "resumed"
    make_estimator(resumed_dir, strategy, models.kitchen_sink_model_fn, params=params,
                   batch=64, ipl=5, tf_random_seed=3).train(input_fn, steps=10)
    saved = checkpoint_values(str(resumed_dir / "model.ckpt-10"))
    recorder = StepRecorder(str(resumed_dir))
    again = make_estimator(resumed_dir, strategy, models.kitchen_sink_model_fn, params=params,
                           batch=64, ipl=5)
    again.train(input_fn, steps=10, saving_listeners=[recorder])
    # The restart re-saves its starting state first: it must equal what was saved.
    assert recorder.steps[0] == 10
    restored = recorder.values[10]
    assert sorted(restored) == sorted(saved)
    assert any(name.endswith("/Momentum") for name in saved)
    # Exact on one replica. On 8, batch-norm moving statistics are SyncOnRead MEAN
    # variables: the saved value is the mean of 8 replica copies, and re-reading the mean
    # of 8 restored identical copies rounds by at most 1 ulp (summing x eight times in
    # float32 is not exact), hence rtol 2e-7 there.
    rtol = 0 if strategy.num_replicas_in_sync == 1 else 2e-7
    for name in saved:
        np.testing.assert_allclose(restored[name], saved[name], rtol=rtol, atol=0,
                                   err_msg=name)
    a = checkpoint_values(straight.latest_checkpoint())
    b = checkpoint_values(again.latest_checkpoint())
    assert a["global_step"] == b["global_step"] == 20
    tolerance = 0 if strategy.num_replicas_in_sync == 1 else 1e-6
    for name in a:
        np.testing.assert_allclose(b[name], a[name], rtol=0, atol=tolerance, err_msg=name)


def tf1_variable_names(model_fn, feature_shape, params):
    with tf.Graph().as_default():
        x = v1.placeholder(tf.float32, feature_shape)
        y = v1.placeholder(tf.int32, feature_shape[:1])
        v1.train.get_or_create_global_step()
        model_fn(x, y, "train", dict(params, use_tpu=False, batch_size=feature_shape[0]))
        return sorted(v.op.name for v in v1.global_variables())


# Adam's names are the richest (two slots, two non-slot beta powers); the other optimizers'
# names on 8 replicas are opt-in (`-m slow`); Momentum's slots are also checked on 8 by
# test_resume_restores_exactly_and_continues_schedule.
@pytest.mark.slow_cases('mirrored8-adam')
@pytest.mark.eight_replicas(optimizer=["adam"])
@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam", "adagrad", "rmsprop"])
def test_checkpoint_keys_equal_tf1_graph_names(tmp_path, strategy, optimizer):
    params = {"optimizer": optimizer, "learning_rate": 0.05}
    est = make_estimator(tmp_path, strategy, models.kitchen_sink_model_fn, params=params)
    est.train(models.digits_input_fn(256, flat=True), steps=4)
    values = checkpoint_values(est.latest_checkpoint())
    assert sorted(values) == tf1_variable_names(models.kitchen_sink_model_fn, [8, 64], params)
    assert values["global_step"] == 4
    # Batch-norm moving statistics were updated by the training steps.
    assert np.abs(values["batch_normalization/moving_mean"]).sum() > 0


@pytest.mark.slow_cases('mirrored8')
def test_cnn_checkpoint_keys_equal_tf1_graph_names(tmp_path, strategy):
    est = make_estimator(tmp_path, strategy)
    est.train(models.digits_input_fn(256), steps=2)
    names = sorted(checkpoint_values(est.latest_checkpoint()))
    assert names == tf1_variable_names(models.cnn_model_fn, [8, 8, 8, 1], {})


@pytest.mark.slow_cases('mirrored8')
def test_same_seed_same_weights(tmp_path, strategy):
    runs = []
    for i in range(2):
        est = make_estimator(tmp_path / str(i), strategy, tf_random_seed=7)
        est.train(models.digits_input_fn(256, shuffle=True), steps=3)
        runs.append(checkpoint_values(est.latest_checkpoint()))
    for name in runs[0]:
        np.testing.assert_array_equal(runs[0][name], runs[1][name], err_msg=name)


def test_keep_checkpoint_max(tmp_path, strategy):
    est = make_estimator(tmp_path, strategy, models.linear_model_fn, ipl=1,
                         save_checkpoints_steps=1, keep_checkpoint_max=2)
    est.train(models.digits_input_fn(256, flat=True), steps=5)
    index_files = sorted(f for f in os.listdir(tmp_path) if f.endswith(".index"))
    assert index_files == ["model.ckpt-4.index", "model.ckpt-5.index"]


@pytest.mark.slow_cases('mirrored8')
def test_input_fn_exhaustion_ends_training_cleanly(tmp_path, strategy):
    est = make_estimator(tmp_path, strategy, models.linear_model_fn, ipl=4)
    est.train(models.digits_input_fn(64 * 6, repeat=False, flat=True), steps=100)
    assert checkpoint_values(est.latest_checkpoint())["global_step"] == 6


def test_input_fn_may_return_tensors_and_take_config(tmp_path, strategy):
    seen = {}

    def input_fn(params, config):
        seen["config"] = config
        x, y = models.digits(params["batch_size"], flat=True)
        return tf.constant(x), tf.constant(y)

    est = make_estimator(tmp_path, strategy, models.linear_model_fn, ipl=2)
    est.train(input_fn, steps=3)
    assert isinstance(seen["config"], RunConfig)
    assert checkpoint_values(est.latest_checkpoint())["global_step"] == 3


def test_params_seen_by_model_fn_and_input_fn(tmp_path, strategy):
    seen = {"model_fn": [], "input_fn": []}

    def model_fn(features, labels, mode, params):
        seen["model_fn"].append({k: params[k] for k in ("batch_size", "use_tpu", "extra")})
        return models.linear_model_fn(features, labels, mode, params)

    def input_fn(params):
        seen["input_fn"].append(params["batch_size"])
        return models.digits_input_fn(256, flat=True)(params)

    est = make_estimator(tmp_path, strategy, model_fn, params={"extra": 1}, ipl=2)
    est.train(input_fn, steps=2)
    replicas = strategy.num_replicas_in_sync
    assert seen["input_fn"] == [64 if replicas == 1 else 64]  # PER_HOST_V1: global / hosts.
    assert {tuple(sorted(p.items())) for p in seen["model_fn"]} == {
        (("batch_size", 64 // replicas), ("extra", 1), ("use_tpu", True))}


def test_use_tpu_false_gives_global_batch(tmp_path):
    from conftest import make_strategy

    seen = []

    def model_fn(features, labels, mode, params):
        seen.append((params["batch_size"], params["use_tpu"]))
        return models.linear_model_fn(features, labels, mode, params)

    est = make_estimator(tmp_path, None, model_fn, use_tpu=False, ipl=2)
    est.train(models.digits_input_fn(256, flat=True), steps=2)
    assert seen == [(64, False)]
    assert make_strategy("default").num_replicas_in_sync == 1


def test_gradients_then_apply_gradients_gets_tpu_sum(tmp_path, strategy):
    """The BERT pattern: tf.gradients + CrossShardOptimizer.apply_gradients sums over replicas."""

    def model_fn(features, labels, mode, params):
        w = v1.get_variable("w", [64, 10], initializer=v1.zeros_initializer())
        logits = tf.matmul(features, w)
        loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        opt = v1.tpu.CrossShardOptimizer(v1.train.GradientDescentOptimizer(0.5))
        grads = tf.gradients(loss, [w])
        train_op = opt.apply_gradients(zip(grads, [w]),
                                       global_step=v1.train.get_global_step())
        return TPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)

    est = make_estimator(tmp_path, strategy, model_fn, batch=64, ipl=1)
    est.train(models.digits_input_fn(64, flat=True), steps=1)
    w = checkpoint_values(est.latest_checkpoint())["w"]
    # Expected: 0.5 * SUM over replicas of each replica's mean-loss gradient.
    x, y = models.digits(64, flat=True)
    replicas = strategy.num_replicas_in_sync
    grad = np.zeros([64, 10], np.float32)
    for shard_x, shard_y in zip(np.split(x, replicas), np.split(y, replicas)):
        probs = np.full([len(shard_x), 10], 0.1, np.float32)
        probs[np.arange(len(shard_y)), shard_y] -= 1.0
        grad += shard_x.T @ probs / len(shard_x)
    np.testing.assert_allclose(w, -0.5 * grad, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------------------
# Legacy construction and call errors.


def test_reserved_params_key():
    with pytest.raises(ValueError, match=r"reserved keys but existed in params"):
        TPUEstimator(model_fn=models.linear_model_fn, config=RunConfig(),
                     params={"batch_size": 3}, train_batch_size=8)


def test_model_fn_without_params():
    def model_fn(features, labels, mode):
        return None

    with pytest.raises(ValueError, match=r"does not include params argument"):
        TPUEstimator(model_fn=model_fn, config=RunConfig(), train_batch_size=8)


def test_input_fn_without_params(tmp_path):
    est = make_estimator(tmp_path, None, models.linear_model_fn)
    with pytest.raises(ValueError, match=r"input_fn .* does not include params argument"):
        est.train(lambda: None, steps=1)


def test_batch_not_divisible_by_replicas(tmp_path):
    from conftest import make_strategy

    est = make_estimator(tmp_path, make_strategy("mirrored8"), models.linear_model_fn,
                         batch=12)
    with pytest.raises(ValueError, match=r"`train_batch_size` \(12\) must be divisible by "
                                         r"the number of replicas \(8\)\. Use a multiple of 8"):
        est.train(models.digits_input_fn(64, flat=True), steps=1)


def test_neither_steps_nor_max_steps(tmp_path):
    est = make_estimator(tmp_path, None, models.linear_model_fn)
    with pytest.raises(ValueError, match=r"one of `steps` or `max_steps` must be set"):
        est.train(models.digits_input_fn(64, flat=True))


@pytest.mark.parametrize("kwargs, message", [
    ({"steps": 0}, r"Must specify steps > 0, given: 0"),
    ({"steps": -3}, r"Must specify steps > 0, given: -3"),
    ({"max_steps": 0}, r"Must specify max_steps > 0, given: 0"),
    ({"steps": 1, "max_steps": 2}, r"Can not provide both steps and max_steps"),
])
def test_bad_steps(tmp_path, kwargs, message):
    est = make_estimator(tmp_path, None, models.linear_model_fn)
    with pytest.raises(ValueError, match=message):
        est.train(models.digits_input_fn(64, flat=True), **kwargs)


def test_config_not_run_config():
    with pytest.raises(ValueError, match=r"`config` must be provided with type "
                                         r"`tpu_config.RunConfig`; received dict"):
        TPUEstimator(model_fn=models.linear_model_fn, config={}, train_batch_size=8)


def test_missing_train_batch_size():
    with pytest.raises(ValueError, match=r"`train_batch_size` cannot be `None`"):
        TPUEstimator(model_fn=models.linear_model_fn, config=RunConfig())


def test_eval_metrics_of_wrong_form_fails_train(tmp_path):
    def model_fn(features, labels, mode, params):
        spec = models.linear_model_fn(features, labels, mode, params)
        return TPUEstimatorSpec(mode=mode, loss=spec.loss, train_op=spec.train_op,
                                eval_metrics="accuracy")

    est = make_estimator(tmp_path, None, model_fn)
    with pytest.raises(ValueError, match=r"eval_metrics should be tuple or list"):
        est.train(models.digits_input_fn(64, flat=True), steps=1)


def test_model_fn_returning_non_spec(tmp_path):
    def model_fn(features, labels, mode, params):
        return {"loss": tf.reduce_sum(features)}

    est = make_estimator(tmp_path, None, model_fn)
    with pytest.raises(ValueError, match=r"model_fn should return an EstimatorSpec or a "
                                         r"TPUEstimatorSpec, given: dict"):
        est.train(models.digits_input_fn(64, flat=True), steps=1)


@pytest.mark.slow_cases('mirrored8')
def test_tf_variable_with_computed_initial_value(tmp_path, strategy):
    """The TF1 tutorial idiom `tf.Variable(tf.truncated_normal(...))` inside model_fn."""

    def model_fn(features, labels, mode, params):
        w = tf.Variable(v1.truncated_normal([64, 10], stddev=0.1), name="weights")
        b = tf.Variable(tf.zeros([10]), name="biases")
        logits = tf.matmul(features, w) + b
        loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        opt = v1.train.GradientDescentOptimizer(0.1)
        return TPUEstimatorSpec(mode, loss=loss,
                                train_op=opt.minimize(loss, v1.train.get_global_step()))

    est = make_estimator(tmp_path, strategy, model_fn, ipl=2)
    est.train(models.digits_input_fn(256, flat=True), steps=2)
    first = checkpoint_values(str(tmp_path / "model.ckpt-0"))
    assert sorted(first) == ["biases", "global_step", "weights"]
    assert 0.05 < first["weights"].std() < 0.1  # Truncated normal, not zeros or ones.
    est.train(models.digits_input_fn(256, flat=True), steps=2)  # Retrace: same variables.
    assert sorted(checkpoint_values(est.latest_checkpoint())) == sorted(first)


def test_variable_initial_value_from_features_is_a_clear_error(tmp_path):
    def model_fn(features, labels, mode, params):
        w = tf.Variable(tf.reduce_mean(features, axis=0), name="bad")
        loss = tf.reduce_sum(w)
        return TPUEstimatorSpec(mode, loss=loss, train_op=v1.assign_add(
            v1.train.get_global_step(), 1))

    est = make_estimator(tmp_path, None, model_fn, use_tpu=False)
    with pytest.raises(Exception, match=r"`bad` has an initial value computed inside "
                                        r"model_fn"):
        est.train(models.digits_input_fn(64, flat=True), steps=1)


@pytest.mark.slow_cases('mirrored8')
def test_model_fn_gets_static_per_replica_shapes_from_input_of_unknown_length(tmp_path,
                                                                             strategy):
    """Legacy's TPU infeed gave model_fn static per-core shapes. A TF1 `Dataset.map` after
    `repeat()` (or a finite set) leaves the number of batches unknown; model_fn must still
    see `(per_replica_batch, 64)` in train and evaluate, as retinanet's
    `bs, w = x.get_shape().as_list(); tf.reshape(x, [bs, w, -1])` needs."""
    shapes = []

    def model_fn(features, labels, mode, params):
        shapes.append((mode, features.shape.as_list(), labels.shape.as_list()))
        bs, width = features.get_shape().as_list()
        logits = v1.layers.dense(tf.reshape(features, [bs, width, -1])[:, :, 0], 10)
        loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=v1.train.get_global_step())
        return TPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)

    def input_fn(params):
        x, y = models.digits(64, flat=True)
        data = v1.data.Dataset.from_tensor_slices((x, y))
        if params["context"].mode == "train":
            data = data.repeat()
        data = data.map(lambda a, b: (a, b))  # v1 map: cardinality unknown
        return data.batch(params["batch_size"], drop_remainder=True)

    config = RunConfig(model_dir=str(tmp_path), train_distribute=strategy,
                       tpu_config=TPUConfig(iterations_per_loop=2))
    est = TPUEstimator(model_fn=model_fn, config=config, use_tpu=True,
                       train_batch_size=16, eval_batch_size=16)
    est.train(input_fn, steps=3)
    per_replica = 16 // strategy.num_replicas_in_sync
    result = est.evaluate(input_fn, steps=None)
    assert result["global_step"] == 3
    assert {(mode, tuple(f), tuple(l)) for mode, f, l in shapes} == {
        ("train", (per_replica, 64), (per_replica,)),
        ("eval", (per_replica, 64), (per_replica,))}


@pytest.mark.slow_cases('mirrored8')
def test_step_zero_checkpoint_written_while_compiling_equals_one_written_before(
        tmp_path, strategy, monkeypatch):
    """A fresh model_dir's step-0 checkpoint is written while the train function's graph is
    prepared on another thread (`loop.compiling`): the same checkpoints as without it."""
    from tpu_estimator_compat.loop import train_loop as loop_lib

    params = {"optimizer": "momentum", "learning_rate": 0.1}
    input_fn = models.digits_input_fn(64, flat=True)
    entered = []
    compiling = loop_lib.compiling

    def spy(*args, **kwargs):
        entered.append(True)
        return compiling(*args, **kwargs)

    monkeypatch.setattr(loop_lib, "compiling", spy)
    make_estimator(tmp_path / "overlapped", strategy, models.kitchen_sink_model_fn,
                   params=params, ipl=2, tf_random_seed=3).train(input_fn, steps=4)
    assert entered == [True]
    monkeypatch.setattr(loop_lib, "compiling", lambda *args: contextlib.nullcontext())
    make_estimator(tmp_path / "in_turn", strategy, models.kitchen_sink_model_fn,
                   params=params, ipl=2, tf_random_seed=3).train(input_fn, steps=4)
    for step in (0, 4):
        a = checkpoint_values(str(tmp_path / "overlapped" / f"model.ckpt-{step}"))
        b = checkpoint_values(str(tmp_path / "in_turn" / f"model.ckpt-{step}"))
        assert sorted(a) == sorted(b)
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=f"{name} at {step}")
