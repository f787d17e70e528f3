"""host_call and the legacy training summaries, read back with TensorFlow's summary iterator."""

import glob
import json
import os
import sys
import threading

import numpy as np
import pytest
import tensorflow as tf

import models
import tpu_estimator_compat
from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator, TPUEstimatorSpec
from tpu_estimator_compat.summary import summaries

v1 = tf.compat.v1


def events(directory):
    """[(step, tag, value)] of every summary value in every events file of `directory`."""
    found = []
    for path in sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*"))):
        for event in v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    number = value.simple_value
                else:
                    number = float(tf.make_ndarray(value.tensor))
                found.append((event.step, value.tag, number))
    return found


GOLDENS = os.path.join(os.path.dirname(__file__), "goldens")


def steps_of(found, tag):
    return [step for step, t, _ in found if t == tag]


def train(tmp_path, strategy, model_fn, *, steps, ipl, use_tpu=True, every_n=1, params=None,
          **config):
    run_config = RunConfig(model_dir=str(tmp_path), train_distribute=strategy,
                           tpu_config=TPUConfig(iterations_per_loop=ipl,
                                                experimental_host_call_every_n_steps=every_n),
                           **config)
    est = TPUEstimator(model_fn=model_fn, config=run_config, train_batch_size=64,
                       use_tpu=use_tpu, params=dict(params or {}, model_dir=str(tmp_path)))
    est.train(models.digits_input_fn(256, flat=True), max_steps=steps)
    return events(str(tmp_path))


def with_host_call(spec, params):
    """Adds a host_call writing the loss under `params['host_tag']` at the global step."""
    gs = tf.reshape(v1.train.get_global_step(), [1])
    loss = tf.reshape(spec.loss, [1])
    model_dir = params["model_dir"]

    def host_call_fn(gs, loss):
        with tf.compat.v2.summary.create_file_writer(model_dir).as_default():
            with tf.compat.v2.summary.record_if(True):
                tf.compat.v2.summary.scalar(params.get("host_tag", "host_loss"), loss[0],
                                            step=gs[0])
                tf.compat.v2.summary.scalar("rows", tf.cast(tf.size(loss), tf.float32),
                                            step=gs[0])
                return v1.summary.all_v2_summary_ops()

    return TPUEstimatorSpec(spec.mode, loss=spec.loss, train_op=spec.train_op,
                            host_call=(host_call_fn, [gs, loss]))


def host_call_model_fn(features, labels, mode, params):
    return with_host_call(models.linear_model_fn(features, labels, mode, params), params)


@pytest.mark.slow_cases('mirrored8-True-1-expected_steps0', 'mirrored8-True-2-expected_steps1', 'mirrored8-False-2-expected_steps2')
@pytest.mark.parametrize("use_tpu, every_n, expected_steps", [
    # Legacy host_call tensors carry the global step the step started from: 0..41.
    (True, 1, list(range(42))),
    # Legacy's TPU outfeed ran on loop steps i % every_n == 0 of each 21-step loop.
    (True, 2, list(range(0, 21, 2)) + list(range(21, 42, 2))),
    # Legacy's CPU path (use_tpu=False) ran host_call with every step, whatever every_n says.
    (False, 2, list(range(42))),
])
def test_host_call_event_steps_match_legacy(tmp_path, strategy, use_tpu, every_n,
                                            expected_steps):
    found = train(tmp_path, strategy, host_call_model_fn, steps=42, ipl=21, use_tpu=use_tpu,
                  every_n=every_n, save_summary_steps=1000, log_step_count_steps=1000)
    assert steps_of(found, "host_loss") == expected_steps
    # The tensors were gathered from every replica: one row per replica.
    rows = {value for _, tag, value in found if tag == "rows"}
    assert rows == {float(strategy.num_replicas_in_sync)}
    # One events file per train() call for the host_call's writer (plus the loss writer):
    # building the fn once in a scratch graph (for legacy's loss tag) opens no writer.
    assert len(glob.glob(os.path.join(str(tmp_path), "events.out.tfevents.*"))) == 2


@pytest.mark.slow_cases('mirrored8')
def test_global_step_reads_in_model_fn_see_the_step_start_value(tmp_path, strategy):
    """As in legacy's TF1 graph: unordered reads see the starting value wherever they are
    written; a read ordered after train_op (an EMA's num_updates) sees the incremented one."""
    seen = []

    def model_fn(features, labels, mode, params):
        before = tf.reshape(v1.train.get_global_step(), [1])  # e.g. a learning-rate schedule
        spec = models.linear_model_fn(features, labels, mode, params)
        step = v1.train.get_global_step()
        after = tf.reshape(step, [1])  # a host_call's step tensor, written after minimize()
        plus_one = tf.reshape(step + 1, [1])
        with tf.control_dependencies([spec.train_op]):
            ordered = tf.reshape(tf.cast(step, tf.int64), [1])

        def host_call_fn(*values):
            # fn is traced into a graph, as in legacy; numpy_function runs at every step.
            def record(*arrays):
                seen.append([int(a[0]) for a in arrays])
                return np.int64(0)

            tf.numpy_function(record, list(values), tf.int64)
            return []

        return spec._replace(host_call=(host_call_fn, [before, after, plus_one, ordered]))

    train(tmp_path, strategy, model_fn, steps=6, ipl=3)
    assert seen == [[s, s, s + 1, s + 1] for s in range(6)]


