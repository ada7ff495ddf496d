"""Start-up: ``--help`` and ``--version`` import no verb; a verb imports only what it uses,
``replay`` and the program it replays included; ``--help`` still lists every verb with the one
line its own help starts with."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from otel_replay.cli.main import VERBS, cli
from tests.cli._checks import run_cli
from tests.cli._recording import SUPPORT

# Prints the exit status of `otel-replay ARGS` and the modules it left loaded.
_PROBE = """
import json, sys
from otel_replay.cli.main import main
sys.argv = ["otel-replay", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    status = exc.code
print(json.dumps([status, sorted(sys.modules)]))
"""


def _loaded(*args: str, status: int | None = None) -> set[str]:
    """The modules ``otel-replay ARGS`` left loaded; its exit status is ``status`` if given."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, check=True
    )
    exited, modules = json.loads(done.stdout.splitlines()[-1])
    assert status is None or exited == status, done.stderr
    return set(modules)


@pytest.mark.subprocess
def test_help_and_version_import_no_verb() -> None:
    for args in (["--help"], ["--version"], []):
        loaded = _loaded(*args)
        ours = {m for m in loaded if m.startswith("otel_replay")}
        assert ours == {
            "otel_replay",
            "otel_replay._lazy",
            "otel_replay._printable",
            "otel_replay.cli",
            "otel_replay.cli._format",
            "otel_replay.cli.main",
            "otel_replay.errors",
        }, args
        assert not loaded & {"rich", "opentelemetry", "orjson", "zstandard", "wrapt"}, args


HEAVY = (
    "opentelemetry.sdk",
    "opentelemetry.trace",
    "wrapt",
    "jsonschema",
    "httpx",
    "fsspec",
    "asyncio",
    "socket",
    "http.client",
    "rich.progress",
    "otel_replay.capture",
    "otel_replay.envelope",
    "otel_replay.runs",
    "otel_replay.export",
    "otel_replay.report",
    "otel_replay.replay.transports",
    "otel_replay.replay._diff",
    "otel_replay.replay._session",
    "otel_replay.replay.sources._load",
    "otel_replay.replay.sources._fetch",
    "otel_replay.replay.sources._backends",
    "otel_replay.replay.sources._import",
    "otel_replay.replay.sources._bundle",
    "otel_replay.replay.synth",
    "otel_replay.store._migrate",
    "otel_replay.store._v2",
    "otel_replay.store._write",
    "otel_replay.store._condemned",
    "otel_replay.store._reports",
    "otel_replay.replay.sources._documents",
    "otel_replay.replay.sources._limits",
    "otel_replay._ignore",
    "concurrent.futures",
    "logging",
    "secrets",
    "rich._emoji_codes",
)
"""What reading a run of the store does not need: the OpenTelemetry SDK and what records
(capture, the envelope), what serves and compares a replay, what reads files, URLs, trace
backends and remote stores (fsspec, asyncio, sockets), what rebuilds the bytes a step was
recorded without (synth), the older formats' reader, and a progress bar; nor what writes a
store (its writer, the upkeep's reports, the fsync threads), the background-traffic rules,
logging, or rich's emoji table (a table's headers hold no emoji code). Each is start-up time
a reader would pay for nothing."""

RUNS_UNNEEDED = (
    "otel_replay.store._records",
    "otel_replay.store._derived",
    "otel_replay.codecs",
    "otel_replay.cli._messages",
    "otel_replay.cli._steps",
)
"""What listing the runs does not need besides: it reads the index alone, never a record
file (its decoder, and the codecs that rebuild a span's content) nor a message."""

_SHARED = {"main", "_common", "_format", "_messages", "_tables", "_steps", "_runs"}
"""The modules of ``otel_replay.cli`` besides the verb's own that a verb may load."""


