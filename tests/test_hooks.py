"""SessionRunHooks at loop granularity: call order, step values, the reshaped built-ins."""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf

import models
import tpu_estimator_compat
from tpu_estimator_compat import ModeKeys, RunConfig, TPUConfig, TPUEstimator, TPUEstimatorSpec
from tpu_estimator_compat.loop import hooks as hooks_lib

v1 = tf.compat.v1


class RecordingHook(v1.train.SessionRunHook):
    """A user's own hook: records every call with what it saw."""

    def __init__(self):
        self.calls = []

    def begin(self):
        self._step = v1.train.get_global_step()
        self.calls.append(("begin", self._step is not None))

    def after_create_session(self, session, coord):
        self.calls.append(("after_create_session", int(session.run(self._step))))

    def before_run(self, run_context):
        self.calls.append(("before_run",))
        return v1.train.SessionRunArgs({"step": self._step, "loss": "loss"})

    def after_run(self, run_context, run_values):
        self.calls.append(("after_run", int(run_values.results["step"]),
                           bool(np.isfinite(run_values.results["loss"]))))

    def end(self, session):
        self.calls.append(("end", int(session.run(self._step))))


def make(model_dir, strategy, model_fn=models.linear_model_fn, ipl=4, **kwargs):
    config = RunConfig(model_dir=str(model_dir), train_distribute=strategy,
                       eval_distribute=strategy, tpu_config=TPUConfig(iterations_per_loop=ipl),
                       **kwargs)
    return TPUEstimator(model_fn=model_fn, config=config, train_batch_size=64,
                        eval_batch_size=64)


def test_user_hook_order_and_steps(tmp_path, strategy):
    hook = RecordingHook()
    make(tmp_path, strategy).train(models.digits_input_fn(256, flat=True), steps=10,
                                   hooks=[hook])
    assert hook.calls == [
        ("begin", True), ("after_create_session", 0),
        ("before_run",), ("after_run", 4, True),
        ("before_run",), ("after_run", 8, True),
        ("before_run",), ("after_run", 10, True),
        ("end", 10)]


def test_request_stop_ends_training(tmp_path, strategy):
    class StopAfterFirstLoop(v1.train.SessionRunHook):
        def after_run(self, run_context, run_values):
            run_context.request_stop()

    est = make(tmp_path, strategy)
    est.train(models.digits_input_fn(256, flat=True), steps=10, hooks=[StopAfterFirstLoop()])
    assert tf.train.load_checkpoint(est.latest_checkpoint()).get_tensor("global_step") == 4


@pytest.mark.parametrize("kwargs, expected", [({"num_steps": 6}, 6), ({"last_step": 5}, 5)])
def test_stop_at_step_hook(tmp_path, strategy, kwargs, expected):
    est = make(tmp_path, strategy)
    est.train(models.digits_input_fn(256, flat=True), steps=100,
              hooks=[v1.train.StopAtStepHook(**kwargs)])
    assert tf.train.load_checkpoint(est.latest_checkpoint()).get_tensor("global_step") == expected


def nan_in_fourth_batch_input_fn(params):
    """Batches of real digits; the 4th batch has NaN features, so step 4's loss is NaN."""
    x, y = models.digits(64 * 8, flat=True)
    x = x.copy()
    x[64 * 3:64 * 4] = np.nan
    batch = params["batch_size"]
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch, drop_remainder=True)


def test_nan_tensor_hook_names_the_step(tmp_path, strategy):
    # stop_on_nan_loss=False: the hook, not the estimator's own check, must catch it.
    est = make(tmp_path, strategy, ipl=2, stop_on_nan_loss=False)
    with pytest.raises(v1.train.NanLossDuringTrainingError, match=r"global step 4 is nan"):
        est.train(nan_in_fourth_batch_input_fn, steps=8,
                  hooks=[v1.train.NanTensorHook("loss")])


