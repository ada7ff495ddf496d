"""A short process recording into S3 loses nothing at its exit.

``_exit_agent.py`` runs under the real ``opentelemetry-instrument`` with
``OTEL_TRACES_EXPORTER=otlp,replay`` and ``OTEL_REPLAY_STORE=s3://…``, against the stand-in
provider, writing into a real S3 server on loopback (moto's, and s3rver from npm), and ends
by returning, by an uncaught exception or by ``sys.exit(3)``. The store is then read back with
the CLI. Before, the first write came at exit, after ``concurrent.futures`` had stopped its
thread pools, which the S3 client needs to connect: ``cannot schedule new futures after
interpreter shutdown``, and every step was lost. And a process that wrote during its run
recorded the store's own S3 requests as steps of its run (each write making more).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from examples.otlp_sink import OtlpSink
from examples.standin import StandIn
from otel_replay.store import Store
from otel_replay.store._index import SCHEMA_VERSION
from tests.export._support import INSTRUMENT, ROOT, subprocess_env
from tests.store import conftest as store_fixtures
from tests.store import test_s3rver

s3_server = store_fixtures.s3_server
s3_bucket = store_fixtures.s3_bucket
s3rver = test_s3rver.s3rver

AGENT = str(Path(__file__).with_name("_exit_agent.py"))
CLI = str(Path(sys.executable).parent / "otel-replay")
RUN_ID = "r_exit_to_s3"
STEPS = 9
ENDINGS = {
    "return": (0, "ok", None),
    "raise": (1, "error", "RuntimeError"),
    "exit": (3, "error", "exit status 3"),
    "thread": (0, "ok", None),
}


def _s3_env(url: str, options: dict[str, Any]) -> dict[str, str]:
    """The environment that points a process (the agent, the CLI) at the bucket."""
    return subprocess_env(
        Path(url),  # a URL: subprocess_env only writes it into OTEL_REPLAY_STORE
        OTEL_REPLAY_STORE=url,
        AWS_ACCESS_KEY_ID=options["key"],
        AWS_SECRET_ACCESS_KEY=options["secret"],
        AWS_ENDPOINT_URL=options["endpoint_url"].replace("127.0.0.1", "localhost"),
        AWS_DEFAULT_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )


def _record_and_read(
    url: str, options: dict[str, Any], ending: str, cache: Path, pause: float = 0.0
) -> None:
    env = _s3_env(url, options) | {"OTEL_REPLAY_CACHE_DIR": str(cache / "recorder")}
    with StandIn(event_delay=0.001) as standin, OtlpSink() as sink:
        env |= {
            "OTEL_TRACES_EXPORTER": "otlp,replay",
            "OTEL_EXPORTER_OTLP_ENDPOINT": sink.grpc_endpoint,
            "OTEL_EXPORTER_OTLP_INSECURE": "true",
            "OTEL_REPLAY_RUN_ID": RUN_ID,
        }
        done = subprocess.run(
            [
                str(INSTRUMENT),
                sys.executable,
                AGENT,
                standin.openai_base_url,
                str(STEPS),
                ending,
                str(pause),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    status, run_status, error_type = ENDINGS[ending]
    assert done.returncode == status, done.stderr
    assert "otel-replay" not in done.stderr  # no failure of ours was logged
    shown = _cli(env, "show", "latest", "--json", "--store", url)
    run = shown["run"]
    assert (run["run_id"], run["status"], run["step_count"]) == (RUN_ID, run_status, STEPS)
    assert run["error_type"] == error_type
    steps = shown["steps"]
    assert [(s["index"], s["kind"], s["status_code"], s["complete"]) for s in steps] == [
        (n, "llm", 200, True) for n in range(STEPS)
    ]
    # The spans too, the process run's root span (ended at exit) among them.
    with Store.open(url, storage_options=options, cache_dir=cache, create=False) as store:
        spans = {s["span_id"]: s for s in store.spans(RUN_ID)}
        assert {f"{s.span_id:016x}" for s in store.steps(RUN_ID)} < set(spans)
        (root,) = [s for s in spans.values() if s["name"] == "invoke_agent _exit_agent.py"]
        assert root["attributes"].get("error.type") == error_type


def _cli(env: dict[str, str], *args: str) -> Any:
    done = subprocess.run(
        [CLI, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_every_step_reaches_s3_at_exit(
    s3_bucket: tuple[str, dict[str, Any]], ending: str, tmp_path: Path
) -> None:
    url, options = s3_bucket
    _record_and_read(url, options, ending, tmp_path)


@pytest.mark.subprocess
def test_every_step_reaches_s3rver_at_exit(s3rver: test_s3rver.S3rver, tmp_path: Path) -> None:
    _record_and_read(test_s3rver.URL, s3rver.options, "return", tmp_path / "cache")


def test_the_stores_own_requests_are_not_recorded(
    s3_bucket: tuple[str, dict[str, Any]], tmp_path: Path
) -> None:
    # Steps far enough apart that the store is written during the run, not only at its end:
    # the store's own requests (through aiohttp) are not steps of the run.
    url, options = s3_bucket
    _record_and_read(url, options, "return", tmp_path, pause=0.3)


def test_an_index_cache_a_later_otel_replay_made_loses_nothing(
    s3_bucket: tuple[str, dict[str, Any]], tmp_path: Path
) -> None:
    """The machine's index cache of the store was made by a later otel-replay (another
    schema). It is only a cache of the bucket: it is set aside and rebuilt, and the run is
    written. (Before, every write failed to open the store, the last one at exit, and the
    run was lost: ``cannot schedule new futures after shutdown``.)"""
    url, options = s3_bucket
    with Store.open(url, storage_options=options, cache_dir=tmp_path / "recorder") as store:
        index = store._index.path  # type: ignore[attr-defined]
    with closing(sqlite3.connect(index)) as db, db:
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    _record_and_read(url, options, "return", tmp_path)
    assert list(Path(index).parent.glob("index.sqlite.broken-*"))  # set aside, not deleted
