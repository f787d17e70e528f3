"""Legacy-compatible checkpoints: v1-named bundles, written and managed without a session.

This module owns the checkpoint files in a `model_dir`, laid out exactly as a TF1
`tf.compat.v1.train.Saver` under legacy `Estimator` wrote them: `model.ckpt-<step>.index` and
`model.ckpt-<step>.data-00000-of-00001` keyed by v1 variable names, `model.ckpt-<step>.meta`
(a MetaGraphDef that restores them, from `meta.py`), and the text `checkpoint`
state file listing them. `V1Saver` saves and restores a `{v1 name: variable}` mapping (plain,
mirrored, sync-on-read or TPU variables) in cross-replica context; `CheckpointManager` adds the
legacy Saver's retention rules (`keep_checkpoint_max`, `keep_checkpoint_every_n_hours`,
recovery of the checkpoint list after a restart); when to save is `save_policy.py`'s. It
must not know where the variables
come from, how a model_fn is traced, which strategy runs the loop, or what the training loop
does between saves: callers hand it names, variables, steps and times.
"""
from __future__ import annotations

import dataclasses
import os
import re
import threading
import time
import uuid
from typing import Any, Callable, Collection, Mapping, Protocol

import numpy as np
import tensorflow as tf
from google.protobuf import text_format

from tpu_estimator_compat.checkpoint import meta as checkpoint_meta
from tpu_estimator_compat.checkpoint import restore_assign
from tpu_estimator_compat import log as logging
from tpu_estimator_compat import shapes as shapes_lib

STATE_FILENAME = "checkpoint"
"""Name of the `CheckpointState` text file, as `tf.compat.v1.train.Saver` wrote it."""

GLOBAL_STEP_NAME = "global_step"
"""Checkpoint key legacy Estimator read the global step from (`GraphKeys.GLOBAL_STEP`)."""

# SaveV2/RestoreV2 with an empty slice spec write and read whole tensors, which is what an
# unpartitioned TF1 Saver wrote; partitioned variables are not supported.
_FULL_TENSOR = ""

# `<prefix>-<step>` optionally followed by one of the file suffixes a V2 checkpoint has.
_STEP_RE = re.compile(r"-(\d+)$")
_FILE_SUFFIX_RE = re.compile(r"\.(index|meta|data-\d{5}-of-\d{5})$")

_FIX_HINT = (
    "The checkpoint was written by a different model (or a different version of it). Point "
    "`model_dir` at an empty directory or at one written by this model, or, to start from the "
    "matching part of this checkpoint only, leave `model_dir` fresh and pass it as "
    "`warm_start_from` (partial restore) instead.")


def _host_device() -> str:
    """The device the whole-checkpoint SaveV2/RestoreV2 ops run on.

    SaveV2/RestoreV2 only have CPU kernels. Pinning them to the local host CPU makes the
    strategy's per-device copies be gathered to (or broadcast from) one place, the way a TF1
    Saver placed its single unsharded save op.
    """
    return "/cpu:0"


def _check_cross_replica(what: str) -> None:
    """Raises unless we are eager and not inside a replica function.

    Why: a sync-on-read variable read inside `strategy.run` returns this replica's local copy,
    not the aggregated value a TF1 Saver wrote, and an assign there only updates one replica.
    Outside any strategy the default replica context is fine (there is only one copy).
    """
    if not tf.executing_eagerly():
        raise RuntimeError(
            f"{what} must run eagerly, but it was called while building a graph or tracing a "
            "tf.function. Call it from the Python training loop, between steps.")
    if tf.distribute.has_strategy() and tf.distribute.get_replica_context() is not None:
        raise RuntimeError(
            f"{what} was called in a replica context (inside `strategy.run`). Call it in "
            "cross-replica context: eagerly, inside `strategy.scope()` or outside any "
            "strategy, between steps.")


def _shape_str(shape: tf.TensorShape | None) -> str:
    dims = shapes_lib.static_dims(shape)
    return str(dims) if dims is not None else "<unknown rank>"