def assert_schedule(found, expected):
    """The steps `loss` and both rate summaries were written at, as legacy's hooks did."""
    assert steps_of(found, "loss") == expected["loss"]
    assert steps_of(found, "global_step/sec") == expected["rate"]
    assert steps_of(found, "examples/sec") == expected["rate"]


@pytest.mark.slow_cases('mirrored8-False-42-21-100-100-expected0')
@pytest.mark.parametrize("use_tpu, steps, ipl, save, log, expected", [
    # use_tpu=False: legacy decided per step. StepCounterHook every ceil(100 / 21) = 5 steps
    # after its baseline at step 1; SummarySaverHook on the first step, then every 100.
    (False, 42, 21, 100, 100, {"loss": [1], "rate": [6, 11, 16, 21, 26, 31, 36, 41]}),
    # use_tpu=True off a TPU: the loss on the per-step rule (every step's loss is known here;
    # a TPU host saw one per loop), the rates once per loop of 21 steps (baseline: the first).
    (True, 42, 21, 100, 100, {"loss": [1], "rate": [42]}),
])
def test_train_summaries_acceptance_cases(tmp_path, strategy, use_tpu, steps, ipl, save, log,
                                          expected):
    found = train(tmp_path, strategy, models.linear_model_fn, steps=steps, ipl=ipl,
                  use_tpu=use_tpu, save_summary_steps=save, log_step_count_steps=log)
    assert_schedule(found, expected)
    rates = {s: v for s, tag, v in found if tag == "global_step/sec"}
    examples = {s: v for s, tag, v in found if tag == "examples/sec"}
    assert all(np.isfinite(v) and v > 0 for v in rates.values())
    assert all(examples[s] == pytest.approx(64 * rates[s], rel=1e-5) for s in rates)


@pytest.mark.slow_cases('True-28-4-4-4-expected1')
@pytest.mark.parametrize("use_tpu, steps, ipl, save, log, expected", [
    (False, 12, 4, 4, 4, {"loss": [1, 5, 9], "rate": list(range(2, 13))}),
    (True, 28, 4, 4, 4, {"loss": [1, 5, 9, 13, 17, 21, 25], "rate": [8, 12, 16, 20, 24, 28]}),
    # save_summary_steps=0: no SummarySaverHook, and ExamplesPerSecondHook only logged.
    (False, 12, 4, 0, 4, {"loss": [], "rate": []}),
    # log_step_count_steps=None: no ExamplesPerSecondHook.
    (True, 12, 4, 4, None, {"loss": [1, 5, 9], "rate": []}),
])
def test_train_summary_rules_follow_legacy_hooks(tmp_path, use_tpu, steps, ipl, save, log,
                                                 expected):
    found = train(tmp_path, None, models.linear_model_fn, steps=steps, ipl=ipl,
                  use_tpu=use_tpu, save_summary_steps=save, log_step_count_steps=log)
    assert_schedule(found, expected)


def _feed_loops(tmp_path, *, use_tpu, loops, ipl, seconds, on_tpu=None, save=100, log=100):
    """TrainSummaries with the default RunConfig rules, fed `loops` loops of `ipl` steps
    (loss 0.5, each loop `seconds` long on a made-up clock); returns (writer, events).
    `on_tpu` (default: `use_tpu`) says whether the strategy runs on TPU cores."""
    rules = summaries.TrainSummaryRules.legacy(
        use_tpu=use_tpu, on_tpu=use_tpu if on_tpu is None else on_tpu,
        save_summary_steps=save, log_step_count_steps=log,
        iterations_per_loop=ipl, examples_per_step=64)
    writer = summaries.TrainSummaries(str(tmp_path), rules)
    for loop in range(loops):
        writer.after_loop(ipl * (loop + 1), np.full([ipl], 0.5, np.float32),
                          end_time=seconds * (loop + 1), seconds=seconds,
                          starts=np.arange(ipl * loop, ipl * (loop + 1)))
    writer.close()
    return writer, events(str(tmp_path))


def test_a_loop_of_per_step_rate_summaries_is_written_in_step_order_at_step_times(tmp_path):
    """use_tpu=False with iterations_per_loop=100: legacy's rate rule fires every step, and
    each event carries the time its step ended (interpolated over the loop), as legacy's
    per-step add_summary did."""
    _, found = _feed_loops(tmp_path, use_tpu=False, loops=3, ipl=100, seconds=1.0)
    assert steps_of(found, "loss") == [1, 101, 201]
    assert steps_of(found, "global_step/sec") == list(range(2, 301))
    assert [step for step, _, _ in found] == sorted(step for step, _, _ in found)
    [path] = glob.glob(os.path.join(str(tmp_path), "events.out.tfevents.*"))
    times = {(event.step, value.tag): event.wall_time
             for event in v1.train.summary_iterator(path) for value in event.summary.value}
    # Loop 2 ends at 2.0 s after 1.0 s: its k-th step (global step 100 + k + 1) at 1 + k/100.
    assert times[(150, "global_step/sec")] == pytest.approx(1.5)
    assert times[(150, "examples/sec")] == pytest.approx(1.5)
    assert times[(101, "loss")] == pytest.approx(1.01)


