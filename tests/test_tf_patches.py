"""Every TF/tf_keras patch is in `_tf_patches.PATCHES`, still fits TF, and is undone exactly.

The target test is the one a TensorFlow upgrade trips: it names the moved or re-signed symbol
and says what to update. The protected-access tests keep private TF reads in the seam modules.
"""

import ast
import contextlib
import dataclasses
import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

import tpu_estimator_compat
from tpu_estimator_compat._tf import patches as _tf_patches
from tpu_estimator_compat._tf import device_iterators
from tpu_estimator_compat.checkpoint import warm_start

# Every patched symbol: name -> the dotted paths it rebinds (for keras_env's
# executing_eagerly_outside_functions: the function whose public API bindings it rebinds).
# Adding, moving or dropping a patch means updating this list on purpose.
PATCHED_SYMBOLS = {
    "cross_shard.compute_gradients":
        ("tensorflow.compat.v1.tpu.CrossShardOptimizer.compute_gradients",),
    "cross_shard.apply_gradients":
        ("tensorflow.compat.v1.tpu.CrossShardOptimizer.apply_gradients",),
    "cross_shard.cross_replica_sum": ("tensorflow.compat.v1.tpu.cross_replica_sum",
                                      "tensorflow.python.tpu.ops.tpu_ops.cross_replica_sum"),
    "cross_shard.raw_cross_replica_sum": ("tensorflow.raw_ops.CrossReplicaSum",
                                          "tensorflow.compat.v1.raw_ops.CrossReplicaSum",
                                          "tensorflow.compat.v2.raw_ops.CrossReplicaSum"),
    "cross_shard.xla_replica_id": ("tensorflow.compiler.tf2xla.python.xla.replica_id",),
    "optimizer_apply.distributed_apply":
        ("tensorflow.compat.v1.train.Optimizer._distributed_apply",),
    "optimizer_apply.inference_apply_gradients":
        ("tensorflow.compat.v1.train.Optimizer.apply_gradients",),
    "optimizer_apply.inference_keras_apply_gradients":
        ("tf_keras.src.optimizers.legacy.optimizer_v2.OptimizerV2.apply_gradients",),
    "optimizer_apply.inference_keras_v2_apply_gradients":
        ("tf_keras.src.optimizers.optimizer.Optimizer.apply_gradients",),
    "optimizer_apply.keras_iterations_retrace":
        ("tf_keras.src.optimizers.legacy.optimizer_v2.OptimizerV2.iterations",),
    "keras_env.executing_eagerly_outside_functions":
        ("tensorflow.python.framework.ops.executing_eagerly_outside_functions",),
    "keras_env.maybe_init_scope": ("tf_keras.src.utils.tf_utils.maybe_init_scope",),
    "keras_env.should_use_v2": ("tf_keras.src.utils.version_utils.should_use_v2",),
    "aliases.estimator": ("tensorflow.compat.v1.estimator",
                          "tensorflow.compat.v1.compat.v1.estimator",
                          "tensorflow.compat.v2.compat.v1.estimator",
                          "tensorflow._api.v2.compat.v1.estimator"),
    "aliases.estimator_v2": ("tensorflow.estimator", "tensorflow.compat.v2.estimator",
                             "tensorflow.compat.v1.compat.v2.estimator",
                             "tensorflow.compat.v2.compat.v2.estimator",
                             "tensorflow._api.v2.compat.v2.estimator"),
    "aliases.contrib": ("tensorflow.compat.v1.contrib", "tensorflow.compat.v1.compat.v1.contrib",
                        "tensorflow.compat.v2.compat.v1.contrib",
                        "tensorflow._api.v2.compat.v1.contrib"),
    "aliases.TPUClusterResolver":
        ("tensorflow.compat.v1.distribute.cluster_resolver.TPUClusterResolver",),
    **{f"aliases.{name}": (f"tensorflow.compat.v1.tpu.experimental.{name}",)
       for name in ("AdagradParameters", "AdamParameters", "FtrlParameters",
                    "StochasticGradientDescentParameters")},
    "tf_slim_support.tensor": ("tensorflow.python.framework.ops.Tensor",),
    "tf_slim_support.indexed_slices": ("tensorflow.python.framework.ops.IndexedSlices",),
    "tf_slim_support.stack": ("tensorflow.python.ops.array_ops.stack",),
    "tf_slim_support.unstack": ("tensorflow.python.ops.array_ops.unstack",),
    "tf_slim_support.assert": ("tensorflow.python.ops.control_flow_ops.Assert",),
    "tf_slim_support.case": ("tensorflow.python.ops.control_flow_ops.case",),
    "tf_slim_support.cond": ("tensorflow.python.ops.control_flow_ops.cond",),
    "tf_slim_support.while_loop": ("tensorflow.python.ops.control_flow_ops.while_loop",),
    "tf_slim_support.variable": ("tensorflow.python.ops.variable_scope.variable",),
    "tf_slim_support.register_tensor_conversion_function": (
        "tensorflow.python.framework.ops.register_tensor_conversion_function",),
    "tf_slim_support.batch_normalization":
        ("tensorflow.python.layers.normalization.normalization",),
    "v1_file_writer.init": ("tensorflow.compat.v1.summary.FileWriter.__init__",),
    "v1_file_writer.add_summary": ("tensorflow.compat.v1.summary.FileWriter.add_summary",),
    "summaries.create_file_writer": ("tensorflow.summary.create_file_writer",
                                     "tensorflow.compat.v2.summary.create_file_writer"),
    "variables.ema_variables_to_restore":
        ("tensorflow.compat.v1.train.ExponentialMovingAverage.variables_to_restore",),
    "variables.replica_root_name_scope":
        ("tensorflow.python.framework.ops.Graph.name_scope",),
    "variables.local_update_in_control_flow":
        ("tensorflow.python.distribute.values._on_write_update_replica",),
    "write_order.assign_variable_op":
        ("tensorflow.python.ops.gen_resource_variable_ops.assign_variable_op",),
    "write_order.assign_add_variable_op":
        ("tensorflow.python.ops.gen_resource_variable_ops.assign_add_variable_op",),
    "write_order.assign_sub_variable_op":
        ("tensorflow.python.ops.gen_resource_variable_ops.assign_sub_variable_op",),
    "tf1_names.variable_op":
        ("tensorflow.python.ops.resource_variable_ops.BaseResourceVariable.op",),
    "tf1_names.distributed_variable_op":
        ("tensorflow.python.distribute.values.DistributedVariable.op",),
    "tf1_names.variable_initializer":
        ("tensorflow.python.ops.resource_variable_ops.BaseResourceVariable.initializer",),
    "tf1_names.scoped_collections": ("tensorflow.Graph.get_collection",),
    "cross_shard.number_of_shards":
        ("tensorflow.python.tpu.tpu_function.TpuContext.number_of_shards",),
    "cross_shard.xla_context":
        ("tensorflow.python.ops.control_flow_util.GetContainingXLAContext",),
    "cross_shard.in_xla_context":
        ("tensorflow.python.ops.control_flow_util.IsInXLAContext",),
    "warm_start.init_from_checkpoint": ("tensorflow.compat.v1.train.init_from_checkpoint",),
    "warm_start.Saver": ("tensorflow.compat.v1.train.Saver",
                         "tensorflow.python.training.saver.Saver"),
    "hooks.global_step_read":
        ("tensorflow.python.training.training_util._get_or_create_global_step_read",),
    "inputs.iterator_get_next":
        ("tensorflow.python.data.ops.iterator_ops.OwnedIterator.get_next",),
    "inputs.initializable_iterator":
        ("tensorflow.python.data.ops.dataset_ops.DatasetV1._make_initializable_iterator",),
    "random_streams.explicit_seeds": ("tensorflow.python.framework.random_seed.get_seed",),
    "random_streams.twin_uniform": ("tensorflow.python.ops.gen_random_ops.random_uniform",),
    "random_streams.twin_normal": ("tensorflow.python.ops.gen_random_ops.random_standard_normal",),
    "random_streams.twin_truncated_normal":
        ("tensorflow.python.ops.gen_random_ops.truncated_normal",),
    "random_streams.twin_uniform_int": ("tensorflow.python.ops.gen_random_ops.random_uniform_int",),
    "hooks.Saver": ("tensorflow.compat.v1.train.Saver",
                    "tensorflow.python.training.saver.Saver"),
    "cluster.local_devices": ("tensorflow.python.distribute.collective_all_reduce_strategy."
                              "CollectiveAllReduceExtended._initialize_local_devices",),
    "inputs.device_pipelines":
        ("tensorflow.python.data.ops.multi_device_iterator_ops._create_device_dataset",),
    "inputs.device_generators":
        ("tensorflow.python.data.ops.multi_device_iterator_ops._PerDeviceGenerator",),
    "global_step_reads.value": ("tensorflow.Variable.value",),
    "global_step_reads.read_value": ("tensorflow.Variable.read_value",),
    "global_step_reads.assign": ("tensorflow.Variable.assign",),
    "global_step_reads.assign_add": ("tensorflow.Variable.assign_add",),
    "global_step_reads.assign_sub": ("tensorflow.Variable.assign_sub",),
    "metric_reads.metric_variable": ("tensorflow.python.ops.metrics_impl.metric_variable",),
    "hub_support.try_get_state_scope": ("tensorflow_hub.module._try_get_state_scope",),
    "hub_support.init_state": ("tensorflow_hub.native_module._ModuleImpl._init_state",),
    "hub_support.create_apply_graph":
        ("tensorflow_hub.native_module._ModuleImpl.create_apply_graph",),
}

