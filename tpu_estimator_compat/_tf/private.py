"""The only module that imports private `tensorflow.python` symbols or reads private fields.

Each import and accessor below says why no public API serves. A TensorFlow upgrade that moves
one of them should need edits here and nowhere else. What this library *replaces* in
TensorFlow (monkey-patches) is declared and installed by `patches.py`, the other half of
the seam; this module only reads, calls and constructs, and must not rebind anything of
TensorFlow's beyond the private state a helper below sets and restores itself. It must not
know estimators, loops or model_fns.
"""

# v1 `variable_scope` keeps its variable store and its scope-name counters in these two graph
# collections. TF1 got a fresh pair per graph build; MirroredStrategy traces every replica into
# one graph, so `variables.replica_scope` gives each replica thread a pair of its own there
# (see `new_variable_store` below). No public API exposes the keys
# (tensorflow/python/ops/variable_scope.py: _VARSTORE_KEY, _VARSCOPESTORE_KEY).
VARIABLE_STORE_COLLECTIONS = (("__variable_store",), ("__varscope",))

# `tf.compat.v1.summary.all_v2_summary_ops()` (SimCLR makes train_op depend on it) reads this
# collection; each replica must see its own summary writes in it, as each TPU core's graph
# held its own. The key is private (tensorflow/python/framework/ops.py: GraphKeys).
from tensorflow.python.framework import ops as _ops  # noqa: E402

SUMMARY_V2_COLLECTION = _ops.GraphKeys._SUMMARY_COLLECTION  # pylint: disable=protected-access

# `CrossShardOptimizer` and `cross_replica_sum` must behave as on TPU when they really run
# inside a TPU computation (tpu.rewrite / tpu.shard / TPUStrategy's tpu.replicate set
# number_of_shards and enter a TPUReplicateContext), and be mapped onto the strategy
# otherwise. Both markers are only visible through these private modules. TPUStrategy's own
# all-reduce calls `tpu_ops.cross_replica_sum`, which is patched: without this test the
# replacement would call the strategy's all-reduce, which calls it again.
import contextlib as _contextlib  # noqa: E402

from tensorflow.python.distribute import tpu_util as _tpu_util  # noqa: E402
from tensorflow.python.tpu import tpu_function as _tpu_function  # noqa: E402


def in_legacy_tpu_shard_context() -> bool:
    """True inside a TPU computation being built, where CrossReplicaSum has a kernel.

    False inside `tpu_columns_read_activations` (the shim's own marker, below).
    """
    shards = _tpu_function.get_tpu_context().number_of_shards
    return ((shards is not None and not isinstance(shards, _ActivationShards))
            or _tpu_util.enclosing_tpu_context() is not None)


# TPU embedding columns (`tf.compat.v1.tpu.experimental.embedding_column` and friends) decide
# between an ordinary CPU lookup and reading the TPU embedding engine's activations from
# `features[feature_key]` by asking whether a TPU shard context is active
# (`tensorflow/python/tpu/feature_column.py: _is_running_on_cpu`). With `use_tpu=True` the
# shim computes those activations itself (`embedding/engine.py`) and needs the columns to read them:
# it sets the shard count, thread-locally, to a marker that `in_legacy_tpu_shard_context`
# does not count as a real shard (so CrossShardOptimizer stays mapped onto the strategy).
# The columns record each table's variable scope in a private graph collection, which gives
# the tables legacy's checkpoint names; the column classes themselves are private too.
class _ActivationShards(int):
    """A shard count that means "TPU embedding columns read activations", nothing else."""


@_contextlib.contextmanager
def tpu_columns_read_activations(num_replicas: int):
    """Inside (this thread): TPU embedding columns take their activations from features."""
    context = _tpu_function.get_tpu_context()
    previous = context.number_of_shards
    context.set_number_of_shards(_ActivationShards(num_replicas))
    try:
        yield
    finally:
        context.set_number_of_shards(previous)


from tensorflow.python.feature_column import feature_column as _fc_v1  # noqa: E402
from tensorflow.python.feature_column import feature_column_lib as _fc_lib  # noqa: E402
from tensorflow.python.tpu import feature_column as _tpu_fc  # noqa: E402
from tensorflow.python.tpu import feature_column_v2 as _tpu_fc_v2  # noqa: E402

TPU_COLUMN_SCOPE_COLLECTION = _tpu_fc._TPU_FC_TO_SCOPE  # pylint: disable=protected-access
SEQUENCE_LENGTH_SUFFIX = _tpu_fc._SEQUENCE_FEATURE_LENGTH_POSTFIX  # pylint: disable=protected-access


