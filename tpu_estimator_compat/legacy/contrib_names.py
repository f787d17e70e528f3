"""The legacy `tf.contrib` namespace: the submodules TPU models used, built on first use.

`build_contrib_namespace()` serves `tf.contrib.tpu`, `cluster_resolver`, `layers`,
`framework`, `metrics`, `slim`, `training`, `summary`, `rnn`, `image`, `lookup`, ... from this
library (its TPUEstimator, the stand-ins of `contrib/`), TensorFlow's v1 API and tf-slim;
a submodule or name it does not serve fails on use with `CONTRIB_HINT`. `legacy/aliases.py`
installs it; the import hook serves it under `tensorflow.contrib.*` module paths.
"""

from __future__ import annotations

import importlib
import types
from typing import Any, Callable, Iterable, Mapping

import tensorflow as tf

from tpu_estimator_compat import config as config_lib
from tpu_estimator_compat._tf import private as _tf_private
from tpu_estimator_compat.cluster import tpu_resolver
from tpu_estimator_compat.legacy import estimator_names
from tpu_estimator_compat.legacy.namespaces import AliasNamespace, LegacySymbolError

_CONTRIB_MODULE = "tensorflow.contrib"
_GUIDE = "migration_guide/launcher.md"

_CONTRIB_SERVED = ("tpu", "cluster_resolver", "layers", "framework", "metrics", "data", "slim",
                   "training", "summary", "rnn", "stateless", "util", "image", "lookup",
                   "learn.RunConfig", "estimator.clip_gradients_by_norm")
CONTRIB_HINT = (
    "tf.contrib was removed in TensorFlow 2 and no maintained library keeps this symbol under "
    "its legacy name (served: tf.contrib.{}). Replace it in your code with its TF2 or tf-slim "
    f"equivalent; see {_GUIDE}.".format(", ".join(_CONTRIB_SERVED)))


def _tf_slim() -> Any:
    try:
        return importlib.import_module("tf_slim")
    except ImportError as e:
        raise LegacySymbolError(
            "tf.contrib.layers/framework/metrics/slim are served by tf-slim, which is not "
            f"installed ({e}). Run `pip install tf-slim==1.1.0`.") from e


def _tf_slim_module(name: str) -> Callable[[], Any]:
    def load() -> Any:
        _tf_slim()  # Fails with the install command when tf-slim is missing.
        return importlib.import_module(f"tf_slim.{name}")

    return load


# contrib.training's train-loop and evaluation functions, which tf-slim keeps.
_SLIM_TRAINING = ("add_gradients_summaries", "clip_gradient_norms", "clip_gradient_norms_fn",
                  "create_train_op", "multiply_gradients", "train")
_SLIM_EVALUATION = ("checkpoints_iterator", "evaluate_once", "evaluate_repeatedly",
                    "get_or_create_eval_step", "StopAfterNEvalsHook", "SummaryAtEndHook",
                    "wait_for_new_checkpoint")


def _tf_slim_names(name: str, names: Iterable[str]) -> Callable[[], Any]:
    """Only `names` of `tf_slim.<name>`, loaded on first use."""
    loaded: list[Any] = []

    def load() -> Any:
        if not loaded:
            module = _tf_slim_module(name)()
            loaded.append(types.SimpleNamespace(**{n: getattr(module, n) for n in names}))
        return loaded[0]

    return load


# tf.contrib.rnn's cells and functions that TensorFlow keeps in `tf.compat.v1.nn`: TF 1.15's
# contrib.rnn re-exported these same classes (its contrib-only cells, LSTMBlockCell,
# LayerNormBasicLSTMCell, AttentionCellWrapper, ..., fail on use by name).
_RNN_CELLS = ("BasicLSTMCell", "BasicRNNCell", "DeviceWrapper", "DropoutWrapper", "GRUCell",
              "LSTMCell", "LSTMStateTuple", "MultiRNNCell", "RNNCell", "ResidualWrapper")
_RNN_FUNCTIONS = ("static_rnn", "static_bidirectional_rnn", "static_state_saving_rnn")


