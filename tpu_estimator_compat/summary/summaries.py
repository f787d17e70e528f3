"""TensorBoard events as legacy wrote them: eval results, host_call, training summaries.

Legacy Estimator wrote `Summary.Value(simple_value=...)` protos through a v1 FileWriter; TF2
writers write tensor summaries instead. TensorBoard reads both, but tools and tests written
against legacy event files read `simple_value`, so this module writes the legacy protos:
its own (eval results, the training loss and step rates) to the directory's events file
(`events_file`, legacy's FileWriterCache file), a host_call's v1 protos through
`tf.summary.experimental.write_raw_pb`. It knows nothing of models, strategies or loops,
nor how `_tf_patches` swaps `tf.summary.create_file_writer` while a host_call or model_fn
runs (`ModelFnWriters`: writers model_fn creates itself).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import struct
import threading
import time
from typing import Any, Iterator, Mapping

import numpy as np
import tensorflow as tf

from tpu_estimator_compat._tf import patches as _tf_patches
from tpu_estimator_compat import log as logging
from tpu_estimator_compat.summary import background as background_lib
from tpu_estimator_compat.summary import events_file
from tpu_estimator_compat.v1_state import graph_names

_Summary = tf.compat.v1.Summary
LOSS_TAG = "loss"


def _summary_values(tag: str, value: Any) -> list[Any]:
    """The Summary values legacy's `_write_dict_to_summary` wrote for one entry of a dict.

    Its type rules, kept exactly: a Python or numpy float32/float64 and a Python, int32 or
    int64 integer (bool too, a Python int) are a scalar; a serialized `Summary` (a
    `tf.compat.v1.summary.image` metric's value) is its values, tagged `<tag>/<i>`; an
    `np.ndarray` (0-d too) is a tensor value; anything else (float16, np.bool_, a nest) is
    skipped with legacy's warning, and None silently.
    """
    if value is None:
        return []
    if isinstance(value, (np.float32, float)):
        return [_Summary.Value(tag=tag, simple_value=float(value))]
    if isinstance(value, (np.int64, np.int32, int)):
        return [_Summary.Value(tag=tag, simple_value=int(value))]
    if isinstance(value, bytes):
        try:
            parsed = _Summary.FromString(value)
        except Exception:  # pylint: disable=broad-except  # A DecodeError: not a Summary.
            logging.legacy_warning("Skipping summary for %s, cannot parse string to "
                                   "Summary.", tag)
            return []
        for i, item in enumerate(parsed.value):
            item.tag = f"{tag}/{i}"
        return list(parsed.value)
    if isinstance(value, np.ndarray):
        logging.legacy_info(
            "Summary for np.ndarray is not visible in Tensorboard by default. Consider using "
            "a Tensorboard plugin for visualization (see https://github.com/tensorflow/"
            "tensorboard-plugin-example/blob/master/README.md for more information).")
        return [_Summary.Value(tag=tag, node_name=tag, tensor=tf.make_tensor_proto(value))]
    logging.legacy_warning("Skipping summary for %s, must be a float, np.float32, np.int64, "
                           "np.int32 or int or np.ndarray or a serialized string of Summary.",
                           tag)
    return []


def _write_dict_event(output_dir: str, dictionary: Mapping[str, Any], global_step: int) -> None:
    """One event at `global_step` holding `dictionary`'s values, in its order, but
    `global_step` (legacy's `_write_dict_to_summary` without its log line)."""
    values = [summary_value for tag, value in dictionary.items() if tag != "global_step"
              for summary_value in _summary_values(tag, value)]
    events = events_file.cached(output_dir)
    events.write([(time.time(), int(global_step), _Summary(value=values).SerializeToString())])
    events.flush()


def write_dict_to_summary(output_dir: str, dictionary: Mapping[str, Any],
                          current_global_step: int) -> None:
    """Legacy `estimator._write_dict_to_summary`: logs `Saving dict for global step N: ...`
    and writes `dictionary` as one event into `output_dir`'s events file.

    tensorflow-estimator's early stopping and `BestExporter` read eval dirs written so (its
    tests write them with this function); evaluate() writes its results with the same event
    (`write_eval_summaries`).
    """
    logging.legacy_info("Saving dict for global step %d: %s", current_global_step,
                        dict_to_str(dictionary))
    _write_dict_event(output_dir, dictionary, current_global_step)


def dict_to_str(dictionary: Mapping[str, Any]) -> str:
    """Legacy's `_dict_to_str`: sorted `key = value` pairs, `%s` of each, bytes left out."""
    return ", ".join("%s = %s" % (k, v) for k, v in sorted(dictionary.items())
                     if not isinstance(v, bytes))


def write_eval_summaries(log_dir: str, results: Mapping[str, Any], global_step: int,
                         checkpoint_path: str | None) -> None:
    """Writes evaluate()'s dict as legacy's evaluate did: the results' event
    (`write_dict_to_summary`'s, whose line the caller logs), then, given a checkpoint, a
    second event with its path as a string tensor tagged `checkpoint_path`.
    """
    _write_dict_event(log_dir, results, global_step)
    if checkpoint_path:
        value = _Summary.Value(tag="checkpoint_path", tensor=tf.make_tensor_proto(
            checkpoint_path, dtype=tf.string))
        events = events_file.cached(log_dir)
        events.write([(time.time(), int(global_step),
                       _Summary(value=[value]).SerializeToString())])
        events.flush()


@contextlib.contextmanager
def _global_step_is(step: tf.Tensor) -> Iterator[None]:
    """While `fn` is traced, the graph's global step is `step` (the step's starting value).

    The function graph reads the outer graph's GLOBAL_STEP collection through a copy of its
    own; replacing that copy changes nothing outside the trace. `tf.compat.v1.train.
    get_global_step` accepts an integer scalar tensor there, as TF1 did.
    """
    graph = tf.compat.v1.get_default_graph()
    key = tf.compat.v1.GraphKeys.GLOBAL_STEP
    previous = list(graph.get_collection(key))
    graph.clear_collection(key)
    graph.add_to_collection(key, step)
    try:
        yield
    finally:
        graph.clear_collection(key)
        for item in previous:
            graph.add_to_collection(key, item)


class HostCallRunner:
    """Runs `host_call=(fn, tensors)` on the host with each outfed step's gathered tensors.

    Legacy built `fn` once into a TF1 graph and ran that graph per outfed step. Here `fn`
    is traced once into a `tf.function` (again only if the tensors' shapes change, e.g. for
    eval's partial last batch) and that function runs per step: graph-only ops such as
    `tf.compat.v1.summary.image` and `tf.compat.v1.summary.merge`, which fail eagerly, work
    as they did in legacy, and a step costs no Python re-run of `fn`. So that `fn` still
    writes one events file per call, `tf.summary.create_file_writer` hands back the same
    writer for the same logdir while `fn` is traced (patched only inside `run`, on the host
    thread); the traced function keeps that writer, and `close()` flushes it at the end of
    `train()`. `tf.summary.experimental.get_step()` is the global step passed to `run` while
    `fn` runs, so v2 summaries without `step=` (and v1 summaries under a default writer,
    which TensorFlow forwards to v2) get legacy's step. So is the graph's global step
    (`tf.compat.v1.train.get_global_step()`, `get_or_create_global_step()`) while `fn` is
    traced: `tf.contrib.summary.scalar(name, x)` without `step=` (google-research/pegasus'
    host_call) wrote at that read, which legacy's CPU path made in the step (0, 1, 2, ...),
    not at the loop's end.

    v1 summary protos (`tf.compat.v1.summary.*` under no default writer) are written to
    `default_logdir` at that global step: those `fn` returns and those it only created
    (legacy's CPU path collected them in the graph's SUMMARIES collection, which
    Estimator's SummarySaverHook wrote; here they are written at every host_call step).

    `taken`: the names legacy's graph held when it built `fn` (model_fn's, metric_fn's: see
    `train_session` and `inference`), marked taken in the function graph before `fn` is
    built there, so its summaries get legacy's tags (`learning_rate_1` after model_fn's
    `learning_rate` op).
    """

    def __init__(self, fn: Any, structure: Any, default_logdir: str,
                 taken: graph_names.NameTable | None = None) -> None:
        self._fn = fn
        self._structure = structure
        self._default_logdir = default_logdir
        self._taken = taken or graph_names.NameTable()
        self._writers: dict[str, Any] = {}
        # autograph=False: legacy built fn as plain TF1 graph code. reduce_retracing: a
        # second leaf shape (eval's partial last batch) gives one shape-relaxed trace, not
        # one trace per distinct row count.
        self._traced = tf.function(self._graph_call, autograph=False, reduce_retracing=True)

    def run(self, flat_values: list[Any], global_step: int) -> None:
        """Calls fn with one outfed step's values (numpy, gathered over replicas)."""
        tensors = [tf.convert_to_tensor(v) for v in flat_values]
        with self._cached_writers():
            protos = self._traced(tensors, tf.constant(global_step, tf.int64))
        self._write_v1_protos(protos, global_step)

    def _graph_call(self, host_call_inputs: list[tf.Tensor],
                    host_call_step: tf.Tensor) -> list[tf.Tensor]:
        """fn in the function graph; returns every v1 summary proto it made (see class)."""
        # Legacy built fn into a graph whose SUMMARIES held model_fn's summaries at most,
        # never the caller's. A function graph starts with a copy of the outer graph's
        # collections: an eager `tf.compat.v1.summary.scalar` made anywhere earlier in the
        # process (a script's own, a library's) is there as an eager tensor, and `merge_all`
        # or the collection read below would take it. The copy is this graph's own.
        graph = tf.compat.v1.get_default_graph()
        graph.clear_collection(tf.compat.v1.GraphKeys.SUMMARIES)
        # The names legacy's graph held when it built fn: its summaries' tags are suffixed
        # where those took the name. (The arguments' placeholders are named after this
        # method's parameters, which no host_call names.)
        graph_names.mark(graph, self._taken)
        with self._legacy_step(host_call_step):
            result = self._call(tf.nest.pack_sequence_as(self._structure, host_call_inputs))
        protos = [t for t in tf.nest.flatten(result) if _is_summary_proto(t)]
        reached = _ops_feeding([t.op for t in protos])
        created = [t for t in tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SUMMARIES)
                   if _is_summary_proto(t) and t.op not in reached]
        if created:
            protos.append(tf.compat.v1.summary.merge(created, collections=[]))
        return protos

    @contextlib.contextmanager
    def _legacy_step(self, step: tf.Tensor) -> Iterator[None]:
        """While fn builds: the summary step and the graph's global step are `step`."""
        previous_step = tf.summary.experimental.get_step()
        tf.summary.experimental.set_step(step)
        try:
            with _global_step_is(step):
                yield
        finally:
            tf.summary.experimental.set_step(previous_step)

    def names_taken(self) -> graph_names.NameTable:
        """The names building `fn` in a TF1 graph takes, after the names given as `taken`.

        Legacy built `fn` once, in graph mode, into the graph its own loss summary went
        into afterwards, so a `tf.compat.v2.summary.scalar('loss', ...)` there renamed that
        summary to `loss_1` (see `legacy_loss_tags`). The traced function's names stay in
        its own graph, so `fn` is built once more here, in a scratch graph fed by
        placeholders (`graph_names.names_taken_by`); no summary writer is initialised, so
        nothing is written.
        """
        return graph_names.names_taken_by(
            self._fn, self._structure, self._taken,
            around=lambda: self._legacy_step(tf.compat.v1.placeholder(tf.int64, [])))

    def close(self) -> None:
        for writer in self._writers.values():
            writer.flush()
            writer.close()
        self._writers.clear()

    def _call(self, values: Any) -> Any:
        return self._fn(**values) if isinstance(values, dict) else self._fn(*values)

    def _write_v1_protos(self, protos: list[tf.Tensor], global_step: int) -> None:
        # v1 ops forwarded to a v2 writer return b'' (and so does merging only those).
        protos = [p for p in protos if p.numpy()]
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
        """Inside: `tf.summary.create_file_writer` is this runner's `_writer`."""
        return _tf_patches.applied("summaries.create_file_writer", self._writer)


_ORIGINAL_CREATE_FILE_WRITER = tf.summary.create_file_writer


class ModelFnWriters:
    """Summary writers a model_fn creates itself, as legacy's TF1 graph held them.

    SimCLR's model_fn calls `tf.compat.v2.summary.create_file_writer(model_dir)`, puts its
    writes under `control_dependencies([writer.init()])` and `writer.as_default()`, and
    makes `train_op` depend on `tf.compat.v1.summary.all_v2_summary_ops()`. In legacy's
    graph the writer was a graph resource and `init()` an op. Traced in a `tf.function`,
    TensorFlow creates it eagerly (hoisted out of the function), so `init()` is None and
    `control_dependencies` fails. While model_fn runs (`applied`), `create_file_writer`
    returns one writer per logdir for the estimator, created eagerly and kept by the loops
    traced with it, whose `init()` is a no-op in the graph (it is initialised already); its
    writes run with each step, on replica 0, as TensorFlow records summaries in replica
    context. `flushing` flushes every writer when a train/evaluate/predict call ends, as
    legacy's finalize flush did. One events file per logdir per estimator, where legacy
    opened one per `train()` call.
    """

    def __init__(self) -> None:
        self._writers: dict[str, Any] = {}
        self._lock = threading.Lock()

    def applied(self) -> Any:
        """Inside: `tf.summary.create_file_writer` returns these writers."""
        return _tf_patches.applied("summaries.create_file_writer", self._create)

    @contextlib.contextmanager
    def flushing(self) -> Iterator[None]:
        """Flushes every writer when the block ends (events durable after each call)."""
        try:
            yield
        finally:
            with self._lock:
                writers = list(self._writers.values())
            for writer in writers:
                writer.flush()

    def _create(self, logdir: Any, *args: Any, **kwargs: Any) -> Any:
        key = logdir.numpy().decode() if isinstance(logdir, tf.Tensor) and hasattr(
            logdir, "numpy") else str(logdir)
        with self._lock:
            if key not in self._writers:
                with tf.init_scope():
                    self._writers[key] = _InitializedWriter(
                        _ORIGINAL_CREATE_FILE_WRITER(logdir, *args, **kwargs))
            return self._writers[key]


class _InitializedWriter:
    """A summary writer created eagerly, whose `init()` a TF1 graph can depend on."""

    def __init__(self, writer: Any) -> None:
        self._writer = writer

    def init(self) -> Any:
        """A no-op in a graph (the writer is initialised), None eagerly, as TF gives."""
        return None if tf.executing_eagerly() else tf.no_op(name="summary_writer_init")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._writer, name)  # as_default, flush, close: the real writer's.


