"""The text of a replay's outcome: verdict, first divergence, steps, refusals, isolation and
summary. No list is cut silently."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.cells import cell_len
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from otel_replay.cli._fork import fork_lines
from otel_replay.cli._format import printable
from otel_replay.cli._tables import safe_text, table
from otel_replay.replay import (
    Change,
    ForkPlan,
    Isolation,
    ReplayResult,
    ServedStep,
    category,
    excerpts,
)
from otel_replay.step import describe_effect

__all__ = ["change_lines", "isolation_lines", "render", "verdict"]

_MAX_CHANGES = 12
_MAX_LISTED = 20
_MAX_NAMED = 10


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{key} {n}" for key, n in sorted(counter.items())) or "none"


def verdict(result: ReplayResult) -> Text:
    """The first line of the report: which run was replayed and the outcome."""
    run = result.run
    head = Text(f"replay of run {printable(run.run_id)} ({printable(run.source)}): ")
    first = result.first_divergence
    if result.outcome == "identical":
        head.append("identical", style="bold green")
    elif result.failed_before_any_request:
        head.append("the agent failed before its first request", style="bold red")
        head.append(f" — it {result.agent.describe()}")
    elif result.outcome == "agent_failed":
        head.append("identical steps, but the agent failed", style="bold red")
        head.append(f" — it {result.agent.describe()}")
    elif first is None:
        head.append("network attempts refused", style="bold red")
    else:
        head.append("diverged", style="bold red")
        head.append(printable(f" — {first.describe()}"))
    return head


def _first_divergence(result: ReplayResult) -> list[RenderableType]:
    first = result.first_divergence
    if first is None:
        return []
    out: list[RenderableType] = []
    served = first.served
    if first.kind == "changed" and served is not None:
        live = ", ran live" if served.live else ", refused" if served.refused else ""
        title = Text(
            printable(
                f"first divergence: step {first.step} ({served.endpoint}), "
                f"request {served.order}, matched by {served.how}{live}"
            )
        )
        out.append(title)
        labels = ("recorded", "live    ") if served.live else ("recorded", "replayed")
        for change in first.changes[:_MAX_CHANGES]:
            out.extend(change_lines(change, labels))
        if len(first.changes) > _MAX_CHANGES:
            out.append(Text(f"  … {len(first.changes) - _MAX_CHANGES} more differences"))
        if served.repeat:
            out.append(Text(f"  the recorded step was requested again ({served.repeated})"))
    elif first.kind == "extra" and served is not None:
        out.append(
            Text(
                printable(
                    f"first divergence: request {served.order} {served.method} {served.url} "
                    f"({served.endpoint}) has no recorded step"
                )
            )
        )
    return out


def change_lines(change: Change, labels: tuple[str, str] = ("recorded", "replayed")) -> list[Text]:
    """A short change on one line (``field: old → new``); a long or multi-line value as the
    window around its change on each side, one above the other so they line up, labelled
    ``labels`` (of one length), the changed span highlighted and a caret under where it
    starts (for a terminal without colour)."""
    windows = None
    if change.kind == "changed" and not change.short:
        windows = excerpts(change.recorded or "", change.replayed or "")
    if windows is None:
        return [Text("  " + printable(change.describe()))]
    recorded, replayed = windows
    out = [Text(f"  {printable(change.field)}: {change.where()}")]
    before = printable(recorded.before)
    for label, side, style in (
        (labels[0], recorded, "bold red"),
        (labels[1], replayed, "bold green"),
    ):
        line = Text(f"    {label}: {before}")
        line.append(printable(side.changed), style=style)
        line.append(printable(side.after))
        out.append(line)
    # Under the first character that differs (the highlight starts at its word).
    margin = f"    {labels[0]}: {before}{printable(recorded.same)}"
    out.append(Text(" " * cell_len(margin) + "^"))
    return out


def _steps_table(steps: list[ServedStep]) -> Table:
    steps_table = table("request", "step", "endpoint", "matched", "fidelity", "result")
    # A tool's effect, and why (it decides whether a tool may run live), when there is one.
    effects = any(step.effect is not None for step in steps)
    if effects:
        steps_table.add_column("effect")
    forked = any(step.forked is not None for step in steps)
    if forked:  # a fork: what it served instead of the recorded answer
        steps_table.add_column("changed")
    for step in steps:
        # A matched call that ran live (--live-tools read) says so before how it compared.
        ran = "live, " if step.live else "refused, " if step.refused else ""
        if step.recorded is None:
            outcome = Text("live" if step.live else "no match", style="bold red")
        elif step.changes:
            fields = ", ".join(dict.fromkeys(category(c.field) for c in step.changes))
            outcome = Text(f"{ran}differs: {fields}", style="yellow")
        elif step.repeat:
            outcome = Text(f"{ran}repeated", style="yellow")
        else:
            outcome = Text(f"{ran}identical", style="green")
        row = [
            Text(str(step.order)),
            Text("-" if step.recorded is None else str(step.recorded)),
            Text(step.endpoint),
            Text(step.how),
            Text(step.fidelity or "-"),
            outcome,
        ]
        if effects:
            effect, reason = step.effect, step.effect_reason
            row.append(Text(describe_effect(effect, reason) if effect and reason else ""))
        if forked:
            row.append(Text(step.forked or "", style="cyan"))
        steps_table.add_row(*row)
    return steps_table


def _named(items: Sequence[str]) -> str:
    """Up to ten items on one line, then how many more."""
    listed = ", ".join(items[:_MAX_NAMED])
    more = len(items) - _MAX_NAMED
    return f"{listed} and {more} more" if more > 0 else listed


def _each(prefix: str, items: Sequence[str], style: str, noun: str) -> list[RenderableType]:
    """One line per distinct item (first-seen order, with its count when repeated), at most
    twenty, then one line counting the rest."""
    counts = Counter(items)
    distinct = list(counts)
    out: list[RenderableType] = []
    for item in distinct[:_MAX_LISTED]:
        times = f" ({counts[item]} times)" if counts[item] > 1 else ""
        out.append(Text(f"{prefix}: {item}{times}", style=style))
    rest = distinct[_MAX_LISTED:]
    if rest:
        total = sum(counts[item] for item in rest)
        out.append(
            Text(
                f"… {total} more {noun} not shown ({len(rest)} distinct); --json lists all",
                style=style,
            )
        )
    return out


def isolation_lines(isolation: Isolation | None, subprocesses: int) -> list[RenderableType]:
    """How the program was kept from the network (``subprocesses``: how many it started)."""
    if isolation is None:
        return []
    if isolation.reason is not None and isolation.reason.startswith("--no-strict"):
        return [Text(f"not isolated ({isolation.reason})")]
    if isolation.reason is not None and isolation.reason.startswith("--live-from"):
        return [Text(f"not isolated ({isolation.reason}); before then in-process guards applied")]
    if not isolation.isolated:
        if isolation.seccomp:
            return [
                Text(
                    f"not isolated ({isolation.reason}): a seccomp filter refused every "
                    "connection, loopback included, but to the replay's own unix sockets"
                )
            ]
        text = f"not isolated ({isolation.reason}): only in-process guards applied"
        if subprocesses:
            text += f"; the {subprocesses} subprocess(es) listed could have reached the network"
        return [Text(text, style="bold yellow")]
    how = isolation.how or "network namespace"
    loopback = "its own loopback only" if isolation.loopback else "no interface up"
    out: list[RenderableType] = [
        Text(
            f"isolated: the program and every process it started ran in "
            f"{'a ' if how.endswith('namespace') else ''}{how} of their own ({loopback}): "
            "the network was out of reach",
            style="green",
        )
    ]
    if isolation.seccomp:
        out.append(
            Text(
                "filtered: a seccomp filter refused, in every process, the unix sockets the "
                "replay did not make itself",
                style="green",
            )
        )
    else:
        out.append(
            Text(
                f"not filtered ({isolation.seccomp_reason}): the program could reach the host's "
                "unix sockets (Docker, ssh-agent, databases)",
                style="bold yellow",
            )
        )
    if not isolation.private_proc:
        out.append(
            Text(
                "no PID namespace: its /proc showed the host's processes, and under "
                "/proc/PID/net their sockets",
                style="yellow",
            )
        )
    return out


def _attempts(refused: int, live: int, why: str) -> str:
    """The summary's count: refused ones (strict), or those let through (``why``)."""
    return f"{live} (let through: {why})" if live and not refused else str(refused)


