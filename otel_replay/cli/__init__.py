"""The ``otel-replay`` command line: ``main`` holds the click group and the error boundary,
one module per verb. ``diff_text`` is what ``diff`` prints, for the pytest plugin."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from otel_replay.cli._diff import diff_text


def __getattr__(name: str) -> Any:
    # Loaded on first use: a verb that reads only the store starts without the replay stage.
    if name == "diff_text":
        return importlib.import_module("otel_replay.cli._diff").diff_text
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["diff_text"]
