"""``otel-replay runs``: the recorded runs, newest first."""

from __future__ import annotations

import time
from typing import Any

import click

from otel_replay.cli._common import emit, open_store, run_mode, stdout_console, store_option
from otel_replay.cli._format import iso_time, json_text, plural
from otel_replay.store import FailureLabel, RunInfo
from otel_replay.triage import CATEGORIES
from otel_replay.triage import failed as run_failed

__all__ = ["forks_under_parents", "label_json", "run_json", "runs"]


MODES = ("record", "replay", "fork")
TABLE_LIMIT = 50
"""Runs the table shows by default: a screenful or two, and quick on a store of thousands."""


def run_json(run: RunInfo) -> dict[str, Any]:
    """A run, JSON-ready: the index's fields plus ISO times and the duration. ``mode`` is
    ``record``, ``replay`` or ``fork``; ``parent_run_id`` the run a replay or fork
    re-executed (null for a recording)."""
    return {
        "run_id": run.run_id,
        "start_ns": run.start_ns,
        "end_ns": run.end_ns,
        "start": iso_time(run.start_ns),
        "end": iso_time(run.end_ns),
        "duration_ms": (run.end_ns - run.start_ns) / 1e6,
        "status": run.status,
        "recorded_id": run.recorded_id,
        "recording": run.recording,
        "mode": run_mode(run),
        "parent_run_id": run.parent_run_id,
        "error_type": run.error_type,
        "error_steps": run.error_steps,
        "pinned": run.pinned,
        "commit": run.commit,
        "code_dirty": run.code_dirty,
        "seed": run.seed,
        "step_count": run.step_count,
        "tokens_in": run.tokens_in,
        "tokens_out": run.tokens_out,
        "bytes": run.bytes,
        "models": list(run.models),
    }


def label_json(label: FailureLabel) -> dict[str, Any]:
    """A failure label of ``otel-replay triage``, JSON-ready (``step``: null for the run's
    own)."""
    return {
        "step": label.step,
        "category": label.category,
        "severity": label.severity,
        "rule": label.rule,
        "reason": label.reason,
    }


def _own(labels: list[FailureLabel] | None) -> FailureLabel | None:
    """A run's own label among its ``labels`` (it comes first)."""
    return labels[0] if labels and labels[0].step is None else None


def forks_under_parents(found: list[RunInfo]) -> list[RunInfo]:
    """``found`` in its order, but each fork whose parent is listed right under it (newest
    fork first), so that a recording and its what-ifs read together."""
    listed = {run.run_id for run in found}
    forks: dict[str, list[RunInfo]] = {}
    for run in found:
        if run_mode(run) == "fork" and run.parent_run_id in listed and run.parent_run_id:
            forks.setdefault(run.parent_run_id, []).append(run)
    placed = {run.run_id for children in forks.values() for run in children}
    ordered: list[RunInfo] = []

    def place(run: RunInfo) -> None:
        ordered.append(run)
        for child in forks.pop(run.run_id, ()):
            place(child)

    for run in found:
        if run.run_id not in placed:
            place(run)
    return ordered


@click.command()
@store_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of a table.")
@click.option(
    "-n",
    "--limit",
    type=click.IntRange(min=1, max=2**63 - 1),  # SQLite's integers
    default=None,
    help=f"Show only the newest N runs (the table's default: {TABLE_LIMIT}).",
)
@click.option("--all", "show_all", is_flag=True, help="Show every run in the table.")
@click.option(
    "--mode",
    type=click.Choice(MODES),
    default=None,
    help="Only recordings, only replays (otel-replay replay), or only forks.",
)
@click.option(
    "--failed",
    is_flag=True,
    help="Only runs that failed: ended in error, or labelled by otel-replay triage with an "
    "error (a warning alone is something the run got over).",
)
@click.option(
    "--category",
    type=click.Choice(CATEGORIES),
    default=None,
    help="Only runs otel-replay triage labelled with this failure category (the run or one "
    "of its steps).",
)
def runs(
    store: str | None,
    as_json: bool,
    limit: int | None,
    show_all: bool,
    mode: str | None,
    failed: bool,
    category: str | None,
) -> None:
    """List the recorded runs, newest first.

    For each run: its id, when it started (local time), status (ok; error when it or a step
    failed; incomplete when its recorder never closed it: killed, or still recording, or
    imported before its last spans arrived), its
    mode (a recording, or a replay or fork of the run named), steps, the models it called,
    tokens in/out and the bytes recorded. A run id recorded again by another process is
    listed as its own run, ``<id>@<n>``. The table shows the newest 50 unless ``--limit``
    or ``--all`` says otherwise; ``--json`` gives every run unless ``--limit`` says otherwise.
    """
    if show_all and limit is not None:
        raise click.UsageError("--all and --limit cannot be used together")
    # Unfiltered, only the runs shown are read: a store of 100,000 runs lists as fast as a
    # small one. A filter reads every run.
    newest = None if mode or failed or category or show_all else limit or TABLE_LIMIT
    if as_json and limit is None:
        newest = None
    with open_store(store) as opened:
        found = sorted(opened.runs(newest), key=lambda r: (r.start_ns, r.run_id), reverse=True)
        total = len(found) if newest is None else opened.run_count()
        labels = opened.labels() if failed or category else {}
        location = opened.location
    if mode is not None:
        found = [run for run in found if run_mode(run) == mode]
    if failed:
        found = [run for run in found if run_failed(run.status, _own(labels.get(run.run_id)))]
    if category is not None:
        found = [
            run for run in found if any(x.category == category for x in labels.get(run.run_id, ()))
        ]
    if newest is None:
        total = len(found)
    if as_json:
        click.echo(json_text([run_json(run) for run in found[:limit]]))
        return
    found = found if show_all else found[: limit or TABLE_LIMIT]
    kind = " ".join(x for x in ("failed" if failed else "", category, mode, "run") if x)
    if not found:
        click.echo(f"No {kind}s in the store at {location} yet.")
        return
    from otel_replay.cli._tables import runs_table  # noqa: PLC0415 - --json prints without rich

    console = stdout_console()
    emit(console, runs_table(forks_under_parents(found), time.time_ns()))
    shown = f"{len(found)} of " if len(found) < total else ""
    more = " (--limit N or --all for more)" if len(found) < total and limit is None else ""
    emit(console, f"{shown}{plural(total, kind)} in {location}{more}", style="dim")