def _rnn_members() -> dict[str, Any]:
    v1 = tf.compat.v1
    members = {name: getattr(v1.nn.rnn_cell, name) for name in _RNN_CELLS}
    members.update({name: getattr(v1.nn, name) for name in _RNN_FUNCTIONS})
    return members


def _framework_members() -> dict[str, Any]:
    """TF 1.15's contrib.framework names that tf-slim does not keep (tf-slim serves its
    variables, arg_scope and checkpoint-assignment functions): the same TensorFlow functions
    under their TF2 names (`sort`, `argsort`, the checkpoint readers, ...) and the deprecation
    decorators and name-scope helpers TensorFlow keeps privately."""
    v1 = tf.compat.v1
    members = {"nest": tf.nest, "sort": tf.sort, "argsort": tf.argsort,
               "is_tensor": tf.is_tensor, "broadcast_to": tf.broadcast_to,
               "convert_to_tensor_or_sparse_tensor": v1.convert_to_tensor_or_sparse_tensor,
               "load_checkpoint": tf.train.load_checkpoint,
               "list_variables": tf.train.list_variables,
               "load_variable": tf.train.load_variable,
               "init_from_checkpoint": v1.train.init_from_checkpoint}
    members.update(_tf_private.contrib_framework_names())
    return members


def _util_members() -> dict[str, Any]:
    """TF 1.15's contrib.util: TensorFlow's tensor_util functions, public in TF2 under these
    names (`constant_value` is `tf.get_static_value`)."""
    return {"constant_value": tf.get_static_value,
            "make_tensor_proto": tf.make_tensor_proto,
            "make_ndarray": tf.make_ndarray}


def _learn_run_config_class() -> type:
    """`tf.contrib.learn.RunConfig`: TF 1.15's was the core RunConfig plus three arguments for
    the `ConfigProto` it built (its `tf_config`); the rest of contrib.learn (Experiment,
    learn_runner, its estimators) fails on use by name. tensor2tensor reads it whenever
    `tensorflow.contrib` imports (`trainer_lib.create_run_config`)."""
    class RunConfig(config_lib.RunConfig):
        __doc__ = _learn_run_config_class.__doc__

        def __init__(self, master: str | None = None, num_cores: int = 0,
                     log_device_placement: bool = False, gpu_memory_fraction: float = 1,
                     **kwargs: Any) -> None:
            super().__init__(master=master, **kwargs)
            self._learn_tf_config = tf.compat.v1.ConfigProto(
                log_device_placement=log_device_placement,
                inter_op_parallelism_threads=num_cores,
                intra_op_parallelism_threads=num_cores,
                gpu_options=tf.compat.v1.GPUOptions(
                    per_process_gpu_memory_fraction=gpu_memory_fraction))

        @property
        def tf_config(self) -> Any:
            return self._learn_tf_config

    RunConfig.__module__ = f"{_CONTRIB_MODULE}.learn"
    return RunConfig


def replace_monitors_with_hooks(monitors_or_hooks: Any, estimator: Any) -> list:
    """`tf.contrib.learn.monitors.replace_monitors_with_hooks`: the SessionRunHooks as they are.
    contrib.learn's monitors are gone with it; one in the list fails by name."""
    del estimator  # Legacy used it only to convert monitors.
    hooks = list(monitors_or_hooks or [])
    for hook in hooks:
        if not isinstance(hook, tf.compat.v1.train.SessionRunHook):
            raise LegacySymbolError(
                f"`tf.contrib.learn.monitors` ({type(hook).__name__}) is not available on "
                f"TensorFlow 2 through tpu_estimator_compat. {CONTRIB_HINT}")
    return hooks


def _learn_members() -> dict[str, Any]:
    monitors = AliasNamespace(f"{_CONTRIB_MODULE}.learn.monitors", "tf.contrib.learn.monitors",
                              "Legacy tf.contrib.learn.monitors.",
                              members={"replace_monitors_with_hooks":
                                       replace_monitors_with_hooks},
                              hint=CONTRIB_HINT)
    return {"RunConfig": _learn_run_config_class(), "monitors": monitors}


