"""Store: content-addressed, compressed, deduplicated steps with an SQLite index.

:meth:`Store.open` takes a path or an fsspec URL (``s3://bucket/prefix``); the design is in
docs/architecture.md, "Store"."""

from typing import TYPE_CHECKING

from otel_replay._lazy import lazy_names as _lazy_names
from otel_replay.store._format import new_recording_id
from otel_replay.store._fs import is_url
from otel_replay.store._types import (
    FailureLabel,
    Progress,
    Retention,
    RunInfo,
    RunStatus,
    StepInfo,
)
from otel_replay.store.store import Store

if TYPE_CHECKING:
    from otel_replay.store._migrate import migrate
    from otel_replay.store._reports import Buffered, GcReport, ImportedFile, VerifyProblem

_LAZY = {
    "Buffered": "otel_replay.store._reports",
    "GcReport": "otel_replay.store._reports",
    "ImportedFile": "otel_replay.store._reports",
    "VerifyProblem": "otel_replay.store._reports",
    "migrate": "otel_replay.store._migrate",
}
"""Names loaded on first use: what writing and upkeep report (a verb that only reads does not
build their classes), and the reader of older formats (loaded when a migration asks for it)."""

__getattr__ = _lazy_names(__name__, _LAZY, globals())


__all__ = [
    "Buffered",
    "FailureLabel",
    "GcReport",
    "ImportedFile",
    "Progress",
    "Retention",
    "RunInfo",
    "RunStatus",
    "StepInfo",
    "Store",
    "VerifyProblem",
    "is_url",
    "migrate",
    "new_recording_id",
]