if importlib.util.find_spec("tensorflow_hub") is not None:
    # tensorflow_hub imports `tensorflow.compat.v1.estimator` at import time: it loads only
    # with the aliases in place, as it does under the launcher and TPUEstimator.
    tpu_estimator_compat.install_aliases()
    import tensorflow_hub  # noqa: F401

_PROCESS = [p for p in _tf_patches.PATCHES if p.kind == _tf_patches.PROCESS]
_SCOPED = [p for p in _tf_patches.PATCHES if p.kind == _tf_patches.SCOPED]

# What each scoped patch's builder takes (see the owning module's builder).
_SCOPED_ARGS = {
    "random_streams.explicit_seeds": lambda: (),
    "random_streams.twin_uniform": lambda: (),
    "random_streams.twin_normal": lambda: (),
    "random_streams.twin_truncated_normal": lambda: (),
    "random_streams.twin_uniform_int": lambda: (),
    "hub_support.try_get_state_scope": lambda: (),
    "hub_support.init_state": lambda: (),
    "hub_support.create_apply_graph": lambda: (),
    "summaries.create_file_writer": lambda: (lambda logdir, **kwargs: None,),
    "variables.ema_variables_to_restore": lambda: (),
    "variables.replica_root_name_scope": lambda: (),
    "metric_reads.metric_variable": lambda: (),
    "variables.local_update_in_control_flow": lambda: (),
    "write_order.assign_variable_op": lambda: (),
    "write_order.assign_add_variable_op": lambda: (),
    "write_order.assign_sub_variable_op": lambda: (),
    "tf1_names.scoped_collections": lambda: (),
    "cross_shard.number_of_shards": lambda: (),
    "cross_shard.xla_context": lambda: (),
    "cross_shard.in_xla_context": lambda: (),
    "warm_start.init_from_checkpoint": lambda: (warm_start.InitPlan(),),
    "warm_start.Saver": lambda: (),
    "optimizer_apply.inference_apply_gradients": lambda: (),
    "optimizer_apply.inference_keras_apply_gradients": lambda: (),
    "optimizer_apply.inference_keras_v2_apply_gradients": lambda: (),
    "hooks.Saver": lambda: (),
    "hooks.global_step_read": lambda: (),
    "inputs.iterator_get_next": lambda: ([],),
    "inputs.initializable_iterator": lambda: (),
    "cluster.local_devices": lambda: (2,),
    "inputs.device_pipelines": lambda: (),
    "inputs.device_generators": lambda: (device_iterators.DeviceGeneratorCache(),),
}

