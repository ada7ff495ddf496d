"""``otel_replay.report.render`` on Runs built here: what no content may do to the page (close
its script, inject markup, carry a lone surrogate), and each body written once."""

from __future__ import annotations

import json
from dataclasses import replace

from otel_replay.report import render
from tests.report._document import document, run, step

CHAT = "http://llm.test/v1/chat/completions"


def test_content_never_closes_the_script_nor_becomes_markup() -> None:
    hostile = b'{"note": "</script><script>alert(1)</script><!--"}'
    html = render(run(step(0, "http://tools.test/a", b"", hostile), run_id="r_<b>x</b>"))
    assert "<script>alert(1)" not in html and "<!--" not in html
    assert html.count("</script>") == 2  # the data block's and the script's own
    assert "r_&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html.split("<script")[0]
    page = document(html)
    assert page["contents"][page["steps"][0]["response"]] == hostile.decode()


def test_a_body_repeated_in_many_steps_is_written_once() -> None:
    body = json.dumps({"items": ["x" * 5000]}).encode()
    html = render(run(*(step(i, f"http://tools.test/{i}", b"", body) for i in range(50))))
    page = document(html)
    assert len(page["steps"]) == 50 and len({s["response"] for s in page["steps"]}) == 1
    assert html.count("x" * 5000) == 1


def test_a_lone_surrogate_in_a_message_is_carried_escaped() -> None:
    request = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    answer = (
        b'{"id": "c", "object": "chat.completion", "model": "m", "choices": [{"index": 0,'
        b' "message": {"role": "assistant", "content": "bad \\ud800 half"},'
        b' "finish_reason": "stop"}]}'
    )
    html = render(run(step(0, CHAT, request, answer, kind="llm")))
    html.encode()  # writable as UTF-8
    page = document(html)
    (message,) = [page["contents"][i] for i in page["steps"][0]["output"]]
    assert message["parts"][0]["content"] == "bad \ud800 half"


def test_a_text_body_with_a_few_bytes_not_utf8_is_shown_as_text() -> None:
    # It said only "response: 61 bytes, not text" for a Latin-1 name in an error message.
    latin = b'{"error": "no customer named Ren\xe9e M\xfcller in the ledger"}'
    binary = bytes(range(256))
    html = render(
        run(step(0, "http://tools.test/a", b"", latin), step(1, "http://tools.test/b", b"", binary))
    )
    page = document(html)
    first, second = page["steps"]
    assert page["contents"][first["response"]] == latin.decode(errors="replace")
    assert "Ren\ufffde M\ufffdller" in page["contents"][first["response"]]
    assert second["response"] is None and second["response_size"] == 256


def test_a_run_that_counted_no_tokens_does_not_say_zero() -> None:
    # A LangChain chat model streaming without stream_usage: no call says what it cost.
    request = b'{"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
    silent = b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "yo"}}]}'
    counted = b'{"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 0}}'
    tool = step(1, "http://tools.test/a", b"", b"{}")
    html = render(run(step(0, CHAT, request, silent, kind="llm"), tool))
    assert document(html)["runs"][0]["tokens_in"] is None
    assert "tokens" not in _header(html)
    html = render(run(step(0, CHAT, request, counted, kind="llm"), tool))
    assert "· tokens 7 in / 0 out ·" in _header(html)


def _header(html: str) -> str:
    """The page's header as one line of text."""
    return " ".join(html.partition("<header>")[2].partition("</header>")[0].split())


def test_the_steps_made_inside_a_tool_follow_it_when_tools_ran_at_once() -> None:
    # A LangGraph ToolNode running two tools at once: both start (steps 1 and 2) before
    # either makes its HTTP call (3 inside 2, 4 inside 1; 5 inside 4).
    tools = [
        replace(step(i, f"http://tools.test/{i}", b"", b"{}"), within=within)
        for i, within in ((1, None), (2, None), (3, 2), (4, 1), (5, 4), (6, None))
    ]
    page = document(render(run(*tools)))
    shown = [(page["steps"][r["a"]]["index"], page["steps"][r["a"]]["depth"]) for r in page["rows"]]
    assert shown == [(1, 0), (4, 1), (5, 2), (2, 0), (3, 1), (6, 0)]


def test_a_damaged_nesting_still_shows_every_step_once() -> None:
    # A source whose `within` names a step it lacks, or goes round.
    tools = [
        replace(step(i, f"http://tools.test/{i}", b"", b"{}"), within=within)
        for i, within in ((0, None), (1, 9), (2, 3), (3, 2), (4, 0))
    ]
    page = document(render(run(*tools)))
    assert [page["steps"][r["a"]]["index"] for r in page["rows"]] == [0, 4, 1, 2, 3]
