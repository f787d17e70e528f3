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
  reduction; the recipe's `Tolerances` (defaults in parity.py) bound it, and the measured
  values are in migration_guide/parity.md.
* Checkpoint names/shapes, checkpoint steps, `evaluate()` keys and value types: equal.
* Known, documented gaps are asserted as such (`KNOWN_*`), so closing one fails loudly and the
  list gets updated.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tpu_estimator_compat import parity

ROOT = Path(__file__).resolve().parent.parent
GOLDENS = ROOT / "tests" / "goldens"
MODELS = sorted(d.name for d in GOLDENS.iterdir() if (d / parity.RECIPE_JSON).exists())
REPLICAS = (1, 8)

# Files the legacy model_dir has and the shim does not write: TF1 MetaGraphs and the graph text
# (a traced tf.function has no single TF1 graph to export; nothing restores from them).
KNOWN_LISTING_GAPS = ("graph.pbtxt", ".meta")
# Summaries legacy wrote that the shim does not (yet) within a recipe's 30 steps: legacy
# TPUEstimator wrote the step rate every iterations_per_loop steps (steps 11, 21 at ipl=10);
# the shim writes it every RunConfig.log_step_count_steps (default 100).
KNOWN_TAG_GAPS = {".": ("global_step/sec", "examples/sec")}


def _replay(model: str, out: Path) -> dict[int, parity.Record]:
    env = dict(os.environ, **parity.REPEATABLE_ENV, TF_CPP_MIN_LOG_LEVEL="2")
    command = [sys.executable, "-m", "tpu_estimator_compat.parity", "replay",
               f"--golden_dir={GOLDENS / model}", f"--replicas={','.join(map(str, REPLICAS))}",
               f"--work_dir={out / 'work'}", f"--out={out / 'replay'}"]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    reports = "\n".join(line for line in result.stdout.splitlines())
    print(reports)  # Shown by pytest on failure: the whole parity report.
    if not (out / "replay" / "x1" / parity.GOLDEN_JSON).exists():
        raise AssertionError(f"parity replay of {model} crashed:\n{result.stderr[-6000:]}")
    return {n: parity.Record.load(str(out / "replay" / f"x{n}")) for n in REPLICAS}


@pytest.fixture(scope="module", params=MODELS)
def case(request, tmp_path_factory):
    """(recipe, golden, {replicas: replay record}) for one model."""
    recipe, golden = parity.load_golden(str(GOLDENS / request.param))
    replays = _replay(request.param, tmp_path_factory.mktemp(request.param))
    return recipe, golden, replays


def _assert(check: parity.Check) -> None:
    assert check.ok, f"{check.name}: {check.detail}"


def test_goldens_exist_and_are_small():
    assert "mnist" in MODELS or "tiny_cnn" in MODELS, MODELS
    total = sum(f.stat().st_size for f in GOLDENS.rglob("*") if f.is_file())
    assert total < 3 * 2**20, f"tests/goldens is {total / 2**20:.1f} MB; keep it under 3 MB."


def test_golden_records_what_the_issue_asks(case):
    recipe, golden, _ = case
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
    _, golden, replays = case
    assert replays[1].data["train_inputs"] == golden.data["train_inputs"]


def test_one_replica_losses_bit_exact(case):
    _, golden, replays = case
    _assert(parity.compare_losses(golden.data["losses"], replays[1].data["losses"],
                                  parity.Tolerances.exact()))


def test_one_replica_final_weights_bit_exact(case):
    _, golden, replays = case
    for check in parity.compare_checkpoints(golden, replays[1], parity.Tolerances.exact()):
        _assert(check)


@pytest.mark.parametrize("replicas", REPLICAS)
def test_checkpoint_names_shapes_and_steps_equal_legacy(case, replicas):
    _, golden, replays = case
    replay = replays[replicas]
    names = parity.compare_checkpoints(golden, replay, parity.Tolerances())[0]
    _assert(names)
    assert replay.data["checkpoint_steps"] == golden.data["checkpoint_steps"]


@pytest.mark.parametrize("section", ["eval", "eval_full_batches"])
def test_one_replica_evaluate_exact(case, section):
    _, golden, replays = case
    if section not in golden.data:
        pytest.skip(f"recipe records no {section}")
    for check in parity.compare_eval(golden.data[section], replays[1].data[section],
                                     parity.Tolerances.exact()):
        _assert(check)


