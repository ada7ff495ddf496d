"""``otel-replay triage [RUN...]``: label how runs failed, summed up by category, and say which
runs cannot be replayed exactly and what capture settings would have kept them."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from otel_replay import settings
from otel_replay.cli._common import (
    CliError,
    emit,
    is_source,
    open_store,
    progress,
    resolve_run,
    stdout_console,
    store_option,
)
from otel_replay.cli._format import iso_time, json_text, plural, printable, when
from otel_replay.cli._runs import label_json
from otel_replay.cli._tables import SEVERITY_STYLE, label_text, table
from otel_replay.errors import CorruptBlobError, StoreNotFoundError
from otel_replay.store import Store
from otel_replay.triage import CATEGORIES, ColdCase, Triage, Verdict, severity_rank

__all__ = ["triage"]

DEFAULT_SINCE = "7d"
EXAMPLES = 3
"""Example runs a summary row names."""
KEEP_EVERY = 500
"""Runs triaged between two writes of their labels: few writes, and little lost if cut off."""
_AGE = re.compile(r"(\d+)\s*([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800}


_AGE_MAX_S = 36_500 * 86_400
"""The longest age, 100 years: a longer one reaches before the calendar's first year."""


def parse_age(text: str) -> int:
    """``30m``, ``12h``, ``7d``, ``2w`` (at most 100 years) in nanoseconds; ValueError for
    anything else."""
    match = _AGE.fullmatch(text.strip().lower())
    if match is None or int(match[1]) == 0:
        raise ValueError(f"{text[:40]!r} is not an age such as 30m, 12h, 7d or 2w")
    seconds = int(match[1]) * _UNIT_S[match[2]]
    if seconds > _AGE_MAX_S:
        raise ValueError(f"{text[:40]!r} is longer than 100 years (36500d)")
    return seconds * 10**9


