"""A model_fn's Scaffold in a run: its `saver` writes model_dir's checkpoints, its `init_fn`
initialises a fresh model.

    parts = ScaffoldParts.of(scaffold)            # an EstimatorSpec's, or scaffold_fn's
    writer = training_saver(parts.saver, variables, optional, keep_max, keep_hours)
    CheckpointManager(model_dir, writer.saver, keep_checkpoint_max=writer.keep_checkpoint_max,
                      ..., pad_step_number=writer.pad_step_number)
    ...                                           # no checkpoint restored:
    run_init_fn(parts.init_fn_scaffold, variables)  # after init_from_checkpoint, warm start

Legacy's `MonitoredTrainingSession` took both from the Scaffold: its CheckpointSaverHook
saved with `scaffold.saver` (that Saver's `var_list`, `max_to_keep`,
`keep_checkpoint_every_n_hours`, `pad_step_number`), and its `SessionManager` called
`init_fn(scaffold, session)` once, right after the init op, only when no checkpoint was
restored. A Saver built in model_fn or scaffold_fn is recorded, not built
(`warm_start._RecordingSaver`): its settings shape the `V1Saver` here.

There is no TF1 session running the traced graph: the variables are live eager (or
distributed) variables. `InitSession` is what init_fn gets as `session`. It does the work
of the idioms real init_fns use: `Saver(var_list).restore(session, path)` (the Saver built
in model_fn or scaffold_fn; tf_slim's `assign_from_checkpoint_fn` returns a callback doing
exactly that) assigns the live variables from the checkpoint, and `session.run` of
variables or eager values returns their values. Ops of model_fn's graph cannot run outside
its training step: `session.run` of one raises, naming the idiom and the fix. As legacy's
`Scaffold.finalize` had made a default Saver over every global variable before init_fn ran,
the Scaffold init_fn gets has one when model_fn gave none (`scaffold.saver.restore(session,
path)`, tensorflow_estimator's SavedModelEstimator). This module knows variables, savers and
checkpoints, not strategies, loops or modes.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Collection, Mapping

import numpy as np
import tensorflow as tf

from tpu_estimator_compat import log as logging
from tpu_estimator_compat.checkpoint import checkpoints as checkpoints_lib
from tpu_estimator_compat.checkpoint import object_based
from tpu_estimator_compat.checkpoint import warm_start as warm_start_lib


# The Scaffold pieces that are graph ops legacy's session manager ran; there is no session
# to run them here (`ScaffoldParts.warn_unrun`).
_OP_PIECES = ("init_op", "init_feed_dict", "ready_op", "ready_for_local_init_op",
              "local_init_op", "local_init_feed_dict")


@dataclasses.dataclass(frozen=True)
class ScaffoldParts:
    """What a run uses of model_fn's Scaffold."""

    saver: Any = None  # Its `saver` as given (recorded, object-based, or another object).
    init_fn_scaffold: Any = None  # The Scaffold itself when it has an `init_fn`.
    unrun: tuple[str, ...] = ()  # The op pieces it sets (`_OP_PIECES`).

    @classmethod
    def of(cls, scaffold: Any) -> "ScaffoldParts":
        if scaffold is None:
            return cls()
        init_fn = getattr(scaffold, "init_fn", None)
        unrun = tuple(name for name in _OP_PIECES if getattr(scaffold, name, None) is not None)
        return cls(getattr(scaffold, "saver", None), scaffold if init_fn is not None else None,
                   unrun)

    def warn_unrun(self) -> None:
        """Says that the Scaffold's own init and ready ops are not run, and what stands in."""
        if self.unrun:
            logging.warning(
                "model_fn's Scaffold sets %s, which tpu_estimator_compat does not run (there "
                "is no TF1 session): variables get their initial values when they are "
                "created, init_from_checkpoint and warm start set theirs, and local variables "
                "and lookup tables are initialised by the engine, as the default ops did. "
                "Ops there that assign other values have no effect; do that in "
                "Scaffold(init_fn=...) through a Saver's restore, or with "
                "init_from_checkpoint.", ", ".join(self.unrun))