def _stateless_members() -> dict[str, Any]:
    """TF 1.15's contrib.stateless: the same `stateless_random_ops` functions TensorFlow keeps
    (same positional arguments; TensorFlow added a keyword-only-in-practice `alg` at the end)."""
    return {"stateless_random_normal": tf.random.stateless_normal,
            "stateless_random_uniform": tf.random.stateless_uniform,
            "stateless_truncated_normal": tf.random.stateless_truncated_normal,
            "stateless_multinomial": tf.compat.v1.random.stateless_multinomial}


class _TransformGradients(tf.compat.v1.train.Optimizer):
    """An optimizer that transforms the (gradient, variable) pairs of another before applying.

    Everything but `compute_gradients` is the wrapped optimizer's, so its slots, their names
    and its checkpointed state are those of the optimizer the model_fn built. `applies_through`
    names it, so `CrossShardOptimizer` knows whose update runs (step/cross_shard.py).
    """

    def __init__(self, optimizer: Any, transform: Callable[[list], list], name: str) -> None:
        super().__init__(use_locking=False, name=name)
        self._optimizer = optimizer
        self._transform = transform
        self.applies_through = optimizer

    def compute_gradients(self, *args: Any, **kwargs: Any) -> list:
        return self._transform(self._optimizer.compute_gradients(*args, **kwargs))

    def apply_gradients(self, grads_and_vars: Any, global_step: Any = None,
                        name: str | None = None) -> Any:
        return self._optimizer.apply_gradients(grads_and_vars, global_step, name)

    def get_slot(self, *args: Any, **kwargs: Any) -> Any:
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args: Any, **kwargs: Any) -> Any:
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self) -> list:
        return self._optimizer.variables()


def clip_gradients_by_norm(optimizer: Any, clip_norm: float) -> Any:
    """`tf.contrib.estimator.clip_gradients_by_norm`: `optimizer`, its gradients clipped to a
    global norm of `clip_norm` (`tf.clip_by_global_norm`, None gradients left out) first."""

    def clip(grads_and_vars: list) -> list:
        pairs = list(grads_and_vars)
        grads, variables = zip(*pairs) if pairs else ((), ())
        clipped, _ = tf.clip_by_global_norm(list(grads), clip_norm)
        return list(zip(clipped, variables))

    return _TransformGradients(optimizer, clip, name="ClipByNorm" + optimizer.get_name())


class AsyncCheckpointSaverHook(tf.compat.v1.train.CheckpointSaverHook):
    """`tf.contrib.tpu.AsyncCheckpointSaverHook`: legacy's `CheckpointSaverHook` that wrote
    its checkpoints on a background thread.

    Legacy's class subclassed `CheckpointSaverHook` with the same arguments, and the estimator
    took it as one: among the training hooks it replaced the default saver (its directory,
    `save_steps`/`save_secs`, listeners), saving the starting state, every `save_steps`
    steps and at the end. That is how the shim takes it too (see migration_guide/hooks.md);
    the checkpoints are the same, written when due rather than on a thread of the hook's own.
    TPU scripts pass it unconditionally (google/compare_gan `runner_lib.py`, with the
    estimator's own `save_checkpoints_steps` set out of reach) or behind a flag
    (tensorflow/tpu efficientnet `--use_async_checkpointing`).
    """

    def __init__(self, checkpoint_dir: str, save_secs: int | None = None,
                 save_steps: int | None = None, saver: Any = None,
                 checkpoint_basename: str = "model.ckpt", scaffold: Any = None,
                 listeners: Any = None) -> None:
        super().__init__(checkpoint_dir, save_secs=save_secs, save_steps=save_steps,
                         saver=saver, checkpoint_basename=checkpoint_basename,
                         scaffold=scaffold, listeners=listeners)


