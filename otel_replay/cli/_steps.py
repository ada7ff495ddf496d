"""What ``show`` says about each step, gathered from the index, the spans and the bodies."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
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
from otel_replay.step import Step
from otel_replay.store import StepInfo, Store

__all__ = ["StepView", "step_views"]


@dataclass(slots=True)
class StepView:
    """One step as ``show`` presents it; ``prompt`` and ``response`` are full-length
    previews (cut to width when drawn)."""

    info: StepInfo
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
        info = self.info
        out: dict[str, Any] = {
            "index": info.index,
            "kind": info.kind,
            "provider": info.provider,
            "model": info.model,
            "method": self.method,
            "url": self.url,
            "start_ns": info.start_ns,
            "end_ns": info.end_ns,
            "duration_ms": (info.end_ns - info.start_ns) / 1e6,
            "stream": self.stream,
            "time_to_first_chunk_ms": None
            if self.first_chunk_ns is None
            else self.first_chunk_ns / 1e6,
            "status_code": info.status_code,
            "error_type": info.error_type,
            "complete": info.complete,
            "tokens_in": info.tokens_in,
            "tokens_out": info.tokens_out,
            "request_hash": info.request_hash,
            "response_hash": info.response_hash,
            "request_size": info.request_size,
            "response_size": info.response_size,
            "trace_id": f"{info.trace_id:032x}",
            "span_id": f"{info.span_id:016x}",
        }
        if self.effect is not None:
            out["effect"] = self.effect
            out["effect_reason"] = self.effect_reason
        if self.within is not None:
            out["within"] = self.within
        if self.forked is not None:
            out["fork"] = self.forked
        if info.kind == "llm":
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


def _spans_by_step(spans: list[dict[str, Any]]) -> dict[int, Mapping[str, Any]]:
    by_index: dict[int, Mapping[str, Any]] = {}
    for span in spans:
        index = attribute(span, "replay.step.index")
        if isinstance(index, int) and not isinstance(index, bool):
            by_index.setdefault(index, span)
    return by_index


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
    except (ValueError, CodecError):
        return


def _view(
    store: Store, info: StepInfo, span: Mapping[str, Any] | None, stored: Callable[[], Step]
) -> StepView:
    """The view of step ``info``; ``stored()`` reads it when its span does not say enough."""

    def attr(key: str) -> Any:
        return attribute(span, key) if span is not None else None

    view = StepView(info=info, method=attr("http.request.method"), url=attr("url.full"))
    effect, reason = attr(A.REPLAY_TOOL_EFFECT), attr(A.REPLAY_TOOL_EFFECT_REASON)
    if isinstance(effect, str) and isinstance(reason, str):  # a tool step's, always both
        view.effect, view.effect_reason = effect, reason
    if attr(A.REPLAY_MODE) == "fork":
        change = attr(A.REPLAY_FORK_CHANGE)
        view.forked = change if isinstance(change, str) else "served"
    within = attr(A.REPLAY_STEP_WITHIN) if span is not None else stored().within
    view.within = within if isinstance(within, int) and not isinstance(within, bool) else None
    first_chunk = attr("gen_ai.response.time_to_first_chunk")
    if isinstance(first_chunk, (int, float)) and not isinstance(first_chunk, bool):
        view.first_chunk_ns = round(first_chunk * 1e9)
    view.stream = attr("gen_ai.request.stream") is True or view.first_chunk_ns is not None
    if info.kind == "llm":
        view.system_instructions = parse_json_list(attr("gen_ai.system_instructions"))
        view.input_messages = parse_json_list(attr("gen_ai.input.messages"))
        view.output_messages = parse_json_list(attr("gen_ai.output.messages"))
        reasons = attr("gen_ai.response.finish_reasons")
        view.finish_reasons = _strings(reasons)
    content = bool(view.input_messages or view.output_messages)
    if (info.kind == "llm" and not content) or (info.kind != "llm" and not view.url):
        step = stored()
        if info.kind == "llm":
            _decode_llm(view, step)
        else:
            view.method = view.method or step.method
            view.url = view.url or step.url
        if _is_sse(step.response_headers):
            view.stream = True
            if view.first_chunk_ns is None and step.chunks:
                view.first_chunk_ns = step.chunks[0][1]
    if info.kind == "llm":
        view.calls = tool_calls(view.output_messages)
        view.prompt = prompt_preview(view.input_messages)
        view.response = response_preview(view.output_messages)
        if not view.response and info.response_size:
            view.response = body_preview(store.response_body(info))  # e.g. an error object
    else:
        request, response = store.request_body(info), store.response_body(info)
        view.request_text, view.response_text = _text(request), _text(response)
        view.prompt, view.response = body_preview(request), body_preview(response)
    return view


def step_views(store: Store, run_id: str) -> list[StepView]:
    """The steps of ``run_id`` in order, with their messages and previews."""
    spans = _spans_by_step(store.spans(run_id))
    steps: dict[int, Step] = {}

    def stored(info: StepInfo) -> Step:
        # A run's steps are read together, once, and only when some span falls short: each
        # record file holds many steps, and reading one per step made ``show`` quadratic.
        if not steps:
            steps.update((step.index, step) for step in store.read_steps(run_id))
        return steps.get(info.index) or store.read_step(info)

    return [
        _view(store, info, spans.get(info.index), partial(stored, info))
        for info in store.steps(run_id)
    ]


def attribute(span: Mapping[str, Any], key: str) -> Any:
    """The value of attribute ``key`` of a stored span, or None."""
    attrs = span.get("attributes")
    return attrs.get(key) if isinstance(attrs, Mapping) else None
