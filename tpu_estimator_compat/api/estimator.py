"""The `Estimator` and `TPUEstimator` facades: legacy constructors, errors, mode entry points.

`Estimator` is legacy's plain estimator; `TPUEstimator` its subclass, as in legacy, differing
in its constructor (batch sizes, `use_tpu`, embedding) and in how model_fn and input_fn are
called (`params['batch_size']`, `TPUEstimatorSpec`). Both run on the one engine below.
Each constructor validates its arguments the way legacy did; each public method
validates its own, picks the runtime (strategy, variables: `session/strategy_state.py`,
`session/strategy.py`) and hands the run to its session, with the estimator's settings
(`session/settings.py`): `session/train_session.py` for train, `session/inference.py` for
evaluate and predict (one call each), `export/saved_model.py` for export. It holds no loop
logic, no variable logic and no file formats of its own.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import os
import signal
from typing import Any, Callable, Iterator, Sequence

import tensorflow as tf

from tpu_estimator_compat._tf import random_streams
from tpu_estimator_compat.checkpoint import checkpoints as checkpoints_lib
from tpu_estimator_compat.cluster import workers as cluster_lib
from tpu_estimator_compat import config as config_lib
from tpu_estimator_compat.step import cross_shard
from tpu_estimator_compat.v1_state import eager_scope
from tpu_estimator_compat.embedding import engine as embedding_lib
from tpu_estimator_compat.api import estimator_module
from tpu_estimator_compat.embedding import config as embedding_config_lib
from tpu_estimator_compat.export import saved_model as export_lib
from tpu_estimator_compat.loop import hooks as hooks_lib
from tpu_estimator_compat.session import inference
from tpu_estimator_compat.session import live_eval
from tpu_estimator_compat.inputs import context as context_lib
from tpu_estimator_compat.inputs import pad as pad_lib
from tpu_estimator_compat.v1_state import keras_env
from tpu_estimator_compat import log as logging
from tpu_estimator_compat.step import optimizer_apply
from tpu_estimator_compat.session import parameter_servers
from tpu_estimator_compat.cluster import preemption
from tpu_estimator_compat.step import replica_step
from tpu_estimator_compat.session import settings as settings_lib
from tpu_estimator_compat.session import strategy_state as runtime_lib
from tpu_estimator_compat.checkpoint import safety
from tpu_estimator_compat.checkpoint import warm_start as warm_start_lib
from tpu_estimator_compat import spec as spec_lib
from tpu_estimator_compat import tpu_config as tpu_config_lib
from tpu_estimator_compat.session import strategy as strategy_lib
from tpu_estimator_compat.summary import summaries
from tpu_estimator_compat.v1_state import tf1_names
from tpu_estimator_compat.contrib import tf_slim as tf_slim_support
from tpu_estimator_compat.session import train_session
from tpu_estimator_compat.contrib import v1_file_writer

ModeKeys = spec_lib.ModeKeys
_RESERVED_PARAMS_KEYS = (context_lib.BATCH_SIZE_KEY, context_lib.CONTEXT_KEY)


_PS_STRATEGIES = (tf.distribute.experimental.ParameterServerStrategy,
                  tf.compat.v1.distribute.experimental.ParameterServerStrategy)

# Legacy `model_fn.py`'s `_VALID_MODEL_FN_ARGS`.
_VALID_MODEL_FN_ARGS = frozenset({"features", "labels", "mode", "params", "self", "config"})


def _check_model_fn_signature(model_fn: Callable[..., Any], params: Any) -> None:
    """Raises legacy Estimator's errors for a model_fn its arguments cannot be matched to."""
    args = replica_step.model_fn_args(model_fn)
    if isinstance(model_fn, functools.partial):  # Bound arguments are not model_fn's own.
        positional = list(inspect.signature(model_fn.func).parameters)[:len(model_fn.args)]
        args -= set(positional) | set(model_fn.keywords)
    if "features" not in args:
        raise ValueError(
            f"model_fn ({model_fn}) must include features argument. Define it as "
            "`def model_fn(features, labels, mode, params, config):` or any subset that "
            "includes `features`.")
    if params is not None and "params" not in args:
        raise ValueError(
            f"model_fn ({model_fn}) does not include params argument, but params ({params}) "
            "is passed to Estimator. Add a `params` argument or pass no params.")
    if params is None and "params" in args:
        logging.warning("Estimator's model_fn (%s) includes params argument, but params are "
                        "not passed to Estimator.", model_fn)
    unexpected = sorted(args - _VALID_MODEL_FN_ARGS)
    if unexpected:
        raise ValueError(
            f"model_fn ({model_fn}) has following not expected args: {unexpected}. Its "
            f"arguments can only be among {sorted(_VALID_MODEL_FN_ARGS - {'self'})}.")


