"""The LangGraph objects a tool body hands to the graph, as JSON and back.

A tool step's result is JSON with its shape (:mod:`otel_replay.envelope._jsonable`), which
gives back pydantic models, dataclasses and the like. LangGraph's ``Command`` is a dataclass
pydantic cannot rebuild, and a ``Send`` has no JSON form at all, yet a tool returning
``Command(update=..., goto=...)`` steers the graph: the state update and the routing must
happen again on replay, whatever the tool's annotation says. So a ``Command`` (or a list
holding one, as ``ToolNode`` accepts) is written with what it holds named:
``{"otel_replay.command": {"update": ..., "goto": ...}}``, each message in it as
``{"otel_replay.message": {...}}`` (rebuilt through LangChain's own union of message types,
which ``ToolNode`` checks by type) and each ``Send`` as ``{"otel_replay.send": {...}}``.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["is_command", "tagged", "untagged"]

_COMMAND = "otel_replay.command"
_MESSAGE = "otel_replay.message"
_SEND = "otel_replay.send"


def is_command(value: Any) -> bool:
    """Whether ``value`` is a LangGraph ``Command``, or a list holding one (what a tool may
    return to ``ToolNode``)."""
    types = sys.modules.get("langgraph.types")
    if types is None:
        return False
    if isinstance(value, list):
        return any(isinstance(item, types.Command) for item in value)
    return isinstance(value, types.Command)


def tagged(value: Any) -> Any:
    """``value`` with the objects this module knows replaced by their tagged form, through
    dicts, lists and tuples; anything else is left for the JSON encoder (and its shape)."""
    types = sys.modules.get("langgraph.types")
    messages = sys.modules.get("langchain_core.messages")
    if types is not None and isinstance(value, types.Command):
        fields = {
            "graph": value.graph,
            "update": tagged(value.update),
            "resume": tagged(value.resume),
            "goto": tagged(value.goto),
        }
        return {_COMMAND: {k: v for k, v in fields.items() if v is not None and v != []}}
    if types is not None and isinstance(value, types.Send):
        send = {"node": value.node, "arg": tagged(value.arg)}
        timeout = getattr(value, "timeout", None)
        if isinstance(timeout, int | float):
            send["timeout"] = timeout
        return {_SEND: send}
    if messages is not None and isinstance(value, messages.BaseMessage):
        return {_MESSAGE: value}
    if isinstance(value, dict):
        return {key: tagged(item) for key, item in value.items()}
    if isinstance(value, list):
        return [tagged(item) for item in value]
    if type(value) is tuple:  # kept a tuple: its shape says so (an update as (key, value) pairs)
        return tuple(tagged(item) for item in value)
    return value


def untagged(value: Any) -> Any:
    """The objects :func:`tagged` wrote, rebuilt; anything else is left as it is."""
    if isinstance(value, list):
        return [untagged(item) for item in value]
    if type(value) is tuple:
        return tuple(untagged(item) for item in value)
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((key, inner),) = value.items()
        if key == _COMMAND and isinstance(inner, dict):
            return _command(inner)
        if key == _SEND and isinstance(inner, dict):
            return _send(inner)
        if key == _MESSAGE:
            return _message(inner)
    return {key: untagged(item) for key, item in value.items()}


def _message(value: Any) -> Any:
    from langchain_core.messages import AnyMessage  # noqa: PLC0415 - a message was recorded
    from pydantic import TypeAdapter  # noqa: PLC0415

    try:
        return TypeAdapter(AnyMessage).validate_python(value)
    except Exception:  # not a message LangChain knows today: the value as recorded
        return value


def _send(value: dict[str, Any]) -> Any:
    from langgraph.types import Send  # noqa: PLC0415 - a Send was recorded

    timeout = value.get("timeout")
    if timeout is None:
        return Send(str(value.get("node")), untagged(value.get("arg")))
    return Send(str(value.get("node")), untagged(value.get("arg")), timeout=timeout)


def _command(value: dict[str, Any]) -> Any:
    from langgraph.types import Command  # noqa: PLC0415 - a Command was recorded

    return Command(
        graph=value.get("graph"),
        update=untagged(value.get("update")),
        resume=untagged(value.get("resume")),
        goto=untagged(value.get("goto", ())),
    )
