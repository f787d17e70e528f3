"""The two TensorFlow stacks a recipe runs on, and the model_fn instrumentation they share.

This module owns how each stack builds a TPUEstimator for a recipe and sees every step's loss:
`_LegacyStack` (`tf.compat.v1.estimator.tpu.TPUEstimator(use_tpu=False)` on TF 2.15, losses
fetched by a SessionRunHook) and `_ShimStack` (tpu_estimator_compat on TF 2.21, 1 or N
logical-CPU replicas, losses read from its loop driver through one seam,
`loop.driver.TrainDriver.run_steps`). It also owns what is done to the user's model_fn on both
(dropout at rate 0, the train loss and inputs put where the legacy hook can fetch them) and the
absl flags a recipe sets. TensorFlow and the shim are imported only inside functions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import sys
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from .golden import fingerprint
from .recipe import Recipe, import_target, recipe_params, resolve

_LOSS_COLLECTION = "parity_train_loss"
_INPUT_COLLECTION = "parity_train_inputs"


# ----------------------------------------------------------------------------------------
# What both stacks do to a recipe's model_fn.


@contextlib.contextmanager
def absl_flags(values: Mapping[str, Any]) -> Iterator[None]:
    """Sets absl flag values for the duration (parsing FLAGS first if nobody has)."""
    if not values:
        yield
        return
    from absl import flags

    parsed = flags.FLAGS
    if not parsed.is_parsed():
        parsed([sys.argv[0] if sys.argv else "parity"], known_only=True)
    old = {name: getattr(parsed, name) for name in values}
    try:
        for name, value in values.items():
            setattr(parsed, name, value)
        yield
    finally:
        for name, value in old.items():
            setattr(parsed, name, value)


@contextlib.contextmanager
def _zero_dropout(enabled: bool) -> Iterator[None]:
    """Runs dropout at rate 0 while model_fn builds (see `Recipe.zero_dropout`)."""
    if not enabled:
        yield
        return
    import tensorflow as tf

    v1 = tf.compat.v1
    layers_dropout, nn_dropout, v1_nn_dropout = v1.layers.dropout, tf.nn.dropout, v1.nn.dropout

    def layers(inputs, rate=0.5, noise_shape=None, seed=None, training=False, name=None):
        del rate
        return layers_dropout(inputs, 0.0, noise_shape, seed, training, name)

    def identity(x, *args, **kwargs):
        del args, kwargs
        return tf.identity(x)

    v1.layers.dropout, tf.nn.dropout, v1.nn.dropout = layers, identity, identity
    try:
        yield
    finally:
        v1.layers.dropout, tf.nn.dropout, v1.nn.dropout = layers_dropout, nn_dropout, v1_nn_dropout


def instrument_model_fn(model_fn: Callable[..., Any], zero_dropout: bool) -> Callable[..., Any]:
    """Wraps model_fn: dropout at rate 0 (if asked), and the TRAIN loss and inputs put in
    collections so a legacy SessionRunHook can fetch them every step. Adds no ops."""
    accepted = set(inspect.signature(model_fn).parameters)

    def parity_model_fn(features, labels, mode, params, config):
        kwargs = {"features": features, "labels": labels, "mode": mode, "params": params,
                  "config": config}
        kwargs = {k: v for k, v in kwargs.items() if k in accepted}
        with _zero_dropout(zero_dropout):
            spec = model_fn(**kwargs)
        if mode == "train":
            import tensorflow as tf

            graph = tf.compat.v1.get_default_graph()
            graph.add_to_collection(_LOSS_COLLECTION, spec.loss)
            # expand_composites: a SparseTensor feature counts as its three tensors.
            for leaf in tf.nest.flatten((features, labels), expand_composites=True):
                graph.add_to_collection(_INPUT_COLLECTION, leaf)
        return spec

    if "labels" not in accepted:
        def parity_model_fn_no_labels(features, mode, params, config):
            return parity_model_fn(features, None, mode, params, config)
        return parity_model_fn_no_labels
    return parity_model_fn


# ----------------------------------------------------------------------------------------
# The stacks.


class Stack:
    """How one TensorFlow stack builds a TPUEstimator and reports per-step losses."""

    name = "?"

    def prepare(self) -> None:
        """Makes `tf.compat.v1.estimator.tpu` resolve (a no-op on the legacy stack)."""

    def estimator(self, recipe: Recipe, model_fn: Callable[..., Any], model_dir: str,
                  replicas: int) -> Any:
        raise NotImplementedError

    def use_tpu(self, replicas: int) -> bool:
        return replicas > 1

    @contextlib.contextmanager
    def capture_losses(self, sink: list[float],
                       inputs: list[str] | None) -> Iterator[list[Any]]:
        """Yields the train hooks to pass; fills `sink` with every step's loss."""
        raise NotImplementedError
        yield []  # pragma: no cover