@dataclasses.dataclass(frozen=True)
class SaverSettings:
    """How model_dir's checkpoints are written in training."""

    saver: checkpoints_lib.V1Saver
    keep_checkpoint_max: int | None
    keep_checkpoint_every_n_hours: float | None
    pad_step_number: bool = False
    var_list_given: bool = False  # A recorded Saver's explicit var_list chose the variables.


def training_saver(saver: Any, variables: Mapping[str, tf.Variable], optional: Collection[str],
                   keep_checkpoint_max: int | None,
                   keep_checkpoint_every_n_hours: float | None) -> SaverSettings:
    """The checkpoint writer of a training run: the Scaffold `saver`'s, else RunConfig's.

    A recorded `Saver(var_list=..., max_to_keep=..., keep_checkpoint_every_n_hours=...,
    pad_step_number=...)` writes its var_list under its names (a dict's keys, else each
    variable's v1 name), with its retention; an object-based saver (`object_based.py`) its
    object-graph keys; anything else (no saver) every variable under RunConfig's retention.

    Raises:
        NotImplementedError: the Saver asks for TF1's V1 checkpoint format.
        ValueError: its var_list is empty or holds something other than variables.
    """
    recorded = saver if warm_start_lib.is_recorded_saver(saver) else None
    writer = object_based.object_saver(saver)
    if writer is not None and recorded is None:
        # A tf.train.Checkpoint: legacy froze it into a Saver with the Saver's defaults.
        return SaverSettings(writer, object_based.OBJECT_SAVER_MAX_TO_KEEP,
                             object_based.OBJECT_SAVER_KEEP_HOURS)
    if recorded is None:
        return SaverSettings(checkpoints_lib.V1Saver(variables, optional),
                             keep_checkpoint_max, keep_checkpoint_every_n_hours)
    if recorded.write_version != tf.compat.v1.train.SaverDef.V2:
        raise NotImplementedError(
            "model_fn's Scaffold Saver asks for write_version=SaverDef.V1, TF1's old "
            "single-file checkpoint format; tpu_estimator_compat writes V2 checkpoints "
            "(`.index` + `.data-*`, which every TF1 and TF2 reader reads). Drop "
            "`write_version` from the Saver.")
    var_list_given = writer is None and recorded.var_list is not None
    if writer is None:
        chosen = _var_list_map(recorded.var_list) if var_list_given else dict(variables)
        writer = checkpoints_lib.V1Saver(chosen, [n for n in optional if n in chosen])
    return SaverSettings(writer, recorded.max_to_keep, recorded.keep_checkpoint_every_n_hours,
                         recorded.pad_step_number, var_list_given)


def _var_list_map(var_list: Any) -> dict[str, tf.Variable]:
    """`{checkpoint name: variable}` of a Saver's var_list, checked as a TF1 Saver did."""
    chosen = warm_start_lib.saver_var_map(var_list)
    if not chosen:
        raise ValueError("No variables to save: model_fn's Scaffold Saver got an empty "
                         "var_list. Leave var_list unset to save every variable.")
    wrong = {name: type(v).__name__ for name, v in chosen.items()
             if not isinstance(v, tf.Variable)}
    if wrong:
        raise ValueError(
            f"model_fn's Scaffold Saver var_list holds {wrong!r}, which are not variables of "
            "the model; tpu_estimator_compat saves variables only (no partitioned variables "
            "or SaveableObjects). Pass the variables, or leave var_list unset.")
    return chosen


def check_restored_all(settings: SaverSettings, variables: Mapping[str, tf.Variable],
                       optional: Collection[str], checkpoint: str) -> None:
    """Legacy's readiness check after a restore through a Saver with a var_list.

    TF1's session manager restored only the Saver's variables and then found the others
    uninitialised: resuming with a Saver that leaves variables out failed.

    Raises:
        RuntimeError: a variable of the model is not in the Saver's var_list.
    """
    if not settings.var_list_given:
        return
    saved = {id(v) for v in settings.saver.variables.values()}
    missing = sorted(name for name, v in variables.items()
                     if id(v) not in saved and name not in optional)
    if missing:
        raise RuntimeError(
            "Init operations did not make model ready for local_init.  error: Variables not "
            f"initialized: {', '.join(missing)}. The latest checkpoint {checkpoint} was "
            "restored through model_fn's Scaffold Saver, whose var_list leaves these "
            "variables out, as legacy's session manager found too. Give the Saver every "
            "variable (leave var_list unset) to resume training, or start a fresh model_dir "
            "with warm_start_from=<this checkpoint>.")