@pytest.mark.parametrize("replicas", REPLICAS)
def test_predictions(case, replicas):
    recipe, golden, replays = case
    if "predictions" not in golden.data:
        pytest.skip("recipe records no predictions")
    tol = (parity.Tolerances.single_replica() if replicas == 1
           else parity.Tolerances.for_recipe(recipe))
    for check in parity.compare_predictions(golden, replays[replicas], tol):
        _assert(check)


def test_one_ulp_probability_difference_is_the_softmax_kernel(case):
    """Same logits, two TF versions: their Softmax kernels differ by at most 1 ulp of 1.0."""
    _, golden, replays = case
    import tensorflow as tf

    ours = tf.nn.softmax(golden.arrays["probe/logits"]).numpy()
    np.testing.assert_array_equal(replays[1].arrays["probe/softmax"], ours)
    assert np.max(np.abs(ours - golden.arrays["probe/softmax"])) <= 2.0 ** -23
    if "predictions/logits" in golden.arrays:
        # Bit-exact logits; softmax recomputed here equals what the shim predicted.
        np.testing.assert_array_equal(replays[1].arrays["predictions/logits"],
                                      golden.arrays["predictions/logits"])
        np.testing.assert_array_equal(
            tf.nn.softmax(golden.arrays["predictions/logits"]).numpy(),
            replays[1].arrays["predictions/probabilities"])


def test_eight_replicas_losses_within_summation_order_tolerance(case):
    recipe, golden, replays = case
    _assert(parity.compare_losses(golden.data["losses"], replays[8].data["losses"],
                                  parity.Tolerances.for_recipe(recipe)))


def test_eight_replicas_final_weights_close(case):
    recipe, golden, replays = case
    for check in parity.compare_checkpoints(golden, replays[8],
                                            parity.Tolerances.for_recipe(recipe)):
        _assert(check)


def test_eight_replicas_evaluate_on_full_batches(case):
    """Same keys and types; metrics within the recipe's tolerance when no batch is padded."""
    recipe, golden, replays = case
    section = "eval_full_batches" if "eval_full_batches" in golden.data else "eval"
    for check in parity.compare_eval(golden.data[section], replays[8].data[section],
                                     parity.Tolerances.for_recipe(recipe)):
        _assert(check)


def test_eight_replicas_evaluate_keys_types_and_metrics_with_padded_batch(case):
    recipe, golden, replays = case
    checks = parity.compare_eval(golden.data["eval"], replays[8].data["eval"],
                                 parity.Tolerances.for_recipe(recipe))
    for check in checks:
        if check.name != "evaluate()['loss']":
            _assert(check)


@pytest.mark.xfail(strict=True, reason=(
    "Known shim gap: on N replicas the padded rows of a partial last eval batch enter the "
    "loss of the replica that holds them (model_fn's mean runs over the padded batch); legacy "
    "CPU evaluate() averages real rows only. See migration_guide/parity.md."))
def test_eight_replicas_eval_loss_with_padded_batch(case):
    recipe, golden, replays = case
    if "eval_full_batches" not in golden.data:
        pytest.skip("recipe's eval input has no partial batch")
    checks = parity.compare_eval(golden.data["eval"], replays[8].data["eval"],
                                 parity.Tolerances.for_recipe(recipe))
    _assert(next(c for c in checks if c.name == "evaluate()['loss']"))


@pytest.mark.parametrize("replicas", REPLICAS)
def test_model_dir_listing_equals_legacy_but_known_gaps(case, replicas):
    _, golden, replays = case
    only_legacy, only_shim = parity.diff_listing(golden.data["model_dir_listing"],
                                                 replays[replicas].data["model_dir_listing"])
    assert not only_shim, f"files the legacy stack does not write: {only_shim}"
    unexplained = [f for f in only_legacy if not f.endswith(KNOWN_LISTING_GAPS)]
    assert not unexplained, f"files the shim does not write: {unexplained}"


def test_event_tags_equal_legacy(case):
    """Same summary tags in the same directories (the steps they are written at are printed
    in the report; train-loop summaries land on loop boundaries on the shim)."""
    _, golden, replays = case
    expected = {d: [t for t in tags if t not in KNOWN_TAG_GAPS.get(d, ())]
                for d, tags in parity.tag_names(golden.data["event_tags"]).items()}
    assert parity.tag_names(replays[1].data["event_tags"]) == expected, (
        "if the shim now writes a tag listed in KNOWN_TAG_GAPS, remove it from there")
