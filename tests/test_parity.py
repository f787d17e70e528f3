"""Parity with the real legacy TPUEstimator: every model in tests/goldens/ replayed on the shim.

The goldens were recorded on TF 2.15.1 + tensorflow-estimator 2.15.0 (`dev/record_goldens.sh`);
this module never needs that stack. For each golden the shim replays the recipe stored with it
(same module, seed, data, synthesized initial checkpoint) in a subprocess that pins
`parity.REPEATABLE_ENV` (oneDNN off, deterministic ops, 2 intra-op threads) before TensorFlow
loads, once on 1 replica and once on 8 logical-CPU replicas at the same global batch.

What is asserted, and how tightly:
* 1 replica: per-step losses, final weights (sha256 of every tensor), `evaluate()` and integer
  predictions are bit-exact. Float predictions may differ by 1 ulp of 1.0: TF 2.15's and
  TF 2.21's Softmax kernels round differently on identical logits
  (`test_one_ulp_probability_difference_is_the_softmax_kernel` shows it).
* 8 replicas: each gradient and loss is a sum of 8 partial sums instead of one, ~1 ulp per
  reduction; the recipe's `Tolerances` (defaults in parity/compare.py) bound it, and the
  measured values are in migration_guide/parity.md.
* Checkpoint names/shapes, checkpoint steps, `evaluate()` keys and value types: equal.
* Known, documented gaps are asserted as such (`KNOWN_*`), so closing one fails loudly and the
  list gets updated.

Per-CPU variants: with oneDNN off, Eigen's conv kernels still sum in a CPU-dependent order, so
the legacy stack itself gives losses 1 ulp apart from a few steps on when a recipe runs on
another CPU kind. tests/goldens/<name>/ is the primary recording; tests/goldens/<name>/cpu/<label>/
holds the same recipe recorded on another CPU kind (`bash dev/record_goldens.sh --variant`). A
1-replica replay is held, bit for bit and in every quantity, to the recording whose per-step
losses it reproduces (`parity.choose_golden`); with none, to the primary, and its failures say
that this CPU kind may need a variant. 8-replica replays are compared with the primary (within
its measured envelope).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

from tpu_estimator_compat import parity

ROOT = Path(__file__).resolve().parent.parent
GOLDENS = ROOT / "tests" / "goldens"
MODELS = sorted(d.name for d in GOLDENS.iterdir() if (d / parity.RECIPE_JSON).exists())
# 8-replica replays in the default run. The others take minutes on 2 cores (mnist all-reduces a
# 13 MB gradient over 8 logical devices every step; resnet's 8-replica run is a different
# computation anyway, see its recipe) and run under `-m slow`.
DEFAULT_EIGHT = ("tiny_cnn",)
# 8-replica replays CI leaves out (`full`, pytest.ini): ~90 s each, BERT's clipped per-replica
# gradients and ResNet's per-replica batch norm compute something else than legacy's one device.
FULL_EIGHT = ("bert", "resnet")
# Models replayed in the slow set only: BERT's replay alone takes over a minute on 2 cores.
SLOW_MODELS = ("bert",)
# Models that compute something else on 8 replicas than legacy did on one CPU device, though
# their recorded recipe does not say so (`Recipe.multi_replica_differs`; move it to
# tests/legacy_recorder/recipes.py at the next re-record). Their 8-replica structure is checked,
# their values are reported with the measured numbers in migration_guide/parity.md.
EIGHT_DIFFERS = {
    "bert": "clip_by_global_norm(grads, 1.0) runs on each replica's 4-example gradient before "
            "CrossShardOptimizer sums them, as on 8 TPU cores; legacy CPU clipped the "
            "32-example gradient once. With that clipping emulated, 8 replicas match the "
            "golden within tolerance",
}
# Files the legacy model_dir has and the shim does not write: the graph text (a traced
# tf.function has no single TF1 graph to export). `model.ckpt-N.meta` is written (a MetaGraph
# of the checkpoint's variables and a Saver, checkpoint/meta.py), so it is no gap.
KNOWN_LISTING_GAPS = ("graph.pbtxt",)
# Files only the shim writes: its model_dir lock against two concurrent writers.
KNOWN_SHIM_ONLY_FILES = (".tpu_estimator_compat.lock",)
# Batch-norm moving statistics: in a tf.function Keras updates them inside FusedBatchNormV3
# (`exponential_avg_factor`, since `executing_eagerly_outside_functions()` is true), in a TF1
# graph with `moving -= (moving - batch) * (1 - momentum)`; both are correct and round
# differently (~1 ulp per step). Trainable weights and losses stay bit-exact.
BN_MOVING_STATISTICS = ("/moving_mean", "/moving_variance")


def _bn_statistics(golden: parity.Record) -> list[str]:
    return [n for n in golden.data["checkpoint"] if n.endswith(BN_MOVING_STATISTICS)]


def _one_replica_tol(recipe: parity.Recipe, golden: parity.Record,
                     exact: parity.Tolerances) -> parity.Tolerances:
    """`exact`, unless the recipe states why its model cannot be (then: the noise envelope)."""
    return parity.Tolerances.for_golden(recipe, golden) if recipe.single_replica_inexact else exact


def _multi_replica_comparable(recipe: parity.Recipe) -> None:
    if recipe.multi_replica_differs:
        pytest.skip(f"{recipe.name} on 8 replicas is a different computation: "
                    f"{recipe.multi_replica_differs}")


def _replay(plan: dict[str, tuple[int, ...]], out: Path) -> dict[str, dict[int, parity.Record]]:
    """Replays goldens in one subprocess with the repeatable environment pinned."""
    env = dict(os.environ, **parity.REPEATABLE_ENV, TF_CPP_MIN_LOG_LEVEL="2")
    command = [sys.executable, "-m", "tpu_estimator_compat.parity", "replay",
               f"--work_dir={out / 'work'}", f"--out={out / 'replay'}"]
    for model, replicas in plan.items():
        command += [f"--golden_dir={GOLDENS / model}", f"--replicas={','.join(map(str, replicas))}"]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    print(result.stdout)  # Shown by pytest on failure: the whole parity report.
    records = {}
    for model, replicas in plan.items():
        records[model] = {}
        for n in replicas:
            path = out / "replay" / model / f"x{n}"
            if not (path / parity.GOLDEN_JSON).exists():
                raise AssertionError(f"parity replay of {model} x{n} crashed:\n"
                                     f"{result.stderr[-6000:]}")
            records[model][n] = parity.Record.load(str(path))
    return records


@pytest.fixture(scope="module")
def default_replays(tmp_path_factory):
    plan = {m: (1, 8) if m in DEFAULT_EIGHT else (1,) for m in MODELS if m not in SLOW_MODELS}
    return _replay(plan, tmp_path_factory.mktemp("parity"))


@pytest.fixture(scope="module")
def slow_replays(tmp_path_factory):
    """The 1-replica replays of `SLOW_MODELS`, in a process of their own."""
    return _replay({m: (1,) for m in SLOW_MODELS if m in MODELS},
                   tmp_path_factory.mktemp("parity_slow"))


class Case(NamedTuple):
    """One model's 1-replica comparison: the recording it is held to and the replays."""

    recipe: parity.Recipe
    golden: parity.Record  # The primary, or the per-CPU variant the replay reproduces.
    replays: dict[int, parity.Record]
    hint: str  # Why nothing matched and what to do about it; "" when a recording matched.


