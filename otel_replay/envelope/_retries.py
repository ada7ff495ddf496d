"""Retry budgets: ``@otel_replay.tool(retries=Budget(...))`` retries a tool with exponential
back-off and a circuit breaker, through tenacity.

Each attempt is a step of its own, so a replay serves each attempt's recorded outcome in
order and retries exactly as the recording did. The back-offs are ``time.sleep`` and
``asyncio.sleep`` (trio's under trio), which a replay skips, moving the application's clocks
on instead. A call the circuit refuses is a step too (its outcome a
:class:`~otel_replay.errors.CircuitOpenError`): a replay refuses where the recording did,
whatever its own circuit says. The circuits are per tool name and per process; under replay,
per replay, so that one replayed run's failures never open another's circuit.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import tenacity

from otel_replay import attributes as A
from otel_replay.envelope._jsonable import first_line
from otel_replay.envelope._steps import Call, current_server
from otel_replay.errors import (
    CircuitOpenError,
    ConfigError,
    NetworkBlockedError,
    RecordedValueError,
    RetryOverflowError,
    ToolContractError,
    UnmatchedRequestError,
)
from otel_replay.runs import qualified_name

__all__ = ["Admit", "Budget", "retried", "retried_async"]

T = TypeVar("T")

Admit = Callable[[], None]
"""Called by an attempt's live call before it runs the tool: raises CircuitOpenError when
the tool's circuit refuses the call."""

_NEVER_RETRIED: tuple[type[BaseException], ...] = (
    ToolContractError,  # the program's bug: the same call breaks the same contract again
    RetryOverflowError,  # a budget ran out already (a tool this one calls, or the circuit)
    UnmatchedRequestError,  # a replay's own refusals: the replay stops there
    RecordedValueError,
    NetworkBlockedError,
)
"""What no budget retries, whatever its ``retry_on``; nor does the circuit count it."""

_OVERFLOW: Mapping[str, Any] = {
    A.REPLAY_FAILURE_CATEGORY: A.ReplayFailureCategoryValues.RETRY_OVERFLOW.value,
    A.REPLAY_FAILURE_SEVERITY: A.ReplayFailureSeverityValues.ERROR.value,
}

# Jitter is drawn apart from ``random``, which run() seeds for the application.
_jitter = random.Random()
os.register_at_fork(after_in_child=_jitter.seed)


