"""`tf.contrib.summary` on TensorFlow 2: the summary API of TF 1.x TPU host_calls.

Synopsis (the host_call of tensorflow/tpu's TF 1.x reference models, unchanged)::

    from tensorflow.contrib import summary

    def host_call_fn(gs, loss):
        with summary.create_file_writer(model_dir, max_queue=100).as_default():
            with summary.always_record_summaries():
                summary.scalar("loss", loss[0], step=gs[0])
                return summary.all_summary_ops()

TF 1.x's `tf.contrib.summary` was TensorFlow's own `summary_ops_v2` module, which TF 2.21
still ships with the same functions (`scalar(name, tensor, family=None, step=None)`,
`always_record_summaries`, `record_summaries_every_n_global_steps`, ...), minus
`all_summary_ops` (now `tf.compat.v1.summary.all_v2_summary_ops`). This module serves those
names. Its one function of its own is `create_file_writer`: it goes through TF 2's public
`tf.summary.create_file_writer`, looked up at call time, so a host_call's writer is the one
the library's host_call runner keeps per model_dir (legacy wrote one events file per run),
exactly as for host_calls written with `tf.compat.v2.summary`. It knows nothing about
host_calls or estimators.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tpu_estimator_compat._tf import private as _tf_private

# The functions TF 1.15's tensorflow/contrib/summary/summary.py re-exported from
# summary_ops_v2 that TF 2.21's summary_ops_v2 still defines.
SERVED_FROM_TENSORFLOW = (
    "always_record_summaries", "audio", "eval_dir", "flush", "generic", "graph", "histogram",
    "image", "import_event", "initialize", "never_record_summaries",
    "record_summaries_every_n_global_steps", "scalar", "summary_writer_initializer_op",
    "SummaryWriter")


def create_file_writer(logdir: Any, max_queue: int | None = None,
                       flush_millis: int | None = None, filename_suffix: str | None = None,
                       name: str | None = None) -> Any:
    """`tf.contrib.summary.create_file_writer`: a summary writer for `logdir`.

    The writer TF 2's `tf.summary.create_file_writer` returns (the same arguments), which
    inside a host_call is the runner's writer for that directory.
    """
    return tf.summary.create_file_writer(logdir, max_queue=max_queue,
                                         flush_millis=flush_millis,
                                         filename_suffix=filename_suffix, name=name)


def all_summary_ops() -> list[Any] | None:
    """`tf.contrib.summary.all_summary_ops`: the summary ops created in the current graph."""
    return tf.compat.v1.summary.all_v2_summary_ops()


def members() -> dict[str, Any]:
    """Every name `tf.contrib.summary` serves."""
    module = _tf_private.summary_ops_v2_module()
    served = {name: getattr(module, name) for name in SERVED_FROM_TENSORFLOW}
    served.update(create_file_writer=create_file_writer,
                  create_summary_file_writer=create_file_writer,
                  all_summary_ops=all_summary_ops)
    return served
