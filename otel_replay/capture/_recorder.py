"""The recorder: what every step shares, and the start of each step (:meth:`Recorder.begin`).

Any failure of our own is logged once and swallowed: recording never changes what the
application sees."""

from __future__ import annotations

import logging
from typing import Any

import orjson
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Tracer

from otel_replay import attributes as A
from otel_replay._bodies import is_json, raw_header
from otel_replay._clock import wall_ns
from otel_replay.capture._calls import CALL_SPANS
from otel_replay.capture._metrics import GenAiMetrics
from otel_replay.capture._step import (
    REQUEST_HASH_EXTENSION,
    OpenStep,
    fill_in,
    request_body_attributes,
)
from otel_replay.codecs import INFERENCE_OPERATIONS, Codec, LlmRequest, detect, request_content
from otel_replay.envelope import enclosing_step
from otel_replay.errors import CodecError
from otel_replay.redact import Redactor
from otel_replay.runs import Handoff, OpenSteps, RunState, current_run
from otel_replay.step import Reading, Step

__all__ = ["REQUEST_HASH_EXTENSION", "Recorder"]

_log = logging.getLogger(__name__)

_DEFAULT_PORTS = {"https": 443, "http": 80}
_CALL_SPAN_PREFIXES = ("gen_ai.", "server.")
"""The request attributes a call span owned by another instrumentation gets from us."""
_HASHES = frozenset({A.REPLAY_PROMPT_HASH, A.REPLAY_TOOL_SCHEMA_VERSION})
"""The content attributes kept with content capture off: hashes only."""
_READ = (
    *_HASHES,
    A.REPLAY_REQUEST_BODY,
    "gen_ai.input.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
)
"""The request's attributes a step's :class:`Reading` names (strings the capture made): what
the store can rebuild."""


class Recorder:
    """Shared state of one instrumentation: builds steps and finishes them."""

    def __init__(
        self,
        tracer: Tracer,
        redactor: Redactor,
        handoff: Handoff,
        metrics: GenAiMetrics,
        capture_content: bool,
        inline_limit: int = 0,
    ) -> None:
        self.tracer = tracer
        self.redactor = redactor
        self.handoff = handoff
        self.metrics = metrics
        self.capture_content = capture_content
        self.inline_limit = inline_limit
        """Bodies up to this many bytes also go into the span; 0: none."""
        self.open_steps = OpenSteps()
        self._warned: set[str] = set()

    def warn_once(self, what: str, exc: BaseException) -> None:
        """Log an internal failure once per kind; never the exception's text (it may hold data
        from the request)."""
        if what not in self._warned:
            self._warned.add(what)
            _log.warning(
                "otel-replay: %s failed (%s); the call goes on unrecorded",
                what,
                type(exc).__qualname__,
            )

    def begin(self, request: Any) -> OpenStep:
        """Open the step (and its span) for ``request``, an ``httpx``/``httpx2`` Request."""
        self.open_steps.finish_dropped()
        run = current_run()
        index = run.next_step()
        url = request.url
        method: str = request.method
        raw_headers: list[tuple[bytes, bytes]] = request.headers.raw
        # None for a streamed body (a generator, a multipart upload): its bytes exist only as
        # the transport reads them, so the step tees them and hashes them at its end.
        raw_body: bytes | None = getattr(request, "_content", None)
        url_text = str(url)
        self.redactor.learn(raw_headers, url_text)
        attrs: dict[str, Any] = run.step_attributes()
        attrs[A.REPLAY_STEP_INDEX] = index
        _place(run, index, attrs)
        body = b""
        request_hash = ""
        if raw_body is not None:
            body = self.redactor.body(raw_body)
            request_hash = request_body_attributes(body, self.inline_limit, attrs)
            if run.mode == "replay":
                request.extensions[REQUEST_HASH_EXTENSION] = request_hash

        codec, llm = _parse_request(method, url.path, raw_headers, body)
        _add_server_attributes(url, attrs)

        span: Span
        call: Span | None = None
        redacted_url: str | None = None
        if llm is not None:
            attrs[A.REPLAY_STEP_KIND] = "llm"
            self._add_llm_request_attributes(llm, attrs)
            call = _foreign_inference_span()
            if call is not None:
                redacted_url = self.redactor.url(url_text)
                span = self._attempt_span(call, method, redacted_url, attrs, run.attributes())
            else:
                name = f"{llm.operation} {llm.model}" if llm.model else llm.operation
                span = self.tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attrs)
        else:
            redacted_url = self.redactor.url(url_text)
            attrs[A.REPLAY_STEP_KIND] = "http"
            attrs["http.request.method"] = method
            attrs["url.full"] = redacted_url
            span = self.tracer.start_span(method, kind=SpanKind.CLIENT, attributes=attrs)

        step = None
        if self.handoff.wanted:
            if redacted_url is None:
                redacted_url = self.redactor.url(url_text)
            ctx = span.get_span_context()
            step = Step(
                run_id=run.run_id,
                index=index,
                trace_id=ctx.trace_id,
                span_id=ctx.span_id,
                kind=attrs[A.REPLAY_STEP_KIND],
                method=method,
                url=redacted_url,
                request_headers=self.redactor.headers(raw_headers),
                request_body=body,
                request_hash=request_hash,
                start_ns=wall_ns(),
                run=run.facts(),
                within=attrs.get(A.REPLAY_STEP_WITHIN),
                reading=_reading(codec if llm is not None else None, body, request_hash, attrs),
            )
        return OpenStep(self, span, call, codec, llm, step, attrs, raw_body is None)

    def _attempt_span(
        self,
        call: Span,
        method: str,
        url: str,
        attrs: dict[str, Any],
        run_attrs: dict[str, Any],
    ) -> Span:
        """Start the span of one attempt of a model call whose span ``call`` another
        instrumentation owns: an HTTP client span beneath it with the step's attributes but
        the GenAI ones, which go onto ``call`` (on the first attempt: a retry sends the same
        request) where it lacks them, with the run's kit."""
        resend = CALL_SPANS.attempt(call, self.metrics)
        if resend == 0:
            run_attrs.update((k, v) for k, v in attrs.items() if k.startswith(_CALL_SPAN_PREFIXES))
            fill_in(call, run_attrs)
        own = {k: v for k, v in attrs.items() if not k.startswith("gen_ai.")}
        messages = attrs.get("gen_ai.input.messages")
        if messages is not None and A.REPLAY_REQUEST_BODY not in attrs:
            # The owner may write its own input messages over ours, leaving part of the
            # conversation out; without the body, a replay from OTLP data matches on ours.
            own[A.REPLAY_INPUT_MESSAGES] = messages
        own["http.request.method"] = method
        own["url.full"] = url
        if resend:
            own["http.request.resend_count"] = resend
        return self.tracer.start_span(method, kind=SpanKind.CLIENT, attributes=own)

    def _add_llm_request_attributes(self, llm: LlmRequest, attrs: dict[str, Any]) -> None:
        attrs["gen_ai.operation.name"] = llm.operation
        attrs["gen_ai.provider.name"] = llm.provider
        attrs.update(llm.attributes)
        for key, value in request_content(llm).items():
            if self.capture_content or key in _HASHES:
                attrs[key] = value


