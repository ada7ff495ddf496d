"""One recorded step in flight, from the request to the end of its response, then handed off."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from opentelemetry import context, trace
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY
from opentelemetry.trace import Span, Status, StatusCode

from otel_replay import attributes as A
from otel_replay._bodies import content_headers, decode_content, is_sse, is_stream
from otel_replay._canonical import sha256_tag
from otel_replay._clock import wall_ns
from otel_replay._inline import encode_body, fit_chunks
from otel_replay.codecs import Codec, LlmRequest, response_content
from otel_replay.envelope import current_server, note_tool_calls
from otel_replay.errors import CodecError
from otel_replay.runs import qualified_name
from otel_replay.step import Reading, Step

if TYPE_CHECKING:
    from otel_replay.capture._recorder import Recorder

__all__ = [
    "REQUEST_HASH_EXTENSION",
    "OpenStep",
    "exchange",
    "fill_in",
    "in_exchange",
    "request_body_attributes",
    "should_record",
]

REQUEST_HASH_EXTENSION = "otel_replay.request_hash"
"""Request extension carrying the body hash the capture computed, in replay mode only, so the
replay transport serving the same request does not hash it again."""


def fill_in(span: Span, attrs: Mapping[str, Any]) -> None:
    """Set on ``span`` (another instrumentation's) those of ``attrs`` it does not have yet."""
    if not span.is_recording():
        return
    existing = getattr(span, "attributes", None) or {}
    missing = {key: value for key, value in attrs.items() if key not in existing}
    if missing:
        span.set_attributes(missing)


def request_body_attributes(body: bytes, inline_limit: int, attrs: dict[str, Any]) -> str:
    """Add the (redacted) request body's hash, size and, within ``inline_limit``, the body
    itself to ``attrs``; the hash."""
    request_hash = sha256_tag(body)
    attrs[A.REPLAY_REQUEST_HASH] = request_hash
    attrs[A.REPLAY_REQUEST_SIZE] = len(body)
    if inline_limit and len(body) <= inline_limit:
        attrs[A.REPLAY_REQUEST_BODY] = encode_body(body)
    return request_hash


class OpenStep:
    """A step in flight. The tee calls :meth:`on_chunk` per chunk, then :meth:`finish` or
    :meth:`fail` (or the signal path :meth:`cut`); the first of those to run wins, later
    calls are no-ops."""

    __slots__ = (
        "_attrs",
        "_call",
        "_chunks",
        "_codec",
        "_first_chunk_ns",
        "_llm",
        "_marks",
        "_recorder",
        "_request_chunks",
        "_response_headers",
        "_start_ns",
        "_status",
        "_step",
        "span",
    )

    def __init__(
        self,
        recorder: Recorder,
        span: Span,
        call: Span | None,
        codec: Codec | None,
        llm: LlmRequest | None,
        step: Step | None,
        attrs: dict[str, Any],
        streamed_request: bool = False,
    ) -> None:
        self._recorder = recorder
        self.span = span
        self._call = call
        self._codec = codec
        self._llm = llm
        self._step = step
        self._attrs = attrs
        self._chunks: list[bytes] = []
        # The bytes of a streamed request body as the transport reads them; None otherwise.
        self._request_chunks: list[bytes] | None = [] if streamed_request else None
        # (size, ns after the request was sent) per chunk, for the Step and inline chunking.
        self._marks: list[tuple[int, int]] | None = (
            [] if step is not None or recorder.inline_limit else None
        )
        self._status: int | None = None
        self._response_headers: list[tuple[bytes, bytes]] = []
        self._start_ns = time.perf_counter_ns()
        self._first_chunk_ns = 0
        recorder.open_steps.begin(self)

    @property
    def call_span(self) -> Span | None:
        """The call span another instrumentation owns, this step being one of its attempts."""
        return self._call

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
        self._response_headers = headers  # decoded only if a Step wants them

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
        self._end(complete=False, error_type=qualified_name(exc))

    def finish(self, complete: bool) -> None:
        """The response stream was exhausted (``complete``) or closed early."""
        self._end(complete=complete, error_type=None)

    def cut(self, cause: str) -> bool:
        """The process is being cut off by ``cause`` (``SIGTERM``) with this step in flight:
        record it as an error of that type; False when it had already ended."""
        return self._end(complete=False, error_type=cause)

    def _end(self, complete: bool, error_type: str | None) -> bool:
        if not self._recorder.open_steps.claim(self):
            return False
        try:
            self._record_end(complete, error_type)
        except Exception as exc:
            self._recorder.warn_once("finishing a step", exc)
            self.span.end()
        return True

    def _record_end(self, complete: bool, error_type: str | None) -> None:
        recorder = self._recorder
        span = self.span
        status = self._status
        raw_headers = self._response_headers
        attrs: dict[str, Any] = {}
        self._streamed_request_attributes(attrs)
        body = b"".join(self._chunks)  # the chunk itself when there is one
        content_type, encoding = content_headers(raw_headers)
        decoded_content = False
        if encoding:
            decoded = decode_content(body, encoding) if complete else None
            if decoded is not None:
                body = decoded
                decoded_content = True
        body = recorder.redactor.body(body, stream=is_stream(content_type))
        response_hash = sha256_tag(body) if status is not None else None
        if response_hash is not None:
            attrs[A.REPLAY_RESPONSE_HASH] = response_hash
            attrs[A.REPLAY_RESPONSE_SIZE] = len(body)
            if recorder.inline_limit and len(body) <= recorder.inline_limit:
                self._inline_response(status, content_type, body, attrs)
        streamed = is_sse(content_type)
        call = self._call
        if status is not None:
            if self._llm is None or call is not None:
                attrs["http.response.status_code"] = status
            if self._llm is not None:
                finished = self._llm_response_attributes(status, body, streamed, attrs)
                complete = complete or (streamed and finished and error_type is None)
            if status >= 400 and error_type is None:
                error_type = attrs.get("error.type") or str(status)
        if error_type is not None:
            attrs["error.type"] = error_type
        attrs[A.REPLAY_RESPONSE_COMPLETE] = complete and error_type is None

        if call is None:
            span.set_attributes(attrs)
        else:
            self._end_attempt(
                call, attrs, error_type is None and status is not None and status < 400
            )
        if error_type is not None:
            span.set_status(Status(StatusCode.ERROR))

        if self._llm is not None:
            self._attrs.update(attrs)
            if call is None:  # else once per call, when the call span ends (``_calls``)
                seconds = (time.perf_counter_ns() - self._start_ns) / 1e9
                recorder.metrics.record(self._attrs, seconds)

        if self._step is not None:
            self._complete_step(
                self._step,
                status,
                recorder.redactor.headers(raw_headers, drop_coding=decoded_content),
                body,
                response_hash,
                complete and error_type is None,
                error_type,
                (streamed, attrs),
            )
        self._hand_off_and_end()

    def _end_attempt(self, call: Span, attrs: dict[str, Any], succeeded: bool) -> None:
        """Set the end of an attempt under ``call``: the GenAI attributes go onto the call span
        (a successful attempt's, where its owner did not set them), the rest onto ours."""
        own = {k: v for k, v in attrs.items() if not k.startswith("gen_ai.")}
        if succeeded:
            fill_in(call, {k: v for k, v in attrs.items() if k.startswith("gen_ai.")})
            output = attrs.get("gen_ai.output.messages")
            if output is not None and A.REPLAY_RESPONSE_BODY not in attrs:
                # The owner may write its own output messages as its span ends, over ours
                # and lossily; without the body, a replay from OTLP data needs ours.
                own[A.REPLAY_OUTPUT_MESSAGES] = output
        self.span.set_attributes(own)

    def _complete_step(
        self,
        step: Step,
        status: int | None,
        headers: list[tuple[str, str]],
        body: bytes,
        response_hash: str | None,
        complete: bool,
        error_type: str | None,
        read: tuple[bool, dict[str, Any]],
    ) -> None:
        """Fill in ``step`` with the response (redacted ``headers``, ``body``) and its end; for
        a model call, also the facts its span carries; and note in its reading what was
        ``read`` of the response: whether it streamed, the attributes put on its span."""
        _note_response(step.reading, body, response_hash, status, *read)
        step.chunks = self._marks or []
        step.status_code = status
        step.response_headers = headers
        step.response_body = body
        step.response_hash = response_hash
        step.complete = complete
        step.error_type = error_type
        step.end_ns = wall_ns()
        if self._llm is not None:
            _model_call_facts(step, self._attrs)

    def _streamed_request_attributes(self, attrs: dict[str, Any]) -> None:
        """For a streamed request body, add its attributes from what the transport read."""
        if self._request_chunks is None:
            return
        recorder = self._recorder
        sent = recorder.redactor.body(b"".join(self._request_chunks))
        sent_hash = request_body_attributes(sent, recorder.inline_limit, attrs)
        if self._step is not None:
            self._step.request_body, self._step.request_hash = sent, sent_hash

    def _hand_off_and_end(self) -> None:
        # The hand-off claims the span before it ends, so the exporter never gets it twice.
        if self._step is not None:
            self._recorder.handoff.put(self._step, self.span)
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
        if self._recorder.capture_content:
            attrs.update(response_content(response))
        run_id = self._attrs.get(A.REPLAY_RUN_ID)
        if response.output_messages and isinstance(run_id, str):
            note_tool_calls(run_id, response.output_messages)
        server = current_server()  # a replay: a fork's live answer names its tool calls anew
        if response.output_messages and server is not None:
            server.answered(self.span.get_span_context().span_id, response.output_messages)
        return response.finished and response.error_type is None


def _note_response(
    reading: Reading | None,
    body: bytes,
    response_hash: str | None,
    status: int | None,
    sse: bool,
    attrs: dict[str, Any],
) -> None:
    """Add to a step's :class:`Reading` the response and what was read from it (``attrs``)."""
    if reading is None or response_hash is None:
        return
    reading.response_body, reading.response_hash = body, response_hash
    reading.status, reading.sse = status or 0, sse
    for key in (A.REPLAY_RESPONSE_BODY, "gen_ai.output.messages"):
        if type(value := attrs.get(key)) is str:
            reading.values[key] = value


def _model_call_facts(step: Step, attrs: dict[str, Any]) -> None:
    """Copy onto ``step`` the provider, model and token counts its span carries (``attrs``:
    the request's and the response's attributes)."""
    step.provider = _text(attrs.get("gen_ai.provider.name"))
    step.model = _text(attrs.get("gen_ai.request.model")) or _text(
        attrs.get("gen_ai.response.model")
    )
    step.tokens_in = _count(attrs.get("gen_ai.usage.input_tokens"))
    step.tokens_out = _count(attrs.get("gen_ai.usage.output_tokens"))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


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
