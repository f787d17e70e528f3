"""Summary tags legacy's one TF1 graph uniquified, carried across the shim's separate graphs.

The recorded legacy runs (tests/legacy_recorder/summary_names.py -> tests/goldens/
summary_names/legacy.json) are replayed on the shim: the same r1 script, whose model_fn
names an op `learning_rate` (Inception v2), a root variable, a name scope and v1 summaries,
and whose host_call writes `tf.contrib.summary`, `tf.compat.v2.summary` and
`tf.compat.v1.summary` summaries under those names. Event files are read back with
TensorFlow's summary iterator.
"""

import pytest
import tensorflow as tf

from tpu_estimator_compat.v1_state import graph_names

v1 = tf.compat.v1


@pytest.fixture
def recorder():
    from conftest import legacy_recorder

    return legacy_recorder("summary_names")


@pytest.fixture(params=["control_flow_v2", "control_flow_v1"])
def control_flow(request):
    """TF 2's default control flow, or v1's (what `disable_v2_behavior()` switches to)."""
    if request.param == "control_flow_v1":
        v1.disable_control_flow_v2()
    try:
        yield request.param
    finally:
        v1.enable_control_flow_v2()


@pytest.mark.eight_replicas(mode=["train"])
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_cpu_path_tags_equal_legacy(tmp_path, strategy, recorder, mode):
    """use_tpu=False: host_call built in model_fn's graph (`learning_rate_2` after model_fn's
    op and v1 summary), model_fn's v1 summaries after the global step's and the variables'
    names (`global_step_1`, `w_1`), eval's host_call after metric_fn (`accuracy_1`)."""
    module, golden = recorder
    found = module.run(str(tmp_path), mode, use_tpu=False, distribute=strategy)
    assert found == golden["cpu"][mode]


@pytest.mark.eight_replicas(control_flow=["control_flow_v2"])
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_tpu_path_tags_equal_legacy_graph(tmp_path, strategy, recorder, control_flow, mode):
    """use_tpu=True: host_call built in the outer graph, which held model_fn's names only
    under v1 control flow (`stats_1/norm` there, `stats/norm` with TF 2's), the variables'
    and the global step's always; legacy's loss summaries after it (`loss_1`, `loss_2`)."""
    module, golden = recorder
    found = module.run(str(tmp_path), mode, use_tpu=True, distribute=strategy)
    written = [tag for tag in found["."] if tag not in module.HOOK_TAGS]
    assert written == golden["tpu_graph"][control_flow][mode]


def test_tpu_loss_summary_after_a_model_fn_loss_scope(tmp_path, recorder, control_flow):
    """BERT's `tf.variable_scope('loss')` renamed legacy's TPU loss summary only where
    model_fn's names were in the outer graph (v1 control flow: `loss_1`, then Estimator's
    own `loss_2`)."""
    module, golden = recorder
    found = module.run(str(tmp_path), "train", use_tpu=True, variant="loss_scope")
    written = [tag for tag in found["."] if tag not in module.HOOK_TAGS]
    assert written == golden["tpu_graph_loss_scope"][control_flow]


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


def test_host_call_runner_names_its_summaries_after_the_taken_names(tmp_path):
    """The traced fn's tags continue the given table; the runner's own arguments take no
    name a host_call could use (`step`, `flat`)."""
    from tpu_estimator_compat.contrib import summary as contrib_summary
    from tpu_estimator_compat.summary import summaries

    summary = contrib_summary.members()

    def host_call_fn(gs, lr):
        with summary["create_file_writer"](str(tmp_path)).as_default():
            with summary["always_record_summaries"]():
                for name in ("learning_rate", "step", "flat", "fresh"):
                    summary["scalar"](name, lr[0], step=gs[0])
                return summary["all_summary_ops"]()

    taken = graph_names.NameTable({"learning_rate": 1, "global_step": 1})
    runner = summaries.HostCallRunner(
        host_call_fn, [tf.TensorSpec([1], tf.int64), tf.TensorSpec([1], tf.float32)],
        str(tmp_path), taken)
    runner.run([tf.constant([0], tf.int64), tf.constant([0.5])], global_step=0)
    runner.close()
    import test_summaries

    assert sorted(tag for _, tag, _ in test_summaries.events(str(tmp_path))) == [
        "flat", "fresh", "learning_rate_1", "step"]
    assert runner.names_taken().counts["learning_rate"] == 1  # Once more after `taken`.
