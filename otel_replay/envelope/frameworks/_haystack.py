"""Haystack tools as tool steps.

The seam is ``Tool.invoke(**kwargs)`` and ``Tool.invoke_async(**kwargs)``
(``haystack.tools.tool``): every tool an ``Agent`` (or a ``ToolInvoker``) runs goes through
one of them, whatever made it: ``@tool``, ``create_tool_from_function``, ``Tool(...)``,
``ComponentTool``, ``PipelineTool``. The agent's span, its state handling and its turning of
the result into the tool message (``outputs_to_string``, ``outputs_to_state``) run around it as
they do without us. An ``invoke_async`` of a tool with no async function runs ``invoke`` in a
thread: that ``invoke`` is the step.

The step's arguments are those the model gave, the properties of the tool's ``parameters``
(values Haystack injects from the agent's state are left out). What is recorded is what the
tool returned, as exact JSON, or the ``ToolInvocationError`` Haystack raised (its message
names the tool's own exception). Replay restores the value with the return annotation of the
tool's function, so the agent words the same tool message; the error comes back as the same
class with the same message and tool name. A tool whose function is an ``@otel_replay.tool``
is that function's own step.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any

from otel_replay.envelope._contract import schema_version
from otel_replay.envelope._effect import effect_of
from otel_replay.envelope._jsonable import encode, encode_exact, restorer
from otel_replay.envelope._steps import Call, active, perform, perform_async, tool_call
from otel_replay.envelope.frameworks._patch import unrecorded, wrap_each

__all__ = ["patch"]


def patch(module: ModuleType) -> Callable[[], None]:
    """Make the tools of ``haystack.tools.tool.Tool`` steps; returns the undo."""
    base = module.Tool
    if inspect.iscoroutinefunction(vars(base).get("invoke")):
        raise AttributeError("Tool.invoke is a coroutine function")
    if not inspect.iscoroutinefunction(vars(base).get("invoke_async")):
        raise AttributeError("Tool.invoke_async is not a coroutine function")
    return wrap_each(base, {"invoke": _invoke, "invoke_async": _invoke_async})


def _invoke(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    if not active() or args:
        return wrapped(*args, **kwargs)
    step = _step(instance, kwargs, getattr(instance, "function", None))
    if step is None:
        return wrapped(*args, **kwargs)
    call, restored = step
    try:
        return perform(call, lambda: wrapped(**kwargs), encode_exact, restored)
    except Exception as exc:
        _name(exc, instance)
        raise


def _invoke_async(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    function = getattr(instance, "async_function", None)
    if not active() or args or function is None:  # no async function: its invoke is the step
        return wrapped(*args, **kwargs)
    step = _step(instance, kwargs, function)
    if step is None:
        return wrapped(*args, **kwargs)
    call, restored = step
    return _served_async(call, lambda: wrapped(**kwargs), restored, instance)


async def _served_async(
    call: Call,
    live: Callable[[], Awaitable[Any]],
    restored: Callable[[bytes], Any],
    tool: Any,
) -> Any:
    try:
        return await perform_async(call, live, encode_exact, restored)
    except Exception as exc:
        _name(exc, tool)
        raise


def _step(
    tool: Any, kwargs: dict[str, Any], function: Any
) -> tuple[Call, Callable[[bytes], Any]] | None:
    """The step of ``tool`` called with ``kwargs`` and how its recorded body is restored;
    None when the call stays as it is (an ``@otel_replay.tool``, a tool we cannot read)."""
    if hasattr(function, "__otel_replay_contract__"):
        return None  # an @otel_replay.tool: its own step
    try:
        name = str(tool.name)
        description = str(getattr(tool, "description", "") or "") or None
        parameters = getattr(tool, "parameters", None) or {}
        declared = parameters.get("properties") if isinstance(parameters, dict) else None
        arguments = (
            {key: value for key, value in kwargs.items() if key in declared}
            if isinstance(declared, dict)
            else dict(kwargs)
        )
        call = tool_call(
            name,
            encode(arguments),
            effect_of(name),
            description=description,
            schema_version=schema_version(name, description, parameters, None),
        )
    except Exception as exc:  # a tool we cannot read: it runs as it would without us
        unrecorded("Haystack", exc)
        return None
    return call, restorer(function)


def _name(exc: Exception, tool: Any) -> None:
    """Give ``exc`` the ``tool_name`` a ``ToolInvocationError`` carries, which an error
    rebuilt from the recording (its class and message) lacks."""
    if type(exc).__name__ == "ToolInvocationError" and not hasattr(exc, "tool_name"):
        exc.tool_name = str(tool.name)  # type: ignore[attr-defined]
