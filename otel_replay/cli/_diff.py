"""``otel-replay diff RUN_A RUN_B``: two runs' steps aligned, and where they first differ."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from otel_replay.cli._common import PIPE_WIDTH, emit, open_run, stdout_console, store_option
from otel_replay.cli._format import json_text, plural, printable
from otel_replay.cli._replay_report import change_lines
from otel_replay.cli._runs import run_json
from otel_replay.cli._tables import run_header, safe_text, table
from otel_replay.replay import RecordedStep, Run, RunDiff, StepPair, diff_runs
from otel_replay.replay.sources import is_bundle, load_run, stored_run
from otel_replay.store import RunInfo, Store

__all__ = ["diff", "diff_text", "render"]

_MAX_CHANGES = 12


def _store_run(store: Store, info: RunInfo) -> Run:
    """Run ``info`` of ``store`` with its payloads, as ``replay`` rebuilds it (with no steps
    when it has none)."""
    return stored_run(store, info, empty=True).run


@contextmanager
def opened(ref: str, store: str | None) -> Iterator[tuple[Run, RunInfo]]:
    """The run ``ref`` names with its payloads, and its facts as the index gives them. A
    bundle is read as it is: it has no spans, which an import into a store would need to
    keep its steps."""
    if is_bundle(Path(ref)):
        run = load_run(ref)
        yield run, _bundle_info(run)
        return
    with open_run(ref, store) as (opened_store, info):
        yield _store_run(opened_store, info), info


def _bundle_info(run: Run) -> RunInfo:
    """What ``diff`` shows of a bundle's run above its steps."""
    start = run.start_ns or min((s.step.start_ns for s in run.steps), default=0)
    end = max((s.step.end_ns for s in run.steps), default=start)
    failed = sum(1 for s in run.steps if s.step.error_type)
    return RunInfo(
        run_id=run.run_id,
        recorded_id=run.run_id,
        recording=0,
        mode="record",
        start_ns=start,
        end_ns=max(end, start),
        status="error" if failed else "ok",
        error_type=None,
        error_steps=failed,
        commit=run.commit,
        code_dirty=run.code_dirty,
        seed=run.seed,
        step_count=len(run.steps),
        tokens_in=None,
        tokens_out=None,
        bytes=sum(len(s.step.request_body) + len(s.step.response_body) for s in run.steps),
        pinned=False,
        models=tuple(dict.fromkeys(s.step.model for s in run.steps if s.step.model)),
    )


@click.command()
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="RUN_B")
@store_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the runs, the aligned pairs (each change's field, before and after) and the "
    "first divergence as JSON.",
)
@click.pass_context
def diff(ctx: click.Context, run_a: str, run_b: str, store: str | None, as_json: bool) -> None:
    """Compare two runs of the store step by step, and name their first divergence.

    RUN_A and RUN_B are each a run id, a unique prefix of one, or `latest` (the newest
    recording); a recording, a replay or a fork; or a trace source (an OTLP file, the
    Collector's archive directory, a URL; #RUN_ID picks one of several runs). Steps are
    aligned in order, so a step one run inserted or left out shows as added or removed and
    the rest still line up; the steps a tool (or side effect) made inside it follow it, and
    where only one run made any (the other served the tool from a recording, as a replay
    does) they are `inside`, not a difference. For each pair: same, or what changed, field by
    field as the replay report names it (model, parameters, messages, tools, tool arguments,
    HTTP method, path, query and body fields), then the response (status, error, complete,
    body). Nothing in the store is changed.

    Exit status: 0 the runs are identical; 1 they differ; 2 bad input (unknown run, no store,
    corrupt store).
    """
    with opened(run_a, store) as (a, info_a), opened(run_b, store) as (b, info_b):
        result = diff_runs(a, b)
    if as_json:
        document = {"a": run_json(info_a), "b": run_json(info_b), **result.to_json()}
        click.echo(json_text(document))
    else:
        console = stdout_console()
        for renderable in render(result, info_a, info_b):
            emit(console, safe_text(renderable) if isinstance(renderable, Text) else renderable)
    if not result.identical:
        ctx.exit(1)


def diff_text(run_a: str, run_b: str, store: str | None = None) -> tuple[bool, str]:
    """Whether runs ``run_a`` and ``run_b`` (any RUN ``diff`` takes) are identical, and what
    ``otel-replay diff RUN_A RUN_B`` prints about them, as plain text."""
    with opened(run_a, store) as (a, info_a), opened(run_b, store) as (b, info_b):
        result = diff_runs(a, b)
    console = Console(file=io.StringIO(), width=PIPE_WIDTH, color_system=None, highlight=False)
    with console.capture() as captured:
        for renderable in render(result, info_a, info_b):
            console.print(safe_text(renderable) if isinstance(renderable, Text) else renderable)
    lines = (line.rstrip() for line in captured.get().splitlines())
    return result.identical, "\n".join(lines)