@pytest.mark.subprocess
@pytest.mark.parametrize(
    "args",
    [("runs",), ("runs", "--json"), ("show", SUPPORT), ("show", SUPPORT[:15], "--json")],
    ids=" ".join,
)
def test_a_verb_that_reads_the_store_loads_nothing_heavy(
    store: Path, args: tuple[str, ...]
) -> None:
    """``runs`` and ``show`` (typed by hand, at 3 a.m.) start in a fraction of the time that
    loading the SDK, the replay machinery and every verb would take."""
    loaded = _loaded(*args, "--store", str(store), status=0)
    assert f"otel_replay.cli._{args[0]}" in loaded and "otel_replay.store" in loaded
    # JSON, for a script, is printed without rich (a table needs it).
    unneeded = (*HEAVY, "rich") if "--json" in args else HEAVY
    if args[0] == "runs":
        unneeded = (*unneeded, *RUNS_UNNEEDED)
    heavy = sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in unneeded))
    assert heavy == []
    verbs = {m.rpartition(".")[2] for m in loaded if m.startswith("otel_replay.cli.")}
    assert verbs <= {*_SHARED, f"_{args[0]}"}


REPLAY_UNNEEDED = (
    "opentelemetry.sdk",
    "wrapt",
    "asyncio",
    "http.client",
    "urllib.request",
    "ssl",
    "jsonschema",
    "httpx",
    "fsspec",
    "pytest",
    "time_machine",
    "otel_replay._workers",
    "otel_replay.capture",
    "otel_replay.export",
    "otel_replay.report",
    "otel_replay.envelope._steps",
    "otel_replay.runs._handoff",
    "otel_replay.runs._process_trace",
    "otel_replay.replay._child",
    "otel_replay.replay._session",
    "otel_replay.replay.transports",
    "otel_replay.replay.sources._backends",
    "otel_replay.replay.sources._fetch",
)
"""What the ``replay`` verb's own process needs neither to start CMD nor to print the
comparison: what records and serves steps (CMD's process does), what downloads a remote
source, what writes an HTML report."""


def _among(loaded: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == n or m.startswith(n + ".") for n in names))


@pytest.mark.subprocess
def test_the_replay_verb_loads_only_what_its_comparison_needs(store: Path) -> None:
    """A replay runs in CI by the hundred: the verb's own process starts CMD and prints
    the report without loading the OpenTelemetry SDK, wrapt or the network code."""
    command = ("--", sys.executable, "-c", "pass")  # requests nothing: diverged
    loaded = _loaded("replay", SUPPORT, "--store", str(store), *command, status=1)
    assert {"otel_replay.cli._replay", "otel_replay.replay._result"} <= loaded
    assert _among(loaded, REPLAY_UNNEEDED) == []


CLI = Path(sys.executable).with_name("otel-replay")

# Writes the modules the replayed program has loaded when its own code starts to ARGV[1].
_LISTS_ITS_MODULES = """
import json, sys
with open(sys.argv[1], "w", encoding="utf-8") as listing:
    json.dump(sorted(sys.modules), listing)
"""


def _without_otel() -> dict[str, str]:
    """This environment without any OTEL_ setting (the tests' own recording ones)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}


def _replay(store: Path, cwd: Path, *command: str) -> subprocess.CompletedProcess[str]:
    """``otel-replay replay SUPPORT -- COMMAND`` in ``cwd``, with no OTEL_ setting inherited."""
    return subprocess.run(
        [str(CLI), "replay", SUPPORT, "--store", str(store), "--", *command],
        env=_without_otel(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.subprocess
def test_a_replayed_program_starts_without_pytest(store: Path, tmp_path: Path) -> None:
    """time_machine, which gives the replayed program the recorded clock, imports pytest
    for its plugin wherever pytest is installed; a program that is no pytest session does
    not pay for it."""
    program, listing = tmp_path / "program.py", tmp_path / "modules.json"
    program.write_text(_LISTS_ITS_MODULES, encoding="utf-8")
    done = _replay(store, tmp_path, sys.executable, str(program), str(listing))
    assert "Traceback" not in done.stderr, done.stderr
    loaded = set(json.loads(listing.read_text(encoding="utf-8")))
    assert {"otel_replay.replay._child", "time_machine"} <= loaded  # the clock is frozen
    assert _among(loaded, ("pytest", "_pytest")) == []


_CLOCK_TEST = """
import datetime as dt

