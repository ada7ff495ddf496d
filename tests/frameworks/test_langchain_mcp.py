"""LangChain tools made of an MCP server's tools by ``langchain-mcp-adapters``: each call is
LangChain's tool call whose body is the MCP session's ``call_tool``, so it makes two tool steps,
the MCP one inside the LangChain one (``replay.step.within``). ``show`` marks the inner one, a
replay serves the outer one whole (the MCP call is not made again) and comes out identical,
and ``diff`` of the recording and its replay says identical.

``langchain-mcp-adapters`` requires mcp 1.x, the project's venv has mcp 2: the agent and its
server run on mcp 1.x from ``.venv/mcp1`` (installed by ``make setup``), first on
``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples.otlp_sink import OtlpSink
from otel_replay.store import Store
from tests.cli._checks import run_cli
from tests.export._support import ROOT
from tests.frameworks._support import (
    CLI,
    Recording,
    record,
    refunds,
    replay,
    replay_identically,
    run_ids,
    tool_spans,
)

MCP1 = ROOT / ".venv" / "mcp1"
ON_MCP1 = {"PYTHONPATH": f"{MCP1}{os.pathsep}{ROOT}"}


@pytest.fixture(scope="module")
def exported() -> Iterator[OtlpSink]:
    with OtlpSink() as sink:
        yield sink


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory, exported: OtlpSink) -> Recording:
    assert (MCP1 / "langchain_mcp_adapters").is_dir(), (
        f"langchain-mcp-adapters and mcp 1.x are missing from {MCP1}; run `make setup`"
    )
    return record(
        tmp_path_factory.mktemp("langchain-mcp"),
        "_langchain_mcp_agent.py",
        "r_lc_mcp",
        OTEL_TRACES_EXPORTER="replay,otlp",
        OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
        OTEL_EXPORTER_OTLP_ENDPOINT=exported.grpc_endpoint,
        OTEL_REPLAY_WRITE_TOOLS="refund_order",
        **ON_MCP1,
    )


def _cli(recording: Recording, *args: str) -> str:
    done = subprocess.run(
        [str(CLI), *args, "--store", str(recording.store)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_each_call_is_an_mcp_step_inside_the_langchain_step(recorded: Recording) -> None:
    tools = tool_spans(recorded)
    assert [(t["gen_ai.tool.name"], t.get("replay.step.within")) for t in tools] == [
        ("lookup_order", None),
        ("lookup_order", tools[0]["replay.step.index"]),
        ("refund_order", None),
        ("refund_order", tools[2]["replay.step.index"]),
    ]
    steps: list[dict[str, Any]] = json.loads(_cli(recorded, "show", recorded.run_id, "--json"))[
        "steps"
    ]
    nested = {s["index"]: s.get("within") for s in steps if s["kind"] == "tool"}
    assert nested == {t["replay.step.index"]: t.get("replay.step.within") for t in tools}


def test_show_marks_the_mcp_step_as_made_inside_the_langchain_step(recorded: Recording) -> None:
    shown = _cli(recorded, "show", recorded.run_id)
    rows = {line.split()[0]: line for line in shown.splitlines() if line[:1].isdigit()}
    outer, inner = tool_spans(recorded)[:2]
    outer_row = rows[str(outer["replay.step.index"])]
    inner_row = rows[str(inner["replay.step.index"])]
    assert outer_row.split()[1:3] == ["tool", "lookup_order"]
    assert inner_row.split()[1:5] == ["└", "tool", "in", str(outer["replay.step.index"])]
    assert "└ in N: made inside step N" in shown
    # Every other row is an outer step.
    assert sum("└" in row for row in rows.values()) == 2


def test_the_replay_serves_the_langchain_step_whole_and_diff_says_identical(
    recorded: Recording,
) -> None:
    done = replay_identically(recorded, **ON_MCP1)
    assert "unused" not in done.stdout
    (replayed,) = set(run_ids(recorded)) - {recorded.run_id}
    # The replay's own run made the outer steps only: the MCP calls were not made again.
    assert [t.get("replay.step.within") for t in tool_spans(recorded, replayed)] == [None, None]
    diffed = _cli(recorded, "diff", recorded.run_id, replayed)
    assert "identical: 8 steps" in diffed
    assert diffed.count("inside step") == 2  # the MCP calls, inside the steps B served


def test_the_langchain_step_has_the_mcp_tools_read_only_hint(recorded: Recording) -> None:
    """The adapter copies the MCP tool's annotations into the LangChain tool's metadata: the
    outer step reads where the server says so, and runs live with the MCP call inside it
    under ``--live-tools read``; the refund, a write by the setting (and by its hint), never
    does."""
    effects = [
        (t["gen_ai.tool.name"], t["replay.tool.effect"], t["replay.tool.effect_reason"])
        for t in tool_spans(recorded)
    ]
    assert effects == [
        ("lookup_order", "read", "hint"),  # LangChain's, from its metadata
        ("lookup_order", "read", "hint"),  # the MCP call's, from the listing
        ("refund_order", "write", "setting"),
        ("refund_order", "write", "setting"),
    ]
    shown = _cli(recorded, "show", recorded.run_id)
    assert shown.count("lookup_order (read: readOnlyHint true)") == 2
    assert "write: declared nowhere" not in shown

    done = replay(recorded, "--live-tools", "read", "--json", **ON_MCP1)
    report = json.loads(done.stdout)
    tools = [s for s in report["steps"] if s["method"] == "TOOL"]
    assert [(s["url"], s["live"], s["effect"], s["effect_reason"]) for s in tools] == [
        ("tool:lookup_order", True, "read", "hint"),
        ("tool:lookup_order", True, "read", "hint"),  # the MCP call, made by the live body
        ("tool:refund_order", False, "write", "hint"),  # readOnlyHint false
    ]
    assert report["outcome"] == "diverged"  # the live lookup read today's "delivered"
    assert refunds(recorded.database) == 0


def test_the_run_is_one_trace(recorded: Recording, exported: OtlpSink) -> None:
    spans = exported.spans()
    assert len({s["trace_id"] for s in spans}) == 1
    indices = sorted(s["attributes"].get("replay.step.index", -1) for s in spans)
    assert [i for i in indices if i >= 0] == list(range(8))  # each step once


def test_the_run_read_from_the_collectors_archive_keeps_its_nesting(
    recorded: Recording, exported: OtlpSink, tmp_path: Path
) -> None:
    # The spans as the Collector's file exporter keeps them (format: proto): read back from
    # there (imported into a store on the way, as every verb does), the MCP calls are still
    # inside the LangChain steps, so the run is the one in the store, step for step.
    archive = tmp_path / "archive"
    archive.mkdir()
    bodies = [r.body for r in exported.requests() if r.signal == "traces"]
    (archive / "traces.pb").write_bytes(b"".join(len(b).to_bytes(4, "big") + b for b in bodies))
    diffed = _cli(recorded, "diff", f"{archive}#{recorded.run_id}", recorded.run_id)
    assert "identical: 8 steps" in diffed
    assert diffed.count("inside step") == 0  # both sides made the MCP calls
    target = tmp_path / "imported"
    imported = run_cli("import", str(archive), "--store", str(target))
    assert imported.exit_code == 0, imported.output
    with Store.open(target, create=False) as store:
        within = {s.index: s.within for s in store.read_steps(recorded.run_id)}
    outer, inner = tool_spans(recorded)[:2]
    assert within[inner["replay.step.index"]] == outer["replay.step.index"]
