"""``otel-replay show RUN``: the steps of one run, in order."""

from __future__ import annotations

import time

import click

from otel_replay.cli._common import emit, open_run, stdout_console, store_option
from otel_replay.cli._format import json_text, printable
from otel_replay.cli._runs import run_json
from otel_replay.cli._steps import step_views
from otel_replay.cli._tables import (
    NESTED_NOTE,
    has_nested,
    run_header,
    semantic_note,
    steps_table,
)
from otel_replay.errors import SourceError
from otel_replay.replay.sources import stored_run

__all__ = ["show"]


@click.command()
@click.argument("run")
@store_option
@click.option(
    "--json", "as_json", is_flag=True, help="Print the run and its steps (messages parsed) as JSON."
)
def show(run: str, store: str | None, as_json: bool) -> None:
    """Show the steps of RUN in order.

    RUN is a run id, a unique prefix of one, or `latest` (the newest recording), or a trace
    source (an OTLP file, the Collector's archive directory, a URL; with #RUN_ID to pick one
    of several runs). The header
    gives the run's mode (record, or replay/fork of the run it re-executed). For each step:
    index, kind, model (or method and URL of a plain HTTP call; for a tool, its name, its
    effect and why: `refund (write: declared nowhere)`), the prompt (last user message) and
    the response (text, or tool calls as name(arguments)), duration and time to first chunk
    in ms, tokens in/out, and status (HTTP status, error type, `incomplete` when a response
    was cut short). A step made inside another's body (an MCP call inside a LangChain tool, a
    tool's HTTP request) is marked `└ KIND in N`, N the outer step. Steps known from their
    spans only (imported without their bytes) are listed too, and named as semantic.
    """
    with open_run(run, store) as (opened, info):
        try:
            loaded = stored_run(opened, info, empty=True)
        except SourceError as exc:  # spans a replay refuses: what was stored can be shown
            click.echo(f"otel-replay: {exc}; shown without its spans", err=True)
            loaded = stored_run(opened, info, empty=True, spans=False)
    views = step_views(loaded)
    missing = loaded.run.missing
    if as_json:
        steps = [view.to_json() for view in views]
        click.echo(json_text({"run": run_json(info), "missing": missing, "steps": steps}))
        return
    console = stdout_console()
    emit(console, run_header(info, time.time_ns()))
    if missing is not None:
        emit(console, f"incomplete: {printable(missing)} is not there yet", style="yellow")
    if not views:
        emit(console, "(no steps recorded)", style="dim")
        return
    emit(console, steps_table(views))
    if has_nested(views):
        emit(console, NESTED_NOTE, style="dim")
    semantic = [view.step.index for view in views if view.fidelity == "semantic"]
    if semantic:
        emit(console, semantic_note(semantic), style="dim")
