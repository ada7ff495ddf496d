"""``otel-replay report RUN -o FILE.html``: the step-through HTML report of a run, or of two
runs aligned (``--diff``); ``replay --report`` writes one too."""

from __future__ import annotations

import os
from pathlib import Path

import click

from otel_replay import settings
from otel_replay.cli._common import CliError, is_source, open_store, resolve_run, store_option
from otel_replay.cli._format import plural, printable
from otel_replay.replay import Run
from otel_replay.replay.sources import is_url, load_run, stored_run

__all__ = ["check_writable", "loaded", "report", "write_report"]


@click.command()
@click.argument("run")
@click.option(
    "-o",
    "--output",
    "output",
    metavar="FILE.html",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="Where to write the report (replaced if it exists).",
)
@click.option(
    "--diff",
    "other",
    metavar="OTHER",
    default=None,
    help="Align RUN (A) with OTHER (B) as `otel-replay diff` does, and open the report at "
    "their first divergence.",
)
@click.option(
    "--no-content",
    is_flag=True,
    help="Metadata only: no body, message, header or changed value goes into the file.",
)
@store_option
def report(run: str, output: Path, other: str | None, no_content: bool, store: str | None) -> None:
    """Write the step-through HTML report of RUN to FILE.html.

    RUN (and OTHER) is any source `replay` takes: a run id in the store (a unique prefix, or
    `latest`: the newest recording), an OTLP file or the Collector's archive directory, a
    bundle directory, a URL answering OTLP JSON, or phoenix://, jaeger://, tempo://. The file is
    self-contained (no network, inline CSS and script): it opens from disk or from a CI
    artifact. Its timeline lists every step (model calls, tools, HTTP calls, values,
    checkpoints; fork changes marked; steps made inside a tool indented under it) with
    duration, tokens, status and fidelity (exact bytes, or semantic: rebuilt from the span);
    the pane shows the selected step: the prompt as messages, the response, tool calls and
    results, HTTP bodies, errors. Keys: j/k or the arrows move, / filters.

    Content is as the store keeps it (redacted at capture). Exit status: 0 written; 2 bad
    input (unknown run, unreadable source, unwritable FILE).
    """
    check_writable(output)
    where = store if store is not None else settings.read("OTEL_REPLAY_STORE")
    a = loaded(run, where)
    b = None if other is None else loaded(other, where)
    from otel_replay.report import render  # noqa: PLC0415 - Jinja2, for a report only

    write_report(output, render(a, other=b, content=not no_content))
    what = f"run {a.run_id}" if b is None else f"run {a.run_id} against run {b.run_id}"
    click.echo(
        f"wrote the report of {printable(what)} ({plural(len(a.steps), 'step')}) to "
        f"{printable(str(output))}"
    )


def loaded(ref: str, store: str) -> Run:
    """The run ``ref`` names (a prefix or ``latest`` resolved in ``store``), with payloads: a
    run of the store with no step (it failed before its first call) too."""
    if is_url(ref) or is_source(ref):
        return load_run(ref, store=store)
    with open_store(store) as opened:
        return stored_run(opened, resolve_run(opened, ref), empty=True).run


def check_writable(path: Path) -> None:
    """CliError unless a file can be written at ``path``: checked before any work is done."""
    parent = path.parent
    if not parent.is_dir():
        raise CliError(
            f"cannot write the report to {printable(str(path))}: no directory "
            f"{printable(str(parent))}"
        )
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise CliError(f"cannot write the report to {printable(str(path))}: permission denied")


def write_report(path: Path, html: str) -> None:
    """Write ``html`` to ``path``; CliError naming the path when it cannot be written."""
    try:
        path.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise CliError(
            f"cannot write the report to {printable(str(path))}: {exc.strerror or exc}"
        ) from None
