"""Our wrappers on a framework's functions: put on, taken off, and what a call does when
it cannot be made a step."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import wrapt

__all__ = ["unrecorded", "wrap", "wrap_each", "wrap_subclasses"]

_log = logging.getLogger("otel_replay")
_said: set[str] = set()


def unrecorded(framework: str, exc: Exception) -> None:
    """Say once per framework and process that a tool call of ``framework`` could not be made
    a step (it then runs as it would without us); never raises into the application."""
    if framework not in _said:
        _said.add(framework)
        _log.warning("otel-replay: a %s tool call is not recorded: %r", framework, exc)


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


def wrap_each(owner: Any, wrappers: dict[str, Callable[..., Any]]) -> Callable[[], None]:
    """:func:`wrap` each ``owner.attr`` with its wrapper, all or none (a failure undoes those
    already wrapped, then raises); returns the undo of all, in reverse order."""
    undos: list[Callable[[], None]] = []

    def undo() -> None:
        for undo_one in reversed(undos):
            undo_one()

    try:
        for attr, wrapper in wrappers.items():
            undos.append(wrap(owner, attr, wrapper))
    except Exception:
        undo()
        raise
    return undo


def wrap_subclasses(base: type[Any], wrappers: dict[str, Callable[..., Any]]) -> Callable[[], None]:
    """:func:`wrap` each method named in ``wrappers`` on ``base`` and on every subclass of it
    that defines its own: those there now and those defined later (through
    ``__init_subclass__``). Returns the undo of all."""
    undos: list[Callable[[], None]] = []

    def wrap_class(cls: type[Any]) -> None:
        for attr, wrapper in wrappers.items():
            if attr in vars(cls):
                undos.append(wrap(cls, attr, wrapper))

    seen: set[type[Any]] = set()
    pending = [base]
    while pending:
        cls = pending.pop()
        if cls not in seen:
            seen.add(cls)
            wrap_class(cls)
            pending.extend(cls.__subclasses__())

    before = vars(base).get("__init_subclass__")

    def init_subclass(cls: type[Any], /, **kwargs: Any) -> None:
        if before is not None:
            before.__get__(None, cls)(**kwargs)
        else:
            super(base, cls).__init_subclass__(**kwargs)
        wrap_class(cls)

    ours = classmethod(init_subclass)
    base.__init_subclass__ = ours  # type: ignore[assignment]

    def undo() -> None:
        if vars(base).get("__init_subclass__") is ours:
            if before is None:
                del base.__init_subclass__
            else:
                base.__init_subclass__ = before
        for undo_one in reversed(undos):
            undo_one()

    return undo
