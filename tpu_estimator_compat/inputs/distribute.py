"""Input distribution: legacy `input_fn(params)` to a per-replica distributed dataset.

Owns calling the user's input_fn once per input pipeline (host) through
`strategy.distribute_datasets_from_function` (or once per parameter-server worker,
`worker_dataset_fn`), each host's dataset of per-replica batches (`host_dataset`: the legacy
batch rules of `context.py`, padding of `pad.py`), and the iterators over those datasets
(`iterate`: built so that deleting one does not stall; `_tf_patches` swaps in the per-device
pipeline builder made here while one is built; `release_off_thread`: deleted where a stall
cannot hold up the call). Padded evaluation/prediction input and training input of fixed
shapes on several CPU replicas of one process skip the strategy's per-device pipelines: one
host iterator, split per replica in the step (`HostSplitDataset`). It knows nothing of
model_fns, specs or the training loop.

On several hosts (a multi-worker cluster, a TPU pod) each host calls input_fn once with its
own `tf.distribute.InputContext`, and `params['context'].current_host` says which host it is,
so input_fns shard files as ResNet/BERT did: `dataset.shard(ctx.num_hosts, ctx.current_host)`.
For evaluation and prediction an input_fn that never asks which host it runs on (neither
`params['context']`'s host, nor an `input_context` or `config` argument) gets sharded by
batch: host h keeps batches h, h+H, h+2H, ... of its dataset, so no example is evaluated
twice; in training legacy fed every host the same stream then, and so does this module, with
a warning.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import queue
import sys
import threading
import time
from typing import Any, Callable

import tensorflow as tf

from tpu_estimator_compat import log as logging
from tpu_estimator_compat._tf import device_iterators as _device_iterators
from tpu_estimator_compat._tf import host_iterators as _host_iterators
from tpu_estimator_compat._tf import patches as _tf_patches
from tpu_estimator_compat.cluster import workers as cluster_lib
from tpu_estimator_compat.inputs.call import (HeldValues, call_input_fn, plain_graph,
                                              to_dataset)
from tpu_estimator_compat.inputs.context import LOCAL_HOST, BatchPlan
from tpu_estimator_compat.inputs.pad import BatchAxes, pad_and_mask, stack_parts
from tpu_estimator_compat.inputs import queue_input
from tpu_estimator_compat.tpu_config import InputPipelineConfig

_TRAIN = "train"  # ModeKeys.TRAIN; specs are not this module's business.


def _host_device(strategy: tf.distribute.Strategy,
                 input_context: tf.distribute.InputContext) -> str:
    """The CPU of the host this input pipeline runs on, for `current_input_fn_deployment`."""
    try:
        devices = list(strategy.extended.worker_devices)
    except (RuntimeError, NotImplementedError):  # The default strategy has none to report.
        return LOCAL_HOST
    if not devices:
        return LOCAL_HOST
    if cluster_lib.is_multi_client(strategy):
        device = devices[0]  # Only this worker's own devices are listed.
    else:
        per_host = max(1, len(devices) // max(1, input_context.num_input_pipelines))
        device = devices[min(len(devices) - 1, input_context.input_pipeline_id * per_host)]
    spec = tf.DeviceSpec.from_string(device)
    return spec.replace(device_type="CPU", device_index=0).to_string()


def _share_by_host(dataset: tf.data.Dataset, input_context: tf.distribute.InputContext, *,
                   mode: str, plan: BatchPlan, shards_itself: bool) -> tf.data.Dataset:
    """Each host's share of the data when input_fn does not pick it (see module docstring)."""
    hosts = input_context.num_input_pipelines
    host = input_context.input_pipeline_id
    if hosts <= 1 or plan.pipeline == InputPipelineConfig.BROADCAST:
        return dataset
    if shards_itself:
        logging.info("%s input on host %d of %d: input_fn reads which host it runs on, so "
                     "this host gets what its input_fn yields.", mode, host, hosts)
        return dataset
    if mode == _TRAIN:
        logging.warning(
            "train input on host %d of %d: input_fn does not read which host it runs on, so "
            "every host feeds the same examples (as legacy TPU pods did). To give each host "
            "its own share, shard in input_fn: `dataset.shard(params['context'].num_hosts, "
            "params['context'].current_host)`.", host, hosts)
        return dataset
    logging.info("%s input on host %d of %d: input_fn does not read which host it runs on, "
                 "so this host takes batches %d, %d, %d, ... of its dataset; every example is "
                 "used once.", mode, host, hosts, host, host + hosts, host + 2 * hosts)
    return dataset.shard(hosts, host)