_SEAM_MODULES = ("_tf/private.py", "_tf/patches.py", "_tf/patch_table.py",
                 "_tf/device_iterators.py", "_tf/estimator_seam.py", "_tf/random_streams.py",
                 "_tf/object_graph.py", "_tf/strategies.py", "_tf/host_iterators.py",
                 "_tf/dataset_maps.py")

# Private names outside the seam whose access is not TensorFlow's, and why.
_NOT_TENSORFLOW = {
    "_live_evaluation": "the library's Estimator method InMemoryEvaluatorHook runs (legacy's "
                        "hook called the Estimator's private graph builders the same way)",
    **{name: "this library's RunConfig field under legacy's name, which legacy's "
             "estimator_training.init_run_config set (legacy/estimator_training.py)"
       for name in ("_train_distribute", "_eval_distribute", "_experimental_distribute",
                    "_init_distribute_coordinator", "_cluster")},
    "_distribute_coordinator_mode": "this library's RunConfig attribute (legacy's name), set by "
                                    "cluster/coordinator.py and read by estimator_training",
    "_getframe": "CPython's documented sys._getframe (keras_env reads its caller's module)",
    "_fields": "collections.namedtuple's documented field names (loop/inference_loop.py)",
    "_alias_hint": "aliases.AliasNamespace's own hint, read by legacy_imports",
    "_alias_lazy": "namespaces.AliasNamespace's own lazy members, listed by public_names",
    "_contrib_tree": "contrib_namespace's own root module state, read by its module_at",
    "_contrib_path": "contrib_namespace.ContribModule's own path, read by its tree",
    "_alias_sources": "aliases.AliasNamespace's own member sources, read by contrib_namespace",
    "_meta_graph": "tensorflow_hub's _ModuleImpl state, which hub_support's patches replace",
    "_state_map": "tensorflow_hub's _ModuleImpl state, which hub_support's patches replace",
    "_variable_map": "tensorflow_hub's _ModuleImpl state, which hub_support's patches replace",
    "_saver": "tensorflow_hub's _ModuleImpl state, which hub_support's patches replace",
    "_trainable": "tensorflow_hub's _ModuleImpl state, which hub_support's patches replace",
    "_checkpoint_path": "tensorflow_hub's _ModuleImpl state, which hub_support's patches "
                        "replace",
}