@pytest.fixture(scope="module", params=[
    pytest.param(m, marks=pytest.mark.slow) if m in SLOW_MODELS else m for m in MODELS])
def case(request):
    """(recipe, golden, {replicas: replay record}, hint) for one model."""
    golden_dir = str(GOLDENS / request.param)
    recipe, golden = parity.load_golden(golden_dir)
    replays = request.getfixturevalue(
            "slow_replays" if request.param in SLOW_MODELS else "default_replays")[request.param]
    hint = ""
    if not recipe.single_replica_inexact:
        choice = parity.choose_golden(golden_dir, replays[1].data["losses"])
        recipe, golden, hint = choice.recipe, choice.golden, choice.hint
    return Case(recipe, golden, replays, hint)


@pytest.fixture(scope="module", params=[
    m if m in DEFAULT_EIGHT else pytest.param(
        m, marks=(pytest.mark.slow,) + ((pytest.mark.full,) if m in FULL_EIGHT else ()))
    for m in MODELS])
def eight(request, tmp_path_factory):
    """(recipe, golden, {8: replay record}) for one model."""
    model = request.param
    recipe, golden = parity.load_golden(str(GOLDENS / model))
    if model in DEFAULT_EIGHT:
        replays = request.getfixturevalue("default_replays")[model]
    else:
        replays = _replay({model: (8,)}, tmp_path_factory.mktemp(model))[model]
    if model in EIGHT_DIFFERS and not recipe.multi_replica_differs:
        recipe = dataclasses.replace(recipe, multi_replica_differs=EIGHT_DIFFERS[model])
    return recipe, golden, replays


