"""Tests for tpu_estimator_compat.contrib.v1_file_writer: a v1 FileWriter with eager execution on.

Events are read back with TensorFlow's own readers (`summary_iterator`, and
`TFRecordDataset` + `Event.FromString`). The launcher-level run of a TF1 script is in
tests/test_run.py (`test_tf1_script_writes_summary_protos_with_a_top_level_file_writer`).
"""
import contextlib
import glob
import os

import pytest
import tensorflow as tf

from tpu_estimator_compat import RunConfig, TPUEstimator, TPUEstimatorSpec
from tpu_estimator_compat._tf import patches as _tf_patches
from tpu_estimator_compat.contrib import v1_file_writer

v1 = tf.compat.v1
PATCHES = ("v1_file_writer.init", "v1_file_writer.add_summary")


@pytest.fixture(autouse=True)
def installed():
    v1_file_writer.install()
    assert tf.executing_eagerly()


@contextlib.contextmanager
def _uninstalled():
    """Inside: TensorFlow's own FileWriter; after: the patches are in place again."""
    _tf_patches.uninstall("v1_file_writer")
    try:
        yield
    finally:
        v1_file_writer.install()


def _events(logdir):
    [path] = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    return list(v1.train.summary_iterator(path))


def _scalars(logdir):
    return [(e.step, v.tag, v.simple_value) for e in _events(logdir) for v in e.summary.value]


def _summary(**values):
    return v1.Summary(value=[v1.Summary.Value(tag=k, simple_value=v) for k, v in values.items()])


@pytest.mark.parametrize("make", [v1.summary.FileWriter, v1.summary.FileWriterCache.get],
                         ids=["FileWriter", "FileWriterCache.get"])
def test_eager_writer_writes_protos_bytes_and_events_tensorflow_reads_back(tmp_path, make):
    logdir = str(tmp_path)
    writer = make(logdir)
    assert writer.get_logdir() == logdir
    writer.add_summary(_summary(AP=0.25, AR=0.5), global_step=3)
    writer.add_summary(_summary(AP=0.75).SerializeToString(), 7)
    writer.add_event(v1.Event(step=9, summary=_summary(loss=1.5)))
    writer.flush()
    writer.close()
    if make is v1.summary.FileWriterCache.get:
        v1.summary.FileWriterCache.clear()
    assert _scalars(logdir) == [(3, "AP", 0.25), (3, "AR", 0.5), (7, "AP", 0.75),
                                (9, "loss", 1.5)]
    # The same file through tf.data: every record is an Event.
    [path] = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    records = [v1.Event.FromString(r.numpy()) for r in tf.data.TFRecordDataset(path)]
    assert records[0].file_version.startswith("brain.Event:")
    assert [(e.step, [v.tag for v in e.summary.value]) for e in records
            if e.HasField("summary")] == [(3, ["AP", "AR"]), (7, ["AP"]), (9, ["loss"])]


def test_graphs_meta_graphs_and_run_metadata_are_written_with_eager_on(tmp_path):
    graph = tf.Graph()
    with graph.as_default():
        tf.constant(1.0, name="one")
        meta_graph = v1.train.export_meta_graph()
    with v1.summary.FileWriter(str(tmp_path), graph=graph) as writer:
        writer.add_graph(graph, global_step=1)
        writer.add_meta_graph(meta_graph, global_step=2)
        writer.add_run_metadata(v1.RunMetadata(), "step_2", global_step=2)
    events = _events(str(tmp_path))
    graph_defs = [tf.compat.v1.GraphDef.FromString(e.graph_def) for e in events if e.graph_def]
    assert len(graph_defs) == 2  # The constructor's and add_graph's.
    assert all("one" in [n.name for n in g.node] for g in graph_defs)
    # The constructor's graph comes with its meta graph (step 0), as in TF1.
    assert [e.step for e in events if e.meta_graph_def] == [0, 2]
    assert [e.tagged_run_metadata.tag for e in events
            if e.HasField("tagged_run_metadata")] == ["step_2"]


def test_a_summary_tensor_with_eager_on_names_the_argument_and_the_fix(tmp_path):
    with v1.summary.FileWriter(str(tmp_path)) as writer:
        with pytest.raises(TypeError, match=r"`summary` of FileWriter\.add_summary must be a "
                                            r"`tf\.compat\.v1\.Summary`.*got a tensor.*"
                                            r"\.numpy\(\)"):
            writer.add_summary(v1.summary.scalar("x", 1.0), 1)


def test_with_a_graph_as_default_tensorflow_behaviour_is_unchanged(tmp_path):
    with tf.Graph().as_default() as graph:
        writer = v1.summary.FileWriter(str(tmp_path), graph=graph)
        summary_op = v1.summary.scalar("x", tf.constant(1.0))
        with pytest.raises(AttributeError, match="value"):  # TensorFlow's own failure.
            writer.add_summary(summary_op, 1)
        with v1.Session() as sess:
            writer.add_summary(sess.run(summary_op), 4)
        writer.close()
    assert _scalars(str(tmp_path)) == [(4, "x", 1.0)]


def test_a_session_writer_keeps_tensorflows_eager_error(tmp_path):
    with pytest.raises(RuntimeError, match="not compatible with eager execution"):
        v1.summary.FileWriter(str(tmp_path), session=object())


def test_without_the_patch_tensorflow_refuses_and_uninstall_restores_the_class(tmp_path):
    cls = v1.summary.FileWriter
    original = _tf_patches.original("v1_file_writer.init")
    assert vars(cls)["__init__"] is not original
    with _uninstalled():
        assert "add_summary" not in vars(cls)  # Inherited again from TensorFlow's base.
        assert vars(cls)["__init__"] is original
        with pytest.raises(RuntimeError, match="not compatible with eager execution"):
            cls(str(tmp_path))
    assert vars(cls)["__init__"] is not original
    assert vars(cls)["__init__"].__wrapped__ is original


def test_constructing_an_estimator_installs_it(tmp_path):
    def model_fn(features, labels, mode, params):
        del features, labels, mode, params
        return TPUEstimatorSpec(mode=tf.estimator.ModeKeys.PREDICT,
                                predictions={"x": tf.constant([1.0])})

    with _uninstalled():
        TPUEstimator(model_fn=model_fn, config=RunConfig(model_dir=str(tmp_path / "model")),
                     use_tpu=False, train_batch_size=2)
        assert set(PATCHES) <= set(_tf_patches.installed())
        v1.summary.FileWriter(str(tmp_path / "events")).close()
