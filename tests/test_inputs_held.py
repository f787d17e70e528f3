"""input_fn's Python values reach model_fn as they are (`inputs.call.HeldValues`).

Legacy Estimator handed model_fn what input_fn returned, unchanged: a feature
`{'x': [[1], [1]]}` as that very list, `dict(), None` as an empty dict and None. On several
replicas (legacy took only datasets or tensors there) the values are tensors, fed like the
others. Every estimator test here trains, evaluates and predicts for
real.
"""

import itertools

import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator_compat
from tpu_estimator_compat.api.estimator import Estimator
from tpu_estimator_compat.inputs import call as call_lib

tpu_estimator_compat.install_aliases()
v1 = tf.compat.v1


def test_python_entries_are_held_and_merged_back_in_input_fn_order():
    ages = [[1], [2]]
    features = {"age": ages, "x": tf.constant([[1.0], [2.0]]), "n": 3}
    labels = ((10.0,), (20.0,))
    carried, held = call_lib.hold_python_values((features, labels))
    assert list(carried[0]) == ["x"] and carried[1] is None and not held.everything
    merged_features, merged_labels = held.merge(carried[0], carried[1])
    assert list(merged_features) == ["age", "x", "n"]
    assert merged_features["age"] is ages and merged_features["n"] == 3
    assert merged_features["x"] is carried[0]["x"] and merged_labels is labels


def test_input_without_python_values_is_not_held():
    result = ({"x": tf.constant([1.0]), "a": np.zeros([1])}, tf.constant([1]))
    assert call_lib.hold_python_values(result) == (result, None)
    assert call_lib.hold_python_values(({"x": tf.constant([1.0])}, None))[1] is None


@pytest.mark.parametrize("result", [(dict(), None), {}, ({"x": [1, 2]}, [3]), 4])
def test_input_of_python_values_only_gives_a_placeholder_per_step(result):
    held = []
    dataset = call_lib.to_dataset(result, repeat_tensors=True, held=held)
    assert held[0].everything
    assert dataset.cardinality().numpy() == tf.data.INFINITE_CARDINALITY
    placeholder = next(iter(dataset))
    expected = tuple(result) if isinstance(result, tuple) else (result, None)
    assert held[0].merge(*call_lib.split_element(placeholder)) == expected


def test_without_a_sink_python_values_still_become_tensors():
    ds = call_lib.to_dataset(({"age": ((1,), (1,))}, [[10.0], [10.0]]), repeat_tensors=False)
    features, labels = next(iter(ds))
    assert features["age"].shape == [2, 1] and labels.shape == [2, 1]


def _recording_model_fn(seen):
    def model_fn(features, labels, mode):
        seen[mode] = (features, labels)
        weight = v1.get_variable("w", [], initializer=v1.ones_initializer())
        loss = weight * tf.reduce_mean(tf.cast(features["x"], tf.float32))
        return tf.estimator.EstimatorSpec(
            mode, loss=loss, predictions={"y": tf.cast(features["x"], tf.float32) * weight},
            train_op=v1.assign_add(v1.train.get_global_step(), 1))
    return model_fn


def test_model_fn_gets_input_fns_python_lists_themselves(tmp_path):
    ages, labels = [[1], [2]], {"y": [[1], [0]]}

    def input_fn():
        return {"age": ages, "x": tf.constant([[1.0], [2.0]])}, labels

    seen = {}
    estimator = Estimator(_recording_model_fn(seen), model_dir=str(tmp_path))
    estimator.train(input_fn, steps=2)
    assert estimator.get_variable_value("global_step") == 2
    metrics = estimator.evaluate(input_fn, steps=1)
    assert metrics["loss"] == pytest.approx(1.5)
    # Not a dataset: predict yields forever, as legacy's did (and warned).
    rows = list(itertools.islice(estimator.predict(input_fn), 4))
    assert [r["y"].tolist() for r in rows] == [[1.0], [2.0]] * 2
    for mode in ("train", "eval", "infer"):
        features, got_labels = seen[mode]
        assert features["age"] is ages and tf.is_tensor(features["x"])
        # Legacy's predict gave model_fn input_fn's features alone.
        assert got_labels is (None if mode == "infer" else labels)


def test_model_fn_gets_dict_and_none_from_an_input_fn_of_no_tensors(tmp_path):
    seen = []

    def model_fn(features, labels, mode):
        seen.append((features, labels))
        step = v1.train.get_global_step()
        return tf.estimator.EstimatorSpec(mode, loss=tf.constant(1.0),
                                          train_op=v1.assign_add(step, 1))

    estimator = Estimator(model_fn, model_dir=str(tmp_path))
    estimator.train(lambda: (dict(), None), steps=3)
    assert estimator.get_variable_value("global_step") == 3
    assert seen and all(s == ({}, None) for s in seen)


def test_on_several_replicas_python_values_are_tensors(tmp_path, strategy):
    """Legacy's distributed Estimator took only datasets; here a replica of a plain Estimator
    takes each element of its input whole, so a held-out list cannot come with its tensors."""
    seen = {}

    def input_fn():
        return {"x": [[1.0], [2.0], [3.0], [4.0], [5.0], [6.0], [7.0], [8.0]]}, None

    config = tf.estimator.RunConfig(train_distribute=strategy)
    estimator = Estimator(_recording_model_fn(seen), model_dir=str(tmp_path), config=config)
    estimator.train(input_fn, steps=1)
    features, _ = seen["train"]
    replicas = strategy.num_replicas_in_sync
    if replicas == 1:
        assert isinstance(features["x"], list)
    else:
        assert tf.is_tensor(features["x"]) and features["x"].shape == [8, 1]
