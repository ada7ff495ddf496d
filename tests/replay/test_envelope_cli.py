"""The order-desk example through the real program: recorded under opentelemetry-instrument,
its database changed, replayed with the provider gone."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from examples.standin import StandIn
from otel_replay.store import Store
from tests.export._support import INSTRUMENT, ROOT, subprocess_env

pytestmark = pytest.mark.subprocess

AGENT = ROOT / "examples" / "orders_agent.py"
CLI = Path(sys.executable).parent / "otel-replay"


def record_orders(root: Path, standin: StandIn) -> tuple[Path, Path, str]:
    """Record the order desk as run ``r_orders`` against ``standin``, then change its
    database (the order since delivered, the refund gone): the store, the database and what
    the agent printed."""
    store, database = root / "store", root / "orders.sqlite"
    done = subprocess.run(
        [str(INSTRUMENT), sys.executable, str(AGENT), str(database)],
        env=subprocess_env(store, OTEL_REPLAY_RUN_ID="r_orders", STANDIN_URL=standin.base_url),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    with closing(sqlite3.connect(database)) as db, db:
        db.execute("UPDATE orders SET status = 'delivered'")
        db.execute("DELETE FROM refunds")
    return store, database, done.stdout


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """The store, the database (the order since delivered) and what the agent printed."""
    with StandIn(event_delay=0.001) as standin:
        return record_orders(tmp_path_factory.mktemp("orders"), standin)


def _replay(store: Path, database: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "STANDIN_"))}
    program = [sys.executable, str(AGENT), str(database)]
    return subprocess.run(
        [str(CLI), "replay", "r_orders", "--store", str(store), *flags, "--", *program],
        env=env | {"STANDIN_URL": "http://127.0.0.1:9", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _table(stdout: str) -> list[list[str]]:
    """The rows of the report's steps table, each cell a string (the effect column is empty
    but for tools)."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("request   step"))
    rows = [line for line in lines[start + 2 :] if re.match(r"\d+ +\d+ ", line)]
    return [re.split(r"\s{2,}", row.strip()) for row in rows]


def _refunds(database: Path) -> int:
    with closing(sqlite3.connect(database)) as db, db:
        return int(db.execute("SELECT count(*) FROM refunds").fetchone()[0])


def test_the_world_is_frozen_and_no_write_repeats(recorded: tuple[Path, Path, str]) -> None:
    store, database, printed = recorded
    done = _replay(store, database)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(printed)  # the order still "shipped", the same ticket
    assert '"status": "shipped"' in printed
    assert "replay of run r_orders" in done.stdout and "): identical" in done.stdout
    assert "network attempts: 0" in done.stdout
    assert _refunds(database) == 0


def test_live_read_tools_see_today_and_the_report_says_where(
    recorded: tuple[Path, Path, str],
) -> None:
    store, database, _ = recorded
    done = _replay(store, database, "--live-tools", "read")
    assert done.returncode == 1, done.stdout + done.stderr
    assert '"status": "delivered"' in done.stdout  # lookup_order read today's database
    # The replay diverges where today's data came in, at the tool, not at the next model call.
    assert "diverged — step 3 ran live and differs from the recording" in done.stdout
    assert (
        "first divergence: step 3 (tool:lookup_order), request 3, matched by hash, ran live\n"
        "  result $.status: shipped → delivered\n"
    ) in done.stdout
    # Each tool's effect, and why: declared by @otel_replay.tool(effect=...).
    assert [[row[2], *row[5:]] for row in _table(done.stdout)] == [
        ["value:uuid4", "identical"],
        ["value:now", "identical"],
        ["openai.chat_completions", "identical"],
        ["tool:lookup_order", "live, differs: result", "read: declared"],
        ["openai.chat_completions", "differs: prompt hash, messages"],
        ["openai.chat_completions", "differs: prompt hash, messages"],
        ["tool:refund_order", "identical", "write: declared"],  # served, never live
        ["openai.chat_completions", "differs: prompt hash, messages"],
        ["checkpoint:closed", "identical"],
    ]
    assert _refunds(database) == 0  # the write tool still did not run


def test_each_tool_step_names_the_model_tool_call_it_answers(
    recorded: tuple[Path, Path, str],
) -> None:
    store, _, _ = recorded
    with Store.open(store, create=False) as opened:
        spans = opened.spans("r_orders")
    asked = {
        part["id"]: (part["name"], part["arguments"])
        for span in spans
        for message in json.loads(span["attributes"].get("gen_ai.output.messages", "[]"))
        for part in message["parts"]
        if part["type"] == "tool_call"
    }
    tools = [s["attributes"] for s in spans if s["attributes"].get("replay.step.kind") == "tool"]
    assert len(tools) == 2 and len(asked) == 2
    for attrs in tools:
        name, arguments = asked[attrs["gen_ai.tool.call.id"]]
        assert name == attrs["gen_ai.tool.name"]
        assert json.loads(attrs["gen_ai.tool.call.arguments"]) == arguments


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"COLUMNS": "250"}
    done = subprocess.run(
        [str(CLI), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done


def _show(store: Path) -> tuple[dict[str, object], list[dict[str, object]]]:
    """``show r_orders --json`` of ``store``: its steps without their span ids (an
    imported bundle's are made on import), and the run's start."""
    shown = json.loads(_cli("show", "r_orders", "--store", str(store), "--json").stdout)
    steps = [
        {k: v for k, v in step.items() if k not in ("trace_id", "span_id")}
        for step in shown["steps"]
    ]
    return shown["run"]["start_ns"], steps


def test_an_exported_bundle_imported_is_the_run_again(
    recorded: tuple[Path, Path, str], tmp_path: Path
) -> None:
    # A bundle holds no spans: every step (model calls, tools, values, a checkpoint, a value
    # made inside a tool) is brought in from the manifest, as show and replay see it.
    store, database, _ = recorded
    bundle, fresh = tmp_path / "bundle", tmp_path / "fresh"
    _cli("export", "r_orders", str(bundle), "--store", str(store))
    imported = _cli("import", str(bundle), "--store", str(fresh)).stdout.splitlines()
    assert imported == [
        "r_orders: imported 10 steps (10 exact, 0 semantic), 10 stored with their bytes",
        f"1 run imported into {fresh}",
    ]
    assert _show(fresh) == _show(store)
    # show reads a bundle itself through a temporary store the same way.
    shown = json.loads(_cli("show", str(bundle), "--json").stdout)
    assert [step["index"] for step in shown["steps"]] == list(range(10))
    table = _cli("show", "r_orders", "--store", str(fresh)).stdout
    assert "refund_order (write: declared)" in table and "└ value in 6" in table
    replayed = _replay(fresh, database)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "10 recorded steps" in replayed.stdout and "matched: hash 9" in replayed.stdout
    # Imported again, into the same store or into the one it was exported from: there.
    for target in (fresh, store):
        again = _cli("import", str(bundle), "--store", str(target)).stdout.splitlines()
        assert (
            again[0]
            == "r_orders: already in the store, 10 steps (10 exact, 0 semantic); nothing changed"
        )
