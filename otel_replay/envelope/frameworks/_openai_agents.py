"""OpenAI Agents SDK function tools as tool steps, at the SDK's one call of a function tool."""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from otel_replay._canonical import parse_json
from otel_replay.envelope._contract import schema_version
from otel_replay.envelope._effect import effect_of
from otel_replay.envelope._jsonable import encode, encode_exact, restorer
from otel_replay.envelope._steps import Call, active, perform_async, tool_call
from otel_replay.envelope.frameworks import _mcp
from otel_replay.envelope.frameworks._patch import unrecorded, wrap

__all__ = ["patch"]

_SEAM = "_invoke_function_tool_with_metadata"


@dataclass(frozen=True, slots=True)
class _Sdk:
    """What of ``agents.tool`` the hook uses besides the seam."""

    result_type: type[Any]  # _FunctionToolInvocationResult(output, is_sdk_generated_error)
    invoker_type: type[Any]  # _FailureHandlingFunctionToolInvoker: the failure handler
    timeout_error: type[Any]  # ToolTimeoutError
    timeout_message: Callable[..., str]  # default_tool_timeout_error_message


class _CutOff(BaseException):
    """Under replay, the body served was cut off by the tool's timeout when recorded. A
    BaseException, so the SDK's failure handler (which catches Exception) lets it by."""


def patch(module: ModuleType) -> Callable[[], None]:
    """Make the function tools the runner of ``agents.run_internal.tool_execution`` (and
    ``agents.tool.invoke_function_tool``) calls steps; returns the undo."""
    tools = sys.modules["agents.tool"]
    sdk = _Sdk(
        tools._FunctionToolInvocationResult,
        tools._FailureHandlingFunctionToolInvoker,
        tools.ToolTimeoutError,
        tools.default_tool_timeout_error_message,
    )
    if not inspect.iscoroutinefunction(getattr(tools, _SEAM, None)):
        raise AttributeError(f"agents.tool.{_SEAM} is not a coroutine function")
    wrapper = _invoke(sdk)
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


def _invoke(sdk: _Sdk) -> Callable[..., Any]:
    def invoke(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        tool = kwargs.get("function_tool")
        if not active() or tool is None or args or _stands_aside(tool):
            return wrapped(*args, **kwargs)
        try:
            stepped = _stepped(tool, sdk, _call(tool, kwargs))
        except Exception as exc:  # a tool we cannot read: it runs as it would without us
            unrecorded("OpenAI Agents SDK", exc)
            return wrapped(*args, **kwargs)
        invocation = wrapped(**{**kwargs, "function_tool": stepped})
        return _invoked(invocation, sdk, tool, kwargs.get("context"))

    return invoke


def _call(tool: Any, kwargs: dict[str, Any]) -> Call:
    name = str(tool.name)
    description = tool.description or None
    return tool_call(
        name,
        _arguments(kwargs.get("arguments")),
        effect_of(name, read_only=_read_only(tool)),
        description=description,
        schema_version=schema_version(name, description, tool.params_json_schema, None),
        call_id=getattr(kwargs.get("context"), "tool_call_id", None),
    )


def _stepped(tool: Any, sdk: _Sdk, call: Call) -> Any:
    """A copy of ``tool`` whose body is the step ``call``, under the SDK's failure handler
    when the tool has one."""
    restored = restorer(_function(tool))

    def step(body: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(body)  # the SDK reads the body's signature and markers
        async def run(*args: Any, **kwargs: Any) -> Any:
            ran = False

            async def live() -> Any:
                nonlocal ran
                ran = True
                return await body(*args, **kwargs)

            try:
                return await perform_async(call, live, encode_exact, restored)
            except asyncio.CancelledError:
                if ran or tool.timeout_seconds is None:
                    raise  # cancelled now, or a recorded cancellation not the timeout's
                raise _CutOff from None

        return run

    copied = copy.copy(tool)  # the SDK's copy binds the failure handler to the copy
    invoker = copied.on_invoke_tool
    if isinstance(invoker, sdk.invoker_type):
        handler = copy.copy(invoker)
        handler._invoke_tool_impl = step(invoker._invoke_tool_impl)
        handler._function_tool = copied
        copied.on_invoke_tool = handler
    else:
        copied.on_invoke_tool = step(invoker)
    return copied


async def _invoked(invocation: Awaitable[Any], sdk: _Sdk, tool: Any, context: Any) -> Any:
    try:
        return await invocation
    except _CutOff:
        return await _timed_out(sdk, tool, context)


async def _timed_out(sdk: _Sdk, tool: Any, context: Any) -> Any:
    """What the SDK makes of a body its timeout cut off (its own branch for that, which a
    replay could reach only by waiting the timeout out)."""
    seconds = tool.timeout_seconds
    error = sdk.timeout_error(tool_name=tool.name, timeout_seconds=seconds)
    if tool.timeout_behavior == "raise_exception":
        raise error
    handler = tool.timeout_error_function
    if handler is None:
        message = sdk.timeout_message(tool_name=tool.name, timeout_seconds=seconds)
        return sdk.result_type(message, is_sdk_generated_error=True)
    result = handler(context, error)
    if inspect.isawaitable(result):
        result = await result
    return sdk.result_type(result)


def _arguments(text: Any) -> bytes:
    """The model's arguments as canonical JSON (text that is not JSON: as a JSON string)."""
    if isinstance(text, str | bytes):
        try:
            return encode(parse_json(text or b"{}"))
        except ValueError:
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