class _ContribNamespace(AliasNamespace):
    """`tf.contrib`: served submodules are built on first use; others fail on use, by name."""

    def __init__(self, factories: Mapping[str, Callable[[], Any]]) -> None:
        super().__init__(_CONTRIB_MODULE, "tf.contrib", "Legacy tf.contrib names.",
                         hint=CONTRIB_HINT)
        self.__dict__["_contrib_factories"] = dict(factories)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")
        factory = self._contrib_factories.get(attr)
        if factory is None:
            # Unknown submodule: fail where a symbol of it is used, naming that symbol.
            value = AliasNamespace(f"{_CONTRIB_MODULE}.{attr}", f"tf.contrib.{attr}",
                                   "Not served.", hint=CONTRIB_HINT)
        else:
            value = factory()
        self.__dict__[attr] = value
        return value

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._contrib_factories))


def build_contrib_namespace() -> AliasNamespace:
    """Builds `tf.contrib` from this library, TensorFlow's v1 API and tf-slim."""
    from tpu_estimator_compat.contrib import image as contrib_image
    from tpu_estimator_compat.contrib import lookup as contrib_lookup
    from tpu_estimator_compat.contrib import summary as contrib_summary
    from tpu_estimator_compat.contrib import hparams as hparams_lib

    v1 = tf.compat.v1

    def sub(name: str, sources: Iterable[Callable[[], Any]],
            members: Mapping[str, Any] | None = None) -> Callable[[], AliasNamespace]:
        return lambda: AliasNamespace(f"{_CONTRIB_MODULE}.{name}", f"tf.contrib.{name}",
                                      f"Legacy tf.contrib.{name}.", members=members,
                                      sources=sources, hint=CONTRIB_HINT)

    factories: dict[str, Callable[[], Any]] = {
        "tpu": sub("tpu", [lambda: v1.tpu],
                   {"AsyncCheckpointSaverHook": AsyncCheckpointSaverHook,
                    **estimator_names.tpu_estimator_members()}),
        "cluster_resolver": sub("cluster_resolver", [lambda: v1.distribute.cluster_resolver],
                                {"TPUClusterResolver": tpu_resolver.TPUClusterResolver}),
        "layers": sub("layers", [_tf_slim_module("layers"), _tf_slim]),
        "framework": sub("framework", [_tf_slim], _framework_members()),
        "util": lambda: sub("util", [], _util_members())(),
        "learn": lambda: sub("learn", [], _learn_members())(),
        "metrics": sub("metrics", [_tf_slim_module("metrics")]),
        "data": sub("data", [lambda: v1.data.experimental]),
        # HParams is this library's; tf-slim's `training` and `training.evaluation` are
        # copies of contrib.training's train loop and checkpoint-evaluation functions. Only
        # those names: the modules' own imports (`evaluation`, TF's) must not shadow the
        # legacy submodule paths under `tensorflow.contrib.training.python.training`.
        "training": sub("training", [_tf_slim_names("training.training", _SLIM_TRAINING),
                                     _tf_slim_names("training.evaluation", _SLIM_EVALUATION)],
                        {"HParams": hparams_lib.HParams,
                         "parse_values": hparams_lib.parse_values}),
        "slim": _tf_slim,
        # TF 1.x TPU host_calls write summaries with it (contrib/summary.py).
        "summary": lambda: sub("summary", [], contrib_summary.members())(),
        "rnn": lambda: sub("rnn", [], _rnn_members())(),
        "stateless": lambda: sub("stateless", [], _stateless_members())(),
        # Its projective transforms (RandAugment/AutoAugment's rotate, translate, shear) over
        # the kernel TensorFlow keeps (contrib/image.py); the rest fails on use by name.
        "image": lambda: sub("image", [], contrib_image.members())(),
        # TF 1.x's vocabulary tables, which TensorFlow keeps (contrib/lookup.py).
        "lookup": lambda: sub("lookup", [], contrib_lookup.members())(),
        # Only clip_gradients_by_norm: the rest of contrib.estimator built canned estimators,
        # multi-head models and replicated model_fns, which fail on use by name.
        "estimator": sub("estimator", [], {"clip_gradients_by_norm": clip_gradients_by_norm}),
    }
    return _ContribNamespace(factories)
