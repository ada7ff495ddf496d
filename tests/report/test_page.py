"""``otel_replay.report.render`` on Runs built here: what no content may do to the page (close
its script, inject markup, carry a lone surrogate), and each body written once."""

from __future__ import annotations

import json

from otel_replay.replay import RecordedStep, Run
from otel_replay.report import render
from otel_replay.step import Step
from tests.report._document import document

CHAT = "http://llm.test/v1/chat/completions"


def _step(index: int, url: str, request: bytes, response: bytes, kind: str = "http") -> Step:
    return Step(
        run_id="r_page",
        index=index,
        trace_id=1,
        span_id=index + 1,
        kind=kind,
        method="POST" if kind == "llm" else "GET",
        url=url,
        request_headers=[],
        request_body=request,
        request_hash=f"sha256:{index}",
        status_code=200,
        response_headers=[("content-type", "application/json")],
        response_body=response,
        complete=True,
        start_ns=1_000_000_000 + index,
        end_ns=1_000_500_000 + index,
    )


def _run(*steps: Step, run_id: str = "r_page") -> Run:
    return Run(
        run_id, "test", tuple(RecordedStep(s, s.url.rpartition("/")[2], "exact") for s in steps)
    )


def test_content_never_closes_the_script_nor_becomes_markup() -> None:
    hostile = b'{"note": "</script><script>alert(1)</script><!--"}'
    html = render(_run(_step(0, "http://tools.test/a", b"", hostile), run_id="r_<b>x</b>"))
    assert "<script>alert(1)" not in html and "<!--" not in html
    assert html.count("</script>") == 2  # the data block's and the script's own
    assert "r_&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html.split("<script")[0]
    page = document(html)
    assert page["contents"][page["steps"][0]["response"]] == hostile.decode()


def test_a_body_repeated_in_many_steps_is_written_once() -> None:
    body = json.dumps({"items": ["x" * 5000]}).encode()
    html = render(_run(*(_step(i, f"http://tools.test/{i}", b"", body) for i in range(50))))
    page = document(html)
    assert len(page["steps"]) == 50 and len({s["response"] for s in page["steps"]}) == 1
    assert html.count("x" * 5000) == 1


def test_a_lone_surrogate_in_a_message_is_carried_escaped() -> None:
    request = b'{"model": "m", "messages": [{"role": "user", "content": "bad \\ud800 half"}]}'
    answer = (
        b'{"id": "c", "object": "chat.completion", "model": "m", "choices": [{"index": 0,'
        b' "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}'
    )
    html = render(_run(_step(0, CHAT, request, answer, kind="llm")))
    html.encode()  # writable as UTF-8
    page = document(html)
    (message,) = [page["contents"][i] for i in page["steps"][0]["input"]]
    assert message["parts"][0]["content"] == "bad \ud800 half"
