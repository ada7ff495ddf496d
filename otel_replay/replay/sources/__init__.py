"""Replay sources: the store, OTLP JSON or protobuf files, the Collector's archive
directories, OTLP JSON URLs, trace backends (Phoenix, Jaeger, Tempo) and bundle directories, as
Runs (:func:`load_run`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_replay._lazy import lazy_names as _lazy_names

if TYPE_CHECKING:
    from otel_replay.replay.sources._backends import download, source_name
    from otel_replay.replay.sources._build import (
        SourceRun,
        Unbuilt,
        UnbuiltRun,
        UnbuiltRuns,
        stored_run,
    )
    from otel_replay.replay.sources._bundle import is_bundle, write_bundle
    from otel_replay.replay.sources._fetch import fetch, is_url, shown
    from otel_replay.replay.sources._import import (
        ArchiveImport,
        ImportReport,
        import_archive,
        import_runs,
        run_error_type,
    )
    from otel_replay.replay.sources._limits import Limits, read_file
    from otel_replay.replay.sources._load import (
        archive_of,
        is_remote,
        load_run,
        load_sources,
        only_run,
        read_runs,
    )

_LAZY = {
    "ArchiveImport": "otel_replay.replay.sources._import",
    "ImportReport": "otel_replay.replay.sources._import",
    "Limits": "otel_replay.replay.sources._limits",
    "SourceRun": "otel_replay.replay.sources._build",
    "Unbuilt": "otel_replay.replay.sources._build",
    "UnbuiltRun": "otel_replay.replay.sources._build",
    "UnbuiltRuns": "otel_replay.replay.sources._build",
    "archive_of": "otel_replay.replay.sources._load",
    "download": "otel_replay.replay.sources._backends",
    "fetch": "otel_replay.replay.sources._fetch",
    "import_archive": "otel_replay.replay.sources._import",
    "import_runs": "otel_replay.replay.sources._import",
    "is_bundle": "otel_replay.replay.sources._bundle",
    "is_remote": "otel_replay.replay.sources._load",
    "is_url": "otel_replay.replay.sources._fetch",
    "load_run": "otel_replay.replay.sources._load",
    "load_sources": "otel_replay.replay.sources._load",
    "only_run": "otel_replay.replay.sources._load",
    "read_file": "otel_replay.replay.sources._limits",
    "read_runs": "otel_replay.replay.sources._load",
    "run_error_type": "otel_replay.replay.sources._import",
    "shown": "otel_replay.replay.sources._fetch",
    "source_name": "otel_replay.replay.sources._backends",
    "stored_run": "otel_replay.replay.sources._build",
    "write_bundle": "otel_replay.replay.sources._bundle",
}
"""Each public name and the module it comes from, imported on first use: ``show`` rebuilds a
stored run without loading what reads files, URLs and trace backends."""


__getattr__ = _lazy_names(__name__, _LAZY, globals())


__all__ = [
    "ArchiveImport",
    "ImportReport",
    "Limits",
    "SourceRun",
    "Unbuilt",
    "UnbuiltRun",
    "UnbuiltRuns",
    "archive_of",
    "download",
    "fetch",
    "import_archive",
    "import_runs",
    "is_bundle",
    "is_remote",
    "is_url",
    "load_run",
    "load_sources",
    "only_run",
    "read_file",
    "read_runs",
    "run_error_type",
    "shown",
    "source_name",
    "stored_run",
    "write_bundle",
]