def host_dataset(input_fn: Callable[..., Any], input_context: tf.distribute.InputContext,
                 *, params: dict[str, Any], config: Any, mode: str, plan: BatchPlan,
                 use_tpu: bool, input_device: str, repeat_tensors: bool = True,
                 pad: bool = False, batch_axis: BatchAxes = BatchAxes(),
                 fed_to_devices: bool = False,
                 held: list[HeldValues] | None = None,
                 stacked: list[bool] | None = None) -> tf.data.Dataset:
    """Calls input_fn for one host and returns that host's dataset of per-replica batches.

    `distribute` calls it once per host through the strategy; a parameter-server cluster
    calls it once per worker (`worker_dataset_fn`). See `distribute` for the arguments;
    `fed_to_devices` says the dataset feeds a MultiDeviceIterator (see
    `_without_default_autotune`); `held` receives input_fn's Python values, kept out of the
    dataset (`call.HeldValues`). With `stacked` (a list; one host splitting its batches per
    replica itself, `HostSplitDataset`), a PER_HOST_V1 host batch of static shapes is not
    rebatched but reshaped into its replicas' batches stacked on a new axis 0, and whether
    input_fn's dataset never ends is appended to `stacked`.
    """
    if not (use_tpu and plan.pipeline == InputPipelineConfig.PER_HOST_V1):
        batch_axis = BatchAxes()
    reads: list[bool] = []
    iterated: list[tuple[Any, Any]] = []

    def call() -> Any:
        return call_input_fn(input_fn, params=params, config=config, mode=mode, plan=plan,
                             input_context=input_context, use_tpu=use_tpu,
                             input_device=input_device, on_host_read=lambda: reads.append(True))

    try:
        with _tf_patches.applied("inputs.iterator_get_next", iterated), \
                _tf_patches.applied("inputs.initializable_iterator"), \
                _tf_patches.applied("random_streams.explicit_seeds"):
            result = call()
        dataset = to_dataset(result, repeat_tensors=repeat_tensors, iterated=iterated,
                             held=held)
    except (RuntimeError, ValueError) as error:
        if not queue_input.is_queue_refusal(error):
            raise
        # TF1 queue-runner input: legacy's session ran it; a session of its own does here.
        result = dataset = queue_input.queue_dataset(
            call, seed=getattr(config, "tf_random_seed", None))
    if (mode == "infer" and repeat_tensors and not isinstance(result, tf.data.Dataset)
            and _cardinality(dataset) == tf.data.INFINITE_CARDINALITY):
        logging.legacy_warning("Input graph does not use tf.data.Dataset or contain a "
                               "QueueRunner. That means predict yields forever. This is "
                               "probably a mistake.")
    dataset = _share_by_host(dataset, input_context, mode=mode, plan=plan,
                             shards_itself=bool(reads))
    endless = _cardinality(dataset) == tf.data.INFINITE_CARDINALITY
    if pad:
        dataset = pad_and_mask(dataset, plan.for_input_fn, batch_axis)
    dataset, stacks = _rebatched(dataset, plan, batch_axis, stacked is not None)
    if stacks:
        stacked.append(endless)
    if plan.pipeline == InputPipelineConfig.BROADCAST and plan.num_replicas > 1:
        # Every replica of this host takes the same whole batch, as the broadcast infeed
        # did: each element is handed out once per local replica.
        copies = max(1, plan.num_replicas // plan.num_hosts)
        dataset = dataset.flat_map(plain_graph(
            lambda *element: tf.data.Dataset.from_tensors(
                element if len(element) > 1 else element[0]).repeat(copies)))
    if endless and _cardinality(dataset) != tf.data.INFINITE_CARDINALITY:
        # rebatch/flat_map report UNKNOWN; keep the loop's fast path (`is_endless`).
        dataset = dataset.apply(
            tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY))
    if fed_to_devices:
        dataset = _without_default_autotune(dataset)
    return dataset


