"""TPUEstimator.evaluate / predict / export_saved_model end to end, on 1 and 8 replicas.

Metrics are checked against numpy over the very same weights (read from the checkpoint with
TensorFlow's reader); events are read back with TensorFlow's summary iterator; SavedModels
are loaded in a fresh process that never imports the shim.
"""

import glob
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import models
from conftest import make_strategy
from tpu_estimator_compat import (EstimatorSpec, RunConfig, TPUConfig, TPUEstimator,
                                  TPUEstimatorSpec)
from tpu_estimator_compat.export import saved_model as export_lib

v1 = tf.compat.v1
N_EVAL = 300  # Not a multiple of the global batch (64): the last batch is partial.


def make_estimator(model_dir, strategy, model_fn=models.linear_full_model_fn, *, ipl=3,
                   use_tpu=True, eval_on_tpu=True, batch=64):
    config = RunConfig(model_dir=str(model_dir), train_distribute=strategy,
                       eval_distribute=strategy, tpu_config=TPUConfig(iterations_per_loop=ipl))
    return TPUEstimator(model_fn=model_fn, config=config, use_tpu=use_tpu,
                        eval_on_tpu=eval_on_tpu, train_batch_size=batch,
                        eval_batch_size=batch, predict_batch_size=batch)


def eval_input_fn(n=N_EVAL, with_labels=True):
    def input_fn(params):
        x, y = models.digits(n, flat=True)
        data = (x, y) if with_labels else x
        return tf.data.Dataset.from_tensor_slices(data).batch(params["batch_size"])
    return input_fn


def numpy_logits(est, n=N_EVAL):
    x, y = models.digits(n, flat=True)
    reader = tf.train.load_checkpoint(est.latest_checkpoint())
    return x @ reader.get_tensor("w") + reader.get_tensor("b"), y


@pytest.fixture
def trained(tmp_path, strategy):
    est = make_estimator(tmp_path, strategy)
    est.train(models.digits_input_fn(512, flat=True), max_steps=7)
    return est


@pytest.mark.slow_cases('mirrored8')
def test_evaluate_accuracy_equals_numpy_exactly(trained):
    results = trained.evaluate(eval_input_fn())
    logits, y = numpy_logits(trained)
    assert sorted(results) == ["accuracy", "global_step", "loss"]
    assert isinstance(results["accuracy"], np.float32)
    assert isinstance(results["loss"], np.float32)
    assert isinstance(results["global_step"], np.int64)
    assert results["global_step"] == 7
    # Exact: every one of the 300 examples counted once (np.float32 of the same ratio).
    assert results["accuracy"] == np.float32(np.sum(np.argmax(logits, 1) == y) / N_EVAL)


@pytest.mark.slow_cases('mirrored8')
def test_evaluate_steps_and_repeatability(trained):
    """`steps` limits the batches; metric variables reset between evaluate calls."""
    two = trained.evaluate(eval_input_fn(), steps=2)
    logits, y = numpy_logits(trained, 128)
    assert two["accuracy"] == np.float32(np.sum(np.argmax(logits, 1) == y) / 128)
    assert trained.evaluate(eval_input_fn(), steps=2) == two


def test_evaluate_loss_is_mean_of_step_losses_on_one_replica(tmp_path):
    """Legacy CPU semantics (use_tpu=False): no padding, the partial batch's own mean.

    (With use_tpu=True the partial last batch is padded to the full batch, as legacy TPU
    did, and its loss includes the padded rows; see migration_guide/parity.md.)
    """
    from conftest import make_strategy

    est = make_estimator(tmp_path, make_strategy("default"), use_tpu=False)
    est.train(models.digits_input_fn(512, flat=True), max_steps=3)
    results = est.evaluate(eval_input_fn())
    logits, y = numpy_logits(est)
    shifted = logits - logits.max(1, keepdims=True)
    per_example = np.log(np.exp(shifted).sum(1)) - shifted[np.arange(len(y)), y]
    step_losses = [per_example[i:i + 64].mean() for i in range(0, N_EVAL, 64)]
    np.testing.assert_allclose(results["loss"], np.mean(step_losses), rtol=1e-5)


