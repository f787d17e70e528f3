"""The r1 ResNet and BERT models in legacy_models/ train, evaluate and predict on the shim.

The model files never import tpu_estimator_compat: like an unchanged legacy script, they
reach the shim through `tf.compat.v1.estimator.tpu.*` once `install_aliases()` has run. Each
model runs with `use_tpu=True` (CrossShardOptimizer, params['context'], scaffold_fn) on the
default strategy and on MirroredStrategy over 8 logical CPUs (conftest `strategy`), and
must reach a stated quality. Files the estimator writes (checkpoints, host_call events) are
read back with TensorFlow's own readers.

Quality on the full default runs (scripts, 2-core CPU), for reference: ResNet 300 steps,
top-1 0.970 legacy TF 2.15 / 0.966 shim; BERT 468 steps from the masked-LM checkpoint,
accuracy 0.869 legacy (use_tpu=False) / 0.811 shim (use_tpu=True). The tests train less and
use lower thresholds.
"""

import glob
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator_compat
from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator

tpu_estimator_compat.install_aliases()

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _model in ("resnet", "bert"):
    sys.path.insert(0, os.path.join(_ROOT, "legacy_models", _model))

import classifier_model  # noqa: E402
import digits_input  # noqa: E402
import digits_text  # noqa: E402
import pretrain  # noqa: E402
import resnet_model  # noqa: E402

RESNET_STEPS = 100
RESNET_MIN_TOP1 = 0.80  # Legacy TF 2.15 (use_tpu=False, warmup 20): 0.886 after 100 steps.
BERT_PRETRAIN_STEPS = 300
BERT_STEPS = 400
BERT_MIN_ACCURACY = 0.70  # Legacy (use_tpu=False, same schedule): 0.852 after 400 steps.
BERT_EVAL_BATCH = 32


def events(directory):
    """{tag: [(step, value)]} of every scalar summary in `directory`'s events files."""
    found = {}
    for path in sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                number = (value.simple_value if value.HasField("simple_value")
                          else float(tf.make_ndarray(value.tensor)))
                found.setdefault(value.tag, []).append((event.step, number))
    return found


# ------------------------------------------------------------------------------------------
# ResNet
# ------------------------------------------------------------------------------------------


# 8 replicas: ~50 s here, opt-in (`-m slow`) to keep the default run under 20 minutes; the
# parity suite's 8-replica ResNet replay is opt-in too.
@pytest.fixture(scope="module",
                params=["default", pytest.param("mirrored8", marks=pytest.mark.slow)])
def resnet_run(request, tmp_path_factory):
    """A ResNet trained RESNET_STEPS steps on 1 or 8 replicas, with its model_dir.

    Module-scoped: the tests below only read what this one training run produced.
    """
    from conftest import make_strategy

    strategy = make_strategy(request.param)
    tf.keras.utils.set_random_seed(1)
    model_dir = str(tmp_path_factory.mktemp("resnet_" + request.param))
    params = resnet_model.default_params(
        train_steps=RESNET_STEPS, warmup_steps=10, model_dir=model_dir,
        iterations_per_loop=50)
    config = RunConfig(model_dir=model_dir, train_distribute=strategy,
                       eval_distribute=strategy, save_checkpoints_steps=1000,
                       tf_random_seed=1, tpu_config=TPUConfig(iterations_per_loop=50))
    estimator = TPUEstimator(model_fn=resnet_model.model_fn, config=config, params=params,
                             use_tpu=True, train_batch_size=64, eval_batch_size=64,
                             predict_batch_size=64)
    estimator.train(digits_input.DigitsInput(is_training=True).input_fn,
                    max_steps=RESNET_STEPS)
    return estimator, model_dir