def test_events_reach_the_disk_each_loop_when_asked_and_at_close(tmp_path, monkeypatch):
    """Events wait in the events file's buffer until a loop ends `_FLUSH_SECONDS` after the
    last flush (a loop that long flushes its own); close() flushes the rest. Flushed each
    loop or only at close, the file ends the same."""
    rules = summaries.TrainSummaryRules.legacy(
        use_tpu=False, on_tpu=False, save_summary_steps=100, log_step_count_steps=100,
        iterations_per_loop=10, examples_per_step=64)

    def feed(directory, loops, seconds=1.0):
        writer = summaries.TrainSummaries(str(directory), rules)
        seen = []
        for loop in range(loops):
            writer.after_loop(10 * (loop + 1), np.full([10], 0.5, np.float32),
                              end_time=seconds * (loop + 1), seconds=seconds,
                              starts=np.arange(10 * loop, 10 * (loop + 1)))
            writer._background.drain()  # pylint: disable=protected-access
            seen.append(len(events(str(directory))))
        writer.close()
        return seen, events(str(directory))

    monkeypatch.setattr(summaries, "_FLUSH_SECONDS", 0.0)
    each_loop, expected = feed(tmp_path / "each", 12)
    assert each_loop == sorted(set(each_loop)) and each_loop[0] > 0  # Every loop flushed.
    assert each_loop[-1] == len(expected)
    monkeypatch.setattr(summaries, "_FLUSH_SECONDS", 3600.0)
    _, found = feed(tmp_path / "at_close", 12)
    assert found == expected
    slow_loops, _ = feed(tmp_path / "slow", 3, seconds=3600.0)
    assert slow_loops[0] > 0 and slow_loops == sorted(set(slow_loops))  # Every loop flushed.


def test_loops_summaries_are_written_off_the_training_thread_and_errors_reach_close(
        tmp_path, monkeypatch):
    """A loop's events are decided and written while the next loop runs; close() waits for
    them, and a failed write is raised there (or by the next loop), not lost."""
    rules = summaries.TrainSummaryRules.legacy(
        use_tpu=False, on_tpu=False, save_summary_steps=1, log_step_count_steps=100,
        iterations_per_loop=4, examples_per_step=64)
    writer = summaries.TrainSummaries(str(tmp_path), rules)
    threads = []
    original = writer._write_loop  # pylint: disable=protected-access

    def recorded(*args):
        threads.append(threading.current_thread())
        original(*args)

    monkeypatch.setattr(writer, "_write_loop", recorded)
    writer.after_loop(4, np.full([4], 0.5, np.float32), end_time=1.0, seconds=1.0,
                      starts=np.arange(4))
    writer.close()
    assert threads and threads[0] is not threading.current_thread()
    assert steps_of(events(str(tmp_path)), "loss") == [1, 2, 3, 4]

    failing = summaries.TrainSummaries(str(tmp_path), rules)

    def fail(*args):
        raise OSError("disk full")

    monkeypatch.setattr(failing, "_write_loop", fail)
    failing.after_loop(4, np.full([4], 0.5, np.float32), end_time=1.0, seconds=1.0,
                       starts=np.arange(4))
    with pytest.raises(OSError, match="disk full"):
        failing.close()


def test_every_train_call_of_a_process_appends_to_its_model_dirs_one_events_file(tmp_path):
    """Each train() builds a TrainSummaries; as legacy's FileWriterCache, they share one
    events file per model_dir per process, so a long train_and_evaluate leaves one file."""
    _feed_loops(tmp_path / "a", use_tpu=False, loops=1, ipl=100, seconds=1.0)
    _, again = _feed_loops(tmp_path / "a", use_tpu=False, loops=1, ipl=100, seconds=1.0)
    _, other = _feed_loops(tmp_path / "b", use_tpu=False, loops=1, ipl=100, seconds=1.0)
    assert len(glob.glob(os.path.join(str(tmp_path / "a"), "events.out.tfevents.*"))) == 1
    assert len(steps_of(again, "global_step/sec")) == 2 * 99
    assert len(steps_of(other, "global_step/sec")) == 99


