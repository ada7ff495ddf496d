"""What ``show`` says about each step, gathered from the run as loaded: its steps (recorded
bytes, or rebuilt from their spans) and their spans' attributes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from otel_replay import attributes as A
from otel_replay.cli._messages import (
    ToolCall,
    body_preview,
    parse_json_list,
    prompt_preview,
    response_preview,
    tool_calls,
)
from otel_replay.codecs import detect
from otel_replay.errors import CodecError
from otel_replay.replay import RecordedStep
from otel_replay.replay.sources import SourceRun
from otel_replay.step import Step, refused_by_replay

__all__ = ["StepView", "step_views"]


@dataclass(slots=True)
class StepView:
    """One step as ``show`` presents it; ``prompt`` and ``response`` are full-length
    previews (cut to width when drawn). ``step`` is the step as loaded: a ``semantic`` one
    (``fidelity``) has no recorded bytes, its answer rebuilt from its span."""

    step: Step
    fidelity: str
    trace_id: int
    span_id: int
    request_hash: str | None
    response_hash: str | None
    request_size: int | None
    response_size: int | None
    method: str | None = None
    url: str | None = None
    stream: bool = False
    first_chunk_ns: int | None = None
    system_instructions: list[Any] = field(default_factory=list)
    input_messages: list[Any] = field(default_factory=list)
    output_messages: list[Any] = field(default_factory=list)
    finish_reasons: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    request_text: str | None = None
    response_text: str | None = None
    prompt: str = ""
    response: str = ""
    effect: str | None = None
    """A tool step's ``replay.tool.effect`` (read, write), when its span says."""
    effect_reason: str | None = None
    """Why it has that effect (``replay.tool.effect_reason``): set with ``effect``."""
    within: int | None = None
    """The step whose body made this one (``replay.step.within``): a replay serves that step
    whole and does not make this one again."""
    forked: str | None = None
    """In a fork: what it served here instead of the recorded answer, or ``live``
    (``replay.fork.change``); ``served`` for a step served from the recording; None outside
    forks."""

    def to_json(self) -> dict[str, Any]:
        """Everything about the step, JSON-ready, messages parsed."""
        step = self.step
        out: dict[str, Any] = {
            "index": step.index,
            "kind": step.kind,
            "fidelity": self.fidelity,
            "provider": step.provider,
            "model": step.model,
            "method": self.method,
            "url": self.url,
            "start_ns": step.start_ns,
            "end_ns": step.end_ns,
            "duration_ms": (step.end_ns - step.start_ns) / 1e6,
            "stream": self.stream,
            "time_to_first_chunk_ms": None
            if self.first_chunk_ns is None
            else self.first_chunk_ns / 1e6,
            "status_code": step.status_code,
            "error_type": step.error_type,
            "complete": step.complete,
            "tokens_in": step.tokens_in,
            "tokens_out": step.tokens_out,
            "request_hash": self.request_hash,
            "response_hash": self.response_hash,
            "request_size": self.request_size,
            "response_size": self.response_size,
            "trace_id": f"{self.trace_id:032x}",
            "span_id": f"{self.span_id:016x}",
        }
        if self.effect is not None:
            out["effect"] = self.effect
            out["effect_reason"] = self.effect_reason
        if self.within is not None:
            out["within"] = self.within
        if self.forked is not None:
            out["fork"] = self.forked
        if step.kind == "llm":
            out["system_instructions"] = self.system_instructions
            out["input_messages"] = self.input_messages
            out["output_messages"] = self.output_messages
            out["finish_reasons"] = self.finish_reasons
            out["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.calls
            ]
        else:
            out["request_body"] = self.request_text
            out["response_body"] = self.response_text
        return out


def _text(body: bytes) -> str | None:
    try:
        return body.decode()
    except UnicodeDecodeError:
        return None


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def _is_sse(headers: list[tuple[str, str]]) -> bool:
    return any(k.lower() == "content-type" and "text/event-stream" in v.lower() for k, v in headers)


def _decode_llm(view: StepView, step: Step) -> None:
    """Fill the messages of an LLM step from its exact bodies, with the provider codecs."""
    path = urlsplit(step.url).path
    try:
        parsed = json.loads(step.request_body)
        codec = detect(step.method, path, parsed)
        if codec is None:
            return
        request = codec.parse_request(path, parsed)
        view.system_instructions = request.system_instructions
        view.input_messages = request.input_messages
        if step.status_code is not None:
            streamed = _is_sse(step.response_headers)
            response = codec.parse_response(step.status_code, step.response_body, streamed)
            view.output_messages = response.output_messages
            reasons = response.attributes.get("gen_ai.response.finish_reasons")
            view.finish_reasons = _strings(reasons)
    except (ValueError, RecursionError, CodecError):  # a body past json's depth: no messages
        return


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _hash(value: Any) -> str | None:
    return value if isinstance(value, str) and value.startswith("sha256:") else None


