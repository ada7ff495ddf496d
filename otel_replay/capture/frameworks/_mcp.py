"""MCP client tool calls as tool steps: ``ClientSession.call_tool`` of the ``mcp`` package (the
high-level ``Client``, the OpenAI Agents SDK's and LangChain's MCP adapters all call it).

The effect comes from the server's own word, the ``readOnlyHint`` of the tool's annotations:
read when it is true, write when it is false; when the server says nothing, from
``OTEL_REPLAY_WRITE_TOOLS``, else read (see ``_effect``). The annotations come from the
session's tool listings, remembered per session as the application lists tools; a tool not
listed yet is listed once, before its first call (the SDK lists tools before a call's result
is validated anyway, so this moves that request earlier rather than adding one).

The result, a ``CallToolResult`` (``isError`` results included), is recorded as its wire JSON
(``model_dump(mode="json", by_alias=True, exclude_unset=True)``) and rebuilt on replay by the
session's own result parser, so fields the server did not send stay unset. A JSON-RPC error is
recorded as the exception it raised. The SDK's ``MCP send tools/call`` client span, when the
call runs, is a child of the step's ``execute_tool`` span, as an HTTP span is of a model call.
"""

from __future__ import annotations

import inspect
import logging
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import orjson

from otel_replay.capture._contract import schema_version
from otel_replay.capture._envelope import active, perform_async, tool_call
from otel_replay.capture._jsonable import encode, encode_exact
from otel_replay.capture.frameworks._effect import effect_of
from otel_replay.capture.frameworks._patch import unrecorded, wrap

__all__ = ["hooked", "patch", "read_only_hint"]

_log = logging.getLogger("otel_replay")


@dataclass(frozen=True, slots=True)
class _Listed:
    """What a session's listing said of one tool."""

    read_only: bool | None
    description: str | None
    schema_version: str | None


_UNLISTED = _Listed(None, None, None)
_listings: weakref.WeakKeyDictionary[Any, dict[str, _Listed]] = weakref.WeakKeyDictionary()
_hooked = False


def hooked() -> bool:
    """Whether MCP tool calls are steps now (so a framework tool that calls one stands aside)."""
    return _hooked


def read_only_hint(annotations: Any) -> bool | None:
    """The ``readOnlyHint`` of MCP tool annotations (a model of mcp 1 or 2, or a dict), or
    None when the server did not give one."""
    if annotations is None:
        return None
    if isinstance(annotations, dict):
        value = annotations.get("readOnlyHint", annotations.get("read_only_hint"))
    else:
        value = getattr(annotations, "read_only_hint", getattr(annotations, "readOnlyHint", None))
    return value if isinstance(value, bool) else None


def patch(module: ModuleType) -> Callable[[], None]:
    """Make the tool calls of ``mcp.client.session.ClientSession`` steps; returns the undo."""
    global _hooked  # noqa: PLW0603 - one ClientSession per process
    session = module.ClientSession
    for name in ("call_tool", "list_tools"):
        if not inspect.iscoroutinefunction(vars(session).get(name)):
            raise AttributeError(f"ClientSession.{name} is not a coroutine function")
    result_type = module.types.CallToolResult
    undo_list = wrap(session, "list_tools", _list_tools)
    try:
        undo_call = wrap(session, "call_tool", _call_tool(result_type))
    except Exception:
        undo_list()
        raise
    _hooked = True

    def undo() -> None:
        global _hooked  # noqa: PLW0603 - see above
        _hooked = False
        undo_call()
        undo_list()

    return undo


def _list_tools(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    return _remembering(instance, wrapped(*args, **kwargs))


async def _remembering(session: Any, listing: Any) -> Any:
    result = await listing
    try:
        known = _listings.setdefault(session, {})
        for tool in result.tools:
            description = getattr(tool, "description", None) or None
            known[tool.name] = _Listed(
                read_only_hint(getattr(tool, "annotations", None)),
                description,
                schema_version(
                    tool.name,
                    description,
                    _schema(tool, "input_schema", "inputSchema"),
                    _schema(tool, "output_schema", "outputSchema"),
                ),
            )
    except Exception as exc:  # a listing of a shape we do not know: effects fall back
        _log.debug("otel-replay: MCP tool listing not understood: %s", exc)
    return result


def _schema(tool: Any, *names: str) -> Any:
    for name in names:
        value = getattr(tool, name, None)
        if value is not None:
            return value
    return None


def _call_tool(result_type: type[Any]) -> Callable[..., Any]:
    def call_tool(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        if not active():
            return wrapped(*args, **kwargs)
        return _step(instance, result_type, lambda: wrapped(*args, **kwargs), args, kwargs)

    return call_tool


async def _step(
    session: Any, result_type: type[Any], live: Callable[[], Any], args: Any, kwargs: Any
) -> Any:
    try:
        name = str(args[0] if args else kwargs["name"])
        arguments = encode((args[1] if len(args) > 1 else kwargs.get("arguments")) or {})
    except Exception as exc:  # a call we cannot read: it runs as it would without us
        unrecorded("MCP", exc)
        return await live()
    listed = await _listed(session, name)
    call = tool_call(
        name,
        arguments,
        effect_of(name, listed.read_only),
        description=listed.description,
        schema_version=listed.schema_version,
    )

    def restored(body: bytes) -> Any:
        value = orjson.loads(body)
        parser = getattr(session, "_call_tool_adapter", None)  # claims-aware, when present
        if parser is not None and hasattr(parser, "validate_python"):
            return parser.validate_python(value)
        return result_type.model_validate(value)

    return await perform_async(call, live, _dumped, restored)


async def _listed(session: Any, name: str) -> _Listed:
    """What the session's listings say of tool ``name``, listing the tools once if none did."""
    known = _listings.get(session)
    if known is None or name not in known:
        try:
            await session.list_tools()
        except Exception as exc:  # the server cannot list: effects fall back
            _log.debug("otel-replay: MCP tools could not be listed: %s", exc)
        known = _listings.setdefault(session, {})
        known.setdefault(name, _UNLISTED)  # listed once: a tool the server hides stays unknown
    return known[name]


def _dumped(result: Any) -> bytes:
    dump = getattr(result, "model_dump", None)
    if dump is None:
        return encode_exact(result)
    return orjson.dumps(dump(mode="json", by_alias=True, exclude_unset=True))
