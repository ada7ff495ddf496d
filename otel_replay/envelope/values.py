"""Values as steps: the clock, random ids, any nondeterministic call, and named state.

Steps of one name are matched in order: the third ``now()`` of a replay gets the third
recorded time (in a thread or task of its own, the first recorded after its own last step)."""

from __future__ import annotations

import datetime as dt
import typing
import uuid as uuid_module
from collections.abc import Callable
from typing import Any, TypeVar

from otel_replay._canonical import parse_json
from otel_replay.envelope import TIME_VALUE
from otel_replay.envelope._jsonable import (
    Unfit,
    encode,
    encode_exact,
    json_kind,
    restore_body,
    restorer,
)
from otel_replay.envelope._steps import named_call, perform
from otel_replay.envelope._uuids import REAL_UUID4, draw

__all__ = ["checkpoint", "now", "side_effect", "uuid4"]

T = TypeVar("T")
_NO_ARGUMENTS = b"{}"


def now() -> dt.datetime:
    """The current time as an aware datetime in the local zone; the recorded one on replay."""
    return perform(
        named_call("value", TIME_VALUE, instant=True),
        lambda: dt.datetime.now().astimezone(),
        lambda value: encode_exact(value.isoformat()),
        _recorded_time,
    )


def uuid4() -> uuid_module.UUID:
    """A random UUID; the recorded one on replay."""
    return draw("uuid4", REAL_UUID4)


def side_effect(name: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` as a step named ``name``: run and recorded, or, on replay, its
    recorded value (restored to ``fn``'s annotated return type) or its recorded exception."""
    arguments = encode({"args": list(args), "kwargs": kwargs})
    value: T = perform(
        named_call("value", name, arguments, instant=False),
        lambda: fn(*args, **kwargs),
        encode_exact,
        restorer(fn),
    )
    return value


def checkpoint(name: str, state: T) -> T:
    """Record ``state`` as the checkpoint ``name`` and return it; on replay, the recorded
    state (as ``state``'s type where it validates as one)."""
    value: T = perform(
        named_call("checkpoint", name, instant=True),
        lambda: state,
        encode_exact,
        lambda body: typing.cast(T, restore_body(body, type(state))),
    )
    return value


def _recorded_time(body: bytes) -> dt.datetime:
    text = parse_json(body)
    try:
        time = dt.datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise Unfit(f"the recorded time is not an ISO 8601 text: {_what(text)}") from None
    if time.tzinfo is None:  # now() gives an aware datetime, and code compares it with one
        raise Unfit("the recorded time has no UTC offset")
    return time


def _what(value: Any) -> str:
    return "a string that is not one" if isinstance(value, str) else json_kind(value)
