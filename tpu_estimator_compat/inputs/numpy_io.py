"""`tf.estimator.inputs.numpy_input_fn`: legacy's batches of numpy arrays, from a tf.data dataset.

Legacy's input_fn built a FIFO (or, with `shuffle=True`, a RandomShuffleQueue) fed by Python
queue-runner threads; this engine runs no queue runners. Here the same input_fn makes a
dataset that gives the batches legacy's queue gave:

* the examples in order, epoch after epoch, cut into `batch_size` batches across epoch
  boundaries (a batch may end one epoch and start the next), the last batch partial; with
  `num_epochs=None`, forever, every batch full (legacy's `dequeue_many`: a static batch size);
* with `shuffle=True`, each queue-runner thread's stream (starting at a random example, then
  in order) goes through a shuffle buffer of `queue_capacity` examples, the window the
  RandomShuffleQueue drew from; so epochs mix at their boundaries as they did in the queue;
* `num_threads` streams, each reading `num_epochs` epochs (legacy's threads did), taken in
  turns of `batch_size` examples.

input_fn returns what legacy returned, `(features, labels)` or `features`: in a TF1 graph the
tensors of a one-shot iterator over that dataset (each `session.run` gives the next batch,
`OutOfRangeError` after the last); when it runs eagerly, as this engine calls it, the tensors
of the dataset's first element, which the engine's `inputs.iterator_get_next` patch traces
back to the dataset, so every step takes the next batch and the end of the dataset is the end
of input. `migration_guide/estimator.md` says where the dataset differs from the queue.
"""

from __future__ import annotations

import collections
import random
from typing import Any, Callable, Mapping

import numpy as np
import tensorflow as tf

from tpu_estimator_compat import log as logging

# The key y's array takes among the columns while they are batched together (legacy's name);
# `_n` is appended while it names one of x's keys.
_TARGET_KEY = "__target_key__"
_SHUFFLE_ERROR = ("shuffle must be provided and explicitly set as boolean (it is recommended "
                  "to set it as True for training); got {}")


def check_shuffle(shuffle: Any) -> None:
    """Legacy refused a missing or non-bool `shuffle` when the input_fn was made."""
    if not isinstance(shuffle, bool):
        raise ValueError(_SHUFFLE_ERROR.format(shuffle))


def check_batching(batch_size: Any, num_epochs: Any, queue_capacity: Any,
                   num_threads: Any) -> None:
    """Refuses counts legacy's queue could not run (it failed later, or hung, at run time)."""
    for name, value, least in (("batch_size", batch_size, 1), ("num_epochs", num_epochs, 0),
                               ("queue_capacity", queue_capacity, 1),
                               ("num_threads", num_threads, 1)):
        if name == "num_epochs" and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            also = " or None (forever)" if name == "num_epochs" else ""
            raise ValueError(f"{name} must be an integer >= {least}{also}; got {value!r}. "
                             f"Pass e.g. {name}={max(least, 1)}.")


def _features_as_columns(x: Any) -> collections.OrderedDict:
    """x's arrays by key, sorted (legacy's order); an array is one column."""
    if isinstance(x, dict):
        if not x:
            raise ValueError("x cannot be an empty dict")
        return collections.OrderedDict(sorted(x.items(), key=lambda item: item[0]))
    if isinstance(x, np.ndarray):
        if x.size == 0:
            raise ValueError("x cannot be an empty array")
        return collections.OrderedDict({"__direct_np_input__": x})
    raise TypeError(f"x must be a dict or array; got {type(x).__name__}")


def _with_targets(columns: collections.OrderedDict, y: Any) -> tuple[list[str] | str | None,
                                                                    Any]:
    """Adds y's arrays to `columns`; returns the target key(s) and y's shape for errors."""
    if y is None:
        return None, None
    if isinstance(y, dict):
        if not y:
            raise ValueError("y cannot be empty dict, use None instead.")
        targets = collections.OrderedDict(sorted(y.items(), key=lambda item: item[0]))
        duplicates = set(columns).intersection(targets)
        if duplicates:
            raise ValueError(f"{len(duplicates)} duplicate keys are found in both x and y: "
                             f"{duplicates}")
        columns.update(targets)
        return list(targets), None
    key = _TARGET_KEY
    while key in columns:
        key += "_n"
    columns[key] = y
    return key, y.shape


def _check_lengths(columns: Mapping[str, np.ndarray], feature_keys: list[str],
                   target_keys: list[str] | str | None, y_shape: Any) -> None:
    if len({len(v) for v in columns.values()}) == 1:
        return
    x_shapes = {k: columns[k].shape for k in feature_keys}
    if isinstance(target_keys, list):
        y_shape = {k: columns[k].shape for k in target_keys}
    raise ValueError("Length of tensors in x and y is mismatched. All elements in x and y "
                     "must have the same length.\n"
                     f"Shapes in x: {x_shapes}\nShapes in y: {y_shape}\n")


def warn_threads(shuffle: bool, num_threads: int, num_epochs: int | None) -> None:
    """Legacy's warnings about several feeding threads, word for word."""
    if num_threads > 1 and num_epochs is not None:
        logging.legacy_warning(
            "enqueue_data was called with num_epochs and num_threads > 1. num_epochs is "
            "applied per thread, so this will produce more epochs than you probably intend. "
            "If you want to limit epochs, use one thread.")
    if shuffle and num_threads > 1 and num_epochs is not None:
        logging.legacy_warning(
            "enqueue_data was called with shuffle=True, num_threads > 1, and num_epochs. This "
            "will create multiple threads, all reading the array/dataframe in order adding to "
            "the same shuffling queue; the results will likely not be sufficiently shuffled.")
    if not shuffle and num_threads > 1:
        logging.legacy_warning(
            "enqueue_data was called with shuffle=False and num_threads > 1. This will create "
            "multiple threads, all reading the array/dataframe in order. If you want examples "
            "read in order, use one thread; if you want multiple threads, enable shuffling.")