def test_eval_events_written_and_read_back(trained):
    results = trained.evaluate(eval_input_fn(), name="holdout")
    files = glob.glob(os.path.join(trained.model_dir, "eval_holdout", "events.out.tfevents.*"))
    assert len(files) == 1
    seen = {}
    for event in tf.compat.v1.train.summary_iterator(files[0]):
        for value in event.summary.value:
            seen[value.tag] = (event.step, value)
    assert seen["accuracy"][0] == 7
    assert seen["accuracy"][1].simple_value == pytest.approx(float(results["accuracy"]))
    assert seen["loss"][1].simple_value == pytest.approx(float(results["loss"]))
    # Legacy's `_write_checkpoint_path_to_summary`: a string tensor, no plugin metadata.
    checkpoint = seen["checkpoint_path"][1]
    assert tf.make_ndarray(checkpoint.tensor).item().decode() == trained.latest_checkpoint()
    assert not checkpoint.HasField("metadata")
    assert "global_step" not in seen


def test_predict_every_example_once_in_order(trained):
    logits, _ = numpy_logits(trained)
    predictions = list(trained.predict(eval_input_fn(with_labels=False)))
    assert len(predictions) == N_EVAL
    assert sorted(predictions[0]) == ["class_ids", "logits", "probabilities"]
    np.testing.assert_allclose(np.stack([p["logits"] for p in predictions]), logits,
                               rtol=1e-5, atol=1e-5)
    assert [int(p["class_ids"]) for p in predictions] == list(np.argmax(logits, 1))


@pytest.mark.slow_cases('mirrored8')
def test_predict_keys_and_batches(trained):
    batches = list(trained.predict(eval_input_fn(with_labels=False),
                                   predict_keys=["class_ids"], yield_single_examples=False))
    assert [sorted(b) for b in batches] == [["class_ids"]] * len(batches)
    assert sum(len(b["class_ids"]) for b in batches) == N_EVAL
    with pytest.raises(ValueError, match=r"Expected to run at least one output from"):
        next(trained.predict(eval_input_fn(with_labels=False), predict_keys=["nope"]))


def test_predict_rejects_scalar_predictions(tmp_path, strategy):
    def model_fn(features, labels, mode, params):
        w = v1.get_variable("w", [64, 10])
        return TPUEstimatorSpec(mode, predictions={"total": tf.reduce_sum(features @ w)})

    est = make_estimator(tmp_path, strategy, model_fn)
    with pytest.raises(ValueError, match=r"must have batch dimension"):
        next(est.predict(eval_input_fn(with_labels=False)))


def test_predict_non_dict_rejected_on_tpu_path(tmp_path, strategy):
    def model_fn(features, labels, mode, params):
        return TPUEstimatorSpec(mode, predictions=features @ v1.get_variable("w", [64, 2]))

    est = make_estimator(tmp_path, strategy, model_fn)
    with pytest.raises(TypeError, match=r"predictions must be dict of Tensors"):
        next(est.predict(eval_input_fn(with_labels=False)))


def test_scalar_in_eval_metrics_raises_legacy_error(tmp_path, strategy):
    def model_fn(features, labels, mode, params):
        spec = models.linear_full_model_fn(features, labels, mode, params)
        if mode != "eval":
            return spec
        return TPUEstimatorSpec(mode, loss=spec.loss,
                                eval_metrics=(lambda l: {"m": v1.metrics.mean(l)}, [spec.loss]))

    est = make_estimator(tmp_path, strategy, model_fn)
    with pytest.raises(RuntimeError, match=r"should preserve batch size dimension"):
        est.evaluate(eval_input_fn())


