"""A report line never shows two equal values as a change (``a → a``): :class:`Change`
refuses one, and every comparison renders values that differ so that they read differently;
messages another instrumentation wrote compare by what they say."""

from __future__ import annotations

import json
from typing import Any

import pytest

from otel_replay._canonical import sha256_tag
from otel_replay.replay._change import Change, body_change, change
from otel_replay.replay._diff import Request, request_changes
from otel_replay.replay._live_from import result_changes
from otel_replay.replay._model import RecordedStep
from tests.replay._recorded import recorded_step

URL = "http://llm.test/v1/chat/completions"


def _step(body: bytes | None = None, **attributes: Any) -> RecordedStep:
    return recorded_step(
        index=0,
        kind="llm",
        endpoint="openai.chat_completions",
        method="POST",
        url=URL,
        request_body=body,
        request_hash=None if body is None else sha256_tag(body),
        status_code=200,
        response_headers=(),
        response_body=b"{}",
        fidelity="exact" if body is not None else "semantic",
        attributes=attributes,
    )


def _chat(*messages: dict[str, Any]) -> bytes:
    return json.dumps({"model": "gpt-4o-mini", "messages": list(messages)}).encode()


def _lines(changes: list[Change]) -> list[str]:
    for c in changes:
        assert c.recorded != c.replayed, c
    return [c.describe() for c in changes]


def test_a_change_of_two_equal_values_is_refused() -> None:
    with pytest.raises(ValueError, match="'message 0': a change needs two different values"):
        Change("message 0", "changed", "user: hi", "user: hi")


def test_values_that_read_the_same_are_shown_with_their_types() -> None:
    assert change("parameter seed", "7", 7).describe() == 'parameter seed: "7" → 7'
    assert change("body $.ok", "true", True).describe() == 'body $.ok: "true" → true'


def test_bodies_of_the_same_size_that_are_not_text_are_told_apart_by_digest() -> None:
    old, new = b"\xff\x00\x01", b"\xfe\x00\x01"
    line = body_change("body", old, new).describe()
    assert line == f"body: 3 bytes {sha256_tag(old)[:19]} → 3 bytes {sha256_tag(new)[:19]}"
    assert body_change("body", b"a=1", b"a=2").describe() == "body: a=1 → a=2"
    (result,) = result_changes(b"\xff\xfe", None, b"\xfe\xff", None)
    assert result.recorded != result.replayed


def test_a_message_that_reads_the_same_names_the_field_that_differs() -> None:
    """Two tool calls alike but for their id: ``assistant: lookup({...})`` twice would say
    nothing; the line names the id."""

    def turn(call_id: str) -> dict[str, Any]:
        call = {"name": "lookup", "arguments": '{"id": 1}'}
        return {
            "role": "assistant",
            "tool_calls": [{"id": call_id, "type": "function", "function": call}],
        }

    question = {"role": "user", "content": "Where is it?"}
    recorded = _step(_chat(question, turn("call_a")))
    changes = request_changes(recorded, Request("POST", URL, _chat(question, turn("call_b"))))
    assert _lines(changes)[1:] == ["message 1 $.parts[0].id: call_a → call_b"]
    assert changes[0].field == "prompt hash"


def test_a_key_with_a_dot_is_one_key_in_the_path_and_shows_both_values() -> None:
    """A JSON key holding a dot or a space (``user.name`` in a search query, a tool argument
    named so) read as a path of two keys: the line said ``added null`` for a value that
    changed."""
    url = "http://search.test/_search"
    old = {"query": {"match": {"user.name": "ada", "a b": 1, "": True}}, "size": 5}
    new = {"query": {"match": {"user.name": "bob", "a b": 2, "": False}}, "size": 6}
    recorded = recorded_step(
        index=0,
        kind="http",
        endpoint="POST /_search",
        method="POST",
        url=url,
        request_body=json.dumps(old).encode(),
        request_hash=sha256_tag(json.dumps(old).encode()),
        status_code=200,
        response_headers=(),
        response_body=b"{}",
        fidelity="exact",
        attributes={},
    )
    changes = request_changes(recorded, Request("POST", url, json.dumps(new).encode()))
    assert _lines(changes) == [
        'body $.query.match[""]: true → false',
        'body $.query.match["a b"]: 1 → 2',
        'body $.query.match["user.name"]: ada → bob',
        "body $.size: 5 → 6",
    ]


GENAI_OPENAI = [  # as opentelemetry-instrumentation-genai-openai writes them
    {"role": "developer", "parts": [{"content": "Be brief.", "type": "text"}], "name": None},
    {"role": "user", "parts": [{"content": "Where is A-1?", "type": "text"}], "name": None},
    {
        "role": "assistant",
        "parts": [
            {"arguments": {"id": "A-1"}, "name": "lookup", "id": "call_1", "type": "tool_call"},
            {"content": "Looking.", "type": "text"},
        ],
        "name": None,
    },
    {
        "role": "tool",
        "parts": [{"response": '{"ok": true}', "id": "call_1", "type": "tool_call_response"}],
        "name": None,
    },
]


def _today(question: str = "Where is A-1?") -> Request:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "lookup", "arguments": '{"id": "A-1"}'},
    }
    body = _chat(
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": question},
        {"role": "assistant", "content": "Looking.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"ok": true}'},
    )
    return Request("POST", URL, body)


def _foreign(**more: Any) -> RecordedStep:
    return _step(
        None,
        **{
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.input.messages": json.dumps(GENAI_OPENAI),
        },
        **more,
    )


def test_another_instrumentations_messages_compare_by_what_they_say() -> None:
    assert request_changes(_foreign(), _today()) == []
    changes = request_changes(_foreign(), _today("Where is A-2?"))
    assert _lines(changes) == ["message 1: user: Where is A-1? → user: Where is A-2?"]


def test_a_span_without_content_leaves_the_prompt_unknown() -> None:
    bare = _step(None, **{"gen_ai.request.model": "gpt-4o-mini"})
    assert request_changes(bare, _today()) == []