def _reading(codec: Codec | None, body: bytes, request_hash: str, attrs: dict[str, Any]) -> Reading:
    """What the capture made of a request's body (``codec``: the one that read it)."""
    read = {k: attrs[k] for k in _READ if k in attrs}
    return Reading(body, request_hash, None if codec is None else codec.name, read)


def _place(run: RunState, index: int, attrs: dict[str, Any]) -> None:
    """Where step ``index`` stands among the others: the tool whose body made it, and the
    step its thread or task made before it."""
    within = enclosing_step(run.run_id)
    if within is not None:
        attrs[A.REPLAY_STEP_WITHIN] = within
    after = run.step_after(index)
    if after is not None:
        attrs[A.REPLAY_STEP_AFTER] = after


def _add_server_attributes(url: Any, attrs: dict[str, Any]) -> None:
    attrs["server.address"] = url.host
    port: int | None = url.port or _DEFAULT_PORTS.get(url.scheme)
    if port is not None:
        attrs["server.port"] = port


def _parse_request(
    method: str, path: str, raw_headers: list[tuple[bytes, bytes]], body: bytes
) -> tuple[Codec | None, LlmRequest | None]:
    """The codec and what it reads from a model call's request body, or (None, None)."""
    if method == "POST" and body[:1] == b"{" and is_json(raw_header(raw_headers, b"content-type")):
        try:
            parsed = orjson.loads(body)
            codec = detect(method, path, parsed)
            if codec is not None:
                return codec, codec.parse_request(path, parsed)
        except (orjson.JSONDecodeError, CodecError):
            pass
    return None, None


def _foreign_inference_span() -> Span | None:
    """The current span if another instrumentation (an SDK's own, the official GenAI ones)
    already opened an inference span for this call: the call span each attempt nests under,
    instead of a second ``chat`` span."""
    span = trace.get_current_span()
    if not span.is_recording():
        return None
    attrs = getattr(span, "attributes", None)
    if attrs and attrs.get("gen_ai.operation.name") in INFERENCE_OPERATIONS:
        return span
    return None
