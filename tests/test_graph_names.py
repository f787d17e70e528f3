"""graph_names: a TF1 graph's taken names, carried into another graph."""

import tensorflow as tf

from tpu_estimator_compat import graph_names

v1 = tf.compat.v1


def _graph_sequence(names):
    graph = tf.Graph()
    return [graph.unique_name(name) for name in names]


SEQUENCE = ["loss", "loss", "Loss", "loss_1", "loss_3", "loss", "loss", "a/b", "a", "a/b"]


def test_unique_gives_the_names_a_tf1_graph_gives():
    table = graph_names.NameTable()
    assert [table.unique(name) for name in SEQUENCE] == _graph_sequence(SEQUENCE)


def test_recorded_names_marked_in_another_graph_continue_its_sequence():
    first, second = tf.Graph(), tf.Graph()
    with first.as_default():
        tf.constant(0.0, name="before")
        with graph_names.recording(first) as names:
            tf.identity(tf.constant(1.0, name="learning_rate"), name="Learning_Rate")
            with tf.name_scope("stats"):
                tf.constant(2.0)
    assert names.table == graph_names.NameTable(
        {"learning_rate": 2, "learning_rate_1": 1, "stats": 1, "stats/const": 1})
    graph_names.mark(second, names.table)
    graph_names.mark(second, names.table)  # Marking twice is marking once.
    with second.as_default():
        assert tf.constant(0.0, name="learning_rate").op.name == "learning_rate_2"
        assert tf.constant(0.0, name="stats").op.name == "stats_1"
        assert tf.constant(0.0, name="before").op.name == "before"
    graph_names.mark(second, graph_names.NameTable({"w": 1}), "replica_1/")
    assert second.unique_name("replica_1/w", mark_as_used=False) == "replica_1/w_1"


def test_tables_add_up_as_one_graph_took_them():
    first = graph_names.NameTable({"loss": 1})
    both = first + graph_names.NameTable({"loss": 1, "loss_1": 1})
    assert both.counts == {"loss": 2, "loss_1": 1}
    assert both.unique("loss") == "loss_2"
    assert first.only(["LOSS"]) == first and first.only(["w"]) == graph_names.NameTable()


def test_names_taken_by_builds_fn_in_a_scratch_graph_after_the_given_names():
    def metric_fn(labels, predictions):
        return {"accuracy": v1.metrics.accuracy(labels, predictions)}

    structure = [tf.TensorSpec([8], tf.int64), tf.TensorSpec([8], tf.int64)]
    taken = graph_names.names_taken_by(metric_fn, structure,
                                       graph_names.NameTable({"accuracy": 1}))
    # The metric's scope was `accuracy_1`: the graph counted `accuracy` once more.
    assert (taken.counts["accuracy"], taken.counts["accuracy_1"]) == (1, 1)
    assert not tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.LOCAL_VARIABLES)

    def fails(x):
        raise ValueError("eager only")

    assert graph_names.names_taken_by(fails, structure[:1], graph_names.NameTable()) == (
        graph_names.NameTable())
