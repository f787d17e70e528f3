"""The table of every TensorFlow and tf_keras symbol this library patches (see `_tf_patches`).

One `Patch` per replaced symbol: its dotted path, why no public API serves, and the builder
(in the module that needs it) that makes the replacement from the original. A TensorFlow
upgrade that moves, removes or re-signs one of them needs edits here and nowhere else;
tests/test_tf_patches.py checks every entry against the installed TensorFlow. This module is
data: the mechanics of applying and restoring patches are `patches.py`'s. It imports
neither TensorFlow nor the rest of the library.
"""

from __future__ import annotations

import dataclasses

PROCESS = "process"
SCOPED = "scoped"
INSTANCE = "instance"

# A builder that returns the replacement given to `applied(name, replacement)` itself.
GIVEN = "given"


@dataclasses.dataclass(frozen=True)
class Patch:
    """One replaced TensorFlow/tf_keras symbol.

    Attributes:
      name: `<owning module>.<what>`; `install("<owning module>")` selects all of a module's.
      target: Dotted path of the replaced symbol, e.g.
        `tensorflow.compat.v1.train.Optimizer._distributed_apply`. For an INSTANCE patch, the
        class attribute it shadows on chosen objects. With `public_bindings`, the function
        whose public API bindings are replaced (the target binding itself is left alone).
      why: Why the library replaces it and why no public API serves.
      build: `package.module:function`; `function(original, *args)` returns the replacement
        (args: those of `applied`/`install_on`). `GIVEN`: the first arg is the replacement.
      kind: PROCESS, SCOPED or INSTANCE.
      also: Further dotted paths that hold the same symbol and get the same replacement.
      public_bindings: Rebind every loaded public TF/tf_keras API module attribute that holds
        the target function (`tensorflow.python.*` keeps the original).
      may_be_absent: The attribute does not exist in this TensorFlow; the patch adds it and
        `uninstall` deletes it again.
      package: A package that may be missing (tf_keras); without it the patch is a no-op.
      signature: `str(inspect.signature(original))` the replacement was written against.
      (A target on a public API package, `tensorflow.a.b.name`, is bound on every module
      object TensorFlow keeps for that package: see `_tf_patches.settle_api`.)
    """

    name: str
    target: str
    why: str
    build: str
    kind: str = PROCESS
    also: tuple[str, ...] = ()
    public_bindings: bool = False
    may_be_absent: bool = False
    package: str | None = None
    signature: str | None = None

    @property
    def paths(self) -> tuple[str, ...]:
        """Every dotted path this patch rebinds (for `public_bindings`: only the target)."""
        return (self.target, *self.also)


# Shared by the three `write_order.*` patches (one per variable-write op wrapper).
_WRITE_ORDER_WHY = (
    "A custom optimizer written with plain ops (BERT's AdamWeightDecay) makes variable-sized "
    "temporaries that TensorFlow's executor computes for every variable before any write; "
    "ordering each large write after the previous one bounds them. The shim only learns what "
    "a value computes when it is written, and every variable write in a graph reaches this "
    "op wrapper; no public hook sees a write being made.")

# Shared by the four `random_streams.twin_*` patches (one per random op wrapper).
_TWIN_WHY = (
    "Legacy's new graph per call restarted every seeded {op} stream at each call; a "
    "compiled loop's {op} kernel keeps its stream, and only new kernels (the loop "
    "instantiated again, Grappler included) restart it. While a loop is traced, a seeded "
    "{op} is built as its stateful twin drawing the same bits from a generator state in a "
    "variable, which each call sets back (`_tf/random_streams.py`). tf.random and "
    "tf.nn.dropout make the op through this wrapper; no public API builds one there.")

