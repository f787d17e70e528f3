"""Assigning restored values to a MirroredStrategy's variables in one compiled call.

A checkpoint restore assigns every variable. On N replicas an eager `assign` of a mirrored
variable is a cross-replica update run from Python, one device after another (the CNN of
`bench/call_cost.py` on 8 replicas: 9 variables, 72 eager assigns and the strategy's locks
around each, most of a restore's ~0.05 s, paid at every evaluate and predict call, issue 45).
`assign_all` makes one `tf.function` per list of variables that does the same assigns, and
keeps the last few: a later restore of the same variables is one function call. The values
each replica gets are the assigns' own, as in eager.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Sequence

import tensorflow as tf

_KEPT = 4  # Lists of variables whose assign function is kept (each holds its variables).
_FUNCTIONS: collections.OrderedDict = collections.OrderedDict()
_LOCK = threading.Lock()


def assign_all(variables: Sequence[Any], values: Sequence[tf.Tensor]) -> None:
    """`variables[i].assign(values[i])` for every i; compiled on a MirroredStrategy.

    Only where every variable is mirrored across the devices of the strategy in scope (a
    `tf.distribute.MirroredStrategy`): elsewhere (one device, parameter servers, other
    variable kinds) the eager assigns are already cheap or must stay as they are.
    """
    variables = list(variables)
    if not _compiled_pays(variables):
        for variable, value in zip(variables, values):
            variable.assign(value)
        return
    key = tuple(id(v) for v in variables)
    with _LOCK:
        kept = _FUNCTIONS.get(key)
        if kept is not None and all(a is b for a, b in zip(kept[0], variables)):
            _FUNCTIONS.move_to_end(key)
            function = kept[1]
        else:
            function = _assigner(variables)
            _FUNCTIONS[key] = (tuple(variables), function)
            while len(_FUNCTIONS) > _KEPT:
                _FUNCTIONS.popitem(last=False)
    function(list(values))


def _compiled_pays(variables: list[Any]) -> bool:
    return (bool(variables) and tf.executing_eagerly()
            and isinstance(tf.distribute.get_strategy(), tf.distribute.MirroredStrategy)
            and all(isinstance(v, tf.Variable) and isinstance(v, tf.distribute.DistributedValues)
                    for v in variables))


def _assigner(variables: list[Any]) -> Any:
    def assign(values: list[tf.Tensor]) -> None:
        for variable, value in zip(variables, values):
            variable.assign(value)

    return tf.function(assign, autograph=False)
