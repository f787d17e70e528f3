"""Every legacy `tf.contrib` path: served, changed or refused, and by what. Data only.

    from tpu_estimator_compat.legacy import contrib_map
    contrib_map.verdict("keras.layers.Dense").status     # 'served' (the `keras` entry)
    contrib_map.verdict("opt.LazyAdamOptimizer").note    # what to use instead
    contrib_map.error_hint("opt.LazyAdamOptimizer")      # the hint our error ends with

TensorFlow 2 has no `tf.contrib`. Real TF1 code reaches it as attributes (`tf.contrib.keras.
layers.Dense`) and as modules (`from tensorflow.contrib import keras`, `from
tensorflow.contrib.opt import LazyAdamOptimizer`, `tensorflow.contrib.keras.api.keras.models`).
This module is the one table that decides every such path, built from what public code
imports (the `seen` field; tensorflow/tpu, google-research and the code search of
`migration_guide/launcher.md`). `contrib_namespace.py` builds the served modules from it,
`legacy/import_hook.py` serves the same objects under module paths, and
`dev/contrib_table.py` prints it into `migration_guide/launcher.md`. It imports nothing but
the standard library, so a tool that reads code without running it can load it by file path
(`importlib.util.spec_from_file_location`) without TensorFlow.

An entry's `path` is under `tf.contrib`. Its `status`:
- SERVED: the same behaviour, from `home` (TensorFlow, tf_keras, tf-slim, or this library
  where no maintained library keeps the name);
- CHANGED: it runs, and `note` says what differs from TF 1.15;
- REFUSED: using it raises `aliases.LegacySymbolError` (an AttributeError; an ImportError
  subclass on the import path) whose message ends with `note`, the replacement.
Its `kind`: MODULE, a namespace whose names are looked up in their own entries first, then in
`home`'s objects in order, else refused with `hint` (or the entry's note when refused); NAME,
one object (`home[0]`). A module's status is the verdict for the names under it that have no
entry of their own. Importing a module always works, whatever its status: scripts import
contrib modules they use only behind a flag, so a refused name fails where it is used.
`home` strings: `tf:<attribute path of tensorflow>`, `py:<module>[:<attribute path>]`,
`py:<module>:<function>()` (a function returning a dict of names), `contrib:<path>` (the
object of another entry). Top-level paths the table does not know are refused with
`GENERIC_HINT`.
"""

import dataclasses
from typing import Iterable

SERVED = "served"
CHANGED = "changed"
REFUSED = "refused"
MODULE = "module"
NAME = "name"
GUIDE = "migration_guide/launcher.md (the tf.contrib map)"


@dataclasses.dataclass(frozen=True)
class Entry:
    """One legacy `tf.contrib.<path>`: its verdict, where it comes from and why."""

    path: str
    status: str
    kind: str
    home: tuple[str, ...] = ()
    note: str = ""
    hint: str = ""
    seen: str = ""


def _module(path: str, status: str, home: Iterable[str] = (), note: str = "", hint: str = "",
            seen: str = "") -> Entry:
    return Entry(path, status, MODULE, tuple(home), note, hint, seen)


def _name(path: str, status: str, home: str = "", note: str = "", seen: str = "") -> Entry:
    return Entry(path, status, NAME, (home,) if home else (), note, "", seen)


def _refused(path: str, note: str, seen: str = "", kind: str = MODULE) -> Entry:
    return Entry(path, REFUSED, kind, (), note, "", seen)


def _names(module: str, status: str, home: str, names: Iterable[str], note: str = "",
           seen: str = "") -> list[Entry]:
    """Entries for `module.<name>`, each served from `home` + `.<name>` (or `:<name>`)."""
    sep = "." if home.startswith("tf:") or ":" in home[3:] else ":"
    return [_name(f"{module}.{n}", status, f"{home}{sep}{n}", note, seen) for n in names]


_LIB = "py:tpu_estimator_compat"
_STANDINS = "py:tpu_estimator_compat.legacy.contrib_standins"
_TPU = "tensorflow/tpu"
_FS = "public code (find_string `{}`)"
_END_OF_LIFE = ("TF Addons kept it ({}) but is end-of-life (its last release, 0.23.0, does "
                "not import on TF 2.21): copy the code you use into your project.")

