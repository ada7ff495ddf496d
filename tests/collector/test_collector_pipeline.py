"""The example agent's spans through the shipped Collector's pipeline, as far as it runs
here: recorded over OTLP by a real receiver, passed through the ``redaction`` processor's
handling of attributes with the shipped settings, written in the file exporter's format,
compression and rotation that ``otelcol.yaml`` names, and replayed and imported from that
directory through the CLI."""

from __future__ import annotations

import copy
import hashlib
import sys
from pathlib import Path, PurePosixPath

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from examples.otlp_sink import OtlpSink
from examples.standin import StandIn
from otel_replay import attributes
from otel_replay._inline import decode_body
from tests.cli._checks import run_cli
from tests.collector._otelcol import MASK, Redaction, load_config, redact_request
from tests.replay._collector_files import Exporter, split, write_rotated
from tests.replay.test_replay_cli import AGENT, _record, replay

pytestmark = pytest.mark.subprocess

RUN = "r_collected"
FILES = 3  # the live file and the backups rotation left, at most
BODIES = (
    (attributes.REPLAY_REQUEST_BODY, attributes.REPLAY_REQUEST_HASH),
    (attributes.REPLAY_RESPONSE_BODY, attributes.REPLAY_RESPONSE_HASH),
)


@pytest.fixture(scope="module")
def recorded(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[list[ExportTraceServiceRequest], str]:
    """The support agent recorded once, exporting only over OTLP (no store) in small
    batches: the export requests the receiver got, and what the agent printed."""
    root = tmp_path_factory.mktemp("collected")
    with StandIn(event_delay=0.001) as standin, OtlpSink() as sink:
        done = _record(
            root / "unused-store",
            RUN,
            [str(AGENT)],
            STANDIN_URL=standin.base_url,
            OTEL_TRACES_EXPORTER="otlp",
            OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/protobuf",
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{sink.http_endpoint}/v1/traces",
            OTEL_BSP_MAX_EXPORT_BATCH_SIZE="3",
            OTEL_BSP_SCHEDULE_DELAY="10",
        )
        bodies = [r.body for r in sink.requests() if r.signal == "traces"]
    assert not (root / "unused-store").exists() or not any((root / "unused-store").iterdir())
    return [ExportTraceServiceRequest.FromString(b) for b in bodies], done.stdout


@pytest.fixture(scope="module")
def redaction() -> Redaction:
    return Redaction.of(load_config()["processors"]["redaction"])


def _spans(requests: list[ExportTraceServiceRequest]) -> list[Span]:
    return [
        span
        for request in requests
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    ]


def _attribute(span: Span, key: str) -> str | None:
    for item in span.attributes:
        if item.key == key:
            return item.value.string_value
    return None


def test_our_spans_pass_the_redaction_processor_unchanged(
    recorded: tuple[list[ExportTraceServiceRequest], str], redaction: Redaction
) -> None:
    requests, _ = recorded
    spans = _spans(requests)
    assert len([s for s in spans if _attribute(s, attributes.REPLAY_STEP_KIND)]) == 9
    assert any(_attribute(s, attributes.REPLAY_REQUEST_BODY) for s in spans)
    # The spans carry what the processor looks at: the redacted API key's header, gen_ai
    # content, token counts.
    assert any(_attribute(s, "gen_ai.input.messages") for s in spans)
    for request in requests:
        passed = copy.deepcopy(request)
        redact_request(passed, redaction)
        assert passed == request


def _foreign_span() -> ExportTraceServiceRequest:
    """A span another instrumentation emits, with credentials in its attributes."""

    def text(key: str, value: str) -> KeyValue:
        return KeyValue(key=key, value=AnyValue(string_value=value))

    header = AnyValue(array_value=ArrayValue(values=[AnyValue(string_value="Bearer sk-live-1")]))
    span = Span(
        name="POST",
        attributes=[
            KeyValue(key="http.request.header.authorization", value=header),
            text("http.request.header.x-api-key", "sk-live-2"),
            text("db.password", "hunter22"),
            text("app.note", "Bearer sk-live-3"),
            text("url.full", "https://api.example.com/v1/chat"),
            KeyValue(key="gen_ai.usage.input_tokens", value=AnyValue(int_value=12)),
        ],
    )
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.append(span)
    return request


def test_credentials_in_other_instrumentations_spans_are_masked(redaction: Redaction) -> None:
    request = _foreign_span()
    redact_request(request, redaction)
    (span,) = _spans([request])
    got = {item.key: item.value for item in span.attributes}
    for key in (
        "http.request.header.authorization",
        "http.request.header.x-api-key",
        "db.password",
        "app.note",
    ):
        assert got[key] == AnyValue(string_value=MASK), key
    assert got["url.full"].string_value == "https://api.example.com/v1/chat"
    assert got["gen_ai.usage.input_tokens"] == AnyValue(int_value=12)


def test_a_masked_body_would_lose_its_hash_so_bodies_are_ignored(
    recorded: tuple[list[ExportTraceServiceRequest], str], redaction: Redaction
) -> None:
    """A team adds a value pattern of its own (here one that matches the support agent's
    product name). Were the inline bodies looked at, their bytes would change and no longer
    hash to ``replay.request.hash``: the run would not replay byte-exact. They are not."""
    requests, _ = recorded
    settings = load_config()["processors"]["redaction"]
    widened = {**settings, "blocked_values": [*settings["blocked_values"], "Northwind"]}
    careless = Redaction.of({**widened, "ignored_keys": []})
    shipped = Redaction.of(widened)

    def bodies_hash_true(reqs: list[ExportTraceServiceRequest]) -> list[bool]:
        """For each inline body: does it still hash to its recorded hash?"""
        return [
            "sha256:" + hashlib.sha256(decode_body(body)).hexdigest() == _attribute(span, digest)
            for span in _spans(reqs)
            for key, digest in BODIES
            if (body := _attribute(span, key))
        ]

    masked = copy.deepcopy(requests)
    for request in masked:
        redact_request(request, careless)
    assert not all(bodies_hash_true(masked))
    kept = copy.deepcopy(requests)
    for request in kept:
        redact_request(request, shipped)
    assert all(bodies_hash_true(kept)) and len(bodies_hash_true(kept)) > 9


@pytest.fixture(scope="module")
def archive(
    recorded: tuple[list[ExportTraceServiceRequest], str],
    redaction: Redaction,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """The recorded requests, through the redaction processor, written as the shipped file
    exporter writes them: its format, compression and rotation, read from otelcol.yaml."""
    requests, _ = recorded
    settings = load_config()["exporters"]["file/archive"]
    exporter = Exporter(settings["format"], settings.get("compression") or "none")
    for request in requests:
        redact_request(request, redaction)
    files = split(requests, FILES)
    assert 2 <= len(files) <= settings["rotation"]["max_backups"] + 1
    folder = tmp_path_factory.mktemp("archive") / "otel-replay"
    write_rotated(folder, exporter, files, live=PurePosixPath(settings["path"]).name)
    return folder


def test_the_archive_replays_through_the_cli(
    archive: Path, recorded: tuple[list[ExportTraceServiceRequest], str], tmp_path: Path
) -> None:
    _, printed = recorded
    names = sorted(p.name for p in archive.iterdir())
    assert "traces.otlp" in names
    assert (
        sum(n.startswith("traces-") and n.endswith("-size.otlp") for n in names)
        == len(names) - 1
        > 0
    )
    done = replay(tmp_path / "store", str(archive), sys.executable, str(AGENT))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(printed)
    assert "identical" in done.stdout[len(printed) :]
    assert "fidelity: exact 9" in done.stdout
    assert "Traceback" not in done.stderr


def test_the_archive_imports_through_the_cli(archive: Path, tmp_path: Path) -> None:
    target = tmp_path / "imported"
    imported = run_cli("import", str(archive), "--store", str(target))
    assert imported.exit_code == 0, imported.output
    assert f"{RUN}: imported 9 steps (9 exact, 0 semantic)" in imported.stdout
    again = run_cli("import", str(archive), "--store", str(target))
    assert again.exit_code == 0, again.output
    assert "0 runs imported" in again.stdout.splitlines()[-1]
