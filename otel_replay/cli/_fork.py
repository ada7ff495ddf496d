"""The ``replay`` verb's fork flags gathered into one :class:`ForkPlan` argument, and the
lines that open the report of a fork."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click
from rich.text import Text

from otel_replay.cli._format import printable
from otel_replay.replay import ForkPlan, Run

__all__ = ["fork_lines", "fork_options"]

F = TypeVar("F", bound=Callable[..., Any])

_OPTIONS = (
    click.option(
        "--override",
        multiple=True,
        metavar="N=SPEC",
        help="Step N answers SPEC instead of what was recorded: @FILE, text:TEXT or inline "
        "JSON (a model step: a provider response body, served streamed or not as asked; a "
        "tool: its result; a value or checkpoint: the value; an HTTP step: the body, "
        "optionally after a status, 503:@body.json). Repeatable.",
    ),
    click.option(
        "--inject",
        multiple=True,
        metavar="N=FAULT",
        help="Step N fails with FAULT: http:STATUS[:BODY], timeout, disconnect, "
        "stream-cut:BYTES or tool:error[:MESSAGE]. The program's retry is served from the "
        "recording. Repeatable.",
    ),
    click.option(
        "--state",
        multiple=True,
        metavar="NAME=SPEC",
        help="checkpoint(NAME, ...) returns SPEC (@FILE, text:TEXT or inline JSON). Repeatable.",
    ),
    click.option(
        "--live-from",
        type=click.IntRange(min=0),
        default=None,
        metavar="N",
        help="Serve steps before N from the recording, then go live: model and HTTP calls, "
        "read tools and values.",
    ),
    click.option(
        "--allow-writes",
        is_flag=True,
        help="Let write tools run (a fork never runs one otherwise).",
    ),
)


def fork_options(command: F) -> F:
    """Add the fork flags to ``command``, which receives them as one ``fork`` argument
    (a :class:`ForkPlan`, not yet checked against the run; ConfigError on a bad flag)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        fork = ForkPlan.build(
            override=kwargs.pop("override"),
            inject=kwargs.pop("inject"),
            state=kwargs.pop("state"),
            live_from=kwargs.pop("live_from"),
            allow_writes=kwargs.pop("allow_writes"),
        )
        return command(*args, fork=fork, **kwargs)

    decorated: Callable[..., Any] = wrapper
    for option in reversed(_OPTIONS):
        decorated = option(decorated)
    return decorated  # type: ignore[return-value]


def fork_lines(fork: ForkPlan, run: Run) -> list[Text]:
    """The report's opening for a fork of ``run``: each change and its step (none for a
    plain replay)."""
    if fork.empty:
        return []
    lines = [Text(f"fork of run {printable(run.run_id)}:", style="bold cyan")]
    endpoints = {recorded.step.index: recorded.endpoint for recorded in run.steps}
    for step, what in fork.changes(run):
        where = "" if step is None else f"step {step} ({endpoints.get(step, '?')}): "
        lines.append(Text(printable(f"  {where}{what}"), style="cyan"))
    return lines
