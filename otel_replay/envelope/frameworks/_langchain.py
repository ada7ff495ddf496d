"""LangChain and LangGraph tools as tool steps, at the tool's own body (``_run``/``_arun``)."""

from __future__ import annotations

import collections
import contextvars
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NoReturn

from otel_replay._canonical import parse_json
from otel_replay.envelope._contract import schema_version
from otel_replay.envelope._effect import effect_of
from otel_replay.envelope._jsonable import encode, encode_exact, restore_body, return_hint
from otel_replay.envelope._steps import Call, active, perform, perform_async, tool_call
from otel_replay.envelope.frameworks._langgraph_values import is_command, tagged, untagged
from otel_replay.envelope.frameworks._mcp import read_only_hint
from otel_replay.envelope.frameworks._patch import unrecorded, wrap, wrap_each
from otel_replay.runs import current_run

__all__ = ["patch"]


@dataclass(slots=True)
class _Pending:
    """A tool call ``run``/``arun`` saw, waiting for its body; ``taken`` once a body made it
    a step (a body calling its parent class's body is not a second step)."""

    tool: Any
    arguments: bytes
    call_id: str | None
    taken: bool = False


_pending: contextvars.ContextVar[_Pending | None] = contextvars.ContextVar(
    "otel_replay_langchain_pending", default=None
)
_lock = threading.Lock()
_base: type[Any] | None = None
# (class, "_run"/"_arun") -> undo, for the bodies wrapped so far.
_bodies: dict[tuple[type[Any], str], Callable[[], None]] = {}


def patch(module: ModuleType) -> Callable[[], None]:
    """Make the tools of ``langchain_core.tools.base`` steps; returns the undo."""
    global _base  # noqa: PLW0603 - one BaseTool per process
    base = module.BaseTool
    for name in ("_run", "_arun", "_filter_injected_args", "tool_call_schema"):
        if not hasattr(base, name):
            raise AttributeError(f"BaseTool.{name} is missing")
    undo_wrappers = wrap_each(base, {"run": _run, "arun": _arun})
    _base = base

    def undo() -> None:
        undo_wrappers()
        with _lock:
            for undo_body in _bodies.values():
                undo_body()
            _bodies.clear()

    return undo