@pytest.mark.parametrize("use_tpu, on_tpu, expected_loss, expected_rate", [
    (False, False, [1, 101, 201], list(range(11, 251, 10))),
    # On TPU cores legacy decided once per loop of 10 steps, the loss included.
    (True, True, [10, 130, 250], list(range(20, 251, 10))),
    # use_tpu=True on GPUs or CPU replicas: the loss per step, the rates per loop.
    (True, False, [1, 101, 201], list(range(20, 251, 10))),
])
def test_default_schedules_over_many_loops(tmp_path, use_tpu, on_tpu, expected_loss,
                                           expected_rate):
    """The rules alone, fed 25 loops of 10 steps with a made-up clock (no training)."""
    _, found = _feed_loops(tmp_path, use_tpu=use_tpu, on_tpu=on_tpu, loops=25, ipl=10,
                           seconds=2.0)
    assert steps_of(found, "loss") == expected_loss
    assert steps_of(found, "global_step/sec") == expected_rate
    # 10 steps every 2 s (interpolated per step on the CPU schedule).
    assert [v for _, t, v in found if t == "global_step/sec"] == pytest.approx(
        [5.0] * len(expected_rate))
    assert [v for _, t, v in found if t == "examples/sec"] == pytest.approx(
        [320.0] * len(expected_rate))


def test_on_tpu_cores_the_loss_is_written_once_per_loop(tmp_path):
    """TPU: SummarySaverHook's "next step" after a run it skipped was the run's starting
    step + 2, so with save_summary_steps=4 and 4-step loops it wrote every third loop."""
    _, found = _feed_loops(tmp_path, use_tpu=True, on_tpu=True, loops=7, ipl=4, seconds=1.0,
                           save=4, log=4)
    assert steps_of(found, "loss") == [4, 16, 28]
    assert steps_of(found, "global_step/sec") == [8, 12, 16, 20, 24, 28]
    assert [step for step, _, _ in found] == sorted(step for step, _, _ in found)


def test_train_summary_steps_equal_recorded_legacy_run(tmp_path):
    """tiny_cnn's golden: real legacy TPUEstimator(use_tpu=False), ipl=10, 30 steps."""
    with open(os.path.join(GOLDENS, "tiny_cnn", "golden.json")) as f:
        golden = json.load(f)
    with open(os.path.join(GOLDENS, "tiny_cnn", "recipe.json")) as f:
        recipe = json.load(f)
    found = train(tmp_path, None, models.linear_model_fn, steps=recipe["train_steps"],
                  ipl=recipe["iterations_per_loop"], use_tpu=False)
    shim = {tag: steps_of(found, tag) for tag in {t for _, t, _ in found}}
    assert shim == golden["event_tags"]["."]


LEGACY_SCHEDULES = os.path.join(GOLDENS, "summary_schedules", "legacy_events.json")
with open(LEGACY_SCHEDULES) as _f:
    LEGACY_SCENARIOS = json.load(_f)["scenarios"]


@pytest.mark.parametrize("scenario", sorted(LEGACY_SCENARIOS))
def test_summary_schedules_equal_recorded_legacy_runs(tmp_path, scenario):
    """The same r1 script as legacy ran (tests/legacy_recorder/summary_schedules.py):
    every tag, step and count legacy wrote, and every checkpoint, except where legacy itself
    raced."""
    import tpu_estimator_compat

    tpu_estimator_compat.install_aliases()
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "legacy_recorder"))
    try:
        import summary_schedules
    finally:
        sys.path.pop(0)
    found = summary_schedules.run(scenario, str(tmp_path))
    shim = found["."]
    recorded = LEGACY_SCENARIOS[scenario]
    legacy = dict(recorded["."])
    _, steps, _, _, host_tag, _, _ = summary_schedules.SCENARIOS[scenario]
    if host_tag:
        # Legacy's host_call read of the global step was unordered against the increment in
        # its TF1 graph: for this tiny model it sometimes ran after it (resnet's golden:
        # never). The shim always gives the step's starting value; legacy gave it or +1.
        legacy_steps = legacy.pop(host_tag)
        assert shim.pop(host_tag) == list(range(steps))
        assert len(legacy_steps) == steps
        assert all(s in (i, i + 1) for i, s in enumerate(legacy_steps)), legacy_steps
    # Legacy's own summary hook read the global step unordered against the increment too,
    # so a few of its runs shifted their schedule; the shim gives the outcome without that
    # race, which is the one most legacy runs recorded.
    counts = [outcome["count"] for outcome in recorded["outcomes"]]
    assert counts[0] > sum(counts) / 2, recorded["outcomes"]
    assert shim == legacy
    assert found["checkpoints"] == recorded["checkpoints"]


def loss_scope_model_fn(features, labels, mode, params):
    """BERT's pattern: a `loss` variable scope at the root of model_fn's graph."""
    with v1.variable_scope("loss"):
        spec = models.linear_model_fn(features, labels, mode, params)
    return with_host_call(spec, params) if params.get("host_tag") else spec


