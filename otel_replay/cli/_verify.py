"""``otel-replay verify``: re-hash every blob and check the index against the packs."""

from __future__ import annotations

import dataclasses

import click
from rich.text import Text

from otel_replay import settings
from otel_replay.cli._common import (
    CliError,
    emit,
    open_store,
    progress,
    stdout_console,
    store_option,
)
from otel_replay.cli._format import json_text, plural
from otel_replay.errors import OtelReplayError, StoreNotFoundError
from otel_replay.store import Store

__all__ = ["verify"]


@click.command()
@store_option
@click.option("--json", "as_json", is_flag=True, help="Print the problems found as JSON.")
@click.option(
    "--rebuild-index",
    is_flag=True,
    help="First rebuild the index from the packs (the old index.sqlite is kept as "
    "index.sqlite.broken-<time>; for a remote store, its cached index).",
)
@click.pass_context
def verify(ctx: click.Context, store: str | None, as_json: bool, rebuild_index: bool) -> None:
    """Check the whole store: re-read every pack and record, re-hash every object and body,
    compare the index with the files.

    Prints each damaged thing (pack file, object hash, run and step) on its own line, then
    notices that lose nothing: files the index does not know yet (a writer cut off before its
    commit), leftovers of a compaction or gc that was cut off (the next gc removes them),
    temporary files, runs cut off mid-write. Exit status: 0 when nothing is damaged
    (notices or not), 1 when anything is, 2 when the store cannot be opened. Nothing is
    repaired or rewritten; --rebuild-index replaces only the index (a damaged or lost one),
    rebuilt from the files, keeping every readable step.
    """
    with _rebuilt(store) if rebuild_index else open_store(store) as opened:
        with progress("verifying") as report:
            problems = opened.verify(progress=report)
        runs = opened.runs()
        location = opened.location
    steps = sum(run.step_count for run in runs)
    damage = [p for p in problems if p.damage]
    if as_json:
        document = {
            "store": location,
            "ok": not damage,
            "runs": len(runs),
            "steps": steps,
            "problems": [dataclasses.asdict(problem) for problem in problems],
        }
        click.echo(json_text(document))
    else:
        console = stdout_console()
        for problem in damage:
            line = Text(f"damaged {problem.kind}: ", style="bold red")
            line.append(problem.message)
            emit(console, line, soft_wrap=True)
        for problem in problems:
            if not problem.damage:
                line = Text(f"notice ({problem.kind}): ", style="yellow")
                line.append(problem.message)
                emit(console, line, soft_wrap=True)
        if damage:
            damaged = sorted({p.run_id for p in damage if p.run_id})
            runs_note = f"; runs affected: {', '.join(damaged)}" if damaged else ""
            summary = (
                f"{plural(len(damage), 'problem')} in the store at {location}{runs_note}. "
                "Nothing was changed."
            )
            emit(console, summary, style="bold red", soft_wrap=True)
        else:
            summary = (
                f"The store at {location} is intact: {plural(len(runs), 'run')}, "
                f"{plural(steps, 'step')}, every body re-hashed."
            )
            emit(console, summary, style="green", soft_wrap=True)
    if damage:
        ctx.exit(1)


def _rebuilt(location: str | None) -> Store:
    """The store at ``location`` (or ``OTEL_REPLAY_STORE``) with its index rebuilt."""
    where = location if location is not None else settings.read("OTEL_REPLAY_STORE")
    try:
        return Store.rebuild(where)
    except StoreNotFoundError as exc:
        raise CliError(f"{exc} ({'check --store' if location else 'pass --store'})") from None
    except OtelReplayError:
        raise
    except (ValueError, ImportError) as exc:
        raise CliError(f"cannot open store {where}: {exc}") from None
