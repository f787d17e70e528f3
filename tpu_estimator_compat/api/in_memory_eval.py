"""Legacy `hooks/hooks.py`: InMemoryEvaluatorHook and the stop-at-checkpoint-step hooks.

    evaluator = tf.estimator.experimental.InMemoryEvaluatorHook(
        estimator, eval_input_fn, every_n_iter=100, name="dev")
    estimator.train(train_input_fn, hooks=[evaluator])   # events in model_dir/eval_dev

Legacy's `InMemoryEvaluatorHook` evaluated during `train()` without a checkpoint: `begin`
built an evaluation graph through the Estimator's private graph builders, and at session
creation, every `every_n_iter` training iterations (one `session.run`; one loop of
`iterations_per_loop` steps on a TPU) and at `end` it copied the training session's variables
by name into that graph and ran the evaluation there, writing the eval dir's events. This is
that contract on this library's engine: `begin` traces the evaluation once
(`Estimator._live_evaluation`: `session/live_eval.py`, model_fn in EVAL mode on a runtime of
its own, which stands for legacy's evaluation graph), each trigger reads the training run's
global variables through the hook's session (`session.run`, as legacy fed them) and runs the
engine's evaluation with them. Both run on a thread of their own (`eager_scope.on_own_thread`)
so that nothing of the training run's scopes reaches the evaluation. Legacy's checks stand:
a positive `every_n_iter`, one machine, no custom `Saver` or `init_fn` in the evaluation's
Scaffold, no saveable objects besides variables in training.

`_StopAtCheckpointStepHook` and `make_stop_at_checkpoint_step_hook` are the other names of
that module (served at `tensorflow_estimator.python.estimator.hooks.hooks` with this hook):
a worker stops once the chief's newest checkpoint reached the last step.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Sequence

import tensorflow as tf

from tpu_estimator_compat.loop import hooks as hooks_lib
from tpu_estimator_compat.v1_state import eager_scope

_v1 = tf.compat.v1
_ENTRY = "InMemoryEvaluatorHook"


class InMemoryEvaluatorHook(_v1.train.SessionRunHook):
    """Evaluates the training run's variables during `train()`, without a checkpoint.

    Args (legacy's): `estimator` whose model_fn evaluates; `input_fn`, `steps`, `hooks`,
    `name` as `estimator.evaluate` takes them (events go to `model_dir/eval[_name]`);
    `every_n_iter`: training iterations between evaluations (also one when the session is
    created and one at the end of training).
    """

    def __init__(self, estimator: Any, input_fn: Callable[..., Any], steps: int | None = None,
                 hooks: Sequence[Any] | None = None, name: str | None = None,
                 every_n_iter: int = 100) -> None:
        if every_n_iter is None or every_n_iter <= 0:
            raise ValueError(
                f"invalid every_n_iter={every_n_iter}. Pass the number of training "
                "iterations between evaluations, a positive int.")
        config = estimator.config
        if config.num_ps_replicas > 0 or config.num_worker_replicas > 1:
            raise ValueError(
                "InMemoryEvaluator supports only single machine (aka Local) setting. This "
                f"estimator's cluster has {config.num_ps_replicas} parameter server(s) and "
                f"{config.num_worker_replicas} worker(s) (TF_CONFIG); evaluate in the "
                "cluster's `evaluator` task instead (tf.estimator.train_and_evaluate).")
        # Legacy checked `steps` here (`Must specify steps > 0`), and the hooks' type.
        self._hooks = hooks_lib.check_hooks_type(hooks)
        steps, _ = estimator._check_evaluation(steps, self._hooks)
        self._estimator = estimator
        self._input_fn = input_fn
        self._steps = steps
        self._name = name
        self._every_n_iter = every_n_iter
        self._eval_dir = os.path.join(estimator.model_dir,
                                      "eval" if not name else "eval_" + name)
        self._timer = _v1.train.SecondOrStepTimer(every_steps=every_n_iter)
        self._evaluation: Any = None
        self._train_variables: dict[str, Any] = {}
        self._iter_count = 0

    def begin(self) -> None:
        """Traces the evaluation (model_fn in EVAL mode), as legacy built its graph here."""
        self._timer.reset()
        self._iter_count = 0
        self._close()
        estimator = self._estimator
        live = estimator._live_evaluation  # pylint: disable=protected-access
        evaluation = eager_scope.on_own_thread(_ENTRY, lambda: live(
            self._input_fn, self._hooks, self._steps, self._name))
        record = evaluation.record
        why = ("custom saver" if record.saver is not None else
               "custom init_fn" if getattr(record.scaffold, "init_fn", None) else None)
        if why is not None:
            eager_scope.on_own_thread(_ENTRY, evaluation.close)
            raise ValueError(
                f"InMemoryEvaluator does not support {why}: model_fn's EVAL EstimatorSpec has "
                f"a Scaffold with a {why.split()[1]}, and this evaluation takes the training "
                "run's variables as they are. Return a Scaffold without it in EVAL mode, or "
                "evaluate checkpoints with `estimator.evaluate`.")
        self._evaluation = evaluation

    def after_create_session(self, session: Any, coord: Any) -> None:
        """Evaluates the variables training starts from (legacy's step-0 evaluation)."""
        del coord
        if _v1.get_collection(_v1.GraphKeys.SAVEABLE_OBJECTS):
            raise ValueError(
                "InMemoryEvaluator does not support saveables other than global variables. "
                "model_fn put objects in the SAVEABLE_OBJECTS collection, which the "
                "evaluation cannot copy; evaluate checkpoints with `estimator.evaluate`.")
        # The training run's global variables by graph name, as legacy matched them.
        wanted = self._evaluation.variable_names()
        self._train_variables = {
            name: variable for name, variable in (
                (_graph_name(v), v) for v in _v1.get_collection(_v1.GraphKeys.GLOBAL_VARIABLES))
            if name in wanted}
        self._evaluate(session)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        """Evaluates every `every_n_iter` iterations."""
        del run_values
        self._iter_count += 1
        if self._timer.should_trigger_for_step(self._iter_count):
            self._evaluate(run_context.session)

    def end(self, session: Any) -> None:
        """Evaluates the final variables."""
        self._evaluate(session)
        self._close()

    def _evaluate(self, session: Any) -> None:
        values = session.run(self._train_variables)
        evaluation = self._evaluation
        eager_scope.on_own_thread(_ENTRY, lambda: evaluation.run(values))
        self._timer.update_last_triggered_step(self._iter_count)

    def _close(self) -> None:
        if self._evaluation is not None:
            evaluation, self._evaluation = self._evaluation, None
            eager_scope.on_own_thread(_ENTRY, evaluation.close)


def _graph_name(variable: Any) -> str:
    """A variable's name in its graph without the output index: `dense/kernel`."""
    name = variable.name
    return name[:-2] if name.endswith(":0") else name


def _checkpoint_dir_step(model_dir: str) -> int:
    """The global step of the newest checkpoint in `model_dir`; 0 when there is none, or it
    cannot be read (legacy's `estimator._load_global_step_from_checkpoint_dir`)."""
    try:
        path = tf.train.latest_checkpoint(model_dir)
        return int(tf.train.load_variable(path, _v1.GraphKeys.GLOBAL_STEP))
    except Exception:  # pylint: disable=broad-except  # Legacy: any failure means step 0.
        return 0


class _StopAtCheckpointStepHook(_v1.train.SessionRunHook):
    """Requests a stop once the global step and model_dir's newest checkpoint reached
    `last_step`; until that checkpoint exists it waits `wait_after_file_check_secs` after
    each look (many workers reading one file)."""

    def __init__(self, model_dir: str, last_step: int,
                 wait_after_file_check_secs: float = 30) -> None:
        if last_step is None:
            raise ValueError("last_step must be specified. Pass the step to stop after.")
        if model_dir is None:
            raise ValueError("model_dir must be specified. Pass the chief's model_dir.")
        self._model_dir = model_dir
        self._last_step = last_step
        self._wait_after_file_check_secs = wait_after_file_check_secs
        self._global_step: Any = None

    def begin(self) -> None:
        self._global_step = _v1.train.get_global_step()
        if self._global_step is None:
            raise RuntimeError(
                "Global step should be created to use StopAtCheckpointStepHook. Create it "
                "with tf.compat.v1.train.get_or_create_global_step() before the session.")

    def before_run(self, run_context: Any) -> Any:
        del run_context
        return _v1.train.SessionRunArgs(self._global_step)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        # The fetched step was read before this run's increment.
        if run_values.results + 1 < self._last_step:
            return
        if _checkpoint_dir_step(self._model_dir) >= self._last_step:
            run_context.request_stop()
        else:
            time.sleep(self._wait_after_file_check_secs)


def make_stop_at_checkpoint_step_hook(estimator: Any, last_step: int,
                                      wait_after_file_check_secs: float = 30) -> Any:
    """The chief's `StopAtStepHook(last_step)`; another worker's hook waits for the chief's
    checkpoint of `last_step` (its own global step may reach it first)."""
    if estimator.config.is_chief:
        return _v1.train.StopAtStepHook(last_step=last_step)
    return _StopAtCheckpointStepHook(model_dir=estimator.model_dir, last_step=last_step,
                                     wait_after_file_check_secs=wait_after_file_check_secs)
