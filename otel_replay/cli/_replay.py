"""``otel-replay replay RUN -- CMD…``: re-execute CMD against a recorded run and compare."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

import click

from otel_replay import settings
from otel_replay._ignore import IgnoreRules
from otel_replay.cli._common import (
    CliError,
    emit,
    stderr_console,
    stdout_console,
    store_option,
    stored_ref,
)
from otel_replay.cli._fork import fork_options
from otel_replay.cli._format import json_text, printable
from otel_replay.cli._replay_all import Ran, Shard, Watch, replay_all
from otel_replay.cli._replay_report import render, verdict
from otel_replay.errors import OtelReplayError
from otel_replay.replay import (
    BOOT_DIR,
    AgentStatus,
    BadValue,
    Change,
    ForkPlan,
    Isolation,
    Outcome,
    ReplayResult,
    Run,
    ServedStep,
    changes_from_json,
    isolated_launcher,
    isolation_notice,
    isolation_unavailable,
    without_background,
)
from otel_replay.replay.sources import Limits, is_remote, load_run, only_run, read_runs
from otel_replay.runs import new_run_id
from otel_replay.store import Store, is_url

__all__ = ["EXIT_STATUS", "replay"]

EXIT_STATUS: dict[Outcome, int] = {
    "identical": 0,
    "diverged": 1,
    "bad_recording": 2,
    "agent_failed": 3,
}
"""The ``replay`` verb's exit status for each outcome (2: bad input, as every verb, a recorded
value the replay could not give back included; 70: a bug)."""

_POLL_S = 0.05
_LAUNCHER_EVENTS = frozenset({"isolation", "launch-failed"})
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_STOP_GRACE_S = 10.0
# The replayed process must not export its spans anywhere but the store: strict replay opens
# no socket, and an OTLP exporter would try.
_QUIET_EXPORTERS = {
    "OTEL_TRACES_EXPORTER": "replay",
    "OTEL_METRICS_EXPORTER": "none",
    "OTEL_LOGS_EXPORTER": "none",
}
# SDKs refuse to start without a key; the replay never sends it anywhere.
_PLACEHOLDER_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")


class _Replay(click.Command):
    """``replay``'s arguments: RUN then CMD, or with ``--all DIR`` CMD alone."""

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        return ["[OPTIONS]", "(RUN | --all DIR)", "--", "CMD..."]

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # Click fills RUN first, whether it came before `--` or after: with --all, what came
        # after is CMD, and a word before it is a RUN given by mistake.
        after = len(args) - args.index("--") - 1 if "--" in args else None
        rest = super().parse_args(ctx, args)
        run, command = ctx.params["run"], ctx.params["command"]
        run_needed = ctx.params["corpus"] is None
        if not run_needed:
            words = command if run is None else (run, *command)
            if after is not None and len(words) > after:
                raise click.UsageError(
                    f"--all replays the bundles under DIR: {words[0]!r} comes before --, "
                    "where no RUN goes",
                    ctx,
                )
            ctx.params.update(run=None, command=words)
        elif ctx.params["jobs"] is not None or ctx.params["shard"] is not None:
            raise click.UsageError("--jobs and --shard go with --all DIR", ctx)
        params = {param.name: param for param in self.params}
        if run_needed and ctx.params["run"] is None:
            raise click.MissingParameter(ctx=ctx, param=params["run"])
        if not ctx.params["command"]:
            raise click.MissingParameter(ctx=ctx, param=params["command"])
        return rest


