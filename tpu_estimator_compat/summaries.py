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
    writer = cached_writer(log_dir)
    with writer.as_default():
        tf.summary.experimental.write_raw_pb(
            _Summary(value=values).SerializeToString(), step=global_step)
    writer.flush()


_WRITERS: dict[str, Any] = {}


def cached_writer(log_dir: str) -> Any:
    """One events writer per directory per process, as legacy's FileWriterCache kept.

    Without it every train()/evaluate() call would start a new events file; a long
    train_and_evaluate would leave thousands. The writers are flushed after each use and
    closed when the process exits.
    """
    key = str(log_dir)
    writer = _WRITERS.get(key)
    if writer is None or not tf.io.gfile.exists(key):
        writer = _WRITERS[key] = tf.summary.create_file_writer(key)
    return writer


class HostCallRunner:
    """Runs `host_call=(fn, tensors)` on the host with each outfed step's gathered tensors.

    Legacy built `fn` once into the host graph and ran it per outfed step, so one summary
    writer served a whole `train()` call. Here `fn` runs eagerly per step; so that it still
    writes one events file per call, `tf.summary.create_file_writer` hands back the same
    writer for the same logdir while `fn` runs (patched only inside `run`, on the host
    thread), and `close()` flushes them at the end of `train()`. A `fn` that returns v1
    summary protos (`tf.compat.v1.summary.*`) has them written to `default_logdir` at the
    step being run.
    """

    def __init__(self, fn: Any, structure: Any, default_logdir: str) -> None:
        self._fn = fn
        self._structure = structure
        self._default_logdir = default_logdir
        self._writers: dict[str, Any] = {}

    def run(self, flat_values: list[Any], global_step: int) -> None:
        """Calls fn with one outfed step's values (numpy, gathered over replicas)."""
        values = tf.nest.pack_sequence_as(
            self._structure, [tf.convert_to_tensor(v) for v in flat_values])
        with self._cached_writers():
            if isinstance(values, dict):
                result = self._fn(**values)
            else:
                result = self._fn(*values)
        self._write_v1_protos(result, global_step)

    def close(self) -> None:
        for writer in self._writers.values():
            writer.flush()
            writer.close()
        self._writers.clear()

    def _write_v1_protos(self, result: Any, global_step: int) -> None:
        protos = [t for t in tf.nest.flatten(result)
                  if isinstance(t, tf.Tensor) and t.dtype == tf.string and t.shape.rank == 0]
        if not protos:
            return
        writer = self._writer(self._default_logdir)
        with writer.as_default():
            for proto in protos:
                tf.summary.experimental.write_raw_pb(proto, step=global_step)

    def _writer(self, logdir: str, **kwargs: Any) -> Any:
        key = str(logdir)
        if key not in self._writers:
            self._writers[key] = _ORIGINAL_CREATE_FILE_WRITER(logdir, **kwargs)
        return self._writers[key]

    def _cached_writers(self) -> Any:
        runner = self

        class _Patch:
            def __enter__(self) -> None:
                tf.summary.create_file_writer = runner._writer
                tf.compat.v2.summary.create_file_writer = runner._writer

            def __exit__(self, *exc: Any) -> None:
                tf.summary.create_file_writer = _ORIGINAL_CREATE_FILE_WRITER
                tf.compat.v2.summary.create_file_writer = _ORIGINAL_CREATE_FILE_WRITER

        return _Patch()


_ORIGINAL_CREATE_FILE_WRITER = tf.summary.create_file_writer


class TrainSummaries:
    """The summaries legacy training wrote to model_dir: `loss`, `global_step/sec`, `examples/sec`.

    Legacy's SummarySaverHook wrote `loss` after the first step and then every
    `save_summary_steps`; its StepCounterHook took the first step as its baseline and wrote
    `global_step/sec` (and TPUEstimator `examples/sec`) every `log_step_count_steps`. The
    host sees every step's loss after each loop, so the summaries land at exactly those
    steps; step times inside a loop are interpolated from the loop's duration.
    `model_dir=None` writes nothing: the workers of a multi-worker job other than the chief,
    which legacy gave no summary hooks either.
    """

    def __init__(self, model_dir: str | None, *, save_summary_steps: int | None,
                 log_step_count_steps: int | None, examples_per_step: int | None) -> None:
        self._writer = (cached_writer(model_dir) if model_dir is not None
                        else None)
        self._save_every = save_summary_steps or 0
        self._log_every = log_step_count_steps or 0
        self._examples = examples_per_step
        self._last_summary: int | None = None
        self._last_rate: tuple[int, float] | None = None

    def after_loop(self, step: int, losses: Any, end_time: float, seconds: float) -> None:
        """Writes the summaries due at the steps of the loop that ended at `step`."""
        if self._writer is None:
            return
        count = len(losses)
        first = step - count + 1
        by_step: dict[int, list[Any]] = {}
        for i in range(count):
            current = first + i
            if self._save_every and (self._last_summary is None or
                                     current >= self._last_summary + self._save_every):
                by_step.setdefault(current, []).append(
                    _Summary.Value(tag="loss", simple_value=float(losses[i])))
                self._last_summary = current
            if self._log_every:
                when = end_time - seconds + seconds * (i + 1) / count
                if self._last_rate is None:
                    self._last_rate = (current, when)
                elif current >= self._last_rate[0] + self._log_every:
                    rate = (current - self._last_rate[0]) / max(when - self._last_rate[1], 1e-9)
                    values = by_step.setdefault(current, [])
                    values.append(_Summary.Value(tag="global_step/sec", simple_value=rate))
                    if self._examples:
                        values.append(_Summary.Value(tag="examples/sec",
                                                     simple_value=rate * self._examples))
                    self._last_rate = (current, when)
        if by_step:
            with self._writer.as_default():
                for current, values in sorted(by_step.items()):
                    tf.summary.experimental.write_raw_pb(
                        _Summary(value=values).SerializeToString(), step=current)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.flush()
