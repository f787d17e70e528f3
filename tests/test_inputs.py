"""Tests for tpu_estimator_compat.inputs: batch plans, input_fn calls, distributed datasets."""
import copy
import statistics
import threading
import time
import weakref

import numpy as np
import pytest
import tensorflow as tf
from conftest import make_strategy

import models

from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator, TPUEstimatorSpec
from tpu_estimator_compat._tf import device_iterators
from tpu_estimator_compat.inputs import call as call_lib
from tpu_estimator_compat.inputs import context as context_lib
from tpu_estimator_compat.inputs import distribute as inputs
from tpu_estimator_compat.inputs import pad as pad_lib
from tpu_estimator_compat.tpu_config import InputPipelineConfig

_TRAIN = "train"


def _plan(pipeline, *, batch=64, replicas=8, hosts=1, use_tpu=True):
    return context_lib.plan_batches(global_batch_size=batch, batch_name="train_batch_size",
                               num_replicas=replicas, num_hosts=hosts, pipeline=pipeline,
                               use_tpu=use_tpu)


# plan_batches


@pytest.mark.parametrize("pipeline, for_input_fn, for_model_fn, rebatch_to", [
        (InputPipelineConfig.PER_HOST_V1, 64, 8, 8),
        (InputPipelineConfig.PER_HOST_V2, 8, 8, None),
        (InputPipelineConfig.PER_SHARD_V1, 8, 8, None),
        (InputPipelineConfig.BROADCAST, 64, 64, None),
])
def test_plan_batches_table_on_eight_replicas(pipeline, for_input_fn, for_model_fn,
                                              rebatch_to):
    plan = _plan(pipeline)
    assert (plan.global_batch_size, plan.for_input_fn, plan.for_model_fn, plan.rebatch_to,
            plan.pipeline, plan.num_replicas, plan.num_hosts) == (
                    64, for_input_fn, for_model_fn, rebatch_to, pipeline, 8, 1)


def test_plan_batches_use_tpu_false_on_one_replica_gives_global_batch():
    plan = _plan(InputPipelineConfig.PER_HOST_V1, replicas=1, use_tpu=False)
    assert (plan.for_input_fn, plan.for_model_fn, plan.rebatch_to, plan.num_replicas) == (
            64, 64, None, 1)


def test_plan_batches_per_host_v1_two_hosts_splits_host_batch():
    plan = _plan(InputPipelineConfig.PER_HOST_V1, hosts=2)
    assert (plan.for_input_fn, plan.for_model_fn, plan.rebatch_to) == (32, 8, 8)


def test_plan_batches_indivisible_batch_raises_with_both_numbers():
    with pytest.raises(ValueError) as e:
        _plan(InputPipelineConfig.PER_HOST_V1, batch=12)
    message = str(e.value)
    assert "`train_batch_size` (12)" in message
    assert "number of replicas (8)" in message


def test_plan_batches_none_batch_leaves_everything_unset():
    plan = _plan(InputPipelineConfig.PER_HOST_V1, batch=None)
    assert (plan.global_batch_size, plan.for_input_fn, plan.for_model_fn,
            plan.rebatch_to) == (None, None, None, None)
    assert (plan.num_replicas, plan.num_hosts) == (8, 1)


# distribute


def _rows_input_fn(seen, num_rows=64):
    """input_fn over rows [0, num_rows) with labels 10 * row; records params it received."""

    def input_fn(params):
        seen.append(dict(params))
        ds = tf.data.Dataset.range(num_rows).map(lambda r: (r, r * 10))
        return ds.batch(params["batch_size"], drop_remainder=True)

    return input_fn


def _per_replica_batches(strategy, dist_dataset, steps, make_iterator=iter):
    """[step][replica] -> (features ndarray, labels ndarray), iterated eagerly."""
    out = []
    iterator = make_iterator(dist_dataset)
    for _ in range(steps):
        features, labels = next(iterator)
        out.append([(f.numpy(), l.numpy()) for f, l in zip(
                strategy.experimental_local_results(features),
                strategy.experimental_local_results(labels))])
    return out


def _distribute(strategy, input_fn, pipeline, *, batch=16, use_tpu=True):
    plan = _plan(pipeline, batch=batch, replicas=strategy.num_replicas_in_sync,
                 use_tpu=use_tpu)
    return inputs.distribute(strategy, input_fn, params={"user": 1}, config=None,
                             mode=_TRAIN, plan=plan, use_tpu=use_tpu)


def _assert_consecutive_slices(batches, replicas, global_batch=16):
    per_replica = global_batch // replicas
    for step, per_step in enumerate(batches):
        assert len(per_step) == replicas
        for i, (features, labels) in enumerate(per_step):
            start = step * global_batch + i * per_replica
            expected = np.arange(start, start + per_replica)
            np.testing.assert_array_equal(features, expected)
            np.testing.assert_array_equal(labels, expected * 10)


def test_distribute_per_host_v1_slices_host_batch_across_replicas(strategy):
    seen = []
    replicas = strategy.num_replicas_in_sync
    dist = _distribute(strategy, _rows_input_fn(seen), InputPipelineConfig.PER_HOST_V1)
    _assert_consecutive_slices(_per_replica_batches(strategy, dist, steps=3), replicas)
    assert len(seen) == 1
    params = seen[0]
    assert params["batch_size"] == 16
    assert params["user"] == 1
    ctx = params["context"]
    assert isinstance(ctx, context_lib.TPUContext)
    assert (ctx.num_replicas, ctx.num_hosts, ctx.current_host, ctx.mode) == (
            replicas, 1, 0, _TRAIN)
    assert ctx.num_of_replicas_per_host == replicas
    # Legacy's 4-tuple: (host CPU, invocation index, invocations, replicas fed by it).
    assert ctx.current_input_fn_deployment() == (
            "/job:localhost/replica:0/task:0/device:CPU:0", 0, 1, replicas)
    assert isinstance(ctx.input_context, tf.distribute.InputContext)


@pytest.mark.parametrize("pipeline", [InputPipelineConfig.PER_HOST_V1,
                                      InputPipelineConfig.PER_HOST_V2,
                                      InputPipelineConfig.BROADCAST])
