"""The pure helpers behind the tables: sizes, times, previews of GenAI messages."""

from __future__ import annotations

import pytest

from otel_replay.cli._format import ago, human_bytes, ms, one_line, plural
from otel_replay.cli._messages import (
    body_preview,
    parse_json_list,
    prompt_preview,
    response_preview,
    tool_calls,
)

S = 10**9


def _text(role: str, content: str) -> dict:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


def _result(role: str) -> dict:
    return {"role": role, "parts": [{"type": "tool_call_response", "id": "c1", "response": "{}"}]}


CALL = {
    "role": "assistant",
    "parts": [
        {"type": "text", "content": "Let me check."},
        {"type": "tool_call", "id": "c1", "name": "lookup_order", "arguments": {"order_id": "A-1"}},
        {"type": "tool_call", "id": "c2", "name": "raw", "arguments": "not json"},
    ],
}


@pytest.mark.parametrize(
    ("size", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KB"), (29_105, "28.4 KB"), (5 * 2**30, "5.0 GB")],
)
def test_human_bytes(size: int, text: str) -> None:
    assert human_bytes(size) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (5, "just now"),
        (61, "1 min ago"),
        (3 * 3600 + 5, "3 h ago"),
        (86_400, "1 day ago"),
        (9 * 86_400, "9 days ago"),
        (-3600, "in the future"),
    ],
)
def test_ago(seconds: int, text: str) -> None:
    assert ago(0, seconds * S) == text


def test_small_formats() -> None:
    assert one_line("a\n  b\tc", 10) == "a b c"
    assert one_line("abcdefghijkl", 6) == "abcde…"
    assert ms(None) == "-" and ms(1_234_567) == "1.2" and ms(12_345 * 10**6) == "12,345"
    assert (plural(1, "run"), plural(0, "run"), plural(2, "step")) == ("1 run", "0 runs", "2 steps")


def test_prompt_is_the_last_user_message_and_the_tool_results_after_it() -> None:
    assert prompt_preview([_text("system", "be nice"), _text("user", "hi")]) == "hi"
    messages = [_text("user", "first"), CALL, _result("tool"), _result("tool")]
    assert prompt_preview(messages) == "first [+2 tool results]"
    # Anthropic keeps tool results in user-role messages.
    assert prompt_preview([_text("user", "q"), CALL, _result("user")]) == "q [+1 tool result]"
    assert prompt_preview([_text("system", "only")]) == ""
    assert (
        prompt_preview([{"role": "user", "parts": [{"type": "blob", "modality": "image"}]}])
        == "[image]"
    )


def test_a_cut_prompt_keeps_its_tool_results_marker() -> None:
    """In show's table a long message was cut before its marker, so the call answering a
    tool result read like the call that asked for the tool."""
    long = "It arrived broken, please refund order A-1234."
    assert prompt_preview([_text("user", long)], 30) == "It arrived broken, please ref…"
    cut = prompt_preview([_text("user", long), CALL, _result("tool")], 40)
    assert cut == "It arrived broken, ple… [+1 tool result]" and len(cut) == 40
    assert prompt_preview([_text("user", "q\n  x"), CALL, _result("tool")], 40) == (
        "q x [+1 tool result]"
    )


def test_response_shows_tool_calls_then_text() -> None:
    assert (
        response_preview([CALL])
        == 'lookup_order({"order_id":"A-1"}) · raw(not json) · Let me check.'
    )
    assert [c.name for c in tool_calls([CALL])] == ["lookup_order", "raw"]
    assert response_preview([_text("assistant", "done")]) == "done"
    assert response_preview([{"role": "assistant"}, "junk"]) == ""


def test_content_attributes_and_bodies() -> None:
    assert parse_json_list('[{"role": "user"}]') == [{"role": "user"}]
    assert (
        parse_json_list([1]) == [1] and parse_json_list("{") == [] and parse_json_list(None) == []
    )
    assert parse_json_list('{"a": 1}') == []
    assert body_preview(b"") == "" and body_preview(b'{ "a" : [1, 2] }') == '{"a":[1,2]}'
    assert body_preview(b"plain text") == "plain text" and body_preview(b"\xff\x00") == "<2 bytes>"
    assert body_preview(b'{"error": "no Ren\xe9e"}') == '{"error":"no Ren\ufffde"}'
