"""A recorded value that does not fit what its step gives back, named in one short line.

A recording is input (an OTLP file from anywhere, a store someone changed): a step's
``restore`` raises :class:`Unfit` when the recorded value is not what its call returns, and
the step (``_envelope``) turns that into a
:class:`~otel_replay.errors.RecordedValueError` naming the run and the step.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Unfit", "first_line", "json_kind"]

_MAX_LINE = 200


class Unfit(ValueError):
    """Raised by a step's ``restore``: the recorded value is not what the call must give back;
    the message says what is wrong with it (``the recorded session items are not a list``)."""


def json_kind(value: Any) -> str:
    """What a parsed JSON value is, for an :class:`Unfit` message (``an array``), never the
    value itself: it may be huge."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (its type's name when it has none), cut to 200
    characters: it may quote the recorded value."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= _MAX_LINE else text[: _MAX_LINE - 1] + "…"
