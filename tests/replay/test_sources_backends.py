"""Runs read by trace id from Jaeger v2 (``jaeger://``) and Tempo (``tempo://``), hostile
backend references, and Phoenix servers that answer what a real one would not.

Neither Jaeger nor Tempo can be installed here, so a local HTTP server stands in for each,
answering in its documented format (:mod:`tests.replay._backend` says where each shape comes
from; a real Phoenix is in ``test_sources_phoenix.py``). Tempo's older
``/api/traces/{trace_id}`` answers the bare trace.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from otel_replay.errors import SourceError
from otel_replay.replay.sources import (
    Limits,
    _limits,
    download,
    load_run,
    load_sources,
    source_name,
)
from otel_replay.replay.sources._backends import parse
from otel_replay.replay.sources._phoenix import otlp_span, phoenix_spans
from otel_replay.store import Store
from tests.cli._checks import assert_bad_input, run_cli
from tests.replay._backend import Backend
from tests.replay.conftest import (
    CLAUDE,
    SUPPORT,
    Recorded,
    assert_matches_wire,
    closed_port,
    collector_json,
    protobuf_json,
    run_spans,
)

UNKNOWN = "0af7651916cd43dd8448eb211c80319c"


@pytest.fixture(scope="module")
def backend() -> Iterator[Backend]:
    server = Backend()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def fresh(backend: Backend) -> None:
    backend.reset()


def trace_id(recorded: Recorded, run_id: str) -> str:
    context = run_spans(recorded, run_id)[0].context
    assert context is not None
    return f"{context.trace_id:032x}"


def jaeger(backend: Backend, recorded: Recorded, run_id: str) -> str:
    """Serve ``run_id``'s trace as Jaeger does; its ``jaeger://`` reference."""
    tid = trace_id(recorded, run_id)
    backend.serve(f"/api/v3/traces/{tid}", {"result": collector_json(run_spans(recorded, run_id))})
    return f"jaeger://127.0.0.1:{backend.port}/{tid}"


def tempo_trace(spans: Any, key: str = "batches") -> dict[str, Any]:
    return {key: protobuf_json(spans)["resourceSpans"]}


def test_a_run_from_jaeger_by_trace_id(recorded: Recorded, backend: Backend) -> None:
    ref = jaeger(backend, recorded, SUPPORT)
    run = load_run(ref)
    assert run.run_id == SUPPORT and run.source == ref
    assert_matches_wire(run, recorded)
    tid = ref.rpartition("/")[2]
    assert backend.requests == [(f"/api/v3/traces/{tid}", "application/json")]
    # The selector is checked here, not sent; an upper-case id is the same trace.
    assert load_run(f"{ref.upper().replace('JAEGER://', 'jaeger://')}#{SUPPORT}").run_id == SUPPORT
    assert backend.requests[-1][0] == f"/api/v3/traces/{tid}"


@pytest.mark.parametrize("key", ["batches", "resourceSpans"])
def test_a_run_from_tempo_by_trace_id(recorded: Recorded, backend: Backend, key: str) -> None:
    tid = trace_id(recorded, CLAUDE)
    answer = {"trace": tempo_trace(run_spans(recorded, CLAUDE), key), "metrics": {}}
    backend.serve(f"/api/v2/traces/{tid}", answer)
    run = load_run(f"tempo://127.0.0.1:{backend.port}/{tid}")
    assert run.run_id == CLAUDE
    assert_matches_wire(run, recorded)
    assert backend.requests == [(f"/api/v2/traces/{tid}", "application/json")]


def test_tempo_v1_answer_by_plain_url(recorded: Recorded, backend: Backend) -> None:
    tid = trace_id(recorded, CLAUDE)
    backend.serve(f"/api/traces/{tid}", tempo_trace(run_spans(recorded, CLAUDE)))
    run = load_run(f"http://127.0.0.1:{backend.port}/api/traces/{tid}")
    assert_matches_wire(run, recorded)