@pytest.mark.slow
def test_resnet_trains_evaluates_and_predicts(resnet_run):
    estimator, _ = resnet_run
    results = estimator.evaluate(digits_input.DigitsInput(False, "test").input_fn)
    print("ResNet on the shim:", results)  # Shown with `pytest -rP`.
    assert sorted(results) == ["global_step", "loss", "top_1_accuracy", "top_5_accuracy"]
    assert results["global_step"] == RESNET_STEPS
    assert results["top_1_accuracy"] >= RESNET_MIN_TOP1
    assert results["top_5_accuracy"] >= results["top_1_accuracy"]

    predictions = list(estimator.predict(
        digits_input.DigitsInput(False, "test", with_labels=False).input_fn))
    _, labels = digits_input.load_digits_split("test")
    assert len(predictions) == len(labels)  # Every example once, padding sliced away.
    classes = np.array([p["classes"] for p in predictions])
    probabilities = np.stack([p["probabilities"] for p in predictions])
    np.testing.assert_allclose(probabilities.sum(1), 1.0, rtol=1e-5)
    # Predict and evaluate see the same weights: top-1 is the same count of hits.
    assert results["top_1_accuracy"] == np.float32(np.mean(classes == labels))


@pytest.mark.slow
def test_resnet_batch_norm_statistics_and_weight_decay(resnet_run):
    """UPDATE_OPS ran (moving statistics left their initial values); weight decay was in the
    loss (the regularisation summaries are positive and shrink as decay acts)."""
    _, model_dir = resnet_run
    reader = tf.train.load_checkpoint(model_dir)
    names = reader.get_variable_to_shape_map()
    moving_means = [n for n in names if n.endswith("moving_mean")]
    moving_vars = [n for n in names if n.endswith("moving_variance")]
    assert len(moving_means) == len(moving_vars) == 9  # Stem + 3 blocks x 2 + 2 projections.
    for name in moving_means:
        assert np.abs(reader.get_tensor(name)).max() > 1e-3, name
    for name in moving_vars:
        assert np.abs(reader.get_tensor(name) - 1.0).max() > 1e-3, name
    assert "resnet/stage2/block1/conv2d/kernel/Momentum" in names

    regularization = [v for _, v in events(model_dir)["regularization_loss"]]
    assert min(regularization) > 0


def test_resnet_host_call_writes_v2_summaries_every_step(resnet_run):
    _, model_dir = resnet_run
    found = events(model_dir)
    for tag in ("loss", "learning_rate", "cross_entropy", "regularization_loss"):
        assert tag in found, sorted(found)
    host_steps = [step for step, _ in found["learning_rate"]]
    assert len(host_steps) == RESNET_STEPS
    assert host_steps == sorted(host_steps)
    learning_rates = [v for _, v in found["learning_rate"]]
    # Linear warmup to 0.2, then cosine decay towards 0.
    assert max(learning_rates) == pytest.approx(0.2, rel=1e-3)
    assert learning_rates[0] < 0.05 and learning_rates[-1] < 0.01
    cross_entropy = [v for _, v in found["cross_entropy"]]
    assert np.mean(cross_entropy[-10:]) < 0.5 * np.mean(cross_entropy[:10])


def test_resnet_input_fn_shards_by_host_context():
    """params['context'] (legacy TPU input pipelines) picks this host's share of examples."""

    class Context:
        num_hosts = 3

        def current_input_fn_deployment(self):
            return "/job:worker/task:1/device:CPU:0", 1, 3

    make = digits_input.DigitsInput(False, "test", num_examples=30).input_fn
    sharded = [int(y) for _, ys in make({"batch_size": 4, "context": Context()})
               for y in ys.numpy()]
    _, labels = digits_input.load_digits_split("test")
    assert sharded == list(labels[1:30:3])
    assert sum(len(ys) for _, ys in make({"batch_size": 4})) == 30  # No context: one host.


# ------------------------------------------------------------------------------------------
# BERT
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pretrained_checkpoint(tmp_path_factory):
    """A short masked-LM run (plain TF1 Graph + Session) sharing the encoder names."""
    return pretrain.write_pretrained_checkpoint(
        str(tmp_path_factory.mktemp("pretrained")), num_steps=BERT_PRETRAIN_STEPS)


