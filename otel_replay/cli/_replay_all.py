"""``otel-replay replay --all DIR -- CMD``: every bundle under DIR replayed against CMD,
several at once, one line each as it ends, then a summary.

Each replay is a process of its own (CMD under the launcher, as ``replay RUN`` starts it); a
thread of a ``ThreadPoolExecutor`` starts it, waits for it and reads its report, so N jobs
keep N programs running on N cores. Signals are handled here, in the main thread, for all of
them. Past one machine, the CI's matrix gives each job a ``--shard K/N``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.text import Text

from otel_replay.cli._common import CliError, emit, stdout_console
from otel_replay.cli._format import json_text, plural, printable
from otel_replay.cli._replay_report import isolation_lines
from otel_replay.cli.main import EXPECTED, one_line, write_traceback
from otel_replay.replay import Isolation, ReplayResult, isolation_notice, isolation_unavailable
from otel_replay.replay.sources import is_bundle

__all__ = ["Ran", "ReplayBundle", "Shard", "Watch", "find_bundles", "replay_all"]

_VERDICTS = {0: "identical", 1: "diverged", 2: "bad recording", 3: "agent failed", 70: "error"}
_WORDS = 200  # a line's account of what went wrong is cut past this many characters
_RUN_ID = len("r_20261121T090000_a1b2c3d4")  # the run ids' column, as otel-replay makes them
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_STOP_GRACE_S = 10.0
_POLL_S = 0.1  # how soon a stop asked for by a signal is acted on


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (1-based): of the bundles in path order, the
    ``index``-th and every ``count``-th after it, so the N jobs of a CI matrix share a corpus
    with no bundle replayed twice or left out."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``K/N`` with 1 <= K <= N; ValueError otherwise."""
        index, slash, count = text.partition("/")
        if not (slash and index.isdigit() and count.isdigit()):
            raise ValueError(f"{text!r} is not K/N (say 2/4)")
        shard = cls(int(index), int(count))
        if not 1 <= shard.index <= shard.count:
            raise ValueError(f"{text!r}: K must be from 1 to N")
        return shard

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class Ran:
    """One bundle replayed: the comparison, the exit status ``replay BUNDLE`` gives it, and
    the run the re-execution was recorded as (None: not recorded)."""

    result: ReplayResult
    status: int
    replay_run_id: str | None


Watch = Callable[["subprocess.Popen[bytes]"], AbstractContextManager[None]]
"""What looks after a program while it runs (passes signals on, stops it with the others)."""

ReplayBundle = Callable[[Path, Watch], Ran]
"""Replays the bundle at a path, its program looked after by the ``Watch`` while it runs;
raises on bad input as the ``replay`` verb does."""


@dataclass(frozen=True)
class RunLine:
    """What the replay of one bundle came to: ``status`` is the exit status ``replay`` gives
    that bundle alone, ``detail`` the first divergence or what failed, in a few words;
    ``isolation``: how its program was kept from the network (None: it did not run)."""

    bundle: str
    run_id: str | None
    status: int
    detail: str
    elapsed_s: float
    replay_run_id: str | None = None
    isolation: Isolation | None = None

    @property
    def verdict(self) -> str:
        return _VERDICTS[self.status]

    def to_json(self) -> dict[str, Any]:
        return {
            "bundle": self.bundle,
            "run_id": self.run_id,
            "verdict": self.verdict,
            "exit_code": self.status,
            "detail": self.detail or None,
            "elapsed_s": round(self.elapsed_s, 3),
            "replay_run_id": self.replay_run_id,
        }


def find_bundles(directory: Path) -> tuple[list[Path], list[OSError]]:
    """Every bundle under ``directory`` (itself included), in path order: each directory
    holding a ``bundle.json``, not looked into further; hidden directories (an export under
    way) are passed by, and a link counts when it leads to a bundle (no other is followed).
    Also what could not be read."""
    found: list[Path] = []
    unreadable: list[OSError] = []
    for root, dirs, _files in os.walk(directory, onerror=unreadable.append):
        here = Path(root)
        if is_bundle(here):
            found.append(here)
            dirs.clear()
            continue
        dirs[:] = [name for name in dirs if not name.startswith(".")]
        found.extend(
            here / name for name in dirs if is_bundle(here / name) and (here / name).is_symlink()
        )
    return sorted(found), unreadable


