"""Steps in flight, so none is lost when the application drops a response or the process
ends under one."""

from __future__ import annotations

import weakref
from collections import deque
from typing import Protocol


class OpenStep(Protocol):
    """A step in flight: an HTTP exchange (``_step.OpenStep``) or a tool call."""

    def finish(self, complete: bool) -> None:
        """End it at exit or once its dropped stream is collected."""

    def cut(self, cause: str) -> bool:
        """End it as cut off by ``cause``; False when it had already ended."""


__all__ = ["OpenSteps", "cut_in_flight"]

_RECORDERS: weakref.WeakSet[OpenSteps] = weakref.WeakSet()


class OpenSteps:
    """The steps of one recorder that began and have not ended."""

    def __init__(self) -> None:
        self._open: set[OpenStep] = set()
        # Appended to by garbage-collector callbacks; deque appends and pops need no lock.
        self._dropped: deque[OpenStep] = deque()
        _RECORDERS.add(self)

    def begin(self, step: OpenStep) -> None:
        """``step`` began (its request is about to be sent)."""
        self._open.add(step)

    def track(self, tee: object, step: OpenStep) -> None:
        """Watch ``tee``, the response stream of ``step``: dropped unclosed, it ends the step."""
        weakref.finalize(tee, self._dropped.append, step)

    def claim(self, step: OpenStep) -> bool:
        """True for the one caller that gets to end ``step`` (a set removal is atomic)."""
        try:
            self._open.remove(step)
        except KeyError:
            return False
        return True

    def finish_dropped(self) -> None:
        """Finish, as incomplete, the steps whose stream the application dropped unclosed."""
        dropped = self._dropped
        while dropped:
            try:
                step = dropped.popleft()
            except IndexError:  # another thread took the last one
                return
            step.finish(complete=False)

    def finish_all(self) -> None:
        """Finish every step still open (at exit): what was read is kept, as incomplete."""
        self.finish_dropped()
        for step in list(self._open):
            step.finish(complete=False)


def cut_in_flight(cause: str) -> int:
    """End every open step of every recorder as cut off by ``cause`` (``SIGTERM``): an error
    of that type, with what was read of its answer. How many were ended.

    Ending a step takes the span processors' and the hand-off's locks: call it from a thread
    that holds none of the application's (the SIGTERM handler uses a thread of its own)."""
    cut = 0
    for steps in list(_RECORDERS):
        for step in list(steps._open):
            cut += step.cut(cause)
    return cut
