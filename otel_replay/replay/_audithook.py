"""The listeners of one CPython audit hook.

An audit hook cannot be removed: the first listener added installs it, and once none is left
it idles (its hook reads :attr:`AuditListeners.active` and returns).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["AuditListeners"]

T = TypeVar("T")


class AuditListeners(Generic[T]):
    """Listeners of ``hook``, which reads :attr:`active`: replaced, never mutated, so the hook
    reads it without the lock. ``add``/``remove`` nest (a listener may be added twice)."""

    def __init__(self, hook: Callable[[str, tuple[Any, ...]], None]) -> None:
        self._hook = hook
        self._lock = threading.Lock()
        self._hooked = False
        self.active: tuple[T, ...] = ()

    def add(self, listener: T) -> None:
        """Start telling ``listener`` (installing the hook the first time)."""
        with self._lock:
            if not self._hooked:
                sys.addaudithook(self._hook)
                self._hooked = True
            self.active = (*self.active, listener)

    def remove(self, listener: T) -> None:
        """Stop telling ``listener`` (once, if it was added)."""
        with self._lock:
            if listener in self.active:
                active = list(self.active)
                active.remove(listener)
                self.active = tuple(active)
