"""Static shapes read as plain ints and None, whatever TensorFlow's global TensorShape mode.

Synopsis::

    rows = shapes.static_dim(spec.shape, 0)      # 32, or None: never a Dimension
    dims = shapes.static_dims(tensor.shape)      # [None, 8, 8], or None for an unknown rank
    spec_shape = shapes.with_rows(shape, None)   # axis 0 replaced; an unknown rank stays so

TF1 scripts switch `TensorShape` to its v1 behaviour for the whole process:
`tf.compat.v1.disable_v2_tensorshape()`, `disable_v2_behavior()`, and the launcher's TF1 mode.
`shape[i]` is then a `Dimension`, which breaks code written for the v2 ints: a Dimension is
unhashable (a dict key or a set member raises TypeError), `Dimension(None) is None` is False,
`Dimension(None) == x` and `!= x` give None (falsy, "unknown"), `Dimension(None) in (None, 3)`
is False, and arithmetic gives more Dimensions. User code must keep seeing Dimensions (legacy
gave model_fn, input_fn and metric_fn TF1 shapes), so the mode stays as the script set it and
the library reads every static axis through this module. `TensorShape.rank`, `.as_list()`,
slicing and `concatenate` already behave the same in both modes; indexing and iterating do not.

This module knows nothing about estimators, replicas or metrics.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf


def static_dims(shape: Any) -> list[int | None] | None:
    """The axes of `shape` as ints (None where unknown); None when the rank is unknown.

    Args:
        shape: A `tf.TensorShape`, or anything `tf.TensorShape()` takes (a list of ints,
            None or `Dimension`s; None for an unknown rank).
    """
    shape = tf.TensorShape(shape)
    return None if shape.rank is None else shape.as_list()


def static_dim(shape: Any, index: int) -> int | None:
    """Axis `index` of `shape` as an int, or None when that axis or the rank is unknown.

    Args:
        shape: As for `static_dims`.
        index: The axis; negative counts from the end, as for a list.

    Raises:
        IndexError: If the rank is known and has no axis `index` (a scalar's axis 0).
    """
    dims = static_dims(shape)
    return None if dims is None else dims[index]


def with_rows(shape: Any, rows: int | None) -> tf.TensorShape:
    """`shape` with axis 0 set to `rows` (None: unknown); an unknown rank stays unknown.

    Raises:
        ValueError: If `shape` is a scalar (it has no axis 0 to replace).
    """
    shape = tf.TensorShape(shape)
    if shape.rank is None:
        return shape
    if shape.rank == 0:
        raise ValueError(f"A scalar shape has no batch axis to set to {rows}.")
    return tf.TensorShape([rows]).concatenate(shape[1:])