def _is_summary_proto(value: Any) -> bool:
    """A serialized `Summary`, as every `tf.compat.v1.summary.*` op returns."""
    return isinstance(value, tf.Tensor) and value.dtype == tf.string and value.shape.rank == 0


def _ops_feeding(ops: list[Any]) -> set[Any]:
    """`ops` and every op they depend on, through data and control inputs."""
    seen: set[Any] = set()
    stack = list(ops)
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return seen


@dataclasses.dataclass(frozen=True)
class TrainSummaryRules:
    """When and under which tags legacy TPUEstimator's training summaries were written.

    Two legacy hooks wrote them, each deciding once per `session.run`: a run was one step on
    the CPU (`use_tpu=False`) and one loop of `iterations_per_loop` steps on a TPU.

    With `use_tpu=True` off a TPU (GPUs, CPU replicas) the loss follows the CPU's per-step
    rule: on a TPU the host saw only each loop's last loss, a limit of the hardware, not a
    setting; elsewhere every step's loss is at hand, so `save_summary_steps` is honoured as
    the user wrote it and the events match what legacy wrote for the same script on a CPU or
    GPU (the recordings users compare with). The step-rate summaries keep the per-loop rule
    of `use_tpu=True`: a rate over a loop is the same rate, and the CPU rule's
    `ceil(log_step_count_steps / iterations_per_loop)` would write one every step.

    * Estimator's `SummarySaverHook(save_steps=save_summary_steps)` wrote the loss on the
      first run, then on the first run whose "next step" (the previous run's global step
      plus one; after a run it did not write, the run's *starting* step plus two) was at
      least `save_summary_steps` past the last write. On the CPU: steps 1, 101, 201, ...
    * TPUEstimator's `ExamplesPerSecondHook` (a `StepCounterHook`) wrote `global_step/sec`
      and `examples/sec` every `ceil(log_step_count_steps / iterations_per_loop)` global
      steps, taking its first run as the baseline (tpu_estimator.py: "we actually want to
      roughly log every N / iterations_per_loop steps"). On a TPU it also knew a run
      advanced `iterations_per_loop` steps. Without `save_summary_steps` it only logged.

    Args:
      save_summary_steps: 0 or None: no loss summary and no step-rate summaries.
      step_rate_every: global steps between step-rate summaries; None: none.
      steps_per_run: global steps one legacy `session.run` advanced (the step-rate rule).
      loss_steps_per_run: the same for the loss summary's rule.
      examples_per_step: the global batch size, for `examples/sec`.
      loss_tags: the tags of legacy's own loss summary (see `legacy_loss_tags`).
    """

    save_summary_steps: int
    step_rate_every: int | None
    steps_per_run: int
    examples_per_step: int | None
    loss_tags: tuple[str, ...] = (LOSS_TAG,)
    loss_steps_per_run: int = 1

    @classmethod
    def legacy(cls, *, use_tpu: bool, on_tpu: bool, save_summary_steps: int | None,
               log_step_count_steps: int | None, iterations_per_loop: int,
               examples_per_step: int | None,
               loss_tags: tuple[str, ...] = (LOSS_TAG,)) -> "TrainSummaryRules":
        """The rules legacy derived from its RunConfig (tpu_estimator.py, `__init__`).

        `on_tpu`: the strategy runs on TPU cores (the loss is then written once per loop).
        """
        every = (None if log_step_count_steps is None
                 else math.ceil(log_step_count_steps / iterations_per_loop))
        return cls(save_summary_steps=save_summary_steps or 0, step_rate_every=every,
                   steps_per_run=iterations_per_loop if use_tpu else 1,
                   examples_per_step=examples_per_step, loss_tags=loss_tags,
                   loss_steps_per_run=iterations_per_loop if use_tpu and on_tpu else 1)


