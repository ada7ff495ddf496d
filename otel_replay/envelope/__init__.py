"""The envelope: steps the HTTP layer cannot see (tools, values, checkpoints, uuids), recorded
and served back like HTTP steps, with the JSON they travel as and the effects that decide
which tools may run live."""

from __future__ import annotations

from otel_replay.envelope._effect import ToolEffect, in_replay, use_tool_lists
from otel_replay.envelope._jsonable import content_type_shape, module_class
from otel_replay.envelope._steps import (
    ENVELOPE_KINDS,
    INJECTED_ERROR,
    Served,
    address,
    enclosing_step,
    note_tool_calls,
    use_recorder,
    use_server,
)
from otel_replay.envelope._uuids import hold_uuids, release_uuids

__all__ = [
    "ENVELOPE_KINDS",
    "INJECTED_ERROR",
    "Served",
    "ToolEffect",
    "address",
    "content_type_shape",
    "enclosing_step",
    "hold_uuids",
    "in_replay",
    "module_class",
    "note_tool_calls",
    "release_uuids",
    "use_recorder",
    "use_server",
    "use_tool_lists",
]