def test_logging_tensor_hook_and_training_hooks_from_spec(tmp_path, strategy):
    recorder = RecordingHook()

    def model_fn(features, labels, mode, params):
        spec = models.linear_model_fn(features, labels, mode, params)
        return spec._replace(training_hooks=[recorder])

    est = make(tmp_path, strategy, model_fn)
    est.train(models.digits_input_fn(256, flat=True), steps=8, hooks=[
        v1.train.LoggingTensorHook({"loss": "loss", "step": "global_step"}, every_n_iter=4)])
    assert [c for c in recorder.calls if c[0] == "after_run"] == [
        ("after_run", 4, True), ("after_run", 8, True)]


def test_checkpoint_saver_hook_replaces_default(tmp_path, strategy):
    other = tmp_path / "other"
    est = make(tmp_path / "model", strategy, ipl=2, save_checkpoints_steps=1000)
    est.train(models.digits_input_fn(256, flat=True), steps=6, hooks=[
        v1.train.CheckpointSaverHook(str(other), save_steps=4)])
    index = sorted(f for f in os.listdir(other) if f.endswith(".index"))
    assert index == ["model.ckpt-0.index", "model.ckpt-4.index", "model.ckpt-6.index"]


def test_unsupported_builtin_hook_refused_before_training(tmp_path):
    est = make(tmp_path, None)
    with pytest.raises(NotImplementedError, match=r"`SummarySaverHook` is not supported"):
        est.train(models.digits_input_fn(256, flat=True), steps=2, hooks=[
            v1.train.SummarySaverHook(save_steps=1, output_dir=str(tmp_path),
                                      summary_op=tf.constant(""))])
    assert not os.path.exists(os.path.join(str(tmp_path), "checkpoint"))


class VariableMakingHook(v1.train.SessionRunHook):
    """tensorflow-estimator keras_test's hook: a v1 variable made in begin(), no reuse."""

    def begin(self):
        self.variable = v1.get_variable("temp", [1])


@pytest.mark.parametrize("use_tpu", [False, True])
def test_hook_begin_makes_its_v1_variable_in_every_run(tmp_path, strategy, use_tpu):
    """Legacy ran each train()/evaluate() in a new graph, so `get_variable('temp')` in a
    hook's begin() did not find the previous run's."""
    config = RunConfig(model_dir=str(tmp_path), train_distribute=strategy,
                       eval_distribute=strategy, tpu_config=TPUConfig(iterations_per_loop=2))
    est = TPUEstimator(model_fn=models.linear_full_model_fn, config=config, use_tpu=use_tpu,
                       train_batch_size=64, eval_batch_size=64)
    hook = VariableMakingHook()
    for steps in (2, 2):
        est.train(models.digits_input_fn(256, flat=True), steps=steps, hooks=[hook])
        est.evaluate(models.digits_input_fn(128, flat=True), steps=1, hooks=[hook])
    assert hook.variable.shape == [1]
    assert "temp" in dict(tf.train.list_variables(est.latest_checkpoint()))


@pytest.mark.slow_cases('mirrored8')
def test_evaluation_hooks_once_per_loop(tmp_path, strategy):
    est = make(tmp_path, strategy, models.linear_full_model_fn, ipl=2)
    est.train(models.digits_input_fn(256, flat=True), steps=2)
    hook = RecordingHook()

    def input_fn(params):
        x, y = models.digits(300, flat=True)
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(params["batch_size"])

    est.evaluate(input_fn, hooks=[hook])
    # 300 rows at 64 per step = 5 steps: loops of 2, 2, 1.
    assert [c[0] for c in hook.calls].count("before_run") == 3
    assert hook.calls[0] == ("begin", True) and hook.calls[-1] == ("end", 2)


# Hooks fetching the model's own tensors: legacy's CPU path (use_tpu=False) ran one
# session.run per step, so hooks ran around every step and could fetch any graph tensor.
# Replayed against tests/goldens/hook_fetches/legacy.json (recorded by
# tests/legacy_recorder/hook_fetches.py on the legacy stack).

def _hook_fetches(workdir, strategy):
    from conftest import legacy_recorder

    recorder, golden = legacy_recorder("hook_fetches")
    return recorder.run(str(workdir), train_distribute=strategy), golden["legacy"]