@pytest.mark.slow_cases('mirrored8')
def test_dict_eval_metrics_called_by_keyword(trained):
    def model_fn(features, labels, mode, params):
        spec = models.linear_full_model_fn(features, labels, mode, params)
        if mode != "eval":
            return spec
        logits = spec.eval_metrics[1][1]

        def metric_fn(logits, labels):
            return {"acc": v1.metrics.accuracy(labels, tf.argmax(logits, 1))}

        return TPUEstimatorSpec(mode, loss=spec.loss,
                                eval_metrics=(metric_fn, {"labels": labels, "logits": logits}))

    est = TPUEstimator(model_fn=model_fn, config=trained.config, train_batch_size=64,
                       eval_batch_size=64)
    results = est.evaluate(eval_input_fn())
    logits, y = numpy_logits(est)
    assert results["acc"] == np.float32(np.sum(np.argmax(logits, 1) == y) / N_EVAL)


def test_estimator_spec_eval_metric_ops_on_cpu(tmp_path):
    """A plain EstimatorSpec with eval_metric_ops is accepted with use_tpu=False."""

    def model_fn(features, labels, mode, params):
        spec = models.linear_full_model_fn(features, labels, mode, params)
        if mode != "eval":
            return spec
        logits = spec.eval_metrics[1][1]
        return EstimatorSpec(mode, loss=spec.loss, eval_metric_ops={
            "accuracy": v1.metrics.accuracy(labels, tf.argmax(logits, 1))})

    est = make_estimator(tmp_path, None, model_fn, use_tpu=False)
    est.train(models.digits_input_fn(512, flat=True), max_steps=4)
    results = est.evaluate(eval_input_fn())
    logits, y = numpy_logits(est)
    assert results["accuracy"] == np.float32(np.sum(np.argmax(logits, 1) == y) / N_EVAL)
    assert est.evaluate(eval_input_fn()) == results  # Local variables reset per call.


def test_estimator_spec_rejected_for_tpu_evaluation(tmp_path, strategy):
    def model_fn(features, labels, mode, params):
        spec = models.linear_full_model_fn(features, labels, mode, params)
        return spec if mode != "eval" else EstimatorSpec(mode, loss=spec.loss)

    est = make_estimator(tmp_path, strategy, model_fn)
    with pytest.raises(RuntimeError, match=r"must have type `TPUEstimatorSpec`"):
        est.evaluate(eval_input_fn())


@pytest.mark.slow
def test_export_round_trips_in_fresh_process(trained, tmp_path):
    receiver = export_lib.build_raw_serving_input_receiver_fn(
        {"x": tf.TensorSpec([None, 64], tf.float32)})

    def model_fn_features(features, labels, mode, params):
        if isinstance(features, dict):
            features = features["x"]
        return models.linear_full_model_fn(features, labels, mode, params)

    est = TPUEstimator(model_fn=model_fn_features, config=trained.config, train_batch_size=64,
                       predict_batch_size=64)
    export_dir = est.export_saved_model(str(tmp_path / "export"), receiver).decode()
    assert os.path.dirname(export_dir) == str(tmp_path / "export")
    x, _ = models.digits(20, flat=True)
    expected = np.stack([p["logits"] for p in est.predict(
        lambda params: tf.data.Dataset.from_tensor_slices(x).batch(params["batch_size"]))])
    np.save(tmp_path / "x.npy", x)
    script = (
        "import json, sys, numpy as np, tensorflow as tf\n"
        f"m = tf.saved_model.load({export_dir!r})\n"
        f"x = np.load({str(tmp_path / 'x.npy')!r})\n"
        "out = m.signatures['serving_default'](x=tf.constant(x))\n"
        "print(json.dumps({'logits': out['logits'].numpy().tolist(),"
        " 'shim': any(k.startswith('tpu_estimator_compat') for k in sys.modules)}))\n")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                               env=env, timeout=120, check=True)
    loaded = json.loads(completed.stdout.strip().splitlines()[-1])
    assert loaded["shim"] is False
    np.testing.assert_allclose(np.array(loaded["logits"]), expected, rtol=1e-5, atol=1e-5)


def _step_loss_model_fn(features, labels, mode, params):
    """eval_metrics with one value per step (`tf.reshape(loss, [1])`) beside per-example ones."""
    spec = models.linear_full_model_fn(features, labels, mode, params)
    if mode != "eval":
        return spec

    def metric_fn(labels, logits, step_loss):
        return {"accuracy": v1.metrics.accuracy(labels, tf.argmax(logits, 1)),
                "step_loss": v1.metrics.mean(step_loss)}

    return TPUEstimatorSpec(mode, loss=spec.loss, eval_metrics=(metric_fn, {
        "labels": labels, "logits": spec.eval_metrics[1][1],
        "step_loss": tf.reshape(spec.loss, [1])}))


