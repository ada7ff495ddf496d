"""One wrapt wrapper put on a framework's function, and taken off again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import wrapt

__all__ = ["wrap"]


def wrap(owner: Any, attr: str, wrapper: Callable[..., Any]) -> Callable[[], None]:
    """Wrap ``owner.attr`` (a module's function or a class's method, defined on ``owner``
    itself) with the wrapt ``wrapper``; returns the undo. Raises AttributeError when
    ``owner`` does not define ``attr`` (a framework version we do not know).

    The undo puts back exactly what was there (the plain function or descriptor), and only
    while our wrapper is still the one in place, so a wrapper someone added on top of ours
    is not silently thrown away.
    """
    try:
        original = vars(owner)[attr]
    except KeyError:
        raise AttributeError(f"{getattr(owner, '__name__', owner)!s}.{attr} is missing") from None
    if not callable(original) and not hasattr(original, "__get__"):
        raise AttributeError(f"{getattr(owner, '__name__', owner)!s}.{attr} is not a function")
    wrapt.wrap_function_wrapper(owner, attr, wrapper)
    ours = vars(owner)[attr]

    def undo() -> None:
        if vars(owner).get(attr) is ours:
            setattr(owner, attr, original)

    return undo