def tpu_embedding_column_classes() -> tuple:
    """The TPU embedding column classes legacy's EmbeddingConfig accepted (v2 and v1)."""
    # pylint: disable=protected-access
    return (_tpu_fc_v2._TPUEmbeddingColumnV2, _tpu_fc_v2._TPUSharedEmbeddingColumnV2,
            _tpu_fc._TPUEmbeddingColumn, _tpu_fc._TPUSharedEmbeddingColumn)


def embedding_spec_column_classes() -> tuple:
    """What legacy `EmbeddingConfigSpec(feature_columns=...)` accepted (CPU or TPU unknown)."""
    # pylint: disable=protected-access
    return tpu_embedding_column_classes() + (
        _fc_v1._NumericColumn, _fc_lib.NumericColumn, _fc_v1._EmbeddingColumn,
        _fc_lib.EmbeddingColumn, _fc_v1._SharedEmbeddingColumn)


def is_tensor_core_embedding_column(column) -> bool:
    """A device-specific TPU column that looks up on the TensorCore (legacy's own list)."""
    # pylint: disable=protected-access
    classes = (_tpu_fc_v2._TPUDeviceSpecificEmbeddingColumnV2,
               _tpu_fc_v2._TPUSharedDeviceSpecificEmbeddingColumnV2)
    return (isinstance(column, classes) and
            column._embedding_lookup_device == _tpu_fc_v2.EmbeddingDevice.TPU_TENSOR_CORE)


# A MirroredStrategy mirrors every variable created in its scope onto each replica's device.
# TPU embedding tables lived once, in the embedding engine, not once per core: on CPU replicas
# a mirrored table would be N copies of the same rows in one host's memory. The strategy's
# variable creator places a variable on one device when its `colocate_with` is a
# `numpy_dataset.SingleDevice` (what `experimental_make_numpy_dataset` uses); the class is
# private, and `colocate_vars_with` refuses it, so a creator passes it the way
# `colocate_vars_with` passes a variable.
from tensorflow.python.distribute import numpy_dataset as _numpy_dataset  # noqa: E402


def on_one_device(device: str):
    """Inside a strategy's scope: variables created are plain variables on `device`."""
    import tensorflow as tf  # Local: keep this module's import light.

    def creator(next_creator, **kwargs):
        kwargs["use_resource"] = True
        kwargs["colocate_with"] = _numpy_dataset.SingleDevice(device)
        return next_creator(**kwargs)

    return tf.variable_creator_scope(creator)

# `tf.Variable(tf.truncated_normal(...))` inside model_fn (the TF1 tutorial idiom) hands the
# variable creator a tensor of the traced step graph. The variable must be created eagerly,
# outside every trace, so that tensor's producing ops are copied into a scratch graph and run
# once. `lift_to_graph` is the copier tf.function itself uses for this; it is not public.
from tensorflow.python.eager import lift_to_graph as _lift_to_graph  # noqa: E402
from tensorflow.python.ops import op_selector as _op_selector  # noqa: E402

UnliftableError = _op_selector.UnliftableError


def evaluate_input_free_tensor(tensor):
    """Runs the ops producing a graph tensor in a scratch graph; returns a numpy value.

    Raises:
      UnliftableError: the tensor depends on a placeholder (a function input, e.g. features).
    """
    import tensorflow as tf  # Local: keep this module's import light.

    scratch = tf.Graph()
    with scratch.as_default():
        op_map = _lift_to_graph.lift_to_graph([tensor], scratch)
        with tf.compat.v1.Session(graph=scratch) as session:
            return session.run(op_map[tensor])

# TF1 graph code hashes variables and compares tensors by identity (`set(global_variables())`
# in ExponentialMovingAverage.variables_to_restore, dict keys of variables). Legacy Estimator
# built model_fn in graph mode, where that works; inside tf.function TF2's tensor equality
# forbids it. The switch is public (`tf.compat.v1.disable_tensor_equality`), its current state
# is not. It is process-wide, while the scopes that need it overlap across threads:
# MirroredStrategy traces each replica's model_fn in a thread of its own and switches threads
# at every all-reduce, so the first replica to leave must not switch equality back on under
# the others (google/compare_gan hashes variables after its optimizers' all-reduce). The
# outermost entry of any thread switches it off and the last exit restores it.
import contextlib as _contextlib  # noqa: E402
import threading as _threading  # noqa: E402