def _thread_indices(start: Any, length: int, num_epochs: int | None) -> tf.data.Dataset:
    """One feeding thread's row numbers: from `start`, in order, `num_epochs` epochs."""
    rows = tf.data.Dataset.range(length)
    if num_epochs is None:
        return rows.repeat().skip(start)
    return rows.repeat(num_epochs + 1).skip(start).take(length * num_epochs)


def batched_columns(columns: Mapping[str, np.ndarray], *, batch_size: int,
                    num_epochs: int | None, shuffle: bool, queue_capacity: int,
                    num_threads: int) -> tf.data.Dataset:
    """A dataset of dicts `{key: batch of columns[key]}`, the batches legacy's queue gave.

    Row numbers are streamed, shuffled and batched, then each batch gathers its rows from
    every column at once: no per-example slicing of wide arrays.
    """
    warn_threads(shuffle, num_threads, num_epochs)
    length = len(next(iter(columns.values())))
    # Legacy started each thread at a random row when shuffling (reseeding the global
    # `random`); a private generator leaves the user's `random` state alone.
    starter = random.Random()
    starts = [starter.randrange(length) if shuffle else 0 for _ in range(num_threads)]
    if num_threads == 1:
        rows = _thread_indices(starts[0], length, num_epochs)
    else:  # Threads take turns of one enqueue (batch_size rows) each.
        rows = tf.data.Dataset.from_tensor_slices(np.asarray(starts, np.int64)).interleave(
            tf.autograph.experimental.do_not_convert(
                lambda start: _thread_indices(start, length, num_epochs)),
            cycle_length=num_threads, block_length=batch_size)
    if shuffle:
        # The RandomShuffleQueue drew from up to `queue_capacity` enqueued rows; its seed was
        # the graph's (op seed None), as the shuffle's is here.
        rows = rows.shuffle(queue_capacity)
    rows = rows.batch(batch_size, drop_remainder=num_epochs is None)
    if num_epochs is None and num_threads > 1:
        rows = rows.apply(tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY))
    tensors = {key: tf.constant(value) for key, value in columns.items()}
    return rows.map(tf.autograph.experimental.do_not_convert(
        lambda index: {key: tf.gather(t, index) for key, t in tensors.items()}))


def first_element(dataset: tf.data.Dataset) -> Any:
    """What legacy's input_fn returned: tensors giving the dataset's batches.

    In a TF1 graph a one-shot iterator's `get_next()` (the next batch at every `run`, then
    `OutOfRangeError`). Eagerly (this engine calls input_fn so) an eager iterator's first
    element, traced back to the dataset by the engine; an empty dataset (`num_epochs=0`),
    which has no first element, is returned itself, and the engine ends the input at once.
    """
    if not tf.executing_eagerly() and not tf.inside_function():
        return tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
    try:
        return iter(dataset).get_next()
    except tf.errors.OutOfRangeError:
        return dataset


def numpy_input_fn(x: Any, y: Any = None, batch_size: int = 128, num_epochs: int | None = 1,
                   shuffle: bool | None = None, queue_capacity: int = 1000,
                   num_threads: int = 1) -> Callable[[], Any]:
    """Returns an input_fn feeding dicts of numpy arrays, as legacy's did.

    Args:
      x: a numpy array (one feature, returned as a tensor) or a dict of them (returned as a
        dict with the same keys).
      y: a numpy array, a dict of them, or None (input_fn then returns features only).
      batch_size: examples per batch; the last one is partial unless `num_epochs` is None.
      num_epochs: passes over the data; None repeats forever.
      shuffle: required, a bool: shuffle within a window of `queue_capacity` examples.
      queue_capacity: the shuffle window (legacy's queue size).
      num_threads: legacy's feeding threads; each reads `num_epochs` epochs.

    Returns:
      `input_fn()` returning `(features, labels)`, or `features` when y is None.

    Raises:
      ValueError: `shuffle` missing or not a bool, a bad count; when input_fn is called:
        empty x or y, keys in both x and y, arrays of different lengths.
      TypeError: when input_fn is called, x is neither a dict nor an array.
    """
    check_shuffle(shuffle)
    check_batching(batch_size, num_epochs, queue_capacity, num_threads)

    def input_fn() -> Any:
        columns = _features_as_columns(x)
        feature_keys = list(columns)
        target_keys, y_shape = _with_targets(columns, y)
        _check_lengths(columns, feature_keys, target_keys, y_shape)
        dataset = batched_columns(columns, batch_size=batch_size, num_epochs=num_epochs,
                                  shuffle=shuffle, queue_capacity=queue_capacity,
                                  num_threads=num_threads)

        def restructure(batch: dict[str, tf.Tensor]) -> Any:
            if isinstance(x, np.ndarray):
                features = batch[feature_keys[0]]
            else:
                features = {k: batch[k] for k in feature_keys}
            if target_keys is None:
                return features
            if isinstance(target_keys, str):
                return features, batch[target_keys]
            return features, {k: batch[k] for k in target_keys}

        return first_element(dataset.map(tf.autograph.experimental.do_not_convert(restructure)))

    return input_fn
