"""Keeping model_dir safe: one trainer per model_dir, and a checkpoint on interrupt.

* `ModelDirLock` takes an exclusive `flock` on `model_dir/.tpu_estimator_compat.lock` for the
  duration of `train()`. A second trainer on the same model_dir fails at once with a clear
  error instead of interleaving checkpoints; the OS releases the lock when the holder dies,
  even by SIGKILL, so a crash never leaves a stale lock.
* `StopSignals` turns SIGTERM into a request to stop after the current loop, so `train()`
  writes its final checkpoint and then exits with status 143. Ctrl-C (KeyboardInterrupt)
  reaches Python when the running loop returns; `train()` then checkpoints and re-raises.
  On a multi-worker job Ctrl-C is a stop request too, agreed by all workers
  (`cluster/preemption.py`).

It knows nothing about models or strategies.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import threading
from typing import Any

from tpu_estimator_compat import log as logging

LOCK_NAME = ".tpu_estimator_compat.lock"


class ModelDirInUseError(RuntimeError):
    """Another process is training into the same model_dir."""


class ModelDirLock:
    """An exclusive, crash-safe lock on a model_dir while training writes into it."""

    def __init__(self, model_dir: str) -> None:
        self._path = os.path.join(model_dir, LOCK_NAME)
        self._model_dir = model_dir
        self._fd: int | None = None

    def __enter__(self) -> "ModelDirLock":
        try:
            os.makedirs(self._model_dir, exist_ok=True)
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise PermissionError(
                f"`model_dir` ({self._model_dir}) is not writable: {e.strerror}. Pass a "
                "directory this process can create files in.") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EAGAIN, errno.EACCES):
                raise ModelDirInUseError(
                    f"`model_dir` ({self._model_dir}) is being trained by another process "
                    f"(it holds {self._path}). Two trainers on one model_dir would overwrite "
                    "each other's checkpoints: wait for it to finish, or use another "
                    "model_dir.") from e
            raise
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


class StopSignals:
    """SIGTERM means: finish this loop, checkpoint, exit. Installed only on the main thread.

    With `interrupt_too` (a multi-worker job) Ctrl-C (SIGINT) means the same: there a
    KeyboardInterrupt would stop this worker alone, mid-protocol, and leave the others
    waiting in a collective for it (the chief's final save hung that way). A second Ctrl-C
    interrupts at once. An ignored SIGINT (`nohup`, background jobs) stays ignored.
    """

    def __init__(self, *, interrupt_too: bool = False) -> None:
        self.terminated = False
        self.signal_name: str | None = None
        self._interrupt_too = interrupt_too
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            self._previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, self._on_signal)
            if self._interrupt_too and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                self._previous[signal.SIGINT] = signal.signal(signal.SIGINT, self._on_signal)
        return self

    def _on_signal(self, signum: int, frame: Any) -> None:
        del frame
        name = signal.Signals(signum).name
        if signum == signal.SIGINT:
            # The next Ctrl-C is a plain KeyboardInterrupt again.
            signal.signal(signal.SIGINT, self._previous.pop(signal.SIGINT))
        logging.warning("%s received: stopping after the current loop and writing a "
                        "checkpoint.", name)
        self.signal_name = self.signal_name or name
        self.terminated = True

    def __exit__(self, *exc: Any) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous = {}

    def after_loop(self, step: int, result: Any, seconds: float) -> bool:
        """Driver listener: stop when a SIGTERM arrived."""
        return self.terminated

    def close(self) -> None:
        pass
