"""The store's locks: a local store's ``LOCK`` (flushes share it, gc's sweep takes it
alone), and a remote store's gc lease (``locks/``)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

from otel_replay.store._fs import Backend

__all__ = ["LEASE_STALE_S", "LOCKS_DIR", "GcBusyError", "GcLease", "StoreLock"]


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


LOCKS_DIR = "locks"
"""Remote stores: one object per gc at work (:class:`GcLease`)."""
LEASE_STALE_S = 1800.0
"""A gc lock not refreshed for this long (by the server's clock) belongs to a gc that died."""
LEASE_KEEP_S = 60.0
"""How often a gc at work writes its lease again (:meth:`GcLease.keep`)."""


class GcBusyError(Exception):
    """Another gc holds a lease on the store (or took ours away as stale)."""


class GcLease:
    """A remote store's gc lock, as restic's lock files: an object ``locks/gc-<id>`` that its
    gc writes again at each stage (:meth:`refresh`). A gc starts only when no other gc's
    object is younger than :data:`LEASE_STALE_S` by the server's clock, and checks its own
    is still there before it deletes; two gcs that start at once both step back. Each write
    also tells the gc the server's time (the object's ``LastModified``): gc judges every age
    by it, never by its own machine's clock."""

    def __init__(self, backend: Backend) -> None:
        import socket  # noqa: PLC0415 - only a remote store's gc pays for importing it

        self._backend = backend
        self.rel = f"{LOCKS_DIR}/gc-{os.urandom(8).hex()}"  # secrets.token_hex, without random
        self._body = json.dumps({"host": socket.gethostname(), "pid": os.getpid()}).encode()
        self._kept = 0.0

    def acquire(self) -> float:
        """Take the lease; the server's time. GcBusyError naming the other gc when one is
        at work (stale leases are removed)."""
        now = self.refresh(check=False)
        for rel, (_, stamp) in self._backend.find(LOCKS_DIR).items():
            if rel == self.rel:
                continue
            if now - stamp >= LEASE_STALE_S:
                self._backend.delete(rel)
                continue
            self.release()
            where = self._backend.location
            raise GcBusyError(f"another gc is at work on {where} ({self._who(rel)}, {rel})")
        return now

    def refresh(self, *, check: bool = True) -> float:
        """Write the lease again; the server's time. GcBusyError when it was removed (held
        past :data:`LEASE_STALE_S`, another gc took it for a dead one's)."""
        if check and not self._backend.exists(self.rel):
            raise GcBusyError(f"this gc's lock {self.rel} was removed as stale")
        self._backend.publish(self.rel, self._body)
        self._kept = time.monotonic()
        return self._backend.stamp(self.rel)

    def keep(self) -> None:
        """Refresh the lease if it was not for :data:`LEASE_KEEP_S` (for a long stage)."""
        if time.monotonic() - self._kept > LEASE_KEEP_S:
            self.refresh()

    def release(self) -> None:
        """Give the lease up."""
        self._backend.delete(self.rel)

    def _who(self, rel: str) -> str:
        try:
            holder = json.loads(self._backend.read(rel))
            return f"host {holder['host']}, pid {holder['pid']}"
        except (OSError, ValueError, KeyError, TypeError):
            return "holder unknown"
