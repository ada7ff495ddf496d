"""Recorded background calls (``OTEL_REPLAY_IGNORE``), set aside before a replay compares."""

from __future__ import annotations

from dataclasses import replace

from otel_replay._ignore import IgnoreRules
from otel_replay.replay._model import RecordedStep, Run

__all__ = ["without_background"]


def _background(recorded: RecordedStep, ignore: IgnoreRules) -> bool:
    url = recorded.step.url
    return "://" in url and ignore.match_url(url) is not None


def without_background(run: Run, ignore: IgnoreRules) -> Run:
    """``run`` without the HTTP steps whose URL an ``ignore`` rule matches (``run`` itself
    when there are none); the others keep their indexes."""
    if not ignore:
        return run
    kept = tuple(recorded for recorded in run.steps if not _background(recorded, ignore))
    return run if len(kept) == len(run.steps) else replace(run, steps=kept)
