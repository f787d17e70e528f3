"""background.InOrder: host work on one worker thread, in order, errors back to the caller."""

import threading
import time

import pytest

from tpu_estimator_compat.summary import background as background_lib


def test_in_order_runs_calls_in_submission_order_off_the_calling_thread():
    seen = []
    with background_lib.InOrder(max_pending=2) as background:
        for i in range(20):
            background.submit(lambda i=i: seen.append((i, threading.current_thread().name)))
        background.drain()
    assert [i for i, _ in seen] == list(range(20))
    assert {name for _, name in seen} != {threading.current_thread().name}


def test_in_order_raises_the_call_error_at_drain_or_next_submit():
    def fail():
        raise ValueError("bad batch")

    background = background_lib.InOrder()
    background.submit(fail)
    with pytest.raises(ValueError, match="bad batch"):
        background.drain()
    background.submit(fail)
    time.sleep(0.2)  # The failed update is done: the next submit reports it.
    with pytest.raises(ValueError, match="bad batch"):
        background.submit(lambda: None)
    background.close()


def test_in_order_keeps_at_most_max_pending_waiting():
    release = threading.Event()
    started = []
    background = background_lib.InOrder(max_pending=2)
    background.submit(lambda: (started.append(1), release.wait(5)))
    background.submit(lambda: started.append(2))
    blocked = threading.Thread(target=background.submit, args=(lambda: started.append(3),))
    blocked.start()
    blocked.join(0.3)
    assert blocked.is_alive()  # The third waits for the first to finish.
    release.set()
    blocked.join(5)
    background.drain()
    background.close()
    assert started == [1, 2, 3]
