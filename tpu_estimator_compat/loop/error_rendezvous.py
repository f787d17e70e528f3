"""The most informative of the errors several threads of one run raised.

Synopsis::

    rendezvous = ErrorRendezvous(num_sources=2)
    with rendezvous.catch_errors(source="infeed"):
        feed()                                   # on its own thread
    rendezvous.record_done("infeed")
    rendezvous.raise_errors(timeout_sec=5)       # on the main thread

Legacy `tpu.error_handling.ErrorRendezvous`. When a run's threads fail together, the first
error to arrive is often the least useful ("session cancelled", raised because another thread
failed), so each source's error is kept until every source has reported, and the root cause
is raised: any error but a cancellation first, a cancellation only when nothing else failed.
Aborted and unavailable errors, which a TF1 session's recovery handled itself, are not kept.
Given the run's session, a failure closes it after a few seconds so the other threads cannot
block on it forever.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from types import TracebackType
from typing import Any, Iterator

import tensorflow as tf

from tpu_estimator_compat import log as logging

_UNINTERESTING_ERRORS = (tf.errors.CancelledError,)
_IGNORED_ERRORS = (tf.errors.AbortedError, tf.errors.UnavailableError)
_CHECK_NUMERICS_OP = "CheckNumerics"
# How long a failure waits for a more informative error before closing the session.
CLOSE_SESSION_AFTER_SECS = 5.0

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


class ErrorRendezvous:
    """Keeps each source's error until all `num_sources` sources have reported."""

    def __init__(self, num_sources: int) -> None:
        self._errors: dict[str, ExcInfo | None] = {}
        self._num_sources = num_sources
        self._session_cancel_timer: threading.Thread | None = None

    def record_error(self, source: str, exc_info: ExcInfo, session: Any = None) -> None:
        """Keeps `source`'s error (`sys.exc_info()`); closes `session` a little later."""
        value = exc_info[1]
        if isinstance(value, _IGNORED_ERRORS):
            return
        self._errors[source] = exc_info
        if getattr(getattr(value, "op", None), "type", None) == _CHECK_NUMERICS_OP:
            return  # A NaN check: the loop itself ended normally; nothing hangs.
        if session is not None and self._session_cancel_timer is None:
            def close_session() -> None:
                time.sleep(CLOSE_SESSION_AFTER_SECS)
                logging.error("Closing session due to error %s", value)
                try:
                    session.close()
                except Exception:  # pylint: disable=broad-except  # Best effort only.
                    logging.error("Failed to close session after error. Other threads may "
                                  "hang.")

            self._session_cancel_timer = threading.Thread(target=close_session, daemon=True)
            self._session_cancel_timer.start()

    def record_done(self, source: str) -> None:
        """`source` finished; an error it reported stays."""
        logging.info("%s marked as finished", source)
        self._errors.setdefault(source, None)

    @contextlib.contextmanager
    def catch_errors(self, source: str, session: Any = None) -> Iterator[None]:
        """Records any exception raised inside the block as `source`'s error."""
        try:
            yield
        except Exception:  # pylint: disable=broad-except  # Re-raised by raise_errors.
            self.record_error(source, sys.exc_info(), session)  # type: ignore[arg-type]

    def raise_errors(self, timeout_sec: int = 0) -> None:
        """Waits up to `timeout_sec` seconds for every source, then raises the root cause."""
        for _ in range(timeout_sec):
            if len(self._errors) == self._num_sources:
                break
            time.sleep(1)
        kept = [info for info in self._errors.values() if info is not None]
        kept.sort(key=lambda info: isinstance(info[1], _UNINTERESTING_ERRORS))
        if kept:
            logging.warning("Reraising captured error")
            raise kept[0][1].with_traceback(kept[0][2])