def _since(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_age(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


@click.command()
@click.argument("refs", nargs=-1, metavar="[RUN]...")
@click.option(
    "--since",
    metavar="AGE",
    callback=_since,
    help=f"Only runs that started within AGE: 30m, 12h, 7d, 2w. [default without RUN: "
    f"{DEFAULT_SINCE}]",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print every run's labels and cold cases, and the summary, as JSON.",
)
@store_option
def triage(refs: tuple[str, ...], since: int | None, as_json: bool, store: str | None) -> None:
    """Label how runs failed, and say which cannot be replayed exactly.

    Without RUN: the store's runs that started within --since (7 days). RUN is a run id, a
    unique prefix of one, `latest`, or a trace source (an OTLP file, the Collector's archive
    directory, a bundle, a URL, a trace backend), whose every run is triaged (#RUN_ID picks
    one). Each run and failed step gets a failure category (contract_violation,
    environment_drift, model_hallucination, tool_exhaustion, retry_overflow, replay_mismatch)
    and a severity (critical: the run failed; error; warning), by the rules of the triage
    page of the docs. Prints a summary by category, the runs labelled, and the cold cases:
    runs that cannot be replayed exactly, with the capture settings that would have kept
    what they lack.

    The labels of the store's runs are written into the store (`otel-replay runs --failed
    --category C` lists them); triaging a run again replaces them. The recordings are never
    changed. Exit status: 0 when triaged (whatever was found); 2 on bad input, or when a
    stored run could not be read (the others are triaged first).
    """
    age = since if since is not None else None if refs else parse_age(DEFAULT_SINCE)
    cutoff = 0 if age is None else time.time_ns() - age
    damaged: dict[str, str] = {}
    with _store(store, needed=not refs or any(not is_source(r) for r in refs)) as opened:
        session = Triage(opened)
        verdicts = _verdicts(session, opened, refs, cutoff, damaged)
        location = None if opened is None else opened.location
    if as_json:
        click.echo(json_text(_document(verdicts, since, session.written, location)))
    else:
        _print(verdicts, refs, since, session.written, location)
    if damaged:
        run_id, problem = next(iter(damaged.items()))
        others = f" and {plural(len(damaged) - 1, 'other run')}" if len(damaged) > 1 else ""
        raise CliError(
            f"run {printable(run_id)}{others} could not be read, so not triaged ({problem}); "
            "otel-replay verify names the damage"
        )


@contextlib.contextmanager
def _store(location: str | None, *, needed: bool) -> Iterator[Store | None]:
    """The store: required when runs of it are triaged; for trace sources alone, the store
    when there is one (it says which runs it holds, and holds the runs replays re-executed)."""
    if needed:
        with open_store(location) as opened:
            yield opened
        return
    where = location if location is not None else settings.read("OTEL_REPLAY_STORE")
    try:
        opened = Store.open(where, create=False)
    except StoreNotFoundError:
        yield None
        return
    with opened:
        yield opened


def _verdicts(
    session: Triage, store: Store | None, refs: Sequence[str], cutoff: int, damaged: dict[str, str]
) -> list[Verdict]:
    """The verdict on each run ``refs`` name (every run of the store when none), each once,
    those that started before ``cutoff`` (Unix nanoseconds) left out; a stored run whose
    files are damaged goes into ``damaged`` (run id: the problem) instead."""
    if store is not None and not refs:
        infos = store.runs()
    else:
        infos = [resolve_run(store, r) for r in refs if not is_source(r) and store is not None]
    unique = [i for i in {i.run_id: i for i in infos}.values() if i.start_ns >= cutoff]
    verdicts: list[Verdict] = []
    with progress("triaging") as report:
        for done, info in enumerate(unique, start=1):
            try:
                verdicts.append(session.stored(info))
            except CorruptBlobError as exc:
                damaged[info.run_id] = str(exc)
            report(done, len(unique))
            if done % KEEP_EVERY == 0:
                session.keep()
    session.keep()
    for ref in refs:
        if is_source(ref):
            verdicts.extend(v for v in session.source(ref) if v.start_ns >= cutoff)
    return verdicts


# -- JSON ----------------------------------------------------------------------------------


def _cold_json(case: ColdCase) -> dict[str, Any]:
    return {"kind": case.kind, "detail": case.detail, "settings": list(case.settings)}


def _verdict_json(verdict: Verdict) -> dict[str, Any]:
    label = verdict.label
    return {
        "run_id": verdict.run_id,
        "source": verdict.source,
        "start": iso_time(verdict.start_ns) if verdict.start_ns else None,
        "status": verdict.status,
        "error_type": verdict.error_type,
        "mode": verdict.mode,
        "failed": verdict.failed,
        "label": None if label is None else label_json(label),
        "steps": [label_json(x) for x in verdict.labels if x.step is not None],
        "cold": [_cold_json(c) for c in verdict.cold],
    }


def _document(
    verdicts: list[Verdict], since: int | None, written: bool, location: str | None
) -> dict[str, Any]:
    """What ``--json`` prints (see docs/triage.md)."""
    return {
        "since_s": None if since is None else since // 10**9,
        "store": location,
        "labels_written": written and any(v.stored for v in verdicts),
        "summary": _summary(verdicts),
        "uncategorised": [v.run_id for v in _newest(verdicts) if v.failed and v.label is None],
        "runs": [_verdict_json(v) for v in _newest(verdicts)],
    }


def _newest(verdicts: list[Verdict]) -> list[Verdict]:
    return sorted(verdicts, key=lambda v: (v.start_ns, v.run_id), reverse=True)


def _summary(verdicts: list[Verdict]) -> list[dict[str, Any]]:
    """One row per category found: the runs with a label of it (newest first), its labelled
    steps, and the most severe of its labels."""
    rows = []
    for category in CATEGORIES:
        runs = [v for v in _newest(verdicts) if any(x.category == category for x in v.labels)]
        if not runs:
            continue
        found = [x for v in runs for x in v.labels if x.category == category]
        rows.append(
            {
                "category": category,
                "severity": max((x.severity for x in found), key=severity_rank),
                "runs": len(runs),
                "steps": sum(x.step is not None for x in found),
                "examples": [v.run_id for v in runs[:EXAMPLES]],
            }
        )
    return rows


# -- text ----------------------------------------------------------------------------------


def _print(
    verdicts: list[Verdict],
    refs: Sequence[str],
    since: int | None,
    written: bool,
    location: str | None,
) -> None:
    console = stdout_console()
    now = time.time_ns()
    window = (
        f"since {when(now - since, now)}"
        if since is not None
        else "as named"
        if refs
        else f"in the last {DEFAULT_SINCE}"
    )
    if not verdicts:
        emit(console, f"No runs to triage ({window}).")
        return
    summary = _summary(verdicts)
    if summary:
        emit(console, _summary_table(summary))
    listed = [v for v in _newest(verdicts) if v.labels or v.failed]
    if listed:
        emit(console, _runs_table(listed, now))
    cold = [v for v in _newest(verdicts) if v.cold]
    if cold:
        emit(console, Text("Cold cases: runs that cannot be replayed exactly", style="bold"))
        emit(console, _cold_table(cold))
    failed = sum(v.failed for v in verdicts)
    uncategorised = sum(v.failed and v.label is None for v in verdicts)
    counts = [
        f"{plural(len(verdicts), 'run')} triaged ({window})",
        f"{failed} failed",
        f"{sum(v.label is not None for v in verdicts)} labelled",
        *([f"{uncategorised} failed with no rule to explain it"] if uncategorised else []),
        f"{plural(len(cold), 'cold case')}",
    ]
    emit(console, ", ".join(counts), style="dim")
    if location is not None and any(v.stored for v in verdicts):
        note = (
            f"labels kept in the store at {location}: otel-replay runs --failed --category C"
            if written
            else f"labels not written: the store at {location} is read-only"
        )
        emit(console, note, style="dim")


def _summary_table(rows: list[dict[str, Any]]) -> Table:
    summary = table("category", "severity", "runs", "steps", "example runs")
    for column in (2, 3):
        summary.columns[column].justify = "right"
    for row in rows:
        summary.add_row(
            Text(row["category"], style="bold"),
            Text(row["severity"], style=SEVERITY_STYLE.get(row["severity"], "")),
            Text(str(row["runs"])),
            Text(str(row["steps"])),
            Text(", ".join(printable(r) for r in row["examples"])),
        )
    return summary


def _runs_table(verdicts: list[Verdict], now: int) -> Table:
    runs = table("run", "when", "status", "label", "what happened")
    for column in (0, 1, 2, 3):
        runs.columns[column].no_wrap = True
    for verdict in verdicts:
        label = verdict.label
        status = Text(verdict.status, style="bold red" if verdict.status == "error" else "")
        if verdict.error_type:
            status.append(f" ({printable(verdict.error_type)})", style="bold red")
        if label is None:
            shown = Text("-", style="dim")
            what = Text("no rule explains it", style="dim")
        else:
            shown = label_text(label)
            steps = sum(x.step is not None for x in verdict.labels)
            # The reason names one labelled step; the count is of the others.
            more = f" (+{plural(steps - 1, 'more step')} labelled)" if steps > 1 else ""
            what = Text(printable(label.reason) + more)
        runs.add_row(
            Text(printable(verdict.run_id), style="bold"),
            Text(when(verdict.start_ns, now) if verdict.start_ns else "-"),
            status,
            shown,
            what,
        )
    return runs


def _cold_table(verdicts: list[Verdict]) -> Table:
    cold = table("run", "kind", "what is missing", "capture settings")
    for column in (0, 1):
        cold.columns[column].no_wrap = True
    for verdict in verdicts:
        for number, case in enumerate(verdict.cold):
            cold.add_row(
                Text(printable(verdict.run_id) if number == 0 else "", style="bold"),
                Text(case.kind),
                Text(printable(case.detail)),
                Text("; ".join(case.settings)),
            )
    return cold
