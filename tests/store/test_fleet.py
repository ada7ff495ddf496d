"""A fleet: eight machines record into one bucket of a real S3 server through the real
exporter, each with its own index cache, while a ninth runs gc in a loop with a short grace
period. Every step each machine reports is in the store, verify is clean, and the system
prompt they all send is stored once.

The server is moto's, in a process of its own (it serves nine busy clients off the test's
GIL). Not s3rver: it writes an object in place, so a listing shows one half uploaded, which
S3 never does."""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import fsspec
import pytest

from examples.standin import StandIn
from otel_replay.store import Store
from otel_replay.store._pack import entries, parse_table
from tests.export._support import INSTRUMENT, ROOT, subprocess_env
from tests.store._data import chat_bodies, make_step, shared_system

pytestmark = pytest.mark.subprocess

AGENT = str(Path(__file__).with_name("_fleet_agent.py"))
CLI = str(Path(sys.executable).with_name("otel-replay"))
MACHINES, RUNS, TURNS = 8, 2, 4
SEEDS = 3
GRACE_S = "1"
URL = "s3://fleet/store"
ARGS = (str(RUNS), str(TURNS))


@dataclass(frozen=True)
class Server:
    """An S3 server on loopback: fsspec storage options for it."""

    options: dict[str, Any]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """moto's S3 server in its own process, with a bucket ``fleet``."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (tmp_path / "moto.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    endpoint = f"http://127.0.0.1:{port}"
    options = {
        "key": "testing",
        "secret": "testing",
        "endpoint_url": endpoint,
        "client_kwargs": {"region_name": "us-east-1"},
    }
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, "moto died"
                time.sleep(0.1)
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        ).create_bucket(Bucket="fleet")
        yield Server(options)
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


def _env(server: Server, cache: Path) -> dict[str, str]:
    options = server.options
    return subprocess_env(
        Path(URL),
        OTEL_REPLAY_STORE=URL,
        OTEL_REPLAY_CACHE_DIR=str(cache),
        OTEL_REPLAY_GC_GRACE_S=GRACE_S,
        AWS_ACCESS_KEY_ID=options["key"],
        AWS_SECRET_ACCESS_KEY=options["secret"],
        AWS_ENDPOINT_URL=options["endpoint_url"],
        AWS_DEFAULT_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )


class _GcLoop(threading.Thread):
    """gc, again and again, on a machine of its own, until stopped."""

    def __init__(self, server: Server, cache: Path) -> None:
        super().__init__(daemon=True)
        self.server, self.cache = server, cache
        self.stop = threading.Event()
        self.runs = 0
        self.deleted = 0
        self.error: str | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                with Store.open(
                    URL, storage_options=self.server.options, cache_dir=self.cache
                ) as s:
                    report = s.gc()
                assert report.skipped is None, report.skipped
                self.runs += 1
                self.deleted += report.files_removed
                self.stop.wait(0.3)
        except BaseException:  # reported by the test
            self.error = traceback.format_exc()


def _packs_holding(server: Server, digest: bytes) -> list[str]:
    """The packs in the bucket whose table lists ``digest``."""
    fs, root = fsspec.core.url_to_fs(URL, **server.options)
    holding = []
    for key in fs.find(f"{root}/objects"):
        data = fs.cat_file(key)
        if any(e.digest == digest for e in entries(parse_table(data, len(data)))):
            holding.append(key)
    return holding


def test_eight_machines_record_while_gc_runs(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_REPLAY_GC_GRACE_S", GRACE_S)
    started = time.monotonic()
    # Runs recorded before, one small pack each, the first holding the system prompt: the
    # machines find it there when they open the store, and gc's first pass repacks these
    # packs (condemning them) and its next deletes them, while the machines record.
    seed = Store.open(URL, storage_options=server.options, cache_dir=tmp_path / "seed")
    for n in range(SEEDS):
        for index, (request, response) in enumerate(chat_bodies(2, seed=n, shared=True)):
            step = make_step(f"seed-{n}", index, request, response, start_ns=time.time_ns())
            seed.put([step])
        seed.flush()
    seed.close(timeout=0)  # no merge: the packs stay small, for gc to repack
    gc = _GcLoop(server, tmp_path / "gc")
    gc.start()
    with StandIn(event_delay=0.001) as standin:
        agents = [
            subprocess.Popen(
                [str(INSTRUMENT), sys.executable, AGENT, standin.openai_base_url, f"m{n}", *ARGS],
                cwd=ROOT,
                env=_env(server, tmp_path / f"machine-{n}"),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(MACHINES)
        ]
        reported: dict[str, int] = {}
        for agent in agents:
            out, err = agent.communicate(timeout=120)
            assert agent.returncode == 0, err
            assert "otel-replay" not in err, err  # nothing of ours was logged
            for line in out.splitlines():
                _, run_id, calls = line.split()
                reported[run_id] = int(calls)
        gc.stop.set()
        gc.join(timeout=60)
        sent = [r for r in standin.received if r.path == "/v1/chat/completions"]
    assert gc.error is None, gc.error
    assert gc.runs >= 2 and gc.deleted > 0  # gc ran beside the fleet, and deleted packs
    recorded = time.monotonic() - started
    assert len(reported) == MACHINES * RUNS and sum(reported.values()) == len(sent)
    reported |= {f"seed-{n}": 2 for n in range(SEEDS)}
    # Every step every machine reported, read back by a machine that saw none of it.
    env = _env(server, tmp_path / "reader")
    with Store.open(URL, storage_options=server.options, cache_dir=tmp_path / "reader") as store:
        runs = {run.run_id: run for run in store.runs()}
        assert sorted(runs) == sorted(reported), [(r.run_id, r.step_count) for r in runs.values()]
        assert {r: (runs[r].step_count, runs[r].status) for r in reported} == {
            r: (calls, "ok") for r, calls in reported.items()
        }
        stored = sorted(store.request_body(s) for r in reported for s in store.steps(r))
        seeded = [q for n in range(SEEDS) for q, _ in chat_bodies(2, seed=n, shared=True)]
        assert stored == sorted([r.body for r in sent] + seeded)
    done = subprocess.run(
        [CLI, "verify", "--store", URL], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "damaged" not in done.stdout, done.stdout
    # One more gc, a grace period after the fleet: the system prompt is in one pack.
    time.sleep(float(GRACE_S) + 1)
    for _ in range(2):
        with Store.open(URL, storage_options=server.options, cache_dir=tmp_path / "gc") as store:
            store.gc()
        time.sleep(float(GRACE_S) + 1)
    with Store.open(URL, storage_options=server.options, cache_dir=tmp_path / "gc") as store:
        store.gc()
        assert [p for p in store.verify() if p.damage] == []
    assert len(_packs_holding(server, hashlib.sha256(shared_system()).digest())) == 1
    print(
        json.dumps(
            {
                "machines": MACHINES,
                "steps": len(sent),
                "gc_runs": gc.runs,
                "files_gc_removed": gc.deleted,
                "recorded_s": round(recorded, 1),
                "total_s": round(time.monotonic() - started, 1),
            }
        )
    )