def _view(recorded: RecordedStep, span: Mapping[str, Any] | None) -> StepView:
    """The view of one step as loaded, with its span (None: the source had none)."""
    step, attrs = recorded.step, recorded.attributes
    exact = recorded.fidelity == "exact"
    ids = span if span is not None else {}
    view = StepView(
        step=step,
        fidelity=recorded.fidelity,
        trace_id=step.trace_id or int(str(ids.get("trace_id") or "0"), 16),
        span_id=step.span_id or int(str(ids.get("span_id") or "0"), 16),
        # A semantic step's answer was synthesised: its recorded bytes are known by their
        # span's hashes and sizes only, when it carries them.
        request_hash=step.request_hash or _hash(attrs.get(A.REPLAY_REQUEST_HASH)),
        response_hash=step.response_hash if exact else _hash(attrs.get(A.REPLAY_RESPONSE_HASH)),
        request_size=len(step.request_body)
        if recorded.request_known
        else _int(attrs.get(A.REPLAY_REQUEST_SIZE)),
        response_size=len(step.response_body) if exact else _int(attrs.get(A.REPLAY_RESPONSE_SIZE)),
        method=step.method or None,
        url=step.url or None,
        within=step.within,
    )
    if step.tokens_in is None and step.tokens_out is None:  # rebuilt from its span
        step.tokens_in = _int(attrs.get("gen_ai.usage.input_tokens"))
        step.tokens_out = _int(attrs.get("gen_ai.usage.output_tokens"))
    effect, reason = attrs.get(A.REPLAY_TOOL_EFFECT), attrs.get(A.REPLAY_TOOL_EFFECT_REASON)
    if isinstance(effect, str) and isinstance(reason, str):  # a tool step's, always both
        view.effect, view.effect_reason = effect, reason
    if attrs.get(A.REPLAY_MODE) == "fork":
        change = attrs.get(A.REPLAY_FORK_CHANGE)
        # A call the fork refused (a write with other arguments) was not served either.
        refused = refused_by_replay(step.error_type)
        view.forked = change if isinstance(change, str) else "refused" if refused else "served"
    first_chunk = attrs.get("gen_ai.response.time_to_first_chunk")
    if isinstance(first_chunk, (int, float)) and not isinstance(first_chunk, bool):
        view.first_chunk_ns = round(first_chunk * 1e9)
    if _is_sse(step.response_headers):
        view.stream = True
        if view.first_chunk_ns is None and step.chunks:
            view.first_chunk_ns = step.chunks[0][1]
    view.stream = view.stream or attrs.get("gen_ai.request.stream") is True
    view.stream = view.stream or view.first_chunk_ns is not None
    if step.kind == "llm":
        if exact and recorded.request_known:
            # The bytes sent and received say what the call was; a span's content may be
            # another instrumentation's reading of them (an agent framework's, that wrote a
            # tool call as its Python repr), as the HTML report has it too.
            _decode_llm(view, step)
        if not (view.input_messages or view.output_messages):
            view.system_instructions = parse_json_list(attrs.get("gen_ai.system_instructions"))
            view.input_messages = parse_json_list(attrs.get("gen_ai.input.messages"))
            view.output_messages = parse_json_list(attrs.get("gen_ai.output.messages"))
            view.finish_reasons = _strings(attrs.get("gen_ai.response.finish_reasons"))
        view.calls = tool_calls(view.output_messages)
        view.prompt = prompt_preview(view.input_messages)
        view.response = response_preview(view.output_messages)
        if not view.response and step.response_body:
            view.response = body_preview(step.response_body)  # e.g. an error object
    else:
        request = step.request_body if recorded.request_known else b""
        view.request_text, view.response_text = _text(request), _text(step.response_body)
        view.prompt, view.response = body_preview(request), body_preview(step.response_body)
    return view


def step_views(loaded: SourceRun) -> list[StepView]:
    """The steps of ``loaded`` in order, with their messages and previews."""
    return [
        _view(recorded, loaded.step_spans.get(recorded.step.index)) for recorded in loaded.run.steps
    ]