def legacy_loss_tags(taken: graph_names.NameTable, *, use_tpu: bool) -> tuple[str, ...]:
    """The tags legacy's own loss summary got, given the names its graph had taken.

    Legacy built its loss summary with `tf.compat.v1.summary.scalar('loss', loss)` in the
    TF1 graph after model_fn and host_call's fn had been built there (on the CPU the
    host_call fn ran in model_fn's graph; on a TPU in the outer graph, see
    `train_session`). The summary's tag is its uniquified name scope: `loss_1` when model_fn
    (`tf.variable_scope('loss')`) or the host_call (`tf.contrib.summary.scalar('loss',
    ...)`) had taken `loss`, `loss_2` when both had. Estimator added its own `loss` summary
    unless one named exactly `loss` existed (estimator.py, `_train_with_estimator_spec`):
    on the CPU that is the only one; on a TPU TPUEstimator's comes first (tpu_estimator.py,
    `_augment_model_fn`), so a renamed one was followed by Estimator's, one suffix further.
    """
    taken = graph_names.NameTable(taken.counts)  # `unique` takes names: a copy.
    first = taken.unique(LOSS_TAG)
    if use_tpu and first != LOSS_TAG:
        return first, taken.unique(LOSS_TAG)
    return (first,)


class _StepTimer:
    """The step rule of legacy's `SecondOrStepTimer(every_steps=n)`, with the clock passed in."""

    def __init__(self, every: int) -> None:
        self._every = every
        self._last: tuple[int, float] | None = None

    def should_trigger(self, step: int) -> bool:
        if self._last is None:
            return True
        if self._last[0] == step:
            return False
        return step >= self._last[0] + self._every

    def update(self, step: int, now: float) -> tuple[int, float] | None:
        """Marks `step` triggered; returns (steps, seconds) since the last trigger, if any."""
        previous, self._last = self._last, (step, now)
        if previous is None:
            return None
        return step - previous[0], now - previous[1]