@dataclasses.dataclass(frozen=True)
class _Mismatch:
    name: str
    expected_shape: tf.TensorShape
    expected_dtype: tf.DType
    found_shape: tf.TensorShape | None = None
    found_dtype: tf.DType | None = None

    def describe(self) -> str:
        expected = f"{_shape_str(self.expected_shape)} {self.expected_dtype.name}"
        if self.found_dtype is None:
            found = "no such variable"
        else:
            found = f"{_shape_str(self.found_shape)} {self.found_dtype.name}"
        return f"  - {self.name!r}: model has {expected}; checkpoint has {found}"


def _mismatch_error(source: str, mismatches: list[_Mismatch], hint: str) -> ValueError:
    lines = "\n".join(m.describe() for m in sorted(mismatches, key=lambda m: m.name))
    return ValueError(
        f"{source} does not match the model's variables ({len(mismatches)} "
        f"variable(s) missing or of the wrong shape/dtype):\n{lines}\n{hint}")


class V1Saver:
    """Saves and restores variables under their v1 names, in TF1 Saver's V2 file format.

    Why not `tf.train.Checkpoint`: object-based checkpoints key tensors by object-graph paths
    (`model/layer/kernel/.ATTRIBUTES/VARIABLE_VALUE`) and add an object-graph proto, so a TF1
    `Saver`, `init_from_checkpoint`, `warm_start` or another legacy tool could not read them,
    and legacy checkpoints could not be restored into this library. Writing the raw bundle
    with `tf.raw_ops.SaveV2` under the v1 names gives byte-for-byte the layout an unpartitioned
    TF1 Saver produced, and `tf.raw_ops.RestoreV2` reads either.

    Distributed variables are saved as a TF1 Saver under a strategy did: mirrored (and TPU)
    variables by their value, sync-on-read variables by their aggregated cross-replica read
    (MEAN or SUM of the replicas). Restoring assigns in cross-replica context, which writes
    every replica's copy; for a SUM sync-on-read variable TF splits the value evenly over the
    replicas so that the aggregated read returns it again, as TF1's restore did.
    """

    def __init__(self, variables: Mapping[str, tf.Variable],
                 optional: Collection[str] = ()) -> None:
        """Takes the variables to manage.

        Args:
            variables: `{v1 name: variable}`, e.g. `{'dense/kernel': v, 'global_step': gs}`.
                The names become the checkpoint keys, so they must be what a TF1 graph named
                these variables (no `:0` suffix).
            optional: names a checkpoint may lack; `restore` then leaves them as they are
                (the optimizer slots of TPU embedding's gradient-capturing dummy variables,
                which a legacy CPU checkpoint never had and which only ever hold zeros'
                updates).

        Raises:
            ValueError: `variables` is empty or has a bad name.
            TypeError: a value is not a `tf.Variable`.
        """
        if not variables:
            raise ValueError(
                "V1Saver(variables=...) received no variables; a TF1 Saver refused to save "
                "an empty checkpoint too. Pass the `{v1 name: tf.Variable}` mapping of the "
                "model, created before the saver.")
        bad_names = [n for n in variables if not isinstance(n, str) or not n or n.endswith(":0")]
        if bad_names:
            raise ValueError(
                f"V1Saver(variables=...) received invalid v1 names {bad_names!r}. Keys must be "
                "non-empty variable names as a TF1 graph had them, without the ':0' output "
                "suffix (e.g. 'dense/kernel', not 'dense/kernel:0').")
        not_variables = {n: type(v).__name__ for n, v in variables.items()
                         if not isinstance(v, tf.Variable)}
        if not_variables:
            raise TypeError(
                f"V1Saver(variables=...) values must be tf.Variable (plain or distributed); "
                f"received {not_variables!r}. Pass the variables themselves, not tensors or "
                "their values.")
        # Sorted so the data file is laid out deterministically (SaveV2 appends tensors in the
        # order given); the index is sorted by key either way.
        self._variables: dict[str, tf.Variable] = dict(sorted(variables.items()))
        self._optional = frozenset(optional)

    @property
    def variables(self) -> dict[str, tf.Variable]:
        """The managed `{v1 name: variable}` mapping, sorted by name."""
        return dict(self._variables)

    def save(self, prefix: str) -> str:
        """Writes `prefix.index` and `prefix.data-00000-of-00001`.

        What SaveV2 does on disk (verified with strace on TF 2.21): it writes the data file
        as `<prefix>.data-00000-of-00001.tempstate<random>` and renames it into place, then
        writes `<prefix>.index.tempstate<random>` and renames that into place, with no fsync.
        So the index, which is what marks a checkpoint as present, appears last and whole,
        and a process crash leaves at most orphaned `.tempstate` files or a data file without
        an index. Overwriting an existing prefix is NOT atomic as a pair, though: between the
        two renames the new data file sits next to the old index; `CheckpointManager`
        unpublishes a prefix before rewriting it for that reason.

        Args:
            prefix: Path prefix, e.g. `/model_dir/model.ckpt-100`. Parent directories are
                created.

        Returns:
            `prefix`, for symmetry with `tf.compat.v1.train.Saver.save`.
        """
        constants = self._constants()
        names = list(self._variables) + list(constants)
        values = self.read_values() + [tf.constant(v) for v in constants.values()]
        parent = os.path.dirname(prefix)
        if parent:
            tf.io.gfile.makedirs(parent)
        with tf.device(_host_device()):
            tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names,
                              shape_and_slices=[_FULL_TENSOR] * len(names), tensors=values)
        logging.info("Saved %d variables to %s", len(names), prefix)
        return prefix

    def _constants(self) -> dict[str, Any]:
        """Fixed tensors written after the variables (an object graph), never restored."""
        return {}

    def read_values(self) -> list[tf.Tensor]:
        """The values `save` writes, in name order, without writing them.

        Reading in cross-replica context gives the mirrored value or the aggregated
        sync-on-read value, which is what a TF1 Saver's saveables wrote. On a multi-worker
        strategy that aggregation is an all-reduce every worker must join, so workers that do
        not write a checkpoint still call this when the writer saves.
        """
        _check_cross_replica("V1Saver.save")
        return [_read_for_save(self._variables[n]) for n in self._variables]

    def restore(self, prefix: str) -> None:
        """Restores every managed variable from the checkpoint at `prefix`, by v1 name.

        All-or-nothing: every variable is checked against the checkpoint before any is
        assigned, and a single ValueError lists every variable that is missing from the
        checkpoint or has another shape or dtype there. Checkpoint keys the model does not
        have are ignored, as a TF1 Saver restoring a subset of a checkpoint ignored them.

        Args:
            prefix: Checkpoint prefix (no `.index` suffix), e.g. from `latest_checkpoint()`.

        Raises:
            ValueError: the checkpoint cannot be read, or does not match the variables.
        """
        _check_cross_replica("V1Saver.restore")
        reader = _open_checkpoint(prefix, "V1Saver.restore(prefix=...)")
        logging.legacy_info("Restoring parameters from %s", prefix)  # A TF1 Saver's line.
        shapes = reader.get_variable_to_shape_map()
        dtypes = reader.get_variable_to_dtype_map()
        mismatches = []
        skipped = sorted(n for n in self._variables if n in self._optional and n not in shapes)
        for name, var in self._variables.items():
            if name in skipped:
                continue
            if name not in shapes:
                mismatches.append(_Mismatch(name, var.shape, var.dtype))
            elif (tf.as_dtype(dtypes[name]) != var.dtype
                  or not var.shape.is_compatible_with(shapes[name])):
                mismatches.append(_Mismatch(name, var.shape, var.dtype,
                                            tf.TensorShape(shapes[name]),
                                            tf.as_dtype(dtypes[name])))
        if mismatches:
            raise _mismatch_error(f"Checkpoint {prefix!r}", mismatches, _FIX_HINT)
        if skipped:
            logging.info("Checkpoint %s has no %s; they keep their initial values.", prefix,
                         ", ".join(skipped))
        names = [n for n in self._variables if n not in skipped]
        with tf.device(_host_device()):
            tensors = tf.raw_ops.RestoreV2(
                    prefix=prefix, tensor_names=names,
                    shape_and_slices=[_FULL_TENSOR] * len(names),
                    dtypes=[self._variables[n].dtype for n in names])
        restore_assign.assign_all([self._variables[n] for n in names], tensors)
        logging.info("Restored %d variables from %s", len(names), prefix)


