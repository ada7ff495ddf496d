"""Pydantic AI function tools as tool steps.

The seam is ``FunctionToolset.call_tool(name, tool_args, ctx, tool)`` (``pydantic_ai.toolsets
.function``): the one call of a function tool's body, made for every ``@agent.tool``,
``@agent.tool_plain``, ``Tool(...)`` and ``FunctionToolset`` tool, whichever toolsets
(prefixed, renamed, filtered, wrapped) hold it. It sees the arguments after Pydantic AI
validated them and the run context, which names the model's tool call (``ctx.tool_call_id``)
and the tool by the name the model used (``ctx.tool_name``). Argument validation, the
capability hooks (approval, retries, ``after_tool_execute``), the tool's timeout when it runs,
and Pydantic AI's own ``execute_tool`` span (with ``instrument=True``/``instrument_all()``) all
run around it as they do without us; the step enriches that span rather than opening a second
one.

What is recorded is what the tool's function returned, as exact JSON, or the exception it
raised (``ModelRetry`` included: replay raises it again, so the model is asked again as it
was). Replay restores the value with the function's return annotation where there is one, so
Pydantic AI serialises the same object for the model (a pydantic model, a dataclass) as it
did. A tool whose function is an ``@otel_replay.tool`` is that function's own step, and the
tools of a ``LangChainToolset`` are LangChain's steps: we stand aside for both (one call, one
step). MCP servers' tools go through MCP's ``ClientSession.call_tool``, the MCP hook's seam.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any

from otel_replay.capture._contract import schema_version
from otel_replay.capture._envelope import active, perform_async, tool_call
from otel_replay.capture._jsonable import encode, encode_exact, restorer
from otel_replay.capture.frameworks._effect import effect_of
from otel_replay.capture.frameworks._patch import unrecorded, wrap

__all__ = ["patch"]


def patch(module: ModuleType) -> Callable[[], None]:
    """Make the tools of ``pydantic_ai.toolsets.function.FunctionToolset`` steps; returns
    the undo."""
    toolset = module.FunctionToolset
    if not inspect.iscoroutinefunction(vars(toolset).get("call_tool")):
        raise AttributeError("FunctionToolset.call_tool is not a coroutine function")
    parameters = list(inspect.signature(toolset.call_tool).parameters)
    if parameters[:5] != ["self", "name", "tool_args", "ctx", "tool"]:
        raise AttributeError(f"FunctionToolset.call_tool takes {parameters}")
    return wrap(toolset, "call_tool", _call_tool)


def _call_tool(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    if not active():
        return wrapped(*args, **kwargs)
    try:
        name, tool_args, ctx, tool = _bound(args, kwargs)
    except Exception as exc:  # a call we cannot read: it runs as it would without us
        unrecorded("Pydantic AI", exc)
        return wrapped(*args, **kwargs)
    function = _function(tool)
    if _stands_aside(instance, function):
        return wrapped(*args, **kwargs)
    return _step(name, tool_args, ctx, tool, function, lambda: wrapped(*args, **kwargs))


def _bound(args: Any, kwargs: Any) -> tuple[Any, Any, Any, Any]:
    """``call_tool``'s (name, tool_args, ctx, tool), given by position or keyword."""
    names = ("name", "tool_args", "ctx", "tool")
    values = list(args) + [kwargs[key] for key in names[len(args) :]]
    name, tool_args, ctx, tool = values[:4]
    return name, tool_args, ctx, tool


async def _step(
    name: Any,
    tool_args: Any,
    ctx: Any,
    tool: Any,
    function: Any,
    live: Callable[[], Awaitable[Any]],
) -> Any:
    try:
        called = getattr(ctx, "tool_name", None)
        tool_name = called if isinstance(called, str) and called else str(name)
        definition = tool.tool_def
        description = definition.description or None
        call_id = getattr(ctx, "tool_call_id", None)
        call = tool_call(
            tool_name,
            encode(tool_args if tool_args is not None else {}),
            effect_of(tool_name),
            description=description,
            schema_version=schema_version(
                tool_name, description, definition.parameters_json_schema, None
            ),
            call_id=call_id if isinstance(call_id, str) and call_id else None,
        )
    except Exception as exc:  # a tool we cannot read: it runs as it would without us
        unrecorded("Pydantic AI", exc)
        return await live()
    return await perform_async(call, live, encode_exact, restorer(function))


def _function(tool: Any) -> Any:
    """The Python function ``tool`` calls (``FunctionSchema.function``), or None."""
    call_func = getattr(tool, "call_func", None)
    return getattr(getattr(call_func, "__self__", None), "function", None)


def _stands_aside(toolset: Any, function: Any) -> bool:
    if hasattr(function, "__otel_replay_contract__"):
        return True  # an @otel_replay.tool: its own step
    return any(cls.__name__ == "LangChainToolset" for cls in type(toolset).__mro__)