def _shard(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Shard | None:
    try:
        return None if value is None else Shard.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command(cls=_Replay)
@click.argument("run", required=False, metavar="RUN")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="CMD...")
@click.option(
    "--all",
    "corpus",
    metavar="DIR",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Replay every bundle under DIR (the directories `export` writes, at any depth) "
    "against CMD, several at once: a line per run as it ends, then a summary. No RUN then.",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="With --all: how many runs at once. [default: the number of CPUs]",
)
@click.option(
    "--shard",
    metavar="K/N",
    default=None,
    callback=_shard,
    help="With --all: replay shard K of N only (in path order, the K-th bundle and every N-th "
    "after it), one per job of a CI matrix.",
)
@store_option
@click.option(
    "--timing",
    type=click.Choice(settings.TIMINGS),
    default="fast",
    show_default=True,
    help="fast: streams come back at once; recorded: chunks paced as they arrived.",
)
@click.option(
    "--strict/--no-strict",
    default=True,
    show_default=True,
    help="Strict: no socket opens and a request with no recorded match fails. "
    "--no-strict sends unmatched requests live.",
)
@click.option(
    "--isolate/--no-isolate",
    default=True,
    show_default=True,
    help="Strict replay runs CMD in namespaces of its own under a seccomp filter (Linux), so "
    "neither CMD nor anything it starts can reach the network or the host's unix sockets. "
    "--no-isolate: no namespaces; the filter refuses every connection, loopback included.",
)
@click.option(
    "--live-tools",
    type=click.Choice(["read"]),
    default=None,
    help="read: run read tools live against today's world (their recorded calls are still "
    "matched; a live result that differs from the recorded one diverges at that step). A tool "
    'reads only when declared so (effect="read", an MCP readOnlyHint, OTEL_REPLAY_READ_TOOLS); '
    "every other tool is a write, and write tools never run. The report's effect column says "
    "why.",
)
@fork_options
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the comparison as JSON on stdout (CMD's own stdout goes to stderr; with "
    "--all, one document for every run).",
)
@click.option(
    "--report",
    "html",
    metavar="FILE.html",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Also write the step-through HTML report of the re-execution against the recording "
    "(as `otel-replay report RUN --diff REPLAY`), whatever the outcome: for CI to keep.",
)
def replay(
    run: str | None,
    command: tuple[str, ...],
    corpus: Path | None,
    jobs: int | None,
    shard: Shard | None,
    store: str | None,
    timing: str,
    strict: bool,
    isolate: bool,
    live_tools: str | None,
    fork: ForkPlan,
    as_json: bool,
    html: Path | None,
) -> None:
    """Re-execute CMD against the recorded RUN and report where it diverges.

    RUN is a run id in the store (a unique prefix, or `latest`: the newest recording), an
    OTLP JSON or protobuf file, the Collector's archive directory, a bundle directory, an
    http(s) URL that returns OTLP JSON, or phoenix://, jaeger://, tempo:// (add #RUN_ID to
    pick one run from a source that holds several). CMD runs with OTEL_REPLAY_MODE=replay:
    every httpx/httpx2 request is answered from the recording, and in strict mode no socket
    opens: CMD runs in namespaces of its own under a seccomp filter where the system allows,
    and every refused attempt (unix sockets included) and every process CMD starts is listed.
    The re-execution is recorded in the store as a run of its own (mode replay, naming RUN as
    its parent).

    With --all DIR instead of RUN, every bundle under DIR is replayed so, --jobs at a time
    (CMD's output is not shown): a line per run as it ends (verdict, time, bundle, run id,
    the first divergence or what failed), then a summary. Its exit status is 0 when every
    run was identical, else the lowest of the runs' statuses below (a divergence first);
    2 when DIR holds no bundle; 130 after Ctrl-C.

    \b
    Exit status:
      0   identical: every recorded step was requested as recorded, and the
          agent succeeded
      1   diverged: a request differs from its step or has none, a recorded step
          was never requested, or a network attempt was refused (whatever the
          agent did after)
      2   bad input: unknown run, unreadable source, bad option
          (a recorded value that cannot be given back too: one line names it)
      3   the agent failed without diverging: non-zero exit status, killed by a
          signal, or an uncaught exception
      70  a bug in otel-replay: one line, with where the traceback was written
    The agent's own exit status is in the report and in --json (agent.exit_code).
    """
    where = store if store is not None else settings.read("OTEL_REPLAY_STORE")
    # A bad setting the replayed program reads stops us before the program.
    for setting in (*settings.SETTINGS, *settings.CLI_CHANNEL):
        if setting.name not in _SET_FOR_THE_PROGRAM:
            settings.read(setting.name)
    how = How(where, settings.read("OTEL_REPLAY_IGNORE"), timing, strict, isolate, live_tools)
    if corpus is not None:
        _one_run_only(fork, html)

        def one(bundle: Path, watch: Watch) -> Ran:
            replayed = replay_one(str(bundle), command, how, fork, output="discard", watch=watch)
            outcome = replayed.result.outcome
            return Ran(replayed.result, EXIT_STATUS[outcome], replayed.kept.run_id)

        replay_all(corpus, command, one, jobs=jobs, shard=shard, strict=strict, as_json=as_json)
    assert run is not None  # the command's parser makes sure
    if html is not None:
        from otel_replay.cli._report import check_writable  # noqa: PLC0415 - with --report only

        check_writable(html)
    replayed = replay_one(run, command, how, fork, output="stderr" if as_json else "inherit")
    result, kept = replayed.result, replayed.kept
    status = EXIT_STATUS[result.outcome]
    if html is not None:
        _write_html(html, replayed.recorded, result, kept, where)
    if result.bad_value is not None and not as_json:
        # The recording, not the program, is at fault: one line, as for any bad input.
        raise CliError(printable(result.bad_value.describe()))
    if as_json:
        document = result.to_json()
        document.update(
            agent_exit_code=replayed.agent_exit_code, exit_code=status, replay_run_id=kept.run_id
        )
        document["fork"] = [
            {"step": at, "change": what} for at, what in replayed.fork.changes(replayed.recorded)
        ]
        click.echo(json_text(document))
    else:
        console = stdout_console()
        for block in render(result, kept=kept.describe(), fork=replayed.fork):
            emit(console, block)
    sys.exit(status)


