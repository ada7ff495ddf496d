"""Replay: rebuild a recorded run, serve it to today's code, and compare."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from otel_replay.replay._api import replaying
from otel_replay.replay._background import without_background
from otel_replay.replay._boot import BOOT_DIR
from otel_replay.replay._calls import Checkpoint, ModelCall, ToolCall, Value
from otel_replay.replay._change import Change, category
from otel_replay.replay._child import refuse_to_replay, start_replay
from otel_replay.replay._diff import json_list, recorded_llm
from otel_replay.replay._fork import ForkPlan
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

if TYPE_CHECKING:
    from otel_replay.replay._isolate import (
        isolated_launcher,
        isolation_notice,
        isolation_unavailable,
    )

_SANDBOX = frozenset({"isolated_launcher", "isolation_notice", "isolation_unavailable"})
"""The sandbox's launcher, loaded on first use: only the ``replay`` verb's parent process
needs it, and every replayed process imports this package."""


def __getattr__(name: str) -> Any:
    if name in _SANDBOX:
        return getattr(importlib.import_module("otel_replay.replay._isolate"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
