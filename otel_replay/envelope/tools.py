"""``@otel_replay.tool``: a Python function as a recorded, contract-checked, replayable step."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, overload

from otel_replay.envelope._contract import Contract, bound_arguments, contract_for
from otel_replay.envelope._effect import Effect, effect_of
from otel_replay.envelope._jsonable import encode, encode_exact, restore_body
from otel_replay.envelope._retries import Admit, Budget, retried, retried_async
from otel_replay.envelope._steps import (
    Call,
    current_call_key,
    perform,
    perform_async,
    tool_call,
)
from otel_replay.errors import ConfigError

__all__ = ["Budget", "Effect", "idempotency_key", "tool"]

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
    retries: Budget | None = None,
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
    retries: Budget | None = None,
) -> F | Callable[[F], F]:
    """Make ``fn`` (sync or async) a tool step; usable bare or with options.

    ``effect="read"`` lets a replay run it live (``--live-tools read``); without it the tool
    is a write, unless ``OTEL_REPLAY_READ_TOOLS`` names it, and ``OTEL_REPLAY_WRITE_TOOLS``
    makes even a declared read a write.

    ``name`` defaults to the function's name and ``description`` to its docstring; the
    schemas default to the ones its type hints give (see ``_contract``).

    ``retries`` retries a failing call as the :class:`Budget` says, each attempt a step of
    its own, and may open the tool's circuit; under replay the back-offs take no time.

    Raises ConfigError when a given schema is not a valid JSON Schema or ``retries`` is not a
    Budget, ValueError for an unknown ``effect``.
    """
    if effect not in ("read", "write", None):
        raise ValueError(f"effect must be 'read' or 'write', not {effect!r}")
    if retries is not None and not isinstance(retries, Budget):
        raise ConfigError(
            f"tool(retries={retries!r}): give a Budget, such as Budget(max_attempts=3)"
        )

    def decorate(function: F) -> F:
        tool_name = name or function.__name__
        text = description if description is not None else inspect.getdoc(function)
        contract = contract_for(function, tool_name, text, input_schema, output_schema)
        return _wrap(function, contract, effect, retries)

    return decorate if fn is None else decorate(fn)


def _wrap(function: F, contract: Contract, effect: Effect | None, budget: Budget | None) -> F:
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
            async def attempt(call: Call, admit: Admit) -> Any:
                async def live() -> Any:
                    contract.check_arguments(call.arguments)
                    admit()
                    return await function(*args, **kwargs)

                return await perform_async(call, live, checked, restored)

            call = call_of(args, kwargs)
            if budget is None:
                return await attempt(call, _admitted)
            return await retried_async(budget, call, attempt)

        run_async.__otel_replay_contract__ = contract  # type: ignore[attr-defined]
        return run_async  # type: ignore[return-value]

    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        def attempt(call: Call, admit: Admit) -> Any:
            def live() -> Any:
                contract.check_arguments(call.arguments)
                admit()
                return function(*args, **kwargs)

            return perform(call, live, checked, restored)

        call = call_of(args, kwargs)
        return attempt(call, _admitted) if budget is None else retried(budget, call, attempt)

    run.__otel_replay_contract__ = contract  # type: ignore[attr-defined]
    return run  # type: ignore[return-value]


def _admitted() -> None:
    """A tool without a budget has no circuit."""


def idempotency_key() -> str:
    """A key for the side effect of the tool call running now: the same for this call in the
    run and in all its replays (a call replayed live gets the key of the recorded call it
    stands for), and for every attempt of a retried call. Raises RuntimeError outside a tool
    call."""
    key = current_call_key()
    if key is None:
        raise RuntimeError("otel_replay.idempotency_key() is only meaningful inside a tool call")
    return key
