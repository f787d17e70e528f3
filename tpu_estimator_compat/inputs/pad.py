"""Padding evaluation and prediction batches to a static size, with a mask of real rows.

On several replicas (or with `use_tpu=True`, as legacy TPU did) every replica needs a full,
static-shape batch at every step: `pad_and_mask` pads each batch along its batch axis
(`BatchAxes`, TPUEstimator's `batch_axis`), adds a boolean `padding_mask`, and follows the
real batches with endless fully masked ones, so nothing is dropped or counted twice. It knows
nothing of strategies or model_fns.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import tensorflow as tf

from tpu_estimator_compat import shapes as shapes_lib
from tpu_estimator_compat._tf import dataset_maps as _dataset_maps
from tpu_estimator_compat.inputs.call import plain_graph, split_element

MASK_KEY = "padding_mask"


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


def pad_and_mask(dataset: tf.data.Dataset, batch: int | None,
                 axes: BatchAxes = BatchAxes()) -> tf.data.Dataset:
    """Pads every batch to `batch` rows with a boolean `padding_mask`, then pads forever.

    The real batches (mask True on real rows) are followed by an endless stream of all-masked
    batches, so every replica gets a full, static-shape batch at every step and the loop
    stops at the first step with no real row anywhere. Nothing is dropped or counted twice.
    Tensors are padded along their batch axis (`axes`).

    `batch` None (a plain Estimator: no batch size is known): batches stay as they are, and
    the endless ones are empty, as legacy's distributed input fed a replica whose input had
    ended.

    The mapped functions are traced once per element spec and reused by later pipelines
    (`_reused`).
    """
    if batch is None:
        real = _reused(dataset, "mask", lambda: _mask_all)
        return real.concatenate(_reused(real.take(1), "empty", lambda: _empty).cache()
                                .repeat())
    real = _reused(dataset, "pad", lambda: _padder(batch, axes), batch, axes)
    return real.concatenate(_reused(real.take(1), "blank", lambda: _blank_batch).cache()
                            .repeat())


def _reused(dataset: tf.data.Dataset, name: str, make: Callable[[], Callable[..., Any]],
            *key: Any) -> tf.data.Dataset:
    """`dataset.map(make())`, its function traced once per element spec and `key`
    (`_tf/dataset_maps.py`): each evaluate/predict call makes a new input pipeline."""
    return _dataset_maps.kept_map(dataset, lambda: plain_graph(make()), (name,) + key)


def stack_parts(dataset: tf.data.Dataset, parts: int) -> tf.data.Dataset:
    """Each batch (static shapes) as `parts` consecutive slices stacked on a new axis 0.

    What `dataset.rebatch(rows // parts).batch(parts)` gives, in one reused map: `rebatch`
    traces a map of its own in every pipeline.
    """
    return _reused(dataset, "stack", lambda: _stacker(parts), parts)


def _stacker(parts: int) -> Callable[..., Any]:
    def stack(*element: Any) -> Any:
        element = element if len(element) > 1 else element[0]
        return tf.nest.map_structure(
            lambda t: tf.reshape(t, [parts, -1] + shapes_lib.static_dims(t.shape)[1:]),
            element)

    return stack


def _element_dict(element: tuple) -> dict[str, Any]:
    """A mapped function's arguments (tf.data unpacks tuples) as `{features, [labels]}`."""
    return _as_dict(element if len(element) > 1 else element[0])


def _padder(batch: int, axes: BatchAxes) -> Callable[..., dict[str, Any]]:
    def pad(*element: Any) -> dict[str, Any]:
        element = _element_dict(element)
        rows = _rows(element, axes, batch)
        flat = tf.nest.flatten(element)
        padded = tf.nest.pack_sequence_as(
            element, [_pad_rows(t, batch, a) if _batch_major(t, a, batch) else t
                      for t, a in zip(flat, axes.of(element))])
        padded[MASK_KEY] = tf.range(batch, dtype=tf.int64) < rows
        return padded

    return pad


def _blank_batch(element: dict[str, Any]) -> dict[str, Any]:
    element = tf.nest.map_structure(_blank, element)
    element[MASK_KEY] = tf.zeros_like(element[MASK_KEY])
    return element


def _mask_all(*element: Any) -> dict[str, Any]:
    """`pad_and_mask` for batches of unknown size: every row real."""
    element = _element_dict(element)
    rows = tf.constant(1, tf.int64)
    for tensor in tf.nest.flatten(element):
        if tensor.shape.rank != 0:
            rows = _shape(tensor)[0]
            break
    element[MASK_KEY] = tf.ones([rows], tf.bool)
    return element


def _empty(element: dict[str, Any]) -> dict[str, Any]:
    """An empty batch, as legacy's distributed input fed a replica whose input had ended."""
    return tf.nest.map_structure(_no_rows, element)


def _no_rows(tensor: Any) -> Any:
    if isinstance(tensor, tf.SparseTensor):
        shape = tf.tensor_scatter_nd_update(tensor.dense_shape, [[0]],
                                            tf.zeros([1], tf.int64))
        return tf.sparse.slice(tensor, tf.zeros_like(tensor.dense_shape), shape)
    return tensor if tensor.shape.rank == 0 else tensor[:0]
