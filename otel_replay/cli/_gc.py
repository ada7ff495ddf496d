"""``otel-replay gc``: remove expired runs and what no run references."""

from __future__ import annotations

import dataclasses
import time

import click

from otel_replay.cli._common import emit, open_store, progress, stdout_console, store_option
from otel_replay.cli._format import human_bytes, json_text, plural
from otel_replay.cli._tables import gc_table

__all__ = ["gc"]


@click.command()
@store_option
@click.option("--dry-run", is_flag=True, help="List what would be removed; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def gc(store: str | None, dry_run: bool, as_json: bool) -> None:
    """Remove expired runs and unreferenced blobs.

    A run expires a number of days after its last activity: OTEL_REPLAY_RETAIN_OK_DAYS (7)
    for runs without errors, OTEL_REPLAY_RETAIN_ERROR_DAYS (30) for runs with one. Pinned
    runs (otel-replay pin) are kept forever. Leftovers of interrupted writers (older than an
    hour) go too, and small packs are merged.
    """
    now = time.time()
    with open_store(store) as opened:
        before = {run.run_id: run for run in opened.runs()}
        with progress("collecting") as report:
            result = opened.gc(now=now, dry_run=dry_run, progress=report)
        retention = opened.retention
        location = opened.location
    removed = [before[run_id] for run_id in result.runs_removed if run_id in before]
    kept = len(before) - len(removed)
    if as_json:
        document = {
            "store": location,
            **dataclasses.asdict(result),
            "runs_removed": list(result.runs_removed),
            "runs_kept": kept,
        }
        click.echo(json_text(document))
        return
    console = stdout_console()
    policy = (
        f"retention: ok runs {retention.ok_days:g} days, error runs {retention.error_days:g} "
        "days, pinned forever"
    )
    if removed:
        verb = "Would remove" if dry_run else "Removed"
        emit(console, f"{verb} {plural(len(removed), 'expired run')} ({policy}):")
        emit(console, gc_table(removed, retention, int(now * 1e9)))
    else:
        emit(console, f"No expired runs ({policy}).")
    pinned = sum(run.pinned for run in before.values())
    summary = (
        f"{'Would free' if dry_run else 'Freed'} {human_bytes(result.bytes_freed)}: "
        f"{plural(len(removed), 'run')}, {plural(result.blobs_removed, 'blob')}, "
        f"{plural(result.files_removed, 'file')}"
    )
    counts = ((result.compacted, "small pack"), (result.records_merged, "record file"))
    merges = [plural(count, what) for count, what in counts if count]
    if merges:
        summary += f"; {'would merge' if dry_run else 'merged'} {' and '.join(merges)}"
    summary += f". {plural(kept, 'run')} kept ({pinned} pinned) in {location}."
    emit(console, summary, soft_wrap=True)
    if dry_run and (removed or result.files_removed):
        emit(console, "Nothing was changed (dry run).", style="dim")
    if result.skipped:
        emit(console, f"Nothing was swept: {result.skipped}.", soft_wrap=True)