_tensor_equality_lock = _threading.Lock()
_tensor_equality_users = 0
_tensor_equality_was_enabled = False


@_contextlib.contextmanager
def tf1_tensor_equality():
    """Inside: tensors compare by identity and variables hash, as in a TF1 graph.

    Safe to overlap across threads: equality comes back when the last scope is left.
    """
    import tensorflow as tf  # Local: keep this module's import light.

    global _tensor_equality_users, _tensor_equality_was_enabled
    with _tensor_equality_lock:
        if _tensor_equality_users == 0:
            _tensor_equality_was_enabled = tf.Tensor._USE_EQUALITY  # pylint: disable=protected-access
            tf.compat.v1.disable_tensor_equality()
        _tensor_equality_users += 1
    try:
        yield
    finally:
        with _tensor_equality_lock:
            _tensor_equality_users -= 1
            if _tensor_equality_users == 0 and _tensor_equality_was_enabled:
                tf.compat.v1.enable_tensor_equality()

# TF1's `init_from_checkpoint` resolved a scope map against the variables in the graph's v1
# variable store at the moment of the call; `warm_start` records that moment's names. The store
# (`variable_scope._get_default_variable_store()`) and its `_vars` dict are private.
from tensorflow.python.ops import variable_scope as _variable_scope  # noqa: E402


def v1_store_variable_names():
    """Names of the variables `tf.compat.v1.get_variable` has created in the current store."""
    return list(_variable_scope._get_default_variable_store()._vars)  # pylint: disable=protected-access


# A graph's v1 collections are lists in its private `_collections` dict, which the branch and
# loop graphs of `tf.cond`/`tf.while_loop` share with the graph they are built in, and which
# `tf.Graph` itself writes to create a key (`add_to_collection`, `get_collection_ref`).
# `replica_state.own_collections` gives each MirroredStrategy replica thread its own lists in
# the one graph they all trace into, whatever the key, which needs that dict replaced for the
# step (and every key created meanwhile seen). No public API replaces or observes it.
def graph_collections(graph):
    """The dict `graph` keeps its collections in: {key: list}."""
    return graph._collections  # pylint: disable=protected-access


def set_graph_collections(graph, collections):
    """Makes `collections` the dict `graph` keeps its collections in."""
    with graph._lock:  # pylint: disable=protected-access
        graph._collections = collections  # pylint: disable=protected-access


# A TF1 graph names ops and name scopes (and so v1 and `tf.contrib.summary` tags) through one
# uniquifier: `Graph.unique_name` counts every name taken in the graph's private
# `_names_in_use` ({lowercased name: count}). Legacy built model_fn, metric_fn and host_call
# into one graph; the shim traces them into separate ones and carries the counts across
# (`graph_names`). Public `unique_name` only tests or takes one name at a time: no public API
# lists a graph's taken names or marks a name taken without creating an op.
def graph_names_in_use(graph) -> dict:
    """A copy of the names `graph` has taken: {lowercased name: times taken}."""
    with graph._lock:  # pylint: disable=protected-access
        return dict(graph._names_in_use)  # pylint: disable=protected-access


def mark_graph_names_in_use(graph, counts) -> None:
    """Marks each name of `counts` taken in `graph` at least that many times."""
    with graph._lock:  # pylint: disable=protected-access
        names = graph._names_in_use  # pylint: disable=protected-access
        for name, count in counts.items():
            if names.get(name, 0) < count:
                names[name] = count


# `tf.compat.v1.get_variable` and `variable_scope` find their variable store and scope store
# as the single element of the graph collections in VARIABLE_STORE_COLLECTIONS, and create
# them lazily when the collection is empty. `variables.replica_scope` gives every replica
# thread a fresh pair of its own (MirroredStrategy threads interleave at each merge_call, so
# one pair in the collection would be shared by all replicas). No public API constructs one.
from tensorflow.python.ops import variable_scope as _variable_scope  # noqa: E402


def new_variable_store():
    """A fresh, empty v1 variable store (what a new TF1 graph's `get_variable` starts with)."""
    return _variable_scope._VariableStore()  # pylint: disable=protected-access


def new_variable_scope_store():
    """A fresh v1 variable-scope store: root scope, no scope-name counts (thread-local)."""
    return _variable_scope._VariableScopeStore()  # pylint: disable=protected-access