def _one_run_only(fork: ForkPlan, html: Path | None) -> None:
    """Refuse, with --all, the flags that fork or report one run."""
    given = [
        flag
        for flag, on in (
            ("--override", fork.overrides),
            ("--inject", fork.injections),
            ("--state", fork.states),
            ("--live-from", fork.live_from is not None),
            ("--allow-writes", fork.allow_writes),
            ("--report", html is not None),
        )
        if on
    ]
    if given:
        raise CliError(
            f"--all replays every run as it was recorded: {' and '.join(given)} "
            f"{'is' if len(given) == 1 else 'are'} for one run (give RUN instead of --all)"
        )


@dataclass(frozen=True)
class How:
    """How each run is replayed: the ``replay`` verb's options that are not a fork's."""

    store: str
    ignore: IgnoreRules
    timing: str
    strict: bool
    isolate: bool
    live_tools: str | None


Output = Literal["inherit", "stderr", "discard"]
"""Where CMD's output goes: ours (with progress on a terminal), our stderr (stdout carries
JSON), or nowhere (many replays at once; CMD's stdin is closed too)."""


@dataclass(frozen=True)
class Replayed:
    """One re-execution of a recorded run: the run (``fork`` checked against it), what the
    comparison found, CMD's exit status, and where the re-execution was recorded."""

    recorded: Run
    fork: ForkPlan
    result: ReplayResult
    agent_exit_code: int
    kept: _Kept


def replay_one(
    ref: str,
    command: Sequence[str],
    how: How,
    fork: ForkPlan,
    *,
    output: Output,
    watch: Watch | None = None,
) -> Replayed:
    """Re-execute ``command`` against the run ``ref`` names and compare. Raises CliError,
    OtelReplayError or OSError on bad input (the source, an option, a command that does not
    start). ``watch`` (default: signals sent to us are passed on to CMD, from the main thread
    only) looks after CMD while it runs."""
    with tempfile.TemporaryDirectory(prefix="otel-replay-") as scratch:
        source, recorded = _local_source(ref, Path(scratch), how.store)
        recorded = without_background(recorded, how.ignore)  # as the program's session does
        if not recorded.steps:
            raise CliError(f"{recorded.source} has no replayable steps")
        fork = fork.check(recorded, live_read_tools=how.live_tools == "read")
        report = Path(scratch) / "events.jsonl"
        report.touch()
        new_id = new_run_id()
        # The child records where it can reach: a remote store is copied into afterwards.
        remote = is_url(how.store)
        own_store = str(Path(scratch) / "store") if remote else how.store
        env = _child_env(source, own_store, new_id, report, how.timing, how.strict)
        env["OTEL_REPLAY_LIVE_TOOLS"] = how.live_tools or ""
        env["OTEL_REPLAY_FORK"] = "" if fork.empty else _written(fork, Path(scratch))
        # The launcher's own events (how CMD is isolated, what the filter refused) go to a file
        # with no name, passed to it alone: CMD can neither erase nor forge them.
        with tempfile.TemporaryFile(dir=scratch) as launcher_events:
            argv, isolation = _launch(
                command,
                strict=how.strict,
                isolate=how.isolate,
                live_from=fork.live_from,
                events_fd=launcher_events.fileno(),
                notify=output != "discard",
            )
            private = launcher_events if isolation is None else None
            code, events = _run_child(
                argv, env, report, private, len(recorded.steps), output, watch or _stopping_together
            )
        if remote:
            _carry(new_id, own_store, how.store)
    result = _result(recorded, events, isolation, code)
    result.live_from = fork.live_from
    return Replayed(recorded, fork, result, code, _kept(how.store, new_id, result))