def _rebatched(dataset: tf.data.Dataset, plan: BatchPlan, batch_axis: BatchAxes,
               may_stack: bool) -> tuple[tf.data.Dataset, bool]:
    """PER_HOST_V1: each host batch as its replicas' batches, in replica order; with
    `may_stack`, stacked on a new axis 0 when it can be (then True)."""
    if plan.rebatch_to is None:
        return dataset, False
    parts = plan.for_input_fn // plan.rebatch_to
    if batch_axis.axes is not None:
        return dataset.flat_map(plain_graph(
            lambda *element: batch_axis.split(
                element if len(element) > 1 else element[0], parts))), False
    if may_stack and plan.num_hosts == 1 and all(
            type(spec) is tf.TensorSpec and spec.shape.is_fully_defined()  # noqa: E721
            and spec.shape.rank and spec.shape[0] == plan.for_input_fn
            for spec in tf.nest.flatten(dataset.element_spec)):
        # `rebatch(...).batch(parts)` without rebatch's own traced map (issue 45).
        return stack_parts(dataset, parts), True
    return dataset.rebatch(plan.rebatch_to), False


def worker_dataset_fn(input_fn: Callable[..., Any], *, params: dict[str, Any], config: Any,
                      mode: str, plan: BatchPlan, use_tpu: bool,
                      batch_axis: BatchAxes = BatchAxes()
                      ) -> Callable[[int, tf.distribute.InputContext], tf.data.Dataset]:
    """`dataset_for(worker, input_context)`: one parameter-server worker's `host_dataset`.

    A parameter-server cluster (`session/parameter_servers.py`) calls input_fn once per
    worker, each with that worker's InputContext; the batch plan counts the cluster's input
    pipelines and replicas, and `params['context']` names the worker's CPU.
    """

    def dataset_for(index: int, context: tf.distribute.InputContext) -> tf.data.Dataset:
        hosts = dataclasses.replace(plan, num_hosts=context.num_input_pipelines,
                                    num_replicas=context.num_replicas_in_sync)
        return host_dataset(input_fn, context, params=params, config=config, mode=mode,
                            plan=hosts, use_tpu=use_tpu,
                            input_device=cluster_lib.worker_device(index),
                            batch_axis=batch_axis)

    return dataset_for


@dataclasses.dataclass(frozen=True)
class DistributedInput:
    """A distributed dataset from `distribute_input`, and the batches one replica gets.

    `replica_spec` is the element spec of one replica's batches as input_fn's dataset
    declared them (static batch sizes included). An iterator over several replicas that
    checks for the end of input loses static batch sizes (its values may be empty dummies);
    the loop restores them from this spec, as legacy's fixed-shape TPU infeed gave them.
    """

    dataset: Any
    replica_spec: Any
    known_endless: bool | None = None  # Where `dataset` cannot say (parameter servers).
    # input_fn's Python values, which the step gives model_fn as they are (`wrap_step`).
    held: HeldValues | None = None

    @property
    def endless(self) -> bool:
        if self.known_endless is not None:
            return self.known_endless
        return is_endless(self.dataset)

    @property
    def spec_key(self) -> str:
        """A hashable key of `replica_spec` (and of the held values a trace bakes in):
        compiled loops are kept per input shape."""
        return repr(self.replica_spec) + ("" if self.held is None else repr(self.held))

    def wrap_step(self, step: Callable[..., Any]) -> Callable[..., Any]:
        """`step(features, labels, *rest)` given input_fn's held Python values back."""
        return step if self.held is None else self.held.wrap(step)


def distribute(strategy: tf.distribute.Strategy, input_fn: Callable[..., Any],
               **kwargs: Any) -> Any:
    """`distribute_input(...).dataset`: the per-replica distributed dataset alone."""
    return distribute_input(strategy, input_fn, **kwargs).dataset


