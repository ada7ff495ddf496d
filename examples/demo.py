"""`make demo`: record the example agent through OpenTelemetry and show the captured steps.

1. Start the local stand-in model provider (OpenAI and Anthropic wire protocols, streaming
   included) and a local OTLP receiver standing in for Jaeger or a Collector.
2. Run the support agent, unmodified, under `opentelemetry-instrument`: the `otel_replay`
   instrumentor is loaded from its entry point, the agent's openai (httpx2) and tool (httpx)
   calls become spans, and the OTLP exporter ships them over HTTP/protobuf.
3. Print each step the backend received, and check each request hash against the exact bytes
   the stand-in received.

No API key, no network beyond loopback.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from examples.otlp_sink import OtlpSink  # noqa: E402
from examples.standin import StandIn  # noqa: E402


def _short(value: Any, width: int) -> str:
    text = str(value) if value is not None else "-"
    return text if len(text) <= width else text[: width - 1] + "…"


def _print_steps(spans: list[dict[str, Any]]) -> None:
    steps = sorted(
        (s for s in spans if "replay.step.index" in s["attributes"]),
        key=lambda s: (s["attributes"]["replay.run.id"], s["attributes"]["replay.step.index"]),
    )
    print(
        f"\n{'step':>4}  {'kind':<4}  {'span':<22}  {'tokens in/out':>13}  "
        f"{'request hash':<16}  {'response hash':<16}  {'ms':>6}"
    )
    for span in steps:
        attrs = span["attributes"]
        tokens = (
            f"{attrs.get('gen_ai.usage.input_tokens', '-')}/"
            f"{attrs.get('gen_ai.usage.output_tokens', '-')}"
            if attrs["replay.step.kind"] == "llm"
            else ""
        )
        label = (
            span["name"]
            if attrs["replay.step.kind"] == "llm"
            else (f"{span['name']} {attrs.get('url.full', '').split('/tools', 1)[-1]}")
        )
        print(
            f"{attrs['replay.step.index']:>4}  {attrs['replay.step.kind']:<4}  "
            f"{_short(label, 22):<22}  {tokens:>13}  "
            f"{attrs['replay.request.hash'][7:23]:<16}  "
            f"{attrs.get('replay.response.hash', '-')[7:23]:<16}  "
            f"{(span['end_ns'] - span['start_ns']) / 1e6:>6.1f}"
        )


def main() -> int:
    with StandIn() as standin, OtlpSink() as sink:
        env = {
            **os.environ,
            "STANDIN_URL": standin.base_url,
            "OTEL_SERVICE_NAME": "support-agent",
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_LOGS_EXPORTER": "none",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_ENDPOINT": sink.http_endpoint,
            "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "httpx,httpx2,openai_v2",
        }
        instrument = Path(sys.executable).with_name("opentelemetry-instrument")
        print(
            f"$ opentelemetry-instrument python examples/support_agent.py   "
            f"(stand-in {standin.base_url}, OTLP -> {sink.http_endpoint})\n"
        )
        done = subprocess.run(
            [str(instrument), sys.executable, str(ROOT / "examples" / "support_agent.py")],
            env=env,
            cwd=ROOT,
            check=False,
        )
        if done.returncode != 0:
            print(f"demo: the agent exited with {done.returncode}", file=sys.stderr)
            return done.returncode
        received = standin.received
        spans = sink.wait_for_spans(
            lambda got: sum("replay.step.index" in s["attributes"] for s in got) >= len(received),
            timeout=10,
        )
        _print_steps(spans)

    by_index = sorted(
        (s for s in spans if "replay.step.index" in s["attributes"]),
        key=lambda s: s["start_ns"],
    )
    matches = sum(
        span["attributes"]["replay.request.hash"]
        == "sha256:" + hashlib.sha256(request.body).hexdigest()
        for span, request in zip(by_index, received, strict=True)
    )
    print(
        f"\n{len(by_index)} steps recorded in run {by_index[0]['attributes']['replay.run.id']}; "
        f"{matches}/{len(received)} request hashes equal sha256 of the bytes the stand-in got."
    )
    return 0 if matches == len(received) else 1


if __name__ == "__main__":
    sys.exit(main())
