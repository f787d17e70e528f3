"""events_file: events files written from Python, read back with TensorFlow's own readers."""

import glob
import os
import threading

import pytest
import tensorflow as tf
from google.protobuf.internal import encoder

from tpu_estimator_compat.summary import events_file

v1 = tf.compat.v1


def _summary(tag, value):
    return v1.Summary(value=[v1.Summary.Value(tag=tag, simple_value=value)]).SerializeToString()


def _read(path):
    return list(v1.train.summary_iterator(path))


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 0x3FFF, 0x4000, 0x1FFFFF, 0x200000,
                                   2**31, 2**62 + 12345, 2**63 - 1, -1, -2**63])
def test_varint_is_protobufs(value):
    assert events_file.varint(value) == encoder._VarintBytes(value & 0xFFFFFFFFFFFFFFFF)  # pylint: disable=protected-access


def test_events_read_back_as_tensorflow_wrote_them(tmp_path):
    events = events_file.EventsFile(str(tmp_path))
    long_summary = v1.Summary(value=[v1.Summary.Value(tag=f"t{i}", simple_value=i)
                                     for i in range(40)]).SerializeToString()
    assert len(long_summary) > 127  # A length of two varint bytes.
    events.write([(1.5, 0, _summary("loss", 0.25)), (2.5, 3_000_000_000, long_summary),
                  (3.5, -7, _summary("neg", -1.0))])
    events.close()
    [path] = glob.glob(os.path.join(str(tmp_path), "events.out.tfevents.*"))
    assert path == events.path
    header, *read = _read(path)
    assert header.file_version == "brain.Event:2"
    assert [(e.wall_time, e.step) for e in read] == [(1.5, 0), (2.5, 3_000_000_000), (3.5, -7)]
    assert read[0].summary.value[0].tag == "loss"
    assert read[0].summary.value[0].simple_value == 0.25
    assert read[1].summary.SerializeToString() == long_summary
    assert read[2].summary.value[0].simple_value == -1.0
    # The CRCs are right: TensorFlow's record reader checks them.
    assert len(list(tf.data.TFRecordDataset(path))) == 4


def test_flush_makes_events_readable_before_close(tmp_path):
    events = events_file.EventsFile(str(tmp_path))
    events.write([(1.0, 1, _summary("a", 1.0))])
    events.flush()
    assert [e.step for e in _read(events.path)[1:]] == [1]
    events.close()
    with pytest.raises(ValueError, match="closed.*events_file.cached"):
        events.write([(1.0, 2, _summary("a", 2.0))])


def test_one_file_per_directory_until_the_directory_goes(tmp_path):
    directory = str(tmp_path / "model")
    first = events_file.cached(directory)
    assert events_file.cached(directory) is first
    assert events_file.cached(str(tmp_path / "other")) is not first
    first.write([(1.0, 1, _summary("a", 1.0))])
    first.flush()
    tf.io.gfile.rmtree(directory)  # A user starting over in the same model_dir.
    second = events_file.cached(directory)
    assert second is not first and os.path.exists(second.path)
    second.close()
    assert events_file.cached(directory) is not second  # A closed file is not handed out.


def test_two_files_opened_in_one_second_are_distinct(tmp_path):
    paths = {events_file.EventsFile(str(tmp_path)).path for _ in range(3)}
    assert len(paths) == 3


def test_writers_on_several_threads_leave_whole_records(tmp_path):
    events = events_file.EventsFile(str(tmp_path))

    def write(tag):
        for step in range(200):
            events.write([(float(step), step, _summary(tag, float(step)))])

    threads = [threading.Thread(target=write, args=(f"t{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    events.close()
    read = _read(events.path)[1:]
    for i in range(4):
        assert [e.step for e in read if e.summary.value[0].tag == f"t{i}"] == list(range(200))