def _missing(package):
    return package is not None and importlib.util.find_spec(package) is None


def _snapshot(patches):
    """{(patch name, id(owner), attribute): (owner, raw binding)} for every binding."""
    shot = {}
    for p in patches:
        if _missing(p.package):
            continue
        for owner, attribute in _tf_patches.bindings(p):
            shot[(p.name, id(owner), attribute)] = (owner, vars(owner).get(attribute, _ABSENT))
    return shot


_ABSENT = object()


def _now(owner, attribute):
    return vars(owner).get(attribute, _ABSENT)


@contextlib.contextmanager
def _none_installed():
    """Inside: no process-wide patch is in place; after: those in place before are again."""
    before = _tf_patches.installed()
    if before:
        _tf_patches.uninstall(*before)
    try:
        yield
    finally:
        names = [p.name for p in _PROCESS]
        _tf_patches.uninstall(*names)
        if before:
            _tf_patches.install(*before)


# ---------------------------------------------------------------------------------------------
# The table against the installed TensorFlow.
# ---------------------------------------------------------------------------------------------


def test_the_table_lists_exactly_the_known_patched_symbols():
    table = {p.name: p.paths for p in _tf_patches.PATCHES}
    assert table == PATCHED_SYMBOLS, (
        "tpu_estimator_compat/_tf/patch_table.py PATCHES changed: update PATCHED_SYMBOLS in "
        "tests/test_tf_patches.py to list every patched TensorFlow symbol.")


