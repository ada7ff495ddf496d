"""Record the runs of ``tests/replay/data/genai_openai_*.jsonl``: written by another
instrumentation, opentelemetry-instrumentation-genai-openai, for the replay tests to read.

``python -m tests.replay._record_genai_openai [--venv DIR]`` (from the repository root, with
the project's venv): ``opentelemetry-instrument`` runs each program through the real openai
SDK in a venv of its own that holds the instrumentation (it cannot live beside openai-v2 in the
project's venv; see ``bench/capture_peers.py``), content on spans, against the stand-in,
exporting OTLP/gRPC to a real receiver. The export requests become the lines of an OTLP JSON
file as the Collector's file exporter writes them; the program's answers go beside it
(``NAME.answers.json``). The programs:

* ``genai_openai_asyncio``: ``_concurrent_agent.py asyncio``, twelve concurrent async calls.
* ``genai_openai_conversations``: ``_conversations_agent.py``, four concurrent two-turn
  conversations (system and developer prompts, a tool call and its result in the history).

The venv is made when missing (``DIR/bin/python``), with the openai, httpx2 and OpenTelemetry
versions of the running interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from examples.otlp_sink import OtlpSink
from examples.standin import StandIn
from tests.replay.test_foreign_runs import _lines

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).with_name("data")
HERE = Path(__file__).parent
PROGRAMS = {
    "genai_openai_asyncio": (HERE / "_concurrent_agent.py", "asyncio"),
    "genai_openai_conversations": (HERE / "_conversations_agent.py",),
}
"""Each recording: the program, and its arguments after ROOT and the base URL."""
DIST = "opentelemetry-instrumentation-genai-openai"


def make_venv(where: Path) -> None:
    """A venv holding the instrumentation beside this interpreter's SDK versions."""
    pins = [
        f"{d}=={metadata.version(d)}"
        for d in (
            "openai",
            "httpx2",
            "opentelemetry-sdk",
            "opentelemetry-distro",
            "opentelemetry-exporter-otlp-proto-grpc",
        )
    ]
    if not (where / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    pip = [str(where / "bin" / "python"), "-m", "pip", "install", "-q", *pins, DIST]
    subprocess.run(pip, check=True)


def record(venv: Path, name: str) -> None:
    program, *args = PROGRAMS[name]
    with StandIn(event_delay=0.001) as standin, OtlpSink() as sink:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
            "OTEL_SERVICE_NAME": "concurrent-agent",
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none",
            "OTEL_EXPORTER_OTLP_ENDPOINT": sink.grpc_endpoint,
            "OTEL_EXPORTER_OTLP_INSECURE": "true",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only",
            "PYTHONPATH": "",
        }
        bin_dir = venv / "bin"
        done = subprocess.run(
            [
                str(bin_dir / "opentelemetry-instrument"),
                str(bin_dir / "python"),
                str(program),
                str(ROOT),
                standin.openai_base_url,
                *args,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        answers = json.loads(done.stdout.strip().splitlines()[-1])["answers"]
        sink.wait_for_spans(len(standin.received), 10)
        bodies = [r.body for r in sink.requests() if r.signal == "traces"]
    DATA.mkdir(exist_ok=True)
    path, beside = DATA / f"{name}.jsonl", DATA / f"{name}.answers.json"
    path.write_text(_lines(bodies))
    beside.write_text(json.dumps(answers, indent=1, sort_keys=True) + "\n")
    print(f"{path}: {len(bodies)} export requests; {beside}: {len(answers)} answers")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=Path("/tmp/otel-replay-peers/genai-openai"))
    args = parser.parse_args()
    if not (args.venv / "bin" / "opentelemetry-instrument").exists():
        make_venv(args.venv)
    for name in PROGRAMS:
        record(args.venv, name)


if __name__ == "__main__":
    main()
