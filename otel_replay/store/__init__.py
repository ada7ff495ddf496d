"""Store: content-addressed, compressed, deduplicated steps with an SQLite index.

:meth:`Store.open` takes a path or an fsspec URL (``s3://bucket/prefix``); the design is in
docs/architecture.md, "Store"."""

from typing import TYPE_CHECKING, Any

from otel_replay.store._format import new_recording_id
from otel_replay.store._fs import is_url
from otel_replay.store._types import (
    Buffered,
    FailureLabel,
    GcReport,
    ImportedFile,
    Progress,
    Retention,
    RunInfo,
    RunStatus,
    StepInfo,
    VerifyProblem,
)
from otel_replay.store.store import Store

if TYPE_CHECKING:
    from otel_replay.store._migrate import migrate


def __getattr__(name: str) -> Any:
    # The reader of older formats loads when a migration asks for it, not with the store.
    if name == "migrate":
        from otel_replay.store._migrate import migrate  # noqa: PLC0415

        return migrate
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
