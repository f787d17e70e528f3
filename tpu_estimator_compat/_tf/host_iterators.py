"""One host iterator for all of a strategy's local replicas, split per replica in the step.

Why private: an iterator passed into a `tf.function` must be a `CompositeTensor`
(`tensorflow.python.framework.composite_tensor`, exported only under `tf.__internal__`)
with a `TypeSpec`, as TF's own distributed iterator is. `tf.distribute` feeds a
MirroredStrategy's replicas through a MultiDeviceIterator: one host pipeline plus one
pipeline per device, each created in its own `MakeIterator` with its functions instantiated
in that iterator's own function library (8 replicas: ~11 ms each, ~0.15 s of every
train, evaluate or predict call; bench/results/HISTORY.md, issue 45). `HostSplitIterator`
instead reads one host iterator whose elements stack one per-replica batch per replica
(`dataset.batch(R)` over the per-replica batches, in the order the MultiDeviceIterator
handed them out: element k to replica k mod R) and unstacks them into per-replica values inside the compiled step
(`strategy.experimental_distribute_values_from_function`), so each replica gets the same
rows as before, with one `MakeIterator` per call. `inputs/distribute.py` decides when.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from tensorflow.python.framework import composite_tensor as _composite_tensor


class HostSplitIteratorSpec(tf.TypeSpec):
    """The type of a `HostSplitIterator`: its host iterator's type, the replica count and
    the strategy (held, compared by identity, as TF's distributed iterator spec does)."""

    def __init__(self, host_spec: Any, replicas: int, strategy: Any) -> None:
        self._host_spec = host_spec
        self._replicas = replicas
        self._strategy = strategy

    @property
    def value_type(self) -> type:
        return HostSplitIterator

    def _serialize(self) -> tuple:
        # A strategy is not a serializable value: its identity stands for it (as in TF's
        # `DistributedIteratorSpec`), so specs of one strategy compare equal.
        return (self._host_spec, self._replicas, id(self._strategy))

    def _deserialize(self, serialization: Any) -> "HostSplitIteratorSpec":
        raise ValueError(f"{type(self).__name__} cannot be rebuilt from its serialization "
                         "(it holds a strategy); it is not meant to be saved.")

    def _without_tensor_names(self) -> "HostSplitIteratorSpec":
        # pylint: disable-next=protected-access
        return HostSplitIteratorSpec(self._host_spec._without_tensor_names(), self._replicas,
                                     self._strategy)

    def _same_feed(self, other: Any) -> bool:
        return (type(other) is type(self) and other._strategy is self._strategy
                and other._replicas == self._replicas)

    def is_subtype_of(self, other: Any) -> bool:
        return self._same_feed(other) and self._host_spec.is_subtype_of(other._host_spec)

    def most_specific_common_supertype(self, others: Any) -> "HostSplitIteratorSpec | None":
        if not all(self._same_feed(other) for other in others):
            return None
        common = self._host_spec.most_specific_common_supertype(
            [other._host_spec for other in others])
        return (None if common is None
                else HostSplitIteratorSpec(common, self._replicas, self._strategy))

    @property
    def _component_specs(self) -> Any:
        return self._host_spec

    def _to_components(self, value: "HostSplitIterator") -> Any:
        return value.host

    def _from_components(self, components: Any) -> "HostSplitIterator":
        return HostSplitIterator(components, self._replicas, self._strategy)


class HostSplitIterator(_composite_tensor.CompositeTensor):
    """An iterator of per-replica values over a host iterator of stacked replica batches.

    `host` yields elements whose every tensor has `replicas` rows on axis 0, row r being
    replica r's batch; `get_next()` returns the element's nest with per-replica values, as a
    distributed iterator's `get_next()` does. Every element feeds every replica, so the
    input ends for all replicas at once (`get_next_as_optional`).
    """

    def __init__(self, host: Any, replicas: int, strategy: tf.distribute.Strategy) -> None:
        self.host = host
        self._replicas = replicas
        self._strategy = strategy

    @property
    def _type_spec(self) -> HostSplitIteratorSpec:
        # pylint: disable-next=protected-access
        return HostSplitIteratorSpec(self.host._type_spec, self._replicas, self._strategy)

    @property
    def element_spec(self) -> Any:
        """One replica's element spec (the host element's without its replica axis)."""
        return tf.nest.map_structure(lambda s: tf.TensorSpec(s.shape[1:], s.dtype, s.name),
                                     self.host.element_spec)

    def get_next(self) -> Any:
        return self._split(self.host.get_next())

    def __iter__(self) -> "HostSplitIterator":
        return self

    def __next__(self) -> Any:
        return self._split(next(self.host))

    def _split(self, element: Any) -> Any:
        flat = tf.nest.flatten(element)
        parts = [tf.unstack(tensor, num=self._replicas) for tensor in flat]
        return self._strategy.experimental_distribute_values_from_function(
            lambda ctx: tf.nest.pack_sequence_as(
                element, [part[ctx.replica_id_in_sync_group] for part in parts]))

    def get_next_as_optional(self) -> "SplitOptional":
        """The next element, if any, as an optional whose value is split per replica."""
        return SplitOptional(self.host.get_next_as_optional(), self._split)


class SplitOptional:
    """`tf.experimental.Optional` of a host element, whose value comes split per replica."""

    def __init__(self, optional: Any, split: Any) -> None:
        self._optional = optional
        self._split = split

    def has_value(self) -> tf.Tensor:
        return self._optional.has_value()

    def get_value(self) -> Any:
        return self._split(self._optional.get_value())
