"""Object-based checkpoints: what legacy wrote for an object-based `Scaffold(saver=...)`.

    saver = object_saver(record.scaffold_saver)   # None: the default, name-based checkpoints
    CheckpointManager(model_dir, saver, keep_checkpoint_max=OBJECT_SAVER_MAX_TO_KEEP, ...)

Legacy Estimator saved and restored through the Saver of model_fn's Scaffold. Two of those
are object-based: a `tf.train.Checkpoint` (legacy's `Scaffold.finalize` froze its object
graph into `Saver(var_list=<frozen saveables>, sharded=True)`), and the Saver
`model_to_estimator(checkpoint_format='checkpoint')` (the default) builds over the Keras
model's object graph. Their checkpoints key each variable by its object-graph path
(`model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE`, `step/.ATTRIBUTES/VARIABLE_VALUE`) and hold
the serialized object graph under `_CHECKPOINTABLE_OBJECT_GRAPH`, so that
`tf.train.Checkpoint(...).restore` and Keras `load_weights` read them, and the docs'
`est.get_variable_value('var_list/var/.ATTRIBUTES/VARIABLE_VALUE')` finds its key.

`ObjectGraphSaver` is `V1Saver` keyed by those paths, plus the proto: the same SaveV2 file
layout, the same cross-replica reads of distributed variables, the same all-or-nothing
restore by key (legacy's frozen Saver restored by fixed keys too; a checkpoint lacking one
failed). The keys are frozen once per run from the object graph model_fn built (the
variables are the same on every trace). This module knows no strategies, loops or model_fns;
the object-graph reads are `_tf/object_graph.py`'s.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tpu_estimator_compat._tf import object_graph as _object_graph
from tpu_estimator_compat.checkpoint import checkpoints as checkpoints_lib

OBJECT_GRAPH_KEY = _object_graph.OBJECT_GRAPH_KEY

# The Saver legacy's Scaffold.finalize built for a tf.train.Checkpoint took the Saver
# defaults for retention (`Saver(var_list=..., sharded=True)`), not RunConfig's.
OBJECT_SAVER_MAX_TO_KEEP = 5
OBJECT_SAVER_KEEP_HOURS = 10000.0


class ObjectGraphSaver(checkpoints_lib.V1Saver):
    """Saves variables under object-graph keys with the object graph proto beside them."""

    def __init__(self, variables: dict[str, tf.Variable], object_graph: bytes) -> None:
        """Takes `{object-graph key: variable}` and the serialized `TrackableObjectGraph`.

        Raises:
            ValueError: no variables, or `object_graph` is empty.
        """
        if not object_graph:
            raise ValueError("ObjectGraphSaver(object_graph=...) received an empty object "
                             "graph; pass the serialized TrackableObjectGraph proto.")
        super().__init__(variables)
        self._object_graph = bytes(object_graph)

    @property
    def object_graph(self) -> bytes:
        return self._object_graph

    def _constants(self) -> dict[str, Any]:
        return {OBJECT_GRAPH_KEY: self._object_graph}


def object_saver(saver: Any) -> ObjectGraphSaver | None:
    """The `ObjectGraphSaver` an object-based Scaffold `saver` stands for; None otherwise.

    Call it eagerly, after the model_fn that made `saver` was traced (its variables exist):
    a `tf.train.Checkpoint`'s object graph is frozen now, as legacy's `Scaffold.finalize`
    froze it after model_fn; a frozen Saver's (keras_lib's) was frozen in model_fn.
    """
    if isinstance(saver, tf.train.Checkpoint):
        saveables = _object_graph.frozen_saveables(saver)
    elif _object_graph.is_frozen_object_graph(_saver_var_list(saver)):
        saveables = _saver_var_list(saver)
    else:
        return None
    variables, proto = _object_graph.keyed_variables(saveables)
    return ObjectGraphSaver(variables, proto)


def _saver_var_list(saver: Any) -> Any:
    # Only a plain attribute (the recording stand-in for a Saver model_fn made keeps it so):
    # a Mock's or a proxy's attribute is not a var_list.
    var_list = vars(saver).get("var_list") if hasattr(saver, "__dict__") else None
    return var_list if isinstance(var_list, (list, tuple)) else None