class _LegacyStack(Stack):
    """tf.compat.v1.estimator.tpu.TPUEstimator, use_tpu=False, on TF 2.15."""

    name = "legacy"

    def estimator(self, recipe: Recipe, model_fn: Callable[..., Any], model_dir: str,
                  replicas: int) -> Any:
        if replicas != 1:
            raise ValueError("The legacy stack records on the CPU with use_tpu=False: one "
                             f"replica. Received replicas={replicas}.")
        import tensorflow as tf

        tpu = tf.compat.v1.estimator.tpu
        config = tpu.RunConfig(
            model_dir=model_dir, tf_random_seed=recipe.tf_random_seed,
            save_checkpoints_steps=recipe.save_checkpoints_steps,
            tpu_config=tpu.TPUConfig(iterations_per_loop=recipe.iterations_per_loop))
        return tpu.TPUEstimator(
            model_fn=model_fn, config=config, params=recipe_params(recipe, model_dir),
            use_tpu=False, train_batch_size=recipe.train_batch_size,
            eval_batch_size=recipe.eval_batch_size,
            predict_batch_size=recipe.predict_batch_size)

    def use_tpu(self, replicas: int) -> bool:
        return False

    @contextlib.contextmanager
    def capture_losses(self, sink: list[float],
                       inputs: list[str] | None) -> Iterator[list[Any]]:
        import tensorflow as tf

        v1 = tf.compat.v1

        class LossHook(v1.train.SessionRunHook):
            """Fetches the loss (and a fingerprint of the batch) with every train step."""

            def begin(self) -> None:
                graph = v1.get_default_graph()
                self._fetches = {"loss": graph.get_collection(_LOSS_COLLECTION)[-1],
                                 "inputs": graph.get_collection(_INPUT_COLLECTION)}

            def before_run(self, run_context: Any) -> Any:
                return v1.train.SessionRunArgs(self._fetches)

            def after_run(self, run_context: Any, run_values: Any) -> None:
                sink.append(float(np.float32(run_values.results["loss"])))
                if inputs is not None:
                    inputs.append(fingerprint(run_values.results["inputs"]))

        yield [LossHook()]


class _ShimStack(Stack):
    """tpu_estimator_compat on TF 2.21: 1 replica (use_tpu=False) or N (use_tpu=True)."""

    name = "shim"

    def prepare(self) -> None:
        install_estimator_aliases()

    def estimator(self, recipe: Recipe, model_fn: Callable[..., Any], model_dir: str,
                  replicas: int) -> Any:
        import tensorflow as tf

        import tpu_estimator_compat as tec
        from tpu_estimator_compat.session import strategy as strategy_lib

        strategy = None
        if replicas > 1:
            cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
            if len(cpus) < replicas:
                raise RuntimeError(
                    f"replicas={replicas} needs {replicas} logical CPUs, found {len(cpus)}. "
                    "Call `split_cpu(replicas)` before TensorFlow initialises its devices.")
            strategy = strategy_lib.mirrored_over(cpus[:replicas])
        config = tec.RunConfig(
            model_dir=model_dir, tf_random_seed=recipe.tf_random_seed,
            save_checkpoints_steps=recipe.save_checkpoints_steps,
            train_distribute=strategy, eval_distribute=strategy,
            tpu_config=tec.TPUConfig(iterations_per_loop=recipe.iterations_per_loop,
                                     num_shards=replicas))
        return tec.TPUEstimator(
            model_fn=model_fn, config=config, params=recipe_params(recipe, model_dir),
            use_tpu=self.use_tpu(replicas), train_batch_size=recipe.train_batch_size,
            eval_batch_size=recipe.eval_batch_size,
            predict_batch_size=recipe.predict_batch_size)

    @contextlib.contextmanager
    def capture_losses(self, sink: list[float],
                       inputs: list[str] | None) -> Iterator[list[Any]]:
        with _capture_shim_losses(sink):
            yield []