def _check_positive_int(value: Any, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(
            f"`{name}` must be a positive integer; received {value!r}. (Legacy: {name} must "
            f"be positive integer.)")


class Estimator:
    """Legacy `tf.estimator.Estimator`: an r1 model_fn, trained, evaluated, predicted and
    exported on the one engine TPUEstimator runs on (as `use_tpu=False`).

    model_fn takes any subset of `features, labels, mode, params, config` (`features`
    required); input_fn any subset of `params, config, mode, input_context`. `params` reach
    them as given, with no `batch_size`: input_fn's batches are the batches, per replica
    under `RunConfig(train_distribute=...)` as legacy's distributed Estimator fed them.
    Training runs one step per loop, as legacy ran one step per `session.run`.
    """

    def __init__(self, model_fn: Callable[..., Any], model_dir: str | None = None,
                 config: config_lib.RunConfig | None = None, params: dict[str, Any] | None = None,
                 warm_start_from: Any = None) -> None:
        keras_env.check_legacy_keras()
        # Legacy's order: the config's checks, then model_fn's.
        config = estimator_module.maybe_overwrite_model_dir_and_session_config(
            config, model_dir)
        if model_fn is None:
            raise ValueError("model_fn must be provided to Estimator.")
        _check_model_fn_signature(model_fn, params)
        self._setup(model_fn=model_fn, model_dir=config.model_dir, config=config, params=params,
                    use_tpu=False, batch_sizes=(None, None, None), eval_on_tpu=False,
                    warm_start_from=warm_start_from, batch_axis=None, plain=True)

    def _setup(self, *, model_fn: Callable[..., Any], model_dir: str | None,
               config: config_lib.RunConfig, params: Any, use_tpu: bool,
               batch_sizes: tuple[int | None, int | None, int | None], eval_on_tpu: bool,
               warm_start_from: Any, batch_axis: Any, embedding: Any = None,
               plain: bool = False) -> None:
        """The state both estimators keep, and the TF patches their runs need."""
        _check_members_not_overridden(self)
        self._embedding = embedding
        self._plain = plain
        self._config = estimator_module.maybe_overwrite_model_dir_and_session_config(
            config, model_dir)
        self._model_dir = self._config.model_dir
        self._session_config = self._config.session_config
        # Kept as given (a deep copy), as legacy: a dict subclass or HParams reaches
        # model_fn and input_fn as that type.
        self._params = context_lib.copy_params(params)
        self._model_fn = model_fn
        self._use_tpu = bool(use_tpu)
        self._batch_sizes = dict(zip((ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT),
                                     batch_sizes))
        self._eval_on_tpu = eval_on_tpu
        # Legacy's name: `tf.estimator.add_metrics` passes it on.
        self._warm_start_settings = warm_start_lib.default_warm_start_settings(warm_start_from)
        self._batch_axis = pad_lib.check_batch_axis(batch_axis)
        self._runtimes: dict[int, runtime_lib.Runtime] = {}
        self._summary_writers = summaries.ModelFnWriters()  # Those model_fn creates.
        cross_shard.install()
        optimizer_apply.install()
        tf_slim_support.install()  # model_fns call tf-slim (contrib.layers) directly too.
        tf1_names.install()
        v1_file_writer.install()  # Host eval loops write Summary protos with eager on.
        if logging.legacy_enabled(logging.INFO):
            logging.legacy_info("Using config: %s", config_lib.legacy_config_str(self._config))

    def eval_dir(self, name: str | None = None) -> str:
        """Where evaluate(name=...) writes its events, as legacy named it."""
        return os.path.join(self._model_dir, "eval" if not name else "eval_" + name)

    # ------------------------------------------------------------------------------------
    # Legacy read-only properties.

    @property
    def model_dir(self) -> str:
        return self._model_dir

    @property
    def config(self) -> config_lib.RunConfig:
        return self._config

    @property
    def params(self) -> Any:
        return context_lib.copy_params(self._params)

    @property
    def model_fn(self) -> Callable[..., Any]:
        """model_fn bound to this estimator's params: `model_fn(features, labels, mode,
        config)`, as legacy's property returned it (`tf.estimator.add_metrics` calls it so).

        It calls the user's model_fn with the arguments it takes and checks the spec it
        returns; `config` reaches model_fn as given.
        """

        def public_model_fn(features: Any, labels: Any, mode: str, config: Any) -> Any:
            caller = replica_step.ModelFnCaller(
                self._model_fn, self._params, config, False, plain=self._plain,
                summary_writers=self._summary_writers)
            return caller(features, labels, mode, None)

        return public_model_fn

    def latest_checkpoint(self) -> str | None:
        return tf.train.latest_checkpoint(self._model_dir)

    def get_variable_names(self) -> list[str]:
        return [name for name, _ in tf.train.list_variables(self._require_checkpoint())]

    def get_variable_value(self, name: str) -> Any:
        return tf.train.load_variable(self._require_checkpoint(), name)

    def _require_checkpoint(self) -> str:
        path = self.latest_checkpoint()
        if path is None:
            raise ValueError(f"Could not find trained model in model_dir: {self._model_dir}. "
                             "Train first.")
        return path

    # ------------------------------------------------------------------------------------
    # Runtime.

    def _distribute_for(self, mode: str, use_tpu: bool) -> tf.distribute.Strategy | None:
        if mode == ModeKeys.TRAIN:
            return self._config.train_distribute
        if use_tpu:
            return self._config.eval_distribute or self._config.train_distribute
        # Off TPU (use_tpu=False or eval_on_tpu=False) legacy's Estimator used
        # `train_distribute` for training only: with no `eval_distribute` it evaluated
        # undistributed, on one device (google-research/bigbird's use_tpu=False path sets only
        # `train_distribute`, and its metric_fn takes scalars). Its predict() took no strategy
        # at all, `eval_distribute` included: one device (a replica given no rows would
        # otherwise meet sparse features' reshape of an empty batch).
        if mode == ModeKeys.PREDICT:
            return None
        return self._config.eval_distribute

    def _runtime(self, mode: str, fresh: bool = False) -> runtime_lib.Runtime:
        """The runtime (variables, global step) for `mode`'s strategy, kept across calls.

        `fresh=True` gives a new one, not kept: legacy evaluated and predicted in a new graph
        whose variables were initialised, not restored, when model_dir held no checkpoint.
        """
        tpu_config = self._config.tpu_config
        use_tpu = self._use_tpu and (mode == ModeKeys.TRAIN or self._eval_on_tpu)
        choice = strategy_lib.select(use_tpu=use_tpu,
                                     distribute=self._distribute_for(mode, use_tpu),
                                     cluster=self._config.cluster,
                                     cluster_info=self._config.cluster_info,
                                     num_shards=tpu_config.num_shards,
                                     num_cores_per_replica=tpu_config.num_cores_per_replica,
                                     partitioned_inputs=bool(tpu_config.input_partition_dims),
                                     training=mode == ModeKeys.TRAIN,
                                     peer_timeout_secs=self._config.peer_timeout_secs,
                                     register_timeout_secs=(
                                         self._config.session_creation_timeout_secs))
        key = id(choice.strategy)
        # Legacy's distributed Estimator built model_fn in the scope of RunConfig's
        # strategy (off TPU), which dropped v1 partitioners; a parameter-server one kept them.
        given = self._distribute_for(mode, use_tpu)
        drops = not use_tpu and given is not None and not isinstance(given, _PS_STRATEGIES)
        if fresh:
            return runtime_lib.new_runtime(choice.strategy, drops)
        if key not in self._runtimes:
            self._runtimes[key] = runtime_lib.new_runtime(choice.strategy, drops)
        return self._runtimes[key]

    def _seed_random(self, initializing: bool = True, host: bool | None = None) -> None:
        """Sets the graph seed legacy gave each run's new graph: RunConfig's tf_random_seed,
        or none (a seed a script or an earlier run set does not carry over).

        Random ops start their streams afresh as in legacy's new graph; TensorFlow's kernel
        caches (every compiled function) are reset only when `initializing` or when a
        cached kernel may keep a stream (`_tf/random_streams.py`).

        `initializing`: variables are initialised in this run, so every random source is
        seeded, as legacy's graph seed did for them. `host` (default: `initializing`):
        Python's `random`, NumPy and Keras 2's seed generator are seeded too, since Keras 2
        initializers and layers draw their seeds from them (legacy graph mode got this from
        the graph seed).
        """
        seed = self._config.tf_random_seed
        if seed is not None and (initializing if host is None else host):
            random_streams.seed_host_generators(seed)
        random_streams.restart(seed, fresh=initializing, owner=self)

    def _plan(self, mode: str, strategy: tf.distribute.Strategy) -> context_lib.BatchPlan:
        name = {ModeKeys.TRAIN: "train_batch_size", ModeKeys.EVAL: "eval_batch_size",
                ModeKeys.PREDICT: "predict_batch_size"}[mode]
        pipeline = self._config.tpu_config.effective_input_pipeline(mode == ModeKeys.TRAIN)
        num_hosts = cluster_lib.num_hosts(strategy)
        if self._plain:  # input_fn's batches are the batches (per replica when distributed).
            return context_lib.BatchPlan(None, None, None, pipeline,
                                         strategy.num_replicas_in_sync, num_hosts, None,
                                         plain=True)
        return context_lib.plan_batches(
            global_batch_size=self._batch_sizes[mode], batch_name=name,
            num_replicas=strategy.num_replicas_in_sync, num_hosts=num_hosts,
            pipeline=pipeline, use_tpu=self._use_tpu)

    def _settings(self) -> settings_lib.RunSettings:
        return settings_lib.RunSettings(
            model_dir=self._model_dir, config=self._config, params=self._params,
            use_tpu=self._use_tpu, batch_axis=self._batch_axis,
            iterations_per_loop=self._iterations_per_loop(),
            train_steps_per_call=(settings_lib.PLAIN_TRAIN_STEPS_PER_CALL if self._plain
                                  else None),
            warm_start_from=self._warm_start_settings, model_fn=self._model_fn,
            embedding=self._embedding, summary_writers=self._summary_writers)

    # ------------------------------------------------------------------------------------
    # train

    @eager_scope.eager_entry_point
    def train(self, input_fn: Callable[..., Any], hooks: Sequence[Any] | None = None,
              steps: int | None = None, max_steps: int | None = None,
              saving_listeners: Sequence[Any] | None = None) -> "Estimator":
        """Trains `steps` more steps, or up to global step `max_steps` (legacy semantics)."""
        if self._config.task_type == "evaluator":
            raise ValueError(
                "Train has been called wrong configuration: this task is the cluster's "
                "`evaluator` (TF_CONFIG), which does not train. Please use "
                "tf.estimator.train_and_evaluate which calls proper API according to given "
                "configuration.")
        _validate_steps(steps, max_steps, use_tpu=self._use_tpu)
        # Legacy's StopAtStepHook stopped at the first step >= the (float) target.
        steps, max_steps = (None if s is None else math.ceil(s) for s in (steps, max_steps))
        hooks_lib.check_supported(list(hooks or ()), tensors_per_step=not self._use_tpu)
        hooks_lib.check_listeners(list(saving_listeners or ()))
        if parameter_servers.serves(self._config.cluster_info):  # Never returns.
            parameter_servers.serve(self._config.cluster_info, protocol=self._config.protocol,
                                    wait_secs=self._config.session_creation_timeout_secs)
        runtime = self._runtime(ModeKeys.TRAIN)
        with self._peer_failures(runtime, "Training"):
            return self._train(runtime, input_fn, hooks, steps, max_steps, saving_listeners)

    def _train(self, runtime: runtime_lib.Runtime, input_fn: Callable[..., Any],
               hooks: Sequence[Any] | None, steps: int | None, max_steps: int | None,
               saving_listeners: Sequence[Any] | None) -> "Estimator":
        # The workers of a cluster start from the step the chief sees, or they would disagree
        # on the target and wait forever for each other at the end.
        start_step = cluster_lib.from_chief(runtime.strategy, _step_of_latest(self._model_dir))
        if max_steps is not None and start_step >= max_steps:
            logging.legacy_info("Skipping training since max_steps has already saved.")
            return self
        target = max_steps if max_steps is not None else (
            start_step + steps if steps is not None else None)
        plan = self._plan(ModeKeys.TRAIN, runtime.strategy)
        self._seed_random(initializing=self.latest_checkpoint() is None, host=True)
        # Only the chief writes into model_dir; the other workers of its job share it.
        lock = (safety.ModelDirLock(self._model_dir) if cluster_lib.is_chief(runtime.strategy)
                else contextlib.nullcontext())
        signals = safety.StopSignals(interrupt_too=cluster_lib.is_multi_client(runtime.strategy))
        with lock, signals, runtime.scope(), self._summary_writers.flushing():
            outcome = train_session.TrainSession(self._settings(), runtime, plan).run(
                input_fn, list(hooks or ()), target, saving_listeners, signals,
                steps=steps if max_steps is None else None)
        preemption.exit_if_stopped(outcome, step=int(runtime.global_step.numpy()),
                                   checkpoint=self.latest_checkpoint())
        if signals.terminated:
            raise SystemExit(128 + signal.SIGTERM)
        return self

    @contextlib.contextmanager
    def _peer_failures(self, runtime: runtime_lib.Runtime, what: str) -> Iterator[None]:
        """Turns the engine's error for a lost peer task into one saying what to do."""
        try:
            yield
        except tf.errors.OpError as e:
            error = cluster_lib.peer_lost_error(runtime.strategy, e, what=what,
                                                latest_checkpoint=self.latest_checkpoint())
            if error is None:
                raise
            raise error from e

    # Legacy's private input helpers, which subclasses and tools of its era call.

    def _call_input_fn(self, input_fn: Callable[..., Any], mode: str,
                       input_context: Any = None) -> Any:
        """input_fn called with those of params, config, mode and input_context it takes."""
        accepted = set(inspect.signature(input_fn).parameters)
        kwargs = {name: value for name, value in (
            ("params", self.params), ("config", self._config), ("mode", mode),
            ("input_context", input_context)) if name in accepted}
        if "input_context" in accepted and input_context is None:
            del kwargs["input_context"]
        return input_fn(**kwargs)

    def _get_iterator_from_input_fn(self, input_fn: Callable[..., Any], mode: str,
                                    distribution: Any = None) -> tuple[Any, list[Any]]:
        """(an iterator over input_fn's dataset, its input hooks: none here), as legacy's.

        With `distribution`, its `make_input_fn_iterator` calls input_fn with an input
        context; otherwise input_fn's dataset is iterated eagerly.
        """
        if distribution is not None:
            return distribution.make_input_fn_iterator(
                lambda input_context: self._call_input_fn(input_fn, mode, input_context)), []
        return iter(self._call_input_fn(input_fn, mode)), []

    # ------------------------------------------------------------------------------------
    # evaluate / predict

    @eager_scope.eager_entry_point
    def evaluate(self, input_fn: Callable[..., Any], steps: int | None = None,
                 hooks: Sequence[Any] | None = None, checkpoint_path: str | None = None,
                 name: str | None = None) -> dict[str, Any]:
        """Evaluates on `steps` batches, or until input_fn is exhausted (every example once).

        Returns the legacy dict: every metric, `loss` (mean of per-step losses) and
        `global_step`, and writes them as events under `model_dir/eval[_<name>]`.
        """
        steps, on_tpu = self._check_evaluation(steps, hooks)
        runtime, run = self._inference_run(ModeKeys.EVAL, checkpoint_path, "evaluate")
        with self._summary_writers.flushing(), self._peer_failures(runtime, "Evaluation"):
            return inference.evaluate(input_fn=input_fn, on_tpu=on_tpu, hooks=hooks, steps=steps,
                                      name=name, **run)

    def _check_evaluation(self, steps: int | None,
                          hooks: Sequence[Any] | None) -> tuple[int | None, bool]:
        """(steps, on_tpu) of an evaluation, its arguments checked as legacy's evaluate did."""
        if steps is not None and (isinstance(steps, bool) or steps <= 0):
            raise ValueError(f"Must specify steps > 0, given: {steps}.")
        steps = None if steps is None else math.ceil(steps)  # As legacy's count of evals.
        on_tpu = self._use_tpu and self._eval_on_tpu
        hooks_lib.check_supported(list(hooks or ()), tensors_per_step=not on_tpu)
        if on_tpu and self._batch_sizes[ModeKeys.EVAL] is None:
            raise ValueError(
                "eval_batch_size in TPUEstimator constructor cannot be `None` if .evaluate "
                "is running on TPU. Pass eval_batch_size=..., or eval_on_tpu=False.")
        return steps, on_tpu

    def _live_evaluation(self, input_fn: Callable[..., Any], hooks: Sequence[Any] | None,
                         steps: int | None, name: str | None) -> live_eval.LiveEvaluation:
        """An evaluation of a training run's variables (`InMemoryEvaluatorHook`), traced now
        on a runtime of its own, as legacy's hook built its own evaluation graph."""
        steps, on_tpu = self._check_evaluation(steps, hooks)
        runtime = self._runtime(ModeKeys.EVAL, fresh=True)
        return live_eval.LiveEvaluation(
            self._settings(), runtime, self._plan(ModeKeys.EVAL, runtime.strategy), input_fn,
            on_tpu=on_tpu, hooks=hooks, steps=steps, name=name)

    @eager_scope.eager_generator
    def predict(self, input_fn: Callable[..., Any], predict_keys: Sequence[str] | None = None,
                hooks: Sequence[Any] | None = None, checkpoint_path: str | None = None,
                yield_single_examples: bool = True) -> Iterator[Any]:
        """Yields predictions for every example of input_fn, once each, in order."""
        on_tpu = self._use_tpu
        hooks_lib.check_supported(list(hooks or ()), tensors_per_step=not on_tpu)
        if on_tpu and self._batch_sizes[ModeKeys.PREDICT] is None:
            raise ValueError(
                "predict_batch_size in TPUEstimator constructor cannot be `None` if "
                ".predict is running on TPU. Pass predict_batch_size=....")
        _, run = self._inference_run(ModeKeys.PREDICT, checkpoint_path, "predict")
        with self._summary_writers.flushing():
            yield from inference.predict(input_fn=input_fn, on_tpu=on_tpu, hooks=hooks,
                                         predict_keys=predict_keys,
                                         yield_single_examples=yield_single_examples, **run)

    # ------------------------------------------------------------------------------------
    # export

    @eager_scope.eager_entry_point
    def export_saved_model(self, export_dir_base: str,
                           serving_input_receiver_fn: Callable[[], Any],
                           assets_extra: dict[str, str] | None = None, as_text: bool = False,
                           checkpoint_path: str | None = None,
                           experimental_mode: str = ModeKeys.PREDICT) -> bytes:
        """Writes `export_dir_base/<timestamp>/`, a `serve`-tagged SavedModel (legacy API).

        model_fn is called in PREDICT mode in a TF1 graph, without `batch_size` and with
        `use_tpu=False` in params, as legacy's CPU export graph was built.
        """
        if experimental_mode != ModeKeys.PREDICT:
            raise NotImplementedError(
                f"`experimental_mode` ({experimental_mode!r}) is not supported; only "
                "ModeKeys.PREDICT SavedModels are exported.")
        return self._export(export_dir_base, serving_input_receiver_fn, assets_extra,
                            as_text, checkpoint_path, strip_default_attrs=True)

    @eager_scope.eager_entry_point
    def export_savedmodel(self, export_dir_base: str,
                          serving_input_receiver_fn: Callable[[], Any],
                          assets_extra: dict[str, str] | None = None, as_text: bool = False,
                          checkpoint_path: str | None = None,
                          strip_default_attrs: bool = False) -> bytes:
        """The TF 1.x name, with its own signature: TF 1.x scripts (tensorflow/models'
        official r1 programs) pass `strip_default_attrs=True`. As legacy's, it keeps
        default-valued attributes unless told to strip them, where `export_saved_model`
        always strips them."""
        if not serving_input_receiver_fn:
            raise ValueError("An input_receiver_fn must be defined.")
        return self._export(export_dir_base, serving_input_receiver_fn, assets_extra,
                            as_text, checkpoint_path, strip_default_attrs=strip_default_attrs)

    def _export(self, export_dir_base: str, serving_input_receiver_fn: Callable[[], Any],
                assets_extra: dict[str, str] | None, as_text: bool,
                checkpoint_path: str | None, strip_default_attrs: bool) -> bytes:
        caller = settings_lib.model_fn_caller(
            self._model_fn, self._params, self._config, False,
            self._plan(ModeKeys.PREDICT, tf.distribute.get_strategy()),
            embedding=self._embedding, summary_writers=self._summary_writers)
        return export_lib.export_saved_model(
            call_model_fn=functools.partial(_call_for_export, caller),
            checkpoint_path=checkpoint_path or self.latest_checkpoint() or (
                self._warm_start_settings and self._warm_start_settings.ckpt_to_initialize_from
            ) or self._model_dir,  # Legacy exported the warm start's values before training.
            export_dir_base=export_dir_base,
            serving_input_receiver_fn=serving_input_receiver_fn,
            assets_extra=assets_extra, as_text=as_text,
            tf_random_seed=self._config.tf_random_seed,
            strip_default_attrs=strip_default_attrs)

    def _checkpoint_to_use(self, checkpoint_path: str | None, what: str) -> str | None:
        if checkpoint_path is not None:
            if not tf.io.gfile.exists(checkpoint_path + ".index"):
                directory = tf.train.latest_checkpoint(checkpoint_path)
                if directory is None:
                    raise ValueError(
                        f"`checkpoint_path` ({checkpoint_path}) is not a checkpoint or a "
                        "directory holding one. Pass a prefix like model_dir/model.ckpt-100.")
                checkpoint_path = directory
            return checkpoint_path
        latest = self.latest_checkpoint()
        if latest is None:
            logging.legacy_info("Could not find trained model in model_dir: %s, running "
                                "initialization to %s.", self._model_dir, what)
        return latest

    def _inference_run(self, mode: str, checkpoint_path: str | None,
                       what: str) -> tuple[runtime_lib.Runtime, dict[str, Any]]:
        """The runtime of one evaluate/predict call, and the inference session's arguments
        for it: settings, runtime, batch plan and the checkpoint to restore."""
        checkpoint = self._checkpoint_to_use(checkpoint_path, what)
        # No checkpoint: fresh variables, initialised as legacy's new graph initialised them
        # (global step 0), not the in-memory state a train() left in this process.
        runtime = self._runtime(mode, fresh=checkpoint is None)
        self._seed_random(initializing=checkpoint is None)
        return runtime, {"settings": self._settings(), "runtime": runtime,
                         "plan": self._plan(mode, runtime.strategy), "checkpoint": checkpoint}

    def _iterations_per_loop(self) -> int:
        if self._plain:
            return 1  # Legacy Estimator ran one step per session.run.
        parsed = self._config.tpu_config.parsed_iterations_per_loop
        if parsed.unit != "count":
            raise NotImplementedError(
                f"`iterations_per_loop` in seconds ({parsed.value}{parsed.unit}) is not "
                "supported; give a step count, e.g. iterations_per_loop=100.")
        return parsed.value


class TPUEstimator(Estimator):
    """Legacy `tf.compat.v1.estimator.tpu.TPUEstimator`, running on TF2 tf.distribute.

    Args mirror the legacy constructor. With `use_tpu=True` the job runs on a TPU when one
    is reachable, else on local GPUs or split CPU devices, else on the CPU (see
    `session/strategy.py`); with `use_tpu=False` it runs on the CPU as legacy did.
    """

    def __init__(self,
                 model_fn: Callable[..., Any] | None = None,
                 model_dir: str | None = None,
                 config: config_lib.RunConfig | None = None,
                 params: dict[str, Any] | None = None,
                 use_tpu: bool = True,
                 train_batch_size: int | None = None,
                 eval_batch_size: int | None = None,
                 predict_batch_size: int | None = None,
                 batch_axis: Any = None,
                 eval_on_tpu: bool = True,
                 export_to_tpu: bool = True,
                 export_to_cpu: bool = True,
                 warm_start_from: Any = None,
                 embedding_config_spec: Any = None,
                 export_saved_model_api_version: Any = None) -> None:
        keras_env.check_legacy_keras()
        if config is None or not isinstance(config, config_lib.RunConfig):
            raise ValueError(
                "`config` must be provided with type `tpu_config.RunConfig`; received "
                f"{type(config).__name__}. Pass `config=tpu_estimator_compat.RunConfig(...)`.")
        if params is not None and not (isinstance(params, dict)
                                       or hasattr(params, "set_hparam")):
            raise ValueError(f"`params` must be a dict, an HParams or None; received "
                             f"{type(params).__name__}.")
        if params is not None and any(k in params for k in _RESERVED_PARAMS_KEYS):
            raise ValueError(
                f"{list(_RESERVED_PARAMS_KEYS)} are reserved keys but existed in params "
                f"{params}. Remove them: TPUEstimator sets params['batch_size'] itself from "
                "train_batch_size/eval_batch_size/predict_batch_size.")
        if model_fn is None or not callable(model_fn):
            raise ValueError(f"`model_fn` must be callable; received {model_fn!r}.")
        replica_step.check_model_fn_signature(model_fn)
        if use_tpu:
            if train_batch_size is None:
                raise ValueError(
                    "`train_batch_size` cannot be `None` when use_tpu=True. Pass the global "
                    "batch size, e.g. TPUEstimator(..., train_batch_size=1024).")
            _check_positive_int(train_batch_size, "train_batch_size")
            if (config.tpu_config.per_host_input_for_training
                    == tpu_config_lib.InputPipelineConfig.PER_SHARD_V1
                    and config.tpu_config.num_cores_per_replica):
                raise ValueError(
                    "Model parallelism only supports per host input for training. Please "
                    "adjust TPURunconfig.per_host_input_for_training: set it to "
                    "InputPipelineConfig.PER_HOST_V2 (or True).")
        for name, value in (("train_batch_size", train_batch_size),
                            ("eval_batch_size", eval_batch_size),
                            ("predict_batch_size", predict_batch_size)):
            if value is not None:
                _check_positive_int(value, name)
        embedding = None
        if embedding_config_spec is not None:
            embedding_config_lib.check_estimator_arguments(
                embedding_config_spec, use_tpu=use_tpu, eval_on_tpu=eval_on_tpu,
                tpu_config=config.tpu_config)
            if use_tpu:  # use_tpu=False: the columns are ordinary columns, as in legacy.
                embedding = embedding_lib.EmbeddingEngine(
                    embedding_config_lib.EmbeddingConfig.from_spec(embedding_config_spec),
                    eval_on_tpu=eval_on_tpu)
        self._setup(model_fn=model_fn, model_dir=model_dir, config=config, params=params,
                    use_tpu=use_tpu, batch_sizes=(train_batch_size, eval_batch_size,
                                                  predict_batch_size),
                    eval_on_tpu=eval_on_tpu, warm_start_from=warm_start_from,
                    batch_axis=batch_axis, embedding=embedding)

    @property
    def _ctx(self) -> context_lib.InternalTPUContext:
        """Legacy's `TPUEstimator._ctx`: `with est._ctx.with_mode(mode) as ctx: ctx.master_job`."""
        return context_lib.InternalTPUContext(self._config)


# Members a subclass of Estimator may override (legacy's allow-list).
_OVERRIDABLE = frozenset({
    "model_fn", "_create_and_assert_global_step", "_export_all_saved_models", "_tf_api_names",
    "_tf_api_names_v1", "_estimator_api_names", "_estimator_api_names_v1",
    "_estimator_api_constants", "_estimator_api_constants_v1", "latest_checkpoint"})


def _check_members_not_overridden(estimator: Estimator) -> None:
    """Legacy's rule: a subclass of Estimator extends it, never overrides its members
    (outside `_OVERRIDABLE`); the estimator's runs call them. TPUEstimator is exempt."""
    cls = type(estimator)
    if cls.__name__ == "TPUEstimator":
        return
    members = {m for m in dir(Estimator) if not m.startswith("__")}
    overridden = sorted(m for m in (members & set(vars(cls))) - _OVERRIDABLE
                        if getattr(Estimator, m) != getattr(cls, m))
    if overridden:
        raise ValueError(
            f"Subclasses of Estimator cannot override members of Estimator. {cls} does "
            f"override {overridden}. Give the subclass's methods other names (extending "
            "the API is fine), or wrap the estimator instead of subclassing it.")


def _call_for_export(caller: replica_step.ModelFnCaller, features: Any, labels: Any,
                     mode: str) -> Any:
    return caller(features, labels, mode, None, export_mode=True)


def _validate_steps(steps: int | None, max_steps: int | None, *, use_tpu: bool) -> None:
    if steps is not None and max_steps is not None:
        raise ValueError(
            f"Can not provide both steps and max_steps (received steps={steps}, "
            f"max_steps={max_steps}). Pass one of them.")
    if steps is not None and (isinstance(steps, bool) or steps <= 0):
        raise ValueError(f"Must specify steps > 0, given: {steps}.")
    if max_steps is not None and (isinstance(max_steps, bool) or max_steps <= 0):
        raise ValueError(f"Must specify max_steps > 0, given: {max_steps}.")
    if use_tpu and steps is None and max_steps is None:
        raise ValueError(
            "For TPU training, one of `steps` or `max_steps` must be set. Cannot be both "
            "`None`. Pass e.g. estimator.train(input_fn, max_steps=1000).")


def _step_of_latest(model_dir: str) -> int:
    path = tf.train.latest_checkpoint(model_dir) if tf.io.gfile.exists(model_dir) else None
    return 0 if path is None else checkpoints_lib.checkpoint_step(path)
