"""When train() writes checkpoints: legacy's CheckpointSaverHook, asked between loops.

`SavePolicy` is the one place that decides. It saves the starting state when training begins,
then whenever `save_steps` global steps or `save_secs` seconds have passed since the last save
(`SecondOrStepTimer.should_trigger_for_step`), never twice for one step, and once at the end
unless the final step was just saved. Like the hook under TPUEstimator
(`steps_per_run=iterations_per_loop`) it is only asked between host loops, so saves land on
loop boundaries. On legacy's CPU path (`use_tpu=False`) the hook was asked after every step,
so a step-based save fell on the first step at or past its due step whatever
`iterations_per_loop` said; with `per_step` the policy tells the driver to end a loop there
(`steps_until_due`). Time-based saves are still checked between loops only. As RunConfig, `save_steps` and `save_secs` are exclusive; with both None or 0
nothing is written, not even at the start or end (legacy Estimator added no saver hook then).
Saving listeners hear `begin`, `before_save`, `after_save` (True stops training) and `end`.

On a cluster every worker runs the policy, and `agree` makes the chief's decision everyone's:
time-based saving reads each worker's clock, and workers that saved at different loops would
no longer pair their collectives. The clock is passed in, so tests need not sleep.

This module knows nothing about models, strategies or file formats: the checkpoint manager
writes, the caller says how workers agree.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Protocol

from tpu_estimator_compat import log as logging


class Writer(Protocol):
    """What the policy needs from `checkpoints.CheckpointManager`."""

    def save(self, global_step: int) -> str: ...


class SavePolicy:
    """Legacy CheckpointSaverHook semantics at loop granularity, plus saving listeners."""

    def __init__(self, writer: Writer, *, save_steps: int | None, save_secs: float | None,
                 listeners: Iterable[Any] = (),
                 agree: Callable[[bool], bool] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 per_step: bool = False, announce: bool = False) -> None:
        """Configures the policy.

        Args:
            writer: Writes and publishes the checkpoint of a step.
            save_steps: Save every this many global steps; 0 or None: not by steps.
            save_secs: Save every this many seconds; 0 or None: not by time.
            listeners: `CheckpointSaverListener`s (the chief's only, on a cluster).
            agree: On several workers, maps this worker's decision to the chief's.
            clock: Seconds from an arbitrary origin.
            per_step: Step-based saves fall due on a step, not a loop end (legacy's CPU
                path): loops end where a save is due.
            announce: Log legacy's saver hook lines around each save (`Calling checkpoint
                listeners before/after saving checkpoint N...`), as the chief's hook did.

        Raises:
            ValueError: both given, or a negative value.
        """
        if save_steps is not None and (isinstance(save_steps, bool) or save_steps < 0):
            raise ValueError(f"SavePolicy(save_steps={save_steps!r}) must be an int >= 0, or "
                             "None (0 and None disable step-based saving).")
        if save_secs is not None and save_secs < 0:
            raise ValueError(f"SavePolicy(save_secs={save_secs!r}) must be >= 0, or None (0 "
                             "and None disable time-based saving).")
        if save_steps and save_secs:
            raise ValueError(
                f"SavePolicy received save_steps={save_steps!r} and save_secs={save_secs!r}; "
                "set only one, as RunConfig's save_checkpoints_steps/save_checkpoints_secs.")
        # Legacy tested truthiness (`if save_checkpoints_secs or save_checkpoints_steps`), so
        # 0 disables a criterion exactly like None.
        self._save_steps = save_steps or None
        self._save_secs = save_secs or None
        self._writer = writer
        self._listeners = list(listeners)
        self._agree = agree
        self._clock = clock
        self._per_step = per_step
        self._announce = announce
        self._last_step: int | None = None
        self._last_time: float | None = None
        self.stop_requested = False

    @property
    def enabled(self) -> bool:
        """False when neither save_steps nor save_secs is set (None or 0): nothing is saved."""
        return self._save_steps is not None or self._save_secs is not None

    def begin(self, step: int) -> None:
        for listener in self._listeners:
            listener.begin()
        if self.enabled:
            # Legacy CheckpointSaverHook saved the starting state when the session was
            # created, rewriting an existing checkpoint of that step with the restored values.
            self.save(step)

    def _due(self, step: int) -> bool:
        if not self.enabled:
            return False
        if self._last_step is None:
            return True
        if step == self._last_step:
            return False
        if self._save_secs is not None and self._clock() >= self._last_time + self._save_secs:
            return True
        return self._save_steps is not None and step >= self._last_step + self._save_steps

    def steps_until_due(self, step: int) -> int | None:
        """With `per_step`, the steps from `step` until a step-based save is due, else None.

        Counted in global steps: a loop cut there never runs past the due step, even when
        the global step advances on some steps only (gradient accumulation); it may end
        short of it, and the next loop runs the rest.
        """
        if not self._per_step or self._save_steps is None or self._last_step is None:
            return None
        return max(1, self._last_step + self._save_steps - step)

    def should_save(self, step: int) -> bool:
        """Whether the checkpoint of `step` is due; on a cluster, whether the chief says so."""
        due = self._due(step)
        return bool(self._agree(due)) if self._agree is not None else due

    def save(self, step: int) -> str:
        if self._announce:
            logging.legacy_info("Calling checkpoint listeners before saving checkpoint %d...",
                                step)
        for listener in self._listeners:
            listener.before_save(None, step)
        path = self._writer.save(step)
        self._last_step = int(step)
        self._last_time = self._clock()
        if self._announce:
            logging.legacy_info("Calling checkpoint listeners after saving checkpoint %d...",
                                step)
        for listener in self._listeners:
            if listener.after_save(None, step):
                logging.info("A CheckpointSaverListener requested a stop.")
                self.stop_requested = True
        return path

    def after_loop(self, step: int, result: Any, seconds: float) -> bool:
        """Driver listener: legacy stopped training when a saving listener asked to."""
        del step, result, seconds
        return self.stop_requested

    def close(self) -> None:
        pass

    def end(self, step: int) -> None:
        if self.enabled and self._last_step != step:
            self.save(step)
        for listener in self._listeners:
            listener.end(None, step)
