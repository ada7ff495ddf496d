"""Which recorded exchange the code is inside, so that one exchange is one step.

A request can cross more than one hooked layer: an httpx client whose transport is aiohttp
(openai's ``DefaultAioHttpClient``) or urllib3, a requests call below an instrumented httpx
mock... The outermost hooked layer records the step and marks the OpenTelemetry context while
the exchange runs; every layer below sees the mark and only passes the request on.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from opentelemetry import context, trace
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY

if TYPE_CHECKING:
    from otel_replay.capture._step import OpenStep

__all__ = ["exchange", "in_exchange", "should_record"]

_IN_EXCHANGE = context.create_key("otel_replay.exchange")


def in_exchange() -> bool:
    """Whether a hooked layer above is already recording the current exchange."""
    return bool(context.get_value(_IN_EXCHANGE))


def should_record() -> bool:
    """Whether a hooked layer should record the request it is handed: not when instrumentation
    is suppressed (exporters sending telemetry) and not inside an exchange being recorded."""
    return not context.get_value(_SUPPRESS_INSTRUMENTATION_KEY) and not in_exchange()


@contextmanager
def exchange(step: OpenStep) -> Iterator[None]:
    """While ``step``'s request is on its way: the context marked as inside its exchange,
    with its span current; what the call raises fails the step and goes on up."""
    token = context.attach(
        trace.set_span_in_context(step.span, context.set_value(_IN_EXCHANGE, True))
    )
    try:
        yield
    except BaseException as exc:
        step.fail(exc)
        raise
    finally:
        context.detach(token)
