"""`tf.compat.v1.summary.FileWriter` with eager execution on, as TF1 eval loops use it.

    tpu_estimator_compat.install_aliases()   # or the launcher, or constructing a TPUEstimator
    writer = tf.compat.v1.summary.FileWriter(model_dir)  # eager on: TF raised RuntimeError
    writer.add_summary(tf.compat.v1.Summary(value=[...]), global_step)
    writer.close()

TF1 scripts (tensorflow/tpu retinanet's eval modes and most hand-written eval loops) build a
FileWriter at the top level and feed it `Summary` protos. Legacy ran them in graph mode; here
eager stays on unless the script turns it off, and TensorFlow's constructor refuses to run
eagerly although the writer itself (a Python events-file writer) never uses the graph. This
module owns the two replacements `_tf_patches` puts on the class: the constructor builds the
writer inside a graph of its own when eager execution is on, and `add_summary` names the
argument and the fix when it is given a tensor there (no Session can evaluate it). With eager
off or a graph the default, both are TensorFlow's own, call for call. It knows nothing of
estimators, TF1 mode or the launcher.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import tensorflow as tf

from tpu_estimator_compat._tf import patches as _tf_patches


def _eager_on() -> bool:
    """Eager execution is on and no graph is the default (where TensorFlow's check raises)."""
    return tf.executing_eagerly()


def eager_safe_init(original: Callable[..., None]) -> Callable[..., None]:
    """`FileWriter.__init__` that, with eager on, builds the writer in a private graph.

    The graph is only the constructor's context: the events file, its thread and every
    method (add_summary of protos/bytes, add_event, add_graph, add_meta_graph,
    add_run_metadata, add_session_log, flush, close, reopen) work without it, as they do for
    a writer built under `with tf.Graph().as_default():`. A `session=` writer builds summary
    ops in that session's graph, which eager code cannot run: TensorFlow's error is kept.
    """

    @functools.wraps(original)
    def __init__(self: Any, logdir: Any, graph: Any = None, max_queue: int = 10,  # noqa: N807
                 flush_secs: float = 120, graph_def: Any = None,
                 filename_suffix: str | None = None, session: Any = None) -> None:
        args = (self, logdir, graph, max_queue, flush_secs, graph_def, filename_suffix,
                session)
        if session is not None or not _eager_on():
            original(*args)
            return
        with tf.Graph().as_default():
            original(*args)

    return __init__


def checked_add_summary(original: Callable[..., None]) -> Callable[..., None]:
    """`FileWriter.add_summary` that, with eager on, rejects a tensor by name.

    TensorFlow's own fails on `summary.value` with an AttributeError that names neither the
    argument nor the way out; in graph mode its behaviour is kept unchanged.
    """

    @functools.wraps(original)
    def add_summary(self: Any, summary: Any, global_step: Any = None) -> None:
        if isinstance(summary, tf.Tensor) and _eager_on():
            raise TypeError(
                "`summary` of FileWriter.add_summary must be a `tf.compat.v1.Summary` "
                f"protocol buffer or its serialized bytes; got a tensor: {summary!r}. With "
                "eager execution on no Session evaluates summary ops: build the proto "
                "(`tf.compat.v1.Summary(value=[tf.compat.v1.Summary.Value(tag=..., "
                "simple_value=...)])`), pass an eager tensor's `.numpy()` bytes, or build and "
                "run the summary op in a `with tf.Graph().as_default():` block.")
        original(self, summary, global_step)

    return add_summary


def install() -> None:
    """Puts both replacements on `tf.compat.v1.summary.FileWriter`. Idempotent."""
    _tf_patches.install("v1_file_writer")
