"""OpenAI Agents SDK sessions (conversation memory: ``SQLiteSession``, ``RedisSession``,
``SQLAlchemySession``, any ``SessionABC``): what a run reads of its session is a step; on
replay the user's session store is neither read nor written.

``Runner.run(..., session=...)`` starts from the session's items and adds the run's own at
its end. With a session that outlives the process, a replay would start from whatever the
session holds by then and append to it. So, on every ``SessionABC`` subclass:

* ``get_items`` and ``pop_item`` (which returns what it removed) are ``checkpoint`` steps
  named ``agents.session.<method>``, the session id (and ``limit``) their arguments, the items
  their result; on replay they are served as recorded and ``pop_item`` removes nothing;
* ``add_items`` and ``clear_session`` run as they would without us when recording, are not
  steps, and do not run under replay.

A session that implements the ``Session`` protocol without subclassing ``SessionABC`` is not
seen: it is read and written live, in a replay too.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from types import ModuleType
from typing import Any

from otel_replay.envelope._jsonable import Unfit, encode, encode_exact, json_kind, restore_body
from otel_replay.envelope._steps import (
    Call,
    active,
    named_call,
    perform_async,
    recorded_at,
    serving,
)
from otel_replay.envelope.frameworks._patch import unrecorded, wrap_subclasses

__all__ = ["patch"]

_FRAMEWORK = "Agents SDK session"
# Set while a session method runs: the session methods it calls are part of its step.
_inside: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "otel_replay_agents_session", default=False
)


def patch(module: ModuleType) -> Callable[[], None]:
    """Make the reads of every ``module.SessionABC`` a step and keep its writes from running
    under replay; returns the undo."""
    return wrap_subclasses(
        module.SessionABC,
        {
            "get_items": _read("get_items", []),
            "pop_item": _read("pop_item", None),
            "add_items": _write,
            "clear_session": _write,
        },
    )


def _call(method: str, instance: Any, kwargs: dict[str, Any]) -> Call:
    name = f"agents.session.{method}"
    arguments: dict[str, Any] = {"session_id": getattr(instance, "session_id", None)}
    if kwargs.get("limit") is not None:
        arguments["limit"] = kwargs["limit"]
    return named_call("checkpoint", name, encode(arguments), instant=False)


def _read(method: str, empty: Any) -> Callable[..., Any]:
    """The wrapper of a read; ``empty`` is what it finds in an empty session."""

    async def nothing() -> Any:
        """A replay's read that no recorded one answers (a non-strict replay gone past its
        recording): the session is not asked, so it holds nothing."""
        return empty

    restored = _items if method == "get_items" else _item

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        if _inside.get() or not active():
            return wrapped(*args, **kwargs)
        try:
            named = dict(kwargs)
            if args:  # get_items(limit) is the only positional one
                named["limit"] = args[0]
            call = _call(method, instance, named)
        except Exception as exc:  # a call shape we do not know: it runs unrecorded
            unrecorded(_FRAMEWORK, exc)
            return wrapped(*args, **kwargs)

        def run() -> Any:
            return wrapped(*args, **kwargs)

        async def step() -> Any:
            token = _inside.set(True)
            try:
                if not serving():
                    return await perform_async(call, run, encode_exact, restore_body)
                if recorded_at(call.kind, call.name):
                    return await perform_async(call, nothing, encode_exact, restored)
                # Recorded before these reads were steps: the items are read live, and
                # pop_item, a write, removes nothing.
                return await (run() if method == "get_items" else nothing())
            finally:
                _inside.reset(token)

        return step()

    return wrapper


def _items(body: bytes) -> list[Any]:
    """Recorded ``get_items``: a list of items (objects), as the runner reads them."""
    items = restore_body(body)
    if not isinstance(items, list):
        raise Unfit(f"the recorded session items are not a list: {json_kind(items)}")
    for at, item in enumerate(items):
        if not isinstance(item, dict):
            raise Unfit(
                f"the recorded session item {at} is not an item (an object): {json_kind(item)}"
            )
    return items


def _item(body: bytes) -> Any:
    """Recorded ``pop_item``: the item removed (an object), or null for none."""
    item = restore_body(body)
    if item is not None and not isinstance(item, dict):
        raise Unfit(
            f"the recorded session item is neither an item (an object) nor null: {json_kind(item)}"
        )
    return item


def _write(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    if _inside.get() or not serving():
        return wrapped(*args, **kwargs)
    return _skipped()


async def _skipped() -> None:
    return None