PATCHES: tuple[Patch, ...] = (
    # -- cross_shard: TPU cross-replica primitives on any tf.distribute strategy.
    Patch(
        name="cross_shard.compute_gradients",
        target="tensorflow.compat.v1.tpu.CrossShardOptimizer.compute_gradients",
        why="CrossShardOptimizer's loss scaling must follow the strategy's replica count off "
            "TPU, exactly once (the wrapped optimizer must not scale again). Patched on the "
            "class itself: rebinding the public name would break the class's own super().",
        build="tpu_estimator_compat.step.cross_shard:patched_compute_gradients",
        signature="(self, loss, var_list=None, **kwargs)"),
    Patch(
        name="cross_shard.apply_gradients",
        target="tensorflow.compat.v1.tpu.CrossShardOptimizer.apply_gradients",
        why="Its CrossReplicaSum op has no CPU/GPU kernel; off TPU the gradients are summed "
            "over the strategy's replicas instead, as the TPU did.",
        build="tpu_estimator_compat.step.cross_shard:patched_apply_gradients",
        signature="(self, grads_and_vars, global_step=None, name=None)"),
    Patch(
        name="cross_shard.cross_replica_sum",
        target="tensorflow.compat.v1.tpu.cross_replica_sum",
        also=("tensorflow.python.tpu.ops.tpu_ops.cross_replica_sum",),
        why="Model code calls it directly; its CrossReplicaSum op has no CPU/GPU kernel, so "
            "off TPU it becomes the replica context's SUM all-reduce. Real code reaches it "
            "through the public name and the private module (`from "
            "tensorflow.python.tpu.ops import tpu_ops`: tensorflow/tpu official/detection "
            "nn_ops.py, mlperf SSD, mesh_tensorflow), both bound to one function.",
        build="tpu_estimator_compat.step.cross_shard:patched_cross_replica_sum",
        signature="(x, group_assignment=None, name=None)"),
    Patch(
        name="cross_shard.raw_cross_replica_sum",
        target="tensorflow.raw_ops.CrossReplicaSum",
        also=("tensorflow.compat.v1.raw_ops.CrossReplicaSum",
              "tensorflow.compat.v2.raw_ops.CrossReplicaSum"),
        why="The raw op wrapper emits CrossReplicaSum itself; model code calls it for "
            "grouped sums (`tf.raw_ops.CrossReplicaSum(input=..., group_assignment=...)` in "
            "TPU batch-norm layers and TPU simulation code). Off TPU it becomes the same "
            "grouped all-reduce as `cross_replica_sum`.",
        build="tpu_estimator_compat.step.cross_shard:patched_raw_cross_replica_sum",
        signature="(input, group_assignment, name=None)"),
    Patch(
        name="cross_shard.xla_replica_id",
        target="tensorflow.compiler.tf2xla.python.xla.replica_id",
        why="TPU code reads its replica index with `xla.replica_id()` (google-research/"
            "simclr objective.py, every use_tpu=True run); compiled off TPU the XlaReplicaId "
            "op segfaults the process. Inside a replica step it becomes the replica's index "
            "in the strategy; elsewhere the op is left alone. Code calls it through this "
            "module attribute (`from tensorflow.compiler.tf2xla.python import xla`).",
        build="tpu_estimator_compat.step.cross_shard:patched_replica_id",
        signature="(name=None) -> Annotated[Any, <class "
                  "'tensorflow.security.fuzzing.py.annotation_types.Int32'>]"),
    # -- optimizer_apply: per-device v1 optimizer updates on mirrored strategies.
    Patch(
        name="optimizer_apply.distributed_apply",
        target="tensorflow.compat.v1.train.Optimizer._distributed_apply",
        why="TF's version ties every device to every other after the all-reduce (~N*N*4 "
            "cross-device edges a step); each device only needs its own updates. The merge "
            "step of apply_gradients has no public hook.",
        build="tpu_estimator_compat.step.optimizer_apply:patched_distributed_apply",
        signature="(self, distribution, grads_and_vars, global_step=None, name=None)"),
    Patch(
        name="optimizer_apply.inference_apply_gradients",
        kind=SCOPED,
        target="tensorflow.compat.v1.train.Optimizer.apply_gradients",
        why="Legacy's EVAL and PREDICT sessions never ran a train_op model_fn built anyway "
            "(`minimize()` whatever the mode); a traced step runs every stateful op it holds, "
            "so evaluation would train. No public API keeps an op out of a tf.function.",
        build="tpu_estimator_compat.step.optimizer_apply:inference_apply_gradients",
        signature="(self, grads_and_vars, global_step=None, name=None, "
                  "skip_gradients_aggregation=False)"),
    Patch(
        name="optimizer_apply.inference_keras_apply_gradients",
        kind=SCOPED,
        target="tf_keras.src.optimizers.legacy.optimizer_v2.OptimizerV2.apply_gradients",
        package="tf_keras",
        why="The same as optimizer_apply.inference_apply_gradients, for tf_keras's legacy "
            "OptimizerV2 (`tf.keras.optimizers.legacy.*`, what canned heads train with: "
            "`get_updates` and `minimize` both end here). Its `iterations` is the global "
            "step there, so an EVAL step would also advance the step. Every legacy "
            "optimizer class inherits this method; no public API keeps it out of a trace.",
        build="tpu_estimator_compat.step.optimizer_apply:inference_keras_apply_gradients",
        signature="(self, grads_and_vars, name=None, experimental_aggregate_gradients=True)"),
    Patch(
        name="optimizer_apply.inference_keras_v2_apply_gradients",
        kind=SCOPED,
        target="tf_keras.src.optimizers.optimizer.Optimizer.apply_gradients",
        package="tf_keras",
        why="The same as optimizer_apply.inference_apply_gradients, for tf_keras's current "
            "optimizer (`tf.keras.optimizers.Adam`, which model_fns pair with "
            "`tf.GradientTape`: tensorflow-estimator's object_checkpointing_test). Its "
            "update would move the variables an evaluation or prediction reads. Every "
            "optimizer class of that family inherits this method; no public API keeps it "
            "out of a trace.",
        build="tpu_estimator_compat.step.optimizer_apply:inference_keras_v2_apply_gradients",
        signature="(self, grads_and_vars, name=None, skip_gradients_aggregation=False, "
                  "**kwargs)"),
    Patch(
        name="optimizer_apply.keras_iterations_retrace",
        target="tf_keras.src.optimizers.legacy.optimizer_v2.OptimizerV2.iterations",
        package="tf_keras",
        why="A v2 canned model_fn sets `optimizer.iterations = global_step` on the optimizer "
            "instance the user passed (`tf.estimator.DNNClassifier(optimizer=tf.keras."
            "optimizers.legacy.Adagrad(0.05))`). Legacy called model_fn once per graph; "
            "tf.function traces the step again after its first trace made variables, and "
            "the property's setter refuses any second assignment, even of the very variable "
            "it holds. The replacement lets that identical assignment through (another "
            "variable still gets tf_keras's error). No public API reaches a property setter.",
        build="tpu_estimator_compat.step.optimizer_apply:retraceable_keras_iterations"),
    # -- keras_env: model_fn sees the TF1 graph it was written for.
    Patch(
        name="keras_env.executing_eagerly_outside_functions",
        target="tensorflow.python.framework.ops.executing_eagerly_outside_functions",
        public_bindings=True,
        why="tf_keras and TF1 model code branch on this public name; inside a replica step "
            "it must answer False as in legacy's graph, while TF's internals (which call the "
            "private original) keep the true answer. No public API offers such a scope.",
        build="tpu_estimator_compat.v1_state.keras_env:patched_executing_eagerly_outside_functions",
        signature="() -> bool"),
    Patch(
        name="keras_env.maybe_init_scope",
        target="tf_keras.src.utils.tf_utils.maybe_init_scope",
        package="tf_keras",
        why="tf_keras lifts layer weight creation out of the trace only when outside "
            "functions is eager; the TF1 graph view must keep that lifting so every replica "
            "builds the same variables. Every tf_keras caller reads it as a module attribute.",
        build="tpu_estimator_compat.v1_state.keras_env:patched_maybe_init_scope",
        signature="(layer)"),
    Patch(
        name="keras_env.should_use_v2",
        target="tf_keras.src.utils.version_utils.should_use_v2",
        package="tf_keras",
        why="tf_keras picks the v1 or v2 Layer base for each new layer from this answer and "
            "rewrites the class's `__bases__` process-wide (`swap_class`). A layer made in a "
            "build() runs under init_scope, which is eager here (a graph in legacy), so it "
            "would swap its classes to v2 while layers of the same class made in model_fn "
            "are v1 objects, some in the middle of a v1 `__call__`. In the TF1 graph view "
            "the answer must be legacy's: v1. tf_keras reads it as a module attribute; no "
            "public API chooses the Layer version.",
        build="tpu_estimator_compat.v1_state.keras_env:patched_should_use_v2",
        signature="()"),
    # -- tf1_names: the names TF1 model code reads (`v.op.name`).
    Patch(
        name="tf1_names.variable_op",
        target="tensorflow.python.ops.resource_variable_ops.BaseResourceVariable.op",
        why="TF1 code reads `v.op.name` for a variable's name (LARS optimizers, "
            "init_from_checkpoint maps, tf_slim); the shim's variables are created eagerly "
            "and have no op. For callers outside TensorFlow and tf_keras the property gives "
            "a stand-in op carrying the TF1 graph's name; TF's own code, which uses "
            "`hasattr(v, 'op')` to tell graph variables from eager ones, still sees none. "
            "A property of the class: no public API adds attributes to variables.",
        build="tpu_estimator_compat.v1_state.tf1_names:graph_style_variable_op"),
    Patch(
        name="tf1_names.distributed_variable_op",
        target="tensorflow.python.distribute.values.DistributedVariable.op",
        why="As tf1_names.variable_op, for MirroredStrategy's variables, whose own `op` "
            "reads the (eager) op of a component and fails the same way.",
        build="tpu_estimator_compat.v1_state.tf1_names:graph_style_variable_op"),
    Patch(
        name="tf1_names.variable_initializer",
        target="tensorflow.python.ops.resource_variable_ops.BaseResourceVariable.initializer",
        why="TF1 model code groups variables' initializers into a Scaffold's init_op "
            "(`tf.group(v.initializer, ...)`, `tf.compat.v1.variables_initializer(vars)`); "
            "the shim's variables are created, and initialised, eagerly, and TF2 gives them "
            "no initializer, so `tf.group` fails on None. Read while a graph is built, the "
            "property gives a no-op there (MirroredStrategy's variables group their "
            "components'). A property of the class: no public API adds it.",
        build="tpu_estimator_compat.v1_state.tf1_names:graph_style_initializer"),
    # -- aliases: the legacy names unchanged TF1 scripts import.
    Patch(
        name="aliases.estimator",
        target="tensorflow.compat.v1.estimator",
        also=("tensorflow.compat.v1.compat.v1.estimator",
              "tensorflow.compat.v2.compat.v1.estimator",
              "tensorflow._api.v2.compat.v1.estimator"),
        may_be_absent=True,
        why="TF 2.16+ dropped tf.estimator; legacy scripts reach it from every API root. "
            "Each root is a module object of its own: the nested ones (`import "
            "tensorflow.compat.v2 as tf` then `tf.compat.v1.estimator`: google-research/"
            "bigbird core/utils.py), and `tf.compat.v1` read before `import "
            "tensorflow.compat.v1` re-executed it under that name (an `_api` object). Legacy "
            "served its v1 estimator namespace on every v1 root.",
        build="tpu_estimator_compat.legacy.aliases:estimator_namespace"),
    Patch(
        name="aliases.estimator_v2",
        target="tensorflow.estimator",
        also=("tensorflow.compat.v2.estimator",
              "tensorflow.compat.v1.compat.v2.estimator",
              "tensorflow.compat.v2.compat.v2.estimator",
              "tensorflow._api.v2.compat.v2.estimator"),
        may_be_absent=True,
        why="As aliases.estimator, on every v2 root: legacy's v2 namespace there held the "
            "`V2` canned classes (Keras optimizers, v2 heads), not the v1 ones.",
        build="tpu_estimator_compat.legacy.aliases:estimator_v2_namespace"),
    Patch(
        name="aliases.contrib",
        target="tensorflow.compat.v1.contrib",
        also=("tensorflow.compat.v1.compat.v1.contrib",
              "tensorflow.compat.v2.compat.v1.contrib",
              "tensorflow._api.v2.compat.v1.contrib"),
        may_be_absent=True,
        why="TF2 has no tf.contrib; TPU models use a few of its submodules. Served on every "
            "v1 API root, as `estimator` is (the nested ones are module objects of their own).",
        build="tpu_estimator_compat.legacy.aliases:contrib_namespace"),
    Patch(
        name="aliases.TPUClusterResolver",
        target="tensorflow.compat.v1.distribute.cluster_resolver.TPUClusterResolver",
        why="Legacy scripts build a resolver unconditionally; with no TPU the real one raises "
            "before the estimator can fall back to GPUs or the CPU.",
        build="tpu_estimator_compat.legacy.aliases:no_crash_tpu_cluster_resolver"),
    *(Patch(
        name=f"aliases.{name}",
        target=f"tensorflow.compat.v1.tpu.experimental.{name}",
        may_be_absent=True,
        why="TF 2.16+ dropped the v1 TPU embedding optimization parameter classes; "
            "TPUEstimator scripts build EmbeddingConfigSpec(optimization_parameters=...) "
            "from them.",
        build=f"tpu_estimator_compat.legacy.aliases:served_{name}")
      for name in ("AdagradParameters", "AdamParameters", "FtrlParameters",
                   "StochasticGradientDescentParameters")),
    # -- tf_slim_support: see _TF_SLIM_MOVED below for the names TF 2.21 moved.
    Patch(
        name="tf_slim_support.batch_normalization",
        target="tensorflow.python.layers.normalization.normalization",
        why="tf-slim's `layers.batch_norm` (`tf.contrib.layers.batch_norm`, `slim.batch_norm` "
            "with its default arguments) builds `normalization.BatchNormalization`, which "
            "TF 2.21 resolves through this lazy loader of `tf_keras.legacy_tf_layers`, a path "
            "tf_keras 2.21 moved: ModuleNotFoundError. It now reads `tf.compat.v1.layers`, "
            "where the same classes live, still lazily (no Keras import at start-up).",
        build="tpu_estimator_compat.contrib.tf_slim:v1_layers_module"),
    # -- v1_file_writer: TF1 eval loops write Summary protos with eager execution on.
    Patch(
        name="v1_file_writer.init",
        target="tensorflow.compat.v1.summary.FileWriter.__init__",
        why="TF1 scripts build `tf.summary.FileWriter(model_dir)` at the top level and add "
            "`Summary` protos (tensorflow/tpu retinanet's eval modes); legacy ran them in "
            "graph mode, here eager stays on and the constructor raises, although the "
            "writer never uses a graph once built. With eager on it is built in a graph of "
            "its own (TF's own advice); no public API lifts the check. Patched on the class: "
            "FileWriterCache.get and subclasses construct through it.",
        build="tpu_estimator_compat.contrib.v1_file_writer:eager_safe_init",
        signature="(self, logdir, graph=None, max_queue=10, flush_secs=120, graph_def=None, "
                  "filename_suffix=None, session=None)"),
    Patch(
        name="v1_file_writer.add_summary",
        target="tensorflow.compat.v1.summary.FileWriter.add_summary",
        why="With eager on, a summary tensor (no Session can evaluate it) failed on "
            "`summary.value` with an AttributeError naming neither the argument nor the fix; "
            "it now raises a TypeError that does. Set on FileWriter itself (TF defines it on "
            "the base class), and deleted again by uninstall.",
        build="tpu_estimator_compat.contrib.v1_file_writer:checked_add_summary",
        signature="(self, summary, global_step=None)"),
    # -- scoped swaps, each while one piece of the library runs.
    Patch(
        name="summaries.create_file_writer",
        kind=SCOPED,
        target="tensorflow.summary.create_file_writer",
        also=("tensorflow.compat.v2.summary.create_file_writer",),
        why="A host_call fn calls create_file_writer on every call; legacy wrote one events "
            "file per run, so while it runs the call returns the runner's cached writer.",
        build=GIVEN,
        signature="(logdir, max_queue=None, flush_millis=None, filename_suffix=None, "
                  "name=None, experimental_trackable=False, experimental_mesh=None)"),
    Patch(
        name="variables.ema_variables_to_restore",
        kind=SCOPED,
        target="tensorflow.compat.v1.train.ExponentialMovingAverage.variables_to_restore",
        why="TF names non-averaged variables by v.op.name, which eagerly created variables "
            "lack; inside a replica step they are named by their v1 name instead.",
        build="tpu_estimator_compat.v1_state.variables:variables_to_restore_by_name",
        signature="(self, moving_avg_variables=None)"),
    Patch(
        name="variables.replica_root_name_scope",
        kind=SCOPED,
        target="tensorflow.python.framework.ops.Graph.name_scope",
        why="All MirroredStrategy replicas trace into one graph, replicas after the first "
            "under `replica_<k>/`, which the registry strips from variable names. A reset to "
            "the graph's root (`name_scope('')`, `name_scope(None)`: a Keras layer named '', "
            "`variable_scope('')`) escaped it, so the name scopes opened next were uniquified "
            "against the first replica's (`efficientnet-b0_1/`) and the replica created "
            "variables under names no TF1 graph had. Inside a later replica's step the root "
            "is that replica's root scope. No public API sets a graph's root name scope.",
        build="tpu_estimator_compat.v1_state.variables:replica_root_name_scope",
        signature="(self, name) -> collections.abc.Iterator[str]"),
    Patch(
        name="variables.local_update_in_control_flow",
        kind=SCOPED,
        target="tensorflow.python.distribute.values._on_write_update_replica",
        why="A replica-context assign to a mirrored variable (ONLY_FIRST_REPLICA) goes "
            "through merge_call, which TensorFlow refuses inside a cond branch or while body "
            "(tapas' gradient accumulation applies its custom optimizer under tf.cond). On a "
            "TPU each core assigned its own copy there; inside a replica step's control flow "
            "the replica's own component is updated instead. Around a custom optimizer's "
            "update under CrossShardOptimizer (`optimizer_apply.apply_once`) replica 0's "
            "assigns go to every component directly, with no merge_call per variable. No "
            "public API updates one component of a mirrored variable in replica context.",
        build="tpu_estimator_compat.v1_state.variables:local_update_in_control_flow",
        signature="(var, update_fn, value, **kwargs)"),
    Patch(
        name="write_order.assign_variable_op",
        kind=SCOPED,
        target="tensorflow.python.ops.gen_resource_variable_ops.assign_variable_op",
        why=_WRITE_ORDER_WHY,
        build="tpu_estimator_compat.v1_state.write_order:patched_write",
        signature="(resource: Annotated[Any, <class 'tensorflow.security.fuzzing.py.annotation_types.Resource'>], value: Annotated[Any, ~TV_AssignVariableOp_dtype], validate_shape: bool = False, name=None)"),
    Patch(
        name="write_order.assign_add_variable_op",
        kind=SCOPED,
        target="tensorflow.python.ops.gen_resource_variable_ops.assign_add_variable_op",
        why=_WRITE_ORDER_WHY,
        build="tpu_estimator_compat.v1_state.write_order:patched_write",
        signature="(resource: Annotated[Any, <class 'tensorflow.security.fuzzing.py.annotation_types.Resource'>], value: Annotated[Any, ~TV_AssignAddVariableOp_dtype], name=None)"),
    Patch(
        name="write_order.assign_sub_variable_op",
        kind=SCOPED,
        target="tensorflow.python.ops.gen_resource_variable_ops.assign_sub_variable_op",
        why=_WRITE_ORDER_WHY,
        build="tpu_estimator_compat.v1_state.write_order:patched_write",
        signature="(resource: Annotated[Any, <class 'tensorflow.security.fuzzing.py.annotation_types.Resource'>], value: Annotated[Any, ~TV_AssignSubVariableOp_dtype], name=None)"),
    Patch(
        name="cross_shard.number_of_shards",
        kind=SCOPED,
        target="tensorflow.python.tpu.tpu_function.TpuContext.number_of_shards",
        why="Legacy built a use_tpu=True model_fn inside a TPU shard context, whose shard "
            "count models read to all-reduce batch-norm moments; outside one it is None and "
            "they silently normalise per replica. Setting TF's own (thread-local) count would "
            "also flip TF's TPU feature columns to their TPU path and make CrossShardOptimizer "
            "emit TPU ops, so while model_fn runs only code outside TensorFlow and this "
            "library reads the replica count. The context is only reachable privately.",
        build="tpu_estimator_compat.step.cross_shard:patched_number_of_shards"),
    Patch(
        name="cross_shard.xla_context",
        kind=SCOPED,
        target="tensorflow.python.ops.control_flow_util.GetContainingXLAContext",
        why="Legacy built a use_tpu=True model_fn inside `tpu.rewrite`, an XLA control-flow "
            "context, and model code asks for it to choose its TPU form (tensor2tensor's "
            "`is_xla_compiled()` returns a TPUEstimatorSpec with eval_metrics only then; "
            "copies of contrib.seq2seq's dynamic_decode size their arrays by it). Entering a "
            "real XLA context would also change how TensorFlow builds while/cond ops, so while "
            "model_fn runs only code outside TensorFlow and this library gets a context. No "
            "public API exposes the control-flow context.",
        build="tpu_estimator_compat.step.cross_shard:patched_containing_xla_context",
        signature="(ctxt)"),
    Patch(
        name="cross_shard.in_xla_context",
        kind=SCOPED,
        target="tensorflow.python.ops.control_flow_util.IsInXLAContext",
        why="As `cross_shard.xla_context`, for code asking about an op model_fn made "
            "(contrib.seq2seq's `_is_xla_tensor` copies).",
        build="tpu_estimator_compat.step.cross_shard:patched_in_xla_context",
        signature="(op)"),
    Patch(
        name="tf1_names.scoped_collections",
        kind=SCOPED,
        target="tensorflow.Graph.get_collection",
        why="Replicas after the first build their ops under `replica_<k>/` (all replicas "
            "trace into one graph), so `get_collection(UPDATE_OPS, 'gen')` and "
            "`get_regularization_losses(scope)` missed their own ops; a TPU core's ops had "
            "no such prefix. During a replica step the scope also matches names without it. "
            "The filter is inside Graph.get_collection; no public API filters by scope.",
        build="tpu_estimator_compat.v1_state.tf1_names:replica_scoped_get_collection",
        signature="(self, name, scope=None) -> list[typing.Any]"),
    Patch(
        name="warm_start.init_from_checkpoint",
        kind=SCOPED,
        target="tensorflow.compat.v1.train.init_from_checkpoint",
        why="TF1 ran it as an initializer; here the calls made while model_fn or scaffold_fn "
            "runs are recorded and applied once the variables exist.",
        build="tpu_estimator_compat.checkpoint.warm_start:recording_init_from_checkpoint",
        signature="(ckpt_dir_or_file, assignment_map)"),
    Patch(
        name="warm_start.Saver",
        kind=SCOPED,
        target="tensorflow.compat.v1.train.Saver",
        also=("tensorflow.python.training.saver.Saver",),
        why="A Saver(var_list) built in model_fn or scaffold_fn only needs its settings "
            "kept (the Scaffold's saver writes the checkpoints; an init_fn restores through "
            "it, also tf_slim's `assign_from_checkpoint_fn`, which calls the saver module's "
            "class): a real v1 Saver cannot be built outside a graph, and in a traced step "
            "its restore ops would run at every step.",
        build="tpu_estimator_compat.checkpoint.warm_start:recording_saver"),
    Patch(
        name="hooks.Saver",
        kind=SCOPED,
        target="tensorflow.compat.v1.train.Saver",
        also=("tensorflow.python.training.saver.Saver",),
        why="A hook's `Saver(var_list)` built in begin() and restored in "
            "after_create_session(sess) (tensorflow/tpu amoeba_net's LoadEMAHook, through "
            "tf_slim's assign_from_checkpoint_fn) needs a TF1 session; its var_list is "
            "restored through the map on the host instead.",
        build="tpu_estimator_compat.loop.hooks:host_saver"),
    Patch(
        name="inputs.iterator_get_next",
        kind=SCOPED,
        target="tensorflow.python.data.ops.iterator_ops.OwnedIterator.get_next",
        why="TF1 input_fns return `make_one_shot_iterator(dataset).get_next()`: in a TF1 graph "
            "those tensors gave the next batch at every step. input_fn runs eagerly here, so "
            "they are the first batch's values; while input_fn runs, get_next records the "
            "dataset behind them so that the returned tensors can stand for its elements. "
            "Eager iterators expose no public hook.",
        build="tpu_estimator_compat.inputs.call:recording_get_next",
        signature="(self)"),
    Patch(
        name="inputs.initializable_iterator",
        kind=SCOPED,
        target="tensorflow.python.data.ops.dataset_ops.DatasetV1._make_initializable_iterator",
        why="TF1 input_fns return `make_initializable_iterator(dataset).get_next()` and add the "
            "initializer to a collection legacy's Scaffold ran (tensorflow/tpu QANet). input_fn "
            "runs eagerly here, where TensorFlow refuses to make one; while input_fn runs it "
            "is an eager iterator (already at the first element, as the initializer left it) "
            "whose get_next tensors stand for the dataset's elements "
            "(`inputs.iterator_get_next`). Both the v1 function and the method reach it.",
        build="tpu_estimator_compat.inputs.call:eager_initializable_iterator",
        signature=("(self, shared_name=None) -> "
                   "tensorflow.python.data.ops.iterator_ops.Iterator")),
    Patch(
        name="random_streams.explicit_seeds",
        kind=SCOPED,
        target="tensorflow.python.framework.random_seed.get_seed",
        why="Legacy called input_fn in each call's new graph, so its random ops restarted "
            "their streams every call. Here input_fn runs eagerly, where a random op's "
            "kernel is cached per (seed, op seed) and would continue its stream in the next "
            "call; the shim clears that cache only when such a kernel may exist "
            "(`_tf/random_streams.py`). An unseeded op shows itself by drawing an op seed "
            "from the context; one with an explicit op seed only through this function, "
            "which every TensorFlow random op calls for its seeds, while input_fn runs.",
        build="tpu_estimator_compat._tf.random_streams:watched_get_seed",
        signature="(op_seed)"),
    Patch(
        name="random_streams.twin_uniform",
        kind=SCOPED,
        target="tensorflow.python.ops.gen_random_ops.random_uniform",
        why=_TWIN_WHY.format(op="RandomUniform"),
        build="tpu_estimator_compat._tf.random_streams:twin_uniform",
        signature="(shape: Annotated[Any, ~TV_RandomUniform_T], dtype: ~TV_RandomUniform_dtype, seed: int = 0, seed2: int = 0, name=None) -> Annotated[Any, ~TV_RandomUniform_dtype]"),
    Patch(
        name="random_streams.twin_normal",
        kind=SCOPED,
        target="tensorflow.python.ops.gen_random_ops.random_standard_normal",
        why=_TWIN_WHY.format(op="RandomStandardNormal"),
        build="tpu_estimator_compat._tf.random_streams:twin_normal",
        signature="(shape: Annotated[Any, ~TV_RandomStandardNormal_T], dtype: ~TV_RandomStandardNormal_dtype, seed: int = 0, seed2: int = 0, name=None) -> Annotated[Any, ~TV_RandomStandardNormal_dtype]"),
    Patch(
        name="random_streams.twin_truncated_normal",
        kind=SCOPED,
        target="tensorflow.python.ops.gen_random_ops.truncated_normal",
        why=_TWIN_WHY.format(op="TruncatedNormal"),
        build="tpu_estimator_compat._tf.random_streams:twin_truncated_normal",
        signature="(shape: Annotated[Any, ~TV_TruncatedNormal_T], dtype: ~TV_TruncatedNormal_dtype, seed: int = 0, seed2: int = 0, name=None) -> Annotated[Any, ~TV_TruncatedNormal_dtype]"),
    Patch(
        name="random_streams.twin_uniform_int",
        kind=SCOPED,
        target="tensorflow.python.ops.gen_random_ops.random_uniform_int",
        why=_TWIN_WHY.format(op="RandomUniformInt"),
        build="tpu_estimator_compat._tf.random_streams:twin_uniform_int",
        signature="(shape: Annotated[Any, ~TV_RandomUniformInt_T], minval: Annotated[Any, ~TV_RandomUniformInt_Tout], maxval: Annotated[Any, ~TV_RandomUniformInt_Tout], seed: int = 0, seed2: int = 0, name=None) -> Annotated[Any, ~TV_RandomUniformInt_Tout]"),
    Patch(
        name="hooks.global_step_read",
        kind=SCOPED,
        target="tensorflow.python.training.training_util._get_or_create_global_step_read",
        why="SummarySaverHook and StepCounterHook read the global step in begin() through "
            "this private helper, which adds a read op of the graph's global-step variable "
            "(`.op` of the eager variable here: `Tensor.op is undefined`). While hooks run, "
            "it returns the variable itself, which hooks fetch as the step's global step.",
        build="tpu_estimator_compat.loop.hooks:global_step_read",
        signature="(graph=None)"),
    Patch(
        name="cluster.local_devices",
        kind=SCOPED,
        target="tensorflow.python.distribute.collective_all_reduce_strategy."
               "CollectiveAllReduceExtended._initialize_local_devices",
        why="MultiWorkerMirroredStrategy hard-codes one replica on a worker without GPUs; no "
            "public argument names a multi-worker strategy's local devices, so logical CPUs "
            "stand in for a TPU host's cores while the strategy is built.",
        build="tpu_estimator_compat.cluster.workers:local_cpu_devices",
        signature="(self, cluster_resolver, worker_device)"),
    Patch(
        name="inputs.device_pipelines",
        kind=SCOPED,
        target="tensorflow.python.data.ops.multi_device_iterator_ops._create_device_dataset",
        why="The per-device pipelines of a MultiDeviceIterator run a tf.data autotune thread "
            "whose missed cancellation stalls the iterator's deletion up to 60 s a device; no "
            "public option reaches those pipelines (tf.distribute.InputOptions has none).",
        build="tpu_estimator_compat.inputs.distribute:device_dataset_without_autotune",
        signature="(prototype_ds, incarnation_id, prefetch_buffer_size, experimental_slack)"),
    Patch(
        name="inputs.device_generators",
        kind=SCOPED,
        target="tensorflow.python.data.ops.multi_device_iterator_ops._PerDeviceGenerator",
        why="Every MultiDeviceIterator traces six tf.functions per device for its per-device "
            "pipelines (48 on 8 replicas, ~75% of building it, ~0.4 s of every train/"
            "evaluate/predict call); the replacement reuses one trace per device across "
            "iterators (`_tf/device_iterators.py`). No public option reaches them.",
        build="tpu_estimator_compat.inputs.distribute:cached_device_generators",
        signature="(shard_num, multi_device_iterator_resource, incarnation_id, source_device, "
                  "element_spec, iterator_is_anonymous)"),
    # -- per object: the global step's reads inside a train step.
    Patch(
        name="global_step_reads.value",
        kind=INSTANCE,
        target="tensorflow.Variable.value",
        why="Reads of the global step in model_fn must see the step's starting value as in "
            "a TF1 graph; every read of one variable object goes through value/read_value.",
        build="tpu_estimator_compat.step.global_step_reads:redirected_read",
        signature="(self)"),
    Patch(
        name="global_step_reads.read_value",
        kind=INSTANCE,
        target="tensorflow.Variable.read_value",
        why="As global_step_reads.value: the other method every read goes through.",
        build="tpu_estimator_compat.step.global_step_reads:redirected_read",
        signature="(self)"),
    *(Patch(
        name=f"global_step_reads.{method}",
        kind=INSTANCE,
        target=f"tensorflow.Variable.{method}",
        why="Outside TRAIN the global step does not move: legacy's EVAL and PREDICT "
            "sessions never ran the train_op that incremented it (`tf.assign_add("
            "global_step, 1)`, a Checkpoint's `step.assign_add(1)` built in every mode), and "
            "a traced step runs every write it holds. One variable object's writes all go "
            "through these methods.",
        build="tpu_estimator_compat.step.global_step_reads:frozen_write",
        signature=f"(self, {arg}, use_locking=False, name=None, read_value=True)")
      for method, arg in (("assign", "value"), ("assign_add", "delta"),
                          ("assign_sub", "delta"))),
    Patch(
        name="metric_reads.metric_variable",
        kind=SCOPED,
        target="tensorflow.python.ops.metrics_impl.metric_variable",
        why="Every tf.compat.v1.metrics accumulator is made here, before its update: the "
            "one place to read it first, as legacy's session did (`step/metric_reads.py`).",
        build="tpu_estimator_compat.step.metric_reads:metric_variable",
        signature="(shape, dtype, validate_shape=True, name=None)"),
)

