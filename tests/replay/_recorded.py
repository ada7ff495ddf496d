"""Recorded steps made by hand, for tests that build a run without recording one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from otel_replay.replay import RecordedStep
from otel_replay.step import Step


def recorded_step(
    *,
    endpoint: str,
    fidelity: str = "exact",
    attributes: Mapping[str, Any] | None = None,
    duration_ns: int = 0,
    **facts: Any,
) -> RecordedStep:
    """A RecordedStep of the :class:`Step` ``facts``; what a test rarely sets defaults (run
    ``r``, ids 0, no request headers, complete). ``request_body=None``: a source without it."""
    request_known = facts.get("request_body", b"") is not None
    facts = {
        "run_id": "r",
        "trace_id": 0,
        "span_id": 0,
        "request_headers": [],
        "complete": True,
        **facts,
        "url": facts.get("url") or "",
        "request_body": facts.get("request_body") or b"",
        "request_hash": facts.get("request_hash") or "",
        "response_headers": list(facts.get("response_headers", ())),
        "chunks": list(facts.get("chunks", ())),
    }
    facts["end_ns"] = facts.get("start_ns", 0) + duration_ns
    return RecordedStep(
        Step(**facts),
        endpoint=endpoint,
        fidelity=fidelity,  # type: ignore[arg-type]
        request_known=request_known,
        attributes=attributes or {},
    )
