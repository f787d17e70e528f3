"""Names as a TF1 graph gave them, for model code that reads them.

Synopsis::

    tf1_names.install()                      # once: `v.op.name` works on eager variables
    with tf1_names.replica_scoped_collections("replica_1"):
        tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS, "gen")  # this replica's

TF1 model code identifies things by graph name: a variable by `v.op.name` (`dense/kernel`),
a sub-model's batch-norm updates and regularization losses by `get_collection(key, scope)`.
Two things the shim does differently break that: variables are created eagerly (no `op`),
and replicas after the first trace their ops under `replica_<k>/` in the one graph all
replicas share. This module gives model code the names it expects and nothing else; it
knows nothing of registries, strategies or estimators. Its TensorFlow patches go through
`_tf_patches`; this module builds the replacements.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import sys
import threading
from typing import Any, Callable, Iterator

import tensorflow as tf

from tpu_estimator_compat._tf import patches as _tf_patches

_v1 = tf.compat.v1


def install() -> None:
    """Gives eagerly created variables the `op` TF1 code reads (`v.op.name`), and an
    `initializer` in a graph. Idempotent.

    Process-wide, like the estimator's other patches: model_fn, scaffold_fn, hooks and
    host_call all ran in a TF1 graph under legacy, where every variable had an op.
    """
    _tf_patches.install("tf1_names.variable_op", "tf1_names.distributed_variable_op",
                        "tf1_names.variable_initializer")


# Modules whose reads of `variable.op` keep TF2's answer (no op for an eager variable): they
# test `hasattr(v, 'op')` to tell graph variables from eager ones (optimizer slot keys,
# control dependencies, `strategy.group`), and would mistake the stand-in for a graph op.
_TF_INTERNALS = ("tensorflow.", "tf_keras.", "keras.")
# ...except TensorFlow modules that read `v.op` only for the name, as model code does:
# the profiler's `tfprof_logger` (`tf.profiler.profile(tf.get_default_graph())` in model_fn,
# tensorflow/tpu amoeba_net's FLOP count) tags `v.op.name` of the trainable variables;
# StepCounterHook names its summary `global_step.op.name + "/sec"`; tf_keras's legacy
# OptimizerV2 (a canned head's) names each update `"update_" + var.op.name` in a TF1 graph.
_TF_NAME_READERS = ("tensorflow.python.profiler.",
                    "tensorflow.python.training.basic_session_run_hooks",
                    "tf_keras.src.optimizers.legacy.optimizer_v2")


@dataclasses.dataclass(frozen=True)
class VariableOp:
    """What TF1 code reads from `variable.op` for a variable made by this library.

    In a TF1 graph `v.op` was the variable's `VarHandleOp`, and `v.op.name` its name without
    `:0` (`dense/kernel`), the name checkpoints use; that is what model code reads it for
    (LARS's per-parameter exclusions, `{v.op.name: v.op.name}` init_from_checkpoint maps).
    The shim's variables are created eagerly and have no op; this stands in for it. It is
    not a graph node: it cannot be run, fetched or used as a control dependency.
    """

    name: str
    type: str
    device: str
    dtype: tf.DType
    shape: tf.TensorShape

    @classmethod
    def of(cls, variable: Any) -> "VariableOp":
        name = variable.name
        return cls(name=name[:name.rfind(":")] if ":" in name else name, type="VarHandleOp",
                   device=variable.device or "", dtype=variable.dtype,
                   shape=tf.TensorShape(variable.shape))

    @property
    def graph(self) -> tf.Graph:
        """The graph model code is being built in (in TF1: the variable's graph)."""
        return _v1.get_default_graph()

    @property
    def inputs(self) -> tuple[()]:
        return ()

    @property
    def control_inputs(self) -> list[Any]:
        return []

    @property
    def node_def(self) -> Any:
        node = _v1.NodeDef(name=self.name, op=self.type, device=self.device)
        node.attr["dtype"].type = self.dtype.as_datatype_enum
        node.attr["shape"].shape.CopyFrom(self.shape.as_proto())
        node.attr["shared_name"].s = self.name.encode()
        node.attr["container"].s = b""
        return node

    def get_attr(self, name: str) -> Any:
        """`dtype`, `shape`, `shared_name` or `container`, as a VarHandleOp gave them."""
        values = {"dtype": self.dtype, "shape": self.shape.as_proto(),
                  "shared_name": self.name.encode(), "container": b""}
        if name not in values:
            raise ValueError(f"Operation {self.name!r} (a variable of tpu_estimator_compat) "
                             f"has no attr named {name!r}; it has {sorted(values)}.")
        return values[name]

    def __repr__(self) -> str:
        return f"<tf.Operation '{self.name}' type={self.type}>"


def graph_style_variable_op(original: property) -> property:
    """The replacement of patches `tf1_names.variable_op` and `...distributed_variable_op`.

    The variable's own `op` wherever it has one; for an eager variable (AttributeError),
    a `VariableOp`, unless TensorFlow or tf_keras itself asked (see `_TF_INTERNALS`).
    """

    def op(self: Any) -> Any:
        try:
            return original.fget(self)
        except AttributeError:
            # sys._getframe is CPython's documented frame API: the one caller frame is read.
            caller = sys._getframe(1).f_globals.get("__name__", "")  # pylint: disable=protected-access
            if caller.startswith(_TF_INTERNALS) and not caller.startswith(_TF_NAME_READERS):
                raise
            return VariableOp.of(self)

    return property(op, doc=original.__doc__)


def graph_style_initializer(original: property) -> property:
    """The replacement of patch `tf1_names.variable_initializer`.

    The variable's own initializer op wherever it has one. Read while a graph is built
    (model_fn's `Scaffold(init_op=tf.group(v.initializer, ...))`,
    `tf.compat.v1.variables_initializer(var_list)`) for an eagerly created variable, which
    TF2 gives none: a no-op in that graph. The variable was initialised when it was
    created, as TF1's initializer would have left it.
    """

    def initializer(self: Any) -> Any:
        value = original.fget(self)
        if value is None and not tf.executing_eagerly():
            return tf.no_op()
        return value

    return property(initializer, doc=original.__doc__)


# The root name scope of the replica this thread traces (`replica_1`), '' for the first.
_REPLICA_ROOT = threading.local()


def replica_scoped_get_collection(original: Callable[..., Any]) -> Callable[..., Any]:
    """`Graph.get_collection` whose `scope` also matches names without the replica's root.

    The replacement of patch `tf1_names.scoped_collections`. Replica k > 0 builds its ops
    under `replica_k/` (see `variables.replica_scope`), so `get_collection(UPDATE_OPS, 'gen')` (TF-GAN,
    `control_dependencies` on a scope's batch-norm updates) and
    `get_regularization_loss('gen')` found nothing on it and silently dropped its updates or
    weight decay. A TPU core built the step once, without a prefix; every replica here sees
    what it saw. A scope naming the prefix itself (`original_name_scope`) still matches.
    """

    def get_collection(self: Any, name: Any, scope: Any = None) -> list[Any]:
        found = original(self, name, scope)
        root = getattr(_REPLICA_ROOT, "root", "")
        if scope is None or not root:
            return found
        kept = {id(item) for item in found}
        regex = re.compile(scope)
        prefix = root + "/"
        for item in original(self, name):
            item_name = getattr(item, "name", None)
            if (id(item) not in kept and isinstance(item_name, str)
                    and item_name.startswith(prefix) and regex.match(item_name[len(prefix):])):
                kept.add(id(item))
        return [item for item in original(self, name) if id(item) in kept]

    return get_collection


def replica_scoped_collections(root: str) -> contextlib.AbstractContextManager[Any]:
    """Inside: this thread's `get_collection(key, scope)` sees its replica's ops by scope."""

    @contextlib.contextmanager
    def scoped() -> Iterator[None]:
        previous = getattr(_REPLICA_ROOT, "root", "")
        _REPLICA_ROOT.root = root
        try:
            with _tf_patches.applied("tf1_names.scoped_collections"):
                yield
        finally:
            _REPLICA_ROOT.root = previous

    return scoped()