def test_a_run_split_over_traces_takes_every_trace_id(recorded: Recorded, backend: Backend) -> None:
    """A run recorded without ``otel_replay.run()`` has a trace per call: the user names
    them all, comma-separated; one of them alone is only part of the run."""
    spans = collector_json(run_spans(recorded, SUPPORT))
    (scope,) = spans["resourceSpans"][0]["scopeSpans"]
    first, second = UNKNOWN.replace("0a", "1b"), UNKNOWN.replace("0a", "2c")
    halves: dict[str, list[Any]] = {first: [], second: []}
    for span in sorted(scope["spans"], key=lambda s: int(s["startTimeUnixNano"])):
        part = first if len(halves[first]) < len(scope["spans"]) // 2 else second
        halves[part].append({**span, "traceId": part})
    for tid, members in halves.items():
        resource = {**spans["resourceSpans"][0], "scopeSpans": [{**scope, "spans": members}]}
        backend.serve(f"/api/v3/traces/{tid}", {"result": {"resourceSpans": [resource]}})
    whole = load_run(f"jaeger://127.0.0.1:{backend.port}/{first},{second}")
    assert_matches_wire(whole, recorded)
    part = load_run(f"jaeger://127.0.0.1:{backend.port}/{first}")
    assert part.run_id == SUPPORT and 0 < len(part.steps) < len(whole.steps)


@pytest.mark.parametrize("scheme", ["jaeger", "tempo"])
def test_an_unknown_trace_is_one_line_naming_it(backend: Backend, scheme: str) -> None:
    ref = f"{scheme}://127.0.0.1:{backend.port}/{UNKNOWN}"
    with pytest.raises(SourceError) as caught:
        load_run(ref)
    assert str(caught.value) == f"{ref}: no trace {UNKNOWN} on the server (HTTP 404)"
    line = assert_bad_input(run_cli("import", ref, "--store", "unused-store"), ref)
    assert line == f"Error: {ref}: no trace {UNKNOWN} on the server (HTTP 404)"