def distribute_input(strategy: tf.distribute.Strategy, input_fn: Callable[..., Any], *,
                     params: dict[str, Any], config: Any, mode: str, plan: BatchPlan,
                     use_tpu: bool, repeat_tensors: bool = True,
                     pad: bool = False,
                     batch_axis: BatchAxes = BatchAxes(),
                     split_on_host: bool = True) -> DistributedInput:
    """Calls input_fn once per host and returns the per-replica distributed dataset.

    With `pad` (evaluation and prediction on several replicas) elements become dicts
    `{features, [labels], padding_mask}` of static batch size, followed by endless fully
    masked batches (see `pad_and_mask`). `batch_axis` is honoured where legacy honoured it:
    PER_HOST_V1 with use_tpu=True, whose host batches are split (and padded) along each
    tensor's batch axis; elsewhere legacy ignored it, and so does this.

    On one replica input_fn's Python values (`{'x': [[1], [1]]}`, `dict(), None`) stay out
    of the dataset and reach model_fn as they are (`DistributedInput.held`), as legacy's
    one-device graph gave them; on several replicas or padded batches (legacy took only
    datasets or tensors there) they are tensors, fed like the others.

    Padded input, and training input of fixed shapes, on several CPU replicas of one
    process (`_splits_on_host`) is read through one host iterator and split per replica in
    the step (`HostSplitDataset`), unless `split_on_host` is False; each replica gets the
    batches the strategy's own iterator gives it, and training ends where it did (see
    `_stackable`).
    """
    fed_to_devices = _feeds_devices(strategy)
    replica_specs: list[Any] = []
    held: list[HeldValues] | None = (
        [] if plan.num_replicas == 1 and not pad and not batch_axis.axes else None)
    on_host = (pad or mode == _TRAIN) and split_on_host and _splits_on_host(strategy)
    stacked: list[bool] | None = [] if on_host else None

    def dataset_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        dataset = host_dataset(input_fn, input_context, params=params, config=config,
                               mode=mode, plan=plan, use_tpu=use_tpu,
                               input_device=_host_device(strategy, input_context),
                               repeat_tensors=repeat_tensors, pad=pad, batch_axis=batch_axis,
                               fed_to_devices=fed_to_devices, held=held, stacked=stacked)
        replica_specs.append(dataset.element_spec)
        return dataset

    if on_host:
        # One process, one input pipeline: the InputContext and device the strategy uses.
        replicas = strategy.num_replicas_in_sync
        context = tf.distribute.InputContext(1, 0, replicas)
        device = _host_device(strategy, context)
        with tf.device(device):
            host = dataset_fn(context)
        if stacked:  # Already [replicas, per-replica batch, ...].
            spec = tf.nest.map_structure(lambda s: tf.TensorSpec(s.shape[1:], s.dtype),
                                         host.element_spec)
            # Padded input ends only when input_fn gave none (as `rebatch` said, not known
            # endless unless input_fn's was): the loop then checks for its end.
            return DistributedInput(HostSplitDataset.of(host, strategy, device, stacked=True),
                                    spec, known_endless=stacked[0])
        if _stackable(host):
            return DistributedInput(HostSplitDataset.of(host, strategy, device),
                                    replica_specs[0])
        dataset_fn = lambda _: host  # noqa: E731  input_fn was called; the strategy feeds it.
    options = tf.distribute.InputOptions(experimental_fetch_to_device=True)
    dataset = strategy.distribute_datasets_from_function(dataset_fn, options)
    return DistributedInput(dataset, replica_specs[0] if replica_specs else None,
                            held=held[0] if held else None)


@dataclasses.dataclass(frozen=True, eq=False)
class HostSplitDataset:
    """Per-replica batches stacked one per replica on the host (`_tf/host_iterators.py`).

    A MirroredStrategy's own iterator hands element k of the host's dataset of per-replica
    batches to replica k mod R, through one pipeline per device, each built in a
    `MakeIterator` of its own (~0.15 s of every call on 8 replicas). Here
    R consecutive elements are stacked (`batch(R)`) and read by one host iterator, whose
    element the compiled step unstacks, row r to replica r: the same batches on the same
    replicas. `prefetch(1)` keeps the host's next element being made while a step runs.
    """

    dataset: tf.data.Dataset
    replicas: int
    strategy: tf.distribute.Strategy
    device: str

    @classmethod
    def of(cls, host: tf.data.Dataset, strategy: tf.distribute.Strategy, device: str,
           stacked: bool = False) -> "HostSplitDataset":
        """`host`'s per-replica batches (`stacked`: already stacked), R at a time."""
        replicas = strategy.num_replicas_in_sync
        with tf.device(device):
            if not stacked:
                host = host.batch(replicas, drop_remainder=True)
            stacked = host.prefetch(1)
        return cls(stacked, replicas, strategy, device)

    @property
    def cardinality(self) -> tf.Tensor:
        return self.dataset.cardinality()

    def iterator(self) -> _host_iterators.HostSplitIterator:
        with tf.device(self.device):
            return _host_iterators.HostSplitIterator(iter(self.dataset), self.replicas,
                                                     self.strategy)

    def __iter__(self) -> _host_iterators.HostSplitIterator:
        return self.iterator()