@pytest.mark.slow_cases('mirrored8-host_call_model_fn-loss-False-expected4', 'mirrored8-loss_scope_model_fn-loss-False-expected5')
@pytest.mark.parametrize("model_fn, host_tag, use_tpu, expected", [
    (models.linear_model_fn, None, False, ["loss"]),
    (models.linear_model_fn, None, True, ["loss"]),
    # model_fn took `loss`: legacy's summary became loss_1 (the bert golden).
    (loss_scope_model_fn, None, False, ["loss_1"]),
    # ... but not on TPU, where model_fn ran in a while_v2 body graph of its own (TF 2's
    # control flow; under v1's: `loss_1`, then Estimator's `loss_2`: test_graph_names).
    (loss_scope_model_fn, None, True, ["loss"]),
    # The host_call's summary took `loss` (the resnet golden).
    (host_call_model_fn, "loss", False, ["loss_1"]),
    # Both: the third `loss` in the graph.
    (loss_scope_model_fn, "loss", False, ["loss_2"]),
])
def test_loss_summary_tag_renamed_as_legacy(tmp_path, strategy, model_fn, host_tag, use_tpu,
                                            expected):
    params = {"host_tag": host_tag} if host_tag else {}
    found = train(tmp_path, strategy, model_fn, steps=4, ipl=2, use_tpu=use_tpu,
                  params=params, save_summary_steps=100)
    own = sorted({tag for step, tag, _ in found if tag.startswith("loss")
                  and not (host_tag and tag == host_tag)})
    assert own == expected
    assert all(steps_of(found, tag) == [1] for tag in own)  # Off TPU: the first step's loss.
    if host_tag:
        assert steps_of(found, host_tag) == [0, 1, 2, 3]


def test_scalar_host_call_tensor_rejected(tmp_path):
    def model_fn(features, labels, mode, params):
        spec = models.linear_model_fn(features, labels, mode, params)
        return TPUEstimatorSpec(mode, loss=spec.loss, train_op=spec.train_op,
                                host_call=(lambda loss: [], [spec.loss]))

    est = TPUEstimator(model_fn=model_fn, config=RunConfig(model_dir=str(tmp_path)),
                       use_tpu=False, train_batch_size=64)
    with pytest.raises(RuntimeError, match=r"should preserve batch size dimension"):
        est.train(models.digits_input_fn(64, flat=True), steps=1)


def test_v1_summaries_in_model_fn_are_dropped_with_warning_with_use_tpu(tmp_path,
                                                                       monkeypatch):
    """Legacy TPU dropped v1 summary ops made inside the TPU computation."""
    from tpu_estimator_compat.step import replica_step

    warnings = []
    monkeypatch.setattr(replica_step.logging, "warning",
                        lambda fmt, *a: warnings.append(fmt % a))

    def model_fn(features, labels, mode, params):
        spec = models.linear_model_fn(features, labels, mode, params)
        v1.summary.scalar("my_loss", spec.loss)
        return spec

    est = TPUEstimator(model_fn=model_fn, config=RunConfig(model_dir=str(tmp_path)),
                       use_tpu=True, train_batch_size=64)
    est.train(models.digits_input_fn(64, flat=True), steps=2)
    assert any("tf.compat.v1.summary op(s)" in w and "host_call" in w for w in warnings)
    assert "my_loss" not in {tag for _, tag, _ in events(str(tmp_path))}


def summaries_model_fn(features, labels, mode, params):
    """linear_model_fn plus v1 summaries: twice the loss, a histogram, and `params['also']`."""
    spec = models.linear_model_fn(features, labels, mode, params)
    if mode == "train":
        v1.summary.scalar("twice_loss", spec.loss * 2)
        v1.summary.histogram("weights", v1.trainable_variables()[0])
        for name in params.get("also", ()):
            v1.summary.scalar(name, spec.loss * 3)
    return spec


def summary_events(directory):
    """[(step, [tag, ...], {tag: simple_value})] of every summary event, in file order."""
    found = []
    for path in sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*"))):
        for event in v1.train.summary_iterator(path):
            if event.summary.value:
                found.append((event.step, [v.tag for v in event.summary.value],
                              {v.tag: v.simple_value for v in event.summary.value
                               if v.HasField("simple_value")}))
    return found


@pytest.mark.slow_cases('mirrored8')
@pytest.mark.parametrize("strategy_name", ["default", "mirrored8"])
def test_v1_summaries_in_model_fn_are_written_on_the_cpu_path(tmp_path, monkeypatch,
                                                            strategy_name):
    """use_tpu=False: legacy's Estimator wrote `merge_all()` with its loss summary.

    Recorded on TF 2.15 + tensorflow-estimator 2.15 (use_tpu=False, save_summary_steps=3,
    iterations_per_loop=4, train to 7 then to 9): one event at steps 1, 4, 7 and 8 holding
    the model_fn's summaries in the order it made them, then `loss`.
    """
    from tpu_estimator_compat.step import replica_step
    from conftest import make_strategy

    warnings = []
    monkeypatch.setattr(replica_step.logging, "warning",
                        lambda fmt, *a: warnings.append(fmt % a))
    config = RunConfig(model_dir=str(tmp_path), save_summary_steps=3,
                       train_distribute=make_strategy(strategy_name),
                       tpu_config=TPUConfig(iterations_per_loop=4))
    est = TPUEstimator(model_fn=summaries_model_fn, config=config, use_tpu=False,
                       train_batch_size=64)
    est.train(models.digits_input_fn(256, flat=True), max_steps=7)
    est.train(models.digits_input_fn(256, flat=True), max_steps=9)
    found = [e for e in summary_events(str(tmp_path)) if "loss" in e[1]]
    assert [step for step, _, _ in found] == [1, 4, 7, 8]
    for _, tags, values in found:
        assert tags == ["twice_loss", "weights", "loss"]
        if strategy_name == "default":  # Several replicas: replica 0's own batch's loss.
            assert values["twice_loss"] == pytest.approx(2 * values["loss"], rel=1e-6)
    assert not any("tf.compat.v1.summary op(s)" in w for w in warnings)


