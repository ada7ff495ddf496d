"""LiteLLM over Chat Completions: ``completion`` and ``acompletion`` with tools (run by the
agent through ``@otel_replay.tool``), a streamed answer and a 429 retried by LiteLLM
(``num_retries``), recorded under ``opentelemetry-instrument``, its database changed, replayed
through the CLI with the stand-in gone; with LiteLLM's OpenTelemetry callback off and on.

LiteLLM fetches its model price list when it is imported: a default ``OTEL_REPLAY_IGNORE``
rule keeps it out of the recording, and the replay answers it (404: LiteLLM falls back to the
list it ships) without counting it as a network attempt.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from examples.standin.server import StandIn
from otel_replay.testing._kit import CaptureKit
from tests.frameworks._support import (
    CLI,
    Recording,
    assert_a_changed_system_prompt_diverges_at_the_first_call,
    record,
    replay_identically,
    tool_spans,
)

PRICE_LIST = "model_prices_and_context_window.json"


def _record(tmp_path_factory: pytest.TempPathFactory, *args: str) -> Recording:
    how = "-".join(args) or "plain"
    return record(
        tmp_path_factory.mktemp(f"litellm-{how}"), "_litellm_agent.py", f"r_litellm_{how}", *args
    )


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    return _record(tmp_path_factory)


@pytest.fixture(scope="module")
def callback(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    return _record(tmp_path_factory, "otel")


@pytest.fixture(params=["plain", "callback"])
def recorded(request: pytest.FixtureRequest) -> Recording:
    """Each recording: LiteLLM's OpenTelemetry callback off, then on."""
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


def _steps(recording: Recording) -> list[dict[str, Any]]:
    shown = subprocess.run(
        [str(CLI), "show", recording.run_id, "--json", "--store", str(recording.store)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return list(json.loads(shown.stdout)["steps"])


def test_the_agent_replays_identically_and_its_write_does_not_repeat(
    recorded: Recording,
) -> None:
    assert '[tool] lookup_order -> {"order_id": "A-1234", "status": "shipped"' in recorded.printed
    assert '[tool] refund_order -> {"refund_id": "R-' in recorded.printed
    done = replay_identically(recorded)  # "shipped", the same refund id
    # The price list LiteLLM fetched at import was answered by the replay, not counted.
    ignored = next(line for line in done.stdout.splitlines() if line.startswith("ignored "))
    assert PRICE_LIST in ignored


def test_each_attempt_and_each_tool_call_is_one_step(recorded: Recording) -> None:
    steps = _steps(recorded)
    assert not any(PRICE_LIST in str(step["url"]) for step in steps)  # background: not a step
    calls = [(step["model"], step["status_code"]) for step in steps if step["kind"] == "llm"]
    assert calls == [
        *[("gpt-4o-mini", 200)] * 5,  # two tool loops of two calls, the stream
        ("standin-flaky", 429),  # refused once ...
        ("standin-flaky", 200),  # ... and retried
        ("standin-flaky", 429),
        ("standin-flaky", 200),
    ]
    tools = tool_spans(recorded)
    assert [(t["gen_ai.tool.name"], t["replay.tool.effect"]) for t in tools] == [
        ("lookup_order", "read"),
        ("refund_order", "write"),
        ("lookup_order", "read"),
    ]
    assert all(t["gen_ai.tool.call.id"].startswith("call_") for t in tools)


def test_a_changed_system_prompt_diverges_at_the_first_call(plain: Recording) -> None:
    assert_a_changed_system_prompt_diverges_at_the_first_call(plain)


def test_an_anthropic_stream_litellm_closes_at_its_stop_reason_is_complete(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """LiteLLM stops reading an Anthropic stream once it has the stop reason and closes it,
    so the recorded body ends before message_stop: the answer still arrived whole."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no price-list fetch here
    import litellm  # after the setting above

    with StandIn(event_delay=0.005) as server, CaptureKit() as kit:
        chunks = litellm.completion(
            model="anthropic/claude-sonnet-4-6",
            messages=[{"role": "user", "content": "Hello"}],
            stream=True,
            api_base=server.base_url,
            api_key="sk-ant-standin-not-a-secret",
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks)

    (attributes,) = [
        span["attributes"]
        for span in kit.spans()
        if span["attributes"].get("replay.step.kind") == "llm"
    ]
    (answer,) = attributes["gen_ai.output.messages"]  # decoded by the kit
    assert text and answer["parts"] == [{"type": "text", "content": text}]
    assert b"message_stop" not in attributes["replay.response.body"].encode()
    assert attributes["replay.response.complete"] is True
    assert attributes["gen_ai.response.finish_reasons"] == ["end_turn"]
    assert "error.type" not in attributes
