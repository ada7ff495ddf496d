"""Replay sources: the store, OTLP JSON or protobuf files, OTLP JSON URLs and bundle
directories, as Runs.

:func:`load_run` is the entry point; :func:`fetch` downloads a URL source once (the replay
CLI downloads in the parent and hands the child a file, since the child may open no socket);
:func:`read_runs` parses bytes already in hand; :func:`import_runs` copies runs into a store.
"""

from otel_replay.replay.sources._build import SourceRun
from otel_replay.replay.sources._bundle import write_bundle
from otel_replay.replay.sources._fetch import fetch, is_url, shown
from otel_replay.replay.sources._import import ImportReport, import_runs
from otel_replay.replay.sources._limits import Limits
from otel_replay.replay.sources._load import load_run, load_sources, only_run, read_runs, stored_run

__all__ = [
    "ImportReport",
    "Limits",
    "SourceRun",
    "fetch",
    "import_runs",
    "is_url",
    "load_run",
    "load_sources",
    "only_run",
    "read_runs",
    "shown",
    "stored_run",
    "write_bundle",
]
