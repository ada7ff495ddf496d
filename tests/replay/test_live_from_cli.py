"""``otel-replay replay RUN --live-from N -- python orders_agent.py`` with the stand-in running.

The order-desk example (values, a read tool on SQLite, a write tool, a checkpoint, the real
openai SDK) is recorded once under ``opentelemetry-instrument`` against a stand-in that keeps
running; its database is then changed (the order since delivered, the refund gone). Each
test replays it through the real command: the stand-in's log of requests says which model
calls went live, the database's refunds table whether the write tool ran.

Recorded steps: 0 ``value:uuid4``, 1 ``value:now``, 2 model, 3 ``tool:lookup_order`` (read),
4 model, 5 model, 6 ``tool:refund_order`` (write; 7, the uuid drawn inside it, is served with
it), 8 model, 9 ``checkpoint:closed``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest

from examples.standin import StandIn
from tests.export._support import ROOT
from tests.replay.test_envelope_cli import AGENT, CLI, record_orders

pytestmark = pytest.mark.subprocess

CHAT = "/v1/chat/completions"


@dataclass(frozen=True)
class Recorded:
    standin: StandIn
    store: Path
    database: Path
    printed: str


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    with StandIn(event_delay=0) as standin:
        store, database, printed = record_orders(tmp_path_factory.mktemp("orders-live"), standin)
        yield Recorded(standin, store, database, printed)


def _replay(
    recorded: Recorded, *flags: str, program: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    recorded.standin.clear()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "STANDIN_"))}
    program = program or (sys.executable, str(AGENT), str(recorded.database))
    store = str(recorded.store)
    return subprocess.run(
        [str(CLI), "replay", "r_orders", "--store", store, *flags, "--", *program],
        env=env | {"STANDIN_URL": recorded.standin.base_url, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _rows(stdout: str) -> list[tuple[str, str]]:
    """(endpoint, result) of each row of the report's steps table."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("request   step"))
    rows = [line for line in lines[start + 2 :] if re.match(r"\d+ +[\d-]+ ", line)]
    cells = [re.split(r"\s{2,}", row.strip()) for row in rows]
    return [(cell[2], cell[5]) for cell in cells]


def _refunds(database: Path) -> int:
    with closing(sqlite3.connect(database)) as db, db:
        return int(db.execute("SELECT count(*) FROM refunds").fetchone()[0])


def _ticket(printed: str) -> str:
    return printed.splitlines()[0]


def test_live_from_a_read_tool(recorded: Recorded) -> None:
    """From step 3 on: today's database is read, the model calls after it reach the stand-in
    (the one before does not), the write tool is still served, and the values before were."""
    done = _replay(recorded, "--live-from", "3")
    assert [r.path for r in recorded.standin.received] == [CHAT] * 3  # steps 4, 5 and 8
    assert _ticket(done.stdout) == _ticket(recorded.printed)  # uuid4 and now: served
    assert '"status": "delivered"' in done.stdout  # lookup_order read today's database
    assert _refunds(recorded.database) == 0  # refund_order was served, not run
    assert "live from step 3 (request 3)" in done.stdout
    assert "live from step 3 (request 3): 5 call(s) sent live" in done.stdout
    assert "9 requests, 4 served from 10 recorded steps;" in done.stdout
    rows = _rows(done.stdout)
    assert [result for _, result in rows[:3]] == ["identical"] * 3
    assert all(result.startswith("live") for _, result in rows[3:6]), rows
    assert rows[6] == ("tool:refund_order", "identical")  # a write tool is never sent live
    assert all(result.startswith("live") for _, result in rows[7:]), rows
    # Today's database changed the answer: the replay diverges where the live read came in.
    assert done.returncode == 1, done.stdout + done.stderr
    assert "network attempts: 1 (let through: live)" in done.stdout  # one kept-alive connect
    # The fork is a run whose steps say which were served and which went live.
    fork = re.search(r"recorded as run (\S+)", done.stdout)
    assert fork is not None, done.stdout
    shown = subprocess.run(
        [str(CLI), "show", fork.group(1), "--store", str(recorded.store), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    document = json.loads(shown.stdout)
    assert document["run"]["mode"] == "fork"
    marks = [(step["kind"], step.get("fork")) for step in document["steps"]]
    assert marks == [
        ("value", "served"),
        ("value", "served"),
        ("llm", "served"),
        ("tool", "live"),
        ("llm", "live"),
        ("llm", "live"),
        ("tool", "served"),  # the write tool
        ("llm", "live"),
        ("checkpoint", "live"),
    ], marks


def test_a_step_made_inside_a_write_tool_is_not_forked_alone(recorded: Recorded) -> None:
    """Step 7, the uuid drawn inside refund_order, is served with it: an override there would
    never be asked for, so it is refused before the program runs."""
    done = _replay(recorded, "--override", '7="00000000-0000-0000-0000-000000000000"')
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == (
        "Error: --override 7: the step is made inside step 6 (tool:refund_order), a write "
        "tool the fork serves whole without running it; change step 6, or add --allow-writes"
    )
    assert recorded.standin.received == []


def test_live_from_the_start_draws_values_live(recorded: Recorded) -> None:
    started = dt.datetime.now(dt.timezone.utc)
    done = _replay(recorded, "--live-from", "0")
    assert [r.path for r in recorded.standin.received] == [CHAT] * 4
    ticket, _, opened = _ticket(done.stdout).split()[1:]
    recorded_ticket, _, recorded_opened = _ticket(recorded.printed).split()[1:]
    assert ticket != recorded_ticket  # a new uuid4
    assert dt.datetime.fromisoformat(opened) >= started > dt.datetime.fromisoformat(recorded_opened)
    assert _refunds(recorded.database) == 0
    assert "live from step 0 (request 0)" in done.stdout


def test_a_live_from_step_that_does_not_exist_is_one_line(recorded: Recorded) -> None:
    done = _replay(recorded, "--live-from", "10")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "--live-from 10" in done.stderr
    assert recorded.standin.received == []


def test_before_the_live_point_the_network_is_refused_and_reported(recorded: Recorded) -> None:
    """The program draws the ticket (step 0), then reaches for the stand-in with urllib, which
    no replay transport serves, and stops: refused in-process, as no namespace stands in the
    way, and the fork never goes live."""
    url = f"{recorded.standin.tools_url}/orders/A-1234"
    script = (
        "import urllib.request, otel_replay\n"
        "otel_replay.uuid4()\n"
        "try:\n"
        f"    urllib.request.urlopen({url!r}, timeout=5)\n"
        "except OSError as exc:\n"
        "    print('refused:', type(getattr(exc, 'reason', exc)).__name__)\n"
    )
    done = _replay(recorded, "--live-from", "3", program=(sys.executable, "-c", script))
    assert recorded.standin.received == []
    assert "refused: NetworkBlockedError" in done.stdout, done.stdout + done.stderr
    address = f"{recorded.standin.host}:{recorded.standin.port}"
    assert f"refused network access: {address}" in done.stdout
    assert "never went live: no call reached step 3" in done.stdout
    assert done.returncode == 1
