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

Output functions (an ``output_type`` that is a function, through ``ToolOutput``,
``NativeOutput``, ``PromptedOutput`` or ``TextOutput``) are tools too: Pydantic AI calls the
function with the model's arguments for the run's output, through
``pydantic_ai._output.execute_output_function``, and that final call is a step of the same
kind, named after the function (``OTEL_REPLAY_READ_TOOLS`` or ``OTEL_REPLAY_WRITE_TOOLS`` may
name it or the output tool).
The calls Pydantic AI makes on partial output while streaming (``ctx.partial_output``) are not
steps: how many there are depends on how the stream was cut and debounced, and Pydantic AI
asks a function with side effects to skip them.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any

from otel_replay.envelope._contract import schema_version
from otel_replay.envelope._effect import effect_of
from otel_replay.envelope._jsonable import encode, encode_exact, restorer
from otel_replay.envelope._steps import Call, active, perform_async, tool_call
from otel_replay.envelope.frameworks._patch import unrecorded, wrap

__all__ = ["patch"]


_OUTPUT_SEAM = "execute_output_function"


def patch(module: ModuleType) -> Callable[[], None]:
    """Make the tools of ``pydantic_ai.toolsets.function.FunctionToolset`` and the output
    functions (``pydantic_ai._output``) steps; returns the undo."""
    toolset = module.FunctionToolset
    if not inspect.iscoroutinefunction(vars(toolset).get("call_tool")):
        raise AttributeError("FunctionToolset.call_tool is not a coroutine function")
    parameters = list(inspect.signature(toolset.call_tool).parameters)
    if parameters[:5] != ["self", "name", "tool_args", "ctx", "tool"]:
        raise AttributeError(f"FunctionToolset.call_tool takes {parameters}")
    output = importlib.import_module("pydantic_ai._output")
    if not inspect.iscoroutinefunction(vars(output).get(_OUTPUT_SEAM)):
        raise AttributeError(f"pydantic_ai._output.{_OUTPUT_SEAM} is not a coroutine function")
    parameters = list(inspect.signature(getattr(output, _OUTPUT_SEAM)).parameters)
    if parameters[:3] != ["function_schema", "run_context", "args"]:
        raise AttributeError(f"pydantic_ai._output.{_OUTPUT_SEAM} takes {parameters}")
    undo_tools = wrap(toolset, "call_tool", _call_tool)
    try:
        undo_output = wrap(output, _OUTPUT_SEAM, _output_function)
    except Exception:
        undo_tools()
        raise

    def undo() -> None:
        undo_output()
        undo_tools()

    return undo


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


def _output_function(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    """``execute_output_function(function_schema, *, run_context, args, ...)``: the final
    call is a step; a call on partial output, or one we cannot read, runs as it would."""
    ctx = kwargs.get("run_context")
    if not active() or getattr(ctx, "partial_output", True) is not False:
        return wrapped(*args, **kwargs)
    try:
        schema = args[0] if args else kwargs["function_schema"]
        function = schema.function
        if hasattr(function, "__otel_replay_contract__"):
            return wrapped(*args, **kwargs)  # an @otel_replay.tool: its own step
        call = _output_call(schema, ctx, kwargs["args"])
    except Exception as exc:  # an output function we cannot read: it runs as without us
        unrecorded("Pydantic AI", exc)
        return wrapped(*args, **kwargs)
    return perform_async(call, lambda: wrapped(*args, **kwargs), encode_exact, restorer(function))


def _output_call(schema: Any, ctx: Any, arguments: Any) -> Call:
    """The step of output function ``schema.function`` called with ``arguments``, named after
    the function; the settings may name it by its name or by the output tool the model
    called."""
    name = str(getattr(schema.function, "__name__", None) or schema.name)
    called = getattr(ctx, "tool_name", None)
    names = (name, called) if isinstance(called, str) else (name,)
    call_id = getattr(ctx, "tool_call_id", None)
    description = schema.description or None
    return tool_call(
        name,
        encode(arguments if arguments is not None else {}),
        effect_of(*names),
        description=description,
        schema_version=schema_version(name, description, schema.json_schema, None),
        call_id=call_id if isinstance(call_id, str) and call_id else None,
    )


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
