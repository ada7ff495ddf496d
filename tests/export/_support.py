"""Helpers for exporter tests: an in-process recording pipeline, subprocess environments, and
every byte a store keeps."""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import zstandard
from opentelemetry.instrumentation.environment_variables import (
    OTEL_PYTHON_DISABLED_INSTRUMENTATIONS as DISABLED,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from examples.otlp_sink import OtlpSink
from otel_replay.capture.instrumentor import ReplayInstrumentor
from otel_replay.export import ReplaySpanExporter
from otel_replay.runs._run import start_process_run
from otel_replay.store import Store

ROOT = Path(__file__).resolve().parents[2]
INSTRUMENT = Path(sys.executable).parent / "opentelemetry-instrument"
CHAT_URL = "http://llm.test/v1/chat/completions"


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def chat_request(text: str, model: str = "gpt-4o-mini", **extra: Any) -> bytes:
    import json

    body = {"model": model, "messages": [{"role": "user", "content": text}], **extra}
    return json.dumps(body, separators=(",", ":")).encode()


def chat_response(text: str) -> bytes:
    import json

    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
        },
        separators=(",", ":"),
    ).encode()


def echo_client(
    respond: Callable[[httpx.Request], httpx.Response] | None = None,
) -> httpx.Client:
    """A real httpx client over an in-process transport (by default: a chat completion
    answering with the request's size)."""

    def default(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            content=chat_response(f"{len(request.content)} bytes"),
            headers={"content-type": "application/json"},
        )

    return httpx.Client(transport=httpx.MockTransport(respond or default))


class Pipeline:
    """ReplayInstrumentor -> TracerProvider -> BatchSpanProcessor(ReplaySpanExporter), plus
    optional other exporters (each in its own batch processor), into a store at ``path``."""

    def __init__(
        self,
        path: Path,
        *,
        others: Iterable[SpanExporter] = (),
        store: Store | None = None,
        processor: Callable[[SpanExporter], Any] = BatchSpanProcessor,
    ) -> None:
        self.path = path
        self.provider = TracerProvider()
        self.exporter = ReplaySpanExporter(store if store is not None else path)
        self.provider.add_span_processor(processor(self.exporter))
        for other in others:
            self.provider.add_span_processor(BatchSpanProcessor(other))
        self.instrumentor = ReplayInstrumentor()
        self.tracer = self.provider.get_tracer("tests")

    def __enter__(self) -> Pipeline:
        self.run = start_process_run()
        self.instrumentor.instrument(tracer_provider=self.provider)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        """Uninstrument and shut the provider down (idempotent): everything is written."""
        if self.instrumentor.is_instrumented_by_opentelemetry:
            self.instrumentor.uninstrument()
        self.provider.shutdown()

    def open_store(self) -> Store:
        return Store.open(self.path, create=False)


OURS = "otel_replay"
"""Our instrumentor's ``opentelemetry_instrumentor`` entry point."""


@cache
def installed_instrumentations() -> frozenset[str]:
    """The names of the installed ``opentelemetry_instrumentor`` entry points (ours among
    them: the test venv must have installed it)."""
    names = frozenset(ep.name for ep in entry_points(group="opentelemetry_instrumentor"))
    assert OURS in names, f"the {OURS} entry point is not installed"
    return names


def instrumentations(*others: str, ours: bool = True) -> dict[str, str]:
    """The environment under which ``opentelemetry-instrument`` loads ours (unless ``ours`` is
    false) and the instrumentations named in ``others`` (entry-point names), no other.

    The default of every process the tests start (``tests/conftest.py`` puts it in this
    process's environment, :func:`subprocess_env` in the ones it builds): the others cost a
    child's start-up seconds of CPU (openai-agents imports the Agents SDK), and a test that
    does not exercise them learns nothing from them. A test of coexistence names the ones it
    checks.
    """
    unknown = set(others) - installed_instrumentations()
    assert not unknown, f"not installed instrumentations: {sorted(unknown)}"
    loaded = {*others, OURS} if ours else set(others)
    return {DISABLED: ",".join(sorted(installed_instrumentations() - loaded))}


def subprocess_env(store: Path, **extra: str) -> dict[str, str]:
    """An environment for ``opentelemetry-instrument`` children: no inherited OTEL_/OPENAI_
    settings, only our instrumentation loaded (``**instrumentations(...)`` in ``extra`` for
    others), the store at ``store``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OTEL_", "OPENAI_", "STANDIN_", "SUPPORT_"))
    }
    env |= {
        "OTEL_SERVICE_NAME": "export-test",
        "OTEL_TRACES_EXPORTER": "replay",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        **instrumentations(),
        "OTEL_REPLAY_STORE": str(store),
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(ROOT),
    }
    return env | extra


def exporting_to(sink: OtlpSink) -> dict[str, str]:
    """The settings for a child that exports over OTLP/HTTP to ``sink`` beside the store, as
    production does (``OTEL_TRACES_EXPORTER=otlp,replay``)."""
    return {
        "OTEL_TRACES_EXPORTER": "otlp,replay",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_ENDPOINT": sink.http_endpoint,
    }


def run_instrumented(
    store: Path, *argv: str, timeout: float = 120, **env: str
) -> subprocess.CompletedProcess[str]:
    """``opentelemetry-instrument python ARGV`` from the repository's root, recording into
    ``store`` (:func:`subprocess_env` with ``env``), its output captured as text."""
    return subprocess.run(
        [str(INSTRUMENT), sys.executable, *argv],
        cwd=ROOT,
        env=subprocess_env(store, **env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def stored_bytes(root: Path) -> bytes:
    """Every byte under a local store: the files as they are, plus the decompressed content
    of every zstd frame in its packs (so a secret cannot hide behind compression)."""
    out = bytearray()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        out += data
        out += b"".join(_frames(data))
    return bytes(out)


def _frames(data: bytes) -> Iterable[bytes]:
    """The decompressed content of every zstd frame found anywhere in ``data``."""
    at = data.find(ZSTD_MAGIC)
    while at >= 0:
        with contextlib.suppress(zstandard.ZstdError):
            yield zstandard.ZstdDecompressor().decompressobj().decompress(data[at:])
        at = data.find(ZSTD_MAGIC, at + 1)


ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