def _splits_on_host(strategy: tf.distribute.Strategy) -> bool:
    """Whether one host iterator split in the step feeds this strategy's replicas.

    A MirroredStrategy over several CPU devices of one process: their batches are in host
    memory whichever iterator made them. On GPUs the strategy's own iterator copies each
    replica's next batch to its device ahead of the step, which a split in the step would
    not; on several workers each worker has its own iterator.
    """
    if (not isinstance(strategy, tf.distribute.MirroredStrategy)
            or cluster_lib.is_multi_client(strategy)):
        return False
    try:
        devices = [tf.DeviceSpec.from_string(d) for d in strategy.extended.worker_devices]
    except (RuntimeError, NotImplementedError):
        return False
    return (len(devices) > 1 and all(d.device_type == "CPU" for d in devices)
            and len({(d.job, d.replica, d.task) for d in devices}) == 1)


def _stackable(dataset: tf.data.Dataset) -> bool:
    """Whether R consecutive elements stack into one: dense tensors of fully defined shapes.

    Padded input ends, if ever, before its first element (no input at all), never with some
    replicas fed and others not, so stacking R elements at a time drops nothing. Training
    input of fixed shapes may end after k < R elements of a round: the strategy's iterator
    then hands replicas k..R-1 empty dummies, and the train loop runs no step some replica
    had no batch for (`loop.plumbing.FixedBatches`), so training ends before that round
    either way; `batch(R, drop_remainder=True)` ends there too. Batches of varying size are
    left to the strategy's iterator, whose partial rounds do run a step.
    """
    return all(type(spec) is tf.TensorSpec and spec.shape.is_fully_defined()  # noqa: E721
               for spec in tf.nest.flatten(dataset.element_spec))


def _cardinality(dataset: tf.data.Dataset) -> int | None:

    return tf.get_static_value(dataset.cardinality())


def is_endless(dataset: Any) -> bool:
    """Whether a dataset from `distribute` is known never to end (`repeat()` without count).

    The train loop then needs no end-of-input check per step.
    """
    cardinality = dataset.cardinality  # A property on distributed datasets, a method on
    if callable(cardinality):          # the plain dataset of the default strategy.
        cardinality = cardinality()
    return bool(tf.get_static_value(cardinality) == tf.data.INFINITE_CARDINALITY)


def _feeds_devices(strategy: tf.distribute.Strategy) -> bool:
    """Whether TF feeds this strategy's replicas through a MultiDeviceIterator.

    Every strategy but the default one does; the default strategy iterates the dataset itself.
    """
    try:
        return bool(strategy.extended.worker_devices)
    except (RuntimeError, NotImplementedError):  # The default strategy has no devices.
        return False


