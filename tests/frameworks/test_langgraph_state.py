"""LangGraph state beyond the messages: tools that update the state and route the graph with
``Command(update=..., goto=...)``, and a LangGraph store on a file kept from run to run. Each
recorded under ``opentelemetry-instrument``, its database changed, replayed through the CLI
with the stand-in gone; and what a tool step writes for a Command and gives back. A
conversation kept by a checkpointer is in ``test_langgraph_checkpoints.py``."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import Command, Send

from otel_replay.envelope._jsonable import encode_exact, restore_body, restoring, take_shape
from otel_replay.envelope.frameworks._langgraph_values import is_command, tagged, untagged
from otel_replay.store import Store
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