@contextlib.contextmanager
def _capture_shim_losses(sink: list[float]) -> Iterator[None]:
    """Collects `LoopResult.losses` (every step of every loop) while train() runs.

    The shim computes each step's global loss inside its compiled loop and hands the array to
    its loop driver, but `train()` has no public way to get it out (legacy hooks would run
    once per loop, not per step). Until one exists (see migration_guide/parity.md), this wraps
    the driver's public `run_steps` field for the duration of `TrainDriver.run`.
    """
    from tpu_estimator_compat.loop import driver as loop_lib

    driver_cls = loop_lib.TrainDriver
    if "run_steps" not in {f.name for f in dataclasses.fields(driver_cls)}:
        raise RuntimeError("tpu_estimator_compat.loop.driver.TrainDriver has no `run_steps` "
                           "field any more; update _capture_shim_losses (tpu_estimator_compat/parity/"
                           "stacks.py) to the new loop API.")
    original = driver_cls.run

    def run(self: Any, **kwargs: Any) -> Any:
        inner = self.run_steps

        def capture(n: int) -> Any:
            result = inner(n)
            sink.extend(float(x) for x in np.asarray(result.losses, np.float32)[:result.steps_run])
            return result

        self.run_steps = capture
        try:
            return original(self, **kwargs)
        finally:
            self.run_steps = inner

    driver_cls.run = run
    try:
        yield
    finally:
        driver_cls.run = original


def install_estimator_aliases() -> None:
    """Makes `tf.compat.v1.estimator.tpu.*` resolve to the shim, for unchanged legacy code."""
    import tpu_estimator_compat as tec

    tec.install_aliases()


def current_stack() -> Stack:
    """The stack of this interpreter: legacy on TF < 2.16 (tensorflow-estimator), else the shim."""
    import tensorflow as tf

    major_minor = tuple(int(x) for x in tf.__version__.split(".")[:2])
    return _LegacyStack() if major_minor < (2, 16) else _ShimStack()


def split_cpu(replicas: int) -> None:
    """Splits the host CPU into `replicas` logical devices (before TF initialises them)."""
    import tensorflow as tf

    cpus = tf.config.list_physical_devices("CPU")
    if len(tf.config.get_logical_device_configuration(cpus[0]) or []) >= replicas:
        return
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration()] * replicas)


class _CheckpointSteps:
    """A CheckpointSaverListener (duck-typed on both stacks) recording saved global steps."""

    def __init__(self) -> None:
        self.steps: list[int] = []

    def begin(self) -> None:
        pass

    def before_save(self, session: Any, global_step_value: int) -> None:
        pass

    def after_save(self, session: Any, global_step_value: int) -> bool:
        self.steps.append(int(global_step_value))
        return False

    def end(self, session: Any, global_step_value: int) -> None:
        pass


def saving_listener(stack: Stack) -> Any:
    """A saving listener that records checkpoint steps and that `stack` accepts."""
    import tensorflow as tf

    recorder = _CheckpointSteps()
    if stack.name == "legacy":
        # Legacy type-checks listeners; subclass its base with the recorder's methods.
        base = tf.compat.v1.train.CheckpointSaverListener
        listener_cls = type("CheckpointSteps", (base,), {
            k: getattr(_CheckpointSteps, k)
            for k in ("__init__", "begin", "before_save", "after_save", "end")})
        return listener_cls()
    return recorder


@dataclasses.dataclass
class LoadedRecipe:
    """A recipe with its model module imported and its model_fn instrumented."""

    recipe: Recipe
    module: Any
    model_fn: Callable[..., Any]

    def fn(self, expression: str) -> Callable[..., Any]:
        return resolve(self.module, expression)


def load_on_stack(recipe: Recipe, stack: Stack) -> LoadedRecipe:
    """Imports the recipe's module (after `stack.prepare()`, so legacy names resolve)."""
    stack.prepare()
    module = import_target(recipe.module)
    model_fn = instrument_model_fn(resolve(module, recipe.model_fn), recipe.zero_dropout)
    return LoadedRecipe(recipe, module, model_fn)


def flag_values(recipe: Recipe, stack: Stack, replicas: int) -> dict[str, Any]:
    """The recipe's absl flags, its `use_tpu_flag` set as `stack` runs `replicas` replicas."""
    values = dict(recipe.flags)
    if recipe.use_tpu_flag:
        values[recipe.use_tpu_flag] = stack.use_tpu(replicas)
    return values
