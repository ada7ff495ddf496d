"""Recording a framework agent under ``opentelemetry-instrument`` against the stand-in, changing
its world, and replaying it through the ``otel-replay`` CLI with the stand-in gone."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from examples.standin import StandIn
from otel_replay.store import Store
from tests.export._support import INSTRUMENT, ROOT, subprocess_env

HERE = Path(__file__).parent
CLI = Path(sys.executable).parent / "otel-replay"
GONE = "http://127.0.0.1:9"  # the discard port: nothing listens, and strict replay never asks


@dataclass(frozen=True)
class Recording:
    """A recorded agent run: where it is, the database its tools use, what it printed."""

    store: Path
    database: Path
    run_id: str
    printed: str
    script: Path
    args: tuple[str, ...]


def assert_tool_kit(tools: list[dict[str, Any]]) -> None:
    """Each ``execute_tool`` span (its attributes) is a GenAI tool span answering the model's
    own call, with its description and the replay kit's schema version."""
    for attrs in tools:
        assert attrs["gen_ai.operation.name"] == "execute_tool"
        assert attrs["gen_ai.tool.call.id"].startswith("call_")  # the model's own call id
        assert attrs["gen_ai.tool.description"]
        assert attrs["replay.tool.schema.version"].startswith("sha256:")


def record(root: Path, script: str, run_id: str, *args: str, **env: str) -> Recording:
    """Run ``script DATABASE *args`` under ``opentelemetry-instrument`` into a store under
    ``root``, then change the world: the order was delivered and the refunds table emptied."""
    store, database = root / "store", root / "orders.sqlite"
    program = HERE / script
    with StandIn(event_delay=0.001) as standin:
        done = subprocess.run(
            [str(INSTRUMENT), sys.executable, str(program), str(database), *args],
            env=subprocess_env(store, OTEL_REPLAY_RUN_ID=run_id, STANDIN_URL=standin.base_url)
            | env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    with closing(sqlite3.connect(database)) as db, db:
        assert db.execute("SELECT count(*) FROM refunds").fetchone()[0] == 1  # it did write
        db.execute("UPDATE orders SET status = 'delivered'")
        db.execute("DELETE FROM refunds")
    return Recording(store, database, run_id, done.stdout, program, args)


def replay(recording: Recording, *flags: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``otel-replay replay RUN --store S [flags] -- python script DATABASE *args`` with the
    stand-in stopped and no OTEL_ settings but ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "STANDIN_"))}
    program = [sys.executable, str(recording.script), str(recording.database), *recording.args]
    verb = [str(CLI), "replay", recording.run_id, "--store", str(recording.store), *flags]
    return subprocess.run(
        [*verb, "--", *program],
        env=clean | {"STANDIN_URL": GONE, "PYTHONPATH": str(ROOT)} | env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def replay_identically(recording: Recording, **env: str) -> subprocess.CompletedProcess[str]:
    """Replay ``recording`` (with ``env``) and check it came out as recorded: exit 0, the same
    output first, reported identical, no network attempt, no traceback, no refund written
    again."""
    done = replay(recording, **env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(recording.printed)
    assert f"replay of run {recording.run_id}" in done.stdout and "): identical" in done.stdout
    assert "network attempts: 0" in done.stdout
    assert "Traceback" not in done.stderr
    assert refunds(recording.database) == 0
    return done


def assert_a_changed_system_prompt_diverges_at_the_first_call(
    recording: Recording, first_call: int = 0
) -> None:
    """Replayed with another system prompt (``AGENT_SYSTEM``), the run diverges at the first
    model call (step ``first_call``) and says why, with no network attempt and no refund
    written."""
    done = replay(recording, AGENT_SYSTEM="You are the order desk of Contoso. Use the tools.")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"diverged — step {first_call} differs" in done.stdout
    assert "system instructions" in done.stdout and "Contoso" in done.stdout
    assert "network attempts: 0" in done.stdout
    assert refunds(recording.database) == 0


def refunds(database: Path) -> int:
    with closing(sqlite3.connect(database)) as db, db:
        return int(db.execute("SELECT count(*) FROM refunds").fetchone()[0])


def spans(recording: Recording, run_id: str | None = None) -> list[dict[str, Any]]:
    """The stored spans of the recording (or of another run in its store)."""
    with Store.open(recording.store, create=False) as store:
        return list(store.spans(run_id or recording.run_id))


def tool_spans(recording: Recording, run_id: str | None = None) -> list[dict[str, Any]]:
    """The attributes of its tool-step spans, in step order."""
    found = [
        span["attributes"]
        for span in spans(recording, run_id)
        if span["attributes"].get("replay.step.kind") == "tool"
    ]
    return sorted(found, key=lambda attrs: attrs["replay.step.index"])


def run_ids(recording: Recording) -> list[str]:
    with Store.open(recording.store, create=False) as store:
        return [run.run_id for run in store.runs()]
