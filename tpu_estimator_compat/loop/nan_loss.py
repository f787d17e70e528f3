"""The NaN check: the error for a loop whose loss went NaN or Inf, naming the global step.

`RunConfig(stop_on_nan_loss=True)` (the default) makes the train driver raise it before
anything is saved (`driver.py`); on legacy's CPU path, hooks see it per step (`hooks.py`).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf


class NanLossError(tf.compat.v1.train.NanLossDuringTrainingError):
    """Legacy's NanLossDuringTrainingError, saying at which global step the loss went bad."""

    def __init__(self, step: int, value: float) -> None:
        super().__init__()
        self.step = step
        self.value = value

    def __str__(self) -> str:
        return (f"NaN loss during training: the loss of global step {self.step} is "
                f"{self.value}. Lower the learning rate or check the inputs; the last "
                "checkpoint before it is in model_dir. (RunConfig(stop_on_nan_loss=False) "
                "trains on.)")


def first_nan_loss(losses: np.ndarray, starts: np.ndarray) -> NanLossError | None:
    """The error for a loop's first NaN/Inf loss; `starts[k]`: the global step its k-th step
    started from (`step_starts`)."""
    bad = np.flatnonzero(~np.isfinite(losses))
    if not bad.size:
        return None
    first = int(bad[0])
    return NanLossError(int(starts[first]) + 1, float(losses[first]))

