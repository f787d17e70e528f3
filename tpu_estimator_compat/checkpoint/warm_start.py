"""Initialising variables from other checkpoints: init_from_checkpoint, scaffold_fn, warm start.

TF1 expressed all three as *initializers*: they decide a variable's value only when
`model_dir` holds no checkpoint to restore. Here the variables are created eagerly, so:

* `tf.compat.v1.train.init_from_checkpoint` calls made while the model_fn is traced or while
  `scaffold_fn` runs are recorded (the function is swapped for a recorder only inside
  `capture_init_from_checkpoint`), and `InitPlan.apply` assigns the values afterwards;
* `scaffold_fn` is called on the host after the variables exist (legacy called it on the
  host too), at every train/evaluate/predict call as legacy built every graph; what its
  Scaffold's `saver` and `init_fn` do is `scaffold_parts.py`'s;
* `warm_start_from` (a path or `WarmStartSettings`) is resolved against the v1 names.

The estimator applies the plan only when it starts from no checkpoint. This module knows the
variable names and checkpoint files, nothing about strategies, loops or modes; the two swaps
(`init_from_checkpoint`, `Saver`) are `_tf_patches`' `warm_start.*`, built here.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import re
from typing import Any, Iterator, Mapping

import tensorflow as tf

from tpu_estimator_compat._tf import patches as _tf_patches
from tpu_estimator_compat._tf import private as _tf_private
from tpu_estimator_compat import log as logging
from tpu_estimator_compat.v1_state import variables as variables_lib
from tpu_estimator_compat.checkpoint import vocab_remap


class WarmStartSettings(collections.namedtuple("WarmStartSettings", [
        "ckpt_to_initialize_from", "vars_to_warm_start", "var_name_to_vocab_info",
        "var_name_to_prev_var_name"])):
    """Legacy `tf.estimator.WarmStartSettings`.

    `var_name_to_vocab_info` maps a variable's name to a `tf.compat.v1.train.VocabInfo`:
    its rows (or, with `axis=1`, columns) are remapped from the old vocabulary's
    (`vocab_remap`).
    """

    def __new__(cls, ckpt_to_initialize_from: str, vars_to_warm_start: Any = ".*",
                var_name_to_vocab_info: Any = None,
                var_name_to_prev_var_name: Mapping[str, str] | None = None
                ) -> "WarmStartSettings":
        if not ckpt_to_initialize_from:
            raise ValueError(
                "`ckpt_to_initialize_from` must be a non-empty checkpoint path or directory; "
                f"received {ckpt_to_initialize_from!r}.")
        return super().__new__(cls, ckpt_to_initialize_from, vars_to_warm_start,
                               dict(var_name_to_vocab_info or {}),
                               dict(var_name_to_prev_var_name or {}))


def default_warm_start_settings(warm_start_from: Any) -> WarmStartSettings | None:
    """Legacy's `_get_default_warm_start_settings`: an Estimator's `warm_start_from` as the
    `WarmStartSettings` it keeps (`Estimator._warm_start_settings`, which
    `tf.estimator.add_metrics` passes on to the estimator it builds).

    A path is a checkpoint (file or directory), or a SavedModel directory when it holds
    `variables/variables.index` (then its `variables/variables`).

    Raises:
        ValueError: `warm_start_from` is neither None, a string nor a WarmStartSettings.
    """
    if warm_start_from is None or isinstance(warm_start_from, WarmStartSettings):
        return warm_start_from
    if not isinstance(warm_start_from, (str, bytes)):
        raise ValueError(
            "warm_start_from must be a string or a WarmStartSettings, instead got "
            f"{type(warm_start_from)}. Pass a checkpoint path, a SavedModel directory or "
            "tf.estimator.WarmStartSettings(...).")
    path = tf.compat.as_text(warm_start_from)
    variables = tf.io.gfile.join(path, "variables", "variables")
    if tf.io.gfile.exists(variables + ".index"):
        logging.legacy_info("Warm-starting from a SavedModel")
        return WarmStartSettings(ckpt_to_initialize_from=variables)
    return WarmStartSettings(ckpt_to_initialize_from=path)


def _checkpoint_file(path: str) -> str:
    if tf.io.gfile.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest is None:
            raise ValueError(f"No checkpoint found in directory {path!r} to initialise from.")
        return latest
    return path


@dataclasses.dataclass
class InitPlan:
    """Recorded `init_from_checkpoint` calls, applied once the variables exist.

    Each call keeps the names of the variables that existed when it was made, where that
    is known: a TF1 graph resolved `init_from_checkpoint` against the variables built so
    far, so a call inside model_fn before `minimize()` never touched the optimizer's slots
    (legacy's CPU path). A call made after model_fn (legacy TPU ran scaffold_fn then) sees
    every variable.
    """

    calls: list[tuple[str, dict[Any, Any], frozenset[str] | None]] = dataclasses.field(
        default_factory=list)

    def record(self, ckpt_dir_or_file: str, assignment_map: Mapping[Any, Any],
               existing: frozenset[str] | None = None) -> None:
        call = (ckpt_dir_or_file, dict(assignment_map), existing)
        if call not in self.calls:  # Every replica and every trace makes the same call.
            self.calls.append(call)

    def apply(self, variables: Mapping[str, tf.Variable]) -> int:
        """Assigns every mapped variable from its checkpoint; returns how many were set."""
        count = 0
        for ckpt, assignment_map, existing in self.calls:
            path = _checkpoint_file(ckpt)
            reader = tf.train.load_checkpoint(path)
            visible = (variables if existing is None else
                       {name: v for name, v in variables.items() if name in existing})
            # A TF1 graph's scope map that matched no variable built so far did nothing.
            for ckpt_name, variable in resolve_assignment_map(
                    reader.get_variable_to_shape_map(), assignment_map, visible, path,
                    require_match=existing is None):
                variable.assign(reader.get_tensor(ckpt_name))
                count += 1
        if count:
            logging.info("init_from_checkpoint initialised %d variables.", count)
        return count


def resolve_assignment_map(checkpoint_shapes: Mapping[str, Any], assignment_map: Mapping[Any, Any],
                           variables: Mapping[str, tf.Variable],
                           path: str, require_match: bool = True
                           ) -> list[tuple[str, tf.Variable]]:
    """Pairs checkpoint names with variables, following init_from_checkpoint's rules.

    Keys are checkpoint names or scopes (`'scope/'`, `'/'` for the root); values are
    current variable names, scopes, or variables.
    """
    pairs = []
    for key, target in assignment_map.items():
        if not isinstance(target, str):
            targets = target if isinstance(target, (list, tuple)) else [target]
            for variable in targets:
                _check_in_checkpoint(key, checkpoint_shapes, path)
                pairs.append((key, variable))
            continue
        if key == "/" or key.endswith("/") or target.endswith("/"):
            old_scope = "" if key == "/" else key.rstrip("/") + "/"
            new_scope = "" if target == "/" else target.rstrip("/") + "/"
            matched = 0
            for name, variable in variables.items():
                if new_scope and not name.startswith(new_scope):
                    continue
                ckpt_name = old_scope + name[len(new_scope):]
                if ckpt_name in checkpoint_shapes:
                    pairs.append((ckpt_name, variable))
                    matched += 1
            if not matched and require_match:
                raise ValueError(
                    f"init_from_checkpoint: no variable under scope {target!r} matches a "
                    f"tensor under {key!r} in checkpoint {path}.")
            continue
        if target not in variables:
            raise ValueError(
                f"init_from_checkpoint: variable {target!r} (assignment_map[{key!r}]) is not "
                f"a variable of this model_fn. Known variables include "
                f"{sorted(variables)[:10]}.")
        _check_in_checkpoint(key, checkpoint_shapes, path)
        pairs.append((key, variables[target]))
    return pairs


def _check_in_checkpoint(name: str, shapes: Mapping[str, Any], path: str) -> None:
    if name not in shapes:
        raise ValueError(f"Tensor {name} is not found in {path} checkpoint "
                         f"{sorted(shapes)[:10]}...")


@contextlib.contextmanager
def capture_init_from_checkpoint(plan: InitPlan) -> Iterator[None]:
    """Records `tf.compat.v1.train.init_from_checkpoint` calls instead of running them."""
    with _tf_patches.applied("warm_start.init_from_checkpoint", plan):
        yield


def recording_init_from_checkpoint(original: Any, plan: InitPlan) -> Any:
    """The replacement of patch `warm_start.init_from_checkpoint`: records into `plan`."""
    del original  # Never run: TF1 ran it as an initializer, the plan is applied later.

    def record(ckpt_dir_or_file: str, assignment_map: Mapping[Any, Any]) -> None:
        plan.record(ckpt_dir_or_file, assignment_map, _variables_built_so_far())

    return record


def _variables_built_so_far() -> frozenset[str] | None:
    """The v1 names of the variables the calling model_fn has built so far, if tracing one.

    What TF1's `init_from_checkpoint` resolved a scope map against: the graph's variable
    store at the moment of the call. Inside a replica step the store is the replica's own
    (`variables.replica_scope`); outside any trace (scaffold_fn on the host) there is no
    such moment, and None means every variable. The global step always counts as built.
    """
    if not tf.inside_function():
        return None
    # TF1's Estimator made the global step with `get_variable` in the graph's root store
    # before calling model_fn, so a map naming it (grover and gpt2-ml build theirs from
    # `tf.global_variables()`) resolved it; here it is made eagerly, outside that store.
    return frozenset(_tf_private.v1_store_variable_names()) | {variables_lib.GLOBAL_STEP_NAME}


class _RecordingSaver:
    """Stands in for `tf.compat.v1.train.Saver` while scaffold_fn or model_fn runs.

    Keeps `var_list` and the arguments that shape what a Saver writes (`max_to_keep`,
    `keep_checkpoint_every_n_hours`, `sharded`, `write_version`, `pad_step_number`,
    positional or not), and builds no ops: inside a traced step a real Saver's restore ops
    would run at every step. Without a `var_list` it keeps the global variables that exist
    when it is made, the list a TF1 Saver built over. `saver_def` and `restore(sess,
    save_path)` serve code that reads a Saver's description or wraps the Saver
    (estimator_test's `Mock(wraps=Saver(), saver_def=...)`); `restore` is also what a
    `Scaffold(init_fn=...)` calls (`checkpoint/scaffold_parts.py`).
    """

    def __init__(self, var_list: Any = None, reshape: bool = False, sharded: bool = False,
                 max_to_keep: int | None = 5, keep_checkpoint_every_n_hours: float = 10000.0,
                 name: str | None = None, restore_sequentially: bool = False,
                 saver_def: Any = None, builder: Any = None, defer_build: bool = False,
                 allow_empty: bool = False,
                 write_version: int = tf.compat.v1.train.SaverDef.V2,
                 pad_step_number: bool = False, *args: Any, **kwargs: Any) -> None:
        del reshape, name, restore_sequentially, saver_def, builder, defer_build, args, kwargs
        self.var_list = var_list
        self.max_to_keep = max_to_keep
        self.keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self.sharded = bool(sharded)
        self.allow_empty = bool(allow_empty)
        self.write_version = write_version
        self.pad_step_number = bool(pad_step_number)
        self._built_over = (list(tf.compat.v1.global_variables()) if var_list is None
                            else None)

    @property
    def saver_def(self) -> Any:
        """The `SaverDef` fields this Saver has without a graph: retention and format."""
        return tf.compat.v1.train.SaverDef(
            max_to_keep=self.max_to_keep or 0,
            keep_checkpoint_every_n_hours=self.keep_checkpoint_every_n_hours,
            sharded=self.sharded, version=self.write_version)

    def build(self) -> None:
        """`Saver.build()` made the save and restore ops; this Saver has none to make (its
        restore assigns the variables on the host)."""

    def restore(self, sess: Any, save_path: str) -> None:
        """Restores its variables from `save_path` on the host; `sess` is unused (None or
        the session stand-in a Scaffold's init_fn gets)."""
        del sess  # There is no TF1 session: the variables are assigned eagerly.
        with tf.init_scope():
            restore_through_map(save_path, saver_var_map(
                self.var_list if self.var_list is not None else self._built_over))


def is_saver_like(saver: Any) -> bool:
    """A Scaffold `saver` that is neither recorded here nor object-based, with `restore`."""
    return (saver is not None and not isinstance(saver, (_RecordingSaver, tf.train.Checkpoint))
            and callable(getattr(saver, "restore", None)))


def is_recorded_saver(saver: Any) -> bool:
    """A Saver built while model_fn or scaffold_fn ran (recorded, not built)."""
    return isinstance(saver, _RecordingSaver)


def saver_over(var_list: Any) -> _RecordingSaver:
    """A recorded Saver over `var_list` (`{checkpoint name: variable}` or variables), as if
    built in model_fn: what a Scaffold's default Saver restores through."""
    return _RecordingSaver(var_list)


def recorded_saver(scaffold: Any) -> _RecordingSaver | None:
    """The Saver a model_fn's `Scaffold(saver=...)` holds, if one was built while recording."""
    saver = getattr(scaffold, "saver", None) if scaffold is not None else None
    return saver if isinstance(saver, _RecordingSaver) else None


def recording_saver(original: Any) -> type:
    """The replacement of patch `warm_start.Saver`: `_RecordingSaver`."""
    del original  # A scaffold's Saver is never built for real (see `run_scaffold_fn`).
    return _RecordingSaver


def call_scaffold_fn(scaffold_fn: Any, plan: InitPlan) -> Any:
    """Calls a TPUEstimatorSpec's scaffold_fn on the host, recording its init calls; returns
    its Scaffold (or None).

    Legacy called scaffold_fn when it built each graph, after model_fn; its
    `init_from_checkpoint` calls went into `plan` (applied to a fresh model only), and a
    Saver it builds is recorded (`_RecordingSaver`). `ema.variables_to_restore()` may be
    called in scaffold_fn itself, as efficientdet does: legacy ran scaffold_fn in model_fn's
    graph, so it names the variables as in model_fn.
    """
    with _tf_patches.applied("warm_start.Saver"), variables_lib.ema_restore_by_name(), \
            capture_init_from_checkpoint(plan):
        return scaffold_fn()


def run_scaffold_fn(scaffold_fn: Any, plan: InitPlan) -> tuple[Any, dict[str, Any] | None]:
    """`call_scaffold_fn` for evaluation and prediction: (the Scaffold, the `{checkpoint name:
    variable}` map of its `saver`), which they restore through (the EMA pattern:
    `Scaffold(saver=Saver(ema.variables_to_restore()))`); None without a recorded saver."""
    scaffold = call_scaffold_fn(scaffold_fn, plan)
    saver = recorded_saver(scaffold)
    return scaffold, (saver_var_map(saver.var_list or []) if saver is not None else None)


def saver_var_map(var_list: Any) -> dict[str, Any]:
    """The `{checkpoint name: variable}` map a v1 `Saver(var_list)` restores: a dict as
    given, a list under each variable's v1 name."""
    if isinstance(var_list, dict):
        return dict(var_list)
    return {v.name.split(":")[0]: v for v in var_list}


def restore_through_map(checkpoint: str, var_map: Mapping[str, Any]) -> None:
    """Restores each variable from the checkpoint tensor its map key names."""
    reader = tf.train.load_checkpoint(checkpoint)
    logging.legacy_info("Restoring parameters from %s", checkpoint)  # The Saver's line.
    shapes = reader.get_variable_to_shape_map()
    missing = sorted(name for name in var_map if name not in shapes)
    if missing:
        raise ValueError(f"The Saver's var_list asks for {missing}, which checkpoint "
                         f"{checkpoint} does not hold.")
    for name, variable in var_map.items():
        variable.assign(reader.get_tensor(name))
    logging.info("Restored %d variables from %s through a Saver's var_list.",
                 len(var_map), checkpoint)


_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


def object_checkpoint_keys(reader: Any) -> dict[str, str]:
    """{variable name: checkpoint key} of an object-based checkpoint (`tf.train.Checkpoint`,
    Keras `save_weights`), {} for a name-based one.

    Legacy's warm start found a variable `dense/bias` in an object-based checkpoint through
    the names its object graph recorded (`layer_with_weights-0/bias/.ATTRIBUTES/...`):
    `model_to_estimator` warm-starts from such a checkpoint of the Keras weights.
    """
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    if not reader.has_tensor(_OBJECT_GRAPH_KEY):
        return {}
    graph = trackable_object_graph_pb2.TrackableObjectGraph.FromString(
        reader.get_tensor(_OBJECT_GRAPH_KEY))
    return {attribute.full_name: attribute.checkpoint_key
            for node in graph.nodes for attribute in node.attributes}


def warm_start(settings: str | WarmStartSettings, variables: Mapping[str, tf.Variable],
               trainable: set[str]) -> int:
    """Applies legacy warm-start semantics; returns how many variables were initialised.

    A regex `vars_to_warm_start` selects among the trainable variables (legacy default
    '.*'); a list of names/regexes selects among all global variables; None selects only
    the variables `var_name_to_vocab_info` names (among the trainable ones). Those are
    remapped to the new vocabulary (`vocab_remap`); a `var_name_to_vocab_info` or
    `var_name_to_prev_var_name` entry naming no selected variable raises, as legacy did.
    """
    if isinstance(settings, str):
        settings = WarmStartSettings(settings)
    selector = settings.vars_to_warm_start
    vocab_infos = settings.var_name_to_vocab_info
    if selector is None and not vocab_infos:
        return 0
    path = _checkpoint_file(settings.ckpt_to_initialize_from)
    logging.legacy_info("Warm-starting from: %s", settings.ckpt_to_initialize_from)
    reader = tf.train.load_checkpoint(path)
    shapes = reader.get_variable_to_shape_map()
    keys = object_checkpoint_keys(reader)
    if selector is None or isinstance(selector, str):
        logging.legacy_info("Warm-starting variables only in TRAINABLE_VARIABLES.")
        candidates = [n for n in variables
                      if n in trainable and (selector is None or re.match(selector, n))]
    else:
        candidates = [n for n in variables
                      if any(re.match(pattern, n) for pattern in selector)]
    count = 0
    for name in candidates:
        source = settings.var_name_to_prev_var_name.get(name, name)
        if name in vocab_infos:
            variables[name].assign(vocab_remap.remapped_value(
                path, source, variables[name].shape, vocab_infos[name], name))
            count += 1
            continue
        if not selector:  # None: only the variables with a vocabulary.
            continue
        source = keys.get(source, source)  # An object-based checkpoint's key for it.
        if source not in shapes:
            logging.warning("Warm start: %s not found in %s; left as initialised.", source, path)
            continue
        variables[name].assign(reader.get_tensor(source))
        count += 1
    logging.legacy_info("Warm-started %d variables.", count)
    logging.debug("Warm-started %d variables from %s.", count, path)
    _check_all_used(settings, candidates)
    return count


def _check_all_used(settings: WarmStartSettings, candidates: list[str]) -> None:
    """Legacy's check that every per-variable setting named a warm-started variable."""
    for field, entries in (("var_name_to_prev_var_name", settings.var_name_to_prev_var_name),
                           ("var_name_to_vocab_info", settings.var_name_to_vocab_info)):
        unused = set(entries) - set(candidates)
        if unused:
            raise ValueError(
                f"You provided the following variables in {field} that were not used: "
                f"{unused}.  Perhaps you misspelled them?  Here is the list of viable "
                f"variable names: {candidates}")
