"""``otel-replay show RUN``: the steps of one run, in order."""

from __future__ import annotations

import time
from typing import Any

import click

from otel_replay.cli._common import emit, open_run, stdout_console, store_option
from otel_replay.cli._format import json_text, printable
from otel_replay.cli._runs import label_json, run_json
from otel_replay.cli._steps import StepView, step_views
from otel_replay.errors import SourceError
from otel_replay.replay.sources import stored_run
from otel_replay.store import FailureLabel, RunInfo

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
    spans only (imported without their bytes) are listed too, and named as semantic. The
    failure labels of the last `otel-replay triage` are shown: the run's under the header,
    each labelled step's in a label column, with their reasons under the table.
    """
    with open_run(run, store) as (opened, info):
        try:
            loaded = stored_run(opened, info, empty=True)
        except SourceError as exc:  # spans a replay refuses: what was stored can be shown
            click.echo(f"otel-replay: {exc}; shown without its spans", err=True)
            loaded = stored_run(opened, info, empty=True, spans=False)
        labels = opened.labels(info.run_id).get(info.run_id, [])
    views = step_views(loaded)
    missing = loaded.run.missing
    own = next((label for label in labels if label.step is None), None)
    if as_json:
        steps = [_step_json(view, labels) for view in views]
        kept = None if own is None else label_json(own)
        document = {"run": run_json(info), "missing": missing, "label": kept, "steps": steps}
        click.echo(json_text(document))
        return
    _draw(info, views, missing, own, labels)


def _draw(
    info: RunInfo,
    views: list[StepView],
    missing: str | None,
    own: FailureLabel | None,
    labels: list[FailureLabel],
) -> None:
    """Print the run's header and its steps' table, with notes and labels under it."""
    # Loaded here: --json prints without rich.
    from rich.text import Text  # noqa: PLC0415

    from otel_replay.cli._tables import (  # noqa: PLC0415
        NESTED_NOTE,
        has_nested,
        label_text,
        run_header,
        semantic_note,
        steps_table,
    )

    console = stdout_console()
    emit(console, run_header(info, time.time_ns()))
    if missing is not None:
        emit(console, f"incomplete: {printable(missing)} is not there yet", style="yellow")
    if own is not None:
        emit(
            console,
            Text("label: ").append_text(label_text(own)).append(f": {printable(own.reason)}"),
        )
    if not views:
        emit(console, "(no steps recorded)", style="dim")
        return
    emit(console, steps_table(views, labels))
    if has_nested(views):
        emit(console, NESTED_NOTE, style="dim")
    semantic = [view.step.index for view in views if view.fidelity == "semantic"]
    if semantic:
        emit(console, semantic_note(semantic), style="dim")
    for label in labels:
        if label.step is not None:
            line = Text(f"step {label.step}: ").append_text(label_text(label))
            emit(console, line.append(f" ({printable(label.rule)}): {printable(label.reason)}"))


def _step_json(view: StepView, labels: list[FailureLabel]) -> dict[str, Any]:
    """A step's JSON, with its failure labels (``labels``: only when it has some)."""
    out = view.to_json()
    found = [label_json(x) for x in labels if x.step == view.step.index]
    if found:
        out["labels"] = [{k: v for k, v in x.items() if k != "step"} for x in found]
    return out
