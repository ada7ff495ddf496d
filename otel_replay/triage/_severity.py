"""Each failure category's severity, and when a labelled run counts as failed: what
``runs --failed`` reads without loading the rules (or the replay they need)."""

from __future__ import annotations

from collections.abc import Mapping

from otel_replay import attributes as A
from otel_replay.store import FailureLabel

__all__ = ["CATEGORIES", "CRITICAL", "ERROR", "SEVERITY", "WARNING", "failed", "severity_rank"]

Category = A.ReplayFailureCategoryValues
CATEGORIES: tuple[str, ...] = tuple(c.value for c in Category)
CRITICAL = A.ReplayFailureSeverityValues.CRITICAL.value
ERROR = A.ReplayFailureSeverityValues.ERROR.value
WARNING = A.ReplayFailureSeverityValues.WARNING.value

SEVERITY: Mapping[str, str] = {
    Category.CONTRACT_VIOLATION.value: ERROR,
    Category.MODEL_HALLUCINATION.value: ERROR,
    Category.TOOL_EXHAUSTION.value: ERROR,
    Category.RETRY_OVERFLOW.value: ERROR,
    Category.REPLAY_MISMATCH.value: ERROR,
    Category.ENVIRONMENT_DRIFT.value: WARNING,
}
"""A step label's severity, by category: ``warning`` for the environment's failures (outside
the agent, often passing, the agent may get over them), ``error`` for what the agent's code,
model or tools did wrong (it happens again on the same input). A run that failed is
``critical``, whatever the category of what ended it."""

_RANKS = {WARNING: 0, ERROR: 1, CRITICAL: 2}


def severity_rank(severity: str) -> int:
    """``warning`` < ``error`` < ``critical`` (an unknown severity ranks lowest)."""
    return _RANKS.get(severity, -1)


def failed(status: str, label: FailureLabel | None) -> bool:
    """Whether a run failed: it ended in error (``status``), or triage found an error in it
    (its own ``label``; a warning alone is something the run got over)."""
    return status == "error" or (
        label is not None and severity_rank(label.severity) >= severity_rank(ERROR)
    )
