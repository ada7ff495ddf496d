"""Recorded background calls, set aside before a replay compares.

A recording made before a rule named an endpoint (a rule added after seeing a replay
diverge) holds that endpoint's calls as steps. A replay now answers such calls
itself (``OTEL_REPLAY_IGNORE``), so their steps would read as never requested: they are taken
out of the run the replay compares with, by the same rules.
"""

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