# TensorFlow internals tf-slim 1.1.0 (which serves tf.contrib.layers/framework/metrics/slim)
# still reads from their TF 1.x modules; TF 2.21 moved each elsewhere. Added back as the public
# object TF now exports for it. (patch name, target, builder, the tf-slim calls that need it)
_TF_SLIM_MOVED = (
    ("tensor", "tensorflow.python.framework.ops.Tensor", "tensor_class",
     "`layers.optimize_loss` (a tensor learning rate), `layers.utils.constant_value` (so "
     "`smart_cond` with a tensor predicate), `learning.multiply_gradients`, "
     "`layers.recompute_grad`"),
    ("indexed_slices", "tensorflow.python.framework.ops.IndexedSlices", "indexed_slices_class",
     "`layers.optimize_loss` (gradient summaries, clipping, noise, multipliers), "
     "`learning`/`training` `clip_gradient_norms`, `multiply_gradients`, "
     "`add_gradients_summaries`"),
    ("stack", "tensorflow.python.ops.array_ops.stack", "stack",
     "`tfexample_decoder.Tensor`/`SparseTensor` (object_detection decoders), "
     "`metrics.streaming_concat`, `streaming_curve_points`, the `streaming_auc` family, "
     "`layers.legacy_fully_connected`"),
    ("unstack", "tensorflow.python.ops.array_ops.unstack", "unstack",
     "`layers.legacy_fully_connected` (inputs of rank > 2)"),
    ("assert", "tensorflow.python.ops.control_flow_ops.Assert", "v1_assert",
     "`metrics.auc_using_histogram` (histogram_ops checks)"),
    ("case", "tensorflow.python.ops.control_flow_ops.case", "v1_case",
     "`tfexample_decoder.Image` (every object_detection image decoder: tensorflow/tpu "
     "retinanet)"),
    ("cond", "tensorflow.python.ops.control_flow_ops.cond", "v1_cond",
     "`tfexample_decoder.Image` (JPEG check) and `BackupHandler`, `layers.utils.smart_cond`, "
     "`metrics.streaming_concat`, `streaming_dynamic_auc`, `recall_at_precision`, "
     "`auc_with_confidence_intervals`"),
    ("while_loop", "tensorflow.python.ops.control_flow_ops.while_loop", "v1_while_loop",
     "`losses.metric_learning.cluster_loss`"),
    ("variable", "tensorflow.python.ops.variable_scope.variable", "v1_variable",
     "`framework.local_variable`, `framework.global_variable`"),
)
PATCHES += tuple(
    Patch(name=f"tf_slim_support.{name}", target=target, may_be_absent=True,
          why=f"TF 2.21 moved or removed this name; tf-slim 1.1.0 still reads it in {callers}.",
          build=f"tpu_estimator_compat.contrib.tf_slim:{builder}")
    for name, target, builder, callers in _TF_SLIM_MOVED)
