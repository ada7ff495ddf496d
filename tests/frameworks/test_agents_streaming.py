"""The OpenAI Agents SDK run the ways its users reach for past ``Runner.run``:
``Runner.run_streamed`` with its events consumed (a lookup, then a refund: the write), a
triage agent handing off to the desk, and the model calling two tools in one turn that the SDK
runs at once; over Chat Completions and over Responses, recorded under
``opentelemetry-instrument``, the database changed, replayed through the CLI with the
stand-in gone.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.frameworks._support import (
    CLI,
    Recording,
    assert_a_changed_system_prompt_diverges_at_the_first_call,
    record,
    replay,
    replay_identically,
    spans,
    tool_spans,
)


@pytest.fixture(scope="module", params=["chat", "responses"])
def recorded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Recording:
    api = request.param
    return record(
        tmp_path_factory.mktemp(f"agents-streaming-{api}"),
        "_agents_streaming_agent.py",
        f"r_agents_streaming_{api}",
        api,
        OTEL_REPLAY_WRITE_TOOLS="refund_order",
        OTEL_REPLAY_READ_TOOLS="lookup_order,get_weather",
    )


def test_streamed_handed_off_and_parallel_runs_replay_identically(recorded: Recording) -> None:
    printed = recorded.printed
    assert "agent (streamed)> " in printed and "[tool] -> refund_id='R-" in printed
    assert "  [agent] triage\n  [agent] desk\n" in printed and "  [last agent] desk" in printed
    assert "'city': 'Paris'" in printed  # the weather, run beside the lookup
    # The order still "shipped", the same refund id, the stream's events and text as recorded.
    done = replay_identically(recorded)
    # The replay's own run holds each streamed answer once, as recorded: the SDK iterates a
    # response stream again after [DONE] (a replayed stream was then recorded twice).
    replayed = done.stdout.rsplit("recorded as run ", 1)[1].split()[0]
    compared = subprocess.run(
        [str(CLI), "diff", recorded.run_id, replayed, "--store", str(recorded.store)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert "identical: 15 steps" in compared.stdout  # the refund's uuid4() among them


def test_each_tool_call_is_one_step_the_handoff_none(recorded: Recording) -> None:
    tools = tool_spans(recorded)
    assert [(t["gen_ai.tool.name"], t["replay.tool.effect"]) for t in tools] == [
        ("lookup_order", "read"),  # streamed
        ("refund_order", "write"),  # streamed
        ("lookup_order", "read"),  # by the desk, after the handoff
        ("lookup_order", "read"),  # the two of one turn
        ("get_weather", "read"),
    ]
    assert json.loads(tools[1]["gen_ai.tool.call.result"])["status"] == "issued"
    assert json.loads(tools[4]["gen_ai.tool.call.arguments"]) == {"city": "Paris"}
    ids = [t["gen_ai.tool.call.id"] for t in tools]
    assert len(set(ids)) == len(ids) and all(i.startswith(("call_", "fc_")) for i in ids)
    # The two tools of one turn answer the calls of the one model response before them.
    llm = [s["attributes"] for s in spans(recorded) if s["attributes"].get("replay.step.kind")]
    by_index = {a["replay.step.index"]: a for a in llm}
    turn = by_index[tools[3]["replay.step.index"] - 1]
    assert turn["replay.step.kind"] == "llm"
    asked = [p["id"] for m in json.loads(turn["gen_ai.output.messages"]) for p in m["parts"]]
    assert asked == ids[3:]


def test_every_model_call_is_one_complete_streamed_step(recorded: Recording) -> None:
    stored = spans(recorded)
    calls = sorted(
        (s for s in stored if s["attributes"].get("replay.step.kind") == "llm"),
        key=lambda s: s["attributes"]["replay.step.index"],
    )
    models = [s["attributes"]["gen_ai.request.model"] for s in calls]
    # Two streamed turns of two calls, the triage's handoff and the desk's two, then two.
    assert models == ["gpt-4o-mini"] * 4 + ["standin-triage"] + ["gpt-4o-mini"] * 4
    for span in calls:
        attrs = span["attributes"]
        assert attrs["replay.response.complete"] is True and "error.type" not in attrs
        assert attrs["gen_ai.response.finish_reasons"]
    streamed = [s["attributes"] for s in calls[:7]]
    assert all(json.loads(a["replay.request.body"])["stream"] is True for a in streamed)
    # One span per model call: no second chat span of the same call.
    assert sum(s["name"].startswith("chat ") for s in stored) == len(calls)
    triage = calls[4]["attributes"]
    (handoff,) = json.loads(triage["gen_ai.output.messages"])[0]["parts"]
    assert handoff["name"] == "transfer_to_desk"  # a model call, not a tool step


def test_a_changed_system_prompt_diverges_at_the_first_call(recorded: Recording) -> None:
    assert_a_changed_system_prompt_diverges_at_the_first_call(recorded)


def test_steps_given_injected_faults_were_requested_not_left_unused(recorded: Recording) -> None:
    """The refund raises an injected error (the SDK makes it the tool's output) and the next
    streamed answer is cut (the SDK fails): both steps were asked for and got their fault,
    and so was the uuid the refund's body made; the summary lists neither as never requested
    but says what became of each fault."""
    steps = sorted(
        (a["replay.step.index"], a.get("gen_ai.tool.name") or a["replay.step.kind"])
        for a in (s["attributes"] for s in spans(recorded))
        if "replay.step.index" in a
    )
    refund = next(index for index, name in steps if name == "refund_order")
    answer = next(index for index, name in steps if index > refund and name == "llm")
    done = replay(
        recorded,
        "--inject",
        f"{refund}=tool:error:refund service down",
        "--inject",
        f"{answer}=stream-cut:200",
        COLUMNS="400",
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "openai.APIConnectionError" in done.stdout  # the cut stream ended the program
    (unused,) = [line for line in done.stdout.splitlines() if "never requested" in line]
    listed = [int(item.split()[0]) for item in unused.split(": ", 1)[1].split(", ")]
    assert listed == [index for index, _ in steps if index > answer]
    assert (
        f"inject tool:error:refund service down at step {refund} (tool:refund_order): request "
        f"{refund} got it; the program never asked for the recorded answer again"
    ) in done.stdout
    assert f"inject stream-cut:200 at step {answer} (openai.{recorded.args[0]}" in done.stdout
