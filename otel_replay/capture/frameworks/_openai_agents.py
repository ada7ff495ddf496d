"""OpenAI Agents SDK function tools as tool steps.

The seam is the SDK's one call of a function tool, ``_invoke_function_tool_with_metadata``
(``agents.tool``, imported by name into the runner's ``tool_execution`` module; both names are
wrapped). It sees the ``FunctionTool``, the model's arguments as JSON text and the tool context
(with the model's call id), and returns what the tool's invoker returned. Guardrails, approvals,
hooks and the SDK's own ``function_span`` run around it as they do without us.

What is recorded is that return value: a ``function_tool`` function's result, or the message
the SDK's failure handler made of its exception (the text the model saw); an exception the
tool lets through is recorded as one and raised again on replay. Replay restores the value
with the function's return annotation where there is one, so the SDK stringifies the same
object (``str()`` of a dict, a pydantic model, a dataclass) exactly as it did.

The SDK's tracing is its own, not OpenTelemetry's. With an OpenTelemetry bridge of it (the
official ``opentelemetry-instrumentation-openai-agents-v2``) its ``execute_tool`` span is current
while the tool runs, and the step enriches that span instead of opening a second one.

We stand aside for an agent used as a tool (the nested run's own model calls and tools are
steps), a tool made from an ``@otel_replay.tool`` function (its own step), and a tool of an MCP
server while the MCP hook is on (the MCP call is the step, with the server's read-only hint).
"""

from __future__ import annotations

import inspect
import sys
import typing
from collections.abc import Callable
from types import ModuleType
from typing import Any

import orjson

from otel_replay.capture._contract import schema_version
from otel_replay.capture._envelope import active, perform_async, tool_call
from otel_replay.capture._jsonable import encode, encode_exact, restore
from otel_replay.capture.frameworks import _mcp
from otel_replay.capture.frameworks._effect import effect_of
from otel_replay.capture.frameworks._patch import unrecorded, wrap

__all__ = ["patch"]

_SEAM = "_invoke_function_tool_with_metadata"


def patch(module: ModuleType) -> Callable[[], None]:
    """Make the function tools the runner of ``agents.run_internal.tool_execution`` (and
    ``agents.tool.invoke_function_tool``) calls steps; returns the undo."""
    tools = sys.modules["agents.tool"]
    result_type = tools._FunctionToolInvocationResult
    if not inspect.iscoroutinefunction(getattr(tools, _SEAM, None)):
        raise AttributeError(f"agents.tool.{_SEAM} is not a coroutine function")
    wrapper = _invoke(result_type)
    undos = [wrap(module, _SEAM, wrapper)]
    try:
        undos.append(wrap(tools, _SEAM, wrapper))
    except Exception:
        undos[0]()
        raise

    def undo() -> None:
        for each in reversed(undos):
            each()

    return undo


def _invoke(result_type: type[Any]) -> Callable[..., Any]:
    def invoke(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        tool = kwargs.get("function_tool")
        if not active() or tool is None or args or _stands_aside(tool):
            return wrapped(*args, **kwargs)
        return _step(tool, result_type, lambda: wrapped(*args, **kwargs), kwargs)

    return invoke


async def _step(
    tool: Any, result_type: type[Any], live: Callable[[], Any], kwargs: dict[str, Any]
) -> Any:
    try:
        name = str(tool.name)
        description = tool.description or None
        call = tool_call(
            name,
            _arguments(kwargs.get("arguments")),
            effect_of(name, _read_only(tool)),
            description=description,
            schema_version=schema_version(name, description, tool.params_json_schema, None),
            call_id=getattr(kwargs.get("context"), "tool_call_id", None),
        )
    except Exception as exc:  # a tool we cannot read: it runs as it would without us
        unrecorded("OpenAI Agents SDK", exc)
        return await live()

    def restored(body: bytes) -> Any:
        return result_type(restore(orjson.loads(body), _returns(tool)))

    return await perform_async(call, live, lambda result: encode_exact(result.output), restored)


def _arguments(text: Any) -> bytes:
    """The model's arguments as canonical JSON (text that is not JSON: as a JSON string)."""
    if isinstance(text, str | bytes):
        try:
            return encode(orjson.loads(text or b"{}"))
        except orjson.JSONDecodeError:
            pass
    return encode(text)


def _stands_aside(tool: Any) -> bool:
    if getattr(tool, "_is_agent_tool", False):
        return True
    if hasattr(_function(tool), "__otel_replay_contract__"):
        return True
    return getattr(tool, "_mcp_tool_binding", None) is not None and _mcp.hooked()


def _function(tool: Any) -> Any:
    """The Python function ``function_tool`` made ``tool`` of, or None."""
    try:
        return tool.__wrapped__  # the SDK's descriptor raises for tools not made of one
    except Exception:
        return None


def _read_only(tool: Any) -> bool | None:
    """An MCP tool's ``readOnlyHint``, as the SDK kept it when it converted the tool."""
    return _mcp.read_only_hint(getattr(tool, "_mcp_annotations", None))


def _returns(tool: Any) -> Any:
    function = _function(tool)
    if function is None:
        return None
    try:
        return typing.get_type_hints(function).get("return")
    except Exception:  # unresolvable hints: served as JSON
        return None
