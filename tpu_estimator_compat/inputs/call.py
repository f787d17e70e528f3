"""Calling the user's input_fn, and what it returns as a dataset.

`call_input_fn` calls input_fn the legacy way (`params` with `batch_size` and `context`,
optionally `config`, `mode`, `input_context`); `to_dataset` turns what it returned (a
`tf.data.Dataset`, a `(features, labels)` tuple of tensors, or tensors an iterator's
`get_next()` drew, recorded by the `inputs.iterator_get_next` patch) into a dataset of
batches, and `split_element` takes one element apart into (features, labels). It knows
nothing of strategies, replicas or padding.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np
import tensorflow as tf

from tpu_estimator_compat import log as logging

from tpu_estimator_compat.inputs.context import (BATCH_SIZE_KEY, CONTEXT_KEY, BatchPlan,
                                                 TPUContext, copy_params, set_param)

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
    args = _accepted_args(input_fn)
    if plan.plain:  # Legacy Estimator: each argument only if input_fn takes it.
        kwargs = {name: value for name, value in (
            ("params", copy_params(params)), ("config", config), ("mode", mode),
            ("input_context", input_context)) if name in args}
        if on_host_read is not None and args & {"input_context", "config"}:
            on_host_read()
        return input_fn(**kwargs)
    check_input_fn_signature(input_fn)
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
    """The replacement of patch `inputs.iterator_get_next`: notes (dataset, the element's
    leaves), the leaves as get_next gave them: input_fns edit the element dict it returns
    (`labels = features.pop('y')`), which must not change what was drawn."""

    def get_next(self: Any) -> Any:
        element = original(self)
        dataset = getattr(self, "_dataset", None)
        if dataset is not None:
            records.append((dataset, tuple(tf.nest.flatten(element))))
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


def _from_iterator(result: Any, records: Sequence[tuple[Any, tuple[Any, ...]]]) -> Any:
    """The dataset `result`'s tensors were drawn from by `get_next()`, restructured as
    `result`; None when they came from no iterator (constants: the same batch every step).

    In a TF1 graph `iterator.get_next()` gave the next batch at every session.run; input_fn
    runs eagerly here, where it gives the first batch's values.
    """
    leaves = tf.nest.flatten(result)
    for dataset, drawn_leaves in records:
        positions = {id(t): i for i, t in enumerate(drawn_leaves)}
        if leaves and all(id(leaf) in positions for leaf in leaves):
            picks = [positions[id(leaf)] for leaf in leaves]

            def restructure(*components: Any, picks: list[int] = picks) -> Any:
                flat = tf.nest.flatten(components)
                return tf.nest.pack_sequence_as(result, [flat[p] for p in picks])

            logging.info("input_fn returned iterator.get_next() tensors: every step takes "
                         "the next element of their dataset, as in a TF1 graph.")
            return dataset.map(plain_graph(restructure))
    drawn = {id(t) for _, drawn_leaves in records for t in drawn_leaves}
    if any(id(leaf) in drawn for leaf in leaves):
        raise ValueError(
            "input_fn returned tensors computed from `iterator.get_next()` together with "
            "others. In a TF1 graph they gave the next batch at every step; "
            "tpu_estimator_compat calls input_fn once, eagerly, so they would hold the first "
            "batch for every step. Return the dataset itself (do the computation in "
            "`dataset.map(...)`), or return the get_next() tensors unchanged.")
    return None


def _tensor_like(value: Any) -> Any:
    """`value` as one tensor when it is a (nested) Python list or tuple of numbers.

    In a TF1 graph a feature `{'age': ((1,), (1,))}` or labels `((10.,), (10.,))` reached
    model_fn as Python sequences, which feature columns and heads converted to one [2, 1]
    tensor each; `Dataset.from_tensors` would instead take the sequence as a structure of
    scalar components. Namedtuples, sequences holding tensors or arrays (a model_fn may
    unpack them: `_sequences_as_tuples`) and ragged or mixed sequences stay structures.
    """
    if (isinstance(value, (list, tuple)) and not hasattr(value, "_fields")
            and not any(tf.is_tensor(leaf) or isinstance(leaf, np.ndarray)
                        for leaf in tf.nest.flatten(value))):
        try:
            return tf.convert_to_tensor(value)
        except (ValueError, TypeError):
            return value
    return value


def _tensor_part(part: Any) -> Any:
    """Features or labels with each dict value (or the part itself) made `_tensor_like`."""
    if isinstance(part, dict):
        return {key: _tensor_like(value) for key, value in part.items()}
    return _tensor_like(part)


def to_dataset(result: Any, *, repeat_tensors: bool,
               iterated: Sequence[tuple[Any, Any]] = (),
               held: list[HeldValues] | None = None) -> tf.data.Dataset:
    """Turns what input_fn returned into a dataset of (features, labels) or features.

    A `(features, labels)` tuple of tensors stands for "the same batch every step", as the
    tensors did in a TF1 graph, so it repeats; tensors `iterator.get_next()` drew from a
    dataset (`iterated`: (dataset, element leaves) per get_next call input_fn made) stand
    for that dataset's elements, one per step. With `held` (a list), input_fn's Python values
    stay out of the dataset: they are appended there as one `HeldValues` for the step to hand
    model_fn as they are (`hold_python_values`); without it they become tensors.
    """
    if isinstance(result, tf.data.Dataset):
        return result
    if iterated and isinstance(result, (tuple, list, tf.Tensor, dict)):
        drawn = _from_iterator(tuple(result) if isinstance(result, list) else result, iterated)
        if drawn is not None:
            return drawn
    if isinstance(result, (tuple, list)) and len(result) != 2:
        raise ValueError(
            "input_fn should return (features, labels) as a len 2 tuple; received a "
            f"{type(result).__name__} of {len(result)}: {result!r:.200}. Return "
            "`(features, labels)`, `features` alone, or a `tf.data.Dataset`.")
    if held is not None:
        result, values = hold_python_values(result)
        if values is not None:
            held.append(values)
            if values.everything:  # Nothing for a dataset to carry but the step's pace.
                dataset = tf.data.Dataset.from_tensors(tf.constant(True))
                return dataset.repeat() if repeat_tensors else dataset
    if isinstance(result, (tuple, list)):
        dataset = tf.data.Dataset.from_tensors(
            tuple(_tensor_part(part) for part in _sequences_as_tuples(tuple(result))))
    elif isinstance(result, (tf.Tensor, dict)):
        dataset = tf.data.Dataset.from_tensors(_tensor_part(result))
    else:
        raise TypeError(
            "input_fn must return a `tf.data.Dataset`, a `(features, labels)` tuple or "
            f"`features`; received {type(result).__name__}: {result!r:.200}.")
    return dataset.repeat() if repeat_tensors else dataset


def _is_python_value(value: Any) -> bool:
    """A Python number or string, or a (nested) list or tuple of them: what a TF1 graph's
    model_fn got as it was, which `tf.data` can only carry as tensors."""
    if isinstance(value, (bool, int, float, complex, str, bytes)):
        return True
    return (isinstance(value, (list, tuple)) and not hasattr(value, "_fields")
            and all(isinstance(leaf, (bool, int, float, complex, str, bytes))
                    for leaf in tf.nest.flatten(value)))


class _HeldPart(NamedTuple):
    """Held values of features or labels: the whole part, or some entries of its dict."""

    whole: bool
    value: Any  # The part itself (`whole`), else {key: value} of the held entries.
    order: tuple = ()  # The dict's keys in input_fn's order (not `whole`).

    def merge(self, carried: Any) -> Any:
        if self.whole:
            return self.value
        return {key: self.value[key] if key in self.value else carried[key]
                for key in self.order}


@dataclasses.dataclass(frozen=True)
class HeldValues:
    """Python values input_fn returned, which model_fn gets as they are, not as tensors.

    Legacy Estimator handed model_fn input_fn's return unchanged: a feature
    `{'x': [[1], [1]]}` reached it as that list (the graph's ops converted it where used),
    `dict(), None` as an empty dict and None. A dataset can only carry tensors, so these
    values stay on the host and `merge` puts them back into each element's (features,
    labels) before model_fn sees them. `everything`: input_fn returned no tensor at all;
    the dataset then carries a placeholder per step, and `merge` ignores it.
    """

    features: _HeldPart | None
    labels: _HeldPart | None
    everything: bool = False

    def merge(self, features: Any, labels: Any) -> tuple[Any, Any]:
        """(features, labels) as input_fn returned them, tensors from the dataset's element."""
        return tuple(carried if part is None else part.merge(carried)
                     for carried, part in ((features, self.features),
                                           (labels, self.labels)))

    def wrap(self, step: Callable[..., Any]) -> Callable[..., Any]:
        """`step(features, labels, *rest)` given the held values back."""

        def with_held_values(features: Any, labels: Any, *rest: Any) -> Any:
            return step(*self.merge(features, labels), *rest)

        return with_held_values


