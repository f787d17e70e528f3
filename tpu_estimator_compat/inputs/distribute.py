"""Input distribution: legacy `input_fn(params)` to a per-replica distributed dataset.

Owns the legacy batch-size rules (`params['batch_size']` per `InputPipelineConfig`), calling
the user's input_fn once per input pipeline (host) through
`strategy.distribute_datasets_from_function`, turning what it returns (a `tf.data.Dataset` or
a `(features, labels)` tuple of tensors) into a dataset of per-replica batches, the legacy
`params['context']` object, and the iterators over those datasets (`iterate`: built so that
deleting one does not stall; `_tf_patches` swaps in the per-device pipeline builder made
here while one is built; `release_off_thread`: deleted where a stall cannot hold up the
call). It knows nothing of model_fns, specs or the training loop.

The rules, for a global batch B, R replicas and H hosts (legacy `tpu_context.py`):

| pipeline      | input_fn gets | called      | model_fn gets |
|---------------|---------------|-------------|---------------|
| PER_HOST_V1   | B / H         | per host    | B / R         |
| PER_HOST_V2   | B / R         | per host    | B / R         |
| PER_SHARD_V1  | B / R         | per replica | B / R         |
| BROADCAST     | B             | per host    | B             |
| `use_tpu=False` on one replica | B | once     | B             |

PER_HOST_V1 batches are split into R/H consecutive slices, replica i taking slice i, as the
TPU infeed did. PER_SHARD_V1 is served by one pipeline per host whose batches are per replica,
which is what a per-core input_fn produced.

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
import copy
import dataclasses
import inspect
import queue
import sys
import threading
import time
from typing import Any, Callable, Sequence

import tensorflow as tf

from tpu_estimator_compat._tf import patches as _tf_patches
from tpu_estimator_compat.cluster import workers as cluster_lib
from tpu_estimator_compat import shapes as shapes_lib
from tpu_estimator_compat.config import InputPipelineConfig
from tpu_estimator_compat import log as logging

BATCH_SIZE_KEY = "batch_size"
CONTEXT_KEY = "context"
USE_TPU_KEY = "use_tpu"


def copy_params(params: Any) -> Any:
    """A deep copy of the user's `params`, keeping its type, as legacy Estimator made.

    Legacy kept `copy.deepcopy(params)`: a dict subclass (an attribute-access config such as
    tensorflow/tpu QANet's `utils.Config`) or an `HParams` reached model_fn and input_fn as
    that type, so `params.dataset.train_batch_size` worked there.
    """
    return {} if params is None else copy.deepcopy(params)


def set_param(params: Any, key: str, value: Any) -> None:
    """Sets `params[key]` the way legacy TPUEstimator did: HParams through their own API.

    A dict (subclass) is tested first: legacy asked `hasattr(params, 'set_hparam')`, which an
    attribute-access dict whose `__getattr__` is `dict.__getitem__` (QANet's `Config`)
    answers with a KeyError on Python 3 (Python 2's `hasattr`, which these scripts were
    written for, swallowed it and took the dict branch).
    """
    if not isinstance(params, dict) and hasattr(params, "set_hparam"):
        if key in params:
            params.set_hparam(key, value)
        else:
            params.add_hparam(key, value)
    else:
        params[key] = value
_TRAIN = "train"  # ModeKeys.TRAIN; specs are not this module's business.


@dataclasses.dataclass(frozen=True)
class BatchPlan:
    """Batch sizes for one mode, derived once from the legacy rules."""

    global_batch_size: int | None
    for_input_fn: int | None
    for_model_fn: int | None
    pipeline: int
    num_replicas: int
    num_hosts: int
    rebatch_to: int | None  # PER_HOST_V1: split each host batch into per-replica batches.


def plan_batches(*, global_batch_size: int | None, batch_name: str, num_replicas: int,
                 num_hosts: int, pipeline: int, use_tpu: bool) -> BatchPlan:
    """Applies the legacy batch-size rules, validating divisibility first.

    Args:
      global_batch_size: `train_batch_size` / `eval_batch_size` / `predict_batch_size`.
      batch_name: the constructor argument's name, for error messages.
      num_replicas: replicas in sync on the chosen strategy.
      num_hosts: input pipelines (workers).
      pipeline: an `InputPipelineConfig` value.
      use_tpu: legacy `use_tpu`; with one replica and `use_tpu=False` input_fn gets B.
    """
    if global_batch_size is None:
        return BatchPlan(None, None, None, pipeline, num_replicas, num_hosts, None)
    if num_replicas > 1 or use_tpu:
        if global_batch_size % num_replicas:
            raise ValueError(
                f"`{batch_name}` ({global_batch_size}) must be divisible by the number of "
                f"replicas ({num_replicas}). Use a multiple of {num_replicas}. (Legacy: "
                f"batch size {global_batch_size} must be divisible by number of replicas "
                f"{num_replicas}.)")
    per_replica = global_batch_size // num_replicas
    if num_replicas == 1 and not use_tpu:
        return BatchPlan(global_batch_size, global_batch_size, global_batch_size, pipeline,
                         1, num_hosts, None)
    if pipeline == InputPipelineConfig.BROADCAST:
        return BatchPlan(global_batch_size, global_batch_size, global_batch_size, pipeline,
                         num_replicas, num_hosts, None)
    if pipeline == InputPipelineConfig.PER_HOST_V1:
        per_host = global_batch_size // num_hosts
        rebatch = per_replica if per_host != per_replica else None
        return BatchPlan(global_batch_size, per_host, per_replica, pipeline, num_replicas,
                         num_hosts, rebatch)
    return BatchPlan(global_batch_size, per_replica, per_replica, pipeline, num_replicas,
                     num_hosts, None)


class TPUContext:
    """The legacy `params['context']` surface, backed by a `tf.distribute.InputContext`.

    ResNet and BERT input_fns read it to shard files by host:
    `dataset.shard(ctx.num_hosts, ctx.current_host)`. Reading which host this is calls
    `on_host_read`, so the caller knows the input_fn shards by host itself.
    """

    def __init__(self, input_context: tf.distribute.InputContext | None, plan: BatchPlan,
                 mode: str, *, input_device: str | None = None,
                 on_host_read: Callable[[], None] | None = None) -> None:
        self._input_context = input_context
        self._plan = plan
        self._mode = mode
        self._input_device = input_device or _LOCAL_HOST
        self._on_host_read = on_host_read

    def _host_read(self) -> None:
        if self._on_host_read is not None:
            self._on_host_read()

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def num_replicas(self) -> int:
        return self._plan.num_replicas

    @property
    def num_hosts(self) -> int:
        return self._plan.num_hosts

    @property
    def current_host(self) -> int:
        """This input_fn call's host, 0..num_hosts-1 (the InputContext's input_pipeline_id)."""
        self._host_read()
        return self._input_context.input_pipeline_id if self._input_context else 0

    @property
    def num_of_replicas_per_host(self) -> int:
        return max(1, self._plan.num_replicas // self._plan.num_hosts)

    @property
    def num_of_cores_per_host(self) -> int:
        return self.num_of_replicas_per_host

    @property
    def input_context(self) -> tf.distribute.InputContext | None:
        self._host_read()
        return self._input_context

    def current_input_fn_deployment(self) -> tuple[str, int, int, int]:
        """(host device, invocation index, total invocations, replicas fed), as legacy.

        input_fn runs once per host here in every pipeline, so the invocation is the host
        (PER_SHARD_V1 included: one call feeds all of a host's replicas, and sharding by
        these numbers keeps hosts disjoint). BROADCAST keeps legacy's (0, 1, all replicas):
        every host must produce the same batches there, so it must not shard by host.
        """
        if self._plan.pipeline == InputPipelineConfig.BROADCAST:
            return self._input_device, 0, 1, self._plan.num_replicas
        return (self._input_device, self.current_host, self.num_hosts,
                self.num_of_replicas_per_host)

    @property
    def device_assignment(self) -> None:
        return None


def _accepted_args(fn: Callable[..., Any]) -> set[str]:
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


def check_input_fn_signature(input_fn: Callable[..., Any]) -> None:
    """Legacy TPUEstimator passes the batch size through `params`; input_fn must take it."""
    if "params" not in _accepted_args(input_fn):
        raise ValueError(
            f"input_fn ({input_fn}) does not include params argument, required by "
            "TPUEstimator to pass batch size as params['batch_size']. Define it as "
            "`def input_fn(params):`.")


def call_input_fn(input_fn: Callable[..., Any], *, params: dict[str, Any], config: Any,
                  mode: str, plan: BatchPlan, input_context: tf.distribute.InputContext | None,
                  use_tpu: bool, input_device: str | None = None,
                  on_host_read: Callable[[], None] | None = None) -> Any:
    """Calls input_fn with what it asks for: `params`, and optionally `config`, `mode`.

    `on_host_read` is called if input_fn can know its host: it reads
    `params['context']`'s host, or takes `input_context` or `config` (which has `task_id`).
    """
    check_input_fn_signature(input_fn)
    args = _accepted_args(input_fn)
    params = copy_params(params)
    if plan.for_input_fn is not None:
        set_param(params, BATCH_SIZE_KEY, plan.for_input_fn)
    if use_tpu:
        set_param(params, CONTEXT_KEY,
                  TPUContext(input_context, plan, mode, input_device=input_device,
                             on_host_read=on_host_read))
    if on_host_read is not None and args & {"input_context", "config"}:
        on_host_read()
    kwargs: dict[str, Any] = {"params": params}
    if "config" in args:
        kwargs["config"] = copy.deepcopy(config)
    if "mode" in args:
        kwargs["mode"] = mode
    if "input_context" in args:
        kwargs["input_context"] = input_context
    return input_fn(**kwargs)


def recording_get_next(original: Callable[..., Any], records: list) -> Callable[..., Any]:
    """The replacement of patch `inputs.iterator_get_next`: notes (dataset, element)."""

    def get_next(self: Any) -> Any:
        element = original(self)
        dataset = getattr(self, "_dataset", None)
        if dataset is not None:
            records.append((dataset, element))
        return element

    get_next.__doc__ = original.__doc__
    return get_next


class _EagerInitializableIterator:
    """`make_initializable_iterator()` in an input_fn that runs eagerly: an eager iterator.

    Its `initializer` is None (nothing to run: it starts at the first element, where the
    initializer would have put it); `get_next()` goes through the eager iterator, so the
    tensors it gives stand for the dataset's elements (`inputs.iterator_get_next`).
    """

    initializer = None

    def __init__(self, dataset: Any) -> None:
        self._iterator = iter(dataset)

    def get_next(self, name: str | None = None) -> Any:
        del name
        return self._iterator.get_next()

    def __getattr__(self, name: str) -> Any:  # element_spec, output_types, output_shapes...
        return getattr(self._iterator, name)


def eager_initializable_iterator(original: Callable[..., Any]) -> Callable[..., Any]:
    """The replacement of patch `inputs.initializable_iterator`."""

    def make_initializable_iterator(self: Any, shared_name: str | None = None) -> Any:
        if not tf.executing_eagerly():
            return original(self, shared_name)
        return _EagerInitializableIterator(self)

    make_initializable_iterator.__doc__ = original.__doc__
    return make_initializable_iterator


def _from_iterator(result: Any, records: Sequence[tuple[Any, Any]]) -> Any:
    """The dataset `result`'s tensors were drawn from by `get_next()`, restructured as
    `result`; None when they came from no iterator (constants: the same batch every step).

    In a TF1 graph `iterator.get_next()` gave the next batch at every session.run; input_fn
    runs eagerly here, where it gives the first batch's values.
    """
    leaves = tf.nest.flatten(result)
    for dataset, element in records:
        positions = {id(t): i for i, t in enumerate(tf.nest.flatten(element))}
        if leaves and all(id(leaf) in positions for leaf in leaves):
            picks = [positions[id(leaf)] for leaf in leaves]

            def restructure(*components: Any, picks: list[int] = picks) -> Any:
                flat = tf.nest.flatten(components)
                return tf.nest.pack_sequence_as(result, [flat[p] for p in picks])

            logging.info("input_fn returned iterator.get_next() tensors: every step takes "
                         "the next element of their dataset, as in a TF1 graph.")
            return dataset.map(_plain_graph(restructure))
    drawn = {id(t) for _, element in records for t in tf.nest.flatten(element)}
    if any(id(leaf) in drawn for leaf in leaves):
        raise ValueError(
            "input_fn returned tensors computed from `iterator.get_next()` together with "
            "others. In a TF1 graph they gave the next batch at every step; "
            "tpu_estimator_compat calls input_fn once, eagerly, so they would hold the first "
            "batch for every step. Return the dataset itself (do the computation in "
            "`dataset.map(...)`), or return the get_next() tensors unchanged.")
    return None


def to_dataset(result: Any, *, repeat_tensors: bool,
               iterated: Sequence[tuple[Any, Any]] = ()) -> tf.data.Dataset:
    """Turns what input_fn returned into a dataset of (features, labels) or features.

    A `(features, labels)` tuple of tensors stands for "the same batch every step", as the
    tensors did in a TF1 graph, so it repeats; tensors `iterator.get_next()` drew from a
    dataset (`iterated`: the (dataset, element) pairs input_fn's get_next calls gave) stand
    for that dataset's elements, one per step.
    """
    if isinstance(result, tf.data.Dataset):
        return result
    if iterated and isinstance(result, (tuple, list, tf.Tensor, dict)):
        drawn = _from_iterator(tuple(result) if isinstance(result, list) else result, iterated)
        if drawn is not None:
            return drawn
    if isinstance(result, (tuple, list)) and len(result) == 2:
        dataset = tf.data.Dataset.from_tensors(tuple(result))
    elif isinstance(result, (tf.Tensor, dict)):
        dataset = tf.data.Dataset.from_tensors(result)
    else:
        raise TypeError(
            "input_fn must return a `tf.data.Dataset`, a `(features, labels)` tuple or "
            f"`features`; received {type(result).__name__}: {result!r:.200}.")
    return dataset.repeat() if repeat_tensors else dataset


def split_element(element: Any) -> tuple[Any, Any]:
    """(features, labels) from one dataset element; labels is None when absent."""
    if isinstance(element, (tuple, list)):
        if len(element) == 2:
            return element[0], element[1]
        if len(element) == 1:
            return element[0], None
        raise ValueError(
            f"input_fn's dataset yields a tuple of {len(element)} elements; expected "
            "`(features, labels)` or `features`. Return `(features, labels)`.")
    return element, None


MASK_KEY = "padding_mask"


def _plain_graph(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` for `Dataset.map`/`flat_map` as written: not converted by autograph.

    tf.data converts every mapped function with autograph, recursively through the helpers it
    calls; the shim's own have no tensor-dependent Python control flow, so the conversion
    changes nothing but costs each input pipeline's start: a 6th of an 8-replica model zoo
    test's own time went to transpiling `pad_and_mask`'s helpers (py-spy).
    """
    return tf.autograph.experimental.do_not_convert(fn)


def _as_dict(element: Any) -> dict[str, Any]:
    features, labels = split_element(element)
    out = {"features": features}
    if labels is not None:
        out["labels"] = labels
    return out


def _batch_major(tensor: tf.Tensor, axis: int, batch: int) -> bool:
    """False for a tensor that cannot be batch-major along `axis` (statically too long).

    The image models' "double transpose" flattens each batch of images into one vector
    (`tf.reshape(images, [-1])`, reshaped back in model_fn); legacy never padded those
    (its TPU evaluation ran a given number of full batches), and neither does this.
    """
    dims = shapes_lib.static_dims(tensor.shape)
    return not dims or len(dims) <= axis or dims[axis] is None or dims[axis] <= batch


def _rows(element: dict[str, Any], axes: "BatchAxes", batch: int) -> tf.Tensor:
    flat = tf.nest.flatten(element)
    for tensor, axis in zip(flat, axes.of(element)):
        if _batch_major(tensor, axis, batch):
            return _shape(tensor)[axis]
    return tf.constant(batch, tf.int64)  # Nothing batch-major: a full batch, as legacy ran.


def _shape(tensor: Any) -> tf.Tensor:
    if isinstance(tensor, tf.SparseTensor):  # Sparse features (tf.io.VarLenFeature).
        return tensor.dense_shape
    return tf.shape(tensor, out_type=tf.int64)


def _blank(tensor: Any) -> Any:
    """All padding: zeros, or a SparseTensor of the same dense shape with no values."""
    if isinstance(tensor, tf.SparseTensor):
        rank = tensor.shape.rank if tensor.shape.rank is not None else tf.size(tensor.dense_shape)
        return tf.SparseTensor(tf.zeros([0, rank], tf.int64), tf.zeros([0], tensor.dtype),
                               tensor.dense_shape)
    return tf.zeros_like(tensor)


def _pad_rows(tensor: tf.Tensor, batch: int, axis: int = 0) -> tf.Tensor:
    if isinstance(tensor, tf.SparseTensor):
        # Padding rows of a sparse feature hold no values: only its dense shape grows.
        shape = tf.tensor_scatter_nd_update(tensor.dense_shape, [[axis]],
                                            tf.constant([batch], tf.int64))
        return tf.SparseTensor(tensor.indices, tensor.values, shape)
    shape = tf.shape(tensor)
    missing = batch - shape[axis]
    filler = tf.fill(tf.tensor_scatter_nd_update(shape, [[axis]], [missing]),
                     tf.zeros([], tensor.dtype) if tensor.dtype != tf.string else "")
    padded = tf.concat([tensor, filler], axis)
    static = shapes_lib.static_dims(tensor.shape)
    if static:
        static[axis] = batch
        padded.set_shape(static)
    return padded


@dataclasses.dataclass(frozen=True)
class BatchAxes:
    """Which axis of each input tensor is its batch axis: TPUEstimator's `batch_axis`.

    Legacy took one int per tensor of `(features, labels)` flattened (`nest` order: dict
    features by sorted key, then labels), e.g. `(3, 0)` for HWCN images and their labels.
    None means axis 0 for every tensor.
    """

    axes: tuple[int, ...] | None = None

    def of(self, element: Any) -> list[int]:
        """The batch axis of each flattened tensor of `element` (same order as nest)."""
        flat = tf.nest.flatten(element)
        if self.axes is None:
            return [0] * len(flat)
        structure = element
        if isinstance(element, dict) and MASK_KEY in element:
            structure = {k: v for k, v in element.items() if k != MASK_KEY}
        count = len(tf.nest.flatten(structure))
        if len(self.axes) != count:
            raise ValueError(
                f"`batch_axis` has {len(self.axes)} entries ({self.axes}) but input_fn yields "
                f"{count} tensors (features, then labels, flattened). Give one axis per "
                "tensor, e.g. batch_axis=(3, 0) for HWCN images and their labels.")
        axes = list(self.axes)
        if structure is not element:  # The mask is a [batch] vector added by padding.
            axes = [axes[i] for i in range(count)]
            keys = sorted(element)
            mask_at = sum(len(tf.nest.flatten(element[k])) for k in keys[:keys.index(MASK_KEY)])
            axes.insert(mask_at, 0)
        return axes

    def split(self, element: Any, parts: int) -> tf.data.Dataset:
        """`parts` consecutive slices of one batch, each tensor cut along its batch axis."""
        flat = tf.nest.flatten(element)
        pieces = [tf.split(t, parts, axis=a) for t, a in zip(flat, self.of(element))]
        return tf.data.Dataset.from_tensor_slices(
            tf.nest.pack_sequence_as(element, [tf.stack(p) for p in pieces]))


def check_batch_axis(batch_axis: Any) -> BatchAxes:
    """Validates TPUEstimator's `batch_axis` argument the way a user can fix it."""
    if batch_axis is None:
        return BatchAxes()
    if (not isinstance(batch_axis, (tuple, list)) or not batch_axis
            or not all(isinstance(a, int) and not isinstance(a, bool) and a >= 0
                       for a in batch_axis)):
        raise ValueError(
            f"`batch_axis` must be a tuple of non-negative ints, one per tensor of "
            f"(features, labels); received {batch_axis!r}. E.g. batch_axis=(3, 0) for HWCN "
            "images and their labels.")
    return BatchAxes(tuple(batch_axis))


def pad_and_mask(dataset: tf.data.Dataset, batch: int,
                 axes: BatchAxes = BatchAxes()) -> tf.data.Dataset:
    """Pads every batch to `batch` rows with a boolean `padding_mask`, then pads forever.

    The real batches (mask True on real rows) are followed by an endless stream of all-masked
    batches, so every replica gets a full, static-shape batch at every step and the loop
    stops at the first step with no real row anywhere. Nothing is dropped or counted twice.
    Tensors are padded along their batch axis (`axes`).
    """
    dataset = dataset.map(_plain_graph(
        lambda *element: _as_dict(element if len(element) > 1 else element[0])))

    def pad(element: dict[str, Any]) -> dict[str, Any]:
        rows = _rows(element, axes, batch)
        flat = tf.nest.flatten(element)
        padded = tf.nest.pack_sequence_as(
            element, [_pad_rows(t, batch, a) if _batch_major(t, a, batch) else t
                      for t, a in zip(flat, axes.of(element))])
        padded[MASK_KEY] = tf.range(batch, dtype=tf.int64) < rows
        return padded

    def blank(element: dict[str, Any]) -> dict[str, Any]:
        element = tf.nest.map_structure(_blank, element)
        element[MASK_KEY] = tf.zeros_like(element[MASK_KEY])
        return element

    real = dataset.map(_plain_graph(pad))
    return real.concatenate(real.take(1).map(_plain_graph(blank)).cache().repeat())


_LOCAL_HOST = "/job:localhost/replica:0/task:0/device:CPU:0"


def _host_device(strategy: tf.distribute.Strategy,
                 input_context: tf.distribute.InputContext) -> str:
    """The CPU of the host this input pipeline runs on, for `current_input_fn_deployment`."""
    try:
        devices = list(strategy.extended.worker_devices)
    except (RuntimeError, NotImplementedError):  # The default strategy has none to report.
        return _LOCAL_HOST
    if not devices:
        return _LOCAL_HOST
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
                 fed_to_devices: bool = False) -> tf.data.Dataset:
    """Calls input_fn for one host and returns that host's dataset of per-replica batches.

    `distribute` calls it once per host through the strategy; a parameter-server cluster
    (`parameter_servers.py`) calls it once per worker. See `distribute` for the arguments;
    `fed_to_devices` says the dataset feeds a MultiDeviceIterator (see
    `_without_default_autotune`).
    """
    if not (use_tpu and plan.pipeline == InputPipelineConfig.PER_HOST_V1):
        batch_axis = BatchAxes()
    reads: list[bool] = []
    iterated: list[tuple[Any, Any]] = []
    with _tf_patches.applied("inputs.iterator_get_next", iterated), \
            _tf_patches.applied("inputs.initializable_iterator"):
        result = call_input_fn(input_fn, params=params, config=config, mode=mode, plan=plan,
                               input_context=input_context, use_tpu=use_tpu,
                               input_device=input_device,
                               on_host_read=lambda: reads.append(True))
    dataset = to_dataset(result, repeat_tensors=repeat_tensors, iterated=iterated)
    dataset = _share_by_host(dataset, input_context, mode=mode, plan=plan,
                             shards_itself=bool(reads))
    endless = _cardinality(dataset) == tf.data.INFINITE_CARDINALITY
    if pad:
        dataset = pad_and_mask(dataset, plan.for_input_fn, batch_axis)
    if plan.rebatch_to is not None and batch_axis.axes is not None:
        parts = plan.for_input_fn // plan.rebatch_to
        dataset = dataset.flat_map(_plain_graph(
            lambda *element: batch_axis.split(
                element if len(element) > 1 else element[0], parts)))
    elif plan.rebatch_to is not None:
        dataset = dataset.rebatch(plan.rebatch_to)
    if plan.pipeline == InputPipelineConfig.BROADCAST and plan.num_replicas > 1:
        # Every replica of this host takes the same whole batch, as the broadcast infeed
        # did: each element is handed out once per local replica.
        copies = max(1, plan.num_replicas // plan.num_hosts)
        dataset = dataset.flat_map(_plain_graph(
            lambda *element: tf.data.Dataset.from_tensors(
                element if len(element) > 1 else element[0]).repeat(copies)))
    if endless and _cardinality(dataset) != tf.data.INFINITE_CARDINALITY:
        # rebatch/flat_map report UNKNOWN; keep the loop's fast path (`is_endless`).
        dataset = dataset.apply(
            tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY))
    if fed_to_devices:
        dataset = _without_default_autotune(dataset)
    return dataset


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

    @property
    def endless(self) -> bool:
        if self.known_endless is not None:
            return self.known_endless
        return is_endless(self.dataset)

    @property
    def spec_key(self) -> str:
        """A hashable key of `replica_spec`: compiled loops are kept per input shape."""
        return repr(self.replica_spec)


def distribute(strategy: tf.distribute.Strategy, input_fn: Callable[..., Any],
               **kwargs: Any) -> Any:
    """`distribute_input(...).dataset`: the per-replica distributed dataset alone."""
    return distribute_input(strategy, input_fn, **kwargs).dataset


def distribute_input(strategy: tf.distribute.Strategy, input_fn: Callable[..., Any], *,
                     params: dict[str, Any], config: Any, mode: str, plan: BatchPlan,
                     use_tpu: bool, repeat_tensors: bool = True,
                     pad: bool = False,
                     batch_axis: BatchAxes = BatchAxes()) -> DistributedInput:
    """Calls input_fn once per host and returns the per-replica distributed dataset.

    With `pad` (evaluation and prediction on several replicas) elements become dicts
    `{features, [labels], padding_mask}` of static batch size, followed by endless fully
    masked batches (see `pad_and_mask`). `batch_axis` is honoured where legacy honoured it:
    PER_HOST_V1 with use_tpu=True, whose host batches are split (and padded) along each
    tensor's batch axis; elsewhere legacy ignored it, and so does this.
    """
    fed_to_devices = _feeds_devices(strategy)
    replica_specs: list[Any] = []

    def dataset_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        dataset = host_dataset(input_fn, input_context, params=params, config=config,
                               mode=mode, plan=plan, use_tpu=use_tpu,
                               input_device=_host_device(strategy, input_context),
                               repeat_tensors=repeat_tensors, pad=pad, batch_axis=batch_axis,
                               fed_to_devices=fed_to_devices)
        replica_specs.append(dataset.element_spec)
        return dataset

    options = tf.distribute.InputOptions(experimental_fetch_to_device=True)
    dataset = strategy.distribute_datasets_from_function(dataset_fn, options)
    return DistributedInput(dataset, replica_specs[0] if replica_specs else None)


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


def iterate(dataset: Any) -> Any:
    """`iter(dataset)` for a dataset from `distribute`, whose deletion does not stall.

    On several devices TF builds a MultiDeviceIterator: one pipeline per device on top of the
    host pipeline, each with a tf.data autotune thread whose sleep doubles up to 60 s while
    the iterator lives and which the iterator's deletion waits for, device after device (a
    TF 2.21 race; `device_dataset_without_autotune`). Deleting an 8-replica
    iterator took as long as it had been used (162 s after 100 s). The per-device pipelines
    are a fixed `prefetch(1)` with nothing to tune, so autotuning is turned off in them while
    the iterator is built; which element each replica gets is unchanged.
    """
    with _tf_patches.applied("inputs.device_pipelines"):
        return iter(dataset)


def device_dataset_without_autotune(original: Callable[..., Any]) -> Callable[..., Any]:
    """The replacement of patch `inputs.device_pipelines`: per-device pipelines, untuned.

    A MultiDeviceIterator is one host pipeline plus, per device, a pipeline TF builds itself
    in `multi_device_iterator_ops._create_device_dataset` (a generator reading the host
    buffer, then `prefetch(1)`), with default options, so each runs a tf.data autotune thread.
    That thread sleeps between optimisations for a period doubling from 10 ms to 60 s, and on
    TF 2.21 it often misses the iterator's cancellation (it is woken before the
    CancellationManager reports cancelled, and sleeps out the rest of its period); the
    iterator's destructor joins it, one device after another. These pipelines have nothing to
    tune (a fixed buffer of 1), so the builder turns autotuning off in them.
    """
    options = tf.data.Options()
    options.autotune.enabled = False

    def without_autotune(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **kwargs).with_options(options)

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