def render(result: RunDiff, info_a: RunInfo, info_b: RunInfo) -> list[RenderableType]:
    """Everything ``otel-replay diff`` prints, in order: the two runs, the aligned steps,
    then the first divergence (or ``identical: N steps``) and the counts."""
    now = time.time_ns()
    out: list[RenderableType] = [
        Text("A: ").append_text(run_header(info_a, now)),
        Text("B: ").append_text(run_header(info_b, now)),
    ]
    out.extend(_forked(result))
    if result.pairs:
        out.append(_pairs_table(result.pairs))
    first = result.first_divergence
    if first is None:
        out.append(Text(f"identical: {plural(len(result.pairs), 'step')}", style="bold green"))
        return out
    out.extend(_first_divergence(first))
    counts = ", ".join(
        f"{n} {status}" for status, n in result.counts().items() if n or status != "inside"
    )
    out.append(Text(f"{plural(len(result.pairs), 'aligned step')}: {counts}"))
    return out


def _forked(result: RunDiff) -> list[RenderableType]:
    """What a fork (either side) changed, step by step: the differences that follow start
    there."""
    return [
        Text(
            printable(
                f"changed in {side}: step {recorded.step.index} ({_call(recorded)}): {change}"
            ),
            style="cyan",
        )
        for side, recorded, change in result.forked()
    ]


def _call(recorded: RecordedStep, other: RecordedStep | None = None) -> str:
    """``openai.chat_completions gpt-4o-mini``, ``GET /tools/orders/A-1234``,
    ``tool:lookup_order``; with ``other`` (B's step of the pair), each part that differs as
    ``A → B`` (the model is the one the step's span names: a side without one shows none)."""
    endpoint, model = (
        recorded.endpoint,
        recorded.step.model if recorded.step.kind == "llm" else None,
    )
    if other is not None:
        if other.endpoint != endpoint:
            endpoint = f"{endpoint} → {other.endpoint}"
        other_model = other.step.model if other.step.kind == "llm" else None
        if model and other_model and other_model != model:
            model = f"{model} → {other_model}"
    return f"{endpoint} {model}" if model else endpoint


def _result(pair: StepPair) -> Text:
    if pair.status == "same":
        return Text("same", style="green")
    if pair.status == "changed":
        return Text(f"changed: {', '.join(pair.fields())}", style="yellow")
    if pair.status == "inside":
        side, other = ("A", "B") if pair.a is not None else ("B", "A")
        return Text(
            f"inside step {pair.recorded.step.within} "
            f"(only in {side}: {other} did not run its body)",
            style="dim",
        )
    only = "A" if pair.status == "removed" else "B"
    return Text(f"{pair.status} (only in {only})", style="bold red")


def _pairs_table(pairs: tuple[StepPair, ...]) -> Table:
    pairs_table = table("a", "b", "kind", "call", "result")
    for column in (0, 1):
        pairs_table.columns[column].justify = "right"
    for pair in pairs:
        call = _call(pair.a, pair.b) if pair.a is not None else _call(pair.recorded)
        pairs_table.add_row(
            Text("-" if pair.a is None else str(pair.a.step.index)),
            Text("-" if pair.b is None else str(pair.b.step.index)),
            Text(pair.recorded.step.kind),
            Text(call),
            _result(pair),
        )
    return pairs_table


def _first_divergence(pair: StepPair) -> list[RenderableType]:
    recorded = pair.recorded
    where = f"({printable(_call(recorded))})"
    if pair.status == "removed":
        return [Text(f"first divergence: step {recorded.step.index} {where} of A is not in B")]
    if pair.status == "added":
        return [Text(f"first divergence: step {recorded.step.index} {where} of B is not in A")]
    assert pair.b is not None
    other = "" if pair.b.step.index == recorded.step.index else f", step {pair.b.step.index} of B"
    out: list[RenderableType] = [
        Text(
            f"first divergence: step {recorded.step.index} {where}{other}: "
            + printable(", ".join(pair.fields()))
        )
    ]
    for change in pair.changes[:_MAX_CHANGES]:
        out.extend(change_lines(change, ("A", "B")))
    if len(pair.changes) > _MAX_CHANGES:
        out.append(Text(f"  … {len(pair.changes) - _MAX_CHANGES} more differences (--json)"))
    return out