def test_one_value_per_step_eval_metrics_pass_through_without_padding(tmp_path):
    """Legacy's CPU path (use_tpu=False, one replica) passed such tensors to metric_fn."""
    est = make_estimator(tmp_path, None, _step_loss_model_fn, use_tpu=False)
    est.train(models.digits_input_fn(512, flat=True), max_steps=4)
    results = est.evaluate(eval_input_fn())
    logits, y = numpy_logits(est)
    assert results["accuracy"] == np.float32(np.sum(np.argmax(logits, 1) == y) / N_EVAL)
    # `loss` is the mean of the per-step losses on one replica, as is the metric's mean.
    np.testing.assert_allclose(results["step_loss"], results["loss"], rtol=1e-6)


@pytest.mark.slow_cases('mirrored8')
def test_one_value_per_step_eval_metrics_refused_when_batches_are_padded(tmp_path, strategy):
    """Padded (use_tpu=True; any use_tpu on 8 replicas): its value would count padding, so
    the step that had padding rows (the partial last batch of 300 rows) is refused."""
    for use_tpu in (True, False) if strategy.num_replicas_in_sync > 1 else (True,):
        est = make_estimator(tmp_path / str(use_tpu), strategy, _step_loss_model_fn,
                             use_tpu=use_tpu)
        with pytest.raises(ValueError, match=r"`eval_metrics` tensor\(s\) `eval_metrics"
                                             r"\[1\]\['step_loss'\]`: axis 0 is not the "
                                             r"per-replica batch, and this evaluation step "
                                             r"had padding rows"):
            est.evaluate(eval_input_fn())


@pytest.mark.slow_cases('mirrored8')
def test_eval_host_call_step_tensor_passes_through(tmp_path, strategy):
    """host_call's `tf.reshape(global_step, [1])` in EVAL: one value per replica per step,
    unmasked (legacy concatenated it over replicas); batch tensors lose padding rows."""
    seen = []

    def model_fn(features, labels, mode, params):
        spec = models.linear_full_model_fn(features, labels, mode, params)
        if mode != "eval":
            return spec

        def host_call_fn(step, labels):
            def record(step, labels):
                seen.append((len(step), len(labels)))
                return np.int64(0)

            tf.numpy_function(record, [step, labels], tf.int64)
            return []

        step = tf.reshape(v1.train.get_global_step(), [1])
        return spec._replace(host_call=(host_call_fn, [step, labels]))

    est = make_estimator(tmp_path, strategy, model_fn)
    est.evaluate(eval_input_fn())
    replicas = strategy.num_replicas_in_sync
    assert seen == [(replicas, 64)] * 4 + [(replicas, N_EVAL - 4 * 64)]


def test_predictions_without_batch_axis_refused(tmp_path, strategy):
    def model_fn(features, labels, mode, params):
        w = v1.get_variable("w", [64, 10])
        return TPUEstimatorSpec(mode, predictions={
            "logits": features @ w, "total": tf.reshape(tf.reduce_sum(features @ w), [1])})

    est = make_estimator(tmp_path, strategy, model_fn)
    with pytest.raises(ValueError, match=r"must have batch dimension for every tensor; "
                                         r"`predictions\['total'\]` has shape \(1,\)"):
        next(est.predict(eval_input_fn(with_labels=False)))


def _per_token_model_fn(features, labels, mode, params):
    """BERT run_pretraining's shape: metric tensors of `[batch * k]` rows (per token)."""
    spec = models.linear_full_model_fn(features, labels, mode, params)
    if mode != "eval":
        return spec
    tokens = tf.reshape(features[:, :3], [-1])  # [batch * 3], example-major.

    def metric_fn(token_values):
        return {"token_mean": v1.metrics.mean(token_values)}

    return spec._replace(eval_metrics=(metric_fn, [tokens]))


