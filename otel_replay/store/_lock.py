"""The store lock: writers share it, gc's sweep takes it alone.

A flush holds it shared from the moment it asks which objects the store already has until its
index commit, so that what it found stays there; gc's sweep (the only thing that deletes an
object with no other copy) holds it exclusively. ``flock`` locks are released by the kernel
when a process dies, so a killed writer never leaves the store locked. Remote stores have no
lock: see ``_gc`` for how their sweep stays safe.
"""

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
