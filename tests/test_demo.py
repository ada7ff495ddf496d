"""`make demo` keeps working: record the agent, show the run, verify the store, replay it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_demo_records_shows_verifies_and_replays(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_"))}
    env["OTEL_REPLAY_STORE"] = str(tmp_path / "store")
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    counted = re.search(
        r"(\d+) steps exported over OTLP in run (\S+); (\d+)/(\d+) request", done.stdout
    )
    assert counted is not None, done.stdout
    steps, run_id, matched, received = counted.groups()
    assert int(steps) == int(matched) == int(received) >= 6
    assert f"run {run_id}  ok" in done.stdout
    assert re.search(
        rf"{run_id}\s+\S+ \S+ \(just now\)\s+ok\s+record\s+{steps}\s+gpt-4o-mini", done.stdout
    )
    assert "is intact" in done.stdout
    assert f"replay of run {run_id} (store {tmp_path / 'store'}): identical" in done.stdout
    assert (
        f"{steps} requests, {steps} served from {steps} recorded steps; matched: hash {steps}"
        in (done.stdout)
    )
    assert f"replay of run {run_id} (store {tmp_path / 'store'}): diverged — step 0 differs" in (
        done.stdout
    )
    # The changed prompt, each side lined up from where it differs.
    assert "  system instructions (message 0): differs from character 20 (" in done.stdout
    assert "    recorded: system: You are Ada, the customer-support assistant" in done.stdout
    assert "    replayed: system: You are Ada. Answer in one short sentence.\n" in done.stdout
    assert "network attempts: 0" in done.stdout
    assert "the changed prompt diverged as reported" in done.stdout
    # The tools demo: recorded, the database changed, replayed identically, no write again.
    orders = re.search(r"replay of run (r_demo_orders_\w+) \(store [^)]*\): identical", done.stdout)
    assert orders is not None, done.stdout
    replayed = done.stdout.split("The order is now delivered in the database", 1)[1]
    lookups = re.findall(r"\[tool\] lookup_order -> .*", done.stdout)
    assert len(lookups) == 2 and lookups[0] == lookups[1] and '"status": "shipped"' in lookups[1]
    tickets = re.findall(r"ticket (\S+) opened (\S+)", done.stdout)
    assert len(tickets) == 2 and tickets[0] == tickets[1]
    assert re.search(r"6\s+6\s+tool:refund_order\s+hash\s+exact\s+identical", replayed)
    assert "which holds 1 refund(s)" in replayed and "still 1 refund(s)" in replayed
    what_if = done.stdout.split("What if the provider had rate-limited step ", 1)[1]
    step = what_if.split("?", 1)[0]
    assert f"fork of run {run_id}:\n  step {step} (openai.chat_completions): inject http:429" in (
        what_if
    )
    assert f"$ otel-replay diff {run_id} r_" in what_if
    assert f"demo: forked run {run_id} with a 429 at step {step}" in what_if
    # The reports, beside the store: the run, and the fork against it.
    run_report, fork_report = tmp_path / "report.html", tmp_path / "report-fork.html"
    assert f"wrote the report of run {run_id} ({steps} steps) to {run_report}" in done.stdout
    assert f"wrote the report of run {run_id} against run r_" in done.stdout
    assert f"open in a browser: {run_report} (the run), {fork_report}" in done.stdout
    assert run_report.read_text().count('"kind":"llm"') >= 3
    assert "first divergence: step " in fork_report.read_text()
    assert "Traceback" not in done.stderr
