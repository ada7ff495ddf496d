"""Integers shared by a process and its worker processes (:class:`SharedCells`)."""

from __future__ import annotations

import logging
import mmap
import os
import struct
import tempfile
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from otel_replay._forks import mend_in_child

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["SharedCells"]

_log = logging.getLogger("otel_replay")

_CELL = struct.Struct("<q")


def _new_file(size: int) -> int:
    """A descriptor of a new file of ``size`` zero bytes that no path names; -1 when there is
    none to be had (the cells are then the process's own)."""
    if fcntl is None:  # pragma: no cover - Windows
        return -1
    try:
        try:
            fd = os.memfd_create("otel-replay", os.MFD_CLOEXEC)
        except (AttributeError, OSError):  # macOS, or a kernel without memfd
            with tempfile.TemporaryFile() as file:
                fd = os.dup(file.fileno())
    except OSError as exc:
        _log.warning("otel-replay: no shared memory for worker processes (%s)", exc)
        return -1
    try:
        os.ftruncate(fd, size)
    except OSError as exc:
        os.close(fd)
        _log.warning("otel-replay: no shared memory for worker processes (%s)", exc)
        return -1
    return fd


def _private(size: int) -> mmap.mmap:
    """Memory of this process's own: a forked child gets a copy."""
    private = getattr(mmap, "MAP_PRIVATE", None)
    if private is None:  # pragma: no cover - Windows: nothing is shared anyway
        return mmap.mmap(-1, size)
    return mmap.mmap(-1, size, flags=private | getattr(mmap, "MAP_ANONYMOUS", 0))


def _close(fd: int) -> None:
    if fd >= 0:
        os.close(fd)


class SharedCells:
    """``count`` integers, all 0 at first, shared with every process forked after they were
    made (and with processes that :meth:`attach` them); thread- and process-safe under
    :meth:`locked`. Read and write cells with :meth:`get` and :meth:`set` under the lock, or
    use :meth:`add`."""

    def __init__(self, count: int, *, fd: int | None = None) -> None:
        self.count = count
        size = max(_CELL.size * count, _CELL.size)
        self._fd = _new_file(size) if fd is None else fd
        self._map = mmap.mmap(self._fd, size) if self._fd >= 0 else _private(size)
        self._lock = threading.Lock()
        weakref.finalize(self, _close, self._fd)
        mend_in_child(self)

    @classmethod
    def attach(cls, handle: Any) -> SharedCells:
        """The cells a parent's :meth:`handle` stands for, in the child it was passed to.
        ValueError when ``handle`` is not one."""
        if not (isinstance(handle, tuple) and len(handle) == 2 and isinstance(handle[1], int)):
            raise ValueError(f"not a handle of shared cells: {handle!r}")
        fd = handle[0].detach()
        if not isinstance(fd, int) or fd < 0:
            raise ValueError(f"not a file descriptor: {fd!r}")
        return cls(handle[1], fd=fd)

    def handle(self) -> tuple[Any, int] | None:
        """What a child that multiprocessing starts fresh needs to :meth:`attach` these cells:
        the file descriptor, passed the way multiprocessing passes its own. Call it only while
        multiprocessing pickles that child's start-up data (``_workers``); None where the
        cells cannot be shared."""
        if self._fd < 0:
            return None
        from multiprocessing import reduction  # noqa: PLC0415 - only where workers start

        return (reduction.DupFd(self._fd), self.count)

    @property
    def shared(self) -> bool:
        """Whether other processes can see these cells (else they are this process's own)."""
        return self._fd >= 0

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the cells alone: no other thread or process changes them meanwhile."""
        with self._lock:
            if self._fd < 0:
                yield
                return
            try:
                fcntl.lockf(self._fd, fcntl.LOCK_EX)
            except OSError as exc:  # pragma: no cover - no record locks on this file system
                _log.warning("otel-replay: cannot lock shared memory (%s); one process only", exc)
                yield
                return
            try:
                yield
            finally:
                fcntl.lockf(self._fd, fcntl.LOCK_UN)

    def get(self, cell: int) -> int:
        """The value of ``cell`` (a value written under the lock, read whole)."""
        value: int = _CELL.unpack_from(self._map, cell * _CELL.size)[0]
        return value

    def set(self, cell: int, value: int) -> None:
        """Write ``cell``; call it under :meth:`locked`."""
        _CELL.pack_into(self._map, cell * _CELL.size, value)

    def add(self, cell: int, delta: int = 1) -> int:
        """Add ``delta`` to ``cell``; the value it had before."""
        with self.locked():
            value = self.get(cell)
            self.set(cell, value + delta)
        return value

    def _after_fork_in_child(self) -> None:
        # A thread of the parent may have held the lock when it forked; the record lock is
        # not inherited, so only the thread lock needs making anew.
        self._lock = threading.Lock()