def _hold_part(part: Any) -> tuple[Any, _HeldPart | None]:
    """(what the dataset carries of `part`, the held rest or None)."""
    if _is_python_value(part):
        return None, _HeldPart(True, part)
    if type(part) is dict:  # pylint: disable=unidiomatic-typecheck  # Rebuilt as a dict.
        held = {key: value for key, value in part.items() if _is_python_value(value)}
        if held and len(held) == len(part):
            return None, _HeldPart(True, part)  # The dict itself, as input_fn made it.
        if held:
            return ({key: value for key, value in part.items() if key not in held},
                    _HeldPart(False, held, tuple(part)))
    return part, None


def hold_python_values(result: Any) -> tuple[Any, HeldValues | None]:
    """(what a dataset carries of input_fn's non-dataset `result`, its held Python values).

    See `HeldValues`. A result without Python values comes back as it was, with None.
    """
    pair = isinstance(result, (tuple, list)) and len(result) == 2
    features, labels = (result[0], result[1]) if pair else (result, None)
    carried_features, held_features = _hold_part(features)
    carried_labels, held_labels = (_hold_part(labels) if labels is not None
                                   else (None, None))
    carried = (carried_features, carried_labels) if pair else carried_features
    if not any(leaf is not None for leaf in tf.nest.flatten(carried)):
        return None, HeldValues(_HeldPart(True, features), _HeldPart(True, labels), True)
    if held_features is None and held_labels is None:
        return result, None
    return carried, HeldValues(held_features, held_labels)


def _sequences_as_tuples(value: Any) -> Any:
    """`value` with each list of tensors or arrays made a tuple, so that tf.data keeps it a
    sequence of tensors: it would stack a list into one tensor (or fail on arrays of other
    shapes). A TF1 model_fn got such a list as it was (Keras models with several inputs:
    `model_to_estimator`'s `features = [x_a, x_b]`). Nested lists of numbers stay one tensor.
    """
    if isinstance(value, dict):
        return {k: _sequences_as_tuples(v) for k, v in value.items()}
    if isinstance(value, tuple) or (isinstance(value, list) and any(
            isinstance(v, (tf.Tensor, np.ndarray, dict)) for v in value)):
        items = [_sequences_as_tuples(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    return value


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


def plain_graph(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` for `Dataset.map`/`flat_map` as written: not converted by autograph.

    tf.data converts every mapped function with autograph, recursively through the helpers it
    calls; the shim's own have no tensor-dependent Python control flow, so the conversion
    changes nothing but costs each input pipeline's start: a 6th of an 8-replica model zoo
    test's own time went to transpiling `pad_and_mask`'s helpers (py-spy).
    """
    return tf.autograph.experimental.do_not_convert(fn)