def test_a_v1_summary_named_loss_replaces_legacys_own_on_the_cpu_path(tmp_path):
    """Legacy's Estimator added `loss` only when no summary was named exactly `loss`."""
    config = RunConfig(model_dir=str(tmp_path), save_summary_steps=2,
                       tpu_config=TPUConfig(iterations_per_loop=2))
    est = TPUEstimator(model_fn=summaries_model_fn, config=config, use_tpu=False,
                       train_batch_size=64, params={"also": ["loss"]})
    est.train(models.digits_input_fn(256, flat=True), max_steps=4)
    found = [e for e in summary_events(str(tmp_path)) if "twice_loss" in e[1]]
    assert [step for step, _, _ in found] == [1, 3]
    for _, tags, values in found:
        assert tags == ["twice_loss", "weights", "loss"]  # No `loss_1`: model_fn's `loss`.
        assert values["loss"] == pytest.approx(1.5 * values["twice_loss"], rel=1e-6)


def test_no_model_fn_summaries_without_save_summary_steps(tmp_path):
    config = RunConfig(model_dir=str(tmp_path), save_summary_steps=0,
                       tpu_config=TPUConfig(iterations_per_loop=2))
    est = TPUEstimator(model_fn=summaries_model_fn, config=config, use_tpu=False,
                       train_batch_size=64)
    est.train(models.digits_input_fn(256, flat=True), max_steps=4)
    assert not any("twice_loss" in tags for _, tags, _ in summary_events(str(tmp_path)))


@pytest.mark.slow_cases('mirrored8')
def test_host_call_in_eval(tmp_path, strategy):
    """host_call works in EVAL too: the fn runs per eval step with real rows only."""

    def model_fn(features, labels, mode, params):
        spec = models.linear_full_model_fn(features, labels, mode, params)
        if mode != "eval":
            return spec
        model_dir = params["model_dir"]

        def host_call_fn(labels):
            with tf.compat.v2.summary.create_file_writer(model_dir + "/eval_hc").as_default():
                tf.compat.v2.summary.scalar("rows", tf.cast(tf.size(labels), tf.float32),
                                            step=0)
            return []

        return spec._replace(host_call=(host_call_fn, [labels]))

    config = RunConfig(model_dir=str(tmp_path), train_distribute=strategy,
                       eval_distribute=strategy, tpu_config=TPUConfig(iterations_per_loop=2))
    est = TPUEstimator(model_fn=model_fn, config=config, train_batch_size=64,
                       eval_batch_size=64, params={"model_dir": str(tmp_path)})
    est.train(models.digits_input_fn(256, flat=True), steps=2)
    est.evaluate(lambda params: tf.data.Dataset.from_tensor_slices(
        models.digits(150, flat=True)).batch(params["batch_size"]))
    rows = [v for _, tag, v in events(str(tmp_path / "eval_hc")) if tag == "rows"]
    assert rows == [64.0, 64.0, 22.0]  # 150 examples: every one once, padding removed.


def test_host_call_runner_traces_fn_once_and_writes_v1_and_v2_summaries(tmp_path):
    """Legacy built the host_call fn into a graph: v1 image/merge work, traced once."""
    v2_dir = str(tmp_path / "v2")

    def host_call_fn(global_step, logits, images):
        v1.summary.scalar("created_only", logits[0, 0])  # In SUMMARIES, not returned.
        with tf.compat.v2.summary.create_file_writer(v2_dir).as_default():
            tf.compat.v2.summary.scalar("v2_loss", logits[0, 1], step=global_step[0])
            v1.summary.scalar("v1_under_writer", logits[0, 2])  # Forwarded to v2.
        return v1.summary.merge([v1.summary.histogram("logits", logits),
                                 v1.summary.image("inputs", images, max_outputs=2)])

    structure = [tf.TensorSpec([1], tf.int64), tf.TensorSpec([4, 3], tf.float32),
                 tf.TensorSpec([4, 8, 8, 1], tf.float32)]
    runner = summaries.HostCallRunner(host_call_fn, structure, str(tmp_path))
    for step in range(3):
        runner.run([np.array([step]), np.full([4, 3], step, np.float32),
                    np.zeros([4, 8, 8, 1], np.float32)], global_step=step)
    runner.close()
    assert runner._traced.experimental_get_tracing_count() == 1  # pylint: disable=protected-access
    v1_tags = {}
    for path in glob.glob(os.path.join(str(tmp_path), "events.out.tfevents.*")):
        for event in v1.train.summary_iterator(path):
            for value in event.summary.value:
                v1_tags.setdefault(value.tag, []).append(event.step)
    assert v1_tags == {tag: [0, 1, 2] for tag in (
        "logits", "inputs/image/0", "inputs/image/1", "created_only")}
    # v2 summaries (and v1 ones under a default writer) at the step run() was given.
    assert sorted(events(v2_dir)) == [(s, tag, float(s)) for s in range(3)
                                      for tag in ("v1_under_writer", "v2_loss")]


