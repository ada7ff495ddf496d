"""openai 2.x, the last major version built on plain ``httpx``, is recorded like the current one.

The venv keeps openai 2.x in ``.venv/legacy-openai`` (installed by ``make setup``); a subprocess
puts it first on ``PYTHONPATH`` and runs ``_legacy_openai_script.py``, which makes sync, async
and streamed calls to a stand-in under :class:`CaptureKit` and prints what it saw as JSON.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parents[2]
LEGACY = ROOT / ".venv" / "legacy-openai"
SCRIPT = Path(__file__).with_name("_legacy_openai_script.py")
SYSTEM = "You are a support agent for Acme."
# The script's calls, in the order it makes them.
CALLS = [
    ("sync", "A-2001", False),
    ("sync-stream", "A-2003", True),
    ("async", "A-2002", False),
    ("async-stream", "A-2004", True),
]


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def run_script() -> dict[str, Any]:
    assert (LEGACY / "openai").is_dir(), (
        f"openai 2.x is missing from {LEGACY}; run `make setup` to install it"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_"))}
    env["PYTHONPATH"] = str(LEGACY)
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(ROOT)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, f"legacy script failed:\n{proc.stdout}\n{proc.stderr}"
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_openai_2x_on_httpx_is_recorded() -> None:
    out = run_script()
    assert out["openai_version"].startswith("2.")
    spans = out["spans"]
    received = [base64.b64decode(r["body"]) for r in out["received"]]
    assert [r["path"] for r in out["received"]] == ["/v1/chat/completions"] * len(CALLS)
    assert len(spans) == len(received) == len(CALLS)
    run_ids = {s["attributes"]["replay.run.id"] for s in spans}
    assert len(run_ids) == 1

    for index, (span, body, response_b64, (call, order, stream)) in enumerate(
        zip(spans, received, out["response_bodies"], CALLS, strict=True)
    ):
        attrs = span["attributes"]
        assert span["name"] == "chat gpt-4o-mini", call
        assert span["kind"] == "CLIENT"
        assert span["scope"] == "otel_replay"
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.provider.name"] == "openai"
        assert attrs["gen_ai.request.model"] == "gpt-4o-mini"
        assert attrs["replay.step.kind"] == "llm"
        assert attrs["replay.step.index"] == index
        assert attrs["replay.mode"] == "record"
        assert attrs["replay.prompt.hash"].startswith("sha256:")
        assert attrs.get("gen_ai.request.stream", False) is stream, call
        # Hashes: the request one is sha256 of exactly what the stand-in received.
        assert attrs["replay.request.hash"] == sha(body), call
        assert attrs["replay.request.size"] == len(body)
        assert response_b64 is not None, f"no step handed off for {call}"
        response = base64.b64decode(response_b64)
        assert attrs["replay.response.hash"] == sha(response), call
        assert attrs["replay.response.complete"] is True, call
        assert (b"data: " in response) is stream
        # Structured messages, in and out.
        question = f"Tell me about order {order}, please."
        assert attrs["gen_ai.input.messages"] == [
            {"role": "system", "parts": [{"type": "text", "content": SYSTEM}]},
            {"role": "user", "parts": [{"type": "text", "content": question}]},
        ]
        response_id, text = out["answers"][call]
        assert order in text
        assert attrs["gen_ai.response.id"] == response_id
        assert attrs["gen_ai.output.messages"] == [
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": text}],
                "finish_reason": "stop",
            }
        ]
        assert attrs["gen_ai.usage.input_tokens"] > 0
        assert attrs["gen_ai.usage.output_tokens"] > 0
        assert b"sk-legacy-secret" not in body and "sk-legacy-secret" not in json.dumps(span)