@pytest.mark.parametrize("patch", _tf_patches.PATCHES, ids=lambda p: p.name)
def test_patched_symbol_still_exists_with_the_expected_signature(patch):
    if _missing(patch.package):
        pytest.skip(f"{patch.package} is not installed, so {patch.target} is not patched.")
    try:
        _tf_patches.check(patch)
    except _tf_patches.PatchTargetError as e:
        pytest.fail(f"TensorFlow {tf.__version__}: {e}", pytrace=False)


def test_check_names_a_moved_symbol_and_what_to_update():
    moved = dataclasses.replace(_tf_patches.patch("cross_shard.cross_replica_sum"),
                                target="tensorflow.compat.v1.tpu.cross_replica_sum_moved")
    with pytest.raises(_tf_patches.PatchTargetError,
                       match=r"cross_replica_sum_moved.*_tf/patch_table\.py"):
        _tf_patches.check(moved)
    gone_module = dataclasses.replace(moved, target="tensorflow.python.no_such_module.fn")
    with pytest.raises(_tf_patches.PatchTargetError, match=r"no_such_module"):
        _tf_patches.check(gone_module)


def test_check_names_a_changed_signature():
    resigned = dataclasses.replace(_tf_patches.patch("cross_shard.cross_replica_sum"),
                                   signature="(x)")
    with pytest.raises(_tf_patches.PatchTargetError,
                       match=r"cross_replica_sum.*signature.*\(x\).*update `signature`"):
        _tf_patches.check(resigned)


def test_unknown_patch_names_fail_loudly():
    with pytest.raises(KeyError, match="no_such_patch"):
        _tf_patches.install("no_such_patch")


# ---------------------------------------------------------------------------------------------
# Install / uninstall.
# ---------------------------------------------------------------------------------------------


def test_install_twice_is_a_no_op_and_uninstall_restores_every_original_object():
    with _none_installed():
        originals = _snapshot(_PROCESS)
        assert originals, "no process-wide patch has a binding to check"
        _tf_patches.install()
        patched = {key: _now(owner, key[2]) for key, (owner, _) in originals.items()}
        for key, (owner, raw) in originals.items():
            assert patched[key] is not raw, f"{key[0]} did not replace {owner}.{key[2]}"
        _tf_patches.install()
        for key, (owner, _) in originals.items():
            assert _now(owner, key[2]) is patched[key], f"second install() changed {key[0]}"
        _tf_patches.uninstall(*[p.name for p in _PROCESS])
        for key, (owner, raw) in originals.items():
            assert _now(owner, key[2]) is raw, (
                f"uninstall() left {key[0]}'s {getattr(owner, '__name__', owner)}.{key[2]} "
                "different from the original object")
        assert not _tf_patches.installed()


def test_install_by_owning_module_installs_just_its_patches():
    with _none_installed():
        _tf_patches.install("cross_shard")
        assert set(_tf_patches.installed()) == {
            "cross_shard.compute_gradients", "cross_shard.apply_gradients",
            "cross_shard.cross_replica_sum", "cross_shard.raw_cross_replica_sum",
            "cross_shard.xla_replica_id"}
        assert (_tf_patches.original("cross_shard.cross_replica_sum")
                is not tf.compat.v1.tpu.cross_replica_sum)