def _carry(run_id: str, local: str, remote: str) -> None:
    """Copy the run the child recorded into the scratch store ``local`` to ``remote``, when
    there is one (``_kept`` says so when there is not)."""
    from otel_replay.replay.sources import import_runs, load_sources  # noqa: PLC0415

    try:
        with Store.open(local, create=False) as opened:
            opened.run(run_id)
        runs = load_sources(run_id, store=local)
        with Store.open(remote, create=False) as target:
            import_runs(target, runs)
    except OtelReplayError:
        return


@dataclass(frozen=True, slots=True)
class _Kept:
    """Where the re-execution was recorded: ``run_id``, or None and ``why`` not."""

    run_id: str | None
    why: str = ""

    def describe(self) -> str:
        if self.run_id is not None:
            return f"recorded as run {self.run_id}"
        return f"not recorded ({self.why})"


def _kept(store: str, run_id: str, result: ReplayResult) -> _Kept:
    """Whether the program's recording of itself reached ``store`` as ``run_id`` (when some
    process of it loaded otel-replay and made a request, there was one to make)."""
    if not result.hooked:
        return _Kept(None, "no process of the program loaded otel-replay")
    if not result.steps:
        return _Kept(None, "the program made no request")
    if Store.is_read_only(store):
        return _Kept(None, f"the store at {store} is read-only")
    try:
        with Store.open(store, create=False) as opened:
            opened.run(run_id)
    except OtelReplayError:
        return _Kept(None, f"the store at {store} did not take it")
    return _Kept(run_id)


def _write_html(path: Path, recorded: Run, result: ReplayResult, kept: _Kept, store: str) -> None:
    """The report of the re-execution (as recorded in ``store``) against ``recorded``; of the
    recording alone when the re-execution was not recorded, saying why."""
    from otel_replay.cli._report import write_report  # noqa: PLC0415 - with --report only
    from otel_replay.report import render as render_html  # noqa: PLC0415

    said = verdict(result).plain
    replayed = None if kept.run_id is None else load_run(kept.run_id, store=store)
    if replayed is None:
        notes = [said, f"the re-execution was {kept.describe()}: the recording alone is shown"]
    else:
        notes = [said, f"A: the recording; B: the re-execution, {kept.describe()}"]
    write_report(path, render_html(recorded, other=replayed, notes=notes))
    click.echo(f"report written to {printable(str(path))}", err=True)


def _local_source(ref: str, scratch: Path, store: str) -> tuple[str, Run]:
    """What the child loads, and the run it names.

    A URL or trace backend is downloaded and read here (the child may not open sockets), so
    errors and the report name it, and the child gets a file in ``scratch`` and the run's id; a run
    of a remote store (``s3://``) is read here too, and given as a bundle in ``scratch``; a run
    prefix or ``latest`` is resolved to its id; files and exact ids are passed as they are.
    """
    base, _, fragment = ref.partition("#")
    if is_remote(base):
        # The network code, for a remote source only.
        from otel_replay.replay.sources import download, source_name  # noqa: PLC0415

        limits = Limits.from_env()
        data = download(base, limits, fragment or None)
        recorded = only_run(read_runs(data, source_name(base), fragment or None, limits), ref)
        path = scratch / "source.otlp"
        path.write_bytes(data)
        return f"{path}#{fragment}" if fragment else str(path), recorded
    ref = stored_ref(ref, store)
    if "\0" in ref:
        raise CliError(
            f"cannot replay {printable(ref)}: the run id holds a NUL byte, which no "
            "environment variable can carry to CMD"
        )
    recorded = load_run(ref, store=store)
    if is_url(store) and not Path(ref).exists():
        # A bucket is out of the child's reach in its namespaces (no network): it gets the
        # run read here, as a bundle, as it gets a trace backend's as a file.
        from otel_replay.redact import Redactor  # noqa: PLC0415 - remote stores only
        from otel_replay.replay.sources import write_bundle  # noqa: PLC0415

        bundle = scratch / "run"
        write_bundle(recorded, bundle, Redactor())
        return str(bundle), recorded
    return ref, recorded


def _written(fork: ForkPlan, scratch: Path) -> str:
    """The file in ``scratch`` that hands ``fork`` to CMD (an override may be larger than an
    environment variable can hold)."""
    path = scratch / "fork.json"
    path.write_text(fork.to_json(), encoding="utf-8")
    return str(path)