ENTRIES: tuple[Entry, ...] = (
    # -- TPU and its cluster resolver: the estimator itself ------------------------------------
    _module("tpu", SERVED, ["tf:compat.v1.tpu"],
            "TensorFlow's `tf.compat.v1.tpu`; TPUEstimator and its configuration are this "
            "library's; `CrossShardOptimizer` and `cross_replica_sum` run on the strategy's "
            "all-reduce off TPU (`step/cross_shard.py`).", seen=f"{_TPU} (22 files), ALBERT, BERT"),
    *_names("tpu", SERVED, _LIB, ("TPUEstimator", "TPUEstimatorSpec", "RunConfig",
                                  "TPUConfig", "InputPipelineConfig"),
            "This library.", f"{_TPU}, ALBERT, BERT"),
    _name("tpu.AsyncCheckpointSaverHook", CHANGED, f"{_STANDINS}:AsyncCheckpointSaverHook",
          "A `CheckpointSaverHook` with legacy's arguments that replaces the estimator's saver "
          "as legacy's did: the same checkpoints, written when due rather than on a thread.",
          f"{_TPU} efficientnet, google/compare_gan"),
    _refused("tpu.keras_to_tpu_model",
             "Build and compile the Keras model under `tf.distribute.TPUStrategy(resolver)"
             ".scope()` (TF 2 Keras on TPUs).", f"{_TPU} (history)", NAME),
    _refused("tpu.TPUDistributionStrategy",
             "`tf.distribute.TPUStrategy(resolver)`, with the model built under its `scope()`.",
             f"{_TPU} (history)", NAME),
    _module("cluster_resolver", SERVED, ["tf:compat.v1.distribute.cluster_resolver"],
            "TensorFlow's `tf.distribute.cluster_resolver`.", seen=f"{_TPU} (19 files), ALBERT"),
    _name("cluster_resolver.TPUClusterResolver", CHANGED,
          "py:tpu_estimator_compat.cluster.tpu_resolver:TPUClusterResolver",
          "The real resolver when a TPU can be resolved, else a `NoTPUClusterResolver` "
          "(master '', empty cluster) where legacy raised, so the estimator falls back.",
          f"{_TPU}, ALBERT, BERT"),
    # -- Keras: tf_keras is the Keras 2 contrib.keras re-exported -------------------------------
    _module("keras", SERVED, ["py:tf_keras.api._v1.keras"],
            "tf_keras's v1 API (`tf.compat.v1.keras` under TF_USE_LEGACY_KERAS=1): the Keras 2 "
            "classes contrib.keras re-exported (`layers`, `models`, `backend`, `losses`, "
            "`applications`, `datasets`, ...).",
            seen=f"{_TPU} cifar_keras.py; {_FS.format('from tensorflow.contrib.keras import')}"),
    _module("keras.optimizers", CHANGED, ["py:tf_keras.api._v1.keras.optimizers"],
            "tf_keras's v1 optimizers: the OptimizerV2 `Adam`, `SGD`, ... (same update rules "
            "and defaults, `lr=` taken). TF 1.15 served Keras's older `get_updates` classes "
            "(tf_keras keeps them privately), whose variables had other names.",
            seen=_FS.format("from tensorflow.contrib.keras import")),
    _refused("keras.wrappers",
             "tf_keras has no scikit-learn wrappers: use SciKeras (`pip install scikeras`, "
             "`scikeras.wrappers.KerasClassifier`).", _FS.format("contrib.keras.wrappers")),
    _module("keras.api", SERVED, note="Its one name, `keras`, is `tf.contrib.keras`."),
    _name("keras.api.keras", SERVED, "contrib:keras", "`tf.contrib.keras` itself.",
          _FS.format("from tensorflow.contrib.keras.api.keras")),
    _module("keras.python", SERVED, note="Its one name, `keras`, is `tf.contrib.keras`."),
    _name("keras.python.keras", SERVED, "contrib:keras",
          "TF 1.0-1.3's path of `tf.contrib.keras`; its public modules only.",
          _FS.format("tensorflow.contrib.keras.python.keras")),
    # -- tf-slim: the maintained copy of contrib.layers/framework/metrics/losses/slim -----------
    _module("layers", SERVED, ["py:tf_slim.layers", "py:tf_slim"],
            "tf-slim 1.1.0, which keeps TF1's variable names (`LayerNorm/beta`); the TF 2.21 "
            "internals it calls are put back (`contrib/tf_slim.py`).",
            "tf-slim has no such name (contrib.layers' old feature columns: use "
            "`tf.compat.v1.feature_column`).", f"{_TPU}, ALBERT, BERT"),
    _module("framework", SERVED, [f"{_STANDINS}:framework_members()", "py:tf_slim"],
            "tf-slim (`arg_scope`, variables, checkpoint assignment) and TensorFlow's own "
            "functions under contrib's names (`nest`, `sort`, `load_checkpoint`, "
            "`deprecated`, `get_name_scope`, ...).", seen=f"{_TPU}, tensor2tensor"),
    _module("metrics", SERVED, ["py:tf_slim.metrics"],
            "tf-slim's `metrics` (`streaming_*`, `accuracy`, `f1_score`, ...).",
            seen=f"ALBERT; {_FS.format('tf.contrib.metrics.')}"),
    *[_name(f"metrics.set_{n}", SERVED, f"tf:sets.{n}", f"`tf.sets.{n}`, which contrib "
                                                        "re-exported.")
      for n in ("intersection", "size", "union", "difference")],
    _name("metrics.confusion_matrix", SERVED, "tf:compat.v1.confusion_matrix",
          "TensorFlow's `tf.compat.v1.confusion_matrix`.", _FS.format("tf.contrib.metrics.")),
    _module("losses", SERVED, ["py:tf_slim.losses"],
            "tf-slim's `losses`, a copy of contrib.losses (TF 1.0's argument order, "
            "`softmax_cross_entropy(logits, onehot_labels)`) with `metric_learning`.",
            seen=_FS.format("tf.contrib.losses.")),
    _name("slim", SERVED, "py:tf_slim", "The `tf_slim` module itself.",
          f"{_TPU} inception, deeplab, retinanet"),
    # -- TensorFlow's own modules under their contrib names -------------------------------------
    _module("data", SERVED, ["tf:compat.v1.data.experimental"],
            "`tf.compat.v1.data.experimental` (`map_and_batch`, `parallel_interleave`, "
            "`shuffle_and_repeat`, `AUTOTUNE`, ...).", seen=f"{_TPU}, BERT, ALBERT"),
    _name("data.batch_and_drop_remainder", SERVED, f"{_STANDINS}:batch_and_drop_remainder",
          "`lambda ds: ds.batch(n, drop_remainder=True)`, as TF 1.15's.", f"{_TPU}"),
    _name("data.padded_batch_and_drop_remainder", SERVED,
          f"{_STANDINS}:padded_batch_and_drop_remainder",
          "`ds.padded_batch(..., drop_remainder=True)`, as TF 1.15's.", f"{_TPU} (history)"),
    _refused("data.sliding_window_batch",
             "`ds.window(size, shift, stride, drop_remainder=True).flat_map(lambda w: "
             "w.batch(size))`.", kind=NAME),
    *[_refused(f"data.{n}", f"`tf.compat.v1.data.{n}` (core since TF 1.4; contrib's took "
                            "`num_threads`/`output_buffer_size`).", f"{_TPU} (history)", NAME)
      for n in ("Dataset", "TFRecordDataset", "TextLineDataset", "Iterator")],
    _module("training", REFUSED,
            note="The rest of contrib.training (queue-based sequence batching, resampling, "
                 "`bucket_by_sequence_length`): `tf.data` (`tf.data.experimental."
                 "bucket_by_sequence_length`, `rejection_resample`).",
            seen=f"{_TPU} retinanet, amoeba_net, inception"),
    *_names("training", SERVED, "py:tpu_estimator_compat.contrib.hparams",
            ("HParams", "parse_values"),
            "This library (`contrib/hparams.py`: TF 1.15's behaviour, no `HParamDef` proto).",
            f"{_TPU}, GPT-2, google-research/uda"),
    *_names("training", SERVED, "py:tf_slim.training.training",
            ("train", "create_train_op", "add_gradients_summaries", "clip_gradient_norms",
             "clip_gradient_norms_fn", "multiply_gradients"),
            "tf-slim's `training`, a copy of contrib.training's train loop.", _TPU),
    *_names("training", SERVED, "py:tf_slim.training.evaluation",
            ("checkpoints_iterator", "evaluate_once", "evaluate_repeatedly",
             "get_or_create_eval_step", "StopAfterNEvalsHook", "SummaryAtEndHook",
             "wait_for_new_checkpoint"),
            "tf-slim's `training.evaluation`, a copy of contrib.training's.", f"{_TPU} inception"),
    _module("summary", SERVED, ["py:tpu_estimator_compat.contrib.summary:members()"],
            "TensorFlow's `summary_ops_v2`, which TF 1.x served under this name; "
            "`create_file_writer` is TF 2's, so a host_call writes through the runner's writer "
            "(`contrib/summary.py`).", seen=f"{_TPU} host_calls, google-research/uda"),
    _module("rnn", REFUSED,
            note="contrib.rnn's own cells (`LSTMBlockCell`, `LayerNormBasicLSTMCell`, "
                 "`AttentionCellWrapper`, ...) and `stack_bidirectional_dynamic_rnn` have no "
                 "maintained home: use `tf.compat.v1.nn.rnn_cell.LSTMCell`/`GRUCell` with "
                 "`tf.compat.v1.nn.dynamic_rnn`/`bidirectional_dynamic_rnn`, or tf_keras RNN "
                 "layers.", seen=f"{_TPU} show_and_tell; {_FS.format('tf.contrib.rnn.')}"),
    *_names("rnn", SERVED, "tf:compat.v1.nn.rnn_cell",
            ("BasicLSTMCell", "BasicRNNCell", "DeviceWrapper", "DropoutWrapper", "GRUCell",
             "LSTMCell", "LSTMStateTuple", "MultiRNNCell", "RNNCell", "ResidualWrapper"),
            "The `tf.compat.v1.nn.rnn_cell` class contrib.rnn re-exported.",
            f"{_TPU} show_and_tell"),
    *_names("rnn", SERVED, "tf:compat.v1.nn",
            ("static_rnn", "static_bidirectional_rnn", "static_state_saving_rnn"),
            "The `tf.compat.v1.nn` function contrib.rnn re-exported."),
    _module("stateless", SERVED, note="TensorFlow's stateless random ops, listed below.",
            seen=f"{_TPU} show_and_tell"),
    _name("stateless.stateless_random_normal", SERVED, "tf:random.stateless_normal",
          "`tf.random.stateless_normal` (same positional arguments)."),
    _name("stateless.stateless_random_uniform", SERVED, "tf:random.stateless_uniform",
          "`tf.random.stateless_uniform` (same positional arguments)."),
    _name("stateless.stateless_truncated_normal", SERVED, "tf:random.stateless_truncated_normal",
          "`tf.random.stateless_truncated_normal` (same positional arguments)."),
    _name("stateless.stateless_multinomial", SERVED,
          "tf:compat.v1.random.stateless_multinomial",
          "`tf.compat.v1.random.stateless_multinomial`."),
    _module("lookup", SERVED, ["py:tpu_estimator_compat.contrib.lookup:members()"],
            "TensorFlow's v1 lookup tables, which contrib.lookup re-exported; its own wrappers "
            "keep the `mapping` argument (`contrib/lookup.py`).", seen=f"{_TPU} qanet"),
    _module("image", REFUSED,
            note="The rest of contrib.image (`dense_image_warp`, `sparse_image_warp`, "
                 "`connected_components`, ...): " + _END_OF_LIFE.format("`tfa.image`"),
            seen=f"{_TPU} efficientnet, detection; google-research/noisystudent"),
    *_names("image", SERVED, "py:tpu_estimator_compat.contrib.image",
            ("transform", "rotate", "translate", "angles_to_projective_transforms",
             "translations_to_projective_transforms", "compose_transforms",
             "flat_transforms_to_matrices", "matrices_to_flat_transforms"),
            "This library (`contrib/image.py`): TF 1.x's conventions over the "
            "`ImageProjectiveTransformV2` kernel.", f"{_TPU} autoaugment"),
    _module("util", REFUSED,
            note="contrib.util's graph helpers (`ops_used_by_graph_def`, "
                 "`stripped_op_list_for_graph`) have no public TF 2 home.",
            seen=f"{_TPU}, tensor2tensor"),
    _name("util.constant_value", SERVED, "tf:get_static_value", "`tf.get_static_value`."),
    _name("util.make_tensor_proto", SERVED, "tf:make_tensor_proto", "`tf.make_tensor_proto`."),
    _name("util.make_ndarray", SERVED, "tf:make_ndarray", "`tf.make_ndarray`."),
    _module("signal", SERVED, ["tf:signal"],
            "`tf.signal` (`stft`, `frame`, `linear_to_mel_weight_matrix`, ...): the functions "
            "contrib.signal moved to.", seen=_FS.format("tf.contrib.signal.")),
    _module("proto", SERVED, note="Its two names, listed below."),
    _name("proto.decode_proto", SERVED, "tf:io.decode_proto", "`tf.io.decode_proto`."),
    _name("proto.encode_proto", SERVED, "tf:io.encode_proto", "`tf.io.encode_proto`."),
    _module("autograph", SERVED, ["tf:compat.v1.autograph", "tf:autograph.experimental"],
            "`tf.compat.v1.autograph` (`to_graph`, `convert`, `do_not_convert`, ...)."),
    _module("batching", SERVED, note="Its one name, listed below."),
    _name("batching.batch_function", SERVED, "tf:nondifferentiable_batch_function",
          "`tf.nondifferentiable_batch_function`, the function contrib re-exported."),
    _module("feature_column", SERVED, ["tf:compat.v1.feature_column"],
            "`tf.compat.v1.feature_column` (`sequence_categorical_column_with_*`, "
            "`sequence_numeric_column`).", seen=_FS.format("tf.contrib.feature_column.")),
    _refused("feature_column.sequence_input_layer",
             "`tf.keras.experimental.SequenceFeatures(columns)(features)` (tf_keras).",
             kind=NAME),
    _module("distributions", SERVED, ["tf:compat.v1.distributions"],
            "`tf.compat.v1.distributions` (`Normal`, `Bernoulli`, `Categorical`, `Beta`, ...): "
            "the core classes contrib re-exported.",
            "The other distributions and the bijectors: TensorFlow Probability "
            "(`tfp.distributions`).", _FS.format("tf.contrib.distributions.")),
    _module("lite", SERVED, ["tf:compat.v1.lite"],
            "`tf.compat.v1.lite` (`TFLiteConverter`, `TocoConverter`).",
            seen=_FS.format("tf.contrib.lite.")),
    _module("compiler", SERVED, note="`jit` and `xla`, below.",
            seen=_FS.format("tf.contrib.compiler.") + ", BERT-derived code"),
    _module("compiler.jit", REFUSED, note="`tf.xla.experimental.jit_scope`."),
    _name("compiler.jit.experimental_jit_scope", SERVED, "tf:xla.experimental.jit_scope",
          "`tf.xla.experimental.jit_scope`, the function contrib re-exported.",
          _FS.format("tf.contrib.compiler.")),
    _module("compiler.xla", REFUSED,
            note="`tf.function(jit_compile=True)`; `estimator_model_fn` has no TF 2 home."),
    _name("compiler.xla.compile", SERVED, "tf:compat.v1.xla.experimental.compile",
          "`tf.compat.v1.xla.experimental.compile`."),
    _module("eager", REFUSED,
            note="TF 2 is eager: `tf.function` for `defun`, `tf.Variable`, "
                 "`tf.GradientTape().gradient` for the gradient functions.",
            seen=_FS.format("tf.contrib.eager.")),
    _name("eager.GradientTape", SERVED, "tf:GradientTape", "`tf.GradientTape`."),
    _name("eager.Checkpoint", SERVED, "tf:compat.v1.train.Checkpoint",
          "`tf.compat.v1.train.Checkpoint`."),
    _name("eager.executing_eagerly", SERVED, "tf:compat.v1.executing_eagerly",
          "`tf.compat.v1.executing_eagerly`."),
    _name("eager.enable_eager_execution", SERVED, "tf:compat.v1.enable_eager_execution",
          "`tf.compat.v1.enable_eager_execution`."),
    _name("eager.py_func", SERVED, "tf:py_function", "`tf.py_function`."),
    _module("distribute", SERVED, ["tf:compat.v1.distribute"],
            "`tf.compat.v1.distribute` (contexts, `ReduceOp`, `InputContext`, ...); the "
            "strategies below.", "The other contrib.distribute names: `tf.distribute`.",
            f"{_TPU} (5 files); {_FS.format('tf.contrib.distribute.')}"),
    _name("distribute.MirroredStrategy", CHANGED, f"{_STANDINS}:MirroredStrategy",
          "TF 2's `tf.distribute.MirroredStrategy` built from contrib's arguments: "
          "`num_gpus`/`num_gpus_per_worker` pick GPUs 0..n-1 (the CPU for 0), `cross_tower_ops` "
          "is `cross_device_ops`; `auto_shard_dataset` has no effect (one worker).",
          _FS.format("tf.contrib.distribute.")),
    _name("distribute.OneDeviceStrategy", SERVED, "tf:distribute.OneDeviceStrategy",
          "`tf.distribute.OneDeviceStrategy(device)`."),
    _name("distribute.TPUStrategy", SERVED, "tf:compat.v1.distribute.experimental.TPUStrategy",
          "`tf.compat.v1.distribute.experimental.TPUStrategy` (contrib's arguments; needs a "
          "TPU).", f"{_TPU} keras_application, mnist_keras, resnet50_keras"),
    _name("distribute.initialize_tpu_system", SERVED, "tf:tpu.experimental.initialize_tpu_system",
          "`tf.tpu.experimental.initialize_tpu_system` (needs a TPU).", _TPU),
    _name("distribute.has_distribution_strategy", SERVED, "tf:compat.v1.distribute.has_strategy",
          "`tf.distribute.has_strategy`."),
    _name("distribute.get_distribution_strategy", SERVED, "tf:compat.v1.distribute.get_strategy",
          "`tf.distribute.get_strategy`."),
    _name("distribute.DistributionStrategy", SERVED, "tf:compat.v1.distribute.Strategy",
          "`tf.compat.v1.distribute.Strategy`."),
    _name("distribute.MonitoredTrainingSession", SERVED,
          "tf:compat.v1.train.MonitoredTrainingSession",
          "`tf.compat.v1.train.MonitoredTrainingSession`."),
    _refused("distribute.CollectiveAllReduceStrategy",
             "`tf.distribute.MultiWorkerMirroredStrategy` (its cluster from TF_CONFIG).",
             kind=NAME),
    _refused("distribute.ParameterServerStrategy",
             "`tf.distribute.experimental.ParameterServerStrategy(cluster_resolver)`, which "
             "this library runs (migration_guide/multi_worker.md).", kind=NAME),
    _refused("distribute.AllReduceCrossDeviceOps",
             "`tf.distribute.NcclAllReduce(num_packs)` ('nccl') or "
             "`tf.distribute.HierarchicalCopyAllReduce(num_packs)` ('hierarchical_copy').",
             f"{_TPU} (history)", NAME),
    _module("estimator", REFUSED,
            note="contrib.estimator's canned and multi-head estimators, "
                 "`replicate_model_fn` and hooks: write a model_fn and run it with "
                 "`TPUEstimator`; with `use_tpu=True` it is replicated over the strategy's "
                 "replicas.", seen=f"{_TPU} show_and_tell"),
    _name("estimator.clip_gradients_by_norm", SERVED, f"{_STANDINS}:clip_gradients_by_norm",
          "This library: the optimizer with its gradients clipped to a global norm "
          "(`tf.clip_by_global_norm`) first; its slots and update the wrapped optimizer's.",
          f"{_TPU} show_and_tell, MLCC-style scripts"),
    _module("learn", REFUSED,
            note="contrib.learn (`Experiment`, `learn_runner`, its estimators and `io`): "
                 "`tf.estimator.tpu.TPUEstimator` with `train_and_evaluate`.",
            seen=f"{_TPU} (history), tensor2tensor"),
    _name("learn.RunConfig", SERVED, f"{_STANDINS}:LearnRunConfig",
          "This library's RunConfig plus contrib.learn's three `tf_config` arguments.",
          "tensor2tensor trainer_lib"),
    _name("learn.ModeKeys", SERVED, f"{_STANDINS}:LearnModeKeys",
          "TRAIN, EVAL, INFER: the strings 'train', 'eval', 'infer' (tf.estimator's).",
          f"{_TPU} (history)"),
    _module("learn.monitors", REFUSED,
            note="contrib.learn's monitors: `tf.compat.v1.train.SessionRunHook`s."),
    _name("learn.monitors.replace_monitors_with_hooks", SERVED,
          f"{_STANDINS}:replace_monitors_with_hooks",
          "This library: the hooks as they are (a monitor in the list is refused).",
          "tensor2tensor"),
    _module("tensorboard", SERVED, note="`plugins.projector`, below.",
            seen=_FS.format("contrib.tensorboard.plugins import projector")),
    _module("tensorboard.plugins", SERVED, note="`projector`, below."),
    _name("tensorboard.plugins.projector", SERVED, "py:tensorboard.plugins.projector",
          "TensorBoard's `tensorboard.plugins.projector` module (`visualize_embeddings` takes "
          "the FileWriter or its logdir)."),
    # -- No maintained home: refused with the replacement ---------------------------------------
    _module("opt", REFUSED,
            note="No maintained library keeps contrib.opt's v1 optimizers: in a model_fn use a "
                 "`tf.compat.v1.train` optimizer or a `tf.compat.v1.train.Optimizer` subclass "
                 "of your own; TF 2 code: `tf.keras.optimizers`.",
            seen=f"{_TPU} mask_rcnn; {_FS.format('from tensorflow.contrib.opt import')}"),
    _refused("opt.LazyAdamOptimizer",
             "`tf.compat.v1.train.AdamOptimizer`: the same update for dense gradients; for "
             "sparse ones (embedding lookups) LazyAdam updated only the rows in the batch, "
             "Adam decays every row's moments, so results differ there.",
             f"{_TPU} (history), tensor2tensor", NAME),
    _refused("opt.AdamWOptimizer",
             "A `tf.compat.v1.train.AdamOptimizer` subclass of your own that first subtracts "
             "`weight_decay * var` (contrib's decoupled decay); TF 2 code: "
             "`tf.keras.optimizers.AdamW` (its decay is scaled by the learning rate).",
             _FS.format("from tensorflow.contrib.opt import"), NAME),
    _refused("opt.MomentumWOptimizer",
             "A `tf.compat.v1.train.MomentumOptimizer` subclass of your own that first "
             "subtracts `weight_decay * var` (contrib's decoupled decay).", kind=NAME),
    _refused("opt.LARSOptimizer",
             "No maintained v1 LARS: SimCLR and tensorflow/tpu ship their own "
             "(`lars_optimizer.py`, `tf.compat.v1.train.Optimizer` subclasses); copy one.",
             f"{_TPU} mask_rcnn, resnet", NAME),
    _refused("opt.NadamOptimizer", "TF 2 code: `tf.keras.optimizers.Nadam`.",
             _FS.format("from tensorflow.contrib.opt import"), NAME),
    _refused("opt.AdaMaxOptimizer", "TF 2 code: `tf.keras.optimizers.Adamax`.", kind=NAME),
    _refused("opt.MovingAverageOptimizer",
             "`tf.compat.v1.train.ExponentialMovingAverage`: `ema.apply(tf.trainable_variables("
             "))` under `tf.control_dependencies([train_op])`, as tensorflow/tpu's models do.",
             _FS.format("from tensorflow.contrib.opt import"), NAME),
    _refused("opt.ScipyOptimizerInterface",
             "`scipy.optimize.minimize` with the loss and gradients from `tf.GradientTape` "
             "(TF 2).", _FS.format("tf.contrib.opt."), NAME),
    _module("seq2seq", REFUSED,
            note=_END_OF_LIFE.format("`tfa.seq2seq`") + " `sequence_loss` with its defaults "
                 "is `reduce_sum(xent * weights) / reduce_sum(weights)`, xent from "
                 "`tf.nn.sparse_softmax_cross_entropy_with_logits`.",
            seen=_FS.format("tf.contrib.seq2seq.")),
    _refused("legacy_seq2seq", "No maintained home: keep a copy of the functions you use."),
    _refused("crf", _END_OF_LIFE.format("`tfa.text.crf_log_likelihood`, `crf_decode`"),
             _FS.format("tf.contrib.crf.")),
    _refused("cudnn_rnn",
             "`tf.keras.layers.LSTM`/`GRU` run the cuDNN kernel on a GPU by themselves; "
             "checkpoints of the opaque cuDNN parameters do not load into them.",
             _FS.format("tf.contrib.cudnn_rnn.")),
    _refused("quantize",
             "Quantization-aware training of Keras models: TensorFlow Model Optimization "
             "(`tfmot.quantization.keras.quantize_model`); TF1 graph rewriting has no home.",
             f"{_TPU} mnasnet; {_FS.format('tf.contrib.quantize.')}"),
    _module("predictor", SERVED, [f"{_LIB}.contrib.predictor:members()"],
            "This library (`contrib/predictor.py`): the SavedModel's signature run in a v1 "
            "Session of its own, fed and fetched by its keys, as TF 1.15's predictor did; "
            "`from_estimator` exports the latest checkpoint and loads that.",
            seen="google-research/lasertagger `predict_main.py`; "
                 + _FS.format("tf.contrib.predictor.")),
    _refused("predictor.from_contrib_estimator",
             "It served `tf.contrib.learn` estimators, which are refused: "
             "`tf.contrib.predictor.from_estimator(estimator, serving_input_receiver_fn)` for "
             "an Estimator, or `from_saved_model(export_dir)`.", kind=NAME),
    _refused("labeled_tensor", "No maintained home.", _FS.format("tf.contrib.labeled_tensor")),
    _refused("memory_stats",
             "`tf.config.experimental.get_memory_info(device)` ({'current', 'peak'} bytes).",
             _FS.format("tf.contrib.memory_stats.")),
    _refused("nccl",
             "`tf.distribute.NcclAllReduce` as a strategy's `cross_device_ops`, or "
             "`strategy.reduce`.", _FS.format("tf.contrib.nccl.")),
    _refused("cloud",
             "`BigtableClient`: the google-cloud-bigtable client; `configure_gcs`: set "
             "GOOGLE_APPLICATION_CREDENTIALS.", f"{_TPU} (3 files)"),
    _refused("bigtable", "The google-cloud-bigtable client."),
    _refused("tensorrt", "`tf.experimental.tensorrt.Converter` (TF-TRT, GPU builds).",
             f"{_TPU} retinanet"),
    _refused("gan",
             "TF-GAN, where contrib.gan moved: `pip install tensorflow-gan`, then "
             "`import tensorflow_gan as tfgan` (same functions).", _FS.format("tf.contrib.gan.")),
    _refused("mixed_precision",
             "`tf.compat.v1.mixed_precision.MixedPrecisionLossScaleOptimizer(opt, loss_scale)` "
             "('dynamic' or a number) instead of a loss scale manager."),
    _refused("bayesflow", "TensorFlow Probability."),
    _refused("integrate", "TensorFlow Probability (`tfp.math.ode`)."),
    _refused("checkpoint", "`tf.train.Checkpoint` with `tf.Module`/Keras objects."),
    _refused("deprecated", "`tf.compat.v1.summary.scalar`/`histogram`/`image`/`merge_all`."),
    _refused("saved_model", "tf_keras `model.save(path)` / `tf.saved_model.save`."),
    _refused("tfprof", "`tf.compat.v1.profiler`."),
    _refused("nn", "The `tf.nn` function of that name where there is one, else no home."),
    _refused("recurrent", "`tf.compat.v1.nn.dynamic_rnn`.", f"{_TPU} (history)"),
    _refused("input_pipeline", "`tf.data`."),
    _refused("model_pruning", "TensorFlow Model Optimization (`tfmot.sparsity`)."),
    _refused("boosted_trees", "TensorFlow Decision Forests."),
    _refused("tensor_forest", "TensorFlow Decision Forests."),
    _refused("timeseries", "No maintained home in TensorFlow."),
    _refused("constrained_optimization",
             "TensorFlow Constrained Optimization (`tensorflow_constrained_optimization`)."),
    *[_refused(name, "No maintained home.") for name in (
        "coder", "copy_graph", "factorization", "graph_editor", "grid_rnn", "kernel_methods",
        "linear_optimizer", "optimizer_v2", "periodic_resample", "receptive_field",
        "reduce_slice_ops", "resampler", "rpc", "solvers", "sparsemax", "specs", "staging",
        "stat_summarizer", "testing", "ffmpeg", "text", "hadoop", "kafka", "kinesis",
        "ignite", "mpi_collectives", "session_bundle")],
)

