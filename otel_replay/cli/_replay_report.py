"""The text of a replay's outcome: verdict, the first divergence field by field, the steps, and
the summary line. Recorded content is printed as ``Text``, never as markup."""

from __future__ import annotations

from collections import Counter

from rich import box
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from otel_replay.replay._diff import category
from otel_replay.replay._result import ReplayResult, ServedStep

__all__ = ["render"]

_MAX_CHANGES = 12


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{key} {n}" for key, n in sorted(counter.items())) or "none"


def _verdict(result: ReplayResult) -> Text:
    run = result.run
    head = Text(f"replay of run {run.run_id} ({run.source}): ")
    first = result.first_divergence
    if result.identical:
        head.append("identical", style="bold green")
    elif first is None:
        head.append("network attempts refused", style="bold red")
    else:
        head.append("diverged", style="bold red")
        head.append(f" — {first.describe()}")
    return head


def _first_divergence(result: ReplayResult) -> list[RenderableType]:
    first = result.first_divergence
    if first is None:
        return []
    out: list[RenderableType] = []
    served = first.served
    if first.kind == "changed" and served is not None:
        title = Text(
            f"first divergence: step {first.step} ({served.endpoint}), request {served.order}, "
            f"matched by {served.how}"
        )
        out.append(title)
        for change in first.changes[:_MAX_CHANGES]:
            out.append(Text("  " + change.describe()))
        if len(first.changes) > _MAX_CHANGES:
            out.append(Text(f"  … {len(first.changes) - _MAX_CHANGES} more differences"))
        if served.repeat:
            out.append(Text("  the recorded step was requested again (it was already served)"))
    elif first.kind == "extra" and served is not None:
        out.append(
            Text(
                f"first divergence: request {served.order} {served.method} {served.url} "
                f"({served.endpoint}) has no recorded step"
            )
        )
    return out


def _steps_table(steps: list[ServedStep]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for header in ("request", "step", "endpoint", "matched", "fidelity", "result"):
        table.add_column(header)
    for step in steps:
        if step.recorded is None:
            outcome = Text("live" if step.live else "no match", style="bold red")
        elif step.changes:
            fields = ", ".join(dict.fromkeys(category(c.field) for c in step.changes))
            outcome = Text(f"differs: {fields}", style="yellow")
        elif step.repeat:
            outcome = Text("repeated", style="yellow")
        else:
            outcome = Text("identical", style="green")
        table.add_row(
            Text(str(step.order)),
            Text("-" if step.recorded is None else str(step.recorded)),
            Text(step.endpoint),
            Text(step.how),
            Text(step.fidelity or "-"),
            outcome,
        )
    return table


def render(
    result: ReplayResult, *, agent_exit_code: int, replay_run_id: str
) -> list[RenderableType]:
    """Everything ``otel-replay replay`` prints, in order."""
    out: list[RenderableType] = [_verdict(result)]
    out.extend(_first_divergence(result))
    steps = result.steps
    if steps:
        out.append(_steps_table(steps))
    unused = result.unused
    if unused:
        listed = ", ".join(f"{s.index} ({s.endpoint})" for s in unused[:10])
        more = f" and {len(unused) - 10} more" if len(unused) > 10 else ""
        out.append(Text(f"recorded steps never requested: {listed}{more}"))
    extra = result.extra
    if extra:
        listed = ", ".join(f"{s.order} ({s.method} {s.url})" for s in extra[:10])
        out.append(Text(f"requests with no recorded step: {listed}"))
    for address in result.network_attempts[:10]:
        out.append(Text(f"refused network access: {address}", style="red"))
    served = sum(1 for s in steps if s.recorded is not None)
    summary = Text(
        f"{len(steps)} requests, {served} served from {len(result.run.steps)} recorded steps; "
        f"matched: {_counts(result.matched())}; fidelity: {_counts(result.fidelity())}; "
        f"{result.elapsed_s:.3f} s; network attempts: {len(result.network_attempts)}; "
        f"recorded as run {replay_run_id}"
    )
    out.append(summary)
    if agent_exit_code != 0:
        out.append(Text(f"the agent exited with status {agent_exit_code}", style="bold red"))
    return out
