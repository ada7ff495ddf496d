"""The installed ``otel-replay`` console script, run as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli._recording import CLAUDE, ERRORS, SUPPORT

pytestmark = pytest.mark.subprocess

SCRIPT = Path(sys.executable).with_name("otel-replay")


def _run(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_REPLAY_")}
    return subprocess.run(
        [str(SCRIPT), *args],
        cwd=cwd,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_console_script(store: Path, tmp_path: Path) -> None:
    assert SCRIPT.exists(), "install the package: pip install -e ."
    listed = _run("runs", cwd=tmp_path, OTEL_REPLAY_STORE=str(store))
    assert listed.returncode == 0, listed.stderr
    ids = [line.split()[0] for line in listed.stdout.splitlines() if line.startswith("r_")]
    assert ids == [CLAUDE, ERRORS, SUPPORT] and listed.stderr == ""

    missing = _run("show", "latest", cwd=tmp_path)  # default store: ./.otel-replay, absent
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr == (
        "Error: no otel-replay store at .otel-replay (pass --store or set OTEL_REPLAY_STORE)\n"
    )
    assert not (tmp_path / ".otel-replay").exists()
