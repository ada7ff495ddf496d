"""The envelope: steps the HTTP layer cannot see (tools, values, checkpoints, uuids), the JSON
they travel as, and the effects that decide which tools may run live."""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_replay._lazy import lazy_names as _lazy_names

if TYPE_CHECKING:
    from otel_replay.envelope._effect import ToolEffect, in_replay, use_tool_lists
    from otel_replay.envelope._jsonable import content_type_shape, module_class
    from otel_replay.envelope._steps import (
        INJECTED_ERROR,
        Served,
        current_server,
        enclosing_step,
        note_tool_calls,
        use_recorder,
        use_server,
    )
    from otel_replay.envelope._uuids import hold_uuids, release_uuids
    from otel_replay.step import ENVELOPE_KINDS, address

_LAZY = {
    "ENVELOPE_KINDS": "otel_replay.step",
    "INJECTED_ERROR": "otel_replay.envelope._steps",
    "Served": "otel_replay.envelope._steps",
    "ToolEffect": "otel_replay.envelope._effect",
    "address": "otel_replay.step",
    "content_type_shape": "otel_replay.envelope._jsonable",
    "current_server": "otel_replay.envelope._steps",
    "enclosing_step": "otel_replay.envelope._steps",
    "hold_uuids": "otel_replay.envelope._uuids",
    "in_replay": "otel_replay.envelope._effect",
    "module_class": "otel_replay.envelope._jsonable",
    "note_tool_calls": "otel_replay.envelope._steps",
    "release_uuids": "otel_replay.envelope._uuids",
    "use_recorder": "otel_replay.envelope._steps",
    "use_server": "otel_replay.envelope._steps",
    "use_tool_lists": "otel_replay.envelope._effect",
}
"""Each public name and the module it comes from, imported on first use: reading a replay's
result (the CLI's report) needs a tool's effect and a step's address, not what serves and
records steps (the OpenTelemetry SDK, the worker hooks)."""


__getattr__ = _lazy_names(__name__, _LAZY, globals())

UUID_VALUES = frozenset({"uuid4", "uuid.uuid4", "uuid.uuid1"})
"""The value steps whose answer is a UUID's text: ``otel_replay.uuid4()`` (``values``) and
the application's own ``uuid.uuid4()`` and ``uuid1()`` (``_uuids``)."""

TIME_VALUE = "now"
"""The value step whose answer is an aware datetime's ISO 8601 text: ``otel_replay.now()``."""


__all__ = [
    "ENVELOPE_KINDS",
    "INJECTED_ERROR",
    "TIME_VALUE",
    "UUID_VALUES",
    "Served",
    "ToolEffect",
    "address",
    "content_type_shape",
    "current_server",
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