def _assert(check: parity.Check, hint: str = "") -> None:
    assert check.ok, f"{check.name}: {check.detail}" + (f"\n{hint}" if hint else "")


def test_goldens_exist_and_are_small():
    assert "mnist" in MODELS or "tiny_cnn" in MODELS, MODELS
    # 5 MB: the primary recordings (3.2 MB) and per-CPU recordings of those a bit-exact
    # replay needs on another CPU kind (~0.2-0.6 MB per golden and kind; parity.md).
    total = sum(f.stat().st_size for f in GOLDENS.rglob("*") if f.is_file())
    assert total < 5 * 2**20, f"tests/goldens is {total / 2**20:.1f} MB; keep it under 5 MB."


def test_golden_records_what_the_issue_asks(case):
    recipe, golden, _, _ = case
    data = golden.data
    assert len(data["losses"]) == recipe.train_steps
    assert data["checkpoint_steps"] and data["checkpoint"] and data["model_dir_listing"]
    versions = data["versions"]
    assert data["event_tags"]
    assert versions.get("tensorflow", versions.get("tensorflow-cpu", "")).startswith("2.15.")
    assert data["versions"]["tensorflow-estimator"] == "2.15.0"
    if recipe.eval_input_fn:
        assert "global_step" in data["eval"]
    if recipe.predict_input_fn:
        assert data["predictions"]["count"] == recipe.num_predictions


def test_train_input_batches_equal_legacy(case):
    """The shim's TF reads the same batches, in the same order, as the legacy model saw."""
    _, golden, replays, _ = case
    assert replays[1].data["train_inputs"] == golden.data["train_inputs"]


def test_one_replica_losses_bit_exact(case):
    recipe, golden, replays, hint = case
    _assert(parity.compare_losses(golden.data["losses"], replays[1].data["losses"],
                                  _one_replica_tol(recipe, golden, parity.Tolerances.exact())),
            hint)


def test_one_replica_final_weights_bit_exact(case):
    """Every tensor bit-exact, batch-norm moving statistics included."""
    recipe, golden, replays, hint = case
    for check in parity.compare_checkpoints(
            golden, replays[1], _one_replica_tol(recipe, golden, parity.Tolerances.exact())):
        _assert(check, hint)


def test_one_replica_batch_norm_statistics_bit_exact(case):
    """tf_keras's fused moving average would differ by ~1 ulp a step (keras_env.py)."""
    _, golden, replays, hint = case
    names = _bn_statistics(golden)
    if not names:
        pytest.skip("no batch norm")
    wrong = [n for n in names if golden.data["checkpoint"][n]["sha256"]
             != replays[1].data["checkpoint"][n]["sha256"]]
    assert not wrong, f"{wrong}\n{hint}"


def _names_shapes_steps(golden: parity.Record, replay: parity.Record) -> None:
    _assert(parity.compare_checkpoints(golden, replay, parity.Tolerances())[0])
    assert replay.data["checkpoint_steps"] == golden.data["checkpoint_steps"]


def test_checkpoint_names_shapes_and_steps_equal_legacy(case):
    _, golden, replays, _ = case
    _names_shapes_steps(golden, replays[1])