def replay_all(
    directory: Path,
    command: Sequence[str],
    replay: ReplayBundle,
    *,
    jobs: int | None,
    shard: Shard | None,
    strict: bool,
    as_json: bool,
) -> NoReturn:
    """Replay every bundle under ``directory`` (the ``shard`` of them) against ``command``
    with ``replay``, ``jobs`` at once (default: the CPUs this process may use); print a line
    per run and a summary (``as_json``: one document), and exit: 0 when every run
    reproduced, else the lowest of the runs' non-zero statuses; 128+N when stopped by signal
    N."""
    bundles, unreadable = find_bundles(directory)
    if not bundles and not unreadable:
        raise CliError(
            f"no bundle under {printable(str(directory))} (a bundle is a directory holding "
            "bundle.json, as `otel-replay export RUN DIR` writes it)"
        )
    _check_runnable(command)
    entries: list[Path | OSError] = [*bundles, *unreadable]
    picked = entries if shard is None else entries[shard.index - 1 :: shard.count]
    jobs = min(jobs or _cpus(), max(len(picked), 1))
    reason = isolation_unavailable()
    if strict and reason is not None:
        click.echo(isolation_notice(reason), err=True)
    console = stdout_console()
    corpus = f"{plural(len(entries), 'bundle')} under {directory}"
    if shard is not None:
        corpus = f"shard {shard} of the {corpus}: {len(picked)} of them"
    if not as_json:
        emit(console, Text(printable(f"replaying {corpus}, {jobs} at a time")))
    width = max((len(printable(_name(entry))) for entry in picked), default=0)
    lines: list[RunLine] = []
    started = time.perf_counter()
    children = _Children()

    def one(entry: Path | OSError) -> RunLine | None:
        if isinstance(entry, OSError):  # a directory that could not be looked into
            return RunLine(_name(entry), None, 2, f"cannot read it: {entry.strerror}", 0.0)
        return _replay_bundle(entry, replay, children)

    stop = _StopRequest()
    with stop.installed(), ThreadPoolExecutor(jobs, thread_name_prefix="otel-replay") as pool:
        pending = {pool.submit(one, entry) for entry in picked}
        while pending and stop.signum is None:
            done, pending = wait(pending, timeout=_POLL_S, return_when=FIRST_COMPLETED)
            for future in done:
                line = future.result()
                if line is None:
                    continue
                lines.append(line)
                if not as_json:
                    emit(console, _line_text(line, width))
        stopped = stop.signum
        if stopped is not None:
            _stop(pool, children, stopped)
    elapsed = time.perf_counter() - started
    lines.sort(key=lambda line: line.bundle)
    status = min((line.status for line in lines if line.status), default=0)
    if stopped is not None:
        status = 128 + stopped
    counts = Counter(line.verdict for line in lines)
    if as_json:
        document = {
            "directory": str(directory),
            "shard": None if shard is None else str(shard),
            "jobs": jobs,
            "runs": [line.to_json() for line in lines],
            "counts": dict(counts),
            "elapsed_s": round(elapsed, 3),
            "stopped_by": None if stopped is None else signal.Signals(stopped).name,
            "exit_code": status,
        }
        click.echo(json_text(document))
        sys.exit(status)
    for text in _summary(lines, counts, elapsed, len(picked), stopped, command):
        emit(console, text)
    sys.exit(status)


def _replay_bundle(bundle: Path, replay: ReplayBundle, children: _Children) -> RunLine | None:
    """Replay one bundle: its line (None once the corpus is stopped). Never raises: a bad
    bundle, or a bug met on the way, is a failed line."""
    started = time.perf_counter()
    try:
        ran = replay(bundle, children.watch)
    except _Interrupted:
        return None
    except click.ClickException as exc:
        return _failed(2, exc.format_message(), bundle, started)
    except EXPECTED as exc:
        return _failed(2, str(exc), bundle, started)
    except Exception as exc:
        where = write_traceback(exc)
        hint = "" if where is None else f" (traceback written to {where})"
        what = f"internal error: {type(exc).__name__}: {one_line(exc)}{hint}"
        return _failed(70, what, bundle, started)
    result = ran.result
    return RunLine(
        str(bundle),
        result.run.run_id,
        ran.status,
        _detail(result),
        time.perf_counter() - started,
        ran.replay_run_id,
        result.isolation,
    )


def _failed(status: int, message: str, bundle: Path, started: float) -> RunLine:
    # A source's errors begin with its path, which the line shows already.
    text = one_line(message).removeprefix(f"{bundle}: ")
    return RunLine(str(bundle), None, status, text, time.perf_counter() - started)


def _detail(result: ReplayResult) -> str:
    """What went wrong, in a few words ("" when nothing did)."""
    if result.outcome == "identical":
        return ""
    if result.bad_value is not None:
        return result.bad_value.describe()
    if result.outcome == "agent_failed":
        before = "before its first request: " if result.failed_before_any_request else ""
        return f"{before}it {result.agent.describe()}"
    first = result.first_divergence
    if first is None:
        return "network attempts refused: " + ", ".join(result.network_attempts)
    # Its repr is the one line a failed assertion shows: the step, then what changed.
    return repr(first).removeprefix("<Divergence: ").removesuffix(">")