def test_added_attributes_are_deleted_again():
    with _none_installed():
        assert not hasattr(tf, "estimator")
        _tf_patches.install("aliases.estimator")
        assert "estimator" not in vars(tf)  # `tf.estimator` is aliases.estimator_v2's.
        _tf_patches.install("aliases.estimator_v2")
        assert tf.estimator is tf.compat.v2.estimator is not tf.compat.v1.estimator
        _tf_patches.uninstall("aliases.estimator")
        _tf_patches.uninstall("aliases.estimator_v2")
        assert "estimator" not in vars(tf)


def test_every_scoped_patch_has_test_arguments():
    assert set(_SCOPED_ARGS) == {p.name for p in _SCOPED}


@pytest.mark.parametrize("patch", _SCOPED, ids=lambda p: p.name)
def test_scoped_patch_is_in_place_only_inside_and_restores_identity(patch):
    originals = _snapshot([patch])
    with _tf_patches.applied(patch.name, *_SCOPED_ARGS[patch.name]()) as replacement:
        for key, (owner, _) in originals.items():
            assert _now(owner, key[2]) is replacement
    for key, (owner, raw) in originals.items():
        assert _now(owner, key[2]) is raw


def test_overlapping_scopes_exiting_out_of_order_restore_the_original():
    """Replica threads open and close their blocks in any order (variables.replica_scope)."""
    name = "variables.ema_variables_to_restore"
    cls = tf.compat.v1.train.ExponentialMovingAverage
    raw = vars(cls)["variables_to_restore"]
    first, second = _tf_patches.applied(name), _tf_patches.applied(name)
    one = first.__enter__()
    two = second.__enter__()
    assert vars(cls)["variables_to_restore"] is two
    first.__exit__(None, None, None)
    assert vars(cls)["variables_to_restore"] is two  # Still inside the second block.
    assert one is not two
    second.__exit__(None, None, None)
    assert vars(cls)["variables_to_restore"] is raw


def test_per_object_patch_is_idempotent_and_uninstalls_exactly():
    variable = tf.Variable(3, dtype=tf.int64)
    name = "global_step_reads.value"
    assert _tf_patches.install_on(name, variable, id(variable))
    replacement = vars(variable)["value"]
    assert not _tf_patches.install_on(name, variable, id(variable))
    assert vars(variable)["value"] is replacement
    assert int(variable.value()) == 3  # No active step: the real read.
    _tf_patches.uninstall("global_step_reads")
    assert "value" not in vars(variable)
    assert variable.value.__func__ is type(variable).value


def test_kinds_are_not_mixed_up():
    with pytest.raises(ValueError, match="not scoped"):
        with _tf_patches.applied("cross_shard.cross_replica_sum"):
            pass
    with pytest.raises(ValueError, match="not per-object"):
        _tf_patches.install_on("warm_start.Saver", object())


# ---------------------------------------------------------------------------------------------
# Private TensorFlow access only in the seam modules.
# ---------------------------------------------------------------------------------------------

_PACKAGE = pathlib.Path(tpu_estimator_compat.__file__).parent


def _in_seam(path):
    return pathlib.Path(path).resolve().relative_to(_PACKAGE.resolve()).as_posix() in _SEAM_MODULES


def _private_names(line):
    return [n for n in re.findall(r"\._([A-Za-z]\w*)", line) if not n.endswith("__")]