def test_hooks_fetch_model_tensors_per_step_as_legacy_cpu(tmp_path):
    """By object (the spec's loss), by name ('hidden_mean:0'), the global step variable, and
    LoggingTensorHook on names: every step, as legacy's values on one replica."""
    shim, legacy = _hook_fetches(tmp_path, None)
    assert [c[0] for c in shim["calls"]] == [c[0] for c in legacy["calls"]]
    assert [c[0] for c in shim["calls"]].count("after_run") == 6  # ipl=4: still per step.
    # Each call with the global step it saw (the step's start), the loss and the hidden means.
    # Recorded on one CPU; another CPU's kernels may sum in another order (the parity suite
    # owns bit-exactness), so values compare within float32 rounding.
    assert [c[:2] for c in shim["calls"]] == [c[:2] for c in legacy["calls"]]
    for got, want in zip(shim["calls"], legacy["calls"]):
        np.testing.assert_allclose(np.hstack(got[2:]) if got[2:] else [],
                                   np.hstack(want[2:]) if want[2:] else [],
                                   rtol=2e-6, atol=1e-6, err_msg=str(got[:2]))
    assert len(shim["logged"]) == len(legacy["logged"]) == 3  # every_n_iter=2: steps 1, 3, 5.
    np.testing.assert_allclose(np.hstack([np.hstack(x) for x in shim["logged"]]),
                               np.hstack([np.hstack(x) for x in legacy["logged"]]),
                               rtol=2e-6, atol=1e-6)


@pytest.mark.slow
def test_hooks_fetch_model_tensors_on_replicas(tmp_path):
    """On 8 replicas the spec's loss is the global batch's (legacy's one device saw the whole
    batch); other tensors are replica 0's."""
    import conftest

    shim, legacy = _hook_fetches(tmp_path, conftest.make_strategy("mirrored8"))
    runs = [(c, w) for c, w in zip(shim["calls"], legacy["calls"]) if c[0] == "after_run"]
    assert [c[1] for c, _ in runs] == [w[1] for _, w in runs] == list(range(6))
    np.testing.assert_allclose([c[2] for c, _ in runs], [w[2] for _, w in runs], rtol=1e-5)
    assert all(len(c[3]) == 8 and np.all(np.isfinite(c[3])) for c, _ in runs)
    assert len(shim["logged"]) == 3


def _assert_calls_match(shim_calls, legacy_calls):
    assert [c[:2] for c in shim_calls] == [c[:2] for c in legacy_calls]
    for got, want in zip(shim_calls, legacy_calls):
        np.testing.assert_allclose(np.hstack(got[2:]) if got[2:] else [],
                                   np.hstack(want[2:]) if want[2:] else [],
                                   rtol=2e-6, atol=1e-6, err_msg=str(got[:2]))