def test_the_fixture_sets_the_clock(time_machine):
    time_machine.move_to(dt.datetime(2031, 1, 2, tzinfo=dt.timezone.utc), tick=False)
    assert dt.datetime.now(dt.timezone.utc).year == 2031
"""


@pytest.mark.subprocess
@pytest.mark.parametrize(
    "session",
    [
        (sys.executable, "-m", "pytest"),
        (str(Path(sys.executable).with_name("pytest")),),
        (sys.executable, "-c", "import sys, pytest; sys.exit(pytest.main())"),
    ],
    ids=["-m pytest", "pytest", "-c"],
)
def test_a_replayed_pytest_session_keeps_time_machines_plugin(
    store: Path, tmp_path: Path, session: tuple[str, ...]
) -> None:
    """A pytest session replayed (or a program given as -c code, as pytest-xdist's workers
    are) imports time_machine with pytest: its fixture and marker work as unreplayed."""
    (tmp_path / "test_clock.py").write_text(_CLOCK_TEST, encoding="utf-8")
    done = _replay(store, tmp_path, *session, "-p", "no:cacheprovider", "test_clock.py")
    assert "1 passed" in done.stdout, done.stdout + done.stderr


_MARKED_TEST = """
import json, sys
import pytest

@pytest.mark.otel_replay({run!r}, store={store!r})
def test_lists_its_modules(replay_result):
    with open({listing!r}, "w", encoding="utf-8") as listing:
        json.dump(sorted(sys.modules), listing)
"""

MARKED_UNNEEDED = (
    "opentelemetry.sdk",
    "psutil",
    "otel_replay.capture._recorder",
    "otel_replay.capture._calls",
    "otel_replay.capture._metrics",
    "otel_replay.runs._handoff",
    "otel_replay.export",
)
"""What a marked test's replay does not need: it records nothing, so neither the
OpenTelemetry SDK (and the process facts its resources read) nor the recorder and its span
processor, nor the hooks of frameworks it does not import; each pytest-xdist worker would
pay for them before its first test."""


@pytest.mark.subprocess
def test_a_marked_test_replays_without_the_recording_side(store: Path, tmp_path: Path) -> None:
    """The ``otel_replay`` marker serves the test from the recording with the replay's
    own modules only."""
    listing = tmp_path / "modules.json"
    test = _MARKED_TEST.format(run=SUPPORT, store=str(store), listing=str(listing))
    (tmp_path / "test_marked.py").write_text(test, encoding="utf-8")
    plugin = ["-p", "otel_replay.testing.pytest_plugin", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *plugin, "-q", "test_marked.py"],
        env=_without_otel() | {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "1 passed" in done.stdout, done.stdout + done.stderr
    loaded = set(json.loads(listing.read_text(encoding="utf-8")))
    assert {"otel_replay.replay._session", "otel_replay.capture._step"} <= loaded
    assert _among(loaded, MARKED_UNNEEDED) == []
    hooks = sorted(m for m in loaded if m.startswith("otel_replay.envelope.frameworks._"))
    assert hooks == []


def test_the_replay_sources_load_each_name_from_where_it_lives() -> None:
    """``otel_replay.replay.sources`` loads a name's module when the name is first used."""
    from otel_replay.replay import sources

    for name in sources.__all__:
        assert getattr(sources, name).__module__ == sources._LAZY[name], name


def test_help_lists_every_verb_as_its_own_help_says() -> None:
    ctx = click.Context(cli, info_name="otel-replay")
    commands = {name: cli.get_command(ctx, name) for name in cli.list_commands(ctx)}
    for name, command in commands.items():
        assert command is not None and command.name == name
        summary = click.Command(name, help=VERBS[name].summary)
        assert summary.get_short_help_str(10**6) == command.get_short_help_str(10**6), name
    # What click lays out with every verb loaded is what the lazy group prints.
    for width in (50, 80, 200):
        loaded = click.HelpFormatter(width=width)
        click.Group("otel-replay", commands=commands).format_commands(ctx, loaded)
        lazy = click.HelpFormatter(width=width)
        cli.format_commands(ctx, lazy)
        assert lazy.getvalue() == loaded.getvalue()
    shown = run_cli("--help").stdout
    for name in VERBS:
        assert f"\n  {name} " in shown
