"""The `model.ckpt-N.meta` next to each checkpoint: a TF1 MetaGraphDef that restores it.

    data = meta_graph_bytes({"dense/kernel": v, "global_step": gs}, max_to_keep=5,
                            keep_checkpoint_every_n_hours=10000)   # once per train()
    open(prefix + ".meta", "wb").write(data)                        # per checkpoint

    # Anywhere, without this library:
    saver = tf.compat.v1.train.import_meta_graph(prefix + ".meta")
    saver.restore(session, prefix)

Legacy Estimator's Saver wrote the training graph next to every checkpoint, and scripts
handle checkpoints by that file: google-research/albert renames and copies
`model.ckpt-N.meta` when it keeps its best checkpoint, google-research/bigbird finds the
checkpoints to evaluate by globbing `model.ckpt*.meta` (and evaluates nothing without them),
and TF1 tools restore a model from it with `import_meta_graph`. A traced tf.function has no
single TF1 training graph, so this module writes the honest minimum: a graph holding every
checkpointed variable under its v1 name, with its shape, dtype and trainability, in the
GLOBAL_VARIABLES / TRAINABLE_VARIABLES / GLOBAL_STEP collections, and a v1 Saver whose
`saver_def` restores exactly the checkpoint's keys. Its initial values are zeros: the values
are the checkpoint's. The graph depends only on the variables' names, shapes and dtypes, so
it is serialized once and the same bytes are written per checkpoint. It knows nothing about
checkpoint management (`checkpoints.py` writes the files) or estimators.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Mapping

import tensorflow as tf

from tpu_estimator_compat._tf import private as _tf_private
from tpu_estimator_compat import log as logging
from tpu_estimator_compat import shapes as shapes_lib

GLOBAL_STEP_NAME = "global_step"

_v1 = tf.compat.v1


def _zeros_like(variable: tf.Variable) -> tuple[tf.Tensor, bool]:
    """Zeros of `variable`'s dtype and shape (unknown dimensions: 0); whether it was known."""
    shape = variable.shape
    known = shape.is_fully_defined()
    dims = [d or 0 for d in shapes_lib.static_dims(shape) or []]
    return tf.zeros(dims, dtype=variable.dtype), known


def _graph_variable(name: str, variable: tf.Variable) -> tf.Variable:
    """A resource variable named `name` in the current graph, shaped like `variable`."""
    initial, known = _zeros_like(variable)
    trainable = bool(getattr(variable, "trainable", False))
    collections = [_v1.GraphKeys.GLOBAL_VARIABLES]
    if trainable:
        collections.append(_v1.GraphKeys.TRAINABLE_VARIABLES)
    created = _v1.Variable(initial, name=name, trainable=trainable, collections=collections,
                           validate_shape=known, use_resource=True)
    if name == GLOBAL_STEP_NAME:
        _v1.add_to_collection(_v1.GraphKeys.GLOBAL_STEP, created)
    if created.op.name != name:
        # The Saver below keys the checkpoint by `name` whatever the op is called.
        logging.debug("MetaGraph variable %r got the op name %r.", name, created.op.name)
    return created


def meta_graph_def(variables: Mapping[str, tf.Variable], *, max_to_keep: int,
                   keep_checkpoint_every_n_hours: float) -> tf.compat.v1.MetaGraphDef:
    """A MetaGraphDef whose variables and Saver restore a checkpoint of `variables`.

    Args:
      variables: `{v1 name: variable}` as the checkpoint stores them (`V1Saver.variables`).
      max_to_keep, keep_checkpoint_every_n_hours: Recorded in the `saver_def`, as legacy's
        Saver recorded RunConfig's keep_* settings.
    """
    graph = tf.Graph()
    with graph.as_default():
        # Sorted: a parent scope name (`dense`) is created before names under it.
        created = {name: _graph_variable(name, variables[name]) for name in sorted(variables)}
        # TensorFlow's own Saver class even while a scoped patch stands in for the public
        # name (a model_fn or scaffold_fn being traced on another thread).
        saver = _tf_private.v1_saver_class()(
            var_list=created, max_to_keep=max_to_keep,
            keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours,
            save_relative_paths=True)
        return _v1.train.export_meta_graph(graph=graph, saver_def=saver.as_saver_def(),
                                           clear_devices=True)


# The last few MetaGraphs built, by everything they depend on. Each train() call builds its
# own (a new CheckpointManager), and a process calls train() on the same model again and again:
# train_and_evaluate once per evaluation, scripts that alternate train and evaluate. Building
# one took 5% of the default-strategy estimator tests' time (py-spy); BERT-base's, 2 s.
_BUILT: "collections.OrderedDict[tuple[Any, ...], bytes]" = collections.OrderedDict()
_BUILT_MAX = 4
_BUILT_LOCK = threading.Lock()


def _signature(variables: Mapping[str, tf.Variable]) -> tuple[Any, ...]:
    """What `meta_graph_def` reads of `variables`: names, shapes, dtypes, trainability."""
    return tuple(
        (name, None if v.shape.rank is None else tuple(v.shape.as_list()), v.dtype.name,
         bool(getattr(v, "trainable", False)))
        for name, v in sorted(variables.items()))


def meta_graph_bytes(variables: Mapping[str, tf.Variable], *, max_to_keep: int,
                     keep_checkpoint_every_n_hours: float | None) -> bytes:
    """`meta_graph_def(...)` serialized, the content of every `model.ckpt-N.meta`."""
    hours = 10000.0 if keep_checkpoint_every_n_hours is None else keep_checkpoint_every_n_hours
    key = (_signature(variables), max_to_keep, hours)
    with _BUILT_LOCK:
        if key in _BUILT:
            _BUILT.move_to_end(key)
            return _BUILT[key]
    data = meta_graph_def(variables, max_to_keep=max_to_keep,
                          keep_checkpoint_every_n_hours=hours).SerializeToString()
    with _BUILT_LOCK:
        _BUILT[key] = data
        while len(_BUILT) > _BUILT_MAX:
            _BUILT.popitem(last=False)
    return data