def _read_for_save(variable: tf.Variable) -> tf.Tensor:
    """The value to save, without copying a plain variable's buffer.

    After a sparse access (`tf.gather`, a scatter update: every embedding table) a resource
    variable copies its whole buffer on each dense read, so reading every variable for one
    SaveV2 call held a second copy of all of them (+1.2 GB at the end of a DLRM-sized run,
    bench/results/HISTORY.md). `read_value_no_copy` is what `tf.train.Checkpoint` saves with.
    Distributed variables keep `read_value` (the mirrored value, or the aggregated read of a
    sync-on-read variable).
    """
    if not isinstance(variable, tf.distribute.DistributedValues) and hasattr(
            variable, "read_value_no_copy"):
        return variable.read_value_no_copy()
    return variable.read_value()


def _open_checkpoint(prefix: str, where: str) -> tf.train.CheckpointReader:
    try:
        return tf.train.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError) as e:
        # OpError covers NotFound, DataLoss and the bare UNKNOWN OpError TF raises for a
        # truncated index ("file is too short to be an sstable").
        raise ValueError(
            f"{where}: cannot read a checkpoint at {prefix!r} ({type(e).__name__}: {e}). "
            "If it is listed in model_dir's `checkpoint` file it may be corrupt: delete its "
            "files (and its line in `checkpoint`) to resume from the previous one. Otherwise "
            "pass a checkpoint prefix such as '/model_dir/model.ckpt-100' (without "
            "'.index').") from e


