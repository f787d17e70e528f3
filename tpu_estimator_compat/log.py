"""The library's two log channels, neither of which changes the user's logging set-up.

A legacy script's log is read by people and by tools (`grep "Saving dict for global step"`),
so this library writes it as the legacy stack did, and leaves the script's own logging
configuration exactly as the script (and absl's `app.run`) made it:

* Legacy's lines (`Saving checkpoints for N into ...`, `Loss for final step: ...`,
  `Saving dict for global step N: ...`, `global_step/sec: ...`; `legacy_info`,
  `legacy_warning`) go through TensorFlow's `tensorflow` logger at legacy's level, as
  tensorflow-estimator wrote them through `tf.compat.v1.logging`. So they print when legacy
  printed them: `INFO:tensorflow:...` from that logger's own handler once its level (or, at
  NOTSET, the root logger's, which absl's `app.run` sets to INFO) lets INFO through, and
  again in absl's format from absl's handler on the root logger.
* The library's own lines (which strategy runs, fallbacks, what it restored; `info`,
  `warning`, `error`, `debug`) go through absl's logger object: absl's format at the
  script's absl verbosity once `app.run` has installed absl's handler; before that (the
  launcher's set-up, scripts without `app.run`) a line the absl verbosity lets through is
  written to stderr by absl's handler directly, which stays off the root logger.

Neither channel calls absl's module functions (`absl.logging.info(...)`): those call
`logging.basicConfig()` when the root logger has no handler yet, and a library line logged
then would give the root logger a stderr handler the script never asked for, through which
every `tensorflow` line would print a second time. Nothing here sets a level, a handler or an
absl flag.
"""

from __future__ import annotations

import logging as _py_logging
from typing import Any

from absl import logging as _absl_logging

DEBUG = _py_logging.DEBUG
INFO = _py_logging.INFO
WARNING = _py_logging.WARNING
ERROR = _py_logging.ERROR


def _own(level: int, msg: str, *args: Any, **kwargs: Any) -> None:
    logger = _absl_logging.get_absl_logger()
    if logger.hasHandlers() or not logger.isEnabledFor(level):
        logger.log(level, msg, *args, **kwargs)
        return
    # No handler anywhere yet (no `app.run`, no `basicConfig`), but the script asked for this
    # level (`absl.logging.set_verbosity(INFO)` in a script without `app.run`): the line goes
    # to stderr in absl's format through absl's own handler, as absl's module functions print
    # it, without installing that handler (or any) on the root logger.
    fn, lno, func, _ = logger.findCaller()
    _absl_logging.get_absl_handler().handle(
        logger.makeRecord(logger.name, level, fn, lno, msg, args, None, func))


def debug(msg: str, *args: Any, **kwargs: Any) -> None:
    """One of the library's own DEBUG lines (absl's logger)."""
    _own(DEBUG, msg, *args, **kwargs)


def info(msg: str, *args: Any, **kwargs: Any) -> None:
    """One of the library's own INFO lines (absl's logger)."""
    _own(INFO, msg, *args, **kwargs)


def warning(msg: str, *args: Any, **kwargs: Any) -> None:
    """One of the library's own WARNING lines (absl's logger)."""
    _own(WARNING, msg, *args, **kwargs)


def error(msg: str, *args: Any, **kwargs: Any) -> None:
    """One of the library's own ERROR lines (absl's logger)."""
    _own(ERROR, msg, *args, **kwargs)


_V1_LOGGING_FUNCTIONS = {DEBUG: "debug", INFO: "info", WARNING: "warning", ERROR: "error"}


def legacy(level: int, msg: str, *args: Any) -> None:
    """A line legacy's stack logged, word for word, through TensorFlow's logger.

    tensorflow-estimator wrote these lines with `tf.compat.v1.logging.<level>`: when code
    has replaced or wrapped that function (legacy's own tests count warnings through
    `mock.patch.object(tf.compat.v1.logging, 'warning')`), the line goes to the replacement,
    which sees what it saw on legacy. Otherwise it goes to TensorFlow's logger directly (what
    TensorFlow's function does), which names the first caller outside this file as the
    line's source.
    """
    import tensorflow as tf  # Local: this module is imported before TensorFlow loads.

    name = _V1_LOGGING_FUNCTIONS.get(level)
    function = getattr(tf.compat.v1.logging, name) if name else None
    if function is None or getattr(function, "__module__", None) == tf.get_logger.__module__:
        tf.get_logger().log(level, msg, *args)
    else:
        function(msg, *args)


def legacy_enabled(level: int) -> bool:
    """Whether a legacy line at `level` would print (lets a caller skip building many)."""
    import tensorflow as tf

    return tf.get_logger().isEnabledFor(level)


def legacy_info(msg: str, *args: Any) -> None:
    """A line legacy logged at INFO (`INFO:tensorflow:...`)."""
    legacy(INFO, msg, *args)


def legacy_warning(msg: str, *args: Any) -> None:
    """A line legacy logged at WARNING (`WARNING:tensorflow:...`)."""
    legacy(WARNING, msg, *args)


# absl's logger names the first frame outside absl's own logging module as a line's source:
# skip these wrappers too, so that it names the library module that logged.
for _name in ("_own", "debug", "info", "warning", "error"):
    _absl_logging.ABSLLogger.register_frame_to_skip(__file__, _name)