def _run(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    pending = _pending_call(instance, args, kwargs)
    if pending is None:
        return wrapped(*args, **kwargs)
    token = _pending.set(pending)
    try:
        return wrapped(*args, **kwargs)
    finally:
        _pending.reset(token)


def _arun(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    pending = _pending_call(instance, args, kwargs)
    if pending is None:
        return wrapped(*args, **kwargs)
    return _arun_with(pending, wrapped, args, kwargs)


async def _arun_with(pending: _Pending, wrapped: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    token = _pending.set(pending)
    try:
        return await wrapped(*args, **kwargs)
    finally:
        _pending.reset(token)


def _pending_call(tool: Any, args: Any, kwargs: Any) -> _Pending | None:
    """The call ``run``/``arun`` is about to make, with its body wrapped; None when we stand
    aside (nothing recorded or served now, or the tool is an ``@otel_replay.tool``)."""
    if not active() or _decorated(tool):
        return None
    try:
        tool_input = args[0] if args else kwargs.get("tool_input")
        if isinstance(tool_input, dict):
            tool_input = tool._filter_injected_args(tool_input)
        call_id = kwargs.get("tool_call_id")
        _wrap_bodies(type(tool))
        return _Pending(tool, encode(tool_input), call_id if isinstance(call_id, str) else None)
    except Exception as exc:  # a tool we cannot read: it runs as it would without us
        unrecorded("LangChain", exc)
        return None


def _decorated(tool: Any) -> bool:
    return any(
        hasattr(getattr(tool, attr, None), "__otel_replay_contract__")
        for attr in ("func", "coroutine")
    )


def _wrap_bodies(cls: type[Any]) -> None:
    """Wrap the ``_run`` and ``_arun`` that ``cls``'s tools run (once per defining class).

    ``BaseTool``'s own ``_arun`` is left alone: it runs ``_run`` in an executor (wrapped, and
    the context goes with it), and ``arun`` tells whether a class overrides it by identity.
    """
    for attr, wrapper in (("_run", _body), ("_arun", _abody)):
        owner = next((c for c in cls.__mro__ if attr in vars(c)), None)
        if owner is None or owner is _base or (owner, attr) in _bodies:
            continue
        with _lock:
            if (owner, attr) not in _bodies:
                _bodies[(owner, attr)] = wrap(owner, attr, wrapper)


def _taken(instance: Any) -> _Pending | None:
    """The pending call this body makes a step of, if it is the first body of that call."""
    pending = _pending.get()
    if pending is None or pending.taken or pending.tool is not instance:
        return None
    pending.taken = True
    return pending


def _body(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    pending = _taken(instance)
    if pending is None:
        return wrapped(*args, **kwargs)

    def live() -> Any:
        try:
            return wrapped(*args, **kwargs)
        except Exception as exc:
            paused = _paused_by(exc)
            if paused is None:
                raise
            return paused

    return _go_on(perform(_call_of(pending), live, _encoded, _restorer(instance)), pending)


def _abody(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    pending = _taken(instance)
    if pending is None:
        return wrapped(*args, **kwargs)

    async def live() -> Any:
        try:
            return await wrapped(*args, **kwargs)
        except Exception as exc:
            paused = _paused_by(exc)
            if paused is None:
                raise
            return paused

    step = perform_async(_call_of(pending), live, _encoded, _restorer(instance))
    return _go_on_async(step, pending)


_INTERRUPT = "otel_replay.interrupt"
_INTERRUPT_TAG = b'"otel_replay.interrupt"'
_COMMAND_TAG = b'"otel_replay.command"'


@dataclass(frozen=True, slots=True)
class _Paused:
    """A body LangGraph's ``interrupt()`` paused: the interrupts it raised (``value``,
    ``id``), and when recording the ``GraphInterrupt`` itself, raised again as it was."""

    interrupts: list[dict[str, Any]]
    raised: BaseException | None = None


def _paused_by(exc: Exception) -> _Paused | None:
    """``exc`` as a pause when it is LangGraph's ``GraphInterrupt``."""
    errors = sys.modules.get("langgraph.errors")
    if errors is None or not isinstance(exc, errors.GraphInterrupt):
        return None
    raised = exc.args[0] if exc.args else ()
    interrupts = [{"value": each.value, "id": each.id} for each in raised]
    return _Paused(interrupts, exc)


def _encoded(value: Any) -> bytes:
    if isinstance(value, _Paused):
        return encode_exact({_INTERRUPT: value.interrupts})
    if is_command(value):
        return encode_exact(tagged(value))
    return encode_exact(value)


def _go_on(value: Any, pending: _Pending) -> Any:
    """What the step gave, or the pause it recorded made again."""
    if isinstance(value, _Paused):
        with _lock:
            _paused_calls[_paused_key(pending)] += 1
        _pause(value)
    return value


async def _go_on_async(step: Awaitable[Any], pending: _Pending) -> Any:
    return _go_on(await step, pending)


_RESUME = "otel_replay.resume"
# (run id, tool name, arguments) of the tool calls an interrupt() paused in this process, and
# how many are paused: a later call of one of them is its resumed run, which takes it off
# (pausing again puts it back), so a long-lived process keeps only the calls still paused.
_paused_calls: collections.Counter[tuple[str, str, bytes]] = collections.Counter()


def _paused_key(pending: _Pending) -> tuple[str, str, bytes]:
    return (current_run().run_id, str(pending.tool.name), pending.arguments)


def _with_resume(pending: _Pending) -> bytes:
    """The call's arguments, and when it resumes a call an ``interrupt()`` paused, the
    resume values waiting for it under ``otel_replay.resume``: they are inputs of its body as
    much as the arguments, so a replay resumed with another answer diverges at this step
    instead of being served what the recorded answer made."""
    key = _paused_key(pending)
    with _lock:
        paused = _paused_calls[key] > 0
        if paused:
            _paused_calls[key] -= 1
            if not _paused_calls[key]:
                del _paused_calls[key]
    if not paused:
        return pending.arguments
    try:
        values = _resume_values()
        if values is None:
            return pending.arguments
        arguments = parse_json(pending.arguments)
        if not isinstance(arguments, dict):
            return pending.arguments
        return encode({**arguments, _RESUME: values})
    except Exception as exc:  # values we cannot read: the call is matched on its arguments
        unrecorded("LangGraph", exc)
        return pending.arguments


def _resume_values() -> list[Any] | None:
    """The values ``interrupt()`` would return in the running LangGraph task, in order (the
    task's own, then the graph's ``Command(resume=...)``), or None when none waits."""
    config = sys.modules.get("langgraph.config")
    if config is None:
        return None
    try:
        configurable = config.get_config().get("configurable") or {}
    except RuntimeError:  # not inside a graph
        return None
    scratchpad = configurable.get("__pregel_scratchpad")
    if scratchpad is None:
        return None
    values = list(getattr(scratchpad, "resume", None) or ())
    waiting = scratchpad.get_null_resume(False)  # looked at, not taken
    if waiting is not None:
        values.append(waiting)
    return values or None


def _pause(paused: _Paused) -> NoReturn:
    if paused.raised is not None:
        raise paused.raised
    from langgraph.errors import GraphInterrupt  # noqa: PLC0415 - it paused when recorded
    from langgraph.types import Interrupt, interrupt  # noqa: PLC0415

    if len(paused.interrupts) == 1:
        interrupt(paused.interrupts[0].get("value"))  # raises, unless a resume value waits
    raise GraphInterrupt(
        tuple(
            Interrupt(value=each.get("value"), id=str(each.get("id"))) for each in paused.interrupts
        )
    )


def _call_of(pending: _Pending) -> Call:
    tool = pending.tool
    name = str(tool.name)
    description = tool.description or None
    # langchain-mcp-adapters copies an MCP tool's annotations into the LangChain tool's
    # metadata: the tool made of it has the MCP tool's readOnlyHint.
    read_only = read_only_hint(getattr(tool, "metadata", None))
    return tool_call(
        name,
        _with_resume(pending),
        effect_of(name, read_only=read_only),
        description=description,
        schema_version=_schema_version(tool, name, description),
        call_id=pending.call_id,
    )


def _schema_version(tool: Any, name: str, description: str | None) -> str | None:
    try:
        schema = tool.tool_call_schema  # memoised by LangChain per tool
        parameters = schema if isinstance(schema, dict) else schema.model_json_schema()
    except Exception:  # a schema LangChain itself cannot render: no version
        return None
    return schema_version(name, description, parameters, None)


def _restorer(tool: Any) -> Callable[[bytes], Any]:
    def restored(body: bytes) -> Any:
        if _INTERRUPT_TAG in body or _COMMAND_TAG in body:
            recorded = restore_body(body)  # its shape gives back the models in it
            if isinstance(recorded, dict) and recorded.keys() == {_INTERRUPT}:
                return _Paused(recorded[_INTERRUPT])
            command = untagged(recorded)
            if is_command(command):  # whatever the annotation says: pydantic cannot build one
                return command
        value = restore_body(body, _returns(tool))
        if tool.response_format == "content_and_artifact" and isinstance(value, list):
            return tuple(value)  # LangChain unpacks (content, artifact) from a tuple only
        return value

    return restored


def _returns(tool: Any) -> Any:
    """The return annotation of the body ``tool`` runs, or None."""
    body = getattr(tool, "coroutine", None) or getattr(tool, "func", None)
    if body is None:
        body = type(tool)._run
    return return_hint(body)
