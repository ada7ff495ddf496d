"""``otel-replay import SOURCE``: copy runs from an OTLP file or URL into the store."""

from __future__ import annotations

import click

from otel_replay import settings
from otel_replay.cli._common import store_option
from otel_replay.cli._format import plural, printable
from otel_replay.replay.sources import ImportReport, import_runs, load_sources
from otel_replay.store import Store

__all__ = ["import_"]


@click.command("import")
@click.argument("source")
@store_option
def import_(source: str, store: str | None) -> None:
    """Load the runs of SOURCE into the store.

    SOURCE is an OTLP file (JSON lines as the Collector's file exporter writes them, one JSON
    document, or protobuf), an http(s) URL answering OTLP JSON (Jaeger's
    /api/v3/traces/TRACE_ID), or either with #RUN_ID to import one run of several. Without
    it, every run in SOURCE is imported.

    Recorded bytes (from inline bodies) are stored as steps; steps rebuilt from GenAI attributes
    alone are stored as spans and stay semantic. Importing a run the store already holds
    changes nothing (it is reported as already there); a different run with the same id is
    refused. The store is created when missing.
    """
    loaded = load_sources(source, store=store)
    where = store if store is not None else settings.read("OTEL_REPLAY_STORE")
    with Store.open(where) as opened:
        reports = import_runs(opened, loaded)
        location = opened.location
    for report in reports:
        click.echo(_line(report))
    imported = sum(r.outcome == "imported" for r in reports)
    click.echo(f"{plural(imported, 'run')} imported into {location}")


def _line(report: ImportReport) -> str:
    counts = f"{plural(report.steps, 'step')} ({report.exact} exact, {report.semantic} semantic)"
    if report.outcome == "present":
        return f"{printable(report.run_id)}: already in the store, {counts}; nothing changed"
    return f"{printable(report.run_id)}: imported {counts}, {report.stored} stored with their bytes"