@dataclass(frozen=True, slots=True)
class Budget:
    """How a tool's failing calls are retried, and when its circuit opens.

    A call makes up to ``max_attempts`` attempts. After failed attempt ``n`` (an exception
    ``retry_on`` names), the next waits ``min(max_backoff, backoff * multiplier ** (n - 1))``
    seconds, less a random share of up to ``jitter`` of it (0: none; 1: anywhere from 0 to the
    whole wait). Past the last attempt the call raises
    :class:`~otel_replay.errors.RetryOverflowError`. Never retried, whatever ``retry_on``
    says: :class:`~otel_replay.errors.ToolContractError` (the program's bug), a budget
    already overflowed, and a replay's refusals.

    With ``circuit_open_after``, that many failed attempts in a row, across calls, open the
    tool's circuit: for ``circuit_cooldown`` seconds every call fails fast with
    :class:`~otel_replay.errors.CircuitOpenError` without running the tool; then one call goes
    through (a trial): its success closes the circuit, its failure opens it again. A result,
    or an Exception the budget does not retry, is a success; a cancellation counts for nothing.

    Raises :class:`~otel_replay.errors.ConfigError` (a ValueError) naming the argument that
    cannot be used.
    """

    max_attempts: int = 3
    backoff: float = 1.0
    max_backoff: float = 30.0
    multiplier: float = 2.0
    jitter: float = 0.0
    retry_on: type[Exception] | tuple[type[Exception], ...] = (Exception,)
    circuit_open_after: int | None = None
    circuit_cooldown: float = 30.0

    def __post_init__(self) -> None:
        _check_count("max_attempts", self.max_attempts)
        if self.circuit_open_after is not None:
            _check_count("circuit_open_after", self.circuit_open_after)
        for name in ("backoff", "max_backoff", "multiplier", "jitter", "circuit_cooldown"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"Budget: {name}={value!r} is not a number")
            if not math.isfinite(value) or value < 0:
                raise ConfigError(f"Budget: {name}={value!r} is not a finite number >= 0")
        if self.multiplier < 1:
            raise ConfigError(f"Budget: multiplier={self.multiplier!r} is below 1")
        if self.jitter > 1:
            raise ConfigError(f"Budget: jitter={self.jitter!r} is not a share from 0 to 1")
        if self.max_backoff < self.backoff:
            raise ConfigError(
                f"Budget: max_backoff={self.max_backoff!r} is below backoff={self.backoff!r}"
            )
        kinds = self.retry_on if isinstance(self.retry_on, tuple) else (self.retry_on,)
        for kind in kinds:
            if not (isinstance(kind, type) and issubclass(kind, Exception)):
                raise ConfigError(f"Budget: retry_on holds {kind!r}, not an Exception class")
            if issubclass(kind, ToolContractError):
                raise ConfigError(
                    "Budget: retry_on names ToolContractError, which is never retried: a "
                    "contract violation is the program's bug"
                )
        object.__setattr__(self, "retry_on", kinds)

    def retries(self, exc: BaseException) -> bool:
        """Whether a failed attempt that raised ``exc`` is retried."""
        return isinstance(exc, self.retry_on) and not isinstance(exc, _NEVER_RETRIED)

    def wait(self, failed: int) -> float:
        """The seconds to wait after failed attempt ``failed`` (from 1), jitter drawn."""
        try:
            grown = self.backoff * self.multiplier ** (failed - 1)
        except OverflowError:
            grown = math.inf
        delay = min(self.max_backoff, grown)
        return delay * (1 - self.jitter * _jitter.random()) if self.jitter else delay


def _check_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"Budget: {name}={value!r} is not a whole number >= 1")


class _Circuit:
    """One tool's circuit breaker (see :class:`Budget`); thread-safe. It reads the real
    monotonic clock: a replay takes its decisions from the recording, not from it."""

    __slots__ = ("_failures", "_lock", "_opened_at", "_trial")

    def __init__(self) -> None:
        self._failures = 0
        self._opened_at: float | None = None
        self._trial = False  # a call let through after the cool-down, not yet settled
        self._lock = threading.Lock()

    def admit(self, tool: str, budget: Budget) -> None:
        """Let a call run, or raise CircuitOpenError."""
        with self._lock:
            if self._opened_at is None:
                return
            left = self._opened_at + budget.circuit_cooldown - time.monotonic()
            if left > 0 or self._trial:
                raise CircuitOpenError(tool, self._failures, max(left, 0.0))
            self._trial = True

    def is_open(self, budget: Budget) -> bool:
        """Whether a call now would be refused (a back-off before it is time lost)."""
        with self._lock:
            opened = self._opened_at
            return opened is not None and (
                self._trial or time.monotonic() < opened + budget.circuit_cooldown
            )

    def settle(self, budget: Budget, exc: BaseException | None) -> None:
        """Count an attempt's outcome: it returned (``exc`` None) or raised ``exc``."""
        with self._lock:
            self._trial = False
            if exc is not None and (
                not isinstance(exc, Exception) or isinstance(exc, _NEVER_RETRIED)
            ):
                return  # refused, cancelled, or no answer from the tool
            if exc is None or not budget.retries(exc):
                self._failures, self._opened_at = 0, None
                return
            self._failures += 1
            threshold = budget.circuit_open_after
            if threshold is not None and self._failures >= threshold:
                self._opened_at = time.monotonic()


_lock = threading.Lock()
_circuits: dict[str, _Circuit] = {}
# Under replay: each replay session's own circuits, gone with it.
_replay_circuits: weakref.WeakKeyDictionary[object, dict[str, _Circuit]] = (
    weakref.WeakKeyDictionary()
)


