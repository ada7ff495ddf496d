"""Replay sources: the store, OTLP JSON or protobuf files, the Collector's archive
directories, OTLP JSON URLs, trace backends (Phoenix, Jaeger, Tempo) and bundle directories, as
Runs (:func:`load_run`)."""

from otel_replay.replay.sources._backends import download, is_remote, source_name
from otel_replay.replay.sources._build import SourceRun, Unbuilt, UnbuiltRuns
from otel_replay.replay.sources._bundle import is_bundle, write_bundle
from otel_replay.replay.sources._fetch import fetch, is_url, shown
from otel_replay.replay.sources._import import (
    ArchiveImport,
    ImportReport,
    import_archive,
    import_runs,
)
from otel_replay.replay.sources._limits import Limits
from otel_replay.replay.sources._load import (
    archive_of,
    load_run,
    load_sources,
    only_run,
    read_runs,
    stored_run,
)

__all__ = [
    "ArchiveImport",
    "ImportReport",
    "Limits",
    "SourceRun",
    "Unbuilt",
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
    "read_runs",
    "shown",
    "source_name",
    "stored_run",
    "write_bundle",
]
