"""Steps in flight, so none is lost when the application drops a response or the process
ends under one.

A step is open from its request until its response ends: the request is on its way, or the
answer is being read. A streamed response's step ends when the application exhausts or closes
the stream. An application can also do neither: it drops the response, or exits while holding
it. Such a step still ends, recording what was read as incomplete:

* when its tee is garbage-collected, the step is queued, and the next step to begin (on any
  thread) finishes it. Not in the collector's callback itself: the collector can run while
  any lock is held, and ending a span takes the processors' locks;
* at interpreter exit, :meth:`OpenSteps.finish_all` (an exit hook the instrumentor registers
  after the SDK's providers, so it runs before they flush) finishes every step still open;
* when SIGTERM is about to kill the process, :func:`cut_in_flight` ends every open step of
  every recorder as cut off by the signal (its request, and what was read of its answer).

A tool step (``envelope``) is open too, from its call until its body returns or raises: cut
off, it is recorded with its arguments as an error of the signal's type. At exit it is left as
it is (a daemon thread's tool still running has no answer to keep).

Ending a step is claimed here (:meth:`OpenSteps.claim`, one atomic set removal), so a step the
application finishes while an exit hook or the signal path ends it is recorded once.
"""

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
