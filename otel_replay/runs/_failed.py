"""What the span of a failed run says, so a backend sees the run fail as the store does."""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry.trace import Span, Status, StatusCode

from otel_replay import attributes as A
from otel_replay.errors import RetryOverflowError, ToolContractError, UnmatchedRequestError
from otel_replay.redact import Redactor

__all__ = ["Failure", "describe_with", "mark_failed"]

_MAX_MESSAGE = 200
_redactor: Redactor | None = None
_content = False


@dataclass(frozen=True, slots=True)
class Failure:
    """How the application failed: ``error_type`` as the store keeps it, and the exception
    when there was one (None for an exit status)."""

    error_type: str
    exc: BaseException | None = None


def describe_with(redactor: Redactor | None, content: bool) -> None:
    """Redact failure messages with ``redactor`` (the instrumentor's, which knows the
    credentials the program sent); ``content``: messages may be shown at all. None: show
    none (not recording)."""
    global _redactor, _content
    _redactor, _content = redactor, content and redactor is not None


def mark_failed(span: Span, failure: Failure, kit: bool = True) -> None:
    """Make ``span`` the span of a run that failed so (see the module); the caller ends it.
    ``kit``: the span carries the replay kit (False: a ``run()`` block's span while
    otel-replay does not record gets no ``replay.*`` attribute)."""
    span.set_attribute("error.type", failure.error_type)
    if kit:
        severity = A.ReplayFailureSeverityValues.CRITICAL.value
        span.set_attribute(A.REPLAY_FAILURE_SEVERITY, severity)
        category = _category(failure.exc)
        if category is not None:
            span.set_attribute(A.REPLAY_FAILURE_CATEGORY, category)
    span.set_status(Status(StatusCode.ERROR, _description(failure)))


def _description(failure: Failure) -> str:
    exc, redactor = failure.exc, _redactor
    if exc is None or redactor is None or not _content or not str(exc).strip():
        return failure.error_type
    # Redacted whole, then cut: a secret cut in two would no longer be recognised.
    text = redactor.body(str(exc).encode("utf-8", "backslashreplace")).decode("utf-8", "replace")
    lines = text.strip().splitlines()
    message = lines[0] if lines else ""
    if len(message) > _MAX_MESSAGE:
        message = message[: _MAX_MESSAGE - 1] + "…"
    return f"{failure.error_type}: {message}"


def _category(exc: BaseException | None) -> str | None:
    if isinstance(exc, ToolContractError):
        return A.ReplayFailureCategoryValues.CONTRACT_VIOLATION.value
    if isinstance(exc, UnmatchedRequestError):
        return A.ReplayFailureCategoryValues.REPLAY_MISMATCH.value
    if isinstance(exc, RetryOverflowError):
        return A.ReplayFailureCategoryValues.RETRY_OVERFLOW.value
    return None
