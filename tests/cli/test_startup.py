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

# Prints the otel_replay modules and the third-party packages left loaded by `otel-replay ARGS`.
_PROBE = """
import json, sys
from otel_replay.cli.main import main
sys.argv = ["otel-replay", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def _loaded(*args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, check=True
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.subprocess
def test_help_and_version_import_no_verb() -> None:
    for args in (["--help"], ["--version"], []):
        loaded = _loaded(*args)
        ours = {m for m in loaded if m.startswith("otel_replay")}
        assert ours == {
            "otel_replay",
            "otel_replay._printable",
            "otel_replay.cli",
            "otel_replay.cli._format",
            "otel_replay.cli.main",
            "otel_replay.errors",
        }, args
        assert not loaded & {"rich", "opentelemetry", "orjson", "zstandard", "wrapt"}, args


@pytest.mark.subprocess
def test_runs_loads_neither_replay_nor_capture(tmp_path: Path) -> None:
    loaded = _loaded("runs", "--store", str(tmp_path / "none"))
    assert "otel_replay.cli._runs" in loaded and "otel_replay.store" in loaded
    assert not {m for m in loaded if m.startswith(("otel_replay.replay", "otel_replay.capture"))}
    assert not loaded & {"opentelemetry", "wrapt", "jsonschema", "otel_replay.cli._replay"}


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
