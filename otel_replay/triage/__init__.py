"""Triage: which recorded runs failed and how (``replay.failure.category`` and
``replay.failure.severity`` labels on runs and steps), and which cannot be replayed exactly
(cold cases), by the rules of docs/triage.md.

:class:`Triage` (and what it returns) loads the rules, and the replay stage they read runs
with, on first use: ``runs --failed`` needs only the severities."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from otel_replay.triage._severity import CATEGORIES, SEVERITY, failed, severity_rank

if TYPE_CHECKING:
    from otel_replay.triage._cold import KINDS, ColdCase
    from otel_replay.triage._rules import REPEATS
    from otel_replay.triage._session import Triage
    from otel_replay.triage._verdict import Verdict

_LAZY = {
    "KINDS": "otel_replay.triage._cold",
    "ColdCase": "otel_replay.triage._cold",
    "REPEATS": "otel_replay.triage._rules",
    "Triage": "otel_replay.triage._session",
    "Verdict": "otel_replay.triage._verdict",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "CATEGORIES",
    "KINDS",
    "REPEATS",
    "SEVERITY",
    "ColdCase",
    "Triage",
    "Verdict",
    "failed",
    "severity_rank",
]