BY_PATH: dict[str, Entry] = {e.path: e for e in ENTRIES}
# Top-level modules with anything served, in the table's order.
_SERVED_TOPS = dict.fromkeys(e.path.split(".")[0] for e in ENTRIES if e.status != REFUSED)
GENERIC_HINT = (
    "tf.contrib was removed in TensorFlow 2 and no maintained library keeps this name under "
    "its legacy path (served: tf.contrib.{}). Replace it with its TF 2, tf_keras or tf-slim "
    "equivalent; see {}.".format(", ".join(_SERVED_TOPS), GUIDE))


def children(path: str) -> list[Entry]:
    """The entries directly under `path` ('' for the top level)."""
    prefix = f"{path}." if path else ""
    return [e for e in ENTRIES
            if e.path.startswith(prefix) and "." not in e.path[len(prefix):]]


def verdict(path: str) -> Entry:
    """The entry deciding `tf.contrib.<path>`: its own, else its nearest module's.

    Aliases (`keras.api.keras` is `keras`) are followed; an unknown top-level module gets a
    refused entry with `GENERIC_HINT`.
    """
    parts = path.split(".")
    if len(parts) > 4 and parts[1] == "python" and ".".join(parts[:2]) not in BY_PATH:
        parts = parts[:1] + parts[4:]  # TF 1.x's tree: `opt.python.training.<module>.<name>`.
    for i in range(len(parts), 0, -1):
        entry = BY_PATH.get(".".join(parts[:i]))
        if entry is None:
            continue
        target = entry.home[0] if entry.home else ""
        if entry.kind == NAME and target.startswith("contrib:") and i < len(parts):
            return verdict(".".join([target[len("contrib:"):]] + parts[i:]))
        return entry  # A name's own attributes are the served object's.
    return Entry(parts[0], REFUSED, MODULE, note=GENERIC_HINT)


def error_hint(path: str) -> str:
    """The hint our error for `tf.contrib.<path>` ends with."""
    entry = verdict(path)
    if entry.status == REFUSED:
        text = entry.note or GENERIC_HINT
    else:
        text = entry.hint or GENERIC_HINT
    return text if GUIDE in text else f"{text} See {GUIDE}."
