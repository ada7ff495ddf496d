"""LangGraph state beyond the messages: tools that update the state and route the graph with
``Command(update=..., goto=...)``, and a conversation kept by a checkpointer across two
``invoke`` calls on one thread: in an ``InMemorySaver``, and in a ``SqliteSaver`` (and an
``AsyncSqliteSaver``) on a file kept from run to run. Each recorded under
``opentelemetry-instrument``, its database changed, replayed through the CLI with the
stand-in gone."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import Command, Send

from otel_replay.envelope._jsonable import encode_exact, restore_body, restoring, take_shape
from otel_replay.envelope.frameworks._langgraph_values import is_command, tagged, untagged
from otel_replay.store import Store
from tests.frameworks._orders import QUESTIONS
from tests.frameworks._support import (
    Recording,
    assert_a_changed_system_prompt_diverges_at_the_first_call,
    assert_tool_kit,
    record,
    replay_identically,
    run_ids,
    spans,
    tool_spans,
)


@pytest.fixture(scope="module")
def commanded(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    return record(
        tmp_path_factory.mktemp("langgraph-command"),
        "_langgraph_command_agent.py",
        "r_langgraph_command",
        OTEL_REPLAY_WRITE_TOOLS="refund_*",
        OTEL_REPLAY_READ_TOOLS="lookup_order",
    )


def test_a_tool_command_updates_the_state_and_routes_the_graph_on_replay(
    commanded: Recording,
) -> None:
    printed = commanded.printed.splitlines()
    (first, second) = [line for line in printed if line.startswith("  [state] ")]
    assert first == "  [state] order_status='shipped' refund_id=None receipts=[]"
    refund_id = second.split("refund_id='")[1].split("'")[0]
    assert refund_id.startswith("R-")
    # refund_order's goto sent the graph through the receipt node, which read its update.
    assert second.endswith(f"receipts=['receipt for {refund_id}']")
    before = set(run_ids(commanded))
    done = replay_identically(commanded)
    # On replay the served Commands did the same: the status and the refund id in the state,
    # the graph through the receipt node, the tool messages the model was sent the same.
    assert done.stdout.startswith(commanded.printed)
    (replayed,) = set(run_ids(commanded)) - before
    served = [t["gen_ai.tool.call.result"] for t in tool_spans(commanded, replayed)]
    assert served == [t["gen_ai.tool.call.result"] for t in tool_spans(commanded)]


def test_each_command_is_recorded_as_one_tool_step(commanded: Recording) -> None:
    tools = tool_spans(commanded)
    assert [(t["gen_ai.tool.name"], t["replay.tool.effect"]) for t in tools] == [
        ("lookup_order", "read"),
        ("refund_order", "write"),  # OTEL_REPLAY_WRITE_TOOLS=refund_*
    ]
    lookup, refund = tools
    command = json.loads(refund["gen_ai.tool.call.result"])["otel_replay.command"]
    assert command["goto"] == "receipt"
    assert command["update"]["refund_id"].startswith("R-")
    (message,) = command["update"]["messages"]
    assert message["otel_replay.message"]["type"] == "tool"
    assert message["otel_replay.message"]["tool_call_id"] == refund["gen_ai.tool.call.id"]
    lookup_command = json.loads(lookup["gen_ai.tool.call.result"])["otel_replay.command"]
    assert lookup_command == {
        "update": {"order_status": "shipped", "messages": lookup_command["update"]["messages"]},
        "goto": "agent",
    }
    assert_tool_kit(tools)


def test_a_changed_system_prompt_diverges_before_any_command(commanded: Recording) -> None:
    assert_a_changed_system_prompt_diverges_at_the_first_call(commanded)


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


def test_commands_with_sends_and_pairs_come_back_whole() -> None:
    """What a tool step writes for a Command (a list of them, a Send in goto, an update given
    as (key, value) pairs, a message in a Send's argument) and what replay gives back."""
    returned = [
        Command(
            update=[("messages", [ToolMessage("sent", tool_call_id="call_1", artifact={"n": 2})])],
            goto=[Send("notify", {"to": "desk", "note": AIMessage("hi")}), "agent"],
        ),
        Command(graph=Command.PARENT, goto="review"),
    ]
    assert is_command(returned)
    body = encode_exact(tagged(returned))
    written = json.loads(body)
    assert written[1] == {"otel_replay.command": {"graph": "__parent__", "goto": "review"}}
    with restoring(body, take_shape(body)):
        back = untagged(restore_body(body))
    assert back == returned
    (send, node) = back[0].goto
    assert (send.node, node) == ("notify", "agent")
    assert isinstance(send.arg["note"], AIMessage)
    ((key, (message,)),) = back[0].update
    assert key == "messages" and isinstance(message, ToolMessage)
    assert (message.tool_call_id, message.artifact) == ("call_1", {"n": 2})


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


def test_a_kept_memory_store_replays_each_run_with_what_it_recalled(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A LangGraph store on a file kept from run to run: each replay recalls what its
    recording recalled, whatever the store holds by then, and adds nothing to it."""
    root = tmp_path_factory.mktemp("langgraph-memory")
    first, second = (
        record(
            root,
            "_langgraph_memory_agent.py",
            f"r_langgraph_memory_{n}",
            OTEL_REPLAY_WRITE_TOOLS="refund_*",
        )
        for n in (1, 2)
    )
    assert first.printed.splitlines()[-1] == "[memory] 0 recalled, 1 kept"
    assert second.printed.splitlines()[-1] == "[memory] 1 recalled, 2 kept"
    memories = root / "orders.memories.sqlite"
    before = memories.read_bytes()
    for recording in (first, second):
        replay_identically(recording)
    assert memories.read_bytes() == before
    reads = [
        span["attributes"]
        for span in spans(second)
        if span["attributes"].get("replay.value.name") == "langgraph.store"
    ]
    assert len(reads) == 2  # the recall, and the count after the note
    with Store.open(second.store, create=False) as store:
        recall = min(reads, key=lambda attrs: attrs["replay.step.index"])["replay.step.index"]
        asked = json.loads(store.request_body(second.run_id, recall))
        (found,) = json.loads(store.response_body(second.run_id, recall))
    assert asked[0]["SearchOp"]["namespace_prefix"] == ["customers", "A-1234"]
    assert [item["otel_replay.store_item"]["key"] for item in found] == ["note-0"]
