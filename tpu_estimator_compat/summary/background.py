"""Host work that runs on one background thread, in order, while the device runs on.

A compiled loop releases the GIL while it runs, and so does a v1 `Session.run`; on a
machine with a free core, host work handed to a worker thread between loops (metric_fn
updates during evaluation, legacy's training summaries) overlaps the next loop instead of
adding to it. `InOrder` keeps the order of submission, bounds what waits, and hands the
first failure back to the caller's thread.
"""

from __future__ import annotations

import collections
import concurrent.futures
from typing import Any, Callable


class InOrder:
    """Runs submitted calls on one worker thread, in submission order.

    At most `max_pending` calls wait or run, bounding memory; the first failure is raised
    by the next `submit` or by `drain`, which every caller must reach before reading what
    the calls produced. `name` names the thread (seen in profiles and stack dumps).
    """

    def __init__(self, max_pending: int = 2, name: str = "host_work") -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=name)
        self._pending: collections.deque[concurrent.futures.Future] = collections.deque()
        self._max_pending = max_pending

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        """Queues `fn(*args)`; waits while `max_pending` calls are queued or running."""
        while self._pending and (len(self._pending) >= self._max_pending
                                 or self._pending[0].done()):
            self._pending.popleft().result()  # Re-raises the call's exception.
        self._pending.append(self._executor.submit(fn, *args))

    def drain(self) -> None:
        """Waits for every queued call; raises the first one's exception."""
        while self._pending:
            self._pending.popleft().result()

    def close(self) -> None:
        """Cancels what has not started, waits for the running one. Safe to call twice."""
        self._pending.clear()
        self._executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "InOrder":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
