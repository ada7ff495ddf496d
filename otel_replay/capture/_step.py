"""One recorded step: from the request handed to the transport to the end of its response.

:class:`Recorder` holds what every step shares (tracer, redactor, hand-off, metrics).
:meth:`Recorder.begin` turns a request into a :class:`Step` with its span open; the response
tee feeds it chunks and finishes it exactly once. All work here runs on the application's
thread, so it is limited to redaction, one JSON parse per body, one sha256 per body and the
span attributes; compression and I/O belong to the exporter.

Inline bodies: bodies up to ``inline_limit`` bytes also go into the span
(``replay.request.body``, ``replay.response.body`` and what a replay needs besides: status,
content type, chunk boundaries), so OTLP data alone replays byte-exact. The instrumentor turns
them off (limit 0) when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` asks for no
content: bodies are content.

Hand-off: when the ``replay`` exporter is attached, each step's fixture is put into the
hand-off together with its span, before the span ends (see ``_handoff``).

Any failure of our own is logged once and swallowed: recording must never change what the
application sees.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from otel_replay import attributes as A
from otel_replay._canonical import canonical_json, sha256_tag
from otel_replay._inline import encode_body, fit_chunks
from otel_replay.capture._bodies import decode_content, is_json, is_sse
from otel_replay.capture._handoff import Fixture, Handoff
from otel_replay.capture._metrics import GenAiMetrics
from otel_replay.capture._open_steps import OpenSteps
from otel_replay.capture._redact import REDACTED, SECRET_HEADERS, Redactor
from otel_replay.capture._run import current_run
from otel_replay.capture.codecs import Codec, LlmRequest, detect
from otel_replay.errors import CodecError

__all__ = ["REQUEST_HASH_EXTENSION", "Recorder", "Step", "prompt_hash"]

REQUEST_HASH_EXTENSION = "otel_replay.request_hash"
"""Request extension carrying the body hash the capture computed, in replay mode only, so the
replay transport serving the same request does not hash it again."""

_log = logging.getLogger(__name__)

_INFERENCE_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
_DEFAULT_PORTS = {"https": 443, "http": 80}


def prompt_hash(messages: bytes, system: bytes) -> str:
    """``replay.prompt.hash`` from the canonical JSON of the input messages and of the system
    instructions (``b"[]"`` when there are none): the hash of
    ``canonical_json({"input_messages": m, "system_instructions": s})``, without re-encoding."""
    return sha256_tag(b'{"input_messages":', messages, b',"system_instructions":', system, b"}")


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

    def begin(self, request: Any) -> Step:
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
        attrs: dict[str, Any] = run.attributes()
        attrs[A.REPLAY_STEP_INDEX] = index
        body = b""
        request_hash = ""
        if raw_body is not None:
            body = self.redactor.body(raw_body)
            request_hash = _request_body_attributes(body, self.inline_limit, attrs)
            if run.mode == "replay":
                request.extensions[REQUEST_HASH_EXTENSION] = request_hash

        codec, llm = _parse_request(method, url.path, raw_headers, body)
        port: int | None = url.port or _DEFAULT_PORTS.get(url.scheme)
        attrs["server.address"] = url.host
        if port is not None:
            attrs["server.port"] = port

        span: Span
        owns_span = True
        redacted_url: str | None = None
        if llm is not None:
            attrs[A.REPLAY_STEP_KIND] = "llm"
            self._add_llm_request_attributes(llm, attrs)
            foreign = _foreign_inference_span()
            if foreign is not None:
                span, owns_span = foreign, False
                span.set_attributes(attrs)
            else:
                name = f"{llm.operation} {llm.model}" if llm.model else llm.operation
                span = self.tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attrs)
        else:
            redacted_url = self.redactor.url(str(url))
            attrs[A.REPLAY_STEP_KIND] = "http"
            attrs["http.request.method"] = method
            attrs["url.full"] = redacted_url
            span = self.tracer.start_span(method, kind=SpanKind.CLIENT, attributes=attrs)

        fixture = None
        if self.handoff.wanted:
            if redacted_url is None:
                redacted_url = self.redactor.url(str(url))
            ctx = span.get_span_context()
            fixture = Fixture(
                run_id=run.run_id,
                step_index=index,
                trace_id=ctx.trace_id,
                span_id=ctx.span_id,
                kind=attrs[A.REPLAY_STEP_KIND],
                method=method,
                url=redacted_url,
                request_headers=_redacted_headers(self.redactor, raw_headers),
                request_body=body,
                request_hash=request_hash,
                start_ns=time.time_ns(),
            )
        return Step(self, span, owns_span, codec, llm, fixture, attrs, raw_body is None)

    def _add_llm_request_attributes(self, llm: LlmRequest, attrs: dict[str, Any]) -> None:
        attrs["gen_ai.operation.name"] = llm.operation
        attrs["gen_ai.provider.name"] = llm.provider
        attrs.update(llm.attributes)
        messages = canonical_json(llm.input_messages)
        system = canonical_json(llm.system_instructions) if llm.system_instructions else b"[]"
        attrs[A.REPLAY_PROMPT_HASH] = prompt_hash(messages, system)
        tools = canonical_json(llm.tool_definitions) if llm.tool_definitions else None
        if tools is not None:
            attrs[A.REPLAY_TOOL_SCHEMA_VERSION] = sha256_tag(tools)
        if self.capture_content:
            attrs["gen_ai.input.messages"] = messages.decode()
            if llm.system_instructions:
                attrs["gen_ai.system_instructions"] = system.decode()
            if tools is not None:
                attrs["gen_ai.tool.definitions"] = tools.decode()


def _request_body_attributes(body: bytes, inline_limit: int, attrs: dict[str, Any]) -> str:
    """Add the (redacted) request body's hash, size and, within ``inline_limit``, the body
    itself to ``attrs``; the hash."""
    request_hash = sha256_tag(body)
    attrs[A.REPLAY_REQUEST_HASH] = request_hash
    attrs[A.REPLAY_REQUEST_SIZE] = len(body)
    if inline_limit and len(body) <= inline_limit:
        attrs[A.REPLAY_REQUEST_BODY] = encode_body(body)
    return request_hash


def _parse_request(
    method: str, path: str, raw_headers: list[tuple[bytes, bytes]], body: bytes
) -> tuple[Codec | None, LlmRequest | None]:
    """The codec and what it reads from a model call's request body, or (None, None)."""
    if method == "POST" and body[:1] == b"{" and is_json(_raw_header(raw_headers, b"content-type")):
        try:
            parsed = orjson.loads(body)
            codec = detect(method, path, parsed)
            if codec is not None:
                return codec, codec.parse_request(path, parsed)
        except (orjson.JSONDecodeError, CodecError):
            pass
    return None, None


