"""Replay: rebuild a recorded run, serve it to today's code, and compare."""

from otel_replay.replay._api import replaying
from otel_replay.replay._diff import Change
from otel_replay.replay._fork import ForkPlan
from otel_replay.replay._live_from import WentLive
from otel_replay.replay._model import RecordedStep, Run
from otel_replay.replay._result import (
    AgentStatus,
    BadValue,
    Divergence,
    Outcome,
    ReplayResult,
    ServedStep,
)

__all__ = [
    "AgentStatus",
    "BadValue",
    "Change",
    "Divergence",
    "ForkPlan",
    "Outcome",
    "RecordedStep",
    "ReplayResult",
    "Run",
    "ServedStep",
    "WentLive",
    "replaying",
]
