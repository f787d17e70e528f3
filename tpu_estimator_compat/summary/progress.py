"""Progress reporting for training: an absl log line per loop, an optional bar, or quiet.

Chosen by the environment variable `TPU_ESTIMATOR_COMPAT_PROGRESS` (`log`, the default;
`bar` for interactive runs; `quiet` for CI and tests) or `set_mode()`; the launcher's
`--progress` flag sets the variable. The driver calls `report()` once per loop with the
step, loss and rates. `legacy_info()` writes the few lines legacy Estimator wrote and users'
tools read ("Loss for final step", "Saving checkpoints for"). This module knows nothing else.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from absl import logging

_INFO = 20  # Python's logging.INFO: the level legacy Estimator's lines had.

ENV_VAR = "TPU_ESTIMATOR_COMPAT_PROGRESS"
MODES = ("log", "bar", "quiet")
_mode: str | None = None


def set_mode(mode: str | None) -> None:
    """Overrides the environment variable for this process (None: back to it)."""
    global _mode
    if mode is not None and mode not in MODES:
        raise ValueError(f"progress mode must be one of {MODES}; received {mode!r}.")
    _mode = mode


def mode() -> str:
    chosen = _mode or os.environ.get(ENV_VAR, "log")
    if chosen not in MODES:
        raise ValueError(f"{ENV_VAR} must be one of {MODES}; received {chosen!r}. Unset it "
                         "or pick one.")
    return chosen


def report(*, step: int, target: int | None, loss: float | None, steps_per_sec: float,
           examples_per_sec: float | None, stream: TextIO | None = None) -> None:
    """One loop's progress: a log line, a redrawn bar, or nothing."""
    chosen = mode()
    if chosen == "quiet":
        return
    examples = f", examples/sec = {examples_per_sec:.4g}" if examples_per_sec else ""
    if chosen == "log":
        logging.info("global_step = %d, loss = %.6g, global_step/sec = %.4g%s", step,
                     loss, steps_per_sec, examples)
        return
    stream = stream or sys.stderr
    if target:
        done = min(1.0, step / target)
        bar = "#" * int(30 * done) + "." * (30 - int(30 * done))
        line = f"\r[{bar}] {step}/{target} loss {loss:.4g} {steps_per_sec:.3g} steps/s"
    else:
        line = f"\rstep {step} loss {loss:.4g} {steps_per_sec:.3g} steps/s"
    stream.write(line)
    if target and step >= target:
        stream.write("\n")
    stream.flush()


def legacy_info(msg: str, *args: object) -> None:
    """Logs a line legacy Estimator logged, through the channel it used when that is on.

    Legacy wrote these through TensorFlow's `tensorflow` logger, which prints
    `INFO:tensorflow:Loss for final step: ...` (and, propagated, the absl-format line), and
    scripts' log scrapers look for that. When the script turned TensorFlow's INFO logging on
    (`tf.compat.v1.logging.set_verbosity(INFO)`), the line goes that way; otherwise through
    absl, as the rest of this library logs.
    """
    import tensorflow as tf  # Local: keep this module importable before TensorFlow.

    logger = tf.get_logger()
    if logger.isEnabledFor(_INFO):
        logger.info(msg, *args)
    else:
        logging.info(msg, *args)