@pytest.mark.slow_cases('mirrored8')
def test_eval_metrics_with_k_rows_per_example_pass_when_no_step_is_padded(tmp_path, strategy):
    """Legacy never padded eval batches; full batches need no row removal, whatever shape
    the metric tensors have. A padded step is refused, naming the fix."""
    est = make_estimator(tmp_path, strategy, _per_token_model_fn)
    est.train(models.digits_input_fn(256, flat=True), steps=1)

    def full_batches(params):
        x, y = models.digits(256, flat=True)
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(params["batch_size"],
                                                                drop_remainder=True)

    results = est.evaluate(full_batches)
    x, _ = models.digits(256, flat=True)
    assert results["token_mean"] == pytest.approx(float(x[:, :3].mean()), rel=1e-5)
    with pytest.raises(ValueError, match=r"axis 0 is not the per-replica batch, and this "
                                         r"evaluation step had padding rows.*drop_remainder"):
        est.evaluate(eval_input_fn())  # 300 rows: the last batch is partial.


def test_train_distribute_alone_leaves_evaluation_undistributed(tmp_path):
    """`RunConfig(train_distribute=...)` without `eval_distribute`: legacy evaluated on one
    device, so metric_fn may take a scalar (google-research/bigbird run_pretraining.py,
    use_tpu=False, passes its scalar masked_lm_loss); training still uses the strategy."""
    seen_replicas = {}

    def model_fn(features, labels, mode, params):
        seen_replicas[mode] = tf.distribute.get_replica_context().num_replicas_in_sync
        logits = v1.layers.dense(features, 10)
        loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
        if mode == "train":
            train_op = v1.train.GradientDescentOptimizer(0.1).minimize(
                    loss, v1.train.get_global_step())
            return TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

        def metric_fn(mean_loss):
            assert mean_loss.shape.rank == 0, mean_loss  # As model_fn made it.
            return {"mean_loss": v1.metrics.mean(mean_loss)}
        return TPUEstimatorSpec(mode, loss=loss, eval_metrics=(metric_fn, [loss]))

    strategy = make_strategy("mirrored8")
    config = RunConfig(model_dir=str(tmp_path), train_distribute=strategy,
                       tpu_config=TPUConfig(iterations_per_loop=2))
    est = TPUEstimator(model_fn=model_fn, config=config, use_tpu=False,
                       train_batch_size=64, eval_batch_size=64)
    est.train(models.digits_input_fn(256, flat=True), max_steps=2)
    result = est.evaluate(eval_input_fn(n=128), steps=2)
    assert seen_replicas == {"train": 8, "eval": 1}, seen_replicas
    assert result["global_step"] == 2
    assert result["mean_loss"] == pytest.approx(result["loss"], rel=1e-5)