def test_eight_replicas_checkpoint_names_shapes_and_steps_equal_legacy(eight):
    _, golden, replays = eight
    _names_shapes_steps(golden, replays[8])


@pytest.mark.parametrize("section", ["eval", "eval_full_batches"])
def test_one_replica_evaluate_exact(case, section):
    recipe, golden, replays, hint = case
    if section not in golden.data:
        pytest.skip(f"recipe records no {section}")
    tol = parity.Tolerances.exact()
    tol = _one_replica_tol(recipe, golden, tol)
    for check in parity.compare_eval(golden.data[section], replays[1].data[section], tol):
        _assert(check, hint)


def test_one_replica_predictions(case):
    recipe, golden, replays, hint = case
    if "predictions" not in golden.data:
        pytest.skip("recipe records no predictions")
    tol = _one_replica_tol(recipe, golden, parity.Tolerances.single_replica())
    for check in parity.compare_predictions(golden, replays[1], tol):
        _assert(check, hint)


def test_eight_replicas_predictions(eight):
    recipe, golden, replays = eight
    if "predictions" not in golden.data:
        pytest.skip("recipe records no predictions")
    _multi_replica_comparable(recipe)
    for check in parity.compare_predictions(golden, replays[8],
                                            parity.Tolerances.for_golden(recipe, golden)):
        _assert(check)


def test_one_ulp_probability_difference_is_the_softmax_kernel(case):
    """Same logits, two TF versions: their Softmax kernels differ by at most 1 ulp of 1.0."""
    _, golden, replays, hint = case
    import tensorflow as tf

    ours = tf.nn.softmax(golden.arrays["probe/logits"]).numpy()
    np.testing.assert_array_equal(replays[1].arrays["probe/softmax"], ours)
    assert np.max(np.abs(ours - golden.arrays["probe/softmax"])) <= 2.0 ** -23
    if "probe/tanh" in golden.arrays:
        # Why GELU models cannot be bit-exact across the versions: tanh rounds differently.
        assert np.any(golden.arrays["probe/tanh"] != replays[1].arrays["probe/tanh"])
    if "predictions/logits" in golden.arrays:
        # Bit-exact logits; softmax recomputed here equals what the shim predicted.
        np.testing.assert_array_equal(replays[1].arrays["predictions/logits"],
                                      golden.arrays["predictions/logits"], err_msg=hint)
        np.testing.assert_array_equal(
            tf.nn.softmax(golden.arrays["predictions/logits"]).numpy(),
            replays[1].arrays["predictions/probabilities"])


def test_eight_replicas_losses_within_summation_order_tolerance(eight):
    recipe, golden, replays = eight
    _multi_replica_comparable(recipe)
    _assert(parity.compare_losses(golden.data["losses"], replays[8].data["losses"],
                                  parity.Tolerances.for_golden(recipe, golden)))


def test_eight_replicas_final_weights_close(eight):
    recipe, golden, replays = eight
    _multi_replica_comparable(recipe)
    for check in parity.compare_checkpoints(golden, replays[8],
                                            parity.Tolerances.for_golden(recipe, golden)):
        _assert(check)


def test_eight_replicas_evaluate_on_full_batches(eight):
    """Same keys and types; metrics within the recipe's tolerance when no batch is padded."""
    recipe, golden, replays = eight
    _multi_replica_comparable(recipe)
    section = "eval_full_batches" if "eval_full_batches" in golden.data else "eval"
    for check in parity.compare_eval(golden.data[section], replays[8].data[section],
                                     parity.Tolerances.for_golden(recipe, golden)):
        _assert(check)


def test_eight_replicas_evaluate_keys_types_and_metrics_with_padded_batch(eight):
    recipe, golden, replays = eight
    checks = parity.compare_eval(golden.data["eval"], replays[8].data["eval"],
                                 parity.Tolerances.for_golden(recipe, golden))
    for check in checks:
        if check.name == "evaluate()['loss']":
            continue
        if recipe.multi_replica_differs and "'" in check.name:
            continue  # Values of a different computation; keys and types still must match.
        _assert(check)