# Inside a train step, reads of the global step return the step's starting value
# (`global_step_reads`), except reads model_fn explicitly orders after other ops with
# `tf.control_dependencies`: a TF1 graph ran those after their dependencies (an EMA with
# `num_updates=global_step` applied after train_op saw the incremented step). Whether a
# control_dependencies block is active is only known to the graph's private stack.
def active_control_inputs(graph) -> frozenset:
    """The ops the active `tf.control_dependencies` blocks of `graph` add to new ops."""
    return frozenset(graph._current_control_dependencies())  # pylint: disable=protected-access

# `HostMetrics` feeds numpy batches to a v1 `Session` once per eval step. The public
# `Session.make_callable(fetches, feed_list=...)` silently falls back to a full
# `Session.run(fetches, feed_dict)` whenever `feed_list` is given (a TODO in session.py), with
# ~1 ms of Python per call; the C++ `Session::MakeCallable` behind the private
# `_make_callable_from_options` takes the feeds positionally with no per-call Python. The
# `CallableOptions` proto is not exported in the public `tf` namespace either.
from tensorflow.core.protobuf import config_pb2 as _config_pb2  # noqa: E402


def make_fed_callable(session, feeds, targets):
    """`fn(*arrays)` running `targets` (ops) with `arrays` fed to the `feeds` placeholders.

    Arrays must already have each placeholder's dtype and a compatible shape (no checks).
    """
    options = _config_pb2.CallableOptions(feed=[t.name for t in feeds],
                                          target=[op.name for op in targets])
    return session._make_callable_from_options(options)  # pylint: disable=protected-access

# `loop` calls its compiled multi-step function once per loop with the same iterator. A
# `ConcreteFunction.__call__` re-binds and re-flattens its structured arguments on every call
# (for a distributed iterator: its whole type spec, ~0.2 ms of Python per call, as much as an
# MLP step). The flat tensors of one iterator never change, so the loop flattens them once
# and calls the flat signature, which only the private `_call_flat` exposes.
from tensorflow.python.eager.polymorphic_function import (  # noqa: E402
    function_type_utils as _function_type_utils)


def flat_inputs(concrete_fn, args):
    """The flat tensor inputs `concrete_fn(*args)` would pass to its graph, computed once."""
    bound = _function_type_utils.canonicalize_function_inputs(args, {},
                                                              concrete_fn.function_type)
    return concrete_fn.function_type.unpack_inputs(bound)


def call_flat(concrete_fn, inputs):
    """`concrete_fn(*args)` with `inputs = flat_inputs(concrete_fn, args)`: same outputs."""
    return concrete_fn._call_flat(inputs, concrete_fn.captured_inputs)  # pylint: disable=protected-access

# `optimizer_apply` re-runs a v1 optimizer's per-variable update on each device. Which apply
# method a variable needs (dense, sparse, resource, or a custom processor) is decided by the
# optimizer module's private `_get_processor`; no public API exposes that choice.
from tensorflow.python.training import optimizer as _v1_optimizer  # noqa: E402


def optimizer_processor(variable):
    """The v1 optimizer's update processor for `variable` (`.update_op(optimizer, grad)`)."""
    return _v1_optimizer._get_processor(variable)  # pylint: disable=protected-access

# Scripts that call `tf.compat.v1.disable_eager_execution()` / `disable_v2_behavior()` still
# get an estimator whose loops run eagerly: `eager_scope` switches eager mode on around each
# public entry point. The switch itself is only exported for Keras
# (`tf.__internal__.eager_context.eager_mode`), and whether eager execution was turned off
# process-wide, rather than a `with tf.Graph().as_default():` block being active, is only the
# module attribute `context.default_execution_mode`.
from tensorflow.python.eager import context as _context  # noqa: E402


def eager_mode():
    """A context manager: inside, this thread executes eagerly (a context switch TF records,
    so `tf.init_scope` inside a traced function lifts to it)."""
    return _context.eager_mode()


def eager_disabled_process_wide() -> bool:
    """True after `disable_eager_execution()` (new threads start in graph mode)."""
    return _context.default_execution_mode == _context.GRAPH_MODE


# TF1 graphs gave every random op its own generator: two initializers with the same explicit
# seed (one seeded initializer object used for two variables) drew the same values. Eager
# execution caches one kernel per op and attributes, so the second call continues the
# first's stream. No public API resets that cache (`Context.clear_kernel_cache`).
def fresh_random_kernels() -> None:
    """Makes the next eager random op with an explicit seed start its stream afresh."""
    _context.context().clear_kernel_cache()