def _launch(
    command: Sequence[str],
    *,
    strict: bool,
    isolate: bool,
    live_from: int | None,
    events_fd: int,
    notify: bool,
) -> tuple[list[str], Isolation | None]:
    """How CMD is started, and how it is isolated when known here (None: the launcher says,
    in its event); with ``notify``, the one-line notice is printed when the system is what
    stands in the way.
    A fork that goes live (``live_from``) gets neither namespaces nor the filter: its live
    part needs the network and the host's sockets, and the in-process guards keep the part
    before its live point from them."""
    if not strict:
        return list(command), Isolation(False, reason="--no-strict: unmatched requests go live")
    if live_from is not None:
        why = f"--live-from {live_from}: calls from step {live_from} on go live"
        return list(command), Isolation(False, reason=why)
    reason = isolation_unavailable()
    if reason is None:
        return isolated_launcher(command, namespaces=isolate, events_fd=events_fd), None
    if notify:
        click.echo(isolation_notice(reason), err=True)
    return list(command), Isolation(False, reason=reason)


_SET_FOR_THE_PROGRAM = frozenset(
    {
        "OTEL_REPLAY_MODE",
        "OTEL_REPLAY_RUN",
        "OTEL_REPLAY_STORE",
        "OTEL_REPLAY_RUN_ID",
        "OTEL_REPLAY_REPORT",
        "OTEL_REPLAY_TIMING",
        "OTEL_REPLAY_STRICT",
        "OTEL_REPLAY_LIVE_TOOLS",
        "OTEL_REPLAY_FORK",
    }
)
"""The settings the replayed program is given (:func:`_child_env`), whatever the user's are."""


def _child_env(
    source: str, store: str, new_id: str, report: Path, timing: str, strict: bool
) -> dict[str, str]:
    env = dict(os.environ)
    env.update(_QUIET_EXPORTERS)
    for key in _PLACEHOLDER_KEYS:
        env.setdefault(key, "otel-replay-placeholder")
    boot_dir = BOOT_DIR
    existing = env.get("PYTHONPATH")
    env.update(
        OTEL_REPLAY_MODE="replay",
        OTEL_REPLAY_RUN=source,
        OTEL_REPLAY_STORE=store,
        OTEL_REPLAY_RUN_ID=new_id,
        OTEL_REPLAY_REPORT=str(report),
        OTEL_REPLAY_TIMING=timing,
        OTEL_REPLAY_STRICT="true" if strict else "false",
        PYTHONPATH=boot_dir + (os.pathsep + existing if existing else ""),
    )
    return env


def _run_child(
    command: Sequence[str],
    env: Mapping[str, str],
    report: Path,
    launcher: IO[bytes] | None,
    total: int,
    output: Output,
    watch: Watch,
) -> tuple[int, list[dict[str, Any]]]:
    """Run CMD, following its report for progress; returns its exit status and the events
    (``launcher``: the file the launcher writes its own events to, when it runs)."""
    passed = () if launcher is None else (launcher.fileno(),)
    # With --json, stdout carries only the comparison: the program's output goes to stderr.
    streams: dict[str, Any] = {"stdout": sys.stderr} if output == "stderr" else {}
    if output == "discard":
        streams = dict.fromkeys(("stdin", "stdout", "stderr"), subprocess.DEVNULL)
    try:
        child = subprocess.Popen(list(command), env=dict(env), pass_fds=passed, **streams)
    except OSError as exc:
        raise CliError(f"cannot run {command[0]!r}: {exc.strerror or exc}") from None
    with watch(child):
        code = _follow(child, report, total, quiet=output != "inherit")
    events = _events(report.read_bytes(), f"replay report {report}")
    if launcher is not None:  # what CMD wrote in the launcher's name does not count
        launcher.seek(0)
        ours = [e for e in events if e.get("type") not in _LAUNCHER_EVENTS]
        events = ours + _events(launcher.read(), "the launcher's report")
    for event in events:
        if event.get("type") == "launch-failed":
            raise CliError(str(event.get("error")))
    return code, events


def _follow(child: subprocess.Popen[bytes], report: Path, total: int, quiet: bool) -> int:
    """Wait for CMD, showing progress from its report on a terminal; its exit status."""
    console = stderr_console()
    if console.is_terminal and not quiet:
        served = 0
        with report.open("rb") as events_file, console.status("") as status:
            while child.poll() is None:
                served += _count_steps(events_file.read())
                status.update(f"replaying: {served}/{total} recorded steps requested")
                time.sleep(_POLL_S)
    return child.wait()


