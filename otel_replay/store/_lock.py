"""The store lock: flushes share it, gc's sweep takes it alone."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["StoreLock"]


class StoreLock:
    """The ``LOCK`` file of a local store (``path`` None: a remote or read-only store, where
    locking does nothing)."""

    def __init__(self, path: Path | None) -> None:
        self._path = path

    @contextlib.contextmanager
    def _held(self, mode: int) -> Iterator[bool]:
        if self._path is None:
            yield True
            return
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, mode)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def shared(self) -> contextlib.AbstractContextManager[bool]:
        """Held while a flush decides what is new and commits it."""
        return self._held(fcntl.LOCK_SH)

    def exclusive(self, *, wait: bool = True) -> contextlib.AbstractContextManager[bool]:
        """Held while objects are deleted; yields False when ``wait`` is off and it is taken."""
        return self._held(fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
