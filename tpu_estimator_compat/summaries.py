"""TensorBoard events in the legacy format: eval results now, host_call summaries next.

Legacy Estimator wrote `Summary.Value(simple_value=...)` protos through a v1 FileWriter; TF2
writers write tensor summaries instead. TensorBoard reads both, but tools and tests written
against legacy event files read `simple_value`, so this module writes the legacy protos
through `tf.summary.experimental.write_raw_pb`. It knows nothing of models, strategies or loops.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import tensorflow as tf

_Summary = tf.compat.v1.Summary


def _scalar_value(tag: str, value: Any) -> Any | None:
    array = np.asarray(value)
    if array.shape != () or not np.issubdtype(array.dtype, np.number) and array.dtype != bool:
        return None
    return _Summary.Value(tag=tag, simple_value=float(array))


def _text_value(tag: str, text: str) -> Any:
    value = _Summary.Value(tag=tag, tensor=tf.make_tensor_proto(text))
    value.metadata.plugin_data.plugin_name = "text"
    return value


def write_eval_summaries(log_dir: str, results: Mapping[str, Any], global_step: int,
                         checkpoint_path: str | None) -> None:
    """Writes evaluate()'s dict as legacy did: one scalar per metric, plus the checkpoint.

    `global_step` itself is not written as a summary (legacy skipped it too).
    """
    values = [_scalar_value(tag, value) for tag, value in sorted(results.items())
              if tag != "global_step"]
    values = [v for v in values if v is not None]
    if checkpoint_path:
        values.append(_text_value("checkpoint_path", checkpoint_path))
    writer = tf.summary.create_file_writer(log_dir)
    with writer.as_default():
        tf.summary.experimental.write_raw_pb(
            _Summary(value=values).SerializeToString(), step=global_step)
    writer.flush()
    writer.close()
