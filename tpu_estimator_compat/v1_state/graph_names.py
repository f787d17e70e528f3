"""The names a TF1 graph had taken, carried from the graph that took them into another.

    taken = graph_names.NameTable({"global_step": 1})   # what the graph held before
    with graph_names.recording(model_graph) as names:   # around model_fn, in its trace
        spec = model_fn(...)
    taken = taken + names.table                          # and after model_fn
    graph_names.mark(host_graph, taken)                  # before host_call's fn builds there
    # host_call's `tf.contrib.summary.scalar('learning_rate', ...)` -> tag `learning_rate_1`

A TF1 graph names every op and name scope through one uniquifier (`Graph.unique_name`), and
summaries take their tags from it: `tf.compat.v1.summary.*` and `tf.contrib.summary.*` (TF's
`summary_ops_v2`) use their own uniquified name scope as the tag; `tf.summary.*` (v2) uses
the enclosing name scopes, which may be uniquified, plus the name as given. Legacy built
model_fn, metric_fn, host_call's fn and its own loss summary into one graph, so a summary
named after anything built before it came out suffixed (tensorflow/tpu Inception v2: the
`learning_rate` op, then the host_call's `learning_rate` summary, written `learning_rate_1`).
The shim traces each into a graph of its own; this module carries the names across.
`NameTable` holds a graph's counts, `recording` takes what a block took in a graph, `mark`
makes names taken in another graph, `names_taken_by` learns what a function takes by
building it in a scratch graph, `NameTable.unique` gives the name the next op would get.

It knows nothing of estimators, strategies or loops: which names legacy's graph held at which
point is for its callers to say (`variables`, `replica_step`, `summaries`, `train_session`,
`inference`).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, ContextManager, Iterable, Iterator, Mapping

import tensorflow as tf

from tpu_estimator_compat._tf import private as _tf_private
from tpu_estimator_compat import log as logging


class NameTable:
    """The names a graph had taken and how often: `Graph.unique_name`'s bookkeeping.

    Keys are lowercased, as the graph compares names case-insensitively. Tables add up: the
    names of a graph that took `a`'s names and then `b`'s (`b` recorded on a graph that held
    `a`'s) are `a + b`.
    """

    def __init__(self, counts: Mapping[str, int] | None = None) -> None:
        self._counts = {name.lower(): int(n) for name, n in (counts or {}).items() if n > 0}

    @property
    def counts(self) -> dict[str, int]:
        return dict(self._counts)

    def __add__(self, other: "NameTable") -> "NameTable":
        total = dict(self._counts)
        for name, n in other._counts.items():
            total[name] = total.get(name, 0) + n
        return NameTable(total)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NameTable) and self._counts == other._counts

    def __repr__(self) -> str:
        return f"NameTable({self._counts!r})"

    def only(self, names: Iterable[str]) -> "NameTable":
        """The entries for `names` (e.g. the variables' names), nothing else."""
        keep = {name.lower() for name in names}
        return NameTable({k: n for k, n in self._counts.items() if k in keep})

    def without(self, drop: Callable[[str], bool]) -> "NameTable":
        """The entries whose (lowercased) name `drop` refuses."""
        return NameTable({k: n for k, n in self._counts.items() if not drop(k)})

    def unique(self, name: str) -> str:
        """The name an op named `name` gets next (at the root), which is then taken.

        `Graph.unique_name`'s rule: the first `loss` is `loss`, the next `loss_1`, skipping
        any `loss_N` taken already.
        """
        key = name.lower()
        i = self._counts.get(key, 0)
        self._counts[key] = i + 1
        if i == 0:
            return name
        base, candidate = key, key
        while candidate in self._counts:
            candidate = f"{base}_{i}"
            i += 1
        self._counts[candidate] = 1
        return f"{name}_{i - 1}"


class Recording:
    """What the block of a `recording` took; `table` is set when the block ends."""

    table: NameTable = NameTable()


@contextlib.contextmanager
def recording(graph: tf.Graph) -> Iterator[Recording]:
    """Records the names taken in `graph` while the block runs (anyone's, in any scope)."""
    before = _tf_private.graph_names_in_use(graph)
    result = Recording()
    try:
        yield result
    finally:
        after = _tf_private.graph_names_in_use(graph)
        result.table = NameTable({name: n - before.get(name, 0) for name, n in after.items()})


def mark(graph: tf.Graph, table: NameTable, prefix: str = "") -> None:
    """Marks `table`'s names taken in `graph` (under `prefix`, e.g. `replica_1/`).

    A name `graph` took already keeps the larger count: marking twice is marking once.
    """
    _tf_private.mark_graph_names_in_use(
        graph, {prefix.lower() + name: n for name, n in table.counts.items()})


def names_taken_by(fn: Callable[..., Any], structure: Any, taken: NameTable, *,
                   around: Callable[[], ContextManager[Any]] | None = None) -> NameTable:
    """The names `fn` takes when built, on placeholders shaped as `structure`'s tensors, in a
    TF1 graph that holds `taken` already.

    The shim runs such functions eagerly or in a function graph of their own; building
    `fn` once more, in a scratch graph that is never run, shows what legacy's graph had after
    it. `around` (optional) makes the context `fn` is built in. A `fn` that cannot be built
    this way takes nothing (logged).
    """
    graph = tf.Graph()
    try:
        with graph.as_default():
            values = tf.nest.map_structure(_stand_in, structure)
            mark(graph, taken)
            with (around() if around else contextlib.nullcontext()), \
                    recording(graph) as names:
                fn(**values) if isinstance(values, dict) else fn(*values)
    except Exception as e:  # pylint: disable=broad-except
        logging.info("%s could not be built in a TF1 graph (%s); its summary tags are taken "
                     "as if it named nothing.", getattr(fn, "__name__", fn), e)
        return NameTable()
    return names.table


def _stand_in(leaf: Any) -> Any:
    """A placeholder for a tensor (any batch size), anything else as it is."""
    if not isinstance(leaf, (tf.Tensor, tf.Variable, tf.TensorSpec)):
        return leaf
    shape = leaf.shape
    if shape.rank:
        shape = tf.TensorShape([None]).concatenate(shape[1:])
    return tf.compat.v1.placeholder(leaf.dtype.base_dtype, shape)
