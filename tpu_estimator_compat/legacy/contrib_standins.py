"""The few `tf.contrib` names this library implements itself, over TensorFlow's own parts.

    from tensorflow.contrib import estimator as contrib_estimator, distribute
    optimizer = contrib_estimator.clip_gradients_by_norm(optimizer, 5.0)
    config = RunConfig(train_distribute=distribute.MirroredStrategy(num_gpus=0))
    dataset.apply(tf.contrib.data.batch_and_drop_remainder(32))

`contrib_map.py` decides, for every `tf.contrib` path, what serves it; where no maintained
library keeps a name real code uses, and TF 1.15's version was a thin layer over what
TensorFlow still has, the layer is here: a legacy constructor in front of a TensorFlow class
(`MirroredStrategy`, `learn.RunConfig`, `AsyncCheckpointSaverHook`), a dataset transformation
TensorFlow now spells as an argument, a gradient transform, and the TensorFlow functions
contrib.framework re-exported. Larger stand-ins have modules of their own
(`contrib_image.py`, `contrib_lookup.py`, `contrib_summary.py`, `hparams.py`). It knows
nothing about how the namespaces are built or imported (`contrib_namespace.py`).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import tensorflow as tf

from tpu_estimator_compat._tf import private as _tf_private
from tpu_estimator_compat import config as config_lib
from tpu_estimator_compat.legacy import contrib_map
from tpu_estimator_compat.legacy import namespaces


def framework_members() -> dict[str, Any]:
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


# ---------------------------------------------------------------------------------------------
# contrib.learn remnants
# ---------------------------------------------------------------------------------------------


class LearnRunConfig(config_lib.RunConfig):
    """`tf.contrib.learn.RunConfig`: TF 1.15's was the core RunConfig plus three arguments for
    the `ConfigProto` it built (its `tf_config`). tensor2tensor reads it whenever
    `tensorflow.contrib` imports (`trainer_lib.create_run_config`)."""

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


LearnRunConfig.__name__ = LearnRunConfig.__qualname__ = "RunConfig"
LearnRunConfig.__module__ = "tensorflow.contrib.learn"


class LearnModeKeys:
    """`tf.contrib.learn.ModeKeys`: the mode strings, which `tf.estimator.ModeKeys` kept
    (`INFER` is `ModeKeys.PREDICT`, 'infer')."""

    TRAIN = "train"
    EVAL = "eval"
    INFER = "infer"


LearnModeKeys.__name__ = LearnModeKeys.__qualname__ = "ModeKeys"
LearnModeKeys.__module__ = "tensorflow.contrib.learn"


def replace_monitors_with_hooks(monitors_or_hooks: Any, estimator: Any) -> list:
    """`tf.contrib.learn.monitors.replace_monitors_with_hooks`: the SessionRunHooks as they are.
    contrib.learn's monitors are gone with it; one in the list fails by name."""
    del estimator  # Legacy used it only to convert monitors.

    hooks = list(monitors_or_hooks or [])
    for hook in hooks:
        if not isinstance(hook, tf.compat.v1.train.SessionRunHook):
            raise namespaces.LegacySymbolError(
                f"`tf.contrib.learn.monitors` ({type(hook).__name__}) is not available on "
                f"TensorFlow 2 through tpu_estimator_compat. "
                f"{contrib_map.error_hint('learn.monitors')}")
    return hooks


# ---------------------------------------------------------------------------------------------
# contrib.estimator.clip_gradients_by_norm, contrib.tpu.AsyncCheckpointSaverHook
# ---------------------------------------------------------------------------------------------


class _TransformGradients(tf.compat.v1.train.Optimizer):
    """An optimizer that transforms the (gradient, variable) pairs of another before applying.

    Everything but `compute_gradients` is the wrapped optimizer's, so its slots, their names
    and its checkpointed state are those of the optimizer the model_fn built. `applies_through`
    names it, so `CrossShardOptimizer` knows whose update runs (cross_shard.py).
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


# ---------------------------------------------------------------------------------------------
# contrib.data, contrib.distribute
# ---------------------------------------------------------------------------------------------


def batch_and_drop_remainder(batch_size: Any) -> Callable[[tf.data.Dataset], tf.data.Dataset]:
    """`tf.contrib.data.batch_and_drop_remainder`: for `Dataset.apply`, batches of exactly
    `batch_size` (the last partial one dropped), which TensorFlow spells
    `batch(batch_size, drop_remainder=True)`; TF 1.15's was that call."""
    return lambda dataset: dataset.batch(batch_size, drop_remainder=True)


def padded_batch_and_drop_remainder(batch_size: Any, padded_shapes: Any,
                                    padding_values: Any = None
                                    ) -> Callable[[tf.data.Dataset], tf.data.Dataset]:
    """`tf.contrib.data.padded_batch_and_drop_remainder`: `padded_batch(...,
    drop_remainder=True)` for `Dataset.apply`, as TF 1.15's."""
    return lambda dataset: dataset.padded_batch(batch_size, padded_shapes, padding_values,
                                                drop_remainder=True)


class MirroredStrategy(tf.distribute.MirroredStrategy):
    """`tf.contrib.distribute.MirroredStrategy`: TF 2's MirroredStrategy from contrib's
    arguments.

    Estimator scripts built it as `RunConfig(train_distribute=tf.contrib.distribute.
    MirroredStrategy(num_gpus=n))`. TF 1.15's picked GPUs 0..n-1 for `num_gpus` (or its
    other name `num_gpus_per_worker`), the CPU for 0, and every local GPU when given neither
    nor `devices`, as TF 2's does; `cross_tower_ops` was the old name of `cross_device_ops`.
    `auto_shard_dataset` chose how a multi-worker input was split: one process here has no
    other worker to split with, so it is taken and has no effect.
    """

    def __init__(self, devices: Sequence[str] | None = None, num_gpus: int | None = None,
                 num_gpus_per_worker: int | None = None, cross_device_ops: Any = None,
                 auto_shard_dataset: bool = False, cross_tower_ops: Any = None) -> None:
        del auto_shard_dataset  # One worker: nothing to shard between workers.
        if cross_device_ops is not None and cross_tower_ops is not None:
            raise ValueError("Pass `cross_device_ops` or its old name `cross_tower_ops`, not "
                             "both.")
        if num_gpus is not None and num_gpus_per_worker is not None:
            raise ValueError("You cannot specify both `num_gpus` and `num_gpus_per_worker`.")
        count = num_gpus if num_gpus is not None else num_gpus_per_worker
        if devices is not None and count is not None:
            raise ValueError(f"Pass `devices` ({devices!r}) or `num_gpus` ({count}), not both.")
        if count is not None:
            devices = ([f"/device:GPU:{i}" for i in range(count)] if count
                       else ["/device:CPU:0"])
        super().__init__(devices=devices, cross_device_ops=cross_device_ops or cross_tower_ops)