class _Stopped(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def _stopping_together(child: subprocess.Popen[bytes]) -> Iterator[None]:
    """While CMD runs, SIGTERM or SIGHUP sent to us is passed on to CMD and, once CMD has
    stopped, ends this command with status 128+signal, so that the scratch directory is
    removed on the way out; Ctrl-C kills CMD."""

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    def stop(signum: int, frame: object) -> None:
        forward(signum, frame)
        raise _Stopped(signum)

    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may handle signals
        return
    previous = {number: signal.signal(number, stop) for number in _STOP_SIGNALS}
    try:
        yield
    except _Stopped as stopped:
        for number in _STOP_SIGNALS:
            signal.signal(number, forward)
        try:
            child.wait(timeout=_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        raise SystemExit(128 + stopped.signum) from None
    except KeyboardInterrupt:
        child.kill()
        child.wait()
        raise
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _count_steps(data: bytes) -> int:
    return data.count(b'"type": "step"')


def _events(data: bytes, name: str) -> list[dict[str, Any]]:
    """The events in ``data`` (JSON lines, from ``name``). A last line cut short by a crash is
    dropped (the child's exit status says it crashed); a damaged line anywhere else is an
    error."""
    lines = data.split(b"\n")
    events: list[dict[str, Any]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            if number == len(lines):
                break
            raise OtelReplayError(f"{name} line {number} is damaged") from None
        events.append(event)
    return events


def _result(
    recorded: Run, events: list[dict[str, Any]], isolation: Isolation | None, code: int
) -> ReplayResult:
    """The comparison from the child's events and its exit status ``code``; ``isolation``
    None means the launcher ran and its event says how CMD was isolated."""
    steps: list[ServedStep] = []
    ran_live: dict[int, tuple[Change, ...]] = {}
    network: list[str] = []
    live_network: list[str] = []
    subprocesses: list[str] = []
    ignored: Counter[str] = Counter()
    elapsed = 0.0
    error: str | None = None
    bad: BadValue | None = None
    # The program is its first process to load us; worker processes report their requests,
    # not the program's end.
    first = next((e.get("pid") for e in events if e.get("type") == "start"), None)
    for event in events:
        kind = event.get("type")
        if kind in ("end", "uncaught") and event.get("pid") != first:
            continue
        if kind == "step":
            steps.append(ServedStep.from_json(event))
        elif kind == "step-live":  # after its step: the call ran live, here is its answer
            try:
                ran_live[int(event["order"])] = changes_from_json(event["changes"])
            except (KeyError, TypeError, ValueError):
                raise OtelReplayError("replay report: a step-live event is damaged") from None
        elif kind == "network":
            network.append(str(event.get("address")))
        elif kind == "network-live":
            live_network.append(str(event.get("address")))
        elif kind == "subprocess":
            subprocesses.append(str(event.get("command")))
        elif kind == "ignored":
            ignored[str(event.get("call"))] += 1
        elif kind == "end":
            elapsed = float(event.get("elapsed_s", 0.0))
        elif kind == "uncaught":
            error = str(event.get("error"))
        elif kind == "bad-value" and bad is None:  # from whichever process met it first
            try:
                bad = BadValue.from_json(event)
            except (KeyError, TypeError, ValueError):
                raise OtelReplayError("replay report: a bad-value event is damaged") from None
        elif kind == "isolation" and isolation is None:
            isolation = Isolation(
                isolated=bool(event.get("isolated")),
                how=event.get("how"),
                loopback=bool(event.get("loopback")),
                reason=event.get("reason"),
                private_proc=bool(event.get("private_proc")),
                seccomp=bool(event.get("seccomp")),
                seccomp_reason=event.get("seccomp_reason"),
            )
    steps = [s.ran_live(ran_live[s.order]) if s.order in ran_live else s for s in steps]
    result = ReplayResult(recorded, steps, network, subprocesses)
    result.elapsed_s = elapsed
    result.hooked = any(event.get("type") == "start" for event in events)
    result.ignored = ignored
    result.agent = AgentStatus(code, error)
    result.bad_value = bad
    result.live_network = live_network
    result.isolation = isolation or Isolation(False, reason="the launcher did not report")
    return result
