"""Evaluating a training run's live variables: what legacy's InMemoryEvaluatorHook ran.

    evaluation = LiveEvaluation(settings, runtime, plan, input_fn, on_tpu=False, hooks=[],
                                steps=None, name=None)
    evaluation.record.saver            # what model_fn's EVAL spec asked for
    results = evaluation.run({"dense/kernel": array, "global_step": 12, ...})

Legacy's hook built an evaluation graph once per `train()` (its `begin`) and at every
trigger ran it in a new session whose variables were fed the training session's values by
name instead of being restored from a checkpoint. Here the evaluation is the engine's own
(`inference.prepare`: input_fn called and the EVAL step traced once, for a runtime of its own,
whose variables stand for legacy's evaluation graph's), and each `run` sets that runtime's
variables from the values given, restarts the metric accumulators, reads the input from
its start and runs `inference.evaluate_session`: legacy's results dict, its log lines and
its events under model_dir/eval[_name], with no checkpoint path. Variables no run sets
(the evaluation's own) start every run from their initial values, as legacy initialised them
in each new session. It never sees the facade or the training run: the values come from
whoever calls `run`.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from tpu_estimator_compat import spec as spec_lib
from tpu_estimator_compat.inputs import context as context_lib
from tpu_estimator_compat.session import inference
from tpu_estimator_compat.session import settings as settings_lib
from tpu_estimator_compat.session import strategy_state as runtime_lib
from tpu_estimator_compat.step import replica_step


class LiveEvaluation:
    """One evaluation traced once and run on given variable values any number of times."""

    def __init__(self, settings: settings_lib.RunSettings, runtime: runtime_lib.Runtime,
                 plan: context_lib.BatchPlan, input_fn: Callable[..., Any], *, on_tpu: bool,
                 hooks: Sequence[Any] | None, steps: int | None, name: str | None) -> None:
        self._settings = settings
        self._runtime = runtime
        self._hooks = list(hooks or ())
        self._steps = steps
        self._name = name
        # The initial values of the variables no run sets (the evaluation's own), taken at
        # the first run: legacy initialised them in every evaluation's new session.
        self._own_initial: dict[str, Any] | None = None
        # As evaluate(): off TPU, tensors (not a dataset) from input_fn repeat for `steps`.
        self._prepared = inference.prepare(
            settings, runtime, plan, spec_lib.ModeKeys.EVAL, input_fn, on_tpu,
            repeat_tensors=not on_tpu and steps is not None)

    @property
    def record(self) -> replica_step.TraceRecord:
        """What the trace of model_fn's EVAL spec recorded (its Scaffold's saver, ...)."""
        return self._prepared.built.record

    def variable_names(self) -> set[str]:
        """The v1 names of the evaluation's global variables (the ones a run may set)."""
        return set(self._runtime.registry.by_name())

    def run(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Evaluates with the variables named in `values` set to them; legacy's results."""
        registry = self._runtime.registry

        def set_variables() -> None:
            variables = registry.by_name()
            if self._own_initial is None:
                self._own_initial = {name: variable.read_value()
                                     for name, variable in variables.items()
                                     if name not in values}
            for name, value in {**self._own_initial, **values}.items():
                if name in variables:
                    variables[name].assign(value)
            registry.reset_local_variables()

        session = self._prepared.open(self._hooks, set_variables)
        try:
            return inference.evaluate_session(session, model_dir=self._settings.model_dir,
                                              steps=self._steps, name=self._name,
                                              checkpoint=None)
        finally:
            session.release_input()

    def close(self) -> None:
        """Lets go of the input when the evaluation never ran."""
        self._prepared.release_input()
