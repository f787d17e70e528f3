"""A MultiDeviceIterator's per-device pipelines, with their functions traced once per device.

Why private: `tf.distribute` feeds each replica of a MirroredStrategy (or a multi-worker
strategy's local replicas) through an `OwnedMultiDeviceIterator`, and for every iterator it
builds, `multi_device_iterator_ops._PerDeviceGenerator` traces six `tf.function`s per device
(a generator's init, next and finalize functions and their `remote_call` wrappers), closing
over that iterator's own resource handle and incarnation id. On 8 CPU replicas that is 48
traces and ~75% of building the iterator: ~0.4 s of every train/evaluate/predict call
(bench/RESULTS.md, "Fixed cost per call"). No public option reaches these pipelines. Here
the same six functions take the handle and incarnation id as arguments instead, so one
trace per (device, source device, element spec) serves every later iterator: each call still
gets a new iterator over a new dataset (input_fn is called once per call, as in legacy), only
the tracing is not repeated. The generator dataset, its `remote_call`s, the device prefetch
and the element each device gets are TensorFlow's own (tensorflow/python/data/ops/
multi_device_iterator_ops.py, TF 2.21); `_tf/patch_table.py` swaps these in while an
iterator is built (`inputs.device_generators`, `inputs.device_pipelines`).
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import tensorflow as tf
from tensorflow.python.data.ops import dataset_ops as _dataset_ops
from tensorflow.python.data.ops import prefetch_op as _prefetch_op
from tensorflow.python.data.util import structure as _structure
from tensorflow.python.eager import context as _context
from tensorflow.python.framework import type_utils as _type_utils
from tensorflow.python.ops import functional_ops as _functional_ops
from tensorflow.python.ops import gen_dataset_ops as _gen_dataset_ops

_STRING = tf.TensorSpec([], tf.string)
_INT64 = tf.TensorSpec([], tf.int64)
_RESOURCE = tf.TensorSpec([], tf.resource)


@dataclasses.dataclass(frozen=True)
class _Functions:
    """The init, next and finalize functions of one device's generator, traced once."""

    init: Any
    next: Any
    finalize: Any


def _trace(shard_num: int, element_spec: Any, anonymous: bool) -> _Functions:
    """Traces the six functions of one device's generator (in the caller's device scope).

    As TF's `_PerDeviceGenerator`, but the iterator's string handle, the incarnation id and
    (for an anonymous iterator) its resource are arguments, not captures.
    """
    types = _structure.get_flat_tensor_types(element_spec)
    shapes = _structure.get_flat_tensor_shapes(element_spec)

    @tf.function(input_signature=[_STRING], autograph=False)
    def init(handle: Any) -> Any:
        return handle

    init_local = init.get_concrete_function()

    @tf.function(input_signature=[_STRING, _STRING], autograph=False)
    def remote_init(handle: Any, source: Any) -> Any:
        return _functional_ops.remote_call(target=source, args=[handle], Tout=[tf.string],
                                           f=init_local)

    @tf.function(input_signature=[_STRING, _INT64], autograph=False)
    def next_local(handle: Any, incarnation: Any) -> Any:
        iterator = _gen_dataset_ops.multi_device_iterator_from_string_handle(
            string_handle=handle, output_types=types, output_shapes=shapes)
        return _gen_dataset_ops.multi_device_iterator_get_next_from_shard(
            multi_device_iterator=iterator, shard_num=shard_num, incarnation_id=incarnation,
            output_types=types, output_shapes=shapes)

    next_concrete = next_local.get_concrete_function()
    fulltype = _type_utils.fulltype_list_to_product(
        _type_utils.fulltypes_for_flat_tensors(element_spec))

    def remote_next(handle: Any, source: Any, incarnation: Any, *owner: Any) -> Any:
        del owner  # Only held: the generator keeps an anonymous iterator alive, as TF's does.
        values = _functional_ops.remote_call(target=source, args=[handle, incarnation],
                                             Tout=types, f=next_concrete)
        for value in values:  # Strings and ragged values stay in host memory (as TF).
            value.op.experimental_set_type(fulltype)
        return values

    next_signature = [_STRING, _STRING, _INT64] + ([_RESOURCE] if anonymous else [])
    remote_next_fn = tf.function(remote_next, input_signature=next_signature,
                                 experimental_attributes={"experimental_ints_on_device": True},
                                 autograph=False)

    @tf.function(input_signature=[_STRING], autograph=False)
    def finalize_local(unused_handle: Any) -> Any:
        return tf.constant(0, tf.int64)

    finalize_concrete = finalize_local.get_concrete_function()

    @tf.function(input_signature=[_STRING, _STRING], autograph=False)
    def remote_finalize(handle: Any, source: Any) -> Any:
        return _functional_ops.remote_call(target=source, args=[handle], Tout=[tf.int64],
                                           f=finalize_concrete)

    return _Functions(remote_init.get_concrete_function(),
                      remote_next_fn.get_concrete_function(),
                      remote_finalize.get_concrete_function())


