"""TF 2.15's `tensorflow.python.eager.profiler`, which TF 2.16 removed, on TF 2's profiler.

TF 1.x and 2.x code imported it at module level: tensorflow/models' `official/utils/misc/
keras_utils.py` (`from tensorflow.python.eager import profiler`), which every official r1
program's test imports, failed to import on TF 2.21 before any test ran. The import hook
(`import_hook.py`) serves this module under that path where TensorFlow has none.

Legacy's API: `start(options)` began a profiling session, `stop()` ended it and returned the
collected trace as bytes, `save(logdir, result)` wrote them under
`logdir/plugins/profile/<date-time>/local.trace` beside an empty `*.profile-empty` events
file (`maybe_create_event_file`) that tells TensorBoard the directory holds profiles.
TF 2's public profiler writes its trace to a directory given at start, so `start` profiles
into a temporary directory and `stop` reads the trace (an `XSpace`, `*.xplane.pb`) back as
the bytes legacy returned. Errors are legacy's `ProfilerAlreadyRunningError` and
`ProfilerNotRunningError`, with legacy's messages.
"""

from __future__ import annotations

import datetime
import glob
import os
import shutil
import socket
import tempfile
import threading
import time
from typing import Any

import tensorflow as tf

from tpu_estimator_compat import log as logging

_EVENT_FILE_SUFFIX = ".profile-empty"
_lock = threading.Lock()
_session_dir: str | None = None


class ProfilerAlreadyRunningError(Exception):
    pass


class ProfilerNotRunningError(Exception):
    pass


def start(options: Any = None) -> None:
    """Starts profiling (legacy's `options` dict: ProfilerOptions' fields)."""
    global _session_dir
    with _lock:
        if _session_dir is not None:
            raise ProfilerAlreadyRunningError("Another profiler is running.")
        if isinstance(options, dict):
            options = tf.profiler.experimental.ProfilerOptions(**options)
        directory = tempfile.mkdtemp(prefix="tpu_estimator_compat_profile_")
        try:
            tf.profiler.experimental.start(directory, options=options)
        except tf.errors.AlreadyExistsError:
            shutil.rmtree(directory, ignore_errors=True)
            logging.legacy_warning("Another profiler session is running which is probably created "
                            "by profiler server. Please avoid using profiler server and "
                            "profiler APIs at the same time.")
            raise ProfilerAlreadyRunningError("Another profiler is running.") from None
        _session_dir = directory


def stop() -> bytes:
    """Stops the session `start` began; returns its trace, serialized."""
    global _session_dir
    with _lock:
        if _session_dir is None:
            raise ProfilerNotRunningError("Cannot stop profiling. No profiler is running.")
        directory, _session_dir = _session_dir, None
    try:
        tf.profiler.experimental.stop()
        traces = sorted(glob.glob(os.path.join(directory, "plugins", "profile", "*",
                                               "*.xplane.pb")))
        if not traces:
            return b""
        with open(traces[-1], "rb") as f:
            return f.read()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def maybe_create_event_file(logdir: str) -> None:
    """Writes an empty `*.profile-empty` events file in `logdir` unless one exists: it marks
    a directory with `plugins/profile/` for TensorBoard."""
    for name in tf.io.gfile.listdir(logdir):
        if name.endswith(_EVENT_FILE_SUFFIX):
            return
    now = time.time()
    path = os.path.join(logdir, f"events.out.tfevents.{int(now):010d}."
                                f"{socket.gethostname()}{_EVENT_FILE_SUFFIX}")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(tf.compat.v1.Event(wall_time=now,
                                        file_version="brain.Event:2").SerializeToString())


def save(logdir: str, result: bytes) -> None:
    """Writes `stop()`'s result where legacy did: `logdir/plugins/profile/<time>/local.trace`."""
    plugin_dir = os.path.join(logdir, "plugins", "profile",
                              datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S"))
    tf.io.gfile.makedirs(plugin_dir)
    maybe_create_event_file(logdir)
    with tf.io.gfile.GFile(os.path.join(plugin_dir, "local.trace"), "wb") as f:
        f.write(result)


def start_profiler_server(port: int) -> None:
    """Starts a profiler server on `port` (TF 2's `tf.profiler.experimental.server`)."""
    tf.profiler.experimental.server.start(port)