def test_the_time_bound_holds_over_every_request(
    recorded: Recorded, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each request would fit in the bound; the two together do not."""
    monkeypatch.setattr(_limits, "TIMEOUT_S", 1.0)
    ref = jaeger(backend, recorded, CLAUDE)
    tid = ref.rpartition("/")[2]
    for path in (f"/api/v3/traces/{tid}", f"/api/v3/traces/{UNKNOWN}"):
        backend.serve(path, {"result": {"resourceSpans": []}}, delay=0.6)
    phoenix = f"phoenix://127.0.0.1:{backend.port}"
    pages = {"data": [PHOENIX_SPAN], "next_cursor": "c1"}
    backend.serve("/v1/projects/default/spans?limit=1000", pages, delay=0.6)
    backend.serve("/v1/projects/default/spans", {"data": [], "next_cursor": None}, delay=0.6)
    for source, named in [
        (f"{ref},{UNKNOWN}", f"{ref.rpartition('/')[0]}/{UNKNOWN}"),
        (phoenix, f"{phoenix}/default"),
    ]:
        # Only a bound over both requests can say this: each alone ends inside 1 s.
        with pytest.raises(SourceError) as caught:
            load_run(source)
        assert str(caught.value) == (
            f"{named}: the download took longer than 1 s (download it, then give the file)"
        )


@pytest.mark.parametrize("scheme", ["jaeger", "tempo", "phoenix"])
def test_a_server_that_is_down_is_one_line(scheme: str) -> None:
    ref = f"{scheme}://127.0.0.1:{closed_port()}/{'default' if scheme == 'phoenix' else UNKNOWN}"
    with pytest.raises(SourceError) as caught:
        load_run(ref)
    message = str(caught.value)
    assert message.startswith(f"{ref}: cannot download (") and "refused" in message
    assert "\n" not in message


def test_a_huge_answer_stops_at_the_source_bound(
    recorded: Recorded, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = jaeger(backend, recorded, SUPPORT)
    monkeypatch.setenv("OTEL_REPLAY_SOURCE_MAX_BYTES", "4096")
    with pytest.raises(SourceError) as caught:
        load_run(ref)
    assert str(caught.value) == (
        f"{ref} answers more than 4096 bytes (OTEL_REPLAY_SOURCE_MAX_BYTES raises the bound)"
    )
    # Several traces are bounded together: each answer fits, the two do not.
    size = len(backend.routes[f"/api/v3/traces/{ref.rpartition('/')[2]}"].body)
    backend.serve(f"/api/v3/traces/{UNKNOWN}", {"result": {"resourceSpans": []}})
    monkeypatch.setenv("OTEL_REPLAY_SOURCE_MAX_BYTES", str(size + 10))
    with pytest.raises(SourceError) as caught:
        load_run(f"{ref},{UNKNOWN}")
    assert str(caught.value).startswith(f"{ref},{UNKNOWN} answers more than {size + 10} bytes")


def test_a_partial_tempo_trace_is_refused(recorded: Recorded, backend: Backend) -> None:
    tid = trace_id(recorded, CLAUDE)
    answer = {
        "trace": tempo_trace(run_spans(recorded, CLAUDE)),
        "status": "PARTIAL",
        "message": "trace exceeds max size (max bytes: 5000000)",
    }
    backend.serve(f"/api/v2/traces/{tid}", answer)
    with pytest.raises(SourceError) as caught:
        load_run(f"tempo://127.0.0.1:{backend.port}/{tid}")
    assert str(caught.value) == (
        f"tempo://127.0.0.1:{backend.port}/{tid}: the server answered only part of the trace "
        "(trace exceeds max size (max bytes: 5000000))"
    )


def test_redirects_stay_on_the_host(recorded: Recorded, backend: Backend) -> None:
    ref = jaeger(backend, recorded, CLAUDE)
    tid = ref.rpartition("/")[2]
    moved = f"/moved/api/v3/traces/{tid}"
    backend.routes[moved] = backend.routes.pop(f"/api/v3/traces/{tid}")
    backend.serve(f"/api/v3/traces/{tid}", b"", 302, Location=moved)
    assert load_run(ref).run_id == CLAUDE
    # "localhost" is another host than "127.0.0.1", though the same machine.
    elsewhere = f"http://localhost:{backend.port}{moved}"
    backend.serve(f"/api/v3/traces/{tid}", b"", 302, Location=elsewhere)
    backend.requests.clear()
    with pytest.raises(SourceError) as caught:
        load_run(ref)
    assert str(caught.value) == (
        f"{ref}: cannot download (redirected to another host, localhost:{backend.port}; "
        "not followed)"
    )
    assert backend.requests == [(f"/api/v3/traces/{tid}", "application/json")]


LONG = "x" * 257


@pytest.mark.parametrize(
    ("ref", "problem"),
    [
        ("jaeger://127.0.0.1:{port}/../../admin", "'../../admin' is not a trace id"),
        ("jaeger://127.0.0.1:{port}/%2e%2e%2fapi", "'../api' is not a trace id"),
        ("tempo://127.0.0.1:{port}/%00", "'\\x00' is not a trace id"),
        ("tempo://127.0.0.1:{port}/%EF%BC%90" + "0" * 31, "'\\uff10" + "0" * 31 + "' is not a"),
        ("jaeger://127.0.0.1:{port}/", "give a trace id (…/TRACE_ID) or a run to search for"),
        ("tempo://127.0.0.1:{port}", "give a trace id (…/TRACE_ID) or a run to search for"),
        ("jaeger://127.0.0.1:{port}/{tid}/spans", "is not a trace id (32 hex digits)"),
        ("jaeger://127.0.0.1:{port}#r_\x1b[31m", "the run id 'r_\\x1b[31m' is not printable"),
        ("tempo://127.0.0.1:{port}#r_\u202egnp.exe", "the run id 'r_\\u202egnp.exe' is not pr"),
        ("tempo://127.0.0.1:{port}#" + LONG, "the run id is longer than 256 characters"),
        ("tempo://127.0.0.1:{port}/{tid}?limit=1", "a backend reference takes no query"),
        ("tempo://ann:pw@127.0.0.1:{port}/{tid}", "takes no user name or password"),
        ("tempo://127.0.0.1%40evil.example:{port}/{tid}", "the host and port hold a '%' or"),
        ("jaeger://127.0.0.1%2f..:{port}/{tid}", "the host and port hold a '%' or '\\'"),
        ("jaeger://127.0.0.1\\evil.example:{port}/{tid}", "the host and port hold a '%' or"),
        ("tempo://127.0.0.1:99999/{tid}", "the port is not a number from 1 to 65535"),
        ("tempo://127.0.0.1:/{tid}", "the port is not a number"),
        ("tempo://exa_mple:{port}/{tid}", "the host is not a host name or an IP address"),
        ("tempo://\uff45xample.org:{port}/{tid}", "the host is not a host name or an IP address"),
        ("jaeger://[::1/{tid}", "the host is not an IPv6 address in brackets"),
        ("jaeger://:{port}/{tid}", "the host is missing"),
        ("phoenix://127.0.0.1:{port}/..", "the project name '..' is a path step ('..')"),
        ("phoenix://127.0.0.1:{port}/%2e%2e", "the project name '..' is a path step ('..')"),
        ("phoenix://127.0.0.1:{port}/%2E", "the project name '.' is a path step ('.')"),
        (
            "phoenix://127.0.0.1:{port}/%E2%80%A5",
            "the project name '\\u2025' is a path step ('..')",
        ),
        ("phoenix://127.0.0.1:{port}/%EF%BC%8E%EF%BC%8E", "'\\uff0e\\uff0e' is a path step ('..')"),
        ("phoenix://127.0.0.1:{port}/a%2Fb", "the project name 'a/b' holds a path separator"),
        ("phoenix://127.0.0.1:{port}/a%5Cb", "the project name 'a\\\\b' holds a path separator"),
        ("phoenix://127.0.0.1:{port}/a\\b", "the project name 'a\\\\b' holds a path separator"),
        ("phoenix://127.0.0.1:{port}/a%E2%88%95b", "'a\\u2215b' holds a look-alike of a path se"),
        ("phoenix://127.0.0.1:{port}/a%E2%88%95b", "separator (U+2215 DIVISION SLASH)"),
        ("phoenix://127.0.0.1:{port}/%EF%BC%8Fadmin", "(U+FF0F FULLWIDTH SOLIDUS)"),
        ("phoenix://127.0.0.1:{port}/a%252Fb", "the project name 'a%2Fb' is percent-encoded twice"),
        ("phoenix://127.0.0.1:{port}/a%23b", "a project name holding '?' or '#' is not supported"),
        ("phoenix://127.0.0.1:{port}/a%00b", "the project name 'a\\x00b' is not printable"),
        ("phoenix://127.0.0.1:{port}/a%1b[31m", "the project name 'a\\x1b[31m' is not printable"),
        ("phoenix://127.0.0.1:{port}/" + LONG, "the project name is longer than 256 characters"),
        ("phoenix://127.0.0.1:{port}/%ff", "the path is not percent-encoded UTF-8"),
        ("phoenix://127.0.0.1:{port}#r_\x1b]0;pwned\x07", "the run id 'r_\\x1b]0;pwned\\x07' is"),
    ],
)
def test_a_hostile_reference_is_refused_before_any_request(
    backend: Backend, tmp_path: Path, ref: str, problem: str
) -> None:
    """Each is refused for what is wrong with it, on one printable line, before a request."""
    ref = ref.format(port=backend.port, tid=UNKNOWN)
    line = assert_bad_input(run_cli("import", ref, "--store", str(tmp_path / "s")), problem)
    assert line.isprintable() and "\x1b" not in line
    assert backend.requests == []
    assert not (tmp_path / "s").exists()


def test_a_nul_in_a_run_id_is_refused_before_any_request(backend: Backend) -> None:
    """A NUL cannot travel in an argument: given through the API."""
    for scheme in ("jaeger", "tempo", "phoenix"):
        with pytest.raises(SourceError) as caught:
            load_run(f"{scheme}://127.0.0.1:{backend.port}#r_\x00x")
        assert "the run id 'r_\\x00x' is not printable" in str(caught.value)
    assert backend.requests == []


@pytest.mark.parametrize(
    ("given", "project", "sent"),
    [
        ("ann@example.org", "ann@example.org", "ann%40example.org"),
        ("a..b", "a..b", "a..b"),
        ("100%25", "100%", "100%25"),
    ],
)
def test_a_project_name_that_only_looks_odd_is_sent_escaped(
    backend: Backend, given: str, project: str, sent: str
) -> None:
    """``@`` in a project is no user name: it is sent escaped, to the host given."""
    ref = f"phoenix://127.0.0.1:{backend.port}/{given}"
    backend.serve(f"/v1/projects/{sent}/spans", {"data": [PHOENIX_SPAN], "next_cursor": None})
    assert source_name(ref) == f"phoenix://127.0.0.1:{backend.port}/{project}"
    assert b"b94732b82ab1e7b5" in download(ref, Limits.from_env())
    assert backend.requests == [(f"/v1/projects/{sent}/spans?limit=1000", "application/json")]


def test_default_ports() -> None:
    assert str(parse(f"jaeger://example.org/{UNKNOWN.upper()}")) == (
        f"jaeger://example.org:16686/{UNKNOWN}"
    )
    assert str(parse(f"tempo://[::1]/{UNKNOWN}")) == f"tempo://[::1]:3200/{UNKNOWN}"
    assert str(parse("phoenix://phoenix.internal")) == "phoenix://phoenix.internal:6006/default"
    assert parse("phoenix://h:443/night%20shift").base_url == "https://h:443"


def test_import_and_export_from_jaeger(
    recorded: Recorded, backend: Backend, tmp_path: Path
) -> None:
    ref = jaeger(backend, recorded, SUPPORT)
    done = run_cli("import", ref, "--store", str(tmp_path / "store"))
    assert done.exit_code == 0, done.output
    steps = len(recorded.exchanges[SUPPORT])
    assert f"{SUPPORT}: imported {steps} steps ({steps} exact, 0 semantic)" in done.stdout
    with Store.open(tmp_path / "store", create=False) as store:
        assert store.run(SUPPORT).step_count == steps
    done = run_cli("export", ref, str(tmp_path / "bundle"))
    assert done.exit_code == 0, done.output
    assert load_sources(str(tmp_path / "bundle"))[0].run.run_id == SUPPORT
    assert (tmp_path / "bundle" / "bundle.json").is_file()


PHOENIX_SPAN = {
    "id": "U3BhbjoxMA==",
    "name": "chat gpt-4o-mini",
    "context": {"trace_id": UNKNOWN, "span_id": "b94732b82ab1e7b5"},
    "span_kind": "LLM",
    "parent_id": None,
    "start_time": "2026-11-29T07:05:38.071179+00:00",
    "end_time": "2026-11-29T07:05:38.155240+00:00",
    "status_code": "OK",
    "status_message": "",
    "attributes": {"gen_ai": {"operation": {"name": "chat"}}, "replay.step.index": 0},
    "events": [{"name": "x", "timestamp": "2026-11-29T07:05:38Z", "attributes": {}}],
}
"""A span as Phoenix's ``GET /v1/projects/{project}/spans`` answers it (attributes may come
nested by their dotted keys)."""


def phoenix_page(backend: Backend, *spans: Any, cursor: str | None = None) -> str:
    backend.serve("/v1/projects/default/spans", {"data": list(spans), "next_cursor": cursor})
    return f"phoenix://127.0.0.1:{backend.port}"


def test_phoenix_span_json_becomes_otlp() -> None:
    span = otlp_span(PHOENIX_SPAN, "here")
    assert span["startTimeUnixNano"] == "1795935938071179000"
    assert span["endTimeUnixNano"] == "1795935938155240000"
    assert span["attributes"] == {
        "gen_ai.operation.name": "chat",
        "replay.step.index": 0,
        "openinference.span.kind": "LLM",
    }
    assert span["events"][0]["timeUnixNano"] == "1795935938000000000"
    for written, nanos in [
        ("2026-11-29T09:05:38.5+02:00", "1795935938500000000"),
        ("2026-11-29 07:05:38.123456789", "1795935938123456789"),
        ("2026-11-29T02:05:38-0500", "1795935938000000000"),
    ]:
        assert otlp_span({**PHOENIX_SPAN, "start_time": written}, "")["startTimeUnixNano"] == nanos


def test_phoenix_pages_are_followed_to_the_end(backend: Backend) -> None:
    second = {**PHOENIX_SPAN, "context": {"trace_id": UNKNOWN, "span_id": "00000000000000a2"}}
    third = {**PHOENIX_SPAN, "context": {"trace_id": UNKNOWN, "span_id": "00000000000000a3"}}
    # Attributes nested deeper than Python recurses (json.dumps cannot write them).
    deep = '{"n":' * 1000 + '{"leaf":1}' + "}" * 1000
    last = json.dumps({"data": [second, {**third, "attributes": "DEEP"}], "next_cursor": None})
    backend.serve(
        "/v1/projects/night%20shift/spans?limit=1000",
        {"data": [PHOENIX_SPAN], "next_cursor": "U3BhbjoxMA=="},
    )
    backend.serve(
        "/v1/projects/night%20shift/spans?limit=1000&cursor=U3BhbjoxMA%3D%3D",
        last.replace('"DEEP"', deep).encode(),
    )
    base = f"http://127.0.0.1:{backend.port}"
    document = json.loads(phoenix_spans(base, "night shift", "here", Limits.from_env()))
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert [s["spanId"] for s in spans] == [
        "b94732b82ab1e7b5",
        "00000000000000a2",
        "00000000000000a3",
    ]
    assert spans[2]["attributes"] == {"n." * 1000 + "leaf": 1, "openinference.span.kind": "LLM"}
    assert len(backend.requests) == 2


def test_phoenix_pages_that_never_end_are_refused(backend: Backend) -> None:
    ref = phoenix_page(backend, PHOENIX_SPAN, cursor="U3BhbjoxMA==")
    with pytest.raises(SourceError) as caught:
        load_run(ref)
    assert str(caught.value) == f"{ref}/default: the server's pages do not end ('U3BhbjoxMA==')"
    assert len(backend.requests) == 2
    assert "cursor=U3BhbjoxMA%3D%3D" in backend.requests[1][0]


def test_phoenix_pages_past_the_bound_are_refused(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = {**PHOENIX_SPAN, "attributes": {"x": "y" * 3000}}
    ref = phoenix_page(backend, big)
    backend.serve("/v1/projects/default/spans?limit=1000", {"data": [big], "next_cursor": "c2"})
    monkeypatch.setenv("OTEL_REPLAY_SOURCE_MAX_BYTES", "5000")
    with pytest.raises(SourceError) as caught:
        load_run(ref)
    assert str(caught.value).startswith(f"{ref}/default answers more than 5000 bytes")
    assert len(backend.requests) == 2  # each page fits; the two do not


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (b"<html>", "the server's answer is not JSON"),
        (b"[]", "the server's answer is not Phoenix span pages"),
        (b'{"data": {}}', "the server's answer is not Phoenix span pages"),
        (b'{"data": [1]}', "a span in the answer is not an object"),
        (
            json.dumps({"data": [{**PHOENIX_SPAN, "start_time": "yesterday"}]}).encode(),
            "span 'chat gpt-4o-mini' cannot be read: start_time 'yesterday' is not an ISO",
        ),
        (
            json.dumps({"data": [{**PHOENIX_SPAN, "context": None}]}).encode(),
            "span 'chat gpt-4o-mini' cannot be read: context is not an object",
        ),
    ],
)
def test_a_phoenix_answer_that_is_not_span_pages(
    backend: Backend, tmp_path: Path, answer: bytes, problem: str
) -> None:
    ref = phoenix_page(backend)
    backend.serve("/v1/projects/default/spans", answer)
    line = assert_bad_input(run_cli("import", ref, "--store", str(tmp_path / "s")), problem)
    assert line.startswith(f"Error: {ref}/default: ")
