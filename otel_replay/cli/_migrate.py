"""``otel-replay migrate``: convert a store of format version 2 or 3 to version 4."""

from __future__ import annotations

import os
from pathlib import Path

import click

from otel_replay import settings
from otel_replay.cli._common import CliError, store_option
from otel_replay.cli._format import plural, printable
from otel_replay.store import is_url
from otel_replay.store import migrate as migrate_store

__all__ = ["migrate"]


@click.command()
@store_option
@click.pass_context
def migrate(ctx: click.Context, store: str | None) -> None:
    """Convert a version-2 or version-3 store to format version 4.

    Version 3: each record file is rewritten in place, its spans leaving out what their
    steps' bodies rebuild, once the rewritten file is found to give every span back exactly;
    run `otel-replay gc` afterwards to free what the old copies took. Version 2: every run,
    step, span and pin is carried over through the ordinary write path, into a new store
    beside the old one; then the old store is renamed to STORE.v2-backup (kept whole: delete
    it when you are sure) and the new one takes its place. A migration cut off is safe: run
    it again. Exit status: 0 done; 1 done, but parts of the old store could not be carried
    (version 3: record files left as they were, still readable): each is named (every step
    the old index lists and the new store lacks, by run and step, with the objects it
    lacks), and the backup still holds all of it; 2 bad input (no store, not version 2 or 3).
    """
    where = store if store is not None else str(settings.read("OTEL_REPLAY_STORE"))
    if is_url(where):
        raise CliError(f"migrate converts local stores; {where} is a URL")
    result = migrate_store(Path(os.path.expanduser(where)))
    if result.resumed:
        click.echo(
            f"Finished a migration that was cut off: {printable(where)} is at format version 4; "
            f"the version-2 store is kept at {printable(str(result.backup))}."
        )
        return
    if result.version == 3:
        for problem in result.problems:
            click.echo(f"not rewritten: {printable(problem)}")
        click.echo(
            f"Migrated {plural(result.runs, 'run')} and {plural(result.steps, 'step')} to "
            f"format version 4 in {printable(where)}; run `otel-replay gc` to free the space "
            "their spans' old copies take."
        )
        if result.problems:
            ctx.exit(1)
        return
    for problem in result.problems:
        click.echo(f"not migrated: {printable(problem)}")
    steps = plural(result.steps, "step")
    if result.lost:
        steps = f"{result.steps} of {plural(result.steps + result.lost, 'step')}"
    click.echo(
        f"Migrated {plural(result.runs, 'run')} and {steps} to format version 4 in "
        f"{printable(where)}; the version-2 store is kept at {printable(str(result.backup))}."
    )
    if result.problems:
        click.echo(
            f"Not everything could be carried ({plural(len(result.problems), 'problem')}, named "
            "above); the version-2 store still holds all it held.",
            err=True,
        )
        ctx.exit(1)