# Grappler runs TensorFlow's MLIR pass pipeline ("tfg_optimizer": attribute consolidation,
# functional <-> region control flow, control-flow sinking, dead-function elimination) over
# every function it optimises, converting each graph to MLIR and back. TensorFlow's own
# meta_optimizer.cc says it "won't run any optimizations right now"; on BERT-base's train
# step over 8 replicas it changed no node of any graph and took 13.8 of Grappler's 47.6 s
# (Grappler's own log at 046ec71, bench/results/HISTORY.md).
# `RewriterConfig.disable_tfg_optimizer` turns it off, but
# `tf.config.optimizer.set_experimental_options` has no key for it: the eager context's base
# ConfigProto, from which every thread builds the options its function calls carry, is the
# one place to set it.
def disable_tfg_optimizer() -> bool:
    """Turns Grappler's TFG pipeline off for functions first called from now on.

    Every thread that has not called a function yet, and the calling thread, pick it up;
    another thread that already called one keeps its options. Returns False if it was off.
    """
    ctx = _context.context()
    config = _config_pb2.ConfigProto()
    if ctx._config is not None:  # pylint: disable=protected-access
        config.CopyFrom(ctx._config)  # pylint: disable=protected-access
    rewrite = config.graph_options.rewrite_options
    if rewrite.disable_tfg_optimizer:
        return False
    rewrite.disable_tfg_optimizer = True
    ctx._config = config  # pylint: disable=protected-access
    ctx.function_call_options = None  # This thread's options are rebuilt from the config.
    return True


def tfg_optimizer_disabled() -> bool:
    """Whether functions this thread calls from now on skip the TFG pipeline."""
    config = _config_pb2.ConfigProto.FromString(
        _context.context().function_call_options.config_proto_serialized)
    return config.graph_options.rewrite_options.disable_tfg_optimizer


# A CheckpointSaverHook among the user's hooks replaces the default saver (legacy). It keeps
# its directory, cadence and listeners in private fields; no public API reads them.
def checkpoint_saver_hook_settings(hook):
    """(checkpoint_dir, save_steps, save_secs, listeners) of a `CheckpointSaverHook`."""
    timer = hook._timer  # pylint: disable=protected-access
    return (hook._checkpoint_dir, timer._every_steps, timer._every_secs,  # pylint: disable=protected-access
            list(hook._listeners))  # pylint: disable=protected-access


# v1 optimizers under a strategy average the loss over replicas, as Estimator did, only
# inside this strategy context manager; it has no public name.
@_contextlib.contextmanager
def estimator_loss_scaling(strategy):
    """Inside: `strategy` scales v1-optimizer losses (its previous setting after).

    What the strategy's `_scale_loss_for_estimator_enabled()` does, except on leaving: TF's
    sets the flag False there, not back to what it was, so a `RuntimeScope` entered inside
    another (train() holds one; each loop call enters its own) left the outer one without
    scaling, and a loop traced in it afterwards on several replicas would have summed the
    replicas' gradients instead of averaging them. The flag is a private field
    (tensorflow/python/distribute/distribute_lib.py, StrategyBase).
    """
    with _loss_scaling_set(strategy, True):
        yield


# Legacy's built-in hooks are re-expressed on the host (loop/hooks.py); their settings and
# LoggingTensorHook's per-run state live in private fields with no public accessors.
def logging_hook_tensors(hook):
    """LoggingTensorHook's `{tag: tensor or name}` as given to its constructor."""
    tensors = hook._tensors  # pylint: disable=protected-access
    return dict(tensors) if isinstance(tensors, dict) else {str(t): t for t in tensors}


def logging_hook_every_steps(hook):
    """LoggingTensorHook's `every_n_iter` (None when it logs by time)."""
    return hook._timer._every_steps  # pylint: disable=protected-access


def begin_logging_hook(hook, tensors):
    """What `LoggingTensorHook.begin` does, with `tensors` as the fetches it will request."""
    hook._timer.reset()  # pylint: disable=protected-access
    hook._iter_count = 0  # pylint: disable=protected-access
    hook._current_tensors = dict(tensors)  # pylint: disable=protected-access


def stop_at_step_last_step(hook, start_step):
    """StopAtStepHook's last step: `last_step`, or `num_steps` past `start_step`."""
    last = hook._last_step  # pylint: disable=protected-access
    return start_step + hook._num_steps if last is None else last  # pylint: disable=protected-access


def nan_hook_fails(hook):
    """NanTensorHook's `fail_on_nan_loss`."""
    return hook._fail_on_nan_loss  # pylint: disable=protected-access