def run_init_fn(scaffold: Any, variables: Mapping[str, tf.Variable]) -> bool:
    """Calls a Scaffold's `init_fn(scaffold, session)` on the host; True if it had one.

    Call it only for a fresh model (no checkpoint restored), after the variables got their
    initial values, init_from_checkpoint's and warm start's: legacy ran it right after the
    init op, whose initializers those had set.
    """
    if scaffold is None or scaffold.init_fn is None:
        return False
    if scaffold.saver is None:  # Legacy's Scaffold.finalize made the default Saver.
        scaffold = tf.compat.v1.train.Scaffold(
            saver=warm_start_lib.saver_over(dict(variables)), copy_from_scaffold=scaffold)
    logging.info("Running Scaffold.init_fn: no checkpoint was restored.")
    with tf.init_scope():
        scaffold.init_fn(InitSession())
    return True


_GRAPH_FETCH = (
    "Scaffold.init_fn ran session.run({fetch!r}){feed}, an op or tensor of the graph model_fn "
    "was traced in. There is no TF1 session here: the model's variables are live eager "
    "variables, and model_fn's graph runs only as its training step. An init_fn that "
    "restores through `tf.compat.v1.train.Saver(var_list).restore(session, path)` built in "
    "model_fn or scaffold_fn (tf_slim's `assign_from_checkpoint_fn`) works as it is; for "
    "assign ops (tf_slim's `assign_from_checkpoint` and its `(assign_op, feed_dict)`), call "
    "`tf.compat.v1.train.init_from_checkpoint(path, assignment_map)` in model_fn instead, "
    "or pass `warm_start_from`.")


class InitSession:
    """What `Scaffold(init_fn=...)` gets as `session`: `run` reads variables and eager values.

    A Saver that model_fn or scaffold_fn built takes it in `restore(session, path)` and
    assigns the live variables (`warm_start._RecordingSaver.restore`).
    """

    def run(self, fetches: Any, feed_dict: Any = None, options: Any = None,
            run_metadata: Any = None) -> Any:
        """Values of `fetches` (a nest of variables and eager tensors), as numpy."""
        del options, run_metadata
        return _map(lambda fetch: _value(fetch, feed_dict), fetches)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"The session Scaffold.init_fn gets has no {name!r}: there is no TF1 session "
            "(tpu_estimator_compat runs the model as TF2 functions over eager variables). "
            "It serves `session.run(variables)` and a Saver's `restore(session, path)`.")


def _value(fetch: Any, feed_dict: Any) -> Any:
    if fetch is None:
        raise TypeError(f"Fetch argument {fetch!r} has invalid type {type(fetch)}")
    if (feed_dict or isinstance(fetch, (tf.Operation, str))
            or tf.is_symbolic_tensor(fetch)):
        feed = f" with feed_dict={feed_dict!r}" if feed_dict else ""
        raise NotImplementedError(_GRAPH_FETCH.format(fetch=fetch, feed=feed))
    if isinstance(fetch, tf.Variable) or hasattr(fetch, "numpy"):
        return np.asarray(fetch.numpy())
    raise TypeError(f"Fetch argument {fetch!r} has invalid type {type(fetch)}, must be a "
                    "variable or a tensor (Scaffold.init_fn's session).")


def _map(fn: Callable[[Any], Any], fetches: Any) -> Any:
    """`fetches` with `fn` applied to each, as `session.run` walked lists, tuples and dicts."""
    if isinstance(fetches, dict):
        return type(fetches)((key, _map(fn, value)) for key, value in fetches.items())
    if isinstance(fetches, tuple) and hasattr(fetches, "_fields"):
        return type(fetches)(*(_map(fn, value) for value in fetches))
    if isinstance(fetches, (list, tuple)):
        return type(fetches)(_map(fn, value) for value in fetches)
    return fn(fetches)
