"""The JSON document a report page carries, read back from the HTML; Runs built in a test."""

from __future__ import annotations

import json
import re
from typing import Any

from otel_replay.replay import RecordedStep, Run
from otel_replay.step import Step


def document(html: str) -> dict[str, Any]:
    """The JSON document the page's script reads."""
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html)
    assert found is not None
    parsed: dict[str, Any] = json.loads(found.group(1))
    return parsed


def step(
    index: int, url: str, request: bytes, response: bytes, kind: str = "http", status: int = 200
) -> Step:
    """A step of run ``r_page``, answered with ``status``."""
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
        status_code=status,
        response_headers=[("content-type", "application/json")],
        response_body=response,
        complete=True,
        start_ns=1_000_000_000 + index,
        end_ns=1_000_500_000 + index,
    )


def run(*steps: Step, run_id: str = "r_page") -> Run:
    """A Run of ``steps``, each exact; a model call's endpoint is its codec (these are OpenAI
    Chat Completions), any other's the last part of its URL."""

    def endpoint(step: Step) -> str:
        return "openai.chat_completions" if step.kind == "llm" else step.url.rpartition("/")[2]

    return Run(run_id, "test", tuple(RecordedStep(s, endpoint(s), "exact") for s in steps))
