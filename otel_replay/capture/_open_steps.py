"""Steps whose response stream is still open, so none is lost when the application drops it.

A streamed response's step ends when the application exhausts or closes the stream. An
application can also do neither: it drops the response, or exits while holding it. Such a
step still ends, recording what was read as incomplete:

* when its tee is garbage-collected, the step is queued, and the next step to begin (on any
  thread) finishes it. Not in the collector's callback itself: the collector can run while
  any lock is held, and ending a span takes the processors' locks;
* at interpreter exit, :meth:`OpenSteps.finish_all` (an exit hook the instrumentor registers
  after the SDK's providers, so it runs before they flush) finishes every step still open.
"""

from __future__ import annotations

import weakref
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from otel_replay.capture._step import OpenStep

__all__ = ["OpenSteps"]


class OpenSteps:
    """The steps of one recorder whose response stream is tee'd and not yet finished."""

    def __init__(self) -> None:
        self._open: set[OpenStep] = set()
        # Appended to by garbage-collector callbacks; deque appends and pops need no lock.
        self._dropped: deque[OpenStep] = deque()

    def track(self, tee: object, step: OpenStep) -> None:
        """Watch ``step``, whose response stream is ``tee``, until it finishes."""
        self._open.add(step)
        weakref.finalize(tee, self._dropped.append, step)

    def untrack(self, step: OpenStep) -> None:
        """``step`` finished (called by the step itself)."""
        self._open.discard(step)

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