def _without_default_autotune(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """Turns tf.data autotuning off unless input_fn chose it, so teardown cannot stall.

    The MultiDeviceIterator's host-side iterator over this dataset has the same autotune
    thread as its per-device pipelines (see `iterate`), and deleting it can wait out that
    thread's sleep of up to 60 s. `tf.data.AUTOTUNE` values in input_fn keep working: they
    take tf.data's static defaults (parallelism from the core count) instead of being tuned
    while the job runs. Element order does not depend on it. An input_fn that sets
    `options.autotune.enabled = True` itself keeps autotuning, and the risk of that stall.
    """
    if dataset.options().autotune.enabled is not None:
        return dataset
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def iterate(dataset: Any,
            generators: _device_iterators.DeviceGeneratorCache | None = None) -> Any:
    """`iter(dataset)` for a dataset from `distribute`, whose deletion does not stall.

    A `HostSplitDataset` gets its one host iterator (`HostSplitDataset.iterator`).
    On several devices TF builds a MultiDeviceIterator: one pipeline per device on top of the
    host pipeline, each with a tf.data autotune thread whose sleep doubles up to 60 s while
    the iterator lives and which the iterator's deletion waits for, device after device (a
    TF 2.21 race; `device_dataset_without_autotune`). Deleting an 8-replica
    iterator took as long as it had been used (162 s after 100 s). The per-device pipelines
    are a fixed `prefetch(1)` with nothing to tune, so autotuning is turned off in them while
    the iterator is built; which element each replica gets is unchanged.

    With `generators` (kept by the caller across train/evaluate/predict calls), the
    functions of those per-device pipelines are traced once per device and element spec and
    reused by every later iterator (`cached_device_generators`); without it TF traces six
    per device for each iterator.
    """
    if isinstance(dataset, HostSplitDataset):
        return dataset.iterator()  # One host iterator: no per-device pipelines.
    with contextlib.ExitStack() as patched:
        patched.enter_context(_tf_patches.applied("inputs.device_pipelines"))
        if generators is not None:
            patched.enter_context(_tf_patches.applied("inputs.device_generators", generators))
        return iter(dataset)


def cached_device_generators(original: Any,
                             generators: _device_iterators.DeviceGeneratorCache) -> Any:
    """The replacement of patch `inputs.device_generators`: per-device generators whose
    functions `generators` traced once (see `_tf/device_iterators.py`); what they yield is
    TF's own generator over the same shard."""
    del original
    return generators.generator


def device_dataset_without_autotune(original: Callable[..., Any]) -> Callable[..., Any]:
    """The replacement of patch `inputs.device_pipelines`: per-device pipelines, untuned.

    A MultiDeviceIterator is one host pipeline plus, per device, a pipeline TF builds itself
    in `multi_device_iterator_ops._create_device_dataset` (a generator reading the host
    buffer, then `prefetch(1)`), with default options, so each runs a tf.data autotune thread.
    That thread sleeps between optimisations for a period doubling from 10 ms to 60 s, and on
    TF 2.21 it often misses the iterator's cancellation (it is woken before the
    CancellationManager reports cancelled, and sleeps out the rest of its period); the
    iterator's destructor joins it, one device after another. These pipelines have nothing to
    tune (a fixed buffer of 1), so the builder turns autotuning off in them. A generator
    from `cached_device_generators` is built into the same pipeline here.
    """
    options = tf.data.Options()
    options.autotune.enabled = False

    def without_autotune(prototype: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(prototype, _device_iterators.DeviceGenerator):
            dataset = _device_iterators.device_dataset(prototype, *args, **kwargs)
        else:
            dataset = original(prototype, *args, **kwargs)
        return dataset.with_options(options)

    return without_autotune


class _Releases:
    """Drops iterators on a thread of their own, once nothing else holds them.

    A tf.data iterator with autotuning (the default, on one device and wherever input_fn
    asked for it) has a thread that sleeps between optimisations for a period doubling from
    10 ms to 60 s and often misses the iterator's cancellation (see
    `device_dataset_without_autotune`); the iterator's deletion joins it. Measured on one
    device (TF 2.21 and 2.15 alike): deleting an iterator used for 6 s took 4.3-4.5 s in
    about one run in four, and a 20,000-step MLP train() call ended 1.6 s after its last
    loop. Deleted here, that wait overlaps what the caller does next; a process exits only
    once the wait in progress is over (at exit, as it would have).
    """

    _WAIT_FOR_OWNERS_SECS = 10.0  # Then the last owner deletes it, wherever that is.

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._exiting = False

    def release(self, obj: Any) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="iterator_release",
                                                daemon=True)
                self._thread.start()
                atexit.register(self._finish)
        self._queue.put([obj])

    def _run(self) -> None:
        while True:
            box = self._queue.get()
            if box is None:
                return
            deadline = time.monotonic() + self._WAIT_FOR_OWNERS_SECS
            # References: the box, `getrefcount`'s argument, and any owner still holding it.
            while (sys.getrefcount(box[0]) > 2 and time.monotonic() < deadline
                   and not self._exiting):
                time.sleep(0.01)
            box.clear()

    def _finish(self) -> None:
        """At exit: waits for a deletion in progress, not for owners that remain."""
        self._exiting = True
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join()


_RELEASES = _Releases()


def release_off_thread(iterator: Any) -> None:
    """Deletes `iterator` on another thread once the caller's references to it are gone,
    so a deletion that waits on tf.data's autotune thread (`_Releases`) does not hold up the
    train/evaluate/predict call that used it. Drop every reference soon after calling."""
    if iterator is not None:
        _RELEASES.release(iterator)