def test_evaluation_and_prediction_hooks_fetch_model_tensors_per_step_as_legacy_cpu(
        tmp_path):
    """evaluation_hooks (ELECTRA's ETA hook on the loss tensor), a LoggingTensorHook passed
    to evaluate(), and prediction_hooks: legacy's CPU path ran them around every evaluation
    or prediction batch, with the checkpoint's global step (recorded on the legacy stack)."""
    from conftest import legacy_recorder

    recorder, golden = legacy_recorder("hook_fetches")
    shim, legacy = recorder.run_inference(str(tmp_path)), golden["legacy_inference"]
    assert [c[0] for c in legacy["evaluate"]["calls"]].count("after_run") == 3  # ipl=4
    _assert_calls_match(shim["evaluate"]["calls"], legacy["evaluate"]["calls"])
    assert len(shim["evaluate"]["logged"]) == len(legacy["evaluate"]["logged"]) == 2
    np.testing.assert_allclose(np.hstack([np.hstack(x) for x in shim["evaluate"]["logged"]]),
                               np.hstack([np.hstack(x) for x in legacy["evaluate"]["logged"]]),
                               rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose([shim["evaluate"]["accuracy"], shim["evaluate"]["loss"]],
                               [legacy["evaluate"]["accuracy"], legacy["evaluate"]["loss"]],
                               rtol=2e-6)
    _assert_calls_match(shim["predict"]["calls"], legacy["predict"]["calls"])
    assert shim["predict"]["classes"] == legacy["predict"]["classes"]


@pytest.mark.slow
def test_evaluation_and_prediction_hooks_fetch_model_tensors_on_replicas(tmp_path):
    """On 8 replicas the loss is the global batch's, other tensors replica 0's."""
    import conftest
    from conftest import legacy_recorder

    recorder, golden = legacy_recorder("hook_fetches")
    shim = recorder.run_inference(str(tmp_path), conftest.make_strategy("mirrored8"))
    legacy = golden["legacy_inference"]
    runs = [c for c in shim["evaluate"]["calls"] if c[0] == "after_run"]
    want = [c for c in legacy["evaluate"]["calls"] if c[0] == "after_run"]
    assert [c[1] for c in runs] == [c[1] for c in want] == [6, 6, 6]
    np.testing.assert_allclose([c[2] for c in runs], [c[2] for c in want], rtol=1e-5)
    assert all(len(c[3]) == 8 and np.all(np.isfinite(c[3])) for c in runs)
    assert [c[:2] for c in shim["predict"]["calls"]] == [
        c[:2] for c in legacy["predict"]["calls"]]
    assert shim["predict"]["classes"] == legacy["predict"]["classes"]


@pytest.mark.slow
def test_evaluation_hook_fetching_model_tensor_on_tpu_path_fails_as_legacy_tpu(tmp_path):
    """use_tpu=True evaluation ran hooks once per loop on legacy's TPU path too."""
    def model_fn(features, labels, mode, params):
        spec = models.linear_model_fn(features, labels, mode, params)

        class FetchLoss(v1.train.SessionRunHook):
            def before_run(self, run_context):
                return v1.train.SessionRunArgs(spec.loss)

        return spec._replace(evaluation_hooks=[FetchLoss()])

    est = make(tmp_path, None, model_fn)
    est.train(models.digits_input_fn(256, flat=True), steps=1)
    with pytest.raises(NotImplementedError, match=r"with use_tpu=True hooks run once per loop"):
        est.evaluate(models.digits_input_fn(256, flat=True), steps=2)


@pytest.mark.slow
def test_hook_fetching_model_tensor_on_tpu_path_fails_as_legacy_tpu(tmp_path):
    """use_tpu=True: hooks run once per loop, outside the compiled loop (legacy could not
    fetch tensors from inside its TPU loop either): a clear error, before any step."""
    def model_fn(features, labels, mode, params):
        spec = models.linear_model_fn(features, labels, mode, params)

        class FetchLoss(v1.train.SessionRunHook):
            def before_run(self, run_context):
                return v1.train.SessionRunArgs(spec.loss)

        return spec._replace(training_hooks=[FetchLoss()])

    est = make(tmp_path, None, model_fn)
    with pytest.raises(NotImplementedError, match=r"use_tpu=True.*use_tpu=False"):
        est.train(models.digits_input_fn(256, flat=True), steps=4)


def test_logging_tensor_hook_on_named_tensor_refused_on_tpu_path(tmp_path):
    est = make(tmp_path, None)
    with pytest.raises(NotImplementedError, match=r"LoggingTensorHook asks for.*use_tpu=False"):
        est.train(models.digits_input_fn(256, flat=True), steps=2, hooks=[
            v1.train.LoggingTensorHook({"w": "linear/w:0"}, every_n_iter=1)])


def test_hooks_without_tensor_fetches_keep_loops_on_tpu_path_only(tmp_path):
    """use_tpu=False runs hooks around every step even when ipl is 4; use_tpu=True per loop."""
    counts = {}
    for use_tpu in (False, True):
        hook = RecordingHook()
        config = RunConfig(model_dir=str(tmp_path / str(use_tpu)),
                           tpu_config=TPUConfig(iterations_per_loop=4))
        TPUEstimator(model_fn=models.linear_model_fn, config=config, train_batch_size=64,
                     use_tpu=use_tpu).train(models.digits_input_fn(256, flat=True), steps=8,
                                            hooks=[hook])
        counts[use_tpu] = [c[1] for c in hook.calls if c[0] == "after_run"]
    assert counts == {False: list(range(8)), True: [4, 8]}


EMA_DECAY = 0.5


def _ema_model_fn(features, labels, mode, params):
    """A linear model whose train_op also keeps an EMA of its weights (decay 0.5)."""
    logits = v1.layers.dense(features, 10)
    loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = None
    if mode == ModeKeys.TRAIN:
        train_op = v1.train.GradientDescentOptimizer(0.5).minimize(
            loss, v1.train.get_global_step())
        with tf.control_dependencies([train_op]):
            train_op = v1.train.ExponentialMovingAverage(EMA_DECAY).apply(
                v1.trainable_variables())
    return TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


class LoadEMAHook(v1.train.SessionRunHook):
    """tensorflow/tpu inception/amoeba_net's evaluation hook: a Saver over the EMA map,
    built in begin() from the graph's variables, restored in after_create_session."""

    def __init__(self, model_dir):
        self._model_dir = model_dir

    def begin(self):
        self.names = sorted(v1.train.ExponentialMovingAverage(EMA_DECAY).variables_to_restore())
        self._saver = v1.train.Saver(
            v1.train.ExponentialMovingAverage(EMA_DECAY).variables_to_restore())

    def after_create_session(self, session, coord):
        self._saver.restore(session, v1.train.latest_checkpoint(self._model_dir))


def _digits_loss(kernel, bias, x, y):
    logits = x @ kernel + bias
    logits = logits - logits.max(axis=1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return float(-log_probs[np.arange(len(y)), y].mean())


@pytest.mark.slow_cases('mirrored8')
def test_evaluation_hook_restoring_ema_weights_evaluates_them(tmp_path, strategy):
    """Legacy ran begin() and after_create_session() on the finalized model graph: the hook
    sees every variable, and its Saver's restore replaces the checkpoint's weights by their
    moving averages for the evaluation."""
    est = make(tmp_path, strategy, model_fn=_ema_model_fn)
    est.train(models.digits_input_fn(256, flat=True), max_steps=8)
    hook = LoadEMAHook(str(tmp_path))
    result = est.evaluate(models.digits_input_fn(64, flat=True), steps=1, hooks=[hook])
    assert hook.names == ["dense/bias/ExponentialMovingAverage",
                          "dense/kernel/ExponentialMovingAverage", "global_step"]
    reader = tf.train.load_checkpoint(est.latest_checkpoint())
    x, y = models.digits(64, flat=True)
    ema = _digits_loss(reader.get_tensor("dense/kernel/ExponentialMovingAverage"),
                       reader.get_tensor("dense/bias/ExponentialMovingAverage"), x, y)
    raw = _digits_loss(reader.get_tensor("dense/kernel"), reader.get_tensor("dense/bias"), x, y)
    assert abs(ema - raw) > 1e-3
    np.testing.assert_allclose(result["loss"], ema, rtol=1e-4)
    # The next evaluate without the hook sees the checkpoint's own weights again.
    plain = est.evaluate(models.digits_input_fn(64, flat=True), steps=1)
    np.testing.assert_allclose(plain["loss"], raw, rtol=1e-4)


def test_a_hooks_saver_cannot_save_and_says_what_to_use(tmp_path):
    class SavingHook(v1.train.SessionRunHook):
        def begin(self):
            self._saver = v1.train.Saver()

        def end(self, session):
            self._saver.save(session, str(tmp_path / "mine"))

    est = make(tmp_path, tf.distribute.get_strategy(), model_fn=_ema_model_fn)
    with pytest.raises(NotImplementedError,
                       match=r"Saver\.save\(sess, .*mine.*restore\(\) only.*saving_listeners"):
        est.train(models.digits_input_fn(256, flat=True), max_steps=4, hooks=[SavingHook()])


class _StepAfterRunHook(v1.train.SessionRunHook):
    """Reads the global step both ways ELECTRA's ETAHook and legacy hooks did."""

    def __init__(self):
        self.seen = []

    def begin(self):
        self._step = v1.train.get_global_step()

    def before_run(self, run_context):
        return v1.train.SessionRunArgs(self._step)

    def after_run(self, run_context, run_values):
        self.seen.append((int(run_values.results), int(run_context.session.run(self._step))))


def test_session_run_in_after_run_sees_the_steps_increment_on_cpu_path(tmp_path):
    """Legacy CPU path (recorded on TF 2.15): the step's own fetch read the global step
    before its increment, a `run_context.session.run` in after_run (a later session.run)
    read it after: (0, 1), (1, 2), (2, 3)."""
    hook = _StepAfterRunHook()
    config = RunConfig(model_dir=str(tmp_path), tpu_config=TPUConfig(iterations_per_loop=2))
    TPUEstimator(model_fn=models.linear_model_fn, config=config, train_batch_size=64,
                 use_tpu=False).train(models.digits_input_fn(256, flat=True), steps=3,
                                      hooks=[hook])
    assert hook.seen == [(0, 1), (1, 2), (2, 3)]


def _summary_hooks_model_fn(features, labels, mode, params):
    """A SummarySaverHook over merge_all() in training and evaluation hooks, and a
    StepCounterHook in training (tensor2tensor's use_tpu=False evaluation hooks)."""
    logits = v1.layers.dense(features, 1)
    loss = tf.reduce_mean(tf.square(logits - labels))
    v1.summary.scalar("my_loss", loss)
    v1.summary.histogram("logits", logits)
    hook = v1.train.SummarySaverHook(save_steps=2, output_dir=params["out"],
                                     summary_op=v1.summary.merge_all())
    if mode == ModeKeys.EVAL:
        return TPUEstimatorSpec(mode, loss=loss, evaluation_hooks=[hook])
    counter = v1.train.StepCounterHook(every_n_steps=2, output_dir=params["out"] + "/counter")
    train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss, v1.train.get_global_step())
    return TPUEstimatorSpec(mode, loss=loss, train_op=train_op, training_hooks=[hook, counter])


def _events(directory):
    events = []
    for path in sorted(glob.glob(os.path.join(directory, "events*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            what = event.WhichOneof("what")
            if what in ("summary", "session_log"):
                events.append((event.step, what, sorted(v.tag for v in event.summary.value)))
    return events


def test_summary_saver_and_step_counter_hooks_run_on_the_cpu_path(tmp_path):
    """use_tpu=False: both run as themselves around every step, as on a plain Estimator. The
    schedules were recorded with this model_fn on TF 2.15.1 + tensorflow-estimator 2.15.0."""
    out = str(tmp_path / "summaries")
    x = np.random.RandomState(0).randn(32, 2).astype(np.float32)

    def input_fn(params):
        return tf.data.Dataset.from_tensor_slices((x, x[:, :1])).repeat().batch(
            params["batch_size"], drop_remainder=True)

    est = TPUEstimator(model_fn=_summary_hooks_model_fn, use_tpu=False, train_batch_size=8,
                       eval_batch_size=8, params={"out": out},
                       config=RunConfig(model_dir=str(tmp_path / "model"),
                                        tpu_config=TPUConfig(iterations_per_loop=5)))
    est.train(input_fn, max_steps=6)
    est.evaluate(input_fn, steps=3)
    tags = ["logits", "my_loss"]
    assert _events(out) == [(1, "session_log", []), (1, "summary", tags), (3, "summary", tags),
                            (5, "summary", tags), (6, "session_log", []), (6, "summary", tags),
                            (6, "summary", tags)]
    assert _events(out + "/counter") == [(3, "summary", ["global_step/sec"]),
                                         (5, "summary", ["global_step/sec"])]


def test_a_hooks_own_variable_is_not_required_by_later_restores(tmp_path):
    """Early stopping's hooks make `signal_early_stopping/STOP` in `begin()`. Legacy's
    evaluate, predict and next train built graphs without it and restored what they had;
    here every later restore of a checkpoint that lacks it keeps its initial value."""
    class StopVariableHook(v1.train.SessionRunHook):
        def begin(self):
            with v1.variable_scope("signal_early_stopping", reuse=v1.AUTO_REUSE):
                self.stop = v1.get_variable(
                    "STOP", shape=[], dtype=tf.bool, initializer=v1.constant_initializer(False),
                    collections=[v1.GraphKeys.GLOBAL_VARIABLES], use_resource=True)

    est = make(tmp_path, None)
    input_fn = models.digits_input_fn(256, flat=True)
    est.train(input_fn, steps=4, hooks=[StopVariableHook()])
    assert est.evaluate(input_fn, steps=1)["global_step"] == 4
    est.train(input_fn, steps=4)  # Resumes from a checkpoint without STOP.
    assert tf.train.load_checkpoint(est.latest_checkpoint()).get_tensor("global_step") == 8


def test_check_hooks_type_is_legacy_s_private_check():
    tpu_estimator_compat.install_aliases()  # Serves legacy's module paths.
    from tensorflow.python.estimator import estimator  # pylint: disable=g-direct-tensorflow-import

    check = estimator._check_hooks_type  # pylint: disable=protected-access
    assert check is hooks_lib.check_hooks_type
    hook = tf.compat.v1.train.StopAtStepHook(last_step=3)
    assert check(None) == [] and check((hook,)) == [hook]
    given = [hook]
    assert check(given) is not given  # A new list: InMemoryEvaluatorHook extends it.
    with pytest.raises(TypeError, match="Hooks must be a SessionRunHook, given: 'not a hook'"):
        check([hook, "not a hook"])


def test_logging_tensor_hook_on_a_list_of_tensors(tmp_path, caplog):
    """`LoggingTensorHook(tensors=[t1, t2])` (tensorflow/docs' logging_stop_hook guide) keys
    its fetches by the graph tensors; they are walked as session.run walked them, unsorted,
    and the hook reads its values back by those keys."""
    seen = []

    class Recorder(v1.train.SessionRunHook):
        def before_run(self, run_context):
            return v1.train.SessionRunArgs({self.kernel: self.kernel, "bias": self.bias})

        def after_run(self, run_context, run_values):
            results = run_values.results
            kernel = next(key for key in results if key != "bias")  # The tensor key, as given.
            seen.append((results[kernel].shape, results["bias"]))

    recorder = Recorder()

    def model_fn(features, labels, mode, params):
        dense = v1.layers.Dense(1)
        loss = v1.losses.mean_squared_error(labels, dense(features["x"]))
        kernel, bias = tf.identity(dense.weights[0]), tf.identity(dense.weights[1])
        if not hasattr(recorder, "kernel"):  # model_fn is traced again for fetched tensors.
            recorder.kernel, recorder.bias = kernel, bias
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=v1.train.get_global_step())
        return TPUEstimatorSpec(mode, loss=loss, train_op=train_op, training_hooks=[
            v1.train.LoggingTensorHook(tensors=[kernel, bias], every_n_iter=1), recorder])

    def input_fn(params):
        x = np.arange(32, dtype=np.float32).reshape(16, 2) / 32
        return tf.data.Dataset.from_tensor_slices(({"x": x}, x[:, :1])).repeat().batch(
            params["batch_size"], drop_remainder=True)

    caplog.set_level("INFO")
    est = TPUEstimator(model_fn=model_fn, use_tpu=False, train_batch_size=4,
                       config=RunConfig(model_dir=str(tmp_path)))
    est.train(input_fn, max_steps=3)
    assert [shape for shape, _ in seen] == [(2, 1)] * 3
    assert all(bias.shape == (1,) for _, bias in seen)
    logged = [r.getMessage() for r in caplog.records if "Identity" in r.getMessage()]
    assert len(logged) == 3  # Tagged by the tensors, as legacy printed them:
    assert logged[0].startswith('Tensor("Identity:0", shape=(2, 1), dtype=float32) = [[')


class _MergeAllInBeginHook(v1.train.SessionRunHook):
    """Merges the graph's summaries in begin() and fetches the merge every step (the canned
    estimators' tests' `_SummaryHook`)."""

    def __init__(self):
        self.summaries = []

    def begin(self):
        self._op = v1.summary.merge_all()

    def before_run(self, run_context):
        return v1.train.SessionRunArgs({"summary": self._op})

    def after_run(self, run_context, run_values):
        summary = v1.Summary()
        summary.ParseFromString(run_values.results["summary"])
        self.summaries.append([(v.tag, round(v.simple_value, 4)) for v in summary.value])


def _scalar_summary_model_fn(features, labels, mode, params):
    predictions = v1.layers.dense(features, 1, kernel_initializer=tf.ones_initializer())
    loss = tf.reduce_mean(tf.square(predictions - labels))
    v1.summary.scalar("mean_prediction", tf.reduce_mean(predictions))
    train_op = v1.train.GradientDescentOptimizer(0.0).minimize(loss, v1.train.get_global_step())
    return TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def test_merge_all_in_a_hooks_begin_merges_model_fn_summaries_every_step(tmp_path):
    """Legacy's hooks began on model_fn's graph: `merge_all()` there held model_fn's v1
    summaries and the Estimator's own `loss` summary, fetched at every step (CPU path).
    The values were recorded with this model_fn on TF 2.15.1 + tensorflow-estimator 2.15.0."""
    hook = _MergeAllInBeginHook()
    x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    est = TPUEstimator(model_fn=_scalar_summary_model_fn, use_tpu=False, train_batch_size=2,
                       config=RunConfig(model_dir=str(tmp_path)))
    est.train(lambda params: (x, np.array([[0.0], [0.0]], np.float32)), steps=3, hooks=[hook])
    # Predictions 3 and 7 (ones kernel, zero bias, a learning rate of 0): loss (9 + 49) / 2.
    assert hook.summaries == [[("mean_prediction", 5.0), ("loss", 29.0)]] * 3


def _named_ops_model_fn(features, labels, mode):
    """Names tensors for LoggingTensorHook as tensorflow/models' r1 programs did
    (`tf.identity(cross_entropy, name='cross_entropy')`, the canned heads' `head/truediv`)."""
    logits = v1.layers.dense(features["x"], 1, kernel_initializer=v1.zeros_initializer())
    loss = v1.losses.mean_squared_error(labels, logits)
    tf.identity(loss * 2.0, name="doubled_loss")
    tf.unique(tf.reshape(labels, [-1]), name="two_outputs")
    train_op = v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _named_ops_input_fn():
    x = np.arange(32, dtype=np.float32).reshape(16, 2) / 32
    return tf.data.Dataset.from_tensor_slices(({"x": x}, x[:, :1])).repeat().batch(4)


def _logged(caplog, tensors):
    """The lines a LoggingTensorHook on `tensors` printed over 3 steps of training."""
    from tpu_estimator_compat.api.estimator import Estimator

    tpu_estimator_compat.install_aliases()
    caplog.clear()
    est = Estimator(_named_ops_model_fn)
    est.train(_named_ops_input_fn, max_steps=3,
              hooks=[v1.train.LoggingTensorHook(tensors, every_n_iter=1)])
    return [r.getMessage().split(" (")[0] for r in caplog.records
            if r.getMessage().startswith("doubled =")]  # Without the "(0.006 sec)" timing.


def test_logging_tensor_hook_on_an_op_name_logs_its_only_output(caplog):
    """`LoggingTensorHook({'loss': 'head/weighted_loss/Sum'})` names an op: legacy's begin()
    took its only output (`:0`). It was fetched as an op and logged `None` (census_main.py
    of tensorflow/models official/r1 printed `average_loss = None, loss = None`)."""
    caplog.set_level("INFO")
    by_op = _logged(caplog, {"doubled": "doubled_loss"})
    by_tensor = _logged(caplog, {"doubled": "doubled_loss:0"})
    assert len(by_op) == 3 and by_op == by_tensor
    assert all(float(line.split(" = ")[1]) > 0 for line in by_op)


def test_logging_tensor_hook_on_an_ambiguous_or_unknown_op_name_fails_as_legacy(caplog):
    with pytest.raises(ValueError, match=r"Name two_outputs is ambiguous, as this `Operation` "
                                         r"has multiple outputs \(at least 2\)\."):
        _logged(caplog, {"doubled": "two_outputs"})
    with pytest.raises(KeyError, match="The name 'no_such_op:0' refers to a Tensor which "
                                       "does not exist"):
        _logged(caplog, {"doubled": "no_such_op"})
