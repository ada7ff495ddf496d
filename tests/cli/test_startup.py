"""Start-up: ``--help`` and ``--version`` import no verb; a verb imports only what it uses;
``--help`` still lists every verb with the one line its own help starts with."""

from __future__ import annotations

import json
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
)
"""What reading a run of the store does not need: the OpenTelemetry SDK and what records
(capture, the envelope), what serves and compares a replay, what reads files, URLs, trace
backends and remote stores (fsspec, asyncio, sockets), what rebuilds the bytes a step was
recorded without (synth), the older formats' reader, and a progress bar."""

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
    heavy = sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in unneeded))
    assert heavy == []
    verbs = {m.rpartition(".")[2] for m in loaded if m.startswith("otel_replay.cli.")}
    assert verbs <= {*_SHARED, f"_{args[0]}"}


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
