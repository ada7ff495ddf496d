"""A replay's refusals, as triage words them: a write tool a fork served only with its
recorded arguments is a call the recording has, with other arguments, and the label says
that (what the refusal said), not that the recording lacks the call."""

from __future__ import annotations

from typing import Any

from otel_replay._canonical import canonical_json
from otel_replay.replay import RecordedStep, Run
from otel_replay.triage._rules import mismatch_labels
from tests.replay._recorded import recorded_step

REFUSAL = "otel_replay.errors.UnmatchedRequestError"


def _refused(index: int, kind: str, endpoint: str, body: bytes, **facts: Any) -> RecordedStep:
    return recorded_step(
        index=index,
        kind=kind,
        endpoint=endpoint,
        error_type=REFUSAL,
        response_body=body,
        **facts,
    )


def test_a_refused_write_says_why_and_an_unmatched_request_that_the_recording_lacks_it() -> None:
    said = (
        "otel-replay: tool 'refund_order' is a write (write: declared) and its recorded call "
        "(step 2) had other arguments (argument $.order_id: A-1234 → B-5678): a fork serves a "
        "write tool only the call it recorded, and runs none without --allow-writes"
    )
    write = _refused(
        2,
        "tool",
        "tool:refund_order",
        canonical_json({"type": REFUSAL, "message": said}),
        method="TOOL",
        url="tool://refund_order",
    )
    http = _refused(
        3, "http", "GET /tools/orders/B-5678", b"", method="GET", url="http://h/tools/orders/B-5678"
    )
    labels = mismatch_labels(Run("r_fork", "test", (write, http)), None, None)
    assert [(x.step, x.rule) for x in labels] == [
        (2, "unmatched_request"),
        (3, "unmatched_request"),
    ]
    assert labels[0].reason == (
        "the replay refused tool refund_order: tool 'refund_order' is a write (write: declared) "
        "and its recorded call (step 2) had other arguments (argument $.order_id: A-1234 → "
        "B-5678): a fork serves a write…"
    )
    assert labels[1].reason == (
        "the replay refused GET /tools/orders/B-5678: the recording has no such request "
        f"({REFUSAL})"
    )