PATCHES += (
    Patch(name="tf_slim_support.register_tensor_conversion_function",
          target="tensorflow.python.framework.ops.register_tensor_conversion_function",
          may_be_absent=True,
          why="The other TF1-era TPU library real TPUEstimator code imports, mesh_tensorflow "
              "0.1.21 (its last release; tensor2tensor's models import it), registers its "
              "`ReplicatedVariable` with this at import time (`tpu_variables.py`); TF 2.21 "
              "keeps the function only as `tf.register_tensor_conversion_function`.",
          build="tpu_estimator_compat.contrib.tf_slim:register_tensor_conversion_function"),
)
PATCHES += (
    # -- hub_support: TF1 hub modules (`hub.Module`) built inside model_fn.
    Patch(
        name="hub_support.try_get_state_scope",
        kind=SCOPED,
        target="tensorflow_hub.module._try_get_state_scope",
        package="tensorflow_hub",
        why="hub.Module checks that the variable scope it picks has an unused name scope of "
            "the same name; a later replica's name scopes carry its `replica_<k>/` root and "
            "its variable scopes do not, so the check failed on every replica but the first. "
            "Inside a replica step it compares relative to the replica's root.",
        build="tpu_estimator_compat.contrib.hub:try_get_state_scope",
        signature="(name, mark_name_scope_used=True)"),
    Patch(
        name="hub_support.init_state",
        kind=SCOPED,
        target="tensorflow_hub.native_module._ModuleImpl._init_state",
        package="tensorflow_hub",
        why="hub.Module imports its variables into the current graph (import_meta_graph): "
            "in a traced step they belong to the trace, never reach the registry, and their "
            "initializers and save ops would run every step. Inside a replica step they are "
            "made through get_variable (the registry), initialised as the module graph does.",
        build="tpu_estimator_compat.contrib.hub:init_state",
        signature="(self, name)"),
    Patch(
        name="hub_support.create_apply_graph",
        kind=SCOPED,
        target="tensorflow_hub.native_module._ModuleImpl.create_apply_graph",
        package="tensorflow_hub",
        why="Applying a signature imports the whole module graph, initializers and save ops "
            "included, which a tf.function would all run; inside a replica step the graph is "
            "pruned to the signature's outputs and UPDATE_OPS and fed the replica's own "
            "variable handles, as hub does for TPU functions.",
        build="tpu_estimator_compat.contrib.hub:create_apply_graph",
        signature="(self, signature, input_tensors, name)"),
)
