"""What every verb shares: the ``--store`` option, opening the store, finding a run, the
consoles and the progress bar."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from otel_replay import settings
from otel_replay._printable import clipped
from otel_replay.cli._format import printable
from otel_replay.cli.main import CliError
from otel_replay.errors import OtelReplayError, RunNotFoundError, StoreNotFoundError
from otel_replay.store import RunInfo, Store

if TYPE_CHECKING:  # rich loads when something is drawn: JSON is printed without it
    from rich.console import Console

__all__ = [
    "CliError",
    "emit",
    "is_source",
    "open_run",
    "open_store",
    "progress",
    "resolve_run",
    "run_mode",
    "stderr_console",
    "stdout_console",
    "store_option",
    "stored_ref",
]

F = TypeVar("F", bound=Callable[..., Any])

PIPE_WIDTH = 220
"""Console width when stdout is not a terminal (and ``COLUMNS`` is unset): wide enough that
tables piped to grep or a file keep one row per line."""

LATEST = "latest"
_LATEST_FIRST = 64
"""Newest runs read first when looking for the latest recording (replays and forks may be
newer)."""


def store_option(command: F) -> F:
    """``--store``: the store location, default ``OTEL_REPLAY_STORE``."""
    return click.option(
        "--store",
        "store",
        metavar="PATH|URL",
        default=None,
        help="Store location: a path or fsspec URL (s3://bucket/prefix). "
        "[default: $OTEL_REPLAY_STORE, else ./.otel-replay]",
    )(command)


def open_store(location: str | None) -> Store:
    """Open an existing store (never create one): ``location`` or ``OTEL_REPLAY_STORE``.

    Store errors pass through (the boundary in ``main`` turns them into one line); what
    fsspec raises for a URL it cannot serve (unknown protocol, missing driver) is named here.
    """
    where = location if location is not None else settings.read("OTEL_REPLAY_STORE")
    try:
        return Store.open(where, create=False)
    except StoreNotFoundError as exc:
        if location is not None:
            hint = "check --store"
        elif "OTEL_REPLAY_STORE" in os.environ:
            hint = "check OTEL_REPLAY_STORE"
        else:
            hint = "pass --store or set OTEL_REPLAY_STORE"
        raise CliError(f"{exc} ({hint})") from None
    except OtelReplayError:
        raise
    except (ValueError, ImportError) as exc:
        raise CliError(f"cannot open store {where}: {exc}") from None


@contextmanager
def open_run(ref: str, location: str | None) -> Iterator[tuple[Store, RunInfo]]:
    """The store holding the run ``ref`` names, and the run: a run of the store at
    ``location`` (:func:`resolve_run`), or the one run of a trace source (a file, a
    directory, a URL; ``#RUN_ID`` picks one of several), imported into a temporary store
    that is gone on exit, so it is read back as an imported run would be."""
    if not is_source(ref) or _is_stored_id(ref, location):
        with open_store(location) as opened:
            yield opened, resolve_run(opened, ref)
        return
    # Loaded here: a run of the store is shown without what reads files, URLs and backends.
    import tempfile  # noqa: PLC0415

    from otel_replay.replay.sources import import_runs, load_sources, only_run  # noqa: PLC0415

    loaded = load_sources(ref, store=location)
    run_id = only_run(loaded, ref).run_id
    with (
        tempfile.TemporaryDirectory(prefix="otel-replay-source-") as folder,
        Store.open(Path(folder) / "store") as temporary,
    ):
        import_runs(temporary, [r for r in loaded if r.run.run_id == run_id])
        yield temporary, temporary.run(run_id)


def is_source(ref: str) -> bool:
    """Whether ``ref`` names a trace source (a file, a directory, a URL), not a stored run."""
    source = ref.partition("#")[0]
    if not source:
        return False
    if ref.lower().startswith(("http://", "https://")) or "/" in source:
        return True
    try:
        return Path(os.path.expanduser(source)).exists()
    except (OSError, ValueError):  # a name no file can have (too long, a NUL): a run id
        return False


def _is_stored_id(ref: str, location: str | None) -> bool:
    """Whether ``ref``, a trace source by its looks (a ``/``) that names no file, is the id of
    a run of the store at ``location``: an id imported from spans may hold a ``/``."""
    if "://" in ref:
        return False
    try:
        if Path(os.path.expanduser(ref.partition("#")[0])).exists():
            return False
        with open_store(location) as opened:
            return ref in opened.run_ids(ref)
    except (OSError, ValueError, OtelReplayError, CliError):  # no store, or no such name
        return False


def run_mode(run: RunInfo) -> str:
    """``record``, ``replay`` or ``fork``: a run whose mode was not recorded (imported from
    another instrumentation's spans, say) is a recording."""
    return run.mode or "record"


def resolve_run(store: Store, ref: str) -> RunInfo:
    """The run ``ref`` names: ``latest`` (the newest recording: replays and forks are runs
    too, but never what "the latest run" means; a run whose id is "latest" is named by a
    prefix), an exact id, or a unique prefix.

    Raises RunNotFoundError when nothing matches, CliError listing the candidates when a
    prefix is ambiguous, and CliError for an empty ``ref`` (the prefix of every run).
    """
    if not ref:
        raise CliError("an empty run id names no run (give an id, a prefix of one, or latest)")
    # Only the runs whose ids start with ``ref`` are read: a store of 100,000 runs finds
    # one as fast as a small store.
    if ref == LATEST:  # before an exact id: a run imported as "latest" takes no one's place
        # The newest runs first: a store of many runs is not read whole for its latest.
        runs = store.runs(limit=_LATEST_FIRST)
        if not any(run_mode(run) == "record" for run in runs) and len(runs) == _LATEST_FIRST:
            runs = store.runs()
        recordings = [run for run in runs if run_mode(run) == "record"]
        if not runs:
            raise RunNotFoundError(f"the store at {store.location} has no runs yet")
        if not recordings:
            raise RunNotFoundError(
                f"the store at {store.location} has no recordings yet, only replays or forks "
                "(name one by its id)"
            )
        return max(recordings, key=lambda run: (run.start_ns, run.run_id))
    matches = store.run_ids(ref)
    if ref in matches:
        return store.run(ref)
    if len(matches) == 1:
        return store.run(matches[0])
    if not matches:
        raise RunNotFoundError(
            f"no run {clipped(ref)!r} in the store at {store.location} ({_where_to_look(ref)})"
        )
    shown = ", ".join(printable(name) for name in matches[:8])
    more = f" and {len(matches) - 8} more" if len(matches) > 8 else ""
    raise CliError(f"run prefix {ref!r} is ambiguous: it matches {shown}{more}")


def _where_to_look(ref: str) -> str:
    """What to do about a run the store lacks: a trace source (an OTLP file, a URL) is read
    from the store once imported; anything else is a run id the listing shows."""
    source = ref.partition("#")[0]
    if source.startswith(("http://", "https://")) or os.path.isfile(source):
        return (
            f"{source} is a trace source, not a run: load its runs with: otel-replay import "
            f"{source}"
        )
    return "list them with: otel-replay runs"


def stored_ref(ref: str, store: str) -> str:
    """``ref`` with a run prefix or ``latest`` resolved to the run id it names in ``store``;
    a file (or anything with a ``/``) and a store that is not there are left to the loader,
    which names them in its error."""
    if is_source(ref):
        return ref
    try:
        opened = Store.open(store, create=False)
    except OtelReplayError:
        return ref
    with opened:
        return resolve_run(opened, ref).run_id


def stdout_console() -> Console:
    """A console on the current stdout: colours and the terminal's width on a terminal,
    plain text :data:`PIPE_WIDTH` columns wide otherwise."""
    from rich.console import Console  # noqa: PLC0415 - see the imports

    console = Console(file=sys.stdout, highlight=False, soft_wrap=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = PIPE_WIDTH
    return console


def emit(console: Console, *objects: Any, **options: Any) -> None:
    """``console.print``; on a pipe or file, without the spaces rich pads lines with. A
    ``Text`` made ``no_wrap`` stays one line whatever the width. Strings print as they are
    (a store's path, a run id): never read as markup or emoji codes."""
    from rich.text import Text  # noqa: PLC0415 - see the imports

    options.setdefault("markup", False)
    options.setdefault("emoji", False)
    if any(isinstance(o, Text) and o.no_wrap for o in objects):
        options.setdefault("soft_wrap", True)
    if console.is_terminal:
        console.print(*objects, **options)
        return
    with console.capture() as captured:
        console.print(*objects, **options)
    click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))


def stderr_console() -> Console:
    """A console on the current stderr (progress bars, notes beside machine output)."""
    from rich.console import Console  # noqa: PLC0415 - see the imports

    return Console(file=sys.stderr, highlight=False)


@contextmanager
def progress(label: str, console: Console | None = None) -> Iterator[Callable[[int, int], None]]:
    """A ``progress(done, total)`` callback drawing a transient bar on ``console`` (default
    stderr) when it is a terminal, and doing nothing otherwise."""
    console = console or stderr_console()
    if not console.is_terminal:
        yield lambda done, total: None
        return
    from rich.progress import (  # noqa: PLC0415 - see the imports
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update
