"""Runs read from a real Phoenix with authentication on, with the API key in
``PHOENIX_API_KEY`` (Phoenix's own variable, which its clients read).

The module starts one Phoenix with ``PHOENIX_ENABLE_AUTH=true``, a JWT secret and an admin
secret, and makes a system API key through its REST API (``POST /v1/system/api_keys`` with
the admin secret as bearer token: how a deployment gets a key without the web UI). The agent
is recorded into it with that key (``OTEL_EXPORTER_OTLP_HEADERS``).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from examples.standin import StandIn
from otel_replay.errors import SourceError
from otel_replay.replay.sources import load_run
from tests.cli._checks import assert_bad_input, run_cli
from tests.replay._phoenix import AGENT, Phoenix, Recording, record, serve

pytestmark = pytest.mark.subprocess

CLI = str(Path(sys.executable).with_name("otel-replay"))
ADMIN_SECRET = "admin-secret-for-the-tests-0123456789"
RUN = "r_phoenix_auth"


@dataclass(frozen=True)
class Guarded:
    """A Phoenix with authentication on, a system API key, and a run recorded with it."""

    phoenix: Phoenix
    key: str
    recording: Recording


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guarded]:
    settings = {
        "PHOENIX_ENABLE_AUTH": "true",
        "PHOENIX_SECRET": "jwt-signing-secret-for-the-tests-0123456789",
        "PHOENIX_ADMIN_SECRET": ADMIN_SECRET,
    }
    with serve(tmp_path_factory.mktemp("phoenix-auth"), **settings) as phoenix:
        key = system_api_key(phoenix)
        with StandIn() as standin:
            recording = record(phoenix, standin, RUN, key=key)
        yield Guarded(phoenix, key, recording)


def system_api_key(phoenix: Phoenix) -> str:
    request = urllib.request.Request(
        f"{phoenix.url}/v1/system/api_keys",
        data=json.dumps({"data": {"name": "otel-replay tests"}}).encode(),
        headers={"Authorization": f"Bearer {ADMIN_SECRET}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        key: str = json.load(answer)["data"]["key"]
    return key


def test_a_run_is_read_and_replayed_with_the_key(
    guarded: Guarded,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("PHOENIX_API_KEY", guarded.key)
    ref = f"{guarded.phoenix.ref}#{RUN}"
    run = load_run(ref)
    assert tuple(s.request_body for s in run.steps) == guarded.recording.bodies
    assert [s.fidelity for s in run.steps] == ["exact"] * len(guarded.recording.bodies)
    env = {**os.environ, "STANDIN_URL": "http://127.0.0.1:9"}
    outputs = []
    for command in (
        ["import", guarded.phoenix.ref, "--store", str(tmp_path / "store")],
        ["replay", ref, "--store", str(tmp_path / "store"), "--", *AGENT],
        ["export", ref, str(tmp_path / "bundle")],
    ):
        done = subprocess.run(
            [CLI, *command], env=env, capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr
        outputs.append(done.stdout + done.stderr)
    assert "network attempts: 0" in outputs[1]
    # The key is in no message, log, stored run or bundle.
    secret = guarded.key.rpartition(".")[2]  # the JWT's signature
    assert secret not in "".join(outputs) + caplog.text + str(run)
    for path in [*tmp_path.rglob("*")]:
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_without_the_key_or_with_another_it_is_one_line(
    guarded: Guarded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = guarded.phoenix.ref
    store = str(tmp_path / "s")
    monkeypatch.delenv("PHOENIX_API_KEY", raising=False)
    line = assert_bad_input(run_cli("import", ref, "--store", store))
    assert line == (
        f"Error: {ref}/default: the server asks for an API key: set PHOENIX_API_KEY (HTTP 401)"
    )
    wrong = "px-wrong-key-5309-" + guarded.key[-8:]
    monkeypatch.setenv("PHOENIX_API_KEY", wrong)
    line = assert_bad_input(run_cli("import", f"{ref}#{RUN}", "--store", store))
    assert line == (
        f"Error: {ref}/default: the server refused the API key in PHOENIX_API_KEY (HTTP 401)"
    )
    # A key a header cannot carry is refused before any request, without being quoted.
    asked = len(guarded.phoenix.requests())
    monkeypatch.setenv("PHOENIX_API_KEY", "px-line-one\r\nX-Injected: px-line-two")
    with pytest.raises(SourceError) as caught:
        load_run(ref)
    assert str(caught.value) == (
        f"{ref}/default: PHOENIX_API_KEY holds characters an HTTP header cannot carry "
        "(spaces, line breaks, non-ASCII)"
    )
    assert len(guarded.phoenix.requests()) == asked