def checkpoint_step(prefix: str) -> int:
    """The global step a checkpoint belongs to.

    Parsed from the `-<step>` suffix legacy Saver appended (`model.ckpt-1200` -> 1200; file
    names such as `model.ckpt-1200.index` are accepted too). Without such a suffix the
    `global_step` tensor stored in the checkpoint is read, as legacy Estimator did.

    Args:
        prefix: Checkpoint prefix or one of its file names.

    Raises:
        ValueError: no step suffix and no readable `global_step` in the checkpoint.
    """
    stem = _FILE_SUFFIX_RE.sub("", os.path.basename(prefix))
    match = _STEP_RE.search(stem)
    if match:
        return int(match.group(1))
    checkpoint = _FILE_SUFFIX_RE.sub("", prefix)
    reader = _open_checkpoint(checkpoint, "checkpoint_step(prefix=...)")
    if not reader.has_tensor(GLOBAL_STEP_NAME):
        raise ValueError(
            f"checkpoint_step(prefix={prefix!r}): the path has no '-<step>' suffix and the "
            f"checkpoint has no {GLOBAL_STEP_NAME!r} variable. Pass a prefix like "
            "'model.ckpt-100', or a checkpoint that stores the global step.")
    return int(reader.get_tensor(GLOBAL_STEP_NAME))


class WorkerSync(Protocol):
    """How the workers of one job share a model_dir (given by the caller; see cluster/workers.py).

    Exactly one worker, the writer, writes files. Every worker calls `save` and
    `restore_latest` at the same points, so `agree` and `barrier` pair up across workers.
    """

    is_writer: bool

    def agree(self, step: int) -> int:
        """The writer's `step`, returned on every worker."""

    def barrier(self) -> None:
        """Returns once every worker has called it."""


@dataclasses.dataclass
class _Recorded:
    path: str
    timestamp: float


