"""OpenAI Responses from a span: a ``response`` object or its event stream."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from otel_replay.replay.synth._common import SpanView, dumps, openai_usage, sse, tool_arguments_text

__all__ = ["responses_body", "responses_events"]

_COMPLETED = frozenset(
    {"stop", "tool_call", "tool_calls", "tool_use", "end_turn", "stop_sequence", "compaction"}
)
_INCOMPLETE = {"length": "max_output_tokens", "max_tokens": "max_output_tokens"}
_SERVER_ITEMS = {
    "web_search": "web_search_call",
    "file_search": "file_search_call",
    "code_interpreter": "code_interpreter_call",
    "image_generation": "image_generation_call",
    "mcp": "mcp_call",
}
_TERMINAL = {"failed": "response.failed", "incomplete": "response.incomplete"}


def responses_body(view: SpanView) -> bytes:
    """The non-streamed ``response`` JSON."""
    return dumps(_response(view, _items(view)))


def responses_events(view: SpanView) -> list[bytes]:
    """The named event stream, from ``response.created`` to the terminal event."""
    items = _items(view)
    response = _response(view, items)
    events: list[bytes] = []

    def emit(kind: str, **fields: Any) -> None:
        data = {"type": kind, **fields, "sequence_number": len(events)}
        events.append(sse(dumps(data), kind))

    pending = {**response, "status": "in_progress", "output": [], "usage": None}
    pending.update(error=None, incomplete_details=None)
    emit("response.created", response=pending)
    emit("response.in_progress", response=pending)
    for index, item in enumerate(items):
        _item_events(emit, index, item)
    emit(_TERMINAL.get(response["status"], "response.completed"), response=response)
    return events


def _item_events(emit: Callable[..., None], index: int, item: dict[str, Any]) -> None:
    kind = item["type"]
    where = {"item_id": item["id"], "output_index": index}
    if kind == "message":
        emit("response.output_item.added", output_index=index, item={**item, "content": []})
        for sub, part in enumerate(item["content"]):
            at = {**where, "content_index": sub}
            if part["type"] == "refusal":
                text = part["refusal"]
                emit("response.content_part.added", **at, part={**part, "refusal": ""})
                emit("response.refusal.delta", **at, delta=text)
                emit("response.refusal.done", **at, refusal=text)
            else:
                text = part["text"]
                emit("response.content_part.added", **at, part={**part, "text": ""})
                emit("response.output_text.delta", **at, delta=text, logprobs=[])
                emit("response.output_text.done", **at, text=text, logprobs=[])
            emit("response.content_part.done", **at, part=part)
    elif kind == "function_call":
        emit("response.output_item.added", output_index=index, item={**item, "arguments": ""})
        emit("response.function_call_arguments.delta", **where, delta=item["arguments"])
        emit("response.function_call_arguments.done", **where, arguments=item["arguments"])
    elif kind == "reasoning":
        emit("response.output_item.added", output_index=index, item={**item, "summary": []})
        for sub, summary in enumerate(item["summary"]):
            at = {**where, "summary_index": sub}
            emit("response.reasoning_summary_part.added", **at, part={**summary, "text": ""})
            emit("response.reasoning_summary_text.delta", **at, delta=summary["text"])
            emit("response.reasoning_summary_text.done", **at, text=summary["text"])
            emit("response.reasoning_summary_part.done", **at, part=summary)
    else:
        emit("response.output_item.added", output_index=index, item=item)
    emit("response.output_item.done", output_index=index, item=item)


def _status(view: SpanView) -> tuple[str, str | None]:
    """The response status and, when incomplete, the reason."""
    reason = view.finish_reasons[-1]
    if reason in _COMPLETED:
        return "completed", None
    if reason == "error":
        return "failed", None
    if reason == "cancelled":
        return "cancelled", None
    return "incomplete", _INCOMPLETE.get(reason, reason)


def _response(view: SpanView, items: list[dict[str, Any]]) -> dict[str, Any]:
    status, incomplete = _status(view)
    failed = {"code": "server_error", "message": "the recorded response failed"}
    response: dict[str, Any] = {
        "id": view.response_id or view.make_id("resp_"),
        "object": "response",
        "created_at": 0,
        "status": status,
        "background": False,
        "error": failed if status == "failed" else None,
        "incomplete_details": None if incomplete is None else {"reason": incomplete},
        "instructions": None,
        "max_output_tokens": view.count("gen_ai.request.max_tokens"),
        "model": view.model,
        "output": items,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": True,
        "temperature": view.attributes.get("gen_ai.request.temperature"),
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": view.attributes.get("gen_ai.request.top_p"),
        "truncation": "disabled",
        "usage": openai_usage(view, "input_tokens", "output_tokens", always=True),
        "user": None,
        "metadata": {},
    }
    tier = view.text("openai.response.service_tier")
    if tier is not None:
        response["service_tier"] = tier
    return response


def _items(view: SpanView) -> list[dict[str, Any]]:
    status = "incomplete" if _status(view)[0] == "incomplete" else "completed"
    items: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}  # provider-run tool calls, for their responses
    for part in view.parts():
        kind = part.get("type")
        last = items[-1] if items else None
        content = part.get("content")
        text = content if isinstance(content, str) else ""
        n = len(items)
        if kind in ("text", "refusal"):
            if last is None or last["type"] != "message":
                last = {
                    "id": view.make_id("msg_", n),
                    "type": "message",
                    "status": status,
                    "role": "assistant",
                    "content": [],
                }
                items.append(last)
            if kind == "text":
                last["content"].append(
                    {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
                )
            else:
                last["content"].append({"type": "refusal", "refusal": text})
        elif kind == "reasoning":
            if last is None or last["type"] != "reasoning":
                last = {"id": view.make_id("rs_", n), "type": "reasoning", "summary": []}
                items.append(last)
            last["summary"].append({"type": "summary_text", "text": text})
        elif kind == "tool_call":
            items.append(_function_call(view, part, n))
        elif kind == "server_tool_call":
            item = _server_item(view, part, n)
            by_id[item["id"]] = item
            items.append(item)
        elif kind == "server_tool_call_response":
            _merge_response(part, by_id)
        elif kind == "compaction":
            part_id = part.get("id")
            item_id = part_id if isinstance(part_id, str) else view.make_id("cmp_", n)
            items.append({"id": item_id, "type": "compaction", "encrypted_content": ""})
    return items


def _function_call(view: SpanView, part: Mapping[str, Any], n: int) -> dict[str, Any]:
    call_id = part.get("id")
    name = part.get("name")
    return {
        "id": view.make_id("fc_", n),
        "type": "function_call",
        "status": "completed",
        "arguments": tool_arguments_text(part.get("arguments")),
        "call_id": call_id if isinstance(call_id, str) and call_id else view.make_id("call_", n),
        "name": name if isinstance(name, str) else "",
    }


def _server_item(view: SpanView, part: Mapping[str, Any], n: int) -> dict[str, Any]:
    details = part.get("server_tool_call")
    details = details if isinstance(details, Mapping) else {}
    tool = details.get("type") or part.get("name")
    part_id = part.get("id")
    return {
        "id": part_id if isinstance(part_id, str) and part_id else view.make_id("ws_", n),
        "type": _SERVER_ITEMS.get(str(tool), f"{tool}_call"),
        "status": "completed",
        **{key: value for key, value in details.items() if key != "type"},
    }


def _merge_response(part: Mapping[str, Any], by_id: Mapping[str, dict[str, Any]]) -> None:
    item = by_id.get(str(part.get("id")))
    result = part.get("server_tool_call_response")
    if item is not None and isinstance(result, Mapping):
        item.update((key, value) for key, value in result.items() if key != "type")