def _live_point(result: ReplayResult) -> list[RenderableType]:
    """Where a fork with a live point went live, and how many calls were sent."""
    if result.live_from is None:
        return []
    went = result.went_live
    if went is None:
        return [Text(f"never went live: no call reached step {result.live_from}", style="yellow")]
    live = sum(1 for s in result.steps if s.live)
    line = f"{went.describe(result.live_from)}: {live} call(s) sent live"
    return [Text(printable(line), style="cyan")]


def render(
    result: ReplayResult, *, kept: str, fork: ForkPlan | None = None
) -> list[RenderableType]:
    """Everything ``otel-replay replay`` prints, in order (``kept``: where the re-execution
    was recorded, as the summary ends; ``fork``: what a fork changed, said first)."""
    out: list[RenderableType] = [*fork_lines(fork or ForkPlan(), result.run), verdict(result)]
    if not result.hooked:
        out.append(
            Text(
                "no process of the program loaded otel-replay's replay, so nothing it sent was "
                "seen: does the command run the Python that otel-replay is installed in?",
                style="bold red",
            )
        )
    out.extend(_live_point(result))
    out.extend(_first_divergence(result))
    steps = result.steps
    if steps:
        out.append(_steps_table(steps))
    unused = [] if result.failed_before_any_request else result.unused  # all of them
    if unused:
        listed = _named([f"{s.step.index} ({s.endpoint})" for s in unused])
        out.append(Text(f"recorded steps never requested: {listed}"))
    for fault in result.faults:  # the fork's own, a few: each said whole
        out.append(Text(printable(fault.describe()), style="cyan"))
    extra = result.extra
    if extra:
        listed = _named([f"{s.order} ({s.method} {s.url})" for s in extra])
        out.append(Text(f"requests with no recorded step: {listed}"))
    attempts = result.network_attempts
    out.extend(_each("refused network access", attempts, "red", "refused attempts"))
    live = result.live_network
    why = "--no-strict" if result.live_from is None else "live"
    out.extend(_each(f"network access let through ({why})", live, "yellow", "attempts"))
    if result.ignored:
        calls = [f"{c} ({n} times)" if n > 1 else c for c, n in result.ignored.items()]
        listed = printable(_named(calls))
        out.append(Text(f"ignored background calls (OTEL_REPLAY_IGNORE): {listed}"))
    isolation = result.isolation
    subprocesses = result.subprocesses
    if isolation is not None and isolation.isolated:
        label = "subprocess (no network: isolated)"
    elif isolation is not None and isolation.seccomp:
        label = "subprocess (no network: filtered)"
    else:
        label = "subprocess (possible escape)"
    contained = label != "subprocess (possible escape)"
    out.extend(_each(label, subprocesses, "" if contained else "yellow", "subprocesses"))
    out.extend(isolation_lines(isolation, len(subprocesses)))
    # A call that ran live was matched to a recorded step but not answered from it.
    served = sum(1 for s in steps if s.recorded is not None and not s.live and not s.refused)
    summary = Text(
        f"{len(steps)} requests, {served} served from {len(result.run.steps)} recorded steps; "
        f"matched: {_counts(result.matched())}; fidelity: {_counts(result.fidelity())}; "
        f"{result.elapsed_s:.3f} s; network attempts: {_attempts(len(attempts), len(live), why)}; "
        f"subprocesses: {len(subprocesses)}; {kept}",
        no_wrap=True,  # one line, whatever its length: a script reads the run id off it
    )
    out.append(summary)
    agent = result.agent
    out.append(Text(f"the agent {agent.describe()}", style="bold red" if agent.failed else ""))
    return [safe_text(block) if isinstance(block, Text) else block for block in out]