def bert_estimator(model_dir, strategy, init_checkpoint, *, use_tpu=True, steps=BERT_STEPS):
    tf.keras.utils.set_random_seed(1)
    model_fn = classifier_model.model_fn_builder(
        bert_config=pretrain.tiny_bert_config(), num_labels=digits_text.NUM_LABELS,
        init_checkpoint=init_checkpoint, learning_rate=2e-3, num_train_steps=steps,
        num_warmup_steps=steps // 10, use_tpu=use_tpu, use_one_hot_embeddings=use_tpu)
    config = RunConfig(model_dir=str(model_dir), train_distribute=strategy,
                       eval_distribute=strategy, save_checkpoints_steps=10000,
                       tf_random_seed=12345, tpu_config=TPUConfig(iterations_per_loop=50))
    return TPUEstimator(model_fn=model_fn, config=config, use_tpu=use_tpu,
                        train_batch_size=32, eval_batch_size=BERT_EVAL_BATCH,
                        predict_batch_size=BERT_EVAL_BATCH)


def bert_input_fns(directory, pad):
    """(train, eval, predict) input_fns over TFRecords, as run_classifier wrote them."""
    train_file = os.path.join(directory, "train.tf_record")
    eval_file = os.path.join(directory, "eval.tf_record")
    digits_text.file_based_convert_examples_to_features(
        digits_text.get_examples("train"), train_file)
    test_examples = digits_text.get_examples("test")
    if pad:
        test_examples = digits_text.pad_for_tpu(test_examples, BERT_EVAL_BATCH)
    digits_text.file_based_convert_examples_to_features(test_examples, eval_file)
    seq = digits_text.MAX_SEQ_LENGTH
    return (digits_text.file_based_input_fn_builder(train_file, seq, True, True),
            digits_text.file_based_input_fn_builder(eval_file, seq, False, pad),
            digits_text.file_based_input_fn_builder(eval_file, seq, False, pad,
                                                    with_labels=False))


# 8 replicas: ~40 s here, opt-in (`-m slow`) to keep the default run under 20 minutes.
@pytest.mark.slow
@pytest.mark.parametrize("strategy_name",
                         ["default", pytest.param("mirrored8", marks=pytest.mark.slow)])
def test_bert_fine_tunes_from_pretrained_checkpoint(tmp_path, strategy_name,
                                                    pretrained_checkpoint):
    from conftest import make_strategy

    estimator = bert_estimator(tmp_path / "model", make_strategy(strategy_name),
                               pretrained_checkpoint)
    train_fn, eval_fn, predict_fn = bert_input_fns(str(tmp_path), pad=True)
    estimator.train(train_fn, max_steps=BERT_STEPS)

    # scaffold_fn's init_from_checkpoint loaded the encoder before the first step: the
    # step-0 checkpoint holds exactly the pretrained values, the head does not come from it.
    pretrained = tf.train.load_checkpoint(pretrained_checkpoint)
    step0 = tf.train.load_checkpoint(str(tmp_path / "model" / "model.ckpt-0"))
    final = tf.train.load_checkpoint(estimator.latest_checkpoint())
    encoder = [n for n in step0.get_variable_to_shape_map()
               if n.startswith("bert/") and not n.endswith(("adam_m", "adam_v"))]
    assert len(encoder) == 39
    for name in encoder:
        np.testing.assert_array_equal(step0.get_tensor(name), pretrained.get_tensor(name),
                                      err_msg=name)
    word = "bert/embeddings/word_embeddings"
    assert np.abs(final.get_tensor(word) - pretrained.get_tensor(word)).max() > 1e-2
    assert not pretrained.has_tensor("output_weights")
    assert pretrained.has_tensor("cls/predictions/output_bias")  # Not mapped: MLM head.
    assert "cls/predictions/output_bias" not in step0.get_variable_to_shape_map()
    # AdamWeightDecay moments and the explicit global-step increment.
    assert final.get_tensor("global_step") == BERT_STEPS
    assert np.abs(final.get_tensor(word + "/adam_v")).max() > 0

    num_test = len(digits_text.get_examples("test"))
    results = estimator.evaluate(eval_fn, steps=-(-num_test // BERT_EVAL_BATCH))
    print("BERT on the shim:", results)  # Shown with `pytest -rP`.
    assert sorted(results) == ["eval_accuracy", "eval_loss", "global_step", "loss"]
    assert results["eval_accuracy"] >= BERT_MIN_ACCURACY

    predictions = list(estimator.predict(predict_fn))
    assert len(predictions) == -(-num_test // BERT_EVAL_BATCH) * BERT_EVAL_BATCH
    predicted = np.array([p["predictions"] for p in predictions[:num_test]])
    labels = np.array([e.label for e in digits_text.get_examples("test")])
    # The padding examples (is_real_example = 0) were weighted out of the eval accuracy.
    assert results["eval_accuracy"] == pytest.approx(np.mean(predicted == labels), abs=1e-6)


@pytest.mark.slow
def test_bert_cpu_path_init_from_checkpoint_loses_to_model_dir(tmp_path, pretrained_checkpoint):
    """use_tpu=False: model_fn calls init_from_checkpoint itself in every mode. As in TF1, that
    only sets initializers: once model_dir has a checkpoint, evaluate restores it and the
    result must not depend on init_checkpoint."""
    steps = 100
    train_fn, eval_fn, _ = bert_input_fns(str(tmp_path), pad=False)
    estimator = bert_estimator(tmp_path / "model", None, pretrained_checkpoint,
                               use_tpu=False, steps=steps)
    estimator.train(train_fn, max_steps=steps)
    step0 = tf.train.load_checkpoint(str(tmp_path / "model" / "model.ckpt-0"))
    pretrained = tf.train.load_checkpoint(pretrained_checkpoint)
    word = "bert/embeddings/word_embeddings"
    np.testing.assert_array_equal(step0.get_tensor(word), pretrained.get_tensor(word))

    without_init = bert_estimator(tmp_path / "model", None, None, use_tpu=False,
                                  steps=steps).evaluate(eval_fn)
    with_init = estimator.evaluate(eval_fn)
    assert with_init == without_init


# ------------------------------------------------------------------------------------------
# The scripts, unchanged: on the real legacy stack and through the launcher
# ------------------------------------------------------------------------------------------

SCRIPTS = {
    # script, its flags, the accuracy key in the printed results, the minimum.
    "resnet": ("resnet/resnet_tpu.py", ["--num_predictions=10"], "top_1_accuracy", 0.93),
    "bert": ("bert/bert_classifier_tpu.py", [], "eval_accuracy", 0.75),
}


def run_script(python, name, tmp_path, launcher_args=None, extra_flags=()):
    """Runs a model script to completion; returns (printed accuracy, stdout)."""
    script, flags, key, _ = SCRIPTS[name]
    out_flag = "--model_dir" if name == "resnet" else "--output_dir"
    command = [python]
    if launcher_args is not None:
        command += ["-m", "tpu_estimator_compat.run", *launcher_args]
    command += [os.path.join(_ROOT, "legacy_models", script), f"{out_flag}={tmp_path}",
                *flags, *extra_flags]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0")
    if launcher_args is None:
        env.pop("TF_USE_LEGACY_KERAS", None)  # TF 2.15's own Keras 2; no tf-keras there.
    completed = subprocess.run(command, capture_output=True, text=True, env=env,
                               timeout=900, cwd=_ROOT)
    assert completed.returncode == 0, completed.stderr[-3000:]
    match = re.search(r"^Evaluation results: .*'%s': (?:np\.float32\()?([0-9.]+)" % key,
                      completed.stdout, re.M)
    assert match, completed.stdout[-3000:]
    return float(match.group(1)), completed.stdout


@pytest.mark.legacy
@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_script_on_legacy_stack(name, tmp_path):
    """The same files on TF 2.15 + tensorflow-estimator (use_tpu=False, as off-TPU users ran)."""
    python = os.path.join(_ROOT, ".venv-legacy", "bin", "python")
    if not os.path.exists(python):
        pytest.skip("no .venv-legacy (dev/build_legacy_venv.sh makes it)")
    accuracy, stdout = run_script(python, name, tmp_path, extra_flags=["--use_tpu=false"])
    assert accuracy >= SCRIPTS[name][3], stdout[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("name, replicas", [("resnet", 8), ("bert", 1)])
def test_script_through_launcher(name, replicas, tmp_path):
    """The default runs of the scripts through `python -m tpu_estimator_compat.run`."""
    accuracy, stdout = run_script(sys.executable, name, tmp_path,
                                  launcher_args=[f"--cpu_replicas={replicas}"],
                                  extra_flags=["--use_tpu=true"])
    assert accuracy >= SCRIPTS[name][3], stdout[-2000:]
