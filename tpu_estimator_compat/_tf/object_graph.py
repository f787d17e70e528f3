"""Object-graph checkpoint keys: which variable each key of an object-based checkpoint holds.

Its own module, not `private.py`: that one is near the 700-line limit, and these reads form
one concern (the object graph of a `tf.train.Checkpoint` or a Keras model, as legacy's
`Scaffold` saver froze it).

Legacy honoured an object-based `Scaffold.saver` by freezing the object graph into a TF1
Saver: `Scaffold.finalize` turned a `tf.train.Checkpoint` into
`Saver(var_list=ObjectGraphView(checkpoint).frozen_saveable_objects(), sharded=True)`, and
`model_to_estimator(checkpoint_format='checkpoint')` builds that Saver over the Keras model
itself. Such a Saver writes each variable under its object-graph key
(`model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE`) plus the serialized
`TrackableObjectGraph` proto under `_CHECKPOINTABLE_OBJECT_GRAPH`, which is what lets
`tf.train.Checkpoint.restore` and Keras `load_weights` read the file.

No public API lists those keys: the object graph view is `tf.__internal__.tracking`'s, and the
frozen list holds private `SaveableObject`s (`tensorflow/python/training/saving/
saveable_object.py`), whose public-by-convention fields `op` (the variable a saveable saves)
and `specs` (one `SaveSpec` per checkpoint key, with the tensor it writes) are read here.
Nothing is rebound. It must not know checkpoint files, estimators or loops.
"""

from __future__ import annotations

from typing import Any, Sequence

import tensorflow as tf

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
"""The checkpoint key of the serialized object graph (`trackable.base.OBJECT_GRAPH_PROTO_KEY`)."""


def frozen_saveables(root: Any) -> list[Any]:
    """`root`'s object graph frozen into saveables, as legacy's Scaffold froze a Checkpoint.

    In a TF1 graph this builds the graph's read ops and the proto constant there (what a v1
    Saver over the list needs); eagerly, it reads nothing but the graph's structure plus one
    read per variable, which `keyed_variables` discards.
    """
    return tf.__internal__.tracking.ObjectGraphView(root).frozen_saveable_objects()


def is_frozen_object_graph(var_list: Any) -> bool:
    """Whether a Saver's `var_list` is a frozen object graph (holds the proto's saveable)."""
    if not isinstance(var_list, (list, tuple)):
        return False
    return any(getattr(item, "name", None) == OBJECT_GRAPH_KEY and hasattr(item, "specs")
               for item in var_list)


def keyed_variables(saveables: Sequence[Any]) -> tuple[dict[str, tf.Variable], bytes]:
    """`({checkpoint key: variable}, serialized object graph)` of a frozen saveable list.

    The list may have been made in a traced graph (keras_lib builds it inside model_fn):
    only the variables it names and the proto's constant value are read, never its tensors.

    Raises:
        NotImplementedError: a saveable that is not one variable's (a lookup table, Python
            state): legacy's Saver ran their save ops in a TF1 session; here only variables
            are written.
        ValueError: the list holds no object graph proto.
    """
    variables: dict[str, tf.Variable] = {}
    proto: bytes | None = None
    for saveable in saveables:
        specs = list(getattr(saveable, "specs", ()))
        if getattr(saveable, "name", None) == OBJECT_GRAPH_KEY:
            value = tf.get_static_value(specs[0].tensor)
            proto = bytes(value) if not hasattr(value, "item") else value.item()
            continue
        variable = _variable_saved_by(saveable)
        if variable is None or len(specs) != 1 or specs[0].slice_spec:
            raise NotImplementedError(
                f"The Scaffold saver's object graph saves {getattr(saveable, 'name', saveable)!r}"
                f" with a {type(saveable).__name__}, which is not one whole variable's. Only "
                "variables are written to object-based checkpoints here; track lookup tables "
                "or Python state outside the Checkpoint given to Scaffold(saver=...).")
        variables[specs[0].name] = variable
    if proto is None:
        raise ValueError(
            "The saveables given have no object graph (no "
            f"{OBJECT_GRAPH_KEY!r} entry); pass ObjectGraphView(root).frozen_saveable_objects().")
    return variables, proto


def _variable_saved_by(saveable: Any) -> tf.Variable | None:
    """The variable one saveable writes, or None when it is not a variable's.

    A plain variable's saveable holds it as `op`. A distributed variable's is a private
    class of `tensorflow/python/distribute/values.py` whose `op` is a read function; it keeps
    the variable in `_mirrored_variable` (mirrored, TPU) or `_sync_on_read_variable`.
    """
    candidates = (getattr(saveable, "op", None), getattr(saveable, "_mirrored_variable", None),
                  getattr(saveable, "_sync_on_read_variable", None))
    return next((c for c in candidates if isinstance(c, tf.Variable)), None)