@pytest.mark.slow_cases('mirrored8')
@pytest.mark.parametrize("strategy_name", ["default", "mirrored8"])
def test_cpu_path_evaluate_runs_long_loops_unless_hooks_see_every_step(tmp_path,
                                                                       strategy_name):
    """Legacy's CPU path ran one step per session.run whatever iterations_per_loop said,
    and without hooks no step boundary showed: evaluate runs loops of up to
    CPU_EVAL_LOOP_STEPS steps there (the same results), fewer when metric_fn's tensors
    would hold more than CPU_EVAL_LOOP_BYTES. predict()'s loops start at
    iterations_per_loop and double up to CPU_PREDICT_LOOP_STEPS (a consumer may stop
    early). With a hook a loop is one step, as are TPU's."""
    from tpu_estimator_compat.session import inference

    est = make_estimator(tmp_path, make_strategy(strategy_name), ipl=1, use_tpu=False)
    est.train(models.digits_input_fn(512, flat=True), max_steps=2)
    checkpoint = est.latest_checkpoint()
    batches = -(-N_EVAL // 64)  # 5, the last partial.

    def input_fn(repeats, with_labels):
        def fn(params):
            return eval_input_fn(with_labels=with_labels)(params).unbatch().repeat(
                repeats).batch(params["batch_size"])
        return fn

    def loop_sizes(mode, hooks=None, on_tpu=False, steps=None, repeats=8):
        # pylint: disable=protected-access
        _, run = est._inference_run(mode, checkpoint, "evaluate")
        session = inference._open(run["settings"], run["runtime"], run["plan"], mode,
                                  input_fn(repeats, mode == "eval"), run["checkpoint"], on_tpu,
                                  hooks)
        try:
            return [result.steps_run for result in session.chunks(steps)]
        finally:
            session.release_input()

    assert inference.CPU_EVAL_LOOP_STEPS == 32
    assert loop_sizes("eval") == [32, 6]  # 2,400 rows: 38 batches, the last partial.
    assert loop_sizes("eval", steps=33) == [32, 1]
    one_step = [1] * batches + [0]  # The end of input found by a call that runs none.
    assert loop_sizes("eval", hooks=[v1.train.SessionRunHook()], repeats=1) == one_step
    assert inference.CPU_PREDICT_LOOP_STEPS == 4
    assert loop_sizes("infer", repeats=1) == [1, 2, 2]  # 5 batches.
    assert loop_sizes("infer", repeats=4) == [1, 2, 4, 4, 4, 4, 0]  # 19 batches.
    assert loop_sizes("infer", hooks=[v1.train.SessionRunHook()], repeats=1) == one_step
    if strategy_name == "mirrored8":
        assert loop_sizes("eval", on_tpu=True, repeats=1) == one_step
        assert loop_sizes("infer", on_tpu=True, repeats=1) == one_step
    else:
        # Evaluating in loops of 32 gives the one-step loops' results. (One strategy is
        # enough for the equality: the loop length is the host's choice, and long loops on
        # 8 replicas are every other CPU-path evaluate's, e.g. test_parity's. The mirrored8
        # variant took 61 s in the default run with these four calls.)
        results = est.evaluate(eval_input_fn())
        hooked = est.evaluate(eval_input_fn(), hooks=[v1.train.SessionRunHook()])
        assert results == hooked
        # And predicting in loops of 1, 2, 4, 4: the one-step loops' predictions, in order.
        predicted = list(est.predict(input_fn(4, False)))
        stepwise = list(est.predict(input_fn(4, False), hooks=[v1.train.SessionRunHook()]))
        assert len(predicted) == len(stepwise) == 4 * N_EVAL
        for got, want in zip(predicted, stepwise):
            assert got.keys() == want.keys()
            for key in got:
                np.testing.assert_array_equal(got[key], want[key])

    def wide_model_fn(features, labels, mode, params):
        """metric_fn gets 64 x 98,304 float32 a step (25.2 MB): two fit in 64 MiB."""
        spec = models.linear_full_model_fn(features, labels, mode, params)
        if mode != "eval":
            return spec
        wide = tf.tile(features, [1, 1536])
        return TPUEstimatorSpec(mode, loss=spec.loss, eval_metrics=(
            lambda labels, wide: {"mean": v1.metrics.mean(wide)}, [labels, wide]))

    assert inference.CPU_EVAL_LOOP_BYTES == 64 << 20
    est = make_estimator(tmp_path, make_strategy(strategy_name), wide_model_fn, ipl=1,
                         use_tpu=False)
    assert loop_sizes("eval", repeats=1) == [2, 2, 1]  # 5 batches.


@pytest.mark.slow_cases('mirrored8-True', 'mirrored8-False')
@pytest.mark.parametrize("use_tpu", [True, False])
def test_bad_metric_fn_raises_error_naming_eval_metrics_and_the_fix(tmp_path, strategy,
                                                                     use_tpu):
    """A metric_fn that raises TypeError is reported with the tensors it got and the fix,
    on the host (use_tpu or several replicas) and in the step (one device, use_tpu=False);
    its metrics are never dropped."""
    def model_fn(features, labels, mode, params):
        spec = models.linear_full_model_fn(features, labels, mode, params)
        if mode != "eval":
            return spec

        def bad_metric_fn(labels, logits):
            return {"acc": v1.metrics.accuracy(labels, tf.argmax(logits, 1) + "x")}

        return TPUEstimatorSpec(mode, loss=spec.loss,
                                eval_metrics=(bad_metric_fn, spec.eval_metrics[1]))

    est = make_estimator(tmp_path, strategy, model_fn, use_tpu=use_tpu)
    est.train(models.digits_input_fn(512, flat=True), max_steps=1)
    with pytest.raises(TypeError) as raised:
        est.evaluate(eval_input_fn())
    message = str(raised.value)
    assert "eval_metrics: metric_fn 'bad_metric_fn' (eval_metrics[0])" in message
    # The logits' dtype and shape ([None, 10] on the CPU path: its last batch is partial).
    assert re.search(r"'float32\[(64|None), 10\]'", message), message
    assert "Fix metric_fn" in message
    assert "AddV2" in message  # The original error is kept.


@pytest.mark.slow_cases('mirrored8-True', 'mirrored8-False')
@pytest.mark.parametrize("use_tpu", [True, False])
def test_evaluate_and_predict_call_model_fn_once_per_replica(tmp_path, strategy, use_tpu):
    """Legacy called model_fn once per evaluate() or predict() (once per TPU shard's
    trace): the probe that learns the step's outputs and the loop call one traced step."""
    calls = []

    def model_fn(features, labels, mode, params):
        calls.append(mode)
        return models.linear_full_model_fn(features, labels, mode, params)

    est = make_estimator(tmp_path, strategy, model_fn, use_tpu=use_tpu)
    est.train(models.digits_input_fn(512, flat=True), max_steps=1)
    replicas = strategy.num_replicas_in_sync  # (eval_distribute is the strategy.)
    del calls[:]
    results = est.evaluate(eval_input_fn())
    assert calls == ["eval"] * replicas
    logits, y = numpy_logits(est)
    assert results["accuracy"] == np.float32(np.sum(np.argmax(logits, 1) == y) / N_EVAL)
    del calls[:]
    assert len(list(est.predict(eval_input_fn(with_labels=False)))) == N_EVAL
    assert calls == ["infer"] * replicas

@pytest.mark.slow
def test_later_calls_on_eight_replicas_trace_no_input_pipelines_again(tmp_path, monkeypatch):
    """Issue 45: a second train on 8 replicas over batches of unknown size reuses the
    per-device input pipelines' functions the first traced (`_tf/device_iterators.py`);
    evaluate, predict and train over batches of static shapes build none (one host
    iterator, split per replica in the step: `inputs.HostSplitDataset`); input_fn is still
    called once per call, evaluate still counts every example once, predict still yields
    every example once, in order."""
    from tpu_estimator_compat._tf import device_iterators

    traces = []
    trace = device_iterators._trace  # pylint: disable=protected-access
    monkeypatch.setattr(device_iterators, "_trace",
                        lambda *args: traces.append(args[0]) or trace(*args))
    calls = []

    def counted(input_fn):
        def wrapped(params):
            calls.append(1)
            return input_fn(params)
        return wrapped

    est = make_estimator(tmp_path, make_strategy("mirrored8"))
    rounds = []
    def unknown_batch_size(params):  # `drop_remainder=False`: TF's per-device iterator.
        dataset = models.digits_input_fn(512, flat=True)(params)
        return dataset.unbatch().batch(params["batch_size"])

    for max_steps in (4, 8):
        est.train(counted(unknown_batch_size), max_steps=max_steps)
        results = est.evaluate(counted(eval_input_fn()))
        predictions = list(est.predict(counted(eval_input_fn(with_labels=False))))
        logits, y = numpy_logits(est)
        assert results["global_step"] == max_steps
        assert results["accuracy"] == np.float32(np.sum(np.argmax(logits, 1) == y) / N_EVAL)
        assert len(predictions) == N_EVAL
        np.testing.assert_allclose(np.stack([p["logits"] for p in predictions]), logits,
                                   rtol=1e-5, atol=1e-5)
        rounds.append(len(traces))
    # Train input: one function set per device; evaluate and predict: none.
    assert rounds == [8, 8]
    assert len(calls) == 6
    est.train(counted(models.digits_input_fn(512, flat=True)), max_steps=10)
    assert len(traces) == 8 and len(calls) == 7
