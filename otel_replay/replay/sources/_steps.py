"""One step span (and the store's step for it, when there is one) into a RecordedStep."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from otel_replay import attributes as A
from otel_replay._bodies import json_value
from otel_replay._canonical import sha256_tag
from otel_replay._inline import decode_body, fit_chunks
from otel_replay.codecs import CODECS, detect
from otel_replay.replay._model import Fidelity, RecordedStep, endpoint_of
from otel_replay.replay.sources._runs import attrs_of, int_value
from otel_replay.step import ENVELOPE_KINDS, Step, address

__all__ = ["CANONICAL_PATHS", "StepProblem", "build_step"]

CANONICAL_PATHS = {
    "openai.chat_completions": "/v1/chat/completions",
    "openai.responses": "/v1/responses",
    "anthropic.messages": "/v1/messages",
}
"""Each codec's usual path, to recognise an inline request body whose URL the span lacks."""

_OPENAI_PROVIDERS = frozenset({"openai", "azure.ai.openai"})
_OPENAI_API_TYPES = {"chat_completions": "openai.chat_completions", "responses": "openai.responses"}
"""``openai.api.type`` (which the OpenAI codecs set on every step) to its codec."""


class StepProblem(ValueError):
    """A step cannot be rebuilt; the caller adds the source and run to the message."""


def build_step(
    run_id: str,
    index: int,
    span: Mapping[str, Any] | None,
    stored: Step | None,
    *,
    default_kind: str = "llm",
) -> RecordedStep:
    """The step ``index`` of run ``run_id`` from its span dict and/or the store's step (at
    least one).

    Raises StepProblem when the step's bytes are inconsistent with its hashes, when it has
    neither recorded bytes nor what a synthesised response needs (SourceError from the
    synthesiser passes through), or when its span lacks a replay-kit attribute every
    otel-replay recording carries.
    """
    attrs: Mapping[str, Any] = attrs_of(span) if span is not None else {}
    kind = str(attrs.get(A.REPLAY_STEP_KIND) or (stored.kind if stored else default_kind))
    if A.REPLAY_TOOL_EFFECT in attrs and A.REPLAY_TOOL_EFFECT_REASON not in attrs:
        raise StepProblem(
            f"the span has {A.REPLAY_TOOL_EFFECT} but no {A.REPLAY_TOOL_EFFECT_REASON}: a "
            "pre-release otel-replay recorded it; record the run again"
        )
    url: str | None
    if kind in ENVELOPE_KINDS:
        method, url = _envelope_address(kind, attrs, stored)
    else:
        method = stored.method if stored else str(attrs.get("http.request.method") or "POST")
        url = stored.url if stored and stored.url else _str(attrs.get("url.full"))
    request_hash = _str(attrs.get(A.REPLAY_REQUEST_HASH)) or (
        stored.request_hash if stored else None
    )
    request_body = (
        stored.request_body
        if stored
        else _inline(attrs, A.REPLAY_REQUEST_BODY, "gen_ai.tool.call.arguments")
    )
    if stored is None and request_body is not None:
        _check(request_body, request_hash, "request")
    endpoint = _endpoint(kind, method, url, request_body, attrs)
    start = _start(span, stored)
    duration = _duration(span, stored)
    facts: dict[str, Any] = {
        "index": index,
        "kind": kind,
        "method": method,
        "url": url or "",
        "request_body": request_body or b"",
        "request_hash": request_hash or "",
        "provider": _str(attrs.get("gen_ai.provider.name")) or _str(attrs.get("gen_ai.system")),
        "model": _str(attrs.get("gen_ai.request.model"))
        or _str(attrs.get("gen_ai.response.model")),
        "within": stored.within if stored else int_value(attrs.get(A.REPLAY_STEP_WITHIN)),
        "start_ns": start,
        "end_ns": start + duration,
    }
    added: dict[str, Any] = {
        "endpoint": endpoint,
        "request_known": request_body is not None,
        "prompt_hash": _str(attrs.get(A.REPLAY_PROMPT_HASH)),
        "tool_schema_version": _str(attrs.get(A.REPLAY_TOOL_SCHEMA_VERSION)),
        "attributes": dict(attrs),
    }
    if stored is not None:
        chunks = _fit(stored.chunks, len(stored.response_body))
        return RecordedStep(replace(stored, **facts, chunks=chunks), fidelity="exact", **added)
    response = _from_span(kind, endpoint, request_body, attrs, duration)
    fidelity = response.pop("fidelity")
    step = Step(run_id=run_id, trace_id=0, span_id=0, request_headers=[], **facts, **response)
    return RecordedStep(step, fidelity=fidelity, **added)


