"""What a train, evaluate or predict run reads from the estimator, and its model_fn caller.

`RunSettings` is the estimator's validated configuration (built by the facade for each call)
as the train and inference sessions read it, so they never see the facade: the model_fn with
its params and config, where it runs (`use_tpu`), the input's `batch_axis`, the loop size and
warm start. `RunSettings.caller` makes the object that calls model_fn the legacy way for one
batch plan; the sessions make their own, the facade one for export (`model_fn_caller`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from tpu_estimator_compat import config as config_lib
from tpu_estimator_compat.inputs import context as context_lib
from tpu_estimator_compat.inputs import pad as pad_lib
from tpu_estimator_compat.step import replica_step


# Training steps per compiled call of the plain Estimator while no hook needs every step:
# legacy's default logging and summaries fire every 100 steps, so a call of 100 steps ends
# where they do (`RunSettings.train_steps_per_call`).
PLAIN_TRAIN_STEPS_PER_CALL = 100


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """The estimator's configuration as a run reads it (validated by the estimator)."""

    model_dir: str
    config: config_lib.RunConfig
    params: Any  # A dict, a dict subclass or an HParams, as the user gave it (copied).
    use_tpu: bool
    batch_axis: pad_lib.BatchAxes
    iterations_per_loop: int
    warm_start_from: Any
    model_fn: Callable[..., Any]
    # An `embedding.engine.EmbeddingEngine` (embedding_config_spec with use_tpu=True) or None.
    embedding: Any = None
    # `summary.summaries.ModelFnWriters`: the summary writers model_fn creates.
    summary_writers: Any = None
    # Training steps one compiled call may run, where that differs from `iterations_per_loop`
    # (None: the same). The plain Estimator observes one step per run (its hooks, logs and
    # summaries follow `iterations_per_loop=1`, as legacy's one step per `session.run`) and
    # still runs several steps per call where nothing observed changes (train_session.py).
    train_steps_per_call: int | None = None

    @property
    def saves_checkpoints(self) -> bool:
        """Whether legacy's Estimator made its CheckpointSaverHook (a cadence is set)."""
        return bool(self.config.save_checkpoints_steps or self.config.save_checkpoints_secs)

    def caller(self, plan: context_lib.BatchPlan,
               use_tpu: bool | None = None) -> replica_step.ModelFnCaller:
        """Calls model_fn for batches of `plan`; `use_tpu` overrides the estimator's (False
        for legacy's CPU evaluation)."""
        return model_fn_caller(self.model_fn, self.params, self.config,
                               self.use_tpu if use_tpu is None else use_tpu, plan,
                               embedding=self.embedding, summary_writers=self.summary_writers)


def model_fn_caller(model_fn: Callable[..., Any], params: Any, config: config_lib.RunConfig,
                    use_tpu: bool, plan: context_lib.BatchPlan, *, embedding: Any = None,
                    summary_writers: Any = None) -> replica_step.ModelFnCaller:
    """The legacy model_fn call for batches of `plan` (`params['context']` from it)."""

    def context_factory(mode: str) -> context_lib.TPUContext:
        return context_lib.TPUContext(None, plan, mode)

    return replica_step.ModelFnCaller(model_fn, params, config, use_tpu, context_factory,
                                      embedding=embedding, summary_writers=summary_writers,
                                      plain=plan.plain)