def _circuit(tool: str) -> _Circuit:
    server = current_server()
    with _lock:
        table = _circuits if server is None else _replay_circuits.setdefault(server, {})
        circuit = table.get(tool)
        if circuit is None:
            circuit = table[tool] = _Circuit()
        return circuit


class _Attempts:
    """One call of a tool under ``budget``: the steps of its attempts, and its circuit."""

    def __init__(self, budget: Budget, first: Call) -> None:
        self.budget = budget
        self.first = first
        # Taken before the first step begins, which may mark its call (a fork's change).
        self._template = dataclasses.replace(first, attributes=dict(first.attributes))
        self.made = 0
        self.circuit = _circuit(first.name)

    def next_call(self) -> Call:
        """The step of the next attempt: the same arguments, model tool call and idempotency
        key as the first, its own attempt number."""
        self.made += 1
        if self.made == 1:
            call = self.first
        else:
            template = self._template
            call = dataclasses.replace(
                template, attributes=dict(template.attributes), key=self.first.key
            )
        call.attributes[A.REPLAY_TOOL_ATTEMPT] = self.made
        last = self.made == self.budget.max_attempts
        call.failure_attributes = self._overflow_last if last else _refused
        return call

    def _overflow_last(self, exc: BaseException) -> Mapping[str, Any]:
        """The last attempt's failure overflows the budget, as a refusal does."""
        return _OVERFLOW if self.budget.retries(exc) else _refused(exc)

    def admit(self) -> None:
        self.circuit.admit(self.first.name, self.budget)

    @contextmanager
    def settling(self) -> Iterator[None]:
        """While an attempt runs: its outcome, when it ends, goes to the circuit."""
        try:
            yield
        except BaseException as exc:
            self.circuit.settle(self.budget, exc)
            raise
        self.circuit.settle(self.budget, None)

    def wait(self, state: tenacity.RetryCallState) -> float:
        if self.circuit.is_open(self.budget):
            return 0.0  # the next attempt fails fast: no use waiting for it
        return self.budget.wait(state.attempt_number)

    def policy(self) -> dict[str, Any]:
        """tenacity's arguments: stop, wait and retry as the budget says."""
        return {
            "stop": tenacity.stop_after_attempt(self.budget.max_attempts),
            "wait": self.wait,
            "retry": tenacity.retry_if_exception(self.budget.retries),
            "reraise": False,
        }

    def overflow(self, error: tenacity.RetryError) -> RetryOverflowError:
        last = error.last_attempt.exception()
        assert last is not None  # tenacity stops past the budget on a failure only
        said = f"{qualified_name(last)}: {first_line(last)}" if str(last) else qualified_name(last)
        return RetryOverflowError(self.first.name, self.made, said)


def _refused(exc: BaseException) -> Mapping[str, Any]:
    """A call the circuit refused is past the budget too."""
    return _OVERFLOW if isinstance(exc, CircuitOpenError) else {}


def retried(budget: Budget, first: Call, attempt: Callable[[Call, Admit], T]) -> T:
    """The value of the first of ``attempt(call, admit)`` (one attempt's step) to return
    within ``budget``; RetryOverflowError past it (its cause: the last attempt's error), the
    attempt's own error when it is not retried."""
    attempts = _Attempts(budget, first)

    def one() -> T:
        call = attempts.next_call()
        with attempts.settling():
            return attempt(call, attempts.admit)

    try:
        return tenacity.Retrying(**attempts.policy())(one)
    except tenacity.RetryError as error:
        raise attempts.overflow(error) from error.last_attempt.exception()


async def retried_async(
    budget: Budget, first: Call, attempt: Callable[[Call, Admit], Awaitable[T]]
) -> T:
    """:func:`retried` for a coroutine."""
    attempts = _Attempts(budget, first)

    async def one() -> T:
        call = attempts.next_call()
        with attempts.settling():
            return await attempt(call, attempts.admit)

    try:
        return await tenacity.AsyncRetrying(**attempts.policy())(one)
    except tenacity.RetryError as error:
        raise attempts.overflow(error) from error.last_attempt.exception()
