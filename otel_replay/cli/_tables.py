"""Rich tables and summary lines for the verbs. Every cell is a ``Text``, never markup, so
recorded content (``[bold]`` in a prompt) prints as it is."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from rich import box
from rich.table import Table
from rich.text import Text

from otel_replay.cli._format import (
    ago,
    human_bytes,
    local_time,
    ms,
    one_line,
    plural,
    printable,
    when,
)
from otel_replay.step import ENVELOPE_KINDS, describe_effect
from otel_replay.store import FailureLabel, Retention, RunInfo

if TYPE_CHECKING:  # the steps' views (and the codecs behind them) load only where used
    from otel_replay.cli._steps import StepView

__all__ = [
    "NESTED_NOTE",
    "PROMPT_WIDTH",
    "RESPONSE_WIDTH",
    "SEVERITY_STYLE",
    "gc_table",
    "has_nested",
    "label_text",
    "run_header",
    "runs_table",
    "safe_text",
    "semantic_note",
    "steps_table",
    "table",
]

PROMPT_WIDTH = 48
RESPONSE_WIDTH = 64
SEVERITY_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow"}


class _Table(Table):
    """A table whose cells never carry a control character to the terminal: whatever a
    cell holds from the recording (a model name, a tool's name, an error type, a prompt)
    is written as escapes when it would drive the terminal or break the line."""

    def add_row(self, *renderables: Any, **options: Any) -> None:
        super().add_row(
            *(safe_text(cell) if isinstance(cell, Text) else cell for cell in renderables),
            **options,
        )


def safe_text(text: Text) -> Text:
    """``text``, or when it holds anything :func:`printable` escapes, its escaped copy (in
    its overall style: the escapes move the offsets its inner styles were set at)."""
    plain = text.plain
    shown = printable(plain)
    if shown == plain:
        return text
    return Text(shown, style=text.style, no_wrap=text.no_wrap, overflow=text.overflow)


def table(*headers: str) -> Table:
    """A table of ``headers`` in the verbs' style, its cells kept printable (:class:`_Table`)."""
    table = _Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for header in headers:
        # A Text, not a str: rich reads a str for markup and emoji codes, and loading its
        # emoji table alone would add 2% to the start-up of show and runs.
        table.add_column(Text(header))
    return table


def _status(run: RunInfo) -> Text:
    """``ok``, ``incomplete``, or ``error (RuntimeError)``: the exception that ended it."""
    styles = {"ok": "green", "incomplete": "yellow"}
    text = Text(run.status, style=styles.get(run.status, "bold red"))
    if run.error_type is not None:
        text.append(f" ({printable(run.error_type)})", style="bold red")
    if run.pinned:
        text.append(", pinned", style="cyan")
    return text


def _steps(run: RunInfo) -> Text:
    """The run's step count, and how many of them failed (a failed step the application
    recovered from leaves the run ``ok``)."""
    text = Text(str(run.step_count))
    if run.error_steps:
        text.append(f" ({run.error_steps} failed)", style="yellow")
    return text


def _tokens(tokens_in: int | None, tokens_out: int | None) -> str:
    if tokens_in is None and tokens_out is None:
        return ""
    return f"{tokens_in or 0:,} / {tokens_out or 0:,}"


def _mode(run: RunInfo) -> Text:
    """``record``, or ``replay of <parent>`` / ``fork of <parent>``."""
    mode = run.mode or "record"
    if mode == "record":
        return Text(mode)
    parent = printable(run.parent_run_id) if run.parent_run_id else "?"
    return Text(f"{mode} of {parent}", style="cyan")


def runs_table(runs: list[RunInfo], now_ns: int) -> Table:
    """One row per run, in the order given: id, when, status, mode (and the run a replay or
    fork re-executed), steps, models, tokens, bytes."""
    rows = table("run", "when", "status", "mode", "steps", "models", "tokens in/out", "bytes")
    for column in (4, 6, 7):
        rows.columns[column].justify = "right"
    for column in (0, 1, 2):
        rows.columns[column].no_wrap = True
    depths: dict[str, int] = {}
    for run in runs:
        # A fork listed under its parent (``forks_under_parents``) is drawn as its branch, a
        # fork of a fork one step further in.
        parent = run.parent_run_id if run.mode == "fork" else None
        depth = depths[parent] + 1 if parent in depths else 0
        depths[run.run_id] = depth
        branch = "  " * (depth - 1) + "└ " if depth else ""
        rows.add_row(
            Text(branch, style="dim").append(printable(run.run_id), style="bold"),
            Text(when(run.start_ns, now_ns)),
            _status(run),
            _mode(run),
            _steps(run),
            Text(", ".join(run.models) or "-"),
            Text(_tokens(run.tokens_in, run.tokens_out)),
            Text(human_bytes(run.bytes)),
        )
    return rows


def run_header(run: RunInfo, now_ns: int) -> Text:
    """One line about a run above its steps."""
    text = Text("run ", style="bold")
    text.append(printable(run.run_id), style="bold")
    text.append("  ")
    text.append_text(_status(run))
    text.append("  ")
    text.append_text(_mode(run))
    failed = f" ({run.error_steps} failed)" if run.error_steps else ""
    tokens = _tokens(run.tokens_in, run.tokens_out)
    facts = [
        when(run.start_ns, now_ns),
        plural(run.step_count, "step") + failed,
        f"{ms(run.end_ns - run.start_ns)} ms",
        *([f"tokens {tokens}"] if tokens else []),
        human_bytes(run.bytes),
    ]
    if run.commit:
        facts.append(f"commit {run.commit[:12]}")
    if run.seed is not None:
        facts.append(f"seed {run.seed}")
    text.append("  " + " · ".join(facts), style="dim")
    return safe_text(text)


_MAX_LISTED = 20


def semantic_note(indexes: list[int]) -> str:
    """Said under a steps table whose steps ``indexes`` have no recorded bytes."""
    listed = ", ".join(map(str, indexes[:_MAX_LISTED]))
    more = f" and {len(indexes) - _MAX_LISTED} more" if len(indexes) > _MAX_LISTED else ""
    steps = f"step {listed} is" if len(indexes) == 1 else f"steps {listed}{more} are"
    return (
        f"{steps} semantic: known from their spans only (no recorded bytes); a replay "
        "answers them from their GenAI attributes"
    )


NESTED_NOTE = (
    "└ in N: made inside step N, by its body; a replay gives step N's recorded answer and "
    "does not make it again"
)
"""Said under a steps table that has a step made inside another."""


def has_nested(views: list[StepView]) -> bool:
    """Whether a step of ``views`` is marked as made inside another (:data:`NESTED_NOTE`)."""
    return any(_depths(views).values())


def _depths(views: list[StepView]) -> dict[int, int]:
    """How deep each step is nested (0: an outer step), following ``within`` while it names a
    step of the run (a chain that goes round counts as outer)."""
    within = {view.step.index: view.within for view in views}
    depths: dict[int, int] = {}
    for index, first in within.items():
        depth, parent, seen = 0, first, {index}
        while parent is not None and parent in within and parent not in seen:
            seen.add(parent)
            depth, parent = depth + 1, within[parent]
        depths[index] = depth if parent is None else 0
    return depths


def _kind(view: StepView, depth: int) -> Text:
    """``tool``, or for a step made inside another, ``└ tool in 1`` indented by its depth."""
    kind = view.step.kind
    style = "magenta" if kind == "llm" else "blue"
    if not depth:
        return Text(kind, style=style)
    text = Text("  " * (depth - 1) + "└ ", style="dim")
    text.append(kind, style=style)
    text.append(f" in {view.within}", style="dim")
    return text


def _call(view: StepView) -> Text:
    if view.step.kind == "llm":
        return Text(view.step.model or view.step.provider or "?")
    if view.step.kind in ENVELOPE_KINDS:  # tool:refund -> refund (write: declared nowhere)
        name = (view.url or "").partition(":")[2] or "?"
        if view.effect and view.effect_reason:
            return Text(f"{name} ({describe_effect(view.effect, view.effect_reason)})")
        return Text(name)
    url = view.url or ""
    parts = urlsplit(url)
    shown = f"{parts.netloc}{parts.path}" + (f"?{parts.query}" if parts.query else "")
    return Text(f"{view.method or '?'} {shown or url}")


def _step_status(view: StepView) -> Text:
    step = view.step
    if step.kind in ENVELOPE_KINDS:  # no HTTP status: it returned, or it raised
        return Text(step.error_type, style="bold red") if step.error_type else Text("ok")
    text = Text(str(step.status_code) if step.status_code is not None else "no response")
    if step.error_type is not None and step.error_type != str(step.status_code):
        text.append(f" {step.error_type}")
    if step.error_type is not None or (step.status_code or 0) >= 400:
        text.stylize("bold red")
    # An error status is complete in itself; a cut-short answer (a stream that broke, a
    # response the application abandoned) says so.
    if not step.complete and step.status_code is not None and step.status_code < 400:
        text.append(" incomplete", style="yellow")
    return text


def _prompt(view: StepView) -> str:
    if view.step.kind == "llm":
        # Loaded here: the runs table reads no message.
        from otel_replay.cli._messages import prompt_preview  # noqa: PLC0415

        return prompt_preview(view.input_messages, PROMPT_WIDTH)
    return one_line(view.prompt, PROMPT_WIDTH)


def _cut(text: Text) -> Text:
    text.no_wrap = True
    text.overflow = "ellipsis"
    return text


def steps_table(views: list[StepView], labels: Sequence[FailureLabel] = ()) -> Table:
    """One row per step: index, kind, model or URL, prompt and response previews, timing,
    tokens and status; with ``labels`` (of ``otel-replay triage``), each step's labels."""
    rows = table("#", "kind", "call", "prompt", "response", "ms", "ttfc", "tokens", "status")
    for column in (0, 5, 6, 7):
        rows.columns[column].justify = "right"
    # Fixed columns never shrink; when the table is too wide, the call, prompt and response
    # columns give way, each cell staying on one line, cut with an ellipsis.
    for column in (0, 1, 5, 6, 7, 8):
        rows.columns[column].no_wrap = True
    forked = any(view.forked is not None for view in views)
    if forked:  # a fork: served from the recording, changed, or live
        rows.add_column("fork", no_wrap=True)
    by_step: dict[int, list[FailureLabel]] = {}
    for label in labels:
        if label.step is not None:
            by_step.setdefault(label.step, []).append(label)
    if by_step:
        rows.add_column("label", no_wrap=True)
    depths = _depths(views)
    for view in views:
        step = view.step
        fork = [] if not forked else [_fork_cell(view.forked)]
        if by_step:
            fork.append(Text(", ").join(label_text(x) for x in by_step.get(step.index, ())))
        rows.add_row(
            Text(str(step.index)),
            _kind(view, depths.get(step.index, 0)),
            _cut(_call(view)),
            _cut(Text(_prompt(view))),
            _cut(Text(one_line(view.response, RESPONSE_WIDTH))),
            Text(ms(step.end_ns - step.start_ns)),
            Text(ms(view.first_chunk_ns) if view.stream else ""),
            Text(_tokens(step.tokens_in, step.tokens_out).replace(" / ", "/")),
            _step_status(view),
            *fork,
        )
    return rows


def label_text(label: FailureLabel) -> Text:
    """``environment_drift warning``: a failure label's category and severity (styled)."""
    text = Text(printable(label.category))
    return text.append(
        f" {printable(label.severity)}", style=SEVERITY_STYLE.get(label.severity, "")
    )


def _fork_cell(forked: str | None) -> Text:
    if forked in (None, "served"):
        return Text("served", style="dim")
    return Text(printable(forked), style="green" if forked == "live" else "cyan")


def gc_table(runs: list[RunInfo], retention: Retention, now_ns: int) -> Table:
    """The runs gc removes (or would), with why: status, last activity, retention."""
    rows = table("run", "status", "last activity", "kept for", "steps", "bytes")
    for column in (4, 5):
        rows.columns[column].justify = "right"
    for run in runs:
        last = run.end_ns or run.start_ns
        days = retention.ok_days if run.status == "ok" else retention.error_days
        rows.add_row(
            Text(printable(run.run_id), style="bold"),
            _status(run),
            Text(f"{local_time(last)} ({ago(last, now_ns)})"),
            Text(f"{days:g} day{'s' if days != 1 else ''}"),
            Text(str(run.step_count)),
            Text(human_bytes(run.bytes)),
        )
    return rows