# CrossShardOptimizer (`tpu_optimizer.py`) keeps the optimizer it wraps and its loss
# reduction in private fields and offers no accessors; `cross_shard` reimplements its
# compute/apply off TPU and needs both.
def cross_shard_inner_optimizer(optimizer):
    """The optimizer a `CrossShardOptimizer` wraps."""
    return optimizer._opt  # pylint: disable=protected-access


def cross_shard_reduction(optimizer):
    """A `CrossShardOptimizer`'s loss reduction (`tf.compat.v1.losses.Reduction`)."""
    return optimizer._reduction  # pylint: disable=protected-access


# v1 optimizers under a strategy scale the loss by 1/replicas while the strategy's private
# flag `_scale_loss_for_estimator` is set (`estimator_loss_scaling` above sets it); nothing
# public clears it for one call. CrossShardOptimizer scales itself, so its inner optimizer
# must not scale again.
@_contextlib.contextmanager
def estimator_loss_scaling_off(strategy):
    """Inside: `strategy` does not scale v1-optimizer losses (its previous setting after)."""
    with _loss_scaling_set(strategy, False):
        yield


@_contextlib.contextmanager
def _loss_scaling_set(strategy, on):
    previous = getattr(strategy, "_scale_loss_for_estimator", False)
    strategy._scale_loss_for_estimator = on  # pylint: disable=protected-access
    try:
        yield
    finally:
        strategy._scale_loss_for_estimator = previous  # pylint: disable=protected-access


# `optimizer_apply` re-runs what `Optimizer._distributed_apply` does with per-device ordering.
# Its steps are the v1 Optimizer's private protocol (which subclasses override: Adam's
# `_create_slots`, `_prepare`, `_finish`), and the default name scope is its private `_name`;
# no public API runs them one by one.
def optimizer_create_slots(optimizer, var_list) -> None:
    """`optimizer._create_slots(var_list)`."""
    optimizer._create_slots(var_list)  # pylint: disable=protected-access


def optimizer_name(optimizer) -> str:
    """The name a v1 optimizer was constructed with (its default name scope)."""
    return optimizer._name  # pylint: disable=protected-access


def optimizer_prepare(optimizer) -> None:
    """`optimizer._prepare()`: converts hyperparameters to tensors before the updates."""
    optimizer._prepare()  # pylint: disable=protected-access


def optimizer_finish(optimizer, update_ops, name_scope):
    """`optimizer._finish(update_ops, name_scope)`: the op that ends one apply."""
    return optimizer._finish(update_ops, name_scope)  # pylint: disable=protected-access


# TF 2.16+ resolves `tf.keras` lazily to Keras 2 or 3 and records its choice only in the
# private module attribute `_tfll_keras_version`; no public API says which one was loaded.
def resolved_keras_version():
    """'keras_2', 'keras_3', or None while `tf.keras` has not been resolved yet."""
    import tensorflow as tf  # Local: keep this module's import light.

    return vars(tf.keras).get("_tfll_keras_version")

# MultiWorkerMirroredStrategy configures its coordination service itself (heartbeats that
# abort every collective when a task falls silent) but offers no argument for the timeouts:
# it only fills in the service when none is configured yet. Configuring the same service
# first, with our timeouts, is the one way to choose how long a frozen or vanished peer is
# tolerated. The job list and leader are the ones the strategy would pick itself
# (`multi_worker_util.coordination_leader`; no ps tasks reach MultiWorkerMirroredStrategy).
from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2 as _coordination_pb2  # noqa: E402,E501


def configure_peer_health_checks(cluster_spec, *, heartbeat_timeout_secs,
                                 register_timeout_secs) -> None:
    """Sets the coordination service's heartbeat and join timeouts (None: the defaults)."""
    if not heartbeat_timeout_secs and not register_timeout_secs:
        return
    if _context.context().coordination_service is not None:
        return  # Already configured in this process: TensorFlow keeps the first setting.
    jobs = [job for job in ("chief", "worker") if job in cluster_spec.jobs]
    leader = "/job:chief/replica:0/task:0" if "chief" in jobs else "/job:worker/replica:0/task:0"
    _context.context().configure_coordination_service(
        service_type="standalone", service_leader=leader,
        heartbeat_timeout_in_ms=int(1000 * (heartbeat_timeout_secs or 0)),
        cluster_register_timeout_in_ms=int(1000 * (register_timeout_secs or 0)),
        coordinated_jobs=[_coordination_pb2.CoordinatedJob(
            name=job, num_tasks=cluster_spec.num_tasks(job)) for job in jobs])


