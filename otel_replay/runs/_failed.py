"""What the span of a failed run says, so a backend (and ``otel-replay import``) sees the run
fail as the store does.

A run fails when the application did (``_process_trace``): an exception left its ``run()`` block,
or ended the process, or the process exited with a failing status; a step that failed and
that the application got over (a rate limit retried) fails no run. The run's span (the
``run()`` block's ``invoke_agent``; for the process run, the root span of its last burst,
``_process_trace``) then ends with:

* ``error.type``: the run's error type exactly as the store keeps it (``RunEnd.error_type``:
  the exception's qualified name, or ``exit status N``), which ``otel-replay runs`` shows as
  ``error (TYPE)`` and ``import`` reads back;
* status ERROR, described as ``TYPE: first line of the message``, the message redacted as a
  recorded body is (the user's ``OTEL_REPLAY_REDACT`` patterns and every credential the
  program sent) and cut to 200 characters; the type alone when content is not captured
  (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``): a message may quote content;
* ``replay.failure.severity`` ``critical`` (the run could not go on), and
  ``replay.failure.category`` only where the exception itself says which it is: a
  ``ToolContractError`` is a ``contract_violation``, an ``UnmatchedRequestError`` (replayed
  code asked for what the recording lacks) a ``replay_mismatch``. Any other exception, or an
  exit status, says nothing of its cause, so it gets no category.
"""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry.trace import Span, Status, StatusCode

from otel_replay import attributes as A
from otel_replay.errors import ToolContractError, UnmatchedRequestError
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
    return None
