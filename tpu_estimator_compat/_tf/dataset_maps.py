"""`Dataset.map` whose function is traced once per input element spec, for every pipeline.

Why private: `Dataset.map` wraps its function in a new `StructuredFunctionWrapper`
(tensorflow/python/data/ops/structured_function.py, TF 2.21) in every pipeline: a trace,
a new function built and registered, even when the same function maps the same element
spec as in the last pipeline. Each evaluate/predict call makes a new input pipeline
(input_fn is called once per call, as in legacy), so the library's own maps (padding,
stacking replica batches: `inputs/pad.py`) were traced at every call: ~15 ms each on an
idle machine, a tenth of issue 45's 0.2 s budget for three of them. `kept_map` keeps the
wrapper per (key, element spec) and builds TF's own `MapDataset` op around it
(`map_op._MapDataset` does the same with a new wrapper). Only in eager mode: a function
made there lives in the eager context, not in a TF1 graph, where `dataset.map` is used.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import tensorflow as tf
from tensorflow.python.data.ops import dataset_ops as _dataset_ops
from tensorflow.python.data.ops import structured_function as _structured_function
from tensorflow.python.ops import gen_dataset_ops as _gen_dataset_ops

_WRAPPERS: dict[tuple, Any] = {}
_LOCK = threading.Lock()
_MOST_KEPT = 256  # Distinct (key, spec) pairs kept; past that, maps trace as TF's do.


class _KeptMapDataset(_dataset_ops.UnaryDataset):
    """TF's `MapDataset` over `input_dataset`, with a wrapper traced for an earlier one."""

    def __init__(self, input_dataset: tf.data.Dataset, wrapper: Any) -> None:
        self._input_dataset = input_dataset
        self._map_func = wrapper
        self._name = None
        variant = _gen_dataset_ops.map_dataset(
            input_dataset._variant_tensor,  # pylint: disable=protected-access
            wrapper.function.captured_inputs, f=wrapper.function,
            use_inter_op_parallelism=True, preserve_cardinality=True,
            force_synchronous=False, **self._common_args)
        super().__init__(input_dataset, variant)

    def _functions(self) -> list[Any]:
        return [self._map_func]

    @property
    def element_spec(self) -> Any:
        return self._map_func.output_structure


def kept_map(dataset: tf.data.Dataset, make: Callable[[], Callable[..., Any]],
             key: tuple) -> tf.data.Dataset:
    """`dataset.map(make())`, tracing `make()` only for a (key, element spec) not seen yet.

    `make()` must depend on nothing but `key` (and the element it maps). Outside eager mode
    this is `dataset.map(make())`.
    """
    if not tf.executing_eagerly():
        return dataset.map(make())
    spec = dataset.element_spec
    cache_key = (key, repr(spec))
    with _LOCK:
        wrapper = _WRAPPERS.get(cache_key)
    if wrapper is None or not _same_spec(wrapper, spec):
        wrapper = _structured_function.StructuredFunctionWrapper(
            make(), "Dataset.map()", dataset=dataset)
        with _LOCK:
            if len(_WRAPPERS) < _MOST_KEPT:
                _WRAPPERS.setdefault(cache_key, wrapper)
    return _KeptMapDataset(dataset, wrapper)


def _same_spec(wrapper: Any, spec: Any) -> bool:
    """Whether `wrapper` was traced for exactly `spec` (classes of nests included)."""
    kept = wrapper._input_structure  # pylint: disable=protected-access
    try:
        tf.nest.assert_same_structure(kept, spec, check_types=True)
    except (TypeError, ValueError):
        return False
    return all(a == b for a, b in zip(tf.nest.flatten(kept), tf.nest.flatten(spec)))