def test_host_call_merge_all_writes_each_v1_summary_once(tmp_path):
    """merge_all() merges the fn's own v1 summaries; they are not written a second time."""

    def host_call_fn(loss):
        v1.summary.scalar("loss_v1", loss[0])
        v1.summary.histogram("loss_hist", loss)
        return v1.summary.merge_all()

    runner = summaries.HostCallRunner(host_call_fn, [tf.TensorSpec([2], tf.float32)],
                                      str(tmp_path))
    for step in range(2):
        runner.run([np.array([step, 1.0], np.float32)], global_step=step)
    runner.close()
    written = sorted((event.step, value.tag)
                     for path in glob.glob(os.path.join(str(tmp_path), "events.out.*"))
                     for event in v1.train.summary_iterator(path)
                     for value in event.summary.value)
    assert written == [(0, "loss_hist"), (0, "loss_v1"), (1, "loss_hist"), (1, "loss_v1")]


def test_host_call_ignores_v1_summaries_made_eagerly_before_it(tmp_path):
    """An eager v1 summary op made earlier in the process is not host_call fn's.

    It lands, as an eager tensor, in the global graph's SUMMARIES collection, which a
    function graph copies: host_call then failed (`Tensor.op is undefined when eager
    execution is enabled`) or, through `merge_all`, wrote the stale value at every step.
    """
    graph = tf.compat.v1.get_default_graph()
    key = tf.compat.v1.GraphKeys.SUMMARIES
    before = list(graph.get_collection(key))
    v1.summary.scalar("made_eagerly_before", 7.0)
    assert len(graph.get_collection(key)) == len(before) + 1

    def host_call_fn(loss):
        v1.summary.scalar("created_only", loss[0])
        v1.summary.histogram("merged_all", loss)
        return v1.summary.merge_all()

    try:
        runner = summaries.HostCallRunner(host_call_fn, [tf.TensorSpec([2], tf.float32)],
                                          str(tmp_path))
        for step in range(2):
            runner.run([np.array([step, 1.0], np.float32)], global_step=step)
        runner.close()
    finally:
        graph.clear_collection(key)
        for item in before:
            graph.add_to_collection(key, item)
    written = sorted((event.step, value.tag)
                     for path in glob.glob(os.path.join(str(tmp_path), "events.out.*"))
                     for event in v1.train.summary_iterator(path)
                     for value in event.summary.value)
    assert written == [(0, "created_only"), (0, "merged_all"),
                       (1, "created_only"), (1, "merged_all")]


# A TF2 summary writer created inside model_fn (SimCLR), replayed against
# tests/goldens/model_fn_summary_writer/legacy.json (tests/legacy_recorder/model_fn_summary_writer.py).


@pytest.mark.slow_cases('mirrored8-False', 'mirrored8-True')
@pytest.mark.parametrize("use_tpu", [False, True])
def test_summary_writer_created_in_model_fn_writes_what_legacy_wrote(tmp_path, strategy,
                                                                     use_tpu):
    """`writer.init()` in control_dependencies, `as_default()`, `record_if(step % 2 == 0)`,
    scalars at the global step: the same (tag, step) events legacy's graph wrote over two
    train() calls, flushed by the end of each call; values the global batch's on 1 replica."""
    from conftest import legacy_recorder

    recorder, golden = legacy_recorder("model_fn_summary_writer")
    shim = recorder.run(str(tmp_path), train_distribute=strategy, use_tpu=use_tpu)
    legacy = golden["legacy"]
    for key in ("after_first_train", "events"):
        assert [e[:2] for e in shim[key]] == [e[:2] for e in legacy[key]], key
        if strategy.num_replicas_in_sync == 1:  # On 8 replicas: replica 0's batch.
            np.testing.assert_allclose([e[2] for e in shim[key]], [e[2] for e in legacy[key]],
                                       rtol=1e-5, err_msg=key)
    # The model_fn's writer wrote one events file (legacy: one per train() call).
    files = [path for path in glob.glob(os.path.join(str(tmp_path), "events.out.tfevents.*"))
             if recorder.events_in(path)]
    assert len(files) == 1, files


@pytest.mark.parametrize("value", [0.0, -0.0, 1.5, -3.25, 1e-40, 2.0**-149, 3.4e38, 1e39, -1e39,
                                   float("inf"), float("-inf"), float("nan"), 123456.789])
@pytest.mark.parametrize("tag", ["loss", "global_step/sec", "examples/sec", "t" * 200, "ü/ß"])
def test_scalar_events_are_the_bytes_protobuf_writes(tag, value):
    """The training summaries' bytes are built by hand; they must be protobuf's exactly."""
    proto = tf.compat.v1.Summary
    expected = proto(value=[proto.Value(tag=tag, simple_value=value),
                            proto.Value(tag="x", simple_value=2.0)]).SerializeToString()
    assert summaries._serialized_scalars([(tag, value), ("x", 2.0)]) == expected  # pylint: disable=protected-access