def _from_span(
    kind: str,
    endpoint: str,
    request_body: bytes | None,
    attrs: Mapping[str, Any],
    duration_ns: int,
) -> dict[str, Any]:
    """The response fields of a step rebuilt from its span alone."""
    status = int_value(attrs.get(A.REPLAY_RESPONSE_STATUS_CODE))
    if status is None:
        status = int_value(attrs.get("http.response.status_code"))
    if kind in ENVELOPE_KINDS:
        status = 200  # the body says whether it returned or raised
    elif status is not None and not 100 <= status <= 999:
        raise StepProblem(f"response status {status} is not an HTTP status (three digits)")
    error_type = _str(attrs.get("error.type"))
    body = _inline(attrs, A.REPLAY_RESPONSE_BODY, "gen_ai.tool.call.result")
    if body is not None:
        _check(body, _str(attrs.get(A.REPLAY_RESPONSE_HASH)), "response")
        content_type = _str(attrs.get(A.REPLAY_RESPONSE_CONTENT_TYPE))
        sizes = _ints(attrs.get(A.REPLAY_RESPONSE_CHUNK_SIZES))
        times = _ints(attrs.get(A.REPLAY_RESPONSE_CHUNK_TIMES))
        return {
            "status_code": status,
            "response_headers": [("content-type", content_type)] if content_type else [],
            "response_body": body,
            "fidelity": "exact",
            "chunks": _fit(list(zip(sizes, times, strict=False)), len(body)),
            "complete": attrs.get(A.REPLAY_RESPONSE_COMPLETE) is not False,
            "error_type": error_type,
        }
    fidelity: Fidelity = "exact" if A.REPLAY_RUN_ID in attrs else "semantic"
    if error_type is not None and status is None and not _has_output(attrs):
        # A transport error: nothing came back, so there is nothing to synthesise.
        return {
            "status_code": None,
            "response_headers": [],
            "response_body": b"",
            "fidelity": fidelity,
            "complete": False,
            "error_type": error_type,
        }
    if kind != "llm":
        raise StepProblem(
            "step has no recorded response body (it was over OTEL_REPLAY_INLINE_LIMIT or "
            "content capture was off); replay it from the store that recorded it"
        )
    # Loaded here: a step whose bytes were recorded (a run of the store) needs none of it.
    from otel_replay.replay.synth import synthesize  # noqa: PLC0415

    made = synthesize(
        endpoint, attrs, _streamed(request_body, attrs), duration_ns=duration_ns or None
    )
    return {
        "status_code": made.status_code,
        "response_headers": list(made.headers),
        "response_body": made.body,
        "fidelity": "semantic",
        "chunks": list(made.chunks),
        "complete": True,
        "error_type": None,
    }


def _has_output(attrs: Mapping[str, Any]) -> bool:
    return bool(attrs.get("gen_ai.output.messages"))


def _streamed(request_body: bytes | None, attrs: Mapping[str, Any]) -> bool:
    if request_body is not None:
        parsed = json_value(request_body)
        if isinstance(parsed, Mapping):
            return parsed.get("stream") is True
    return (
        attrs.get("gen_ai.request.stream") is True
        or attrs.get("gen_ai.response.time_to_first_chunk") is not None
    )


def _endpoint(
    kind: str, method: str, url: str | None, body: bytes | None, attrs: Mapping[str, Any]
) -> str:
    if kind != "llm":
        if url is None:
            raise StepProblem("HTTP step has no url.full")
        return endpoint_of(method, url, None)
    return _llm_endpoint(method, url, body, attrs)


def _envelope_address(kind: str, attrs: Mapping[str, Any], stored: Step | None) -> tuple[str, str]:
    """The pseudo method and URL of a tool, value or checkpoint step."""
    if stored is not None:
        return stored.method, stored.url
    key = "gen_ai.tool.name" if kind == "tool" else A.REPLAY_VALUE_NAME
    name = _str(attrs.get(key))
    if name is None:
        raise StepProblem(f"{kind} step has no {key}")
    return address(kind, name)


