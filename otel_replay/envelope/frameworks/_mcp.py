"""MCP client tool calls as tool steps, at ``ClientSession.call_tool`` of the ``mcp`` package."""

from __future__ import annotations

import inspect
import logging
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import orjson

from otel_replay._canonical import parse_json
from otel_replay.envelope._contract import schema_version
from otel_replay.envelope._effect import effect_of
from otel_replay.envelope._jsonable import encode, encode_exact
from otel_replay.envelope._steps import active, perform_async, tool_call
from otel_replay.envelope.frameworks._patch import unrecorded, wrap_each

__all__ = ["hooked", "patch", "read_only_hint"]

_log = logging.getLogger("otel_replay")
# The session runs a progress callback shielded: what it raises is logged here, never raised
# into the call (mcp.shared.jsonrpc_dispatcher._shielded_progress); a replay does the same.
_mcp_log = logging.getLogger("mcp.shared.jsonrpc_dispatcher")


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
    undo_wrappers = wrap_each(
        session, {"list_tools": _list_tools, "call_tool": _call_tool(result_type)}
    )
    _hooked = True

    def undo() -> None:
        global _hooked  # noqa: PLW0603 - see above
        _hooked = False
        undo_wrappers()

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


_PROGRESS = "otel_replay.progress"
_PROGRESS_AT = 3  # call_tool(name, arguments, read_timeout_seconds, progress_callback)


@dataclass(frozen=True, slots=True)
class _Progressed:
    """A tool call's result and the progress reported while it ran (``progress``, ``total``,
    ``message``); ``delivered`` when the callback already saw it (recording)."""

    result: Any
    notes: list[dict[str, Any]]
    delivered: bool


def _call_tool(result_type: type[Any]) -> Callable[..., Any]:
    def call_tool(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        if not active():
            return wrapped(*args, **kwargs)
        return _step(instance, result_type, wrapped, args, kwargs)

    return call_tool


def _progress_callback(args: Any, kwargs: dict[str, Any]) -> Any:
    if len(args) > _PROGRESS_AT:
        return args[_PROGRESS_AT]
    return kwargs.get("progress_callback")


async def _step(
    session: Any, result_type: type[Any], wrapped: Callable[..., Any], args: Any, kwargs: Any
) -> Any:
    try:
        name = str(args[0] if args else kwargs["name"])
        arguments = encode((args[1] if len(args) > 1 else kwargs.get("arguments")) or {})
        callback = _progress_callback(args, kwargs)
    except Exception as exc:  # a call we cannot read: it runs as it would without us
        unrecorded("MCP", exc)
        return await wrapped(*args, **kwargs)
    listed = await _listed(session, name)
    call = tool_call(
        name,
        arguments,
        effect_of(name, read_only=listed.read_only),
        description=listed.description,
        schema_version=listed.schema_version,
    )

    async def live() -> Any:
        if callback is None:
            return await wrapped(*args, **kwargs)
        notes: list[dict[str, Any]] = []

        async def noted(progress: float, total: float | None, message: str | None) -> None:
            notes.append({"progress": progress, "total": total, "message": message})
            await callback(progress, total, message)

        if len(args) > _PROGRESS_AT:
            result = await wrapped(*args[:_PROGRESS_AT], noted, *args[_PROGRESS_AT + 1 :], **kwargs)
        else:
            result = await wrapped(*args, **{**kwargs, "progress_callback": noted})
        return _Progressed(result, notes, delivered=True) if notes else result

    def restored(body: bytes) -> Any:
        value = parse_json(body)
        notes = value.pop(_PROGRESS, None) if isinstance(value, dict) else None
        parser = getattr(session, "_call_tool_adapter", None)  # claims-aware, when present
        if parser is not None and hasattr(parser, "validate_python"):
            result = parser.validate_python(value)
        else:
            result = result_type.model_validate(value)
        return _Progressed(result, notes, delivered=False) if notes else result

    ran = False

    async def running() -> Any:
        nonlocal ran
        ran = True
        return await live()

    try:
        outcome = await perform_async(call, running, _recorded, restored, failed=_is_error)
    finally:
        if not ran:
            _skip_request_id(session)
    if not isinstance(outcome, _Progressed):
        return outcome
    if not outcome.delivered and callback is not None:
        for note in outcome.notes:
            try:
                await callback(note.get("progress"), note.get("total"), note.get("message"))
            except Exception:  # as the session does: logged, the call goes on
                _mcp_log.exception("progress callback raised")
    return outcome.result


def _skip_request_id(session: Any) -> None:
    """Take the JSON-RPC id the served call would have sent its request with: the session's
    later requests (a ``tools/list`` over HTTP, served from the recording) then carry the ids
    they were recorded with, and their recorded responses answer them."""
    dispatcher = getattr(session, "_dispatcher", None)  # mcp 2
    allocate = getattr(dispatcher, "_allocate_id", None)
    if callable(allocate):
        allocate()
    elif isinstance(getattr(session, "_request_id", None), int):  # mcp 1
        session._request_id += 1


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


def _is_error(outcome: Any) -> bool:
    """Whether the server answered the call with a result flagged ``isError`` (the tool
    failed, and said so in its result rather than as a JSON-RPC error)."""
    result = outcome.result if isinstance(outcome, _Progressed) else outcome
    return getattr(result, "is_error", getattr(result, "isError", None)) is True


def _recorded(outcome: Any) -> bytes:
    if not isinstance(outcome, _Progressed):
        return _dumped(outcome)
    wire = parse_json(_dumped(outcome.result))
    if not isinstance(wire, dict):  # not a result the session parses: the progress is left out
        return _dumped(outcome.result)
    return orjson.dumps({**wire, _PROGRESS: outcome.notes})


def _dumped(result: Any) -> bytes:
    dump = getattr(result, "model_dump", None)
    if dump is None:
        return encode_exact(result)
    return orjson.dumps(dump(mode="json", by_alias=True, exclude_unset=True))
