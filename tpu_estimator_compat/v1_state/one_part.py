"""Partitioners that give one part, and the checkpoint keys legacy gave their slots.

The v1 canned estimators build their weights under `min_max_variable_partitioner`. Without
parameter servers it yields one part: legacy's graph held `dnn/hiddenlayer_0/kernel/part_0`,
saved under the whole variable's name `dnn/hiddenlayer_0/kernel`. This library drops such a
partitioner (every replica holds the whole variable), so the weight's own name is already
legacy's key. Its optimizer slots are not: legacy's `slot_creator` saved a partitioned
primary's slot under `<primary's full name>/<the slot's name with the primary's op name cut
off by length>`, and that cut assumes the slot was created at the graph's root. The canned
model_fns call `minimize` inside their own name scope (`dnn/`, `linear/`), so the cut lands
early and the keys legacy's checkpoints hold are `dnn/hiddenlayer_0/kernel/t_0/Adagrad`
(scope `dnn/`, 4 characters) and `linear/linear_model/x/weights/part_0/Ftrl` (scope
`linear/`, 7 characters). `legacy_slot_name` reproduces that key, so legacy canned model_dirs
resume here and checkpoints written here resume on legacy.

Legacy's distributed Estimator (`RunConfig(train_distribute=...)`) built model_fn inside
the strategy's scope, whose variable scope dropped every partitioner (a parameter-server
strategy's excepted): the weights were whole there and their slots kept their own names
(`dnn/dnn/hiddenlayer_0/kernel/Adagrad`). `dropping_partitioners` does the same.
"""

from __future__ import annotations

from typing import Any, Callable, Collection

import tensorflow as tf

from tpu_estimator_compat import log as logging

_PART = "/part_0/"
_warned: list[bool] = []


def one_partition(partitioner: Callable[..., Any], args: tuple, kwargs: dict) -> bool:
    """True when `partitioner` splits this `get_variable(name, shape, dtype)` call's
    variable into one part only (a known shape is needed to ask it)."""
    shape = kwargs.get("shape", args[0] if args else None)
    dtype = kwargs.get("dtype", args[1] if len(args) > 1 else tf.float32)
    try:
        shape = tf.TensorShape(shape)
        if not shape.is_fully_defined():
            return False
        parts = partitioner(shape=shape, dtype=tf.as_dtype(dtype))
    except (TypeError, ValueError):
        return False
    return all(int(p) == 1 for p in parts)


def refusing_partitioners(get_variable: Callable[..., Any],
                          note_one_part: Callable[[str], None],
                          error: type[Exception] = ValueError) -> Callable[..., Any]:
    """Wraps `_VariableStore.get_variable`: drops a one-part partitioner (telling
    `note_one_part` the variable's name), refuses any other clearly.

    A partitioner makes v1 build a `PartitionedVariable`, a graph-only object: with the
    eager variables this library creates it fails deep inside the optimizer ("Tensor.op is
    undefined"), which names neither the variable nor the cause.
    """

    def checked(name: str, *args: Any, **kwargs: Any) -> Any:
        partitioner = kwargs.get("partitioner")
        if partitioner is not None and one_partition(partitioner, args, kwargs):
            kwargs["partitioner"] = partitioner = None
            note_one_part(name)
        if partitioner is not None:
            raise error(
                f"`partitioner` is not supported by tpu_estimator_compat: "
                f"get_variable('{name}') received partitioner={partitioner!r} (from the "
                "call or its variable_scope). Partitioned variables are a TF1-graph "
                "construct that TF2 variables cannot represent. Remove the partitioner: "
                "every replica holds the whole variable, as a TPU core did.")
        return get_variable(name, *args, **kwargs)

    return checked


def dropping_partitioners(get_variable: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps `_VariableStore.get_variable`: drops any partitioner, with legacy's warning
    (once), as a strategy's scope did in legacy's distributed Estimator."""

    def dropped(name: str, *args: Any, **kwargs: Any) -> Any:
        if kwargs.pop("partitioner", None) is not None and not _warned:
            _warned.append(True)
            logging.legacy_warning("Partitioned variables are disabled when using current "
                                   "tf.distribute.Strategy.")
        return get_variable(name, *args, **kwargs)

    return dropped


def legacy_slot_name(name: str, one_part: Collection[str], shape: Any = None) -> str:
    """The key legacy saved a slot variable `name` under, when its primary is in `one_part`.

    `name` is the slot's v1 name here: `<scope><primary>/<slot>` (`dnn/` +
    `dnn/hiddenlayer_0/kernel` + `/Adagrad`). Legacy's slot was named after the primary's
    part (`<scope><primary>/part_0/<slot>`) and saved as `<primary>/` + that name without
    its first `len(primary/part_0/)` characters. A scalar slot had no slice and kept its
    name; any other name is returned unchanged.
    """
    if shape is not None and tf.TensorShape(shape).rank == 0:
        return name
    for primary in sorted(one_part, key=len, reverse=True):
        start = name.find(primary + "/")
        while start >= 0:
            if start == 0 or name[start - 1] == "/":
                rest = name[start + len(primary) + 1:]
                legacy_name = name[:start] + primary + _PART + rest
                return primary + "/" + legacy_name[len(primary) + len(_PART):]
            start = name.find(primary + "/", start + 1)
    return name