# ClusterCoordinator builds a per-worker dataset by tracing ONE dataset function and running
# that graph on every worker, with the same InputContext (pipeline 0 of 1) everywhere, so an
# input_fn cannot learn which worker it feeds (`params['context'].current_host`). Legacy ran
# input_fn in each worker's own process. The coordinator's public API has no per-worker
# variant; its own `create_per_worker_dataset` is a loop over its workers creating one
# iterator resource each (`values.PerWorkerDatasetFromDatasetFunction.__iter__`). This does
# the same loop with one traced function per worker. The resources stay the coordinator's:
# it rebuilds them when a worker restarts, as for its own datasets.
from tensorflow.python.distribute import input_lib as _input_lib  # noqa: E402
from tensorflow.python.distribute.coordinator import values as _coordinator_values  # noqa: E402


def per_worker_iterators(coordinator, dataset_fns):
    """A PerWorkerDistributedIterator: worker i iterates `dataset_fns[i]()` (traced here)."""
    import tensorflow as _tf

    workers = coordinator._cluster.workers  # pylint: disable=protected-access
    if len(workers) != len(dataset_fns):
        raise ValueError(f"{len(dataset_fns)} dataset functions for {len(workers)} workers.")
    values = []
    for worker, dataset_fn in zip(workers, dataset_fns):
        concrete = _tf.function(dataset_fn, autograph=False).get_concrete_function()

        def make_iterator(concrete=concrete):
            return iter(concrete())

        remote = worker.create_resource(make_iterator)
        remote._type_spec = _input_lib.get_iterator_spec_from_dataset(  # pylint: disable=protected-access
            coordinator.strategy, concrete.structured_outputs)
        values.append(remote)
    return _coordinator_values.PerWorkerDistributedIterator(tuple(values))


# `tf.contrib.summary` was TensorFlow's `summary_ops_v2` module (scalar(name, tensor, family,
# step), always_record_summaries, record_summaries_every_n_global_steps, ...). TF 2.21 still
# defines those functions there, but its public `tf.summary` API exposes only the TF2 forms.
def summary_ops_v2_module():
    """TensorFlow's `summary_ops_v2` module, which TF 1.x served as `tf.contrib.summary`."""
    from tensorflow.python.ops import summary_ops_v2  # pylint: disable=import-outside-toplevel

    return summary_ops_v2


# From TF 1.14 on, `tensorflow/contrib/tpu/python/{tpu,ops}/<module>.py` were stubs that
# re-exported the core modules `tensorflow.python.tpu[.ops].<module>` (`tpu_function`,
# `tpu_feed`, `bfloat16`, `tpu_ops`, ...). Scripts import the contrib path and call module
# functions no public API re-exports (`tpu_function.get_tpu_context()`). TensorFlow 2.21 keeps
# many of those core modules, so `legacy/import_hook.py` serves their names under the contrib path.
def core_tpu_module(relative: str):
    """`tensorflow.python.tpu.<relative>` (e.g. `tpu_function`, `ops.tpu_ops`), or None."""
    import importlib  # pylint: disable=import-outside-toplevel

    try:
        return importlib.import_module(f"tensorflow.python.tpu.{relative}")
    except ImportError:
        return None


def own_component(variable):
    """This replica's (or this device's) component of a mirrored variable.

    `variables.local_update_in_control_flow` assigns it inside a replica step's cond branch
    or while body, where the mirrored variable's own replica-context update would merge_call
    (refused there). Distributed values expose the current device's component only privately
    (tensorflow/python/distribute/values.py: DistributedValues._get_on_device_or_primary).
    """
    return variable._get_on_device_or_primary()  # pylint: disable=protected-access


def op_creation_index(op) -> int:
    """The graph's running number of `op`: an op made later in the same graph has a larger one.

    `write_order` orders a replica step's large variable writes and must tell the ops made
    since the previous write from older ones without listing the whole graph at every write.
    Only the private field holds it (tensorflow/python/framework/ops.py: Operation._id).
    """
    return op._id  # pylint: disable=protected-access


def add_control_input(op, source) -> None:
    """Makes the existing `op` run after `source`, as `tf.control_dependencies` would have.

    `write_order` orders ops user code made before the shim knows what they compute (a
    variable's new value, known at its assign). No public API adds a control input to an op
    after it is made (tensorflow/python/framework/ops.py: Operation._add_control_input).
    """
    op._add_control_input(source)  # pylint: disable=protected-access


