"""A LangGraph conversation kept by a checkpointer across two ``invoke`` calls on one thread: in
an ``InMemorySaver``, and in a ``SqliteSaver`` (and an ``AsyncSqliteSaver``) on a file kept from
run to run. Each recorded under ``opentelemetry-instrument``, its database changed, replayed
through the CLI with the stand-in gone. (Apart from ``test_langgraph_state.py``, so that the
two run on different workers.)"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from otel_replay.store import Store
from tests.frameworks._orders import QUESTIONS
from tests.frameworks._support import (
    Recording,
    assert_a_changed_system_prompt_diverges_at_the_first_call,
    assert_tool_kit,
    record,
    refunds,
    replay,
    replay_identically,
    spans,
    tool_spans,
)


@pytest.fixture(scope="module")
def threaded(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    return record(
        tmp_path_factory.mktemp("langgraph-thread-memory"),
        "_langgraph_thread_agent.py",
        "r_langgraph_thread_memory",
        "memory",
        OTEL_REPLAY_WRITE_TOOLS="refund_*",
    )


def test_a_thread_kept_by_a_checkpointer_replays_identically(threaded: Recording) -> None:
    # The second invoke was given only its question: the model saw the first turn too,
    # read back from the checkpointer, when recorded and on replay.
    assert threaded.printed.splitlines()[-1] == "[thread] 9 messages, 10 checkpoints"
    assert '  [tool] refund_order -> {"refund_id": "R-' in threaded.printed
    replay_identically(threaded)
    tools = tool_spans(threaded)
    assert [t["gen_ai.tool.name"] for t in tools] == ["lookup_order", "refund_order"]
    assert_tool_kit(tools)


def test_a_thread_with_a_changed_system_prompt_diverges_at_the_first_call(
    threaded: Recording,
) -> None:
    # Step 0 is the checkpointer's read of the thread, the model's call comes next.
    assert_a_changed_system_prompt_diverges_at_the_first_call(threaded, first_call=1)


@dataclass(frozen=True)
class KeptThread:
    """Two runs of the agent on one thread of a checkpoint file that outlives the program:
    the first starts the thread, the second goes on from where it ended."""

    first: Recording
    second: Recording
    checkpoints: Path


@pytest.fixture(scope="module", params=["sqlite", "aiosqlite"])
def kept(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> KeptThread:
    """``SqliteSaver`` with ``invoke``, and ``AsyncSqliteSaver`` with ``ainvoke``."""
    saver = str(request.param)
    root = tmp_path_factory.mktemp(f"langgraph-kept-{saver}")
    first, second = (
        record(
            root,
            "_langgraph_thread_agent.py",
            f"r_langgraph_kept_{saver}_{n}",
            saver,
            OTEL_REPLAY_WRITE_TOOLS="refund_*",
        )
        for n in (1, 2)
    )
    return KeptThread(first, second, root / "orders.checkpoints.sqlite")


def test_a_kept_checkpoint_file_replays_each_run_from_where_it_started(kept: KeptThread) -> None:
    # By now the file holds the thread as the second run left it. Each replay starts from
    # the thread as its recording read it (empty; then the first run's end), not from the
    # file, and writes nothing into it.
    assert kept.first.printed.splitlines()[-1] == "[thread] 9 messages, 10 checkpoints"
    assert kept.second.printed.splitlines()[-1] == "[thread] 18 messages, 20 checkpoints"
    before = kept.checkpoints.read_bytes()
    for recording in (kept.first, kept.second):
        replay_identically(recording)
    assert kept.checkpoints.read_bytes() == before


def test_checkpoint_reads_are_steps_holding_the_thread_read(kept: KeptThread) -> None:
    reads = sorted(
        (
            span["attributes"]
            for span in spans(kept.second)
            if span["attributes"].get("replay.step.kind") == "checkpoint"
        ),
        key=lambda attrs: attrs["replay.step.index"],
    )
    assert [attrs["replay.value.name"] for attrs in reads] == [
        "langgraph.get_tuple",  # each invoke starts from the thread's latest checkpoint
        "langgraph.get_tuple",
        "langgraph.list",  # get_state_history
    ]
    with Store.open(kept.second.store, create=False) as store:
        first_read = store.step(kept.second.run_id, reads[0]["replay.step.index"])
        asked, thread = store.request_body(first_read), store.response_body(first_read)
    assert json.loads(asked) == {"config": {"thread_id": "desk-7"}}
    # The second run began where the first ended: its first read is the first run's thread.
    thread = json.loads(thread)
    messages = thread["checkpoint"]["channel_values"]["messages"]
    assert len(messages) == 9
    assert [m["otel_replay.message"]["type"] for m in messages[:2]] == ["system", "human"]
    assert messages[1]["otel_replay.message"]["content"] == QUESTIONS[0]


def test_a_fork_that_empties_the_thread_starts_the_next_invoke_afresh(
    threaded: Recording,
) -> None:
    """``--state langgraph.get_tuple=null``: each invoke reads an empty thread, so the second
    one starts a conversation of its own (its question alone, no system prompt), as it would
    on a thread nobody wrote. The replay's own saver held the first invoke's writes: a fork
    that answered from it would change nothing the agent sees."""
    done = replay(threaded, "--state", "langgraph.get_tuple=null", "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)
    reads = [
        s["recorded"] for s in report["steps"] if s["endpoint"] == "checkpoint:langgraph.get_tuple"
    ]
    assert len(reads) == 2
    assert [s["recorded"] for s in report["steps"] if s["forked"]] == reads
    first = report["first_divergence"]
    assert first["step"] == reads[1] + 1  # the second invoke's first model call
    # The first turn, system prompt included, is no longer in the thread the model is sent.
    removed = [c["recorded"] for c in first["changes"] if c["kind"] == "removed"]
    assert f"user: {QUESTIONS[0]}" in removed
    assert any(line.startswith("system: ") for line in removed)
    assert refunds(threaded.database) == 0
