"""A progress callback that raises, replayed as the MCP session ran it: the session shields
it (what it raises is logged, the tool call goes on), so the replayed call returns its
result too, after every report reached the callback.

Before, the replay awaited the callback bare: its exception came out of ``call_tool``, and
an agent whose progress display failed once crashed in replay where it had run through.
The real server over stdio, in-process recording and ``otel_replay.replaying``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import otel_replay
from tests.export._support import ROOT, Pipeline
from tests.frameworks._orders import open_database

SERVER = Path(__file__).with_name("_mcp_server.py")


async def refund_with_a_failing_display(database: Path, reports: list[Any]) -> Any:
    async def show(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, total, message))
        if progress == 1:
            raise RuntimeError("the progress bar is gone")

    params = StdioServerParameters(
        command=sys.executable, args=[str(SERVER), str(database)], env={"PYTHONPATH": str(ROOT)}
    )
    with open(os.devnull, "w") as quiet:
        async with (
            stdio_client(params, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool(
                "refund_order", {"order_id": "A-1234", "reason": "late"}, progress_callback=show
            )
            await asyncio.sleep(0.2)  # the session runs callbacks in tasks of their own
            return result


def test_a_raising_progress_callback_is_logged_not_raised_on_replay(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    database = tmp_path / "orders.sqlite"
    open_database(str(database)).close()
    recorded_reports: list[Any] = []
    with Pipeline(tmp_path / "store") as pipeline:
        recorded = asyncio.run(refund_with_a_failing_display(database, recorded_reports))
        run_id = pipeline.run.run_id
    assert recorded.structured_content["status"] == "issued"
    assert [r[0] for r in recorded_reports] == [0, 1, 2]

    caplog.clear()
    replayed_reports: list[Any] = []
    with (
        caplog.at_level(logging.ERROR, logger="mcp"),
        otel_replay.replaying(run_id, store=str(tmp_path / "store")) as result,
    ):
        replayed = asyncio.run(refund_with_a_failing_display(database, replayed_reports))
    assert replayed.model_dump() == recorded.model_dump()
    assert replayed_reports == recorded_reports
    assert result.identical, result.first_divergence
    failures = [r for r in caplog.records if r.getMessage() == "progress callback raised"]
    assert len(failures) == 1
    assert failures[0].exc_info is not None
    assert str(failures[0].exc_info[1]) == "the progress bar is gone"
