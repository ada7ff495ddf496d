"""``otel-replay import SOURCE``: copy runs from an OTLP file or URL into the store."""

from __future__ import annotations

from collections.abc import Sequence

import click

from otel_replay import settings
from otel_replay.cli._common import store_option
from otel_replay.cli._format import plural, printable
from otel_replay.errors import SourceError
from otel_replay.replay.sources import (
    ArchiveImport,
    ImportReport,
    SourceRun,
    Unbuilt,
    UnbuiltRuns,
    archive_of,
    import_archive,
    import_runs,
    load_sources,
)
from otel_replay.store import Store

__all__ = ["import_"]


@click.command("import")
@click.argument("source")
@store_option
def import_(source: str, store: str | None) -> None:
    """Load the runs of SOURCE into the store.

    SOURCE is an OTLP file (JSON lines, one JSON document, or protobuf; gzip or zstd; as the
    Collector's file exporter writes them or not), a directory of them (the file exporter's
    rotated output), an http(s) URL answering OTLP JSON (Jaeger's /api/v3/traces/TRACE_ID),
    or any of these with #RUN_ID to import one run of several, or a golden bundle directory
    (from export: every step it holds is imported). Without #RUN_ID, every run in SOURCE is
    imported.

    A directory is imported incrementally, for a cron job: files imported whole before
    (and unchanged, even renamed by rotation) are not read again, and a run that grew since
    (more spans in a newer file) is completed.

    Recorded bytes (from inline bodies) are stored as steps; steps rebuilt from GenAI attributes
    alone are stored as spans and stay semantic. Importing a run the store already holds
    changes nothing (it is reported as already there); a different run with the same id is
    refused. A run that cannot be rebuilt (a step's body was not recorded) is reported on a
    line of its own and the others are imported; the exit status is 2 only when no run of
    SOURCE could be. The store is created when missing.
    """
    where = store if store is not None else settings.read("OTEL_REPLAY_STORE")
    archive = archive_of(source)
    if archive is not None:
        with Store.open(where) as opened:
            done = import_archive(opened, *archive)
            location = opened.location
        _archive_lines(done, location)
        _refuse_when_none(source, done.runs, done.unbuilt)
        return
    loaded, unbuilt = _loaded(source, store)
    _unbuilt_lines(unbuilt)
    _refuse_when_none(source, loaded, unbuilt)
    with Store.open(where) as opened:
        reports = import_runs(opened, loaded)
        location = opened.location
    for report in reports:
        click.echo(_line(report))
    imported = sum(r.outcome == "imported" for r in reports)
    click.echo(f"{plural(imported, 'run')} imported into {location}")


def _loaded(source: str, store: str | None) -> tuple[list[SourceRun], list[Unbuilt]]:
    """The runs of ``source`` rebuilt, and those that could not be."""
    try:
        return load_sources(source, store=store), []
    except UnbuiltRuns as exc:
        return exc.runs, exc.unbuilt


def _unbuilt_lines(unbuilt: list[Unbuilt]) -> None:
    for run in unbuilt:
        click.echo(f"otel-replay: not imported: {printable(run.problem)}", err=True)


def _refuse_when_none(source: str, runs: Sequence[object], unbuilt: list[Unbuilt]) -> None:
    """Exit 2 when runs were found and none could be rebuilt (``runs``: those that were)."""
    if unbuilt and not runs:
        raise SourceError(f"nothing imported from {source}: no run of it could be rebuilt")


def _line(report: ImportReport) -> str:
    counts = f"{plural(report.steps, 'step')} ({report.exact} exact, {report.semantic} semantic)"
    run = printable(report.run_id)
    if report.outcome == "present":
        said = f"{run}: already in the store, {counts}; nothing changed"
    elif report.outcome == "completed":
        said = f"{run}: completed, now {counts}, {report.stored} more stored"
    else:
        said = f"{run}: imported {counts}, {report.stored} stored with their bytes"
    if report.missing is not None:  # an import to come completes it
        said += f"; incomplete: {printable(report.missing)} is not there yet"
    return said


def _archive_lines(done: ArchiveImport, location: str) -> None:
    for note in done.notes:  # a note names a file: any name a directory may hold
        click.echo(f"otel-replay: {printable(note)}", err=True)
    _unbuilt_lines(done.unbuilt)
    for report in done.runs:
        click.echo(_line(report))
    counts = {
        outcome: sum(r.outcome == outcome for r in done.runs)
        for outcome in ("imported", "completed")
    }
    click.echo(
        f"{plural(done.read, 'file')} read, {done.skipped} skipped, "
        f"{plural(counts['imported'], 'run')} imported, {counts['completed']} completed "
        f"into {location}"
    )
