"""The ``otel-replay`` program: the click group, its verbs, and the error boundary where
errors become one line and an exit status."""

from __future__ import annotations

import importlib
import os
import sqlite3
import sys
from collections.abc import Sequence
from typing import Any, NamedTuple

import click

from otel_replay import __version__
from otel_replay.cli._format import printable
from otel_replay.errors import OtelReplayError

__all__ = ["VERBS", "CliError", "Verb", "cli", "main"]


class Verb(NamedTuple):
    """Where a verb's click command lives, and its one line for ``otel-replay --help``. (A
    named tuple: a dataclass would cost ``--help`` the import of dataclasses.)"""

    module: str
    command: str
    summary: str


# A verb's module is imported only when that verb runs, so --version, --help and a verb's
# start-up pay only for what it uses; its one-line help is kept here, so --help imports none.
VERBS: dict[str, Verb] = {
    "diff": Verb(
        "_diff",
        "diff",
        "Compare two runs of the store step by step, and name their first divergence.",
    ),
    "export": Verb(
        "_export",
        "export",
        "Write RUN to DIR as a bundle: a directory to check in and review, which `replay` (and "
        "`@pytest.mark.otel_replay`) take as a source.",
    ),
    "gc": Verb("_gc", "gc", "Remove expired runs and unreferenced blobs."),
    "import": Verb("_import", "import_", "Load the runs of SOURCE into the store."),
    "migrate": Verb(
        "_migrate", "migrate", "Convert a version-2 or version-3 store to format version 4."
    ),
    "pin": Verb("_pin", "pin", "Keep RUN forever: gc never removes a pinned run."),
    "replay": Verb(
        "_replay",
        "replay",
        "Re-execute CMD against the recorded RUN and report where it diverges.",
    ),
    "report": Verb("_report", "report", "Write the step-through HTML report of RUN to FILE.html."),
    "runs": Verb("_runs", "runs", "List the recorded runs, newest first."),
    "show": Verb("_show", "show", "Show the steps of RUN in order."),
    "triage": Verb(
        "_triage", "triage", "Label how runs failed, and say which cannot be replayed exactly."
    ),
    "verify": Verb(
        "_verify",
        "verify",
        "Check the whole store: re-read every pack and record, re-hash every object and body, "
        "compare the index with the files.",
    ),
}
"""Every verb, by name; ``tests/cli/test_startup.py`` checks each summary against the
verb's own help."""


class CliError(click.ClickException):
    """A one-line error the user can act on; exit status 2 (bad input)."""

    exit_code = 2


# Click 8.2+ raises this when a group runs without arguments; it prints the help.
_NO_ARGS_IS_HELP = tuple(
    kind for kind in (getattr(click.exceptions, "NoArgsIsHelpError", None),) if kind is not None
)

_MEANT = {
    "--fault": "--inject",
    "--faults": "--inject",
    "--fail": "--inject",
    "--error": "--inject",
    "--replace": "--override",
    "--answer": "--override",
    "--set": "--state",
    "--set-state": "--state",
    "--live": "--live-from",
    "--writes": "--allow-writes",
}
"""The option a user reaching for another word means (time travel's words in other tools),
suggested in place of click's nearest spelling (``--fault``: ``--all``)."""


def _usage_message(exc: click.UsageError) -> str:
    """Click's message, an unknown option pointed at the one :data:`_MEANT` says it means
    when the command has it."""
    if isinstance(exc, click.NoSuchOption) and exc.ctx is not None:
        meant = _MEANT.get(exc.option_name)
        if meant and any(meant in p.opts for p in exc.ctx.command.params):
            return f"{exc.message} Did you mean {meant!r}?"
    return exc.format_message()


EXPECTED: tuple[type[BaseException], ...] = (OtelReplayError, OSError, sqlite3.Error)
"""Errors that mean bad input or a bad environment, not a bug: exit 2 with their message."""


def one_line(error: BaseException | str) -> str:
    """The message of ``error`` on one line, escaped for the terminal (an exception's type
    name when it has no message)."""
    text = printable(" ".join(str(error).split()))
    return text or type(error).__name__


class InternalError(click.ClickException):
    """A bug: an exception no part of otel-replay meant to raise."""

    exit_code = 70  # EX_SOFTWARE (sysexits.h): distinct from every outcome a verb reports


def write_traceback(exc: BaseException) -> str | None:
    """Write ``exc``'s traceback (with the version and command line) to a new file in the
    temporary directory, for a bug report; its path, None when it cannot be written."""
    import tempfile  # noqa: PLC0415 - loaded for a bug only: --help starts without them
    import traceback  # noqa: PLC0415

    try:
        fd, path = tempfile.mkstemp(prefix="otel-replay-traceback-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as out:
            out.write(f"otel-replay {__version__}: {' '.join(sys.argv)}\n\n")
            traceback.print_exception(exc, file=out)
    except OSError:
        return None
    return path


class _Boundary(click.Group):
    """Runs a verb and turns what it raises into a one-line error and an exit status.

    The verbs of ``VERBS`` are loaded when asked for (a command given to ``add_command`` is
    listed and run too).
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*VERBS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        verb = VERBS.get(cmd_name)
        if verb is None:
            return super().get_command(ctx, cmd_name)
        module = importlib.import_module(f"otel_replay.cli.{verb.module}")
        command: click.Command = getattr(module, verb.command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The verbs and their summaries, cut as click cuts them, without importing a verb."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            verb = VERBS.get(name)
            command = (
                self.commands[name] if verb is None else click.Command(name, help=verb.summary)
            )
            rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def main(  # type: ignore[override]
        self, args: Sequence[str] | None = None, standalone_mode: bool = True, **extra: Any
    ) -> Any:
        """Click's entry point, with a usage error printed on one line naming the help to
        read, instead of the usage block, a hint and the error."""
        if not standalone_mode:
            return super().main(args, standalone_mode=False, **extra)
        try:
            status = super().main(args, standalone_mode=False, **extra)
        except click.UsageError as exc:
            if isinstance(exc, _NO_ARGS_IS_HELP) or exc.ctx is None:
                exc.show()  # the help itself, asked for by running a group bare
            else:
                message = one_line(_usage_message(exc))
                click.echo(f"Error: {message} (see '{exc.ctx.command_path} --help')", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        # Without standalone mode click returns the status of --help, --version and ctx.exit.
        sys.exit(status if isinstance(status, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort, BrokenPipeError):
            raise  # click prints these itself (and quietly handles a closed pipe)
        except EXPECTED as exc:
            raise CliError(one_line(exc)) from None
        except Exception as exc:
            if ctx.meta.get("otel_replay.traceback"):
                raise
            where = write_traceback(exc)
            hint = (
                "rerun with --traceback to see where"
                if where is None
                else f"traceback written to {printable(where)}"
            )
            raise InternalError(
                f"internal error: {type(exc).__name__}: {one_line(exc)} (a bug in otel-replay; "
                f"{hint})"
            ) from None


def _keep_traceback(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    ctx.meta["otel_replay.traceback"] = value
    return value


@click.group(cls=_Boundary, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="otel-replay")
@click.option(
    "--traceback",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_keep_traceback,
    help="Show the full traceback of an unexpected error (for bug reports).",
)
def cli() -> None:
    """Record LLM agents through OpenTelemetry and replay them deterministically.

    Recording: OTEL_TRACES_EXPORTER=otlp,replay opentelemetry-instrument python agent.py
    fills the store (OTEL_REPLAY_STORE, default ./.otel-replay). These commands read and
    look after it. Every command takes --store.
    """


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="otel-replay")
