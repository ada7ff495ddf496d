"""Replay: rebuild a recorded run, serve it to today's code, and compare."""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_replay._lazy import lazy_names as _lazy_names

if TYPE_CHECKING:
    from otel_replay.replay._api import replaying
    from otel_replay.replay._background import without_background
    from otel_replay.replay._boot import BOOT_DIR
    from otel_replay.replay._calls import Checkpoint, ModelCall, ToolCall, Value
    from otel_replay.replay._change import Change, category
    from otel_replay.replay._child import refuse_to_replay, start_replay
    from otel_replay.replay._diff import json_list, recorded_llm
    from otel_replay.replay._fork import ForkPlan
    from otel_replay.replay._isolate import (
        isolated_launcher,
        isolation_notice,
        isolation_unavailable,
    )
    from otel_replay.replay._live_from import WentLive
    from otel_replay.replay._model import RecordedStep, Run
    from otel_replay.replay._result import (
        AgentStatus,
        BadValue,
        Divergence,
        InjectedFault,
        Isolation,
        Outcome,
        ReplayResult,
    )
    from otel_replay.replay._rundiff import RunDiff, StepPair, diff_runs
    from otel_replay.replay._served import ServedStep, changes_from_json
    from otel_replay.replay._textdiff import excerpts

_LAZY = {
    "AgentStatus": "otel_replay.replay._result",
    "BOOT_DIR": "otel_replay.replay._boot",
    "BadValue": "otel_replay.replay._result",
    "Change": "otel_replay.replay._change",
    "Checkpoint": "otel_replay.replay._calls",
    "Divergence": "otel_replay.replay._result",
    "ForkPlan": "otel_replay.replay._fork",
    "InjectedFault": "otel_replay.replay._result",
    "Isolation": "otel_replay.replay._result",
    "ModelCall": "otel_replay.replay._calls",
    "Outcome": "otel_replay.replay._result",
    "RecordedStep": "otel_replay.replay._model",
    "ReplayResult": "otel_replay.replay._result",
    "Run": "otel_replay.replay._model",
    "RunDiff": "otel_replay.replay._rundiff",
    "ServedStep": "otel_replay.replay._served",
    "StepPair": "otel_replay.replay._rundiff",
    "ToolCall": "otel_replay.replay._calls",
    "Value": "otel_replay.replay._calls",
    "WentLive": "otel_replay.replay._live_from",
    "category": "otel_replay.replay._change",
    "changes_from_json": "otel_replay.replay._served",
    "diff_runs": "otel_replay.replay._rundiff",
    "excerpts": "otel_replay.replay._textdiff",
    "isolated_launcher": "otel_replay.replay._isolate",
    "isolation_notice": "otel_replay.replay._isolate",
    "isolation_unavailable": "otel_replay.replay._isolate",
    "json_list": "otel_replay.replay._diff",
    "recorded_llm": "otel_replay.replay._diff",
    "refuse_to_replay": "otel_replay.replay._child",
    "replaying": "otel_replay.replay._api",
    "start_replay": "otel_replay.replay._child",
    "without_background": "otel_replay.replay._background",
}
"""Each public name and the module it comes from, imported on first use: a process that
reads runs (the CLI, a source) does not load what serving one needs (the transports' patches,
the sandbox), and every replayed process imports only what it uses."""


__getattr__ = _lazy_names(__name__, _LAZY, globals())


__all__ = [
    "BOOT_DIR",
    "AgentStatus",
    "BadValue",
    "Change",
    "Checkpoint",
    "Divergence",
    "ForkPlan",
    "InjectedFault",
    "Isolation",
    "ModelCall",
    "Outcome",
    "RecordedStep",
    "ReplayResult",
    "Run",
    "RunDiff",
    "ServedStep",
    "StepPair",
    "ToolCall",
    "Value",
    "WentLive",
    "category",
    "changes_from_json",
    "diff_runs",
    "excerpts",
    "isolated_launcher",
    "isolation_notice",
    "isolation_unavailable",
    "json_list",
    "recorded_llm",
    "refuse_to_replay",
    "replaying",
    "start_replay",
    "without_background",
]