def _raw_header(headers: list[tuple[bytes, bytes]], name: bytes) -> str:
    """``header`` on raw pairs: the first value of ``name`` (lower-case), decoded, or ``""``.

    Decodes only the value it returns; the other headers stay bytes.
    """
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return ""


def _content_headers(headers: list[tuple[bytes, bytes]]) -> tuple[str, str]:
    """The first ``Content-Type`` and first ``Content-Encoding`` values (``""`` when absent),
    in one pass over the raw pairs."""
    content_type = encoding = ""
    for key, value in headers:
        name = key.lower()
        if name == b"content-type":
            if not content_type:
                content_type = value.decode("latin-1")
        elif name == b"content-encoding" and not encoding:
            encoding = value.decode("latin-1")
    return content_type, encoding


_SECRET_HEADERS = frozenset(name.encode() for name in SECRET_HEADERS)
_CODING_HEADERS = frozenset({b"content-encoding", b"content-length"})


def _redacted_headers(
    redactor: Redactor, headers: list[tuple[bytes, bytes]], drop_coding: bool = False
) -> list[tuple[str, str]]:
    """Raw header pairs as text, redacted as :meth:`Redactor.headers` does, in one pass (this
    runs on the application thread for every step the exporter records); without the content
    coding and length when the body was decoded from its ``Content-Encoding``."""
    body = redactor.body  # user patterns; returns its argument when there are none
    out = []
    for key, value in headers:
        name = key.lower()
        if drop_coding and name in _CODING_HEADERS:
            continue
        text = REDACTED if name in _SECRET_HEADERS else body(value).decode("latin-1")
        out.append((key.decode("latin-1"), text))
    return out