@dataclasses.dataclass
class DeviceGenerator:
    """What stands in for TF's prototype per-device dataset: the functions and this
    iterator's arguments. `device_dataset` makes the device's pipeline from it."""

    functions: _Functions
    handle: Any
    source: Any
    resource: Any | None
    element_spec: Any


class DeviceGeneratorCache:
    """Traced generator functions by (device, shard, source device, element spec).

    Owned by whoever keeps iterators of the same input coming (one per strategy runtime);
    `traces` counts the function sets traced, so a test can see a second call trace none.
    """

    def __init__(self) -> None:
        self._functions: dict[Any, _Functions] = {}
        self._lock = threading.Lock()
        self.traces = 0

    def generator(self, shard_num: int, multi_device_iterator_resource: Any,
                  incarnation_id: Any, source_device: Any, element_spec: Any,
                  iterator_is_anonymous: bool = False) -> DeviceGenerator:
        """`_PerDeviceGenerator(...)`'s replacement (same arguments): no trace once cached."""
        del incarnation_id  # Passed again to `device_dataset`, as TF's builder does.
        key = (_context.context().device_name, shard_num,
               bytes(source_device.numpy()), tuple(tf.nest.flatten(element_spec)),
               bool(iterator_is_anonymous))
        with self._lock:
            functions = self._functions.get(key)
            if functions is None:
                functions = self._functions[key] = _trace(shard_num, element_spec,
                                                          bool(iterator_is_anonymous))
                self.traces += 1
        handle = _gen_dataset_ops.multi_device_iterator_to_string_handle(
            multi_device_iterator_resource)
        return DeviceGenerator(functions, handle, source_device,
                               multi_device_iterator_resource if iterator_is_anonymous
                               else None, element_spec)


class _GeneratorDataset(_dataset_ops.DatasetV2):
    """One device's generator over the MultiDeviceIterator's shard (TF's, re-armed)."""

    def __init__(self, generator: DeviceGenerator, incarnation_id: Any) -> None:
        self._element_spec = generator.element_spec
        functions = generator.functions
        owner = [generator.resource] if generator.resource is not None else []
        variant = _gen_dataset_ops.generator_dataset(
            [generator.handle, generator.source],
            [generator.source, incarnation_id] + owner,
            [generator.source],
            init_func=functions.init, next_func=functions.next,
            finalize_func=functions.finalize, **self._flat_structure)
        super().__init__(variant)

    def _inputs(self) -> list[Any]:
        return []

    @property
    def element_spec(self) -> Any:
        return self._element_spec


def device_dataset(generator: DeviceGenerator, incarnation_id: Any,
                   prefetch_buffer_size: int, experimental_slack: bool) -> tf.data.Dataset:
    """`_create_device_dataset(...)` for a `DeviceGenerator`: the generator, then TF's
    device prefetch."""
    dataset: tf.data.Dataset = _GeneratorDataset(generator, incarnation_id)
    if prefetch_buffer_size > 0:
        if experimental_slack:
            dataset = _prefetch_op._PrefetchDataset(  # pylint: disable=protected-access
                dataset, prefetch_buffer_size, slack_period=1)
        else:
            dataset = dataset.prefetch(prefetch_buffer_size, name="device_prefetch")
    return dataset