def test_eval_results_are_written_as_legacys_estimator_wrote_them(tmp_path):
    image = tf.compat.v1.Summary(value=[
        tf.compat.v1.Summary.Value(tag="image/image/0", simple_value=1.0),
        tf.compat.v1.Summary.Value(tag="image/image/1", simple_value=2.0)])
    results = {"accuracy": np.float32(0.5), "global_step": np.int64(7),
               "foo": image.SerializeToString(), "bad": b"not a summary proto \xff",
               "pmt": np.array([1.0, 0.5, 0.0], np.float32), "nested": ((1.0, 2), 3.0)}
    summaries.write_eval_summaries(str(tmp_path), results, 7, None)
    values = {v.tag: v for path in glob.glob(str(tmp_path / "events*"))
              for event in tf.compat.v1.train.summary_iterator(path)
              for v in event.summary.value}
    assert sorted(values) == ["accuracy", "foo/0", "foo/1", "pmt"]
    assert values["foo/1"].simple_value == 2.0 and values["accuracy"].simple_value == 0.5
    assert tf.make_ndarray(values["pmt"].tensor).tolist() == [1.0, 0.5, 0.0]


# `_write_dict_to_summary` and `_write_checkpoint_path_to_summary` of tensorflow-estimator
# 2.15.0, run on the legacy stack (TF 2.15.1) with the dict below at step 5; the events'
# `summary.SerializeToString()`:
#   TF_ENABLE_ONEDNN_OPTS=0 /work/main/.venv-legacy/bin/python tests/legacy_recorder/write_dict_to_summary.py
_LEGACY_DICT_EVENT = (b"\n\x08\n\x01b\x15\x00\x00\x00?\n\x08\n\x01a\x15\x00\x00@@\n\x08\n\x01t\x15"
                      b"\x00\x00\x80?\n\x16\n\x01z:\x01zB\x0e\x08\x02\x12\x002\x08\x00\x00\x00"
                      b"\x00\x00\x00\x00@\n\x0c\n\x05img/0\x15\x00\x00\x80?\n\x08\n\x01g\x15\x00"
                      b"\x00 @")
_LEGACY_CHECKPOINT_EVENT = b"\n(\n\x0fcheckpoint_pathB\x15\x08\x07\x12\x00B\x0f/x/model.ckpt-5"


def _legacy_recorder_dict():
    image = tf.compat.v1.Summary(value=[
        tf.compat.v1.Summary.Value(tag="a", simple_value=1.0)]).SerializeToString()
    # Insertion order is the events' order; float16, np.bool_, bad bytes and a nest are
    # skipped with legacy's warning, None and global_step silently.
    return {"b": np.float32(0.5), "a": 3, "t": True, "f16": np.float16(1), "nb": np.bool_(True),
            "z": np.array(2.0), "img": image, "bad": b"\xff\xff", "nest": (1.0, 2),
            "g": np.float64(2.5), "global_step": 5, "none": None}


def _events(log_dir):
    return [(event.step, event.summary.SerializeToString())
            for path in sorted(glob.glob(os.path.join(str(log_dir), "events*")))
            for event in tf.compat.v1.train.summary_iterator(path) if event.HasField("summary")]


def test_write_dict_to_summary_writes_legacys_event_bytes(tmp_path, caplog):
    caplog.set_level("INFO")
    summaries.write_dict_to_summary(str(tmp_path), _legacy_recorder_dict(), 5)
    assert _events(tmp_path) == [(5, _LEGACY_DICT_EVENT)]
    assert "Saving dict for global step 5: a = 3, b = 0.5, f16 = 1.0" in caplog.text
    assert "Skipping summary for f16, must be a float" in caplog.text
    assert "Skipping summary for bad, cannot parse string to Summary." in caplog.text


def test_evaluate_s_events_are_legacy_s_dict_event_then_its_checkpoint_event(tmp_path):
    summaries.write_eval_summaries(str(tmp_path), _legacy_recorder_dict(), 5, "/x/model.ckpt-5")
    assert _events(tmp_path) == [(5, _LEGACY_DICT_EVENT), (5, _LEGACY_CHECKPOINT_EVENT)]


def test_write_dict_to_summary_is_served_at_legacy_s_estimator_module(tmp_path):
    tpu_estimator_compat.install_aliases()  # Serves legacy's module paths.
    from tensorflow.python.estimator import estimator  # pylint: disable=g-direct-tensorflow-import

    assert estimator._write_dict_to_summary is summaries.write_dict_to_summary  # pylint: disable=protected-access
    for step, loss in ((1, 50), (2, 60)):  # tensorflow-estimator's exporter_test writes so.
        estimator._write_dict_to_summary(str(tmp_path), {"loss": loss}, step)  # pylint: disable=protected-access
    read = [(step, tf.compat.v1.Summary.FromString(data).value[0].simple_value)
            for step, data in _events(tmp_path)]
    assert read == [(1, 50.0), (2, 60.0)]
