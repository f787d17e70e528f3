"""Preemption on a multi-worker job: one agreed stop step, one checkpoint, every task exits.

Synopsis::

    stop = preemption.AgreedStop(strategy, listeners, signals)   # the driver's listener
    ... driver.run(...) ...                                        # stops after one loop
    preemption.exit_if_stopped(stop.outcome, latest_checkpoint)   # raises JobStopped

A cluster manager preempts a task by sending it SIGTERM, and a user stops a job with Ctrl-C
in one terminal. On `MultiWorkerMirroredStrategy` every worker must issue the same
collectives in the same order, so no worker may stop alone: after every loop the workers
sum, in one all-reduce, whether any of them wants to stop and which signal asked
(`cluster.sum_over_workers`). They all stop after the same loop, the chief writes the
checkpoint of that step (the others join its collectives: they read sync-on-read variables
with it and wait until it is published), and then every task exits with a message naming
the task that was signalled, status 143 as TensorFlow's own preemption handler uses (130 on
the task that got Ctrl-C). This is `PreemptionCheckpointHandler`'s protocol on the same
engine; that class itself is not used because it owns its own object-based checkpoints and
run counter, where the estimator's are the legacy v1 checkpoints of model_dir and its global
step. A signal is acted on between loops (Python runs signal handlers when the compiled loop
returns), so the stop comes at most one `iterations_per_loop` later.

This module owns the agreement and the exit. It knows nothing about models, input or files:
the caller saves, and passes the path it saved.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import tensorflow as tf

from tpu_estimator_compat.cluster import workers as cluster_lib
from tpu_estimator_compat import log as logging

EXIT_PREEMPTED = 143  # 128 + SIGTERM; TensorFlow's preemption handler exits with it too.
EXIT_INTERRUPTED = 130  # 128 + SIGINT.


@dataclasses.dataclass(frozen=True)
class StopOutcome:
    """Why a multi-worker training stopped early, as every worker agreed."""

    signalled: tuple[str, ...]  # Tasks that received SIGTERM or SIGINT ('worker/1').
    signal_name: str  # 'SIGTERM', 'SIGINT' or 'SIGTERM/SIGINT'.
    here: str | None  # The signal this task received, if any.


class JobStopped(SystemExit):
    """Raised on every task after a signal stopped the job and its checkpoint was written."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(code)
        self.message = message

    def __str__(self) -> str:
        return self.message


class AgreedStop:
    """Runs the driver's listeners and stops every worker when any of them asks to stop.

    A signal, a saving listener (chief only) or a hook may stop one worker; the others must
    stop after the same loop, or they would wait forever in a collective with no partner.
    """

    def __init__(self, strategy: tf.distribute.Strategy, listeners: Sequence[Any],
                 signals: Any = None) -> None:
        self._strategy = strategy
        self._listeners = list(listeners)
        self._signals = signals
        self.outcome: StopOutcome | None = None

    def before_loop(self, step: int) -> None:
        for listener in self._listeners:
            before = getattr(listener, "before_loop", None)
            if before is not None:
                before(step)

    def after_loop(self, step: int, result: Any, seconds: float) -> bool:
        stop = any([listener.after_loop(step, result, seconds) for listener in self._listeners])
        here = getattr(self._signals, "signal_name", None)
        rank = cluster_lib.task_rank(self._strategy)
        # [any stop, SIGTERMs, SIGINTs, sum of 1 << rank of the signalled tasks]
        total = cluster_lib.sum_over_workers(self._strategy, [
            int(stop), int(here == "SIGTERM"), int(here == "SIGINT"),
            (1 << rank) if here and rank < 62 else 0])
        if total[1] or total[2]:
            ranks = [r for r in range(62) if total[3] >> r & 1]
            names = tuple(cluster_lib.task_name(self._strategy, r) for r in ranks)
            kind = "/".join(n for n, count in (("SIGTERM", total[1]), ("SIGINT", total[2]))
                            if count)
            self.outcome = StopOutcome(names, kind, here)
            logging.warning("Stopping every worker after global step %d: %s received %s.",
                            step, ", ".join(names) or "a task", kind)
        return bool(total[0] or total[1] or total[2])


def agreed_listeners(strategy: tf.distribute.Strategy, listeners: Sequence[Any],
                     signals: Any = None) -> Sequence[Any]:
    """`listeners` on one client; one AgreedStop wrapping them on several workers."""
    if cluster_lib.is_multi_client(strategy):
        return [AgreedStop(strategy, listeners, signals)]
    return listeners


def outcome_of(listeners: Sequence[Any]) -> StopOutcome | None:
    """The agreed outcome held by `agreed_listeners`' result, if the job was signalled."""
    for listener in listeners:
        if isinstance(listener, AgreedStop):
            return listener.outcome
    return None


def exit_if_stopped(outcome: StopOutcome | None, *, step: int,
                    checkpoint: str | None) -> None:
    """Raises JobStopped on this task when a signal stopped the job; else returns.

    Every task exits, signalled or not: the job has lost (or is about to lose) a task and a
    MultiWorkerMirroredStrategy job cannot continue without it, so carrying on into
    evaluation would only wait for the missing task. Restarting the job resumes from the
    checkpoint just written.
    """
    if outcome is None:
        return
    saved = (f"the chief saved {checkpoint}" if checkpoint
             else "nothing was saved (checkpointing is off)")
    who = ", ".join(outcome.signalled) or "a task"
    code = EXIT_INTERRUPTED if outcome.here == "SIGINT" else EXIT_PREEMPTED
    message = (f"Training stopped at global step {step} because {who} received "
               f"{outcome.signal_name}; {saved}. Every task of the job exits (status "
               f"{code} here). Restart the whole job to resume from global step {step}.")
    logging.warning("%s", message)
    raise JobStopped(code, message)