@pytest.mark.xfail(strict=True, reason=(
    "Known shim gap: on N replicas the padded rows of a partial last eval batch enter the "
    "loss of the replica that holds them (model_fn's mean runs over the padded batch); legacy "
    "CPU evaluate() averages real rows only. See migration_guide/parity.md."))
def test_eight_replicas_eval_loss_with_padded_batch(eight):
    recipe, golden, replays = eight
    _multi_replica_comparable(recipe)
    if "eval_full_batches" not in golden.data:
        pytest.skip("recipe's eval input has no partial batch")
    checks = parity.compare_eval(golden.data["eval"], replays[8].data["eval"],
                                 parity.Tolerances.for_golden(recipe, golden))
    _assert(next(c for c in checks if c.name == "evaluate()['loss']"))


def test_model_dir_listing_equals_legacy_but_known_gaps(case):
    _, golden, replays, _ = case
    only_legacy, only_shim = parity.diff_listing(golden.data["model_dir_listing"],
                                                 replays[1].data["model_dir_listing"])
    unexpected = [f for f in only_shim if f not in KNOWN_SHIM_ONLY_FILES]
    assert not unexpected, f"files the legacy stack does not write: {unexpected}"
    unexplained = [f for f in only_legacy if not f.endswith(KNOWN_LISTING_GAPS)]
    assert not unexplained, f"files the shim does not write: {unexplained}"


def test_event_tags_and_steps_equal_legacy(case):
    """Every summary tag in every directory, at the steps legacy wrote it: host_call's
    summaries at the step each step started from, `loss` (or `loss_1` where model_fn or the
    host_call took that name) and the step rate on legacy's hook schedules."""
    _, golden, replays, _ = case
    assert replays[1].data["event_tags"] == golden.data["event_tags"]


def test_host_call_summary_steps_equal_legacy(case):
    _, golden, replays, _ = case
    legacy, shim = golden.data["event_tags"].get(".", {}), replays[1].data["event_tags"].get(".", {})
    per_step = [t for t, steps in legacy.items() if len(steps) == len(golden.data["losses"])]
    if not per_step:
        pytest.skip("no per-step (host_call) summaries")
    assert {t: shim.get(t) for t in per_step} == {t: legacy[t] for t in per_step}


# ----------------------------------------------------------------------------------------
# Per-CPU variants: real legacy recordings of the same run, chosen by exact losses only.


VARIANTS = [(m, label) for m in MODELS
            for label, _ in parity.golden_candidates(str(GOLDENS / m))[1:]]


@pytest.mark.parametrize("model,label", VARIANTS)
def test_golden_variant_is_the_same_legacy_run_on_another_cpu(model, label):
    """Same recipe, initial checkpoint and batches as the primary; only the rounding differs."""
    primary_dir = GOLDENS / model
    variant_dir = primary_dir / parity.VARIANTS_DIR / label
    recipe, primary = parity.load_golden(str(primary_dir))
    variant_recipe, variant = parity.load_golden(str(variant_dir))
    assert variant_recipe == recipe
    assert variant.data["stack"] == "legacy" and variant.data["replicas"] == 1
    versions = variant.data["versions"]
    assert versions.get("tensorflow", versions.get("tensorflow-cpu", "")).startswith("2.15.")
    assert versions["tensorflow-estimator"] == "2.15.0"
    assert variant.data["cpu"]["label"] == label and variant.data["cpu"]["model"]
    assert variant.data["init"] == primary.data["init"]
    assert variant.data["train_inputs"] == primary.data["train_inputs"]
    # A variant that the primary already reproduces would be dead weight (record_variant
    # writes none); one that differs by more than float rounding would be another model.
    assert variant.data["losses"] != primary.data["losses"]
    assert parity.compare_losses(primary.data["losses"], variant.data["losses"],
                                 parity.Tolerances.for_golden(recipe, primary)).ok
    assert sorted(variant.data["checkpoint"]) == sorted(primary.data["checkpoint"])
    if recipe.resume_steps:
        assert (variant_dir / parity.LEGACY_MODEL_DIR / "checkpoint").exists()