def _name(entry: Path | OSError) -> str:
    return str(entry.filename if isinstance(entry, OSError) else entry)


def _line_text(line: RunLine, width: int) -> Text:
    """``verdict  time  bundle  run id  detail``, the bundles' column ``width`` wide."""
    text = Text(f"{line.verdict:<13}", style="green" if line.status == 0 else "bold red")
    bundle = printable(line.bundle).ljust(width)
    run_id = printable(line.run_id or "-")
    text.append(f" {line.elapsed_s:6.2f} s  {bundle}  {run_id}")
    if line.detail:
        detail = printable(line.detail)
        detail = detail if len(detail) <= _WORDS else detail[: _WORDS - 1] + "…"
        text.append(" " * (_RUN_ID - len(run_id)) + "  " + detail)
    text.no_wrap = True
    return text


def _summary(
    lines: list[RunLine],
    counts: Counter[str],
    elapsed: float,
    total: int,
    stopped: int | None,
    command: Sequence[str],
) -> list[Text]:
    out: list[Text] = []
    seen: set[str] = set()
    for line in lines:  # how the programs were kept from the network (the same for all)
        for text in isolation_lines(line.isolation, 0):
            if isinstance(text, Text) and text.plain not in seen:
                seen.add(text.plain)
                out.append(text)
    tally = ", ".join(f"{counts[v]} {v}" for v in _VERDICTS.values() if counts[v])
    head = f"{plural(len(lines), 'run')} in {elapsed:.1f} s: {tally or 'none'}"
    if stopped is not None:
        head += (
            f"; stopped by {signal.Signals(stopped).name} with {total - len(lines)} not replayed"
        )
    out.append(Text(head, style="bold green" if all(not x.status for x in lines) else "bold red"))
    failed = min((line for line in lines if line.status), key=lambda x: x.status, default=None)
    if failed is not None:  # one whose status is the corpus's
        rerun = f"{shlex.quote(failed.bundle)} [OPTIONS] -- {shlex.join(command)}"
        out.append(Text(printable(f"one run's whole report: otel-replay replay {rerun}")))
    return out


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _check_runnable(command: Sequence[str]) -> None:
    """A CMD that cannot start is one line before any run, not one per run."""
    program = command[0]
    if shutil.which(program) is None:
        raise CliError(f"cannot run {program!r}: no such program")


class _Interrupted(Exception):
    """The corpus was stopped while this run's program ran."""


class _Children:
    """The programs of the replays under way, so that a stop reaches each of them; one that
    starts after the stop is killed at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen[bytes]] = set()
        self.stopped = False

    @contextlib.contextmanager
    def watch(self, child: subprocess.Popen[bytes]) -> Iterator[None]:
        """While ``child`` runs; raises _Interrupted after it when the corpus was stopped."""
        with self._lock:
            self._running.add(child)
            late = self.stopped
        if late:
            child.kill()
        try:
            yield
        finally:
            with self._lock:
                self._running.discard(child)
        if self.stopped:
            raise _Interrupted

    def signal(self, signum: int) -> None:
        """Send ``signum`` to every program under way (the first time: stop the corpus)."""
        with self._lock:
            self.stopped = True
            running = list(self._running)
        for child in running:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signum)


def _stop(pool: ThreadPoolExecutor, children: _Children, signum: int) -> None:
    """Stop the corpus: no further run starts, the programs under way are sent ``signum``
    (Ctrl-C kills them, as it kills ``replay RUN``'s), killed if still there after a grace
    period, and waited for, so each run's scratch files are removed."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up
    pool.shutdown(wait=False, cancel_futures=True)
    children.signal(signal.SIGKILL if signum == signal.SIGINT else signum)
    grace = threading.Timer(_STOP_GRACE_S, children.signal, (signal.SIGKILL,))
    grace.daemon = True
    grace.start()
    pool.shutdown(wait=True)
    grace.cancel()


class _StopRequest:
    """Ctrl-C, SIGTERM and SIGHUP, asked to stop the corpus. The handlers only note the signal
    (main thread only): an exception raised into the main thread at an arbitrary point could
    leave a future's lock held, and the pool would never finish."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def _note(self, signum: int, _frame: object) -> None:
        if self.signum is None:
            self.signum = signum

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """While the corpus runs; every handler is as it was afterwards (SIGINT's too, which
        a stop ignores)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {n: signal.signal(n, self._note) for n in (signal.SIGINT, *_STOP_SIGNALS)}
        try:
            yield
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