# Decided events wait in the events file's buffer; they are flushed to the disk when a loop
# ends this long or longer after the last flush (legacy's FileWriter flushed every 120 s).
_FLUSH_SECONDS = 1.0


_SCALAR_HEADERS: dict[str, bytes] = {}  # tag: the bytes before a Value's float


def _serialized_scalars(values: list[tuple[str, float]]) -> bytes:
    """`Summary(value=[Value(tag=t, simple_value=v), ...]).SerializeToString()`, directly.

    ~200 of these per 100-step loop (legacy's step rates, `use_tpu=False`) took ~0.25 ms
    through protobuf's Python objects; these bytes are built from a per-tag header and the
    float's four bytes. Summary.value is field 1 (length-delimited), Value.tag field 1
    (string), Value.simple_value field 2 (a 32-bit float, in a oneof: written even when 0).
    """
    out = []
    for tag, value in values:
        header = _SCALAR_HEADERS.get(tag)
        if header is None:
            encoded = tag.encode("utf-8")
            item = b"\n" + events_file.varint(len(encoded)) + encoded + b"\x15"
            header = _SCALAR_HEADERS[tag] = b"\n" + events_file.varint(len(item) + 4) + item
        try:
            out.append(header + _FLOAT32.pack(value))
        except OverflowError:  # Beyond float32: protobuf rounds it to +-inf.
            out.append(_Summary(value=[_Summary.Value(
                tag=tag, simple_value=value)]).SerializeToString())
    return b"".join(out)