@pytest.mark.parametrize("repeat", [True, False])
def test_distribute_keeps_a_repeated_input_endless(strategy, pipeline, repeat):
    """rebatch/flat_map report UNKNOWN cardinality; the train loop's fast path needs INFINITE."""
    def input_fn(params):
        dataset = _rows_input_fn([])(params)
        return dataset.repeat() if repeat else dataset

    dist = _distribute(strategy, input_fn, pipeline)
    assert inputs.is_endless(dist) is repeat
    if repeat:
        _per_replica_batches(strategy, dist, steps=9)  # Past the 64 rows: it repeats.


def test_distribute_per_host_v2_input_fn_gets_per_replica_batch(strategy):
    seen = []
    replicas = strategy.num_replicas_in_sync
    dist = _distribute(strategy, _rows_input_fn(seen), InputPipelineConfig.PER_HOST_V2)
    _assert_consecutive_slices(_per_replica_batches(strategy, dist, steps=2), replicas)
    assert [p["batch_size"] for p in seen] == [16 // replicas]
    assert seen[0]["context"].num_replicas == replicas


def test_distribute_use_tpu_false_on_default_strategy_gets_global_batch():
    strategy = tf.distribute.get_strategy()
    seen = []
    dist = _distribute(strategy, _rows_input_fn(seen), InputPipelineConfig.PER_HOST_V1,
                       use_tpu=False)
    _assert_consecutive_slices(_per_replica_batches(strategy, dist, steps=2), 1)
    assert len(seen) == 1
    assert seen[0]["batch_size"] == 16
    assert "context" not in seen[0]
    assert seen[0]["user"] == 1


def test_distribute_broadcast_gives_every_replica_the_same_batch():
    strategy = make_strategy("mirrored8")
    seen = []
    dist = _distribute(strategy, _rows_input_fn(seen, num_rows=16 * 8),
                       InputPipelineConfig.BROADCAST)
    (per_step,) = _per_replica_batches(strategy, dist, steps=1)
    assert seen[0]["batch_size"] == 16
    for features, _ in per_step:
        np.testing.assert_array_equal(features, np.arange(16))


def test_distribute_tensor_tuple_repeats_on_every_replica(strategy):
    def input_fn(params):
        n = params["batch_size"]
        return tf.range(n, dtype=tf.int64), tf.range(n, dtype=tf.int64) * 10

    replicas = strategy.num_replicas_in_sync
    dist = _distribute(strategy, input_fn, InputPipelineConfig.PER_HOST_V2,
                       batch=2 * replicas)
    for per_step in _per_replica_batches(strategy, dist, steps=3):
        for features, labels in per_step:
            np.testing.assert_array_equal(features, [0, 1])
            np.testing.assert_array_equal(labels, [0, 10])


def test_distribute_input_fn_without_params_raises_legacy_message(strategy):
    def input_fn():
        return tf.data.Dataset.range(4)

    with pytest.raises(ValueError, match="does not include params argument"):
        _distribute(strategy, input_fn, InputPipelineConfig.PER_HOST_V1)


# iterate: an iterator over several devices is deleted without a stall

# Long enough for tf.data's autotune sleep (doubling from 10 ms while the iterator lives) to
# reach 2.56 s, which the deletion used to wait out on some of the 8 devices.
_ITERATOR_AGE_SECONDS = 4.0
_STEPS_PER_LOOP = 20


def _endless_rows_input_fn(params):
    ds = tf.data.Dataset.range(1024).map(lambda r: (r, r * 10))
    return ds.batch(params["batch_size"], drop_remainder=True).repeat()


def test_iterate_gives_every_replica_what_iter_gives(strategy):
    def batches(make_iterator):
        dataset = _distribute(strategy, _endless_rows_input_fn, InputPipelineConfig.PER_HOST_V1)
        return _per_replica_batches(strategy, dataset, 70, make_iterator)

    expected, actual = batches(iter), batches(inputs.iterate)
    assert len(actual) == len(expected) == 70
    for want, got in zip(expected, actual):
        for (want_f, want_l), (got_f, got_l) in zip(want, got):
            np.testing.assert_array_equal(got_f, want_f)
            np.testing.assert_array_equal(got_l, want_l)


def _string_rows_input_fn(params):
    ds = tf.data.Dataset.range(1120).map(lambda r: (tf.strings.as_string(r), r * 10))
    return ds.batch(params["batch_size"], drop_remainder=True)


@pytest.mark.slow_cases("mirrored8-endless_ints", "mirrored8-finite_strings")
@pytest.mark.parametrize("input_fn", [_endless_rows_input_fn, _string_rows_input_fn],
                         ids=["endless_ints", "finite_strings"])
def test_iterators_sharing_traced_device_pipelines_give_what_iter_gives(strategy, input_fn):
    """Issue 45: later iterators reuse the per-device functions the first one traced (none
    traced again), and every replica still gets what a plain `iter` gives it, to the end."""
    cache = device_iterators.DeviceGeneratorCache()
    devices = strategy.num_replicas_in_sync if strategy.num_replicas_in_sync > 1 else 0

    def batches(make_iterator):
        dataset = _distribute(strategy, input_fn, InputPipelineConfig.PER_HOST_V1)
        return _per_replica_batches(strategy, dataset, 70, make_iterator)

    expected = batches(iter)
    for attempt in range(3):
        actual = batches(lambda d: inputs.iterate(d, cache))
        assert cache.traces == devices, attempt
        assert len(actual) == len(expected)
        for want, got in zip(expected, actual):
            for (want_f, want_l), (got_f, got_l) in zip(want, got):
                np.testing.assert_array_equal(got_f, want_f)
                np.testing.assert_array_equal(got_l, want_l)


def test_deleting_an_eight_replica_iterator_takes_about_one_loop():
    """Deletion used to wait out tf.data autotune sleeps of up to 60 s, device after device.

    The stall grew with the iterator's age, so the iterator is used for a few seconds in a
    compiled loop first; its deletion is then compared with one loop measured in the same
    run (generous: twenty loops), not with a wall-clock constant.
    """
    strategy = make_strategy("mirrored8")
    dataset = _distribute(strategy, _endless_rows_input_fn, InputPipelineConfig.PER_HOST_V1,
                          batch=64)

    @tf.function
    def loop(iterator, n):
        total = tf.constant(0, tf.int64)
        for _ in tf.range(n):
            features, _ = next(iterator)
            per_replica = strategy.run(tf.reduce_sum, args=(features,))
            total += strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
        return total

    iterator = inputs.iterate(dataset)
    steps = tf.constant(_STEPS_PER_LOOP)
    loop(iterator, steps).numpy()  # Traces.
    loop_seconds = []
    start = time.perf_counter()
    while time.perf_counter() - start < _ITERATOR_AGE_SECONDS:
        began = time.perf_counter()
        loop(iterator, steps).numpy()
        loop_seconds.append(time.perf_counter() - began)
    alive = weakref.ref(iterator)
    began = time.perf_counter()
    del iterator
    teardown = time.perf_counter() - began
    one_loop = statistics.median(loop_seconds)
    print(f"iterator used {len(loop_seconds)} loops over {_ITERATOR_AGE_SECONDS} s; one loop "
          f"{one_loop * 1e3:.1f} ms; deletion {teardown * 1e3:.1f} ms")
    assert alive() is None, "the iterator outlived `del`: its teardown was not measured"
    assert teardown <= 20 * one_loop, (
        f"deleting the iterator took {teardown:.2f} s, {teardown / one_loop:.0f} loops of "
        f"{_STEPS_PER_LOOP} steps ({one_loop * 1e3:.1f} ms each)")


@pytest.mark.parametrize("chosen, expected", [(None, False), (True, True), (False, False)])
def test_autotune_is_off_on_devices_unless_input_fn_chose(chosen, expected):
    dataset = tf.data.Dataset.range(4)
    if chosen is not None:
        options = tf.data.Options()
        options.autotune.enabled = chosen
        dataset = dataset.with_options(options)
    result = inputs._without_default_autotune(dataset)  # pylint: disable=protected-access
    assert result.options().autotune.enabled is expected


# to_dataset / split_element / call_input_fn


def test_to_dataset_tuple_of_tensors_repeats():
    ds = call_lib.to_dataset((tf.constant([1, 2]), tf.constant([3, 4])), repeat_tensors=True)
    assert ds.cardinality().numpy() == tf.data.INFINITE_CARDINALITY
    got = [(f.numpy().tolist(), l.numpy().tolist()) for f, l in ds.take(3)]
    assert got == [([1, 2], [3, 4])] * 3


def test_to_dataset_python_sequences_are_one_tensor_each():
    """A TF1 graph took `{'age': ((1,), (1,))}` and labels `((10.,), (10.,))` as one [2, 1]
    tensor each (feature columns and heads converted them); namedtuples stay structures."""
    ds = call_lib.to_dataset(({"age": ((1,), (1,)), "n": 3}, [[10.0], [10.0]]),
                             repeat_tensors=False)
    features, labels = next(iter(ds))
    assert features["age"].shape == [2, 1] and features["age"].dtype == tf.int32
    assert features["n"].shape == [] and labels.shape == [2, 1]
    ragged = call_lib.to_dataset({"x": ((1,), (1, 2))}, repeat_tensors=False)
    assert isinstance(ragged.element_spec["x"], tuple)
    pair = call_lib.to_dataset({"x": (tf.constant([1]), tf.constant([2]))},
                               repeat_tensors=False)
    assert isinstance(pair.element_spec["x"], tuple)


def test_to_dataset_without_repeat_yields_once():
    ds = call_lib.to_dataset({"x": tf.constant([5])}, repeat_tensors=False)
    assert [e["x"].numpy().tolist() for e in ds] == [[5]]


def test_to_dataset_returns_dataset_unchanged():
    ds = tf.data.Dataset.range(3)
    assert call_lib.to_dataset(ds, repeat_tensors=True) is ds


def test_to_dataset_rejects_other_types():
    with pytest.raises(TypeError, match="input_fn must return a `tf.data.Dataset`"):
        call_lib.to_dataset(3, repeat_tensors=True)


def test_split_element_dict_features_only_gives_none_labels():
    ds = tf.data.Dataset.from_tensor_slices({"x": [1, 2], "y": [3, 4]}).batch(2)
    features, labels = call_lib.split_element(next(iter(ds)))
    assert labels is None
    assert sorted(features) == ["x", "y"]
    assert features["x"].numpy().tolist() == [1, 2]
    assert features["y"].numpy().tolist() == [3, 4]


def test_split_element_pair_and_single():
    assert call_lib.split_element(("f", "l")) == ("f", "l")
    assert call_lib.split_element(("f",)) == ("f", None)


def test_split_element_three_tuple_names_the_fix():
    with pytest.raises(ValueError) as e:
        call_lib.split_element((1, 2, 3))
    assert "tuple of 3 elements" in str(e.value)
    assert "Return `(features, labels)`." in str(e.value)


def test_call_input_fn_passes_config_and_mode():
    received = {}

    def input_fn(params, config, mode):
        received.update(params=params, config=config, mode=mode)
        return "result"

    config = {"model_dir": "/tmp/m"}
    plan = _plan(InputPipelineConfig.PER_HOST_V2, batch=16, replicas=8)
    result = call_lib.call_input_fn(input_fn, params={"a": 1}, config=config, mode="eval",
                                  plan=plan, input_context=None, use_tpu=False)
    assert result == "result"
    assert received["params"] == {"a": 1, "batch_size": 2}
    assert received["config"] == config
    assert received["config"] is not config  # a copy, as legacy passed
    assert received["mode"] == "eval"


def test_call_input_fn_does_not_mutate_caller_params():
    params = {"a": [1]}
    plan = _plan(InputPipelineConfig.PER_HOST_V1, batch=16, replicas=8)

    def input_fn(params):
        params["a"].append(2)
        return params

    got = call_lib.call_input_fn(input_fn, params=params, config=None, mode=_TRAIN, plan=plan,
                               input_context=None, use_tpu=True)
    assert params == {"a": [1]}
    assert got["batch_size"] == 16
    assert got["context"].current_host == 0


def test_call_input_fn_without_params_raises_legacy_message():
    plan = _plan(InputPipelineConfig.PER_HOST_V1)
    with pytest.raises(ValueError, match="does not include params argument, required by "
                                         "TPUEstimator"):
        call_lib.call_input_fn(lambda config: None, params={}, config=None, mode=_TRAIN,
                             plan=plan, input_context=None, use_tpu=True)


# ----------------------------------------------------------------------------------------
# Several hosts: each input_fn call knows its host; eval input that does not is sharded.


def _host_context(host, hosts=2):
    return tf.distribute.InputContext(num_input_pipelines=hosts, input_pipeline_id=host,
                                      num_replicas_in_sync=4)


@pytest.mark.parametrize("mode, pipeline, shards_itself, expected", [
    ("eval", InputPipelineConfig.PER_HOST_V1, False, [1, 3, 5, 7, 9]),
    ("infer", InputPipelineConfig.PER_HOST_V2, False, [1, 3, 5, 7, 9]),
    ("eval", InputPipelineConfig.PER_HOST_V1, True, list(range(10))),
    ("train", InputPipelineConfig.PER_HOST_V1, False, list(range(10))),
    ("eval", InputPipelineConfig.BROADCAST, False, list(range(10))),
])
def test_share_by_host(mode, pipeline, shards_itself, expected):
    """Eval/predict batches of an input_fn that ignores its host: host h takes h, h+H, ..."""
    plan = _plan(pipeline, batch=8, replicas=4, hosts=2)
    dataset = inputs._share_by_host(tf.data.Dataset.range(10), _host_context(1), mode=mode,
                                    plan=plan, shards_itself=shards_itself)
    assert list(dataset.as_numpy_iterator()) == expected


def test_one_host_is_never_sharded():
    plan = _plan(InputPipelineConfig.PER_HOST_V1, batch=8, replicas=4)
    dataset = inputs._share_by_host(tf.data.Dataset.range(4), _host_context(0, hosts=1),
                                    mode="eval", plan=plan, shards_itself=False)
    assert list(dataset.as_numpy_iterator()) == [0, 1, 2, 3]


@pytest.mark.parametrize("reads_host", [True, False])
def test_reading_the_host_is_noticed(reads_host):
    plan = _plan(InputPipelineConfig.PER_HOST_V1, batch=8, replicas=4, hosts=2)
    noticed = []

    def input_fn(params):
        ctx = params["context"]
        assert (params["batch_size"], ctx.num_hosts, ctx.num_replicas) == (4, 2, 4)
        if reads_host:
            assert ctx.current_input_fn_deployment() == ("/job:worker/task:1/device:CPU:0",
                                                         1, 2, 2)

    call_lib.call_input_fn(input_fn, params={}, config=None, mode=_TRAIN, plan=plan,
                         input_context=_host_context(1), use_tpu=True,
                         input_device="/job:worker/task:1/device:CPU:0",
                         on_host_read=lambda: noticed.append(True))
    assert bool(noticed) == reads_host


def test_input_fn_taking_config_may_shard_by_itself():
    noticed = []
    call_lib.call_input_fn(lambda params, config: None, params={}, config=None, mode=_TRAIN,
                         plan=_plan(InputPipelineConfig.PER_HOST_V1), input_context=None,
                         use_tpu=False, on_host_read=lambda: noticed.append(True))
    assert noticed


def test_broadcast_deployment_keeps_legacy_single_invocation():
    plan = _plan(InputPipelineConfig.BROADCAST, batch=8, replicas=4, hosts=2)
    ctx = context_lib.TPUContext(_host_context(1), plan, _TRAIN, input_device="/cpu:0")
    assert ctx.current_input_fn_deployment() == ("/cpu:0", 0, 1, 4)


# batch_axis: HWCN images (`transpose_input`) split along their batch axis.


def _hwcn_input_fn(num_rows=64):
    """Images of shape [2, 1, 1, N] (HWCN) whose values name their row; labels 10 * row."""

    def input_fn(params):
        ds = tf.data.Dataset.range(num_rows).map(
            lambda r: (tf.fill([2, 1, 1], tf.cast(r, tf.float32)), r * 10))
        ds = ds.batch(params["batch_size"], drop_remainder=False)
        return ds.map(lambda x, y: (tf.transpose(x, [1, 2, 3, 0]), y))

    return input_fn


def test_distribute_per_host_v1_splits_hwcn_features_along_batch_axis(strategy):
    replicas = strategy.num_replicas_in_sync
    plan = _plan(InputPipelineConfig.PER_HOST_V1, batch=16, replicas=replicas)
    dist = inputs.distribute(strategy, _hwcn_input_fn(), params={}, config=None, mode=_TRAIN,
                             plan=plan, use_tpu=True,
                             batch_axis=pad_lib.check_batch_axis((3, 0)))
    per_replica = 16 // replicas
    for step, per_step in enumerate(_per_replica_batches(strategy, dist, steps=2)):
        for i, (features, labels) in enumerate(per_step):
            rows = np.arange(step * 16 + i * per_replica, step * 16 + (i + 1) * per_replica)
            assert features.shape == (2, 1, 1, per_replica)
            np.testing.assert_array_equal(features[0, 0, 0], rows)
            np.testing.assert_array_equal(labels, rows * 10)


def test_distribute_pads_hwcn_eval_batches_along_batch_axis(strategy):
    """A partial last batch is padded along N (axis 3), masked, then split per replica."""
    replicas = strategy.num_replicas_in_sync
    plan = _plan(InputPipelineConfig.PER_HOST_V1, batch=16, replicas=replicas)
    dist = inputs.distribute(strategy, _hwcn_input_fn(num_rows=20), params={}, config=None,
                             mode="eval", plan=plan, use_tpu=True, repeat_tensors=False,
                             pad=True, batch_axis=pad_lib.check_batch_axis((3, 0)))
    seen_rows, seen_masks = [], []
    iterator = iter(dist)
    for _ in range(2):
        element = next(iterator)
        for features, labels, mask in zip(
                strategy.experimental_local_results(element["features"]),
                strategy.experimental_local_results(element["labels"]),
                strategy.experimental_local_results(element[pad_lib.MASK_KEY])):
            assert features.shape == (2, 1, 1, 16 // replicas)
            np.testing.assert_array_equal(features.numpy()[0, 0, 0] * 10, labels.numpy())
            seen_rows += list(labels.numpy()[mask.numpy()] // 10)
            seen_masks += list(mask.numpy())
    assert sorted(seen_rows) == list(range(20))  # Every example once.
    assert sum(seen_masks) == 20


@pytest.mark.parametrize("bad", [3, (3, -1), ("3", 0), (), (True, 0)])
def test_check_batch_axis_names_the_argument(bad):
    with pytest.raises(ValueError, match="`batch_axis` must be a tuple"):
        pad_lib.check_batch_axis(bad)


def test_batch_axis_with_wrong_tensor_count_says_how_many():
    axes = pad_lib.check_batch_axis((3, 0, 0))
    with pytest.raises(ValueError, match="has 3 entries .* yields 2 tensors"):
        axes.of((tf.zeros([1, 1, 1, 2]), tf.zeros([2])))


def test_pad_and_mask_leaves_flattened_image_batches_alone():
    """The double-transpose idiom: images flattened to one vector per batch, labels [batch]."""
    dataset = tf.data.Dataset.range(8).batch(4, drop_remainder=True).map(
        lambda r: (tf.reshape(tf.tile(tf.cast(r, tf.float32)[None, :], [3, 1]), [-1]), r))
    assert dataset.element_spec[0].shape == (12,)  # Statically longer than the batch.
    element = next(iter(pad_lib.pad_and_mask(dataset, 4)))
    assert element["features"].shape == (12,)
    np.testing.assert_array_equal(element["labels"].numpy(), [0, 1, 2, 3])
    assert element[pad_lib.MASK_KEY].numpy().all()


class _AttrConfig(dict):
    """tensorflow/tpu QANet's `utils.Config`: a dict read by attribute (`params.dataset.x`).

    Its `__getattr__` is `dict.__getitem__`, so a missing attribute is a KeyError.
    """
    __getattr__ = dict.__getitem__
    __setattr__ = dict.__setitem__

    def __deepcopy__(self, memo):
        return type(self)((copy.deepcopy(k, memo), copy.deepcopy(v, memo))
                          for k, v in self.items())


def _attr_params_input_fn(params):
    # Legacy handed input_fn the params' own type (a deep copy): attribute reads work.
    assert type(params) is _AttrConfig, type(params)
    batch = params.batch_size
    x = tf.ones([batch * 8, 2]) * params.data.scale
    return tf.data.Dataset.from_tensor_slices((x, tf.zeros([batch * 8], tf.int32))).repeat() \
        .batch(batch, drop_remainder=True)


def _attr_params_model_fn(features, labels, mode, params):
    from tpu_estimator_compat import TPUEstimatorSpec
    v1 = tf.compat.v1
    assert type(params) is _AttrConfig, type(params)
    w = v1.get_variable("w", [2, 1], initializer=v1.zeros_initializer())
    loss = tf.reduce_mean(tf.matmul(features, w)) + 0.0 * tf.cast(tf.reduce_sum(labels),
                                                                     tf.float32)
    opt = v1.train.GradientDescentOptimizer(params.opt.lr)
    if params.use_tpu:
        opt = v1.tpu.CrossShardOptimizer(opt)
    return TPUEstimatorSpec(mode, loss=loss,
                            train_op=opt.minimize(loss, global_step=v1.train.get_global_step()))


@pytest.mark.parametrize("use_tpu", [False, True])
def test_params_keep_their_dict_subclass_in_input_fn_and_model_fn(tmp_path, use_tpu):
    """QANet reads `params.dataset.train_batch_size`: legacy deep-copied params, type kept."""
    from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator
    params = _AttrConfig(opt=_AttrConfig(lr=0.5), data=_AttrConfig(scale=2.0))
    est = TPUEstimator(model_fn=_attr_params_model_fn, use_tpu=use_tpu, train_batch_size=8,
                       params=params,
                       config=RunConfig(model_dir=str(tmp_path),
                                        tpu_config=TPUConfig(iterations_per_loop=2)))
    assert type(est.params) is _AttrConfig and est.params is not params
    est.train(_attr_params_input_fn, max_steps=2)
    # Two SGD steps of lr 0.5 on mean(x @ w) with x = 2: each step moves w by -0.5 * 2.
    np.testing.assert_allclose(est.get_variable_value("w"), [[-2.0], [-2.0]])
    assert "batch_size" not in params and "use_tpu" not in params  # The caller's untouched.


def test_hparams_params_get_batch_size_through_their_own_api(tmp_path):
    """Legacy `_add_item_to_params`: HParams params got `batch_size` via add_hparam."""
    from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator
    from tpu_estimator_compat.contrib.hparams import HParams
    seen = []

    def input_fn(params):
        seen.append((type(params).__name__, params.batch_size, params.lr))
        return tf.data.Dataset.from_tensors(
            (tf.ones([params.batch_size, 2]), tf.zeros([params.batch_size], tf.int32))).repeat()

    def model_fn(features, labels, mode, params):
        from tpu_estimator_compat import TPUEstimatorSpec
        v1 = tf.compat.v1
        seen.append((type(params).__name__, params.batch_size, params.use_tpu))
        w = v1.get_variable("w", [2, 1], initializer=v1.zeros_initializer())
        loss = tf.reduce_mean(tf.matmul(features, w))
        train_op = v1.train.GradientDescentOptimizer(params.lr).minimize(
            loss, global_step=v1.train.get_global_step())
        return TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

    est = TPUEstimator(model_fn=model_fn, use_tpu=False, train_batch_size=4,
                       params=HParams(lr=0.25), config=RunConfig(model_dir=str(tmp_path)))
    est.train(input_fn, max_steps=1)
    assert ("HParams", 4, 0.25) in seen and ("HParams", 4, False) in seen
    with pytest.raises(ValueError, match="are reserved keys"):
        TPUEstimator(model_fn=model_fn, params=HParams(batch_size=3), train_batch_size=4,
                     config=RunConfig(model_dir=str(tmp_path)))


# input_fn returning iterator.get_next() tensors


def _label_sum_model_fn(features, labels, mode, params):
    v1 = tf.compat.v1
    total = v1.get_variable("label_sum", [], tf.int64, initializer=v1.zeros_initializer(),
                            trainable=False)
    x = features["x"] if isinstance(features, dict) else features
    loss = tf.reduce_mean(v1.layers.dense(x, 1))
    train_op = tf.group(
        v1.train.GradientDescentOptimizer(0.1).minimize(loss, v1.train.get_global_step()),
        v1.assign_add(total, tf.reduce_sum(labels)))
    return TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def _range_dataset(params):
    # Rows i = 0..99: features [i, i], label i; every batch has another label sum.
    return tf.data.Dataset.range(100).map(
        lambda i: (tf.fill([2], tf.cast(i, tf.float32)), i)).repeat().batch(
            params["batch_size"], drop_remainder=True)


_GET_NEXT_FORMS = {
    "tuple": lambda it: it.get_next(),
    "dict_features": lambda it: (lambda f, l: ({"x": f}, l))(*it.get_next()),
    "method_form": None,  # dataset.make_one_shot_iterator() on a v1 dataset.
    # tensorflow/tpu QANet: an initializable iterator whose initializer goes to a collection
    # legacy's Scaffold ran.
    "initializable": lambda it: it.get_next(),
    # tensorflow-estimator's extenders_test: a dict element whose label the input_fn pops.
    "dict_element_popped": lambda it: (lambda e: (e, e.pop("y")))(it.get_next()),
}


# On 8 replicas every form runs on the TPU path (input per host, split over the replicas);
# the CPU path's 8-replica cases are opt-in (`-m slow`).
@pytest.mark.eight_replicas(use_tpu=[True])
@pytest.mark.parametrize("form", sorted(_GET_NEXT_FORMS))
@pytest.mark.parametrize("use_tpu", [False, True])
def test_input_fn_returning_get_next_tensors_takes_a_new_batch_every_step(
        tmp_path, strategy, use_tpu, form):
    """TF1 `make_one_shot_iterator(dataset).get_next()` gave the next batch at every step.
    input_fn runs eagerly here, where get_next() gives the first batch's values: the shim
    trained on that one batch every step (label_sum 4 * 6 instead of 0 + 1 + ... + 15)."""
    def input_fn(params):
        dataset = _range_dataset(params)
        if form == "dict_element_popped":
            dataset = dataset.map(lambda x, y: {"x": x, "y": y})
        if form == "method_form":
            return tf.compat.v1.data.Dataset.range(100).map(
                lambda i: (tf.fill([2], tf.cast(i, tf.float32)), i)).repeat().batch(
                    params["batch_size"], drop_remainder=True).make_one_shot_iterator(
                        ).get_next()
        if form == "initializable":
            iterator = tf.compat.v1.data.make_initializable_iterator(dataset)
            tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.TABLE_INITIALIZERS,
                                           iterator.initializer)
            return iterator.get_next()
        return _GET_NEXT_FORMS[form](tf.compat.v1.data.make_one_shot_iterator(dataset))

    config = RunConfig(model_dir=str(tmp_path), train_distribute=strategy,
                       tpu_config=TPUConfig(iterations_per_loop=2))
    est = TPUEstimator(model_fn=_label_sum_model_fn, config=config, use_tpu=use_tpu,
                       train_batch_size=8)
    est.train(input_fn, max_steps=4)
    # label_sum is assigned in replica context: replica 0's share of each global batch of 8
    # (rows 8s .. 8s + 8/replicas) is what it adds up.
    rows = 8 // strategy.num_replicas_in_sync
    assert est.get_variable_value("label_sum") == sum(
        sum(range(8 * step, 8 * step + rows)) for step in range(4))


def test_input_fn_returning_computed_get_next_tensors_names_the_fix(tmp_path):
    def input_fn(params):
        features, labels = tf.compat.v1.data.make_one_shot_iterator(
            _range_dataset(params)).get_next()
        return features * 2.0, labels

    est = TPUEstimator(model_fn=_label_sum_model_fn, use_tpu=False, train_batch_size=8,
                       config=RunConfig(model_dir=str(tmp_path)))
    with pytest.raises(ValueError, match=r"computed from `iterator.get_next\(\)`.*Return the "
                                         r"dataset itself"):
        est.train(input_fn, max_steps=2)


# release_off_thread: an iterator is deleted on a thread of its own once its owners let go


def _finalized_on(obj):
    """A list that gets the name of the thread `obj` is deleted on."""
    threads = []
    weakref.finalize(obj, lambda: threads.append(threading.current_thread().name))
    return threads


def _wait_for(threads, seconds=30.0):
    deadline = time.monotonic() + seconds
    while not threads and time.monotonic() < deadline:
        time.sleep(0.01)
    return threads


def test_a_released_iterator_is_deleted_off_the_callers_thread_after_its_owner_lets_go():
    """tf.data's autotune thread can hold an iterator's deletion for seconds; released, the
    deletion waits until the caller's last reference is gone, then happens elsewhere."""
    iterator = iter(tf.data.Dataset.range(8).prefetch(tf.data.AUTOTUNE))
    next(iterator)
    threads = _finalized_on(iterator)
    inputs.release_off_thread(iterator)
    time.sleep(0.1)
    assert not threads  # Still ours: the release thread waits for us.
    del iterator
    assert _wait_for(threads) == ["iterator_release"]


@pytest.mark.parametrize("call", ["train", "evaluate", "predict"])
def test_estimator_calls_leave_their_iterators_to_the_release_thread(tmp_path, monkeypatch,
                                                                     call):
    made = []

    def recorded(dataset, *args):
        iterator = original(dataset, *args)
        made.append(_finalized_on(iterator))
        return iterator

    original = inputs.iterate
    monkeypatch.setattr(inputs, "iterate", recorded)
    estimator = TPUEstimator(
        model_fn=models.linear_full_model_fn, use_tpu=False, train_batch_size=16,
        eval_batch_size=16, predict_batch_size=16,
        config=RunConfig(model_dir=str(tmp_path), tpu_config=TPUConfig(iterations_per_loop=4)))
    estimator.train(models.digits_input_fn(n=64, flat=True), steps=8)
    if call == "evaluate":
        estimator.evaluate(models.digits_input_fn(n=64, flat=True, repeat=False))
    elif call == "predict":
        assert len(list(estimator.predict(
            models.digits_input_fn(n=64, flat=True, repeat=False)))) == 64
    assert made
    assert _wait_for(made[-1]) == ["iterator_release"]


def test_lists_of_arrays_stay_sequences_of_tensors():
    """A TF1 model_fn got input_fn's list of tensors as a list (Keras models with several
    inputs); tf.data would stack it, or fail on arrays of other shapes or dtypes."""
    from tpu_estimator_compat.inputs import call

    features = [np.zeros([4, 2], np.float32), np.array(["a", "b", "c", "d"])]
    labels = [np.ones([4, 1], np.float32), [[1, 2], [3, 4]]]
    element = next(iter(call.to_dataset((features, labels), repeat_tensors=False)))
    (x, names), (y, pairs) = element
    assert x.shape == (4, 2) and names.dtype == tf.string and y.shape == (4, 1)
    assert pairs.shape == (2, 2)  # Nested numbers are one tensor, as a TF op made them.


# Padded evaluation/prediction input on several CPU replicas: one host iterator, split in
# the step (issue 45), giving every replica what the strategy's own iterator gives it.


def _padded_input(strategy, input_fn, pipeline, *, split_on_host, batch=16, mode="eval"):
    plan = _plan(pipeline, batch=batch, replicas=strategy.num_replicas_in_sync)
    return inputs.distribute_input(strategy, input_fn, params={}, config=None, mode=mode,
                                   plan=plan, use_tpu=True, pad=True,
                                   split_on_host=split_on_host)


def _padded_batches(strategy, source, steps):
    """[step][replica] -> [every tensor of the element, flattened; the mask last], read in
    a tf.function as the inference loop reads them."""
    iterator = inputs.iterate(source.dataset)

    @tf.function(autograph=False)
    def read(iterator):
        optional = iterator.get_next_as_optional()
        return optional.has_value(), [strategy.experimental_local_results(leaf)
                                      for leaf in tf.nest.flatten(optional.get_value())]

    out = []
    for _ in range(steps):
        has_value, leaves = read(iterator)
        assert bool(has_value)
        out.append([[leaf[r].numpy() for leaf in leaves]
                    for r in range(strategy.num_replicas_in_sync)])
    return out


@pytest.mark.parametrize("pipeline", [InputPipelineConfig.PER_HOST_V1,
                                      InputPipelineConfig.PER_HOST_V2,
                                      InputPipelineConfig.BROADCAST])
def test_padded_input_split_on_host_gives_every_replica_the_strategys_batches(strategy,
                                                                            pipeline):
    """Issue 45: one host iterator split per replica in the step feeds each replica the
    rows the strategy's MultiDeviceIterator feeds it, padding and masks included, past the
    end of the real rows (84 rows: the last global batch of 16 is partial)."""
    calls = []

    def input_fn(params):
        calls.append(1)
        ds = tf.data.Dataset.range(84).map(lambda r: ({"x": r, "s": tf.strings.as_string(r)},
                                                      r * 10))
        return ds.batch(params["batch_size"])

    split = _padded_input(strategy, input_fn, pipeline, split_on_host=True)
    plain = _padded_input(strategy, input_fn, pipeline, split_on_host=False)
    assert len(calls) == 2  # input_fn called once per input.
    mirrored = strategy.num_replicas_in_sync > 1
    assert isinstance(split.dataset, inputs.HostSplitDataset) is mirrored
    assert not isinstance(plain.dataset, inputs.HostSplitDataset)
    assert split.replica_spec == plain.replica_spec
    steps = 8 if pipeline != InputPipelineConfig.BROADCAST else 2
    expected = _padded_batches(strategy, plain, steps)
    actual = _padded_batches(strategy, split, steps)
    real = 0
    for want, got in zip(expected, actual):
        for want_replica, got_replica in zip(want, got):
            assert len(got_replica) == len(want_replica) == 4  # x, s, labels, mask.
            for want_leaf, got_leaf in zip(want_replica, got_replica):
                np.testing.assert_array_equal(got_leaf, want_leaf)
            real += int(got_replica[-1].sum())
    if pipeline != InputPipelineConfig.BROADCAST:
        assert real == 84  # Every row once, then only padding.


def test_padded_input_of_unknown_shapes_takes_the_strategys_iterator():
    """Batches that cannot be stacked (a ragged axis) keep the strategy's own iterator,
    with input_fn still called once."""
    strategy = make_strategy("mirrored8")
    calls = []

    def input_fn(params):
        calls.append(1)
        ds = tf.data.Dataset.range(20).map(lambda r: tf.range(r % 3))
        return ds.padded_batch(params["batch_size"]).map(
            lambda x: (x, tf.reduce_sum(x, axis=1)))

    source = _padded_input(strategy, input_fn, InputPipelineConfig.PER_HOST_V2,
                           split_on_host=True)
    assert len(calls) == 1
    assert not isinstance(source.dataset, inputs.HostSplitDataset)
    features, _ = next(iter(source.dataset))["features"], None
    assert len(strategy.experimental_local_results(features)) == 8


def test_empty_padded_input_split_on_host_has_no_element():
    strategy = make_strategy("mirrored8")

    def input_fn(params):
        return tf.data.Dataset.range(0).map(lambda r: (r, r)).batch(params["batch_size"])

    source = _padded_input(strategy, input_fn, InputPipelineConfig.PER_HOST_V1,
                           split_on_host=True)
    assert isinstance(source.dataset, inputs.HostSplitDataset)
    iterator = inputs.iterate(source.dataset)
    assert not bool(iterator.get_next_as_optional().has_value())


def test_stack_parts_is_rebatch_then_batch():
    """PER_HOST_V1 split on the host reshapes each host batch; the replicas' batches are
    `rebatch`'s, stacked in replica order."""
    dataset = tf.data.Dataset.range(48).map(
        lambda r: {"x": tf.fill([3], r), "s": tf.strings.as_string(r), "m": r % 2 == 0})
    dataset = dataset.batch(8, drop_remainder=True)
    expected = list(dataset.rebatch(2).batch(4, drop_remainder=True).as_numpy_iterator())
    stacked = pad_lib.stack_parts(dataset, 4)
    assert stacked.element_spec["x"].shape == (4, 2, 3)
    actual = list(stacked.as_numpy_iterator())
    assert len(actual) == len(expected) == 6
    for want, got in zip(expected, actual):
        for key in want:
            np.testing.assert_array_equal(got[key], want[key])


# Training input of fixed shapes on several CPU replicas is split on the host too: the same
# batches per replica, and training ends at the same step when a round is partial.


def _train_input(strategy, input_fn, pipeline, *, split_on_host, batch=16):
    plan = _plan(pipeline, batch=batch, replicas=strategy.num_replicas_in_sync)
    return inputs.distribute_input(strategy, input_fn, params={}, config=None, mode=_TRAIN,
                                   plan=plan, use_tpu=True, split_on_host=split_on_host)


@pytest.mark.parametrize("pipeline", [InputPipelineConfig.PER_HOST_V1,
                                      InputPipelineConfig.PER_HOST_V2])
def test_train_input_split_on_host_gives_every_replica_the_strategys_batches(pipeline):
    """The full rounds carry the strategy iterator's batches, replica by replica; after
    them the split input has no element, where the strategy's iterator gives a round in
    which some replica got an empty dummy (the train loop runs no step for it)."""
    strategy = make_strategy("mirrored8")

    def input_fn(params):  # 19 per-replica batches (PER_HOST_V2): 2 rounds and 3 batches.
        rows = 19 * 2 if pipeline == InputPipelineConfig.PER_HOST_V2 else 3 * 16
        ds = tf.data.Dataset.range(rows).map(lambda r: ({"x": r, "y": tf.fill([2], r)}, -r))
        return ds.batch(params["batch_size"], drop_remainder=True)

    split = _train_input(strategy, input_fn, pipeline, split_on_host=True)
    plain = _train_input(strategy, input_fn, pipeline, split_on_host=False)
    assert isinstance(split.dataset, inputs.HostSplitDataset)
    assert not isinstance(plain.dataset, inputs.HostSplitDataset)
    assert split.replica_spec == plain.replica_spec and not split.endless
    rounds = 2 if pipeline == InputPipelineConfig.PER_HOST_V2 else 3
    expected = _padded_batches(strategy, plain, rounds)
    actual = _padded_batches(strategy, split, rounds)
    for want, got in zip(expected, actual):
        for want_replica, got_replica in zip(want, got):
            assert len(got_replica) == len(want_replica) == 3  # x, y, labels.
            for want_leaf, got_leaf in zip(want_replica, got_replica):
                np.testing.assert_array_equal(got_leaf, want_leaf)
    split_iter, plain_iter = inputs.iterate(split.dataset), inputs.iterate(plain.dataset)
    for _ in range(rounds):
        split_iter.get_next(), plain_iter.get_next()
    assert not bool(split_iter.get_next_as_optional().has_value())
    if pipeline == InputPipelineConfig.PER_HOST_V2:  # 3 of 8 replicas fed, 5 dummies.
        optional = plain_iter.get_next_as_optional()
        assert bool(optional.has_value())
        sizes = [int(tf.size(x)) for x in
                 strategy.experimental_local_results(optional.get_value()[0]["x"])]
        assert sizes == [2, 2, 2, 0, 0, 0, 0, 0]


def test_training_stops_before_a_partial_round_split_on_host_or_not(tmp_path, monkeypatch):
    """TPUEstimator on 8 CPU replicas, PER_HOST_V2, finite input of 29 per-replica batches
    (3 rounds and 5 batches), split on the host as by default and through the strategy's
    own iterator: training stops at global step 3 with the variables of the strategy's own
    iterator over the 3 full rounds (24 batches), bit for bit; the 5 batches of the partial
    round train nothing."""
    strategy = make_strategy("mirrored8")
    sources = []
    distribute_input = inputs.distribute_input

    def spy(*args, **kwargs):
        sources.append(distribute_input(*args, **kwargs))
        return sources[-1]

    monkeypatch.setattr(inputs, "distribute_input", spy)

    def train(model_dir, batches):
        def input_fn(params):
            return models.digits_input_fn(batches * params["batch_size"], repeat=False,
                                          flat=True)(params)

        config = RunConfig(model_dir=str(model_dir), train_distribute=strategy,
                           tf_random_seed=1, tpu_config=TPUConfig(
                               iterations_per_loop=2,
                               per_host_input_for_training=InputPipelineConfig.PER_HOST_V2))
        est = TPUEstimator(model_fn=models.linear_model_fn, config=config, use_tpu=True,
                           train_batch_size=32, params={"cross_shard": True})
        est.train(input_fn, steps=10)
        reader = tf.train.load_checkpoint(est.latest_checkpoint())
        return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}

    split = train(tmp_path / "split", 29)
    monkeypatch.setattr(inputs, "_splits_on_host", lambda strategy: False)
    plain = train(tmp_path / "plain", 24)
    assert [type(s.dataset) is inputs.HostSplitDataset for s in sources] == [True, False]
    assert split["global_step"] == plain["global_step"] == 3
    assert sorted(split) == sorted(plain)
    for name in split:
        np.testing.assert_array_equal(split[name], plain[name], err_msg=name)
    # The strategy's own iterator (GPUs, several workers) over the same 29 batches: its last
    # round hands 3 replicas empty dummies, and no step runs on them (before, the step's
    # gradients met a dummy: "Incompatible shapes: [4,1] vs. [0,10]").
    partial = train(tmp_path / "partial", 29)
    assert not isinstance(sources[-1].dataset, inputs.HostSplitDataset)
    assert sorted(partial) == sorted(plain)
    for name in partial:
        np.testing.assert_array_equal(partial[name], plain[name], err_msg=name)
