"""`tf.estimator.inputs.pandas_input_fn`: a DataFrame's columns in legacy's batches.

The batching is `numpy_io`'s (one dataset in place of legacy's queue and its feeding threads;
see there): the DataFrame's rows by position, the index dropped as legacy's queue dropped it,
each column one feature keyed by its name, y's column(s) the labels.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from tpu_estimator_compat.inputs import numpy_io

try:
    import pandas as pd

    HAS_PANDAS = True
except ImportError:
    HAS_PANDAS = False
except IOError:  # pandas writes a file when imported; without it, legacy went without pandas.
    HAS_PANDAS = False


def _unique_target_key(frame: Any, name: str) -> str:
    """`name`, or a fresh name when the frame has a column `name` already."""
    return f"{name}_{uuid.uuid4()}" if name in frame else name


def _joined(x: Any, y: Any, target_column: str) -> tuple[Any, list[tuple[Any, Any]] | str | None]:
    """A copy of x with y's column(s) added, and how to take them out again.

    Returns the frame and None (no y), `target_column` (y a Series), or y's (name, column in
    the frame) pairs (y a DataFrame: its columns get fresh names where x has theirs).
    """
    x = x.copy()
    if y is None:
        return x, None
    if target_column in x:
        raise ValueError(
            f"Cannot use name {target_column} for target column: DataFrame already has a "
            f"column with that name: {x.columns}")
    if not np.array_equal(x.index, y.index):
        raise ValueError(f"Index for x and y are mismatched.\nIndex for x: {x.index}\n"
                         f"Index for y: {y.index}\n")
    if isinstance(y, pd.DataFrame):
        pairs = [(name, _unique_target_key(x, name)) for name in list(y)]
        for (name, key) in pairs:
            x[key] = y[name]
        return x, pairs
    x[target_column] = y
    return x, target_column


def pandas_input_fn(x: Any, y: Any = None, batch_size: int = 128, num_epochs: int | None = 1,
                    shuffle: bool | None = None, queue_capacity: int | None = 1000,
                    num_threads: int = 1, target_column: str = "target"
                    ) -> Callable[[], Any]:
    """Returns an input_fn feeding a pandas DataFrame, as legacy's did.

    Args:
      x: a pandas `DataFrame`; each column is a feature named by the column.
      y: a pandas `Series` or `DataFrame` (labels; its index must equal x's), or None.
      batch_size: examples per batch; the last one is partial unless `num_epochs` is None.
      num_epochs: passes over the data; None repeats forever.
      shuffle: required, a bool: shuffle within a window of `queue_capacity` rows.
      queue_capacity: the shuffle window; None: 4 * len(x) when shuffling, else len(x).
      num_threads: legacy's feeding threads; each reads `num_epochs` epochs.
      target_column: the name y takes among x's columns while batched (a Series y).

    Returns:
      `input_fn()` returning `(features, labels)`, or `features` when y is None.

    Raises:
      TypeError: pandas is not installed; `target_column` is not a string.
      ValueError: `shuffle` missing or not a bool; x has a column named `target_column`;
        x's and y's indexes differ; a bad count.
    """
    if not HAS_PANDAS:
        raise TypeError("pandas_input_fn should not be called without pandas installed")
    numpy_io.check_shuffle(shuffle)
    if not isinstance(target_column, str):
        raise TypeError("target_column must be a string type")
    frame, targets = _joined(x, y, target_column)
    if queue_capacity is None:
        queue_capacity = max(1, 4 * len(frame) if shuffle else len(frame))
    numpy_io.check_batching(batch_size, num_epochs, queue_capacity, num_threads)

    def input_fn() -> Any:
        columns = {name: frame[name].to_numpy() for name in frame.columns}
        dataset = numpy_io.batched_columns(
            columns, batch_size=batch_size, num_epochs=num_epochs, shuffle=shuffle,
            queue_capacity=queue_capacity, num_threads=num_threads)

        def restructure(batch: dict[Any, tf.Tensor]) -> Any:
            features = dict(batch)
            if targets is None:
                return features
            if isinstance(targets, list):
                return features, {name: features.pop(key) for name, key in targets}
            return features, features.pop(targets)

        return numpy_io.first_element(
            dataset.map(tf.autograph.experimental.do_not_convert(restructure)))

    return input_fn
