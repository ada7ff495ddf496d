"""Which framework tools a replay may run live: only those someone declared to only read (the
MCP server's ``readOnlyHint``, ``OTEL_REPLAY_READ_TOOLS``, ``effect="read"``). A tool declared
nowhere is a write and is served from the recording, whatever ``--live-tools`` says; ``show``
and the replay report say why each tool has its effect. Through the real CLI, against agents
recorded as production agents are: with no otel-replay setting at all."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from otel_replay.store import Store
from tests.frameworks._support import CLI, Recording, record, refunds, replay


def _show(store: Path, run_id: str, *flags: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [str(CLI), "show", run_id, "--store", str(store), *flags],
        env=clean | {"COLUMNS": "250"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _shown_tools(store: Path, run_id: str) -> dict[str, str]:
    """What ``show`` says of each tool whose effect has a reason (``name (effect: why)``), by
    tool name."""
    shown = re.findall(r"^\s*\d+\s+tool\s+(\w+) \((\w+: [^)]*)\)", _show(store, run_id), re.M)
    return dict(shown)


def _reported_tools(stdout: str) -> list[tuple[str, str, str]]:
    """The tool rows of the replay report's steps table: (endpoint, result, effect)."""
    rows = [re.split(r"\s{2,}", line.strip()) for line in stdout.splitlines()]
    return [(row[2], row[5], row[6]) for row in rows if len(row) == 7 and row[0].isdigit()]


def _replayed_run(stdout: str) -> str:
    found = re.search(r"recorded as run (r_\w+)", stdout)
    assert found, stdout
    return found.group(1)


@pytest.fixture(scope="module")
def langgraph(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    # LangGraph, its tools plain LangChain @tool functions; issue_refund inserts a row.
    recording = record(
        tmp_path_factory.mktemp("effects"), "_langgraph_agent.py", "r_effects", "issue_refund"
    )
    assert '[tool] issue_refund -> {"refund_id": "R-' in recording.printed
    return recording


def test_an_undeclared_tool_is_a_write_and_never_runs_live(langgraph: Recording) -> None:
    done = replay(langgraph, "--live-tools", "read")
    assert refunds(langgraph.database) == 0, "issue_refund ran live in a replay"
    # Neither tool ran: the replay is the recording, the order still "shipped".
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(langgraph.printed)
    assert _reported_tools(done.stdout) == [
        ("tool:lookup_order", "identical", "write: declared nowhere"),
        ("tool:issue_refund", "identical", "write: declared nowhere"),
    ]
    assert _shown_tools(langgraph.store, langgraph.run_id) == {
        "lookup_order": "write: declared nowhere",
        "issue_refund": "write: declared nowhere",
    }


def test_a_tool_the_setting_declares_a_read_runs_live_and_the_write_still_does_not(
    langgraph: Recording,
) -> None:
    done = replay(langgraph, "--live-tools", "read", OTEL_REPLAY_READ_TOOLS="lookup_order")
    assert refunds(langgraph.database) == 0, "issue_refund ran live in a replay"
    assert done.returncode == 1, done.stdout + done.stderr  # today's read changed the run
    assert '"status": "delivered"' in done.stdout  # lookup_order read today's database
    assert _reported_tools(done.stdout) == [
        ("tool:lookup_order", "live, differs: result", "read: OTEL_REPLAY_READ_TOOLS"),
        ("tool:issue_refund", "identical", "write: declared nowhere"),
    ]
    # The replay's own run records each tool's effect in it, and why.
    assert _shown_tools(langgraph.store, _replayed_run(done.stdout)) == {
        "lookup_order": "read: OTEL_REPLAY_READ_TOOLS",
        "issue_refund": "write: declared nowhere",
    }


def test_a_tool_in_both_lists_is_a_write(langgraph: Recording) -> None:
    done = replay(
        langgraph,
        "--live-tools",
        "read",
        "--json",
        OTEL_REPLAY_READ_TOOLS="*",
        OTEL_REPLAY_WRITE_TOOLS="issue_*",
    )
    assert refunds(langgraph.database) == 0, "issue_refund ran live in a replay"
    tools = [s for s in json.loads(done.stdout)["steps"] if s["method"] == "TOOL"]
    assert [(s["url"], s["live"], s["effect"], s["effect_reason"]) for s in tools] == [
        ("tool:lookup_order", True, "read", "setting"),
        ("tool:issue_refund", False, "write", "setting"),
    ]


def test_a_tool_span_without_its_effect_reason_is_refused(
    langgraph: Recording, tmp_path: Path
) -> None:
    # As a pre-release otel-replay wrote it: replay.tool.effect, and no reason beside it.
    old = tmp_path / "old"
    with Store.open(langgraph.store, create=False) as store:
        steps = [store.read_step(info) for info in store.steps(langgraph.run_id)]
        spans = store.spans(langgraph.run_id)
    for span in spans:
        span["attributes"].pop("replay.tool.effect_reason", None)
    with Store.open(old) as store:
        store.put(steps, spans)
    done = replay(dataclasses.replace(langgraph, store=old), "--live-tools", "read")
    assert done.returncode == 2, done.stdout + done.stderr
    assert refunds(langgraph.database) == 0, "issue_refund ran live in a replay"
    (line,) = done.stderr.strip().splitlines()
    assert re.search(
        r"step \d+ \(execute_tool lookup_order\): the span has replay\.tool\.effect but no "
        r"replay\.tool\.effect_reason: a pre-release otel-replay recorded it; record the run "
        r"again$",
        line,
    ), line
    # show says nothing of an effect it does not know the reason for.
    assert _shown_tools(old, langgraph.run_id) == {}
    assert re.search(r"^\s*\d+\s+tool\s+issue_refund\s", _show(old, langgraph.run_id), re.M)


@pytest.fixture(scope="module")
def mcp(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    # The server says lookup_order only reads, refund_order writes; of get_weather nothing.
    return record(tmp_path_factory.mktemp("effects-mcp"), "_mcp_agent.py", "r_effects_mcp")


def test_an_mcp_tool_runs_live_only_when_its_server_says_it_only_reads(mcp: Recording) -> None:
    done = replay(mcp, "--live-tools", "read", "--json")
    assert refunds(mcp.database) == 0
    report = json.loads(done.stdout)
    tools = [s for s in report["steps"] if s["method"] == "TOOL"]
    assert [(s["url"], s["live"]) for s in tools] == [
        ("tool:lookup_order", True),
        ("tool:refund_order", False),
        ("tool:get_weather", False),
    ]
    assert [(s["url"], s["live"], s["effect"], s["effect_reason"]) for s in tools] == [
        ("tool:lookup_order", True, "read", "hint"),  # readOnlyHint: true
        ("tool:refund_order", False, "write", "hint"),  # readOnlyHint: false
        ("tool:get_weather", False, "write", "default"),  # no hint: declared nowhere
    ]
    assert report["outcome"] == "diverged"  # lookup_order read today's "delivered"
    assert _shown_tools(mcp.store, mcp.run_id) == {
        "lookup_order": "read: readOnlyHint true",
        "refund_order": "write: readOnlyHint false",
        "get_weather": "write: declared nowhere",
    }