@pytest.mark.slow
def test_pylint_finds_protected_access_only_in_the_seam_modules():
    if importlib.util.find_spec("pylint") is None:
        pytest.skip("pylint is not installed (requirements-dev.txt lists it); the "
                    "protected-access check needs it.")
    result = subprocess.run(
        [sys.executable, "-m", "pylint", "--disable=all",
         "--enable=protected-access,suppressed-message", "--score=n", "--persistent=n",
         "--msg-template={path}:{line}:{symbol}:{msg}", str(_PACKAGE)],
        capture_output=True, text=True, check=False, timeout=600)
    if result.returncode & 1 or result.returncode & 32:  # Fatal error / usage error.
        pytest.fail(f"pylint did not run:\n{result.stdout}\n{result.stderr}")
    problems = []
    for row in result.stdout.splitlines():
        parts = row.split(":", 3)
        if len(parts) != 4 or _in_seam(parts[0]):
            continue
        path, line, symbol, message = parts
        if symbol == "protected-access":
            problems.append(f"{path}:{line}: {message}")
        elif symbol == "suppressed-message" and "'protected-access'" in message:
            source = pathlib.Path(path).read_text().splitlines()[int(line) - 1]
            unknown = [n for n in _private_names(source) if f"_{n}" not in _NOT_TENSORFLOW]
            if unknown:
                problems.append(f"{path}:{line}: pylint-disabled access to {unknown}")
    assert not problems, (
        "Private attribute access outside _tf/private.py and _tf/patches.py:\n  "
        + "\n  ".join(problems)
        + "\nMove TensorFlow private reads into _tf/private.py (with a note saying why no "
          "public API serves) and patches into _tf_patches.PATCHES; for a name that is not "
          "TensorFlow's, add it to _NOT_TENSORFLOW in tests/test_tf_patches.py with the reason.")


def _string_private_accesses(tree):
    """getattr/setattr/hasattr/delattr(x, "_name") and vars(x).get("_name"), x not self/cls."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (isinstance(func, ast.Name) and func.id in ("getattr", "setattr", "hasattr", "delattr")
                and len(node.args) >= 2):
            receiver, name = node.args[0], node.args[1]
        elif (isinstance(func, ast.Attribute) and func.attr == "get" and node.args
              and isinstance(func.value, ast.Call) and isinstance(func.value.func, ast.Name)
              and func.value.func.id == "vars" and func.value.args):
            receiver, name = func.value.args[0], node.args[0]
        else:
            continue
        if (isinstance(name, ast.Constant) and isinstance(name.value, str)
                and re.fullmatch(r"_[A-Za-z]\w*", name.value)
                and not name.value.endswith("__")
                and not (isinstance(receiver, ast.Name) and receiver.id in ("self", "cls"))):
            yield node.lineno, name.value


def test_no_private_attribute_is_reached_by_name_outside_the_seam_modules():
    """What pylint cannot see: private names passed as strings."""
    problems = []
    for path in sorted(_PACKAGE.rglob("*.py")):
        if _in_seam(path):
            continue
        tree = ast.parse(path.read_text(), str(path))
        problems += [f"{path.relative_to(_PACKAGE)}:{line}: {name!r}"
                     for line, name in _string_private_accesses(tree)
                     if name not in _NOT_TENSORFLOW]
    assert not problems, (
        "Private attributes reached by name outside _tf/private.py and _tf/patches.py:\n  "
        + "\n  ".join(problems)
        + "\nMove TensorFlow's into _tf/private.py; list other owners' in _NOT_TENSORFLOW.")


@pytest.mark.slow
def test_patches_survive_a_later_import_of_their_package_in_a_fresh_process():
    """A script's `from tensorflow.compat.v1.distribute.cluster_resolver import
    TPUClusterResolver` after install_aliases(): the import system makes a new module object
    for the package (and rebinds `tf.compat.v1.distribute.cluster_resolver` to it), which must
    hold the patched names too, or the script gets TF's resolver that raises without a TPU."""
    code = textwrap.dedent("""
        import tpu_estimator_compat
        from tpu_estimator_compat.cluster import tpu_resolver
        from tpu_estimator_compat.legacy import aliases
        tpu_estimator_compat.install_aliases()
        import tensorflow as tf
        from tensorflow.compat.v1.distribute.cluster_resolver import TPUClusterResolver
        import tensorflow.compat.v1.tpu.experimental
        assert TPUClusterResolver.__module__ == tpu_resolver.__name__, TPUClusterResolver
        assert tf.compat.v1.distribute.cluster_resolver.TPUClusterResolver is TPUClusterResolver
        print("OK")
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=240, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("OK")
