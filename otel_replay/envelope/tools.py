"""``@otel_replay.tool``: a Python function as a recorded, contract-checked, replayable step.

::

    @otel_replay.tool(effect="read")       # may run live under replay --live-tools read
    def lookup_order(order_id: str) -> Order: ...

    @otel_replay.tool(effect="write")
    async def refund(order_id: str, amount: float) -> dict:
        key = otel_replay.idempotency_key()  # the same for this call in every replay
        ...

Recording: each call is an ``execute_tool {name}`` span (GenAI tool attributes, the replay
kit) and a step in the store, its arguments and result as canonical JSON. The arguments are
checked against the input schema before the body runs, the result against the output schema
after; a violation raises :class:`~otel_replay.errors.ToolContractError`, recorded as the
step's ``error.type``. Under replay the body does not run: the recorded result comes back
(restored to the annotated return type), or the recorded exception is raised again. A write
tool never runs under replay; a tool is a write unless declared ``effect="read"`` (or named in
``OTEL_REPLAY_READ_TOOLS``): a bare ``@otel_replay.tool`` writes (see ``_effect``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, overload

from otel_replay.envelope._contract import Contract, bound_arguments, contract_for
from otel_replay.envelope._effect import Effect, effect_of
from otel_replay.envelope._jsonable import encode, encode_exact, restore_body
from otel_replay.envelope._steps import (
    Call,
    current_call_key,
    perform,
    perform_async,
    tool_call,
)

__all__ = ["Effect", "idempotency_key", "tool"]

F = TypeVar("F", bound=Callable[..., Any])


@overload
def tool(fn: F, /) -> F: ...


@overload
def tool(
    *,
    effect: Effect | None = None,
    name: str | None = None,
    description: str | None = None,
    input_schema: Mapping[str, Any] | None = None,
    output_schema: Mapping[str, Any] | None = None,
) -> Callable[[F], F]: ...


def tool(
    fn: F | None = None,
    /,
    *,
    effect: Effect | None = None,
    name: str | None = None,
    description: str | None = None,
    input_schema: Mapping[str, Any] | None = None,
    output_schema: Mapping[str, Any] | None = None,
) -> F | Callable[[F], F]:
    """Make ``fn`` (sync or async) a tool step; usable bare or with options.

    ``effect="read"`` lets a replay run it live (``--live-tools read``); without it the tool
    is a write, unless ``OTEL_REPLAY_READ_TOOLS`` names it, and ``OTEL_REPLAY_WRITE_TOOLS``
    makes even a declared read a write.

    ``name`` defaults to the function's name and ``description`` to its docstring; the
    schemas default to the ones its type hints give (see ``_contract``). Raises ConfigError
    when a given schema is not a valid JSON Schema, ValueError for an unknown ``effect``.
    """
    if effect not in ("read", "write", None):
        raise ValueError(f"effect must be 'read' or 'write', not {effect!r}")

    def decorate(function: F) -> F:
        tool_name = name or function.__name__
        text = description if description is not None else inspect.getdoc(function)
        contract = contract_for(function, tool_name, text, input_schema, output_schema)
        return _wrap(function, contract, effect)

    return decorate if fn is None else decorate(fn)


def _wrap(function: F, contract: Contract, effect: Effect | None) -> F:
    def call_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Call:
        return tool_call(
            contract.name,
            encode(bound_arguments(contract.signature, args, kwargs)),
            effect_of(contract.name, declared=effect),
            description=contract.description,
            schema_version=contract.version,
        )

    def checked(value: Any) -> bytes:
        body = encode_exact(value)
        contract.check_result(body)
        return body

    def restored(body: bytes) -> Any:
        return restore_body(body, contract.return_annotation)

    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            call = call_of(args, kwargs)

            async def live() -> Any:
                contract.check_arguments(call.arguments)
                return await function(*args, **kwargs)

            return await perform_async(call, live, checked, restored)

        run_async.__otel_replay_contract__ = contract  # type: ignore[attr-defined]
        return run_async  # type: ignore[return-value]

    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        call = call_of(args, kwargs)

        def live() -> Any:
            contract.check_arguments(call.arguments)
            return function(*args, **kwargs)

        return perform(call, live, checked, restored)

    run.__otel_replay_contract__ = contract  # type: ignore[attr-defined]
    return run  # type: ignore[return-value]


def idempotency_key() -> str:
    """A key for the side effect of the tool call running now: the same for this call in the
    run and in all its replays (a call replayed live gets the key of the recorded call it
    stands for). Raises RuntimeError outside a tool call."""
    key = current_call_key()
    if key is None:
        raise RuntimeError("otel_replay.idempotency_key() is only meaningful inside a tool call")
    return key