def test_golden_choice_needs_every_loss_bit_for_bit():
    """A replay is held to a recording only if it reproduces its losses exactly; otherwise
    to the primary, with a failure message that names the fix."""
    model, label = VARIANTS[0] if VARIANTS else ("tiny_cnn", None)
    golden_dir = str(GOLDENS / model)
    _, primary = parity.load_golden(golden_dir)
    choice = parity.choose_golden(golden_dir, primary.data["losses"])
    assert (choice.label, choice.matched, choice.hint) == (parity.PRIMARY, True, "")
    if label is not None:
        _, variant = parity.load_golden(str(GOLDENS / model / parity.VARIANTS_DIR / label))
        choice = parity.choose_golden(golden_dir, variant.data["losses"])
        assert (choice.label, choice.matched) == (label, True)
        assert choice.golden.data == variant.data
    ulp_off = list(primary.data["losses"])
    ulp_off[-1] = float(np.nextafter(np.float32(ulp_off[-1]), np.float32(0)))
    choice = parity.choose_golden(golden_dir, ulp_off)
    assert (choice.label, choice.matched) == (parity.PRIMARY, False)
    assert f"bash dev/record_goldens.sh --variant {model}" in choice.hint
    assert not parity.compare_losses(choice.golden.data["losses"], ulp_off,
                                     parity.Tolerances.exact()).ok


# ----------------------------------------------------------------------------------------
# The report itself: what a parity failure tells the reader (no TensorFlow run needed).


def _synthetic(losses, weights):
    data = {"losses": losses, "checkpoint": {
        name: {"shape": list(v.shape), "dtype": "float32", "sha256": parity.sha256_of(v),
               "sum": float(v.sum())} for name, v in weights.items()}}
    return parity.Record(data, {f"weights/{n}": parity.sample_values(v) for n, v in weights.items()})


def test_failure_report_names_first_diverging_step_worst_tensor_and_magnitude():
    w = {"dense/kernel": np.ones([4, 4], np.float32), "dense/bias": np.zeros([4], np.float32)}
    golden = _synthetic([2.0, 1.5, 1.0, 0.9], w)
    moved = dict(w, **{"dense/bias": np.array([0, 0, 3e-3, 0], np.float32)})
    replay = _synthetic([2.0, 1.5, 1.01, 0.95], moved)
    loss = parity.compare_losses(golden.data["losses"], replay.data["losses"],
                                 parity.Tolerances())
    assert not loss.ok
    assert "first diverging step 3" in loss.detail and "rel 1.000e-02" in loss.detail
    assert "2/4 steps out of tolerance" in loss.detail
    names, weights = parity.compare_checkpoints(golden, replay, parity.Tolerances())
    assert names.ok and not weights.ok
    assert "worst 'dense/bias'" in weights.detail and "3.000e-03" in weights.detail
    report = parity.Report("x", [loss, names, weights])
    assert report.render().startswith("x: FAIL (1/3 checks)")


def test_exact_comparison_accepts_only_identical_bits():
    golden = _synthetic([1.0, 0.5], {"w": np.ones([3], np.float32)})
    same = _synthetic([1.0, 0.5], {"w": np.ones([3], np.float32)})
    ulp = _synthetic([1.0, float(np.nextafter(np.float32(0.5), np.float32(1)))],
                     {"w": np.ones([3], np.float32)})
    exact = parity.Tolerances.exact()
    assert parity.compare_losses(golden.data["losses"], same.data["losses"], exact).ok
    assert not parity.compare_losses(golden.data["losses"], ulp.data["losses"], exact).ok


def test_initial_checkpoint_rules_are_stable_across_numpy_versions():
    """The init rules materialize to the bytes the legacy recorder (numpy 1.26) hashed."""
    for model in MODELS:
        for _, golden_dir in parity.golden_candidates(str(GOLDENS / model)):
            _, golden = parity.load_golden(golden_dir)
            init = golden.data["init"]
            values = parity.init_values(init["rules"], init["seed"])
            assert {n: parity.sha256_of(v) for n, v in values.items()} == init["sha256"], golden_dir
