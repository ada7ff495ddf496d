"""A fork live from a model call: the stand-in, as a real provider, names each tool call anew
(``call_…``, ``toolu_…``), and the program echoes the new ids in every later request. Those
ids, minted by the live answer in place of the recorded answer's and used as consistently,
are no divergence; a misused id, or an answer that differs otherwise, still is.

The agent asks where an order is, runs the tool the model calls (the stand-in's
``/orders/{id}``, which answers the same each time) and sends back its result. Its requests
carry a ``seed``, so the stand-in words its answers as it did when recorded: only the ids
change. The fork is recorded as the ``replay`` verb records one (the capture installed), which
is how the live answer's ids are read.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

import otel_replay
from examples.standin import StandIn
from otel_replay.replay import ReplayResult, StepPair
from otel_replay.replay._diff import MintedIds, answer_messages
from otel_replay.replay._rundiff import diff_runs
from otel_replay.replay.sources import load_run
from otel_replay.store import Store
from tests.export._support import INSTRUMENT, ROOT, Pipeline, subprocess_env
from tests.replay._ids_agent import KEY, LOOKUP, QUESTION, chat
from tests.replay._recorded import recorded_step
from tests.replay.test_envelope_cli import CLI


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn(event_delay=0) as running:
        yield running


def _chat(standin: StandIn, misuse: str = "", weather: bool = False) -> str:
    return chat(standin.openai_base_url, standin.tools_url, misuse, weather)


def _messages(standin: StandIn) -> str:
    """The same with Anthropic Messages (``toolu_…`` ids)."""
    with (
        anthropic.Anthropic(base_url=standin.anthropic_base_url, api_key=KEY) as client,
        httpx.Client(base_url=standin.tools_url) as tools,
    ):
        offered: Any = [{"name": LOOKUP["name"], "input_schema": LOOKUP["parameters"]}]
        messages: list[Any] = [{"role": "user", "content": QUESTION}]
        extra = {"seed": 1}
        first = client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=256,
            messages=messages,
            tools=offered,
            extra_body=extra,
        )
        (call,) = [block for block in first.content if block.type == "tool_use"]
        assert call.type == "tool_use"
        result = tools.get(f"/orders/{call.input['order_id']}").text  # type: ignore[index]
        messages.append({"role": "assistant", "content": [b.model_dump() for b in first.content]})
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call.id, "content": result}],
            }
        )
        last = client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=256,
            messages=messages,
            tools=offered,
            extra_body=extra,
        )
        return "".join(b.text for b in last.content if b.type == "text")


def _responses(standin: StandIn) -> str:
    """The same with OpenAI Responses, its output items sent back as they came (``call_…``
    ids, and each item's own ``fc_…`` id)."""
    with (
        openai.OpenAI(base_url=standin.openai_base_url, api_key=KEY) as client,
        httpx.Client(base_url=standin.tools_url) as tools,
    ):
        offered: Any = [{"type": "function", **LOOKUP}]
        items: list[Any] = [{"role": "user", "content": QUESTION}]
        extra = {"seed": 1}
        first = client.responses.create(
            model="gpt-4o-mini", input=items, tools=offered, extra_body=extra
        )
        items += [item.model_dump(exclude_none=True) for item in first.output]
        (call,) = [item for item in first.output if item.type == "function_call"]
        assert call.type == "function_call"
        result = tools.get(f"/orders/{json.loads(call.arguments)['order_id']}").text
        items.append({"type": "function_call_output", "call_id": call.call_id, "output": result})
        last = client.responses.create(
            model="gpt-4o-mini", input=items, tools=offered, extra_body=extra
        )
        return last.output_text


def _record(tmp_path: Path, run_id: str, agent: Any) -> Path:
    store = tmp_path / "store"
    with Pipeline(store), otel_replay.run(name="ids", seed=7, run_id=run_id):
        agent()
    return store


def _requests_diff(tmp_path: Path, store: Path, run_id: str) -> list[tuple[int | None, str]]:
    """``diff RUN FORK``: (A's step, field) of each change of a request (what the live
    world answered, ``response …``, set apart: it is new)."""
    with Store.open(tmp_path / "fork", create=False) as opened:
        (fork,) = opened.runs()
    pairs: tuple[StepPair, ...] = diff_runs(
        load_run(run_id, store=str(store)), load_run(fork.run_id, store=str(tmp_path / "fork"))
    ).pairs
    return [
        (p.a.step.index if p.a is not None else None, c.field)
        for p in pairs
        for c in p.changes
        if not c.field.startswith("response")
    ]


def _fork(tmp_path: Path, store: Path, run_id: str, agent: Any) -> ReplayResult:
    """``agent`` replayed live from step 0, the fork recorded (the capture installed)."""
    with (
        Pipeline(tmp_path / "fork"),
        otel_replay.replaying(run_id, store=str(store), live_from=0) as result,
    ):
        agent()
    return result


@pytest.mark.parametrize("api", ["chat", "messages", "responses"])
def test_ids_minted_by_the_live_answer_are_no_divergence(
    standin: StandIn, tmp_path: Path, api: str
) -> None:
    """Every call went live; the last request differed from the recording only by the tool
    call's id, which the live answer named anew: the fork reads identical."""
    agents = {"chat": _chat, "messages": _messages, "responses": _responses}
    agent = lambda: agents[api](standin)  # noqa: E731
    store = _record(tmp_path, "r_ids_" + api, agent)
    standin.clear()
    result = _fork(tmp_path, store, "r_ids_" + api, agent)
    assert len(standin.received) == 3  # model, tool, model: all live
    last = json.loads(standin.received[-1].body)
    sent = json.dumps(last)
    assert ("toolu_" if api == "messages" else "call_") in sent
    assert result.outcome == "identical", result.first_divergence
    assert [(s.recorded, s.live, s.identical) for s in result.steps] == [
        (0, True, True),
        (1, True, True),
        (2, True, True),
    ]
    # The step keeps the request as the program sent it: the live id, not the recorded one.
    body = result.steps[2].request_body
    assert body is not None
    assert json.loads(body) == last
    # ``diff RUN FORK`` reads the fork's requests as the replay did; but for the id of each
    # Responses output item sent back (``fc_…``), which no pairing covers: the replay reads
    # the conversation, where items have no id; the diff reads the body too.
    left = [(2, "body $.input[1].id")] if api == "responses" else []
    assert _requests_diff(tmp_path, store, "r_ids_" + api) == left


def test_an_id_the_live_answer_never_named_still_diverges(standin: StandIn, tmp_path: Path) -> None:
    """The program answers the tool call under another id than the live answer gave it."""
    store = _record(tmp_path, "r_ids_misuse", lambda: _chat(standin))
    standin.clear()
    result = _fork(tmp_path, store, "r_ids_misuse", lambda: _chat(standin, misuse="x"))
    assert result.outcome == "diverged"
    step = result.first_divergence
    assert step is not None and (step.kind, step.step) == ("changed", 2)
    (changed,) = [c for c in step.changes if c.field == "message 2 $.parts[0].id"]
    assert changed.replayed is not None and changed.recorded is not None
    # The live id, misused, is no id the live answer minted: left as sent, it differs.
    sent = standin.received[-1].body.decode()
    assert changed.replayed.endswith("x") and f'"{changed.replayed}"' in sent
    assert changed.recorded not in sent  # the recorded id the live one replaced
    assert _requests_diff(tmp_path, store, "r_ids_misuse") == [
        (2, "prompt hash"),
        (2, "message 2 $.parts[0].id"),
    ]


def test_a_live_answer_that_differs_otherwise_still_diverges(
    standin: StandIn, tmp_path: Path
) -> None:
    """The live weather is another than the recorded one: the last request differs by the
    tool's result, named at its step, and by nothing else (the ids are set aside)."""
    store = _record(tmp_path, "r_ids_world", lambda: _chat(standin, weather=True))
    result = _fork(tmp_path, store, "r_ids_world", lambda: _chat(standin, weather=True))
    assert result.outcome == "diverged"
    step = result.first_divergence
    assert step is not None and (step.kind, step.step) == ("changed", 2)
    assert [c.field for c in step.changes] == ["prompt hash", "message 2"]
    message = step.changes[1]
    assert message.recorded is not None and message.replayed is not None
    assert message.recorded.startswith("tool: result {") and "temperature_c" in message.replayed


def _answer(call_id: str, name: str = "lookup_order") -> bytes:
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
    return json.dumps({"id": "c", "object": "chat.completion", "choices": [choice]}).encode()


def _step(call_id: str, name: str = "lookup_order") -> Any:
    return recorded_step(
        endpoint="openai.chat_completions",
        index=0,
        kind="http",
        method="POST",
        url="http://x/v1/chat/completions",
        status_code=200,
        response_headers=[("content-type", "application/json")],
        response_body=_answer(call_id, name),
    )


def test_a_recorded_id_sent_where_the_live_answer_minted_another_is_a_change() -> None:
    """The program kept the recording's id: the live world never named it."""
    minted = MintedIds()
    live = answer_messages(_step("call_live"))
    assert live is not None
    minted.learn(_step("call_rec"), live)
    body = b'{"tool_call_id": "call_live", "again": "call_live", "other": "call_livex"}'
    assert minted.restore(body) == (
        b'{"tool_call_id": "call_rec", "again": "call_rec", "other": "call_livex"}'
    )
    assert minted.stale(body) == []
    (stale,) = minted.stale(b'{"tool_call_id": "call_rec"}')
    assert stale.describe() == "tool call id minted live: call_live → call_rec"
    assert minted.restore_id("call_live") == "call_rec"


def test_a_live_call_to_another_tool_pairs_no_id() -> None:
    """Ids pair only between calls of the same tool at the same place in the two answers."""
    minted = MintedIds()
    live = answer_messages(_step("call_live", name="get_weather"))
    assert live is not None
    minted.learn(_step("call_rec"), live)
    assert minted.restore(b'["call_live"]') == b'["call_live"]'


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.subprocess
def test_the_replay_verb_live_from_the_start_exits_0_where_only_ids_changed(
    standin: StandIn, tmp_path: Path
) -> None:
    """``otel-replay replay RUN --live-from 0 -- python agent.py``, as the users ran it: every
    call live, the ids new, the fork identical (exit 0); the misused id exits 1 naming the
    step, and ``diff RUN FORK`` lists no request change of the identical fork."""
    store = tmp_path / "store"
    program = (sys.executable, "-m", "tests.replay._ids_agent")
    recorded = _cli(
        str(INSTRUMENT),
        *program,
        env=subprocess_env(store, OTEL_REPLAY_RUN_ID="r_ids_cli", STANDIN_URL=standin.base_url),
    )
    assert recorded.returncode == 0, recorded.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "STANDIN_"))}
    env |= {"STANDIN_URL": standin.base_url, "PYTHONPATH": str(ROOT)}
    replay = (str(CLI), "replay", "r_ids_cli", "--store", str(store), "--live-from", "0")
    standin.clear()
    done = _cli(*replay, "--", *program, env=env)
    assert len(standin.received) == 3  # every call went live
    assert done.returncode == 0, done.stdout + done.stderr
    assert "identical" in done.stdout
    fork = re.search(r"recorded as run (\S+)", done.stdout)
    assert fork is not None, done.stdout
    diffed = _cli(
        str(CLI), "diff", "r_ids_cli", fork.group(1), "--store", str(store), "--json", env=env
    )
    document = json.loads(diffed.stdout)
    fields = [
        (pair["a"], change["field"]) for pair in document["pairs"] for change in pair["changes"]
    ]
    assert (0, "response $.id") in fields  # the live answers are new
    assert [(a, field) for a, field in fields if not field.startswith("response")] == []
    misused = _cli(*replay, "--", *program, "misuse", env=env)
    assert misused.returncode == 1, misused.stdout + misused.stderr
    assert "first divergence: step 2 (openai.chat_completions)" in misused.stdout
    assert "message 2 $.parts[0].id" in misused.stdout
