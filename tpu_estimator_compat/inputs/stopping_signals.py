"""The padded input stream with legacy's stopping signals, for code that reads them in TF1.

Synopsis (a TF1 graph, as legacy TPUEstimator built its evaluation input)::

    inputs = InputsWithStoppingSignals(dataset, batch_size=8, add_padding=True)
    init = inputs.dataset_initializer()
    features, labels = inputs.features_and_labels()
    signals = inputs.signals()      # {'stopping': [8, 1] bool, 'padding_mask': [8] int32}

The engine pads evaluation and prediction input with `pad.pad_and_mask`: every batch
padded to the batch size with a mask of its real rows, then all-padding batches for ever; a
loop stops at the first step with no real row. Legacy's `tpu_estimator._InputsWithStoppingSignals`
gave the same stream another shape: each element `{'features', 'labels', 'signals'}`, whose
`signals['stopping']` turns true on the batches after the input's end and whose
`signals['padding_mask']` is 1 on padding rows, and it ended after one stopping batch
(`2 * num_invocations_per_step - 1` when each step drew several). This module serves that
shape on `pad_and_mask`'s stream, and `PaddingSignals.slice_tensor_or_dict` cuts a padded
batch back to its real rows. It knows nothing of strategies or model_fns.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tpu_estimator_compat.inputs import pad as pad_lib
from tpu_estimator_compat.inputs.call import plain_graph

STOPPING = "stopping"
PADDING_MASK = "padding_mask"


class InputsWithStoppingSignals:
    """`dataset`'s batches with legacy's `signals`, ended by its stopping batches.

    Without `add_padding` batches keep their (dynamic) size and only `stopping` is given;
    with it every batch is padded to `batch_size` rows, statically shaped.
    """

    def __init__(self, dataset: tf.data.Dataset, batch_size: int, add_padding: bool = False,
                 num_invocations_per_step: int = 1) -> None:
        if dataset is None:
            raise ValueError("InputsWithStoppingSignals needs a dataset; got None.")
        stops = 1 if num_invocations_per_step == 1 else 2 * num_invocations_per_step - 1
        stream = pad_lib.pad_and_mask(dataset, batch_size if add_padding else None)

        def count_stops(seen: tf.Tensor, element: dict[str, Any]) -> tuple[Any, Any]:
            # Only the batches after the input's end hold no real row.
            stop = tf.logical_not(tf.reduce_any(element[pad_lib.MASK_KEY]))
            seen += tf.cast(stop, tf.int64)
            return seen, (seen, stop, element)

        def legacy_element(seen: tf.Tensor, stop: tf.Tensor,
                           element: dict[str, Any]) -> dict[str, Any]:
            del seen
            out = {key: element[key] for key in ("features", "labels") if key in element}
            signals = {STOPPING: tf.fill([batch_size, 1], stop)}
            if add_padding:
                signals[PADDING_MASK] = tf.cast(
                    tf.logical_not(element[pad_lib.MASK_KEY]), tf.int32)
            out["signals"] = signals
            return out

        self._dataset = (stream.scan(tf.constant(0, tf.int64), plain_graph(count_stops))
                         .take_while(plain_graph(lambda seen, stop, element: seen <= stops))
                         .map(plain_graph(legacy_element)).prefetch(2))
        self._iterator: Any = None
        self._current: dict[str, Any] | None = None

    @property
    def dataset(self) -> tf.data.Dataset:
        return self._dataset

    def dataset_initializer(self) -> Any:
        """The initializer of a TF1 initializable iterator; run it before reading."""
        self._iterator = tf.compat.v1.data.make_initializable_iterator(self._dataset)
        return self._iterator.initializer

    def features_and_labels(self) -> tuple[Any, Any]:
        """The next element's (features, labels); `signals()` returns the same element's."""
        if self._iterator is None:
            raise RuntimeError("Run dataset_initializer() before features_and_labels().")
        if self._current is not None:
            raise RuntimeError("The previous inputs have not been consumed: call "
                               "features_and_labels(), then signals().")
        self._current = self._iterator.get_next()
        return self._current["features"], self._current.get("labels")

    def signals(self) -> dict[str, Any]:
        """The signals of the element the last `features_and_labels()` returned."""
        if self._current is None:
            raise RuntimeError("No current inputs: call features_and_labels(), then "
                               "signals().")
        signals, self._current = self._current["signals"], None
        return signals


class PaddingSignals:
    """Legacy `tpu_estimator._PaddingSignals`: a padded batch cut back to its real rows."""

    @staticmethod
    def slice_tensor_or_dict(tensor_or_dict: Any, signals: dict[str, Any]) -> Any:
        """Each tensor's real rows (padding rows come last); a full batch or a stopping
        batch is returned whole."""
        mask = signals[PADDING_MASK]
        batch = tf.shape(mask)[0]
        padding = tf.reduce_sum(mask)
        whole = tf.logical_or(tf.equal(padding, 0), signals[STOPPING][0][0])
        return tf.nest.map_structure(
            lambda t: tf.cond(whole, lambda: t, lambda: t[:batch - padding]), tensor_or_dict)