_FLOAT32 = struct.Struct("<f")


class TrainSummaries:
    """The summaries legacy training wrote to model_dir, at the steps legacy wrote them.

    The host learns every step's loss after each loop, so the legacy hooks' decisions are
    replayed per legacy `session.run` (see `TrainSummaryRules`): per step for
    `use_tpu=False`, per loop on TPU (the loss: on TPU cores only); step times inside a loop
    are interpolated from the loop's duration, and each event carries its step's time as
    legacy's `add_summary` did. A loop's events are decided and written to model_dir's
    events file (`events_file.cached`, legacy's FileWriterCache file) on a background thread
    while the next loop runs, in loop order; they reach the disk within about a second.
    `close()` waits for them, flushes and raises a failed write.
    `model_dir=None` writes nothing: the workers of a multi-worker job other than the chief,
    which legacy gave no summary hooks either.
    """

    def __init__(self, model_dir: str | None, rules: TrainSummaryRules) -> None:
        self._events = events_file.cached(model_dir) if model_dir is not None else None
        self._rules = rules
        self._loss_timer = _StepTimer(rules.save_summary_steps)
        self._next_step: int | None = None
        self._rate_timer = (_StepTimer(rules.step_rate_every)
                            if rules.step_rate_every is not None and rules.save_summary_steps
                            else None)
        # Deciding and writing a loop's events (~200 with use_tpu=False at the default
        # log_step_count_steps and iterations_per_loop=100) overlaps the next loop.
        self._background = (background_lib.InOrder(name="train_summaries")
                            if model_dir is not None else None)
        self._flushed = time.time()

    def after_loop(self, step: int, losses: Any, end_time: float, seconds: float, *,
                   starts: Any, summaries: Any = None) -> None:
        """Writes the summaries due at the steps of the loop that ended at `step`.

        `end_time`: when the loop ended, in `time.time()` seconds (events carry it).
        `starts[k]`: the global step the loop's k-th step started from (`train_loop.step_starts`;
        a model_fn may advance it on some steps only). `summaries[k]`: the serialized
        `Summary` of model_fn's v1 summary ops at step k (legacy's CPU path), written in
        the loss summary's event, before the loss, as legacy's `merge_all()` ordered them.
        """
        if self._events is None or not len(losses):
            return
        self._background.submit(self._write_loop, step, losses, starts, end_time, seconds,
                                summaries)

    def _write_loop(self, step: int, losses: Any, starts: Any, end_time: float,
                    seconds: float, summaries: Any = None) -> None:
        """after_loop's work, on the background thread: decides and writes the events."""
        # One event per legacy add_summary call: (step, time, [(tag, simple_value), ...],
        # the serialized model_fn summaries that came before them in it).
        events: list[tuple[int, float, list[tuple[str, float]], bytes]] = []
        rules = self._rules
        per_step = summaries is not None and rules.loss_steps_per_run == 1
        loss_runs = self._runs(step, losses, starts, end_time, seconds,
                               rules.loss_steps_per_run)
        for k, (start, end, loss, when) in enumerate(loss_runs):
            events += [(at, when, values, bytes(summaries[k]) if per_step else b"")
                       for at, values in self._loss_after_run(start, end, loss)]
        rate_runs = (loss_runs if rules.steps_per_run == rules.loss_steps_per_run
                     else self._runs(step, losses, starts, end_time, seconds,
                                     rules.steps_per_run))
        for start, end, _, when in rate_runs:
            events += [(at, when, values, b"")
                       for at, values in self._rate_after_run(start, end, when)]
        events.sort(key=lambda event: event[0])  # Stable: at one step the loss comes first.
        self._events.write((when, at, extra + _serialized_scalars(values))
                           for at, when, values, extra in events if extra or values)
        if seconds >= _FLUSH_SECONDS or time.time() - self._flushed >= _FLUSH_SECONDS:
            self._flush()

    def _flush(self) -> None:
        self._events.flush()
        self._flushed = time.time()

    def close(self) -> None:
        """Writes what is queued and flushes; raises the first failed write's error."""
        if self._events is None:
            return
        try:
            self._background.drain()
        finally:
            self._background.close()
            self._flush()

    @staticmethod
    def _runs(step: int, losses: Any, starts: Any, end_time: float, seconds: float,
              steps_per_run: int) -> list[tuple[int, int, float, float]]:
        """[(starting step, final step, loss, end time)] of the legacy runs in this loop.

        A legacy TPU run reported the loss of its loop's last step. A step ends at the global
        step the next one started from.
        """
        count = len(losses)
        if steps_per_run != 1:
            return [(int(starts[0]), step, float(losses[-1]), end_time)]
        begins = np.asarray(starts[:count]).tolist()  # Python ints and floats: ~10x faster
        ends = begins[1:] + [step]                     # to loop over than numpy scalars.
        first, each = end_time - seconds, seconds / count
        return list(zip(begins, ends, np.asarray(losses, np.float64).tolist(),
                        [first + each * (i + 1) for i in range(count)]))

    def _loss_after_run(self, start: int, end: int,
                        loss: float) -> list[tuple[int, list[Any]]]:
        """SummarySaverHook.before_run/after_run (basic_session_run_hooks.py)."""
        if not self._rules.save_summary_steps:
            return []
        first = self._next_step is None
        request = first or self._loss_timer.should_trigger(self._next_step)
        # The hook re-read the global step only when it wrote; otherwise it assumed one step.
        at = end if first or request else start + 1
        events = []
        if request:
            self._loss_timer.update(at, 0.0)
            events = [(at, [(tag, loss) for tag in self._rules.loss_tags])]
        self._next_step = at + 1
        return events

    def _rate_after_run(self, start: int, end: int,
                        when: float) -> list[tuple[int, list[Any]]]:
        """StepCounterHook.after_run with ExamplesPerSecondHook's two summaries."""
        timer = self._rate_timer
        if timer is None or not timer.should_trigger(start + self._rules.steps_per_run):
            return []
        if not timer.should_trigger(end):
            return []
        elapsed = timer.update(end, when)
        if elapsed is None:
            return []
        rate = elapsed[0] / max(elapsed[1], 1e-9)
        events = [(end, [("global_step/sec", rate)])]
        if self._rules.examples_per_step:
            events.append((end, [("examples/sec", rate * self._rules.examples_per_step)]))
        return events
