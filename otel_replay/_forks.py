"""Objects that make their locks anew in a forked child (:func:`mend_in_child`)."""

from __future__ import annotations

import os
import weakref
from typing import Protocol

__all__ = ["mend_in_child"]


class _Mended(Protocol):
    def _after_fork_in_child(self) -> None: ...


_LIVE: weakref.WeakSet[_Mended] = weakref.WeakSet()


def mend_in_child(owner: _Mended) -> None:
    """Run ``owner._after_fork_in_child()`` in every child forked while ``owner`` lives."""
    _LIVE.add(owner)


def _after_fork_in_child() -> None:
    for owner in list(_LIVE):
        owner._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
