"""Events files written from Python, as legacy's `FileWriterCache` kept one per directory.

Legacy Estimator wrote its own training and eval summaries (the loss, `global_step/sec`,
`examples/sec`, evaluate()'s metrics) as `Summary` protos through a v1 `FileWriter`: one
events file per directory per process, each event stamped with the step and the time it was
added. The shim decides those events on the host after each loop, already serialized, so a
summary op has nothing to compute: going through a `tf.summary` writer cost a
`WriteRawProtoSummary` op per event plus a function call per batch, ~1.1 ms for the ~200
events of a 100-step loop with `use_tpu=False` (legacy's step rates fire every step there),
about 5% of an overhead-bound MLP's loop on top of the GIL it held. Here an event is framed
in Python and handed to `tf.io.TFRecordWriter` (an events file is a TFRecord file of `Event`
protos; the writer adds the length and CRC32C framing in C++): ~1.5 us an event.

Writers a model_fn or host_call creates (`tf.summary.create_file_writer`) keep their own
files, as they did in legacy, where they too were separate from the FileWriter's.
This module knows nothing of estimators, loops or legacy's schedules.
"""

from __future__ import annotations

import atexit
import itertools
import os
import socket
import struct
import threading
import time
from typing import Iterable

import tensorflow as tf

_DOUBLE = struct.Struct("<d")
_FILE_VERSION = b"brain.Event:2"  # What every TensorFlow events file starts with.
_SERIAL = itertools.count()


def varint(value: int) -> bytes:
    """Protobuf's base-128 varint of a uint64 (a negative int64 as its two's complement)."""
    if 0 <= value < 0x200000:  # Lengths and most steps: ~3x faster than the loop below.
        if value < 0x80:
            return bytes((value,))
        if value < 0x4000:
            return bytes((value & 0x7F | 0x80, value >> 7))
        return bytes((value & 0x7F | 0x80, value >> 7 & 0x7F | 0x80, value >> 14))
    value &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


class EventsFile:
    """One events file in `log_dir`, appended to from any thread.

    Named as TensorFlow names its own (`events.out.tfevents.<seconds>.<host>...`, which
    TensorBoard finds); the process id and a per-process serial number make two files
    opened in one second distinct. The first record is the file-version event every
    TensorFlow events file starts with.
    """

    def __init__(self, log_dir: str) -> None:
        tf.io.gfile.makedirs(log_dir)
        now = time.time()
        name = (f"events.out.tfevents.{int(now):010d}.{socket.gethostname()}."
                f"{os.getpid()}.{next(_SERIAL)}")
        self.path = os.path.join(log_dir, name)
        self._lock = threading.Lock()
        self._writer = tf.io.TFRecordWriter(self.path)
        self._writer.write(b"\x09" + _DOUBLE.pack(now) + b"\x1a" + varint(len(_FILE_VERSION))
                           + _FILE_VERSION)
        self._writer.flush()
        self._closed = False

    def write(self, events: Iterable[tuple[float, int, bytes]]) -> None:
        """Appends one event per (wall time, step, serialized `Summary`), in that order.

        They reach the disk when the file's buffer fills, at `flush()` or at `close()`.
        """
        with self._lock:
            self._check_open()
            write, pack = self._writer.write, _DOUBLE.pack
            # Event(wall_time=..., step=..., summary=...): wall_time is field 1 (a double),
            # step field 2 (a varint), summary field 5 (length-delimited). Built here: an
            # `Event` object per event cost more than the write, ~200 of them a loop.
            for wall_time, step, summary in events:
                write(b"".join((b"\x09", pack(wall_time), b"\x10", varint(step), b"\x2a",
                                varint(len(summary)), summary)))

    def flush(self) -> None:
        with self._lock:
            if not self._closed:
                self._writer.flush()

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._writer.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"The events file {self.path} is closed; take a new one from "
                             "`events_file.cached(log_dir)`.")


_FILES: dict[str, EventsFile] = {}
_FILES_LOCK = threading.Lock()


def cached(log_dir: str) -> EventsFile:
    """The process's events file for `log_dir`, opened at the first call.

    As legacy's FileWriterCache: without it every train()/evaluate() call would start a new
    file, and a long train_and_evaluate would leave thousands. A directory deleted since
    (a test's tmp dir, a user starting over) or a file closed gets a new file. Every file is
    flushed and closed when the process exits.
    """
    key = str(log_dir)
    with _FILES_LOCK:
        events = _FILES.get(key)
        if events is None or events.closed or not tf.io.gfile.exists(events.path):
            events = _FILES[key] = EventsFile(key)
        return events


@atexit.register
def _close_all() -> None:
    with _FILES_LOCK:
        for events in _FILES.values():
            events.close()
