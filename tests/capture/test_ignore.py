"""``OTEL_REPLAY_IGNORE``: the rules (syntax, defaults, bad values), and the capture leaving
background calls unrecorded through every HTTP stack while they still reach their service."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import httpx2
import pytest
import requests

from examples.standin import StandIn
from otel_replay import settings
from otel_replay._ignore import DEFAULT_RULES, DEFAULTS, call_of, parse, status_for
from otel_replay.errors import ConfigError
from otel_replay.testing import CaptureKit

DOCS = Path(__file__).resolve().parents[2] / "docs" / "background-traffic.md"


@pytest.mark.parametrize(
    ("host", "port", "path", "rule"),
    [
        ("api.openai.com", 443, "/v1/traces/ingest", "*/v1/traces/ingest"),
        ("127.0.0.1", 8765, "/v1/traces/ingest", "*/v1/traces/ingest"),
        ("api.smith.langchain.com", 443, "/runs/multipart", "*/runs/multipart"),
        ("API.Smith.LangChain.com", 443, "/info", "*.smith.langchain.com/info"),
        ("eu.api.smith.langchain.com", 443, "/runs/0b3c", "*.smith.langchain.com/runs/*"),
        (
            "raw.githubusercontent.com",
            443,
            "/BerriAI/litellm/refs/heads/main/model_prices_and_context_window.json",
            "raw.githubusercontent.com/BerriAI/litellm/*/model_prices_and_context_window.json",
        ),
        ("cloud.langfuse.com", 443, "/api/public/ingestion", "*/api/public/ingestion"),
        ("localhost", 3000, "/api/public/otel/v1/traces", "*/api/public/otel/*"),
        ("localhost", 4318, "/v1/traces", "*/v1/traces"),
        ("o4501.ingest.us.sentry.io", 443, "/api/12/envelope/", "*/api/*/envelope/"),
        ("o4501.ingest.sentry.io", 443, "/whatever", "*.ingest.sentry.io"),
        ("o4501.ingest.de.sentry.io", 443, None, "*.ingest.*.sentry.io"),
        ("us.i.posthog.com", 443, "/batch/", "us.i.posthog.com"),
        ("huggingface.co", 443, "/api/telemetry/hub/x", "huggingface.co/api/telemetry/*"),
        ("trace.wandb.ai", 443, "/call/start", "trace.wandb.ai"),
    ],
)
def test_the_defaults_match_the_known_telemetry_endpoints(
    host: str, port: int, path: str | None, rule: str
) -> None:
    found = DEFAULT_RULES.match(host, port, path)
    assert found is not None and found.glob == rule


@pytest.mark.parametrize(
    ("host", "path"),
    [
        ("api.openai.com", "/v1/chat/completions"),
        ("api.openai.com", "/v1/responses"),
        ("api.anthropic.com", "/v1/messages"),
        ("api.smith.langchain.com", "/commits/rlm/rag-prompt/latest"),  # the prompt hub
        ("cloud.langfuse.com", "/api/public/v2/prompts/support"),  # prompts feed the agent
        ("huggingface.co", "/api/models/gpt2"),
        ("huggingface.co", None),  # a socket to huggingface.co: not only telemetry there
        ("raw.githubusercontent.com", "/BerriAI/other/main/model_prices.json"),
        ("sentry.io", "/"),
        ("oai.helicone.ai", "/v1/chat/completions"),  # a proxy carries the agent's calls
        ("api.wandb.ai", "/graphql"),
    ],
)
def test_the_agents_own_traffic_is_not_ignored(host: str, path: str | None) -> None:
    assert DEFAULT_RULES.match(host, 443, path) is None


def test_the_glob_syntax() -> None:
    rules = parse("-defaults,localhost:4318/v1/*,*.corp.example,https://Metrics.Acme.io/push,[::1]")
    assert [r.glob for r in rules.rules] == [
        "localhost:4318/v1/*",
        "*.corp.example",
        "Metrics.Acme.io/push",
        "[::1]",
    ]
    assert rules.match("localhost", 4318, "/v1/a/b") is not None  # * crosses "/"
    assert rules.match("localhost", 4317, "/v1/a") is None  # the port must be equal
    assert rules.match("localhost", 4318, "/v2/a") is None  # the whole path must match
    assert rules.match("a.b.corp.example", 8080, None) is not None  # * crosses dots; any port
    assert rules.match("corp.example", 443, "/") is None
    assert rules.match("metrics.acme.io", 443, "/push") is not None  # host case-insensitive
    assert rules.match("metrics.acme.io", 443, "/Push") is None  # path case-sensitive
    assert rules.match("metrics.acme.io", 443, None) is None  # at a socket: no path known
    assert rules.match("[::1]", 9, "/x") is not None and rules.match("::1", None, None)
    assert rules.match_url("https://metrics.acme.io/push?token=1") is not None  # no query
    assert rules.match_url("http://user:pw@localhost:4318/v1/traces") is not None
    assert not parse("-defaults") and parse("-defaults").match("localhost", 80, "/") is None


def test_user_rules_are_added_to_the_defaults_unless_dropped() -> None:
    added = parse(" telemetry.acme.dev , ")
    assert [r.glob for r in added.rules] == [k.glob for k in DEFAULTS] + ["telemetry.acme.dev"]
    assert added.match("api.openai.com", 443, "/v1/traces/ingest") is not None
    dropped = parse("telemetry.acme.dev,-defaults")  # anywhere in the list
    assert [r.glob for r in dropped.rules] == ["telemetry.acme.dev"]
    assert settings.load({}).ignore.rules == DEFAULT_RULES.rules


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("*", "would ignore every call"),
        ("/v1/traces", "a host is needed"),
        ("api.acme.dev/x?key=1", "no query"),
        ("api acme", "no spaces"),
        ("localhost:http", "port must be a number"),
        ("localhost:0", "port must be a number"),
        ("ok.example,exa$mple.com", "'exa$mple.com' is not a host name glob"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_variable_and_the_entry(value: str, why: str) -> None:
    with pytest.raises(ConfigError) as info:
        settings.load({"OTEL_REPLAY_IGNORE": value})
    message = str(info.value)
    assert message.startswith(f"OTEL_REPLAY_IGNORE={value!r} is invalid: entry ")
    assert why in message and "\n" not in message


def test_the_answer_a_replay_gives() -> None:
    assert [status_for(m) for m in ("POST", "put", "PATCH", "DELETE")] == [200] * 4
    assert [status_for(m) for m in ("GET", "HEAD", "OPTIONS")] == [404] * 3
    assert call_of("https://u:p@API.example.com:443/v1/x?k=1") == "api.example.com/v1/x"
    assert call_of("http://127.0.0.1:9/v1/traces/ingest") == "127.0.0.1:9/v1/traces/ingest"
    assert call_of("http://[::1]:8080") == "[::1]:8080/"


def test_the_docs_list_every_default() -> None:
    listed = re.findall(r"^\| `([^`]+)` \| ", DOCS.read_text(), re.MULTILINE)
    assert listed == [k.glob for k in DEFAULTS]


def _background(base: str) -> None:
    """Each HTTP stack's calls to background endpoints, between two of the agent's."""
    requests.get(f"{base}/tools/orders/A-1234", timeout=10)
    httpx.post(f"{base}/v1/traces/ingest", json={"data": []})  # the Agents SDK, older ones
    httpx2.post(f"{base}/v1/traces/ingest", json={"data": []})  # the Agents SDK today
    requests.post(f"{base}/runs/multipart", data=b"--x--", timeout=10)  # LangSmith
    requests.get(f"{base}/info", timeout=10)  # a user's rule: a self-hosted LangSmith

    async def uploads() -> None:
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{base}/runs/batch", json={"post": []}) as reply,
        ):
            await reply.read()

    asyncio.run(uploads())
    httpx.get(f"{base}/tools/orders/B-2077", timeout=10)


def test_background_calls_go_out_unrecorded_through_every_stack(
    standin: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_REPLAY_IGNORE", "127.0.0.1/info")
    with CaptureKit() as kit:
        _background(standin.base_url)
    received = [(r.method, r.path) for r in standin.received]
    assert received == [
        ("GET", "/tools/orders/A-1234"),
        ("POST", "/v1/traces/ingest"),
        ("POST", "/v1/traces/ingest"),
        ("POST", "/runs/multipart"),
        ("GET", "/info"),
        ("POST", "/runs/batch"),
        ("GET", "/tools/orders/B-2077"),
    ]
    steps = [s for s in kit.spans() if "replay.step.index" in s["attributes"]]
    got: list[Any] = [
        (s["attributes"]["url.full"], s["attributes"]["replay.step.index"]) for s in steps
    ]
    assert got == [  # no step, no span of ours; the agent's steps numbered without gaps
        (f"{standin.tools_url}/orders/A-1234", 0),
        (f"{standin.tools_url}/orders/B-2077", 1),
    ]


@pytest.mark.subprocess
def test_a_hostile_glob_costs_time_linear_in_the_url() -> None:
    """Stars were a regular expression's ``.*``: ``*a*a*…*c`` against a long path of ``a``
    backtracked for ever, in every call the capture or a replay made. Checked in a child (a
    regular expression holds the GIL: no timer in this process would fire)."""
    code = (
        "from otel_replay._ignore import parse\n"
        "rules = parse('-defaults,h/' + '*a' * 30 + '*c,' + '*' + 'a*' * 30 + 'c.io')\n"
        "long = 'a' * 5000\n"
        "assert rules.match('h', 443, '/' + long) is None\n"
        "assert rules.match('h', 443, '/' + long + 'c').glob.startswith('h/*a*a')\n"
        "assert rules.match(long + '.io', 443, '/') is None\n"
        "assert rules.match(long + 'c.io', 443, '/') is not None\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, timeout=20, capture_output=True
    )
    assert done.returncode == 0, done.stderr


def test_a_huge_bad_value_is_named_in_one_short_line() -> None:
    value = ",".join(f"host{n}.example/p{n}/*" for n in range(20_000)) + ",exa$mple.com"
    assert len(settings.load({"OTEL_REPLAY_IGNORE": value[:-13]}).ignore.rules) > 20_000
    with pytest.raises(ConfigError) as info:
        settings.load({"OTEL_REPLAY_IGNORE": value})
    message = str(info.value)
    assert message.startswith("OTEL_REPLAY_IGNORE='host0.example/p0/*,host1")
    assert "'exa$mple.com' is not a host name glob" in message and len(message) < 400
