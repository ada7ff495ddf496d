"""How a tool that ran live (``--live-tools read``) answered differently from its recording.

Both sides are the step's response body as the capture writes it (the canonical JSON of the
result, or ``{"message": …, "type": …}`` for what it raised, redacted) and its ``error.type``
(None: it returned). A change is named as the report names request changes:
``result $.status`` for a JSON path of the result, ``result`` for a result that is not a JSON
object or array, and ``error`` when it raised where it did not, or the other way round.
"""

from __future__ import annotations

from otel_replay.replay._change import Change, body_change, change
from otel_replay.replay._diff import json_paths_differing, parse_json, value_at

__all__ = ["result_changes"]


def result_changes(
    recorded: bytes, recorded_error: str | None, live: bytes, live_error: str | None
) -> list[Change]:
    """Every difference between the recorded answer of a step and its live one; empty when
    the live call answered as recorded."""
    changes: list[Change] = []
    if recorded_error != live_error:
        changes.append(change("error", recorded_error, live_error))
    if recorded == live:
        return changes
    old, new = parse_json(recorded), parse_json(live)
    if old is not None and new is not None:
        changes.extend(
            change(f"result {path}", value_at(old, path), value_at(new, path))
            for path in json_paths_differing(old, new)
        )
        return changes
    changes.append(body_change("result", recorded, live))
    return changes