def _foreign_inference_span() -> Span | None:
    """The current span if another instrumentation (the official GenAI ones) already opened
    an inference span for this call; we enrich it instead of emitting a second one."""
    span = trace.get_current_span()
    if not span.is_recording():
        return None
    attrs = getattr(span, "attributes", None)
    if attrs and attrs.get("gen_ai.operation.name") in _INFERENCE_OPERATIONS:
        return span
    return None


class Step:
    """A step in flight. The tee calls :meth:`on_chunk` per chunk, then :meth:`finish` or
    :meth:`fail`; the first of those to run wins, later calls are no-ops."""

    __slots__ = (
        "_attrs",
        "_chunks",
        "_codec",
        "_done",
        "_first_chunk_ns",
        "_fixture",
        "_llm",
        "_marks",
        "_owns_span",
        "_recorder",
        "_request_chunks",
        "_response_headers",
        "_start_ns",
        "_status",
        "span",
    )

    def __init__(
        self,
        recorder: Recorder,
        span: Span,
        owns_span: bool,
        codec: Codec | None,
        llm: LlmRequest | None,
        fixture: Fixture | None,
        attrs: dict[str, Any],
        streamed_request: bool = False,
    ) -> None:
        self._recorder = recorder
        self.span = span
        self._owns_span = owns_span
        self._codec = codec
        self._llm = llm
        self._fixture = fixture
        self._attrs = attrs
        self._chunks: list[bytes] = []
        # The bytes of a streamed request body as the transport reads them; None otherwise.
        self._request_chunks: list[bytes] | None = [] if streamed_request else None
        # (size, ns after the request was sent) per chunk, for the fixture and inline chunking.
        self._marks: list[tuple[int, int]] | None = (
            [] if fixture is not None or recorder.inline_limit else None
        )
        self._status: int | None = None
        self._response_headers: list[tuple[bytes, bytes]] = []
        self._start_ns = time.perf_counter_ns()
        self._first_chunk_ns = 0
        self._done = False

    @property
    def owns_span(self) -> bool:
        """False when the step enriches another instrumentation's span instead of its own."""
        return self._owns_span

    @property
    def streams_request(self) -> bool:
        """True when the request body is streamed: tee it through :meth:`on_request_chunk`."""
        return self._request_chunks is not None

    def on_request_start(self) -> None:
        """The transport starts reading the streamed request body (again, for a retry)."""
        if self._request_chunks is not None:
            self._request_chunks.clear()

    def on_request_chunk(self, chunk: bytes) -> None:
        """Remember one chunk of the streamed request body as the transport reads it."""
        if self._request_chunks is not None:
            self._request_chunks.append(chunk)

    def on_response(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        """Record the response head as soon as the transport returns it."""
        self._status = status
        self._response_headers = headers  # decoded only if a fixture wants them

    def on_chunk(self, chunk: bytes) -> None:
        """Remember one chunk exactly as the application receives it."""
        now = time.perf_counter_ns()
        if not self._chunks:
            self._first_chunk_ns = now
        self._chunks.append(chunk)
        if self._marks is not None:
            self._marks.append((len(chunk), now - self._start_ns))

    def fail(self, exc: BaseException) -> None:
        """The transport raised (before or during the response): record, never swallow."""
        self._end(complete=False, error_type=_error_type(exc))

    def finish(self, complete: bool) -> None:
        """The response stream was exhausted (``complete``) or closed early."""
        self._end(complete=complete, error_type=None)

    def _end(self, complete: bool, error_type: str | None) -> None:
        if self._done:
            return
        self._done = True
        self._recorder.open_steps.untrack(self)
        try:
            self._record_end(complete, error_type)
        except Exception as exc:
            self._recorder.warn_once("finishing a step", exc)
            if self._owns_span:
                self.span.end()

    def _record_end(self, complete: bool, error_type: str | None) -> None:
        recorder = self._recorder
        span = self.span
        status = self._status
        raw_headers = self._response_headers
        attrs: dict[str, Any] = {}
        self._streamed_request_attributes(attrs)
        body = b"".join(self._chunks)  # the chunk itself when there is one
        content_type, encoding = _content_headers(raw_headers)
        decoded_content = False
        if encoding:
            decoded = decode_content(body, encoding) if complete else None
            if decoded is not None:
                body = decoded
                decoded_content = True
        body = recorder.redactor.body(body)
        response_hash = sha256_tag(body) if status is not None else None
        if response_hash is not None:
            attrs[A.REPLAY_RESPONSE_HASH] = response_hash
            attrs[A.REPLAY_RESPONSE_SIZE] = len(body)
            if recorder.inline_limit and len(body) <= recorder.inline_limit:
                self._inline_response(status, content_type, body, attrs)
        streamed = is_sse(content_type)
        if status is not None:
            if self._llm is None:
                attrs["http.response.status_code"] = status
            else:
                finished = self._llm_response_attributes(status, body, streamed, attrs)
                complete = complete or (streamed and finished and error_type is None)
            if status >= 400 and error_type is None:
                error_type = attrs.get("error.type") or str(status)
        if error_type is not None:
            attrs["error.type"] = error_type
        attrs[A.REPLAY_RESPONSE_COMPLETE] = complete and error_type is None

        span.set_attributes(attrs)
        if error_type is not None and self._owns_span:
            span.set_status(Status(StatusCode.ERROR))

        if self._llm is not None:
            self._attrs.update(attrs)
            recorder.metrics.record(self._attrs, (time.perf_counter_ns() - self._start_ns) / 1e9)

        fixture = self._fixture
        if fixture is not None:
            fixture.chunks = self._marks or []
            fixture.status_code = status
            fixture.response_headers = _redacted_headers(
                recorder.redactor, raw_headers, drop_coding=decoded_content
            )
            fixture.response_body = body
            fixture.response_hash = response_hash
            fixture.complete = complete and error_type is None
            fixture.error_type = error_type
            fixture.end_ns = time.time_ns()
        self._hand_off_and_end()

    def _streamed_request_attributes(self, attrs: dict[str, Any]) -> None:
        """For a streamed request body, add its attributes from what the transport read."""
        if self._request_chunks is None:
            return
        recorder = self._recorder
        sent = recorder.redactor.body(b"".join(self._request_chunks))
        sent_hash = _request_body_attributes(sent, recorder.inline_limit, attrs)
        if self._fixture is not None:
            self._fixture.request_body, self._fixture.request_hash = sent, sent_hash

    def _hand_off_and_end(self) -> None:
        # The hand-off claims the span before it ends, so the exporter never gets it twice.
        if self._fixture is not None:
            self._recorder.handoff.put(self._fixture, self.span)
        if self._owns_span:
            self.span.end()

    def _inline_response(
        self, status: int | None, content_type: str, body: bytes, attrs: dict[str, Any]
    ) -> None:
        """Add the inline response body and what a byte-exact replay needs with it."""
        attrs[A.REPLAY_RESPONSE_BODY] = encode_body(body)
        if status is not None:
            attrs[A.REPLAY_RESPONSE_STATUS_CODE] = status
        if content_type:
            redacted = self._recorder.redactor.body(content_type.encode("latin-1"))
            attrs[A.REPLAY_RESPONSE_CONTENT_TYPE] = redacted.decode("latin-1")
        marks = self._marks
        if marks is not None and len(marks) > 1:
            sizes = fit_chunks([size for size, _ in marks], len(body))
            attrs[A.REPLAY_RESPONSE_CHUNK_SIZES] = sizes
            attrs[A.REPLAY_RESPONSE_CHUNK_TIMES] = [ns for _, ns in marks[: len(sizes)]]

    def _llm_response_attributes(
        self, status: int, body: bytes, streamed: bool, attrs: dict[str, Any]
    ) -> bool:
        """Add the codec's response attributes to ``attrs``; True when the provider's answer
        arrived whole (see ``LlmResponse.finished``)."""
        assert self._codec is not None
        try:
            response = self._codec.parse_response(status, body, streamed)
        except CodecError:
            return False
        attrs.update(response.attributes)
        if response.error_type is not None and status >= 400:
            attrs["error.type"] = response.error_type
        if streamed and self._first_chunk_ns:
            attrs["gen_ai.response.time_to_first_chunk"] = (
                self._first_chunk_ns - self._start_ns
            ) / 1e9
        if self._recorder.capture_content and response.output_messages:
            attrs["gen_ai.output.messages"] = canonical_json(response.output_messages).decode()
        return response.finished and response.error_type is None


def _error_type(exc: BaseException) -> str:
    cls = type(exc)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"