def _llm_endpoint(
    method: str, url: str | None, body: bytes | None, attrs: Mapping[str, Any]
) -> str:
    named = _codec_from_attributes(attrs)
    parsed = json_value(body) if body is not None else None
    if isinstance(parsed, Mapping):
        if url is not None:
            codec = detect(method, endpoint_of(method, url, None).split(" ", 1)[1], parsed)
            if codec is not None:
                return codec.name
        # Without the URL, bodies alone can be ambiguous (an OpenAI chat body and an
        # Anthropic one both hold "messages"): the span's provider settles it.
        fitting = [
            codec.name
            for codec in CODECS
            if codec.name in CANONICAL_PATHS and codec.matches(CANONICAL_PATHS[codec.name], parsed)
        ]
        if fitting:
            return named if named in fitting else fitting[0]
    name = named
    if name is None:
        provider = attrs.get("gen_ai.provider.name") or attrs.get("gen_ai.system")
        operation = attrs.get("gen_ai.operation.name")
        raise StepProblem(
            f"no provider codec for this model call (provider {provider!r}, operation "
            f"{operation!r})"
        )
    return name


def _codec_from_attributes(attrs: Mapping[str, Any]) -> str | None:
    """The codec of a model call known only by its GenAI attributes."""
    provider = attrs.get("gen_ai.provider.name") or attrs.get("gen_ai.system")
    operation = attrs.get("gen_ai.operation.name")
    if operation != "chat":
        return None
    if provider in _OPENAI_PROVIDERS:
        api_type = attrs.get("openai.api.type")
        if isinstance(api_type, str) and api_type in _OPENAI_API_TYPES:
            # A refused attempt has no response id to tell the APIs apart by.
            return _OPENAI_API_TYPES[api_type]
        response_id = attrs.get("gen_ai.response.id")
        # Responses API ids are resp_…, Chat Completions ids chatcmpl-….
        if isinstance(response_id, str) and response_id.startswith("resp_"):
            return "openai.responses"
        return "openai.chat_completions"
    if provider == "anthropic":
        return "anthropic.messages"
    return None


def _inline(attrs: Mapping[str, Any], key: str, text_key: str | None = None) -> bytes | None:
    """The body an inline attribute carries; else, for a tool, the GenAI attribute that
    carries it as its very text (``text_key``)."""
    value = attrs.get(key)
    if value is None:
        text = attrs.get(text_key) if text_key is not None else None
        return text.encode("utf-8") if isinstance(text, str) else None
    if not isinstance(value, str):
        raise StepProblem(f"{key} is not a string")
    try:
        return decode_body(value)
    except ValueError as exc:
        raise StepProblem(f"{key}: {exc}") from None


def _check(body: bytes, tag: str | None, what: str) -> None:
    if tag is not None and sha256_tag(body) != tag:
        raise StepProblem(
            f"the inline {what} body does not match replay.{what}.hash {tag} (altered or "
            f"damaged on its way)"
        )


def _fit(chunks: Sequence[tuple[int, int]], total: int) -> list[tuple[int, int]]:
    """Chunks whose sizes add up to ``total`` (see ``fit_chunks``), each with its time."""
    if not chunks or total == 0:
        return []
    sizes = fit_chunks([size for size, _ in chunks], total)
    return [(size, chunks[i][1]) for i, size in enumerate(sizes)]


def _start(span: Mapping[str, Any] | None, stored: Step | None) -> int:
    """When the step started (Unix ns), 0 when not known: the stored step's wall clock first,
    else its span's (a replay's spans are timed by the wall clock too: ``replay._world``)."""
    if stored is not None and stored.start_ns > 0:
        return stored.start_ns
    start = span.get("start_ns") if span is not None else None
    return start if isinstance(start, int) and start > 0 else 0


def _duration(span: Mapping[str, Any] | None, stored: Step | None) -> int:
    if span is not None:
        start, end = span.get("start_ns"), span.get("end_ns")
        if isinstance(start, int) and isinstance(end, int) and end >= start:
            return end - start
    if stored is not None and stored.end_ns >= stored.start_ns:
        return stored.end_ns - stored.start_ns
    return 0


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _ints(value: Any) -> list[int]:
    if not isinstance(value, list | tuple):
        return []
    return [n for n in (int_value(v) for v in value) if n is not None]