def keras_metric_updates(metric):
    """The update ops a tf_keras Metric's `update_state` recorded in graph mode, or None.

    Legacy EstimatorSpec refused a Metric whose `updates` was empty ("Please call
    update_state(...)"). tf_keras's public `Metric.updates` re-checks each op against the
    current graph and raises "add_update in a control flow branch" for ops made in a
    while-loop body, which is where every eval step of ours is traced; the ops themselves
    are kept in the private list it reads (tf_keras/src/engine/base_layer_v1.py:
    Layer._updates). None where that is unknown: a v2 layer (tf_keras picks the class by
    the graph mode it was made in) keeps the list but never records into it.
    """
    updates = getattr(metric, "_updates", None)
    v1_layer = any(cls.__module__.endswith(".base_layer_v1") for cls in type(metric).__mro__)
    return list(updates) if v1_layer and updates is not None else None


# `tf.contrib.framework` re-exported TensorFlow's deprecation decorators and name-scope helpers
# (TF 1.15 contrib/framework/__init__.py and its python/framework package). TF 2.21 still
# defines them, with the same signatures, but only in private modules
# (tensorflow/python/util/deprecation.py, tensorflow/python/framework/ops.py); tensor2tensor
# decorates model functions with `contrib.framework().deprecated(...)` at import time.
def contrib_framework_names() -> dict:
    """TF 1.15 `tf.contrib.framework` names TensorFlow keeps only privately."""
    from tensorflow.python.util import deprecation  # pylint: disable=import-outside-toplevel

    return {"deprecated": deprecation.deprecated,
            "deprecated_args": deprecation.deprecated_args,
            "deprecated_arg_values": deprecation.deprecated_arg_values,
            "get_name_scope": _ops.get_name_scope,
            "prepend_name_scope": _ops.prepend_name_scope,
            "strip_name_scope": _ops.strip_name_scope}


# Inside a use_tpu=True model_fn, model code that asks for the graph's XLA control-flow
# context (tensor2tensor's `is_xla_compiled()`) is answered as inside legacy's `tpu.rewrite`
# (`cross_shard.patched_containing_xla_context`). The context class is private
# (tensorflow/python/ops/control_flow_ops.py); code only tests the answer against None.
def xla_control_flow_context():
    """A new, empty `XLAControlFlowContext` (its `IsXLAContext()` is True)."""
    from tensorflow.python.ops import control_flow_ops  # pylint: disable=import-outside-toplevel

    return control_flow_ops.XLAControlFlowContext()


# `tf.contrib.lookup` (contrib/lookup.py) re-exported TensorFlow's v1 lookup-table module:
# `index_table_from_tensor`/`_from_file`, `index_to_string_table_from_*`, the v1 `HashTable`
# (with `init` and `export`), `MutableHashTable`, `IdTableWithHashBuckets`, the initializers
# and hasher specs. TF 2.21 still has every one of them in this module, but its public API
# (`tf.compat.v1.lookup`) exports only `StaticHashTable`, `StaticVocabularyTable` and the
# initializers.
def v1_lookup_ops():
    """TensorFlow's `lookup_ops` module (tensorflow/python/ops/lookup_ops.py)."""
    from tensorflow.python.ops import lookup_ops  # pylint: disable=import-outside-toplevel

    return lookup_ops


# `checkpoint_meta` builds a real v1 Saver for the `.meta` beside each checkpoint, possibly on
# a background thread while a model_fn is traced on another, where the scoped patches
# `warm_start.Saver` / `hooks.Saver` stand in for the public `tf.compat.v1.train.Saver`. The
# class is taken from its private module when this module is first imported, before any
# patch: the public name may be swapped at that moment.
from tensorflow.python.training import saver as _saver_lib  # noqa: E402

_V1_SAVER = _saver_lib.Saver


def v1_saver_class():
    """TensorFlow's own `tf.compat.v1.train.Saver` class, whatever patch is in place."""
    return _V1_SAVER


def default_predict_output(predictions):
    """Legacy EstimatorSpec's default export output: TF's own `PredictOutput(predictions)`, the
    class legacy used (tensorflow/python/saved_model/model_utils/export_output.py); no public
    path serves it since TF 2.16."""
    from tensorflow.python.saved_model.model_utils import export_output  # pylint: disable=g-import-not-at-top

    return export_output.PredictOutput(predictions)
