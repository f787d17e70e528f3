"""Tests for tpu_estimator_compat._tf.dataset_maps: maps traced once per element spec."""
import numpy as np
import tensorflow as tf

from tpu_estimator_compat._tf import dataset_maps


def _pipeline(rows):
    return tf.data.Dataset.range(rows).map(lambda r: {"x": tf.fill([2], r), "y": r}).batch(3)


def test_a_kept_map_traces_once_per_spec_and_maps_like_dataset_map():
    made = []

    def make():
        made.append(1)
        return lambda element: {"sum": element["x"] + tf.expand_dims(element["y"], 1)}

    for rows in (7, 9):  # Two pipelines, the same element spec: one trace.
        dataset = _pipeline(rows)
        got = list(dataset_maps.kept_map(dataset, make, ("sum",)).as_numpy_iterator())
        want = list(dataset.map(make()).as_numpy_iterator())
        made.pop()  # The reference map's own make().
        assert len(got) == len(want) == -(-rows // 3)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a["sum"], b["sum"])
    assert len(made) == 1
    other = _pipeline(6).map(lambda e: {"x": tf.concat([e["x"], e["x"]], 1), "y": e["y"]})
    dataset_maps.kept_map(other, make, ("sum",))  # Another shape: traced for it.
    assert len(made) == 2


def test_a_kept_map_in_a_graph_is_the_graphs_own_map():
    with tf.Graph().as_default():
        dataset = dataset_maps.kept_map(_pipeline(4), lambda: lambda e: e["y"] * 2, ("y2",))
        value = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
        with tf.compat.v1.Session() as session:
            np.testing.assert_array_equal(session.run(value), [0, 2, 4])