class CheckpointManager:
    """Legacy `Saver` + `CheckpointSaverHook` file management for one `model_dir`, sessionless.

    What is mimicked from `tf.compat.v1.train.Saver` (TF 2.15 saver.py) as legacy Estimator
    configured it (`save_relative_paths=True`, `max_to_keep=keep_checkpoint_max`):

    * Files `model_dir/model.ckpt-<step>.{index,data-00000-of-00001,meta}`; the `checkpoint`
      state file lists paths relative to `model_dir`, oldest first, and is rewritten
      atomically (temporary file + rename) only after the checkpoint's files are in place.
      The `.meta` MetaGraphDef is built once per manager (the variables do not change while
      one `train()` runs) and its bytes written with every checkpoint.
    * `keep_checkpoint_max`: the most recent N checkpoints are kept; older ones are removed
      from the state file first and their files deleted afterwards. 0 or None keeps every
      file and, as legacy did, lists only the latest in `all_model_checkpoint_paths`.
    * `keep_checkpoint_every_n_hours`: a checkpoint pushed out of the window is kept on disk
      (and forgotten) if it was written more than N hours after the last one so kept, counted
      from the manager's creation - legacy `_MaybeDeleteOldCheckpoints`.
    * On construction the list is recovered from the state file, with each file's mtime as
      its timestamp and vanished files dropped - legacy `recover_last_checkpoints`.
    * Saving a step that was already saved overwrites it and moves it to the newest slot.

    Several worker processes sharing one model_dir (`sync`): only the writer (the chief)
    writes files; the others read the variables along with it and wait until its checkpoint
    is published, so no worker runs ahead of a checkpoint that is not on disk yet; every
    worker restores the checkpoint the writer names as latest.

    Deliberate differences: every checkpoint beyond the window is pruned at once (legacy
    deleted one per save, so a smaller `keep_checkpoint_max` after a restart took several saves
    to take effect); the state file also gets `all_model_checkpoint_timestamps` and
    `last_preserved_timestamp` (legacy Saver left them empty, `tf.train.CheckpointManager`
    writes them; legacy readers ignore them); the `.meta` holds the variables and a Saver,
    not the training graph (there is none: see `meta.py`); and a re-saved step is first
    removed from the state file so a crash between
    SaveV2's two renames cannot leave the state pointing at a mixed old/new checkpoint.
    """

    def __init__(self, model_dir: str, saver: V1Saver, *, keep_checkpoint_max: int | None = 5,
                 keep_checkpoint_every_n_hours: float | None = 10000,
                 basename: str = "model.ckpt",
                 clock: Callable[[], float] = time.time,
                 sync: WorkerSync | None = None, pad_step_number: bool = False) -> None:
        """Recovers the checkpoint list of `model_dir`.

        Args:
            model_dir: Directory holding the checkpoints and the `checkpoint` state file.
            saver: Writes and reads the variables.
            keep_checkpoint_max: Checkpoints to keep; 0 or None keeps all.
            keep_checkpoint_every_n_hours: Additionally keep one checkpoint per this many
                hours of training; None disables it.
            basename: File name prefix of the checkpoints.
            clock: Wall-clock seconds since the epoch (injectable for tests); the timestamps
                are compared with file mtimes after a restart, so it must be wall time.
            sync: For a model_dir shared by several worker processes; None on one process.
            pad_step_number: Steps in file names as 8 digits (`model.ckpt-00000100`), as a
                TF1 `Saver(pad_step_number=True)` wrote them.

        Raises:
            ValueError: a negative `keep_checkpoint_max`, a non-positive
                `keep_checkpoint_every_n_hours`, or a `basename` with a directory or named
                like the state file.
        """
        if not model_dir:
            raise ValueError("CheckpointManager(model_dir=...) received an empty path; pass "
                             "the estimator's model_dir.")
        if keep_checkpoint_max is not None and (
                isinstance(keep_checkpoint_max, bool) or int(keep_checkpoint_max) < 0):
            raise ValueError(
                f"CheckpointManager(keep_checkpoint_max={keep_checkpoint_max!r}) must be an int "
                ">= 0 (0 or None keeps every checkpoint).")
        if keep_checkpoint_every_n_hours is not None and keep_checkpoint_every_n_hours <= 0:
            raise ValueError(
                f"CheckpointManager(keep_checkpoint_every_n_hours="
                f"{keep_checkpoint_every_n_hours!r}) must be > 0 (or None to disable), as "
                "RunConfig requires.")
        if not basename or os.path.dirname(basename) or basename == STATE_FILENAME:
            raise ValueError(
                f"CheckpointManager(basename={basename!r}) must be a plain file name other than "
                f"{STATE_FILENAME!r}, e.g. 'model.ckpt'; put directories in model_dir.")
        self._model_dir = model_dir.rstrip("/") if model_dir.rstrip("/") else model_dir
        self._saver = saver
        self._max_to_keep = int(keep_checkpoint_max or 0)
        self._every_n_secs = (None if keep_checkpoint_every_n_hours is None
                              else float(keep_checkpoint_every_n_hours) * 3600.0)
        self._keep_every_n_hours = keep_checkpoint_every_n_hours
        self._meta_graph: bytes | None = None  # Built at the first save.
        self._basename = basename
        self._clock = clock
        self._sync = sync
        self._step_format = "{:08d}" if pad_step_number else "{}"
        self._last_preserved = clock()
        self._next_keep_time = (None if self._every_n_secs is None
                                else self._last_preserved + self._every_n_secs)
        self._checkpoints: list[_Recorded] = self._recover()

    @property
    def model_dir(self) -> str:
        return self._model_dir

    def checkpoint_path(self, global_step: int) -> str:
        """The prefix a checkpoint of `global_step` has: `model_dir/<basename>-<step>`."""
        step = self._step_format.format(_as_step(global_step))
        return os.path.join(self._model_dir, f"{self._basename}-{step}")

    def latest_checkpoint(self) -> str | None:
        """The prefix the state file names as latest, if its index file exists.

        Exactly `tf.train.latest_checkpoint`: files not named by the state file (for example
        a half-written `model.ckpt-99.index` from a crashed save) are never considered.
        """
        return tf.train.latest_checkpoint(self._model_dir)

    def save(self, global_step: int) -> str:
        """Writes the checkpoint of `global_step`, publishes it, then prunes old ones.

        Order, for crash safety: (1) if this step is already published, republish the state
        file without it; (2) SaveV2 writes data then index; (3) the state file is atomically
        replaced to name the new checkpoint; (4) pruned checkpoints' files are deleted. A
        crash at any point leaves the state file naming only complete checkpoints. With
        `sync`, a worker that is not the writer only reads the variables, and every worker
        returns once the writer has published the checkpoint.

        Args:
            global_step: The step the variables' values belong to.

        Returns:
            The new checkpoint prefix.
        """
        step = _as_step(global_step)
        path = self.checkpoint_path(step)
        if self._sync is None or self._sync.is_writer:
            self._save(step, path)
        else:
            self._saver.read_values()
        if self._sync is not None:
            self._sync.barrier()
        return path

    def _save(self, step: int, path: str) -> None:
        tf.io.gfile.makedirs(self._model_dir)
        self._unpublish(path)
        # Forgotten until rewritten: if the rewrite crashes, its files may be mixed old/new.
        self._checkpoints = [r for r in self._checkpoints if r.path != path]
        # Legacy's saver hook named its save path, the prefix without the step.
        logging.legacy_info("Saving checkpoints for %d into %s.", step,
                            os.path.join(self._model_dir, self._basename))
        meta_graph = self._meta_graph_bytes()
        self._saver.save(path)
        _atomic_write(path + ".meta", meta_graph())
        now = self._clock()
        if self._max_to_keep:
            self._checkpoints.append(_Recorded(path, now))
            listed = list(self._checkpoints)
            pruned = []
            while len(listed) > self._max_to_keep:
                pruned.append(listed.pop(0))
            self._checkpoints = listed
            self._write_state(path, listed)
            for old in pruned:
                self._maybe_delete(old)
        else:
            self._write_state(path, [_Recorded(path, now)])

    def _meta_graph_bytes(self) -> Callable[[], bytes]:
        """The `.meta` bytes of every checkpoint of this run, as a call that waits for them.

        The first save builds them (2 s of Python graph building for BERT-base's 604
        variables) on a thread of its own while the checkpoint's data is written, which
        releases the GIL for its I/O: they need the variables' names, shapes and dtypes,
        never their values.
        """
        if self._meta_graph is not None:
            meta_graph = self._meta_graph
            return lambda: meta_graph
        variables = dict(self._saver.variables)
        done: list[Any] = []

        def build() -> None:
            start = time.perf_counter()
            try:
                done.append(checkpoint_meta.meta_graph_bytes(
                    variables, max_to_keep=self._max_to_keep,
                    keep_checkpoint_every_n_hours=self._keep_every_n_hours))
            except BaseException as e:  # pylint: disable=broad-except  # Raised by wait().
                done.append(e)
                return
            logging.debug("Built the checkpoints' MetaGraphDef (%d variables, %d bytes) in "
                          "%.1f ms.", len(variables), len(done[0]),
                          (time.perf_counter() - start) * 1000)

        thread = threading.Thread(target=build, name="checkpoint_meta_graph", daemon=True)
        thread.start()

        def wait() -> bytes:
            thread.join()
            if isinstance(done[0], BaseException):
                raise done[0]
            self._meta_graph = done[0]
            return self._meta_graph

        return wait

    def restore_latest(self) -> int | None:
        """Restores the latest checkpoint; returns its global step, or None if there is none.

        The step is the `global_step` value stored in the checkpoint (what legacy Estimator
        resumed from), or the path's `-<step>` suffix if the checkpoint has no global step.
        """
        latest = self.latest_checkpoint()
        if self._sync is not None:
            latest = self._agreed(latest)
        if latest is None:
            return None
        self._saver.restore(latest)
        if self._sync is not None:
            self._sync.barrier()  # Nobody writes before every worker has read.
        reader = _open_checkpoint(latest, "CheckpointManager.restore_latest")
        if reader.has_tensor(GLOBAL_STEP_NAME):
            return int(reader.get_tensor(GLOBAL_STEP_NAME))
        return checkpoint_step(latest)

    # ----------------------------------------------------------------------------------

    def _agreed(self, latest: str | None) -> str | None:
        """The writer's latest checkpoint, found in this worker's view of model_dir."""
        step = self._sync.agree(-1 if latest is None else checkpoint_step(latest))
        if step < 0:
            if latest is not None:
                logging.warning("Ignoring %s: the chief sees no checkpoint in %s.", latest,
                                self._model_dir)
            return None
        if latest is not None and checkpoint_step(latest) == step:
            return latest
        candidates = [p for p in self._published_paths() if checkpoint_step(p) == step]
        path = candidates[0] if candidates else self.checkpoint_path(step)
        if not tf.io.gfile.exists(path + ".index"):
            raise ValueError(
                f"The chief restores the checkpoint of step {step}, but this worker cannot "
                f"read {path} (its latest is {latest}). Every worker must see the same "
                "model_dir: put it on a filesystem all workers share.")
        return path

    def _state(self) -> Any:
        try:
            return tf.train.get_checkpoint_state(self._model_dir)
        except ValueError as e:  # A state file without model_checkpoint_path.
            logging.warning("Ignoring the checkpoint state file in %s: %s", self._model_dir, e)
            return None

    def _published_paths(self) -> list[str]:
        state = self._state()
        if state is None:
            return []
        return [state.model_checkpoint_path, *state.all_model_checkpoint_paths]

    def _recover(self) -> list[_Recorded]:
        """Legacy `recover_last_checkpoints`: listed files that still exist, mtime-stamped."""
        state = self._state()
        if state is None:
            return []
        recovered = []
        for path in state.all_model_checkpoint_paths:
            try:
                mtime = tf.io.gfile.stat(path + ".index").mtime_nsec / 1e9
            except tf.errors.NotFoundError:
                continue  # Deleted by someone else meanwhile; legacy skipped these too.
            recovered.append(_Recorded(path, mtime))
        if recovered:
            logging.info("Recovered %d checkpoint(s) of %s from its state file.",
                         len(recovered), self._model_dir)
        return recovered

    def _relative(self, path: str) -> str:
        if os.path.dirname(path) == self._model_dir:
            return os.path.basename(path)
        return path

    def _write_state(self, latest: str, listed: list[_Recorded]) -> None:
        # The `checkpoint` state file legacy's Saver wrote, as TF's deprecated
        # `update_checkpoint_state` writes it (a text CheckpointState proto; relative paths
        # stay relative), without its deprecation warning on every save.
        # An absolute directory: TensorFlow relativises paths against a relative one, which
        # would turn `model.ckpt-4` into `../model.ckpt-4` for `model_dir='output'`.
        state = tf.compat.v1.train.generate_checkpoint_state_proto(
            os.path.abspath(self._model_dir), self._relative(latest),
            all_model_checkpoint_paths=[self._relative(r.path) for r in listed],
            all_model_checkpoint_timestamps=[r.timestamp for r in listed],
            last_preserved_timestamp=self._last_preserved)
        _atomic_write(os.path.join(self._model_dir, "checkpoint"),
                      text_format.MessageToString(state))

    def _unpublish(self, path: str) -> None:
        """Removes `path` from the state file before it is overwritten."""
        state = self._state()
        if state is None:
            return
        listed = list(state.all_model_checkpoint_paths)
        if path not in listed and state.model_checkpoint_path != path:
            return
        stamps = list(state.all_model_checkpoint_timestamps)
        if len(stamps) != len(listed):
            stamps = [self._clock()] * len(listed)
        remaining = [_Recorded(p, t) for p, t in zip(listed, stamps) if p != path]
        latest = state.model_checkpoint_path
        if latest == path:
            latest = remaining[-1].path if remaining else None
        if latest is None:
            tf.io.gfile.remove(os.path.join(self._model_dir, STATE_FILENAME))
        else:
            self._write_state(latest, remaining)

    def _maybe_delete(self, old: _Recorded) -> None:
        """Legacy `_MaybeDeleteOldCheckpoints` for one checkpoint pushed out of the window."""
        if self._next_keep_time is not None and old.timestamp > self._next_keep_time:
            self._next_keep_time += self._every_n_secs
            self._last_preserved = old.timestamp
            logging.info("Keeping %s (keep_checkpoint_every_n_hours).", old.path)
            return
        # Index first: without it the checkpoint no longer counts as existing.
        for pattern in (old.path + ".index", old.path + ".data-?????-of-?????",
                        old.path + ".meta"):
            for filename in tf.io.gfile.glob(pattern):
                try:
                    tf.io.gfile.remove(filename)
                except tf.errors.OpError as e:
                    logging.warning("Ignoring: could not delete %s: %s", filename, e)


def _as_step(global_step: Any) -> int:
    if isinstance(global_step, bool) or not isinstance(
            global_step, (int, np.integer, tf.Tensor, tf.Variable)):
        raise TypeError(
            f"global_step must be an integer, received {global_step!r} of type "
            f"{type(global_step).__name__}. Pass int(global_step_variable.numpy()).")
    if isinstance(global_step, (tf.Tensor, tf.Variable)):
        if not global_step.dtype.is_integer or global_step.shape.rank != 0:
            raise TypeError(
                f"global_step must be an integer scalar, received a {global_step.dtype.name} "
                f"tensor of shape {global_step.shape}.")
        global_step = global_step.numpy()
    return int(global_step)


def _atomic_write(path: str, contents: str | bytes) -> None:
    """Writes a temporary file and renames it over `path`: readers see old or new, whole."""
    temp = f"{path}.tmp{uuid.uuid4().hex}"
    with tf.io.gfile.GFile(temp, "wb" if isinstance(contents, bytes) else "w") as f:
        f.write(contents)
    tf.io.gfile.rename(temp, path, overwrite=True)
