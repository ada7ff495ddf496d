"""Runs found by run id on Jaeger v2 and Tempo (``jaeger://HOST:PORT#RUN_ID``,
``tempo://HOST:PORT#RUN_ID``), through each one's search, from stand-in servers that answer
their documented search and trace APIs (:mod:`tests.replay._backend`).

A run recorded without ``otel_replay.run()`` is a trace per model call: the recorded runs are
cut into several traces here, each span moved to the time its generated run id says.
"""

from __future__ import annotations

import calendar
import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from otel_replay.errors import SourceError
from otel_replay.replay.sources import _limits, _search, load_run
from otel_replay.replay.sources._search import Window
from tests.cli._checks import assert_bad_input, run_cli
from tests.replay._backend import Backend
from tests.replay.conftest import (
    CLAUDE,
    ERRORS,
    SUPPORT,
    Recorded,
    assert_matches_wire,
    collector_json,
    run_spans,
)

SUPPORT_TRACES = (
    "00000000000000000000000000a1b2c3",  # Tempo's search drops the leading zeros
    "1b7651916cd43dd8448eb211c80319c1",
    "2c7651916cd43dd8448eb211c80319c2",
)
CLAUDE_TRACE = "3d7651916cd43dd8448eb211c80319c3"
ERRORS_TRACE = "4e7651916cd43dd8448eb211c80319c4"
WEEK = 7 * 24 * 3600


@pytest.fixture(scope="module")
def backend() -> Iterator[Backend]:
    server = Backend()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def fresh(backend: Backend) -> None:
    backend.reset()


def started(run_id: str) -> int:
    """The Unix time a generated run id carries."""
    return calendar.timegm(time.strptime(run_id[2:17], "%Y%m%dT%H%M%S"))


def keep(
    backend: Backend,
    recorded: Recorded,
    run_id: str,
    trace_ids: tuple[str, ...],
    service: str,
    *,
    renamed: str | None = None,
    at: int | None = None,
) -> None:
    """Keep ``run_id``'s spans on ``backend`` as ``service``'s, cut in order of start into
    as many traces as ``trace_ids``, the first span at Unix time ``at`` (default: the time
    the run id carries), the run id ``renamed`` when given."""
    (entry,) = collector_json(run_spans(recorded, run_id))["resourceSpans"]
    spans = sorted(
        ((scope["scope"], span) for scope in entry["scopeSpans"] for span in scope["spans"]),
        key=lambda pair: int(pair[1]["startTimeUnixNano"]),
    )
    first = int(spans[0][1]["startTimeUnixNano"])
    shift = (at if at is not None else started(run_id)) * 10**9 - first
    resource = {
        **entry["resource"],
        "attributes": [{"key": "service.name", "value": {"stringValue": service}}],
    }
    size = -(-len(spans) // len(trace_ids))
    for number, trace_id in enumerate(trace_ids):
        part = [moved(span, trace_id, shift, renamed) for _, span in spans][
            number * size : (number + 1) * size
        ]
        scope = spans[0][0]
        entry = {
            "resource": copy.deepcopy(resource),
            "scopeSpans": [{"scope": scope, "spans": part}],
        }
        backend.traces.add(entry)


def moved(span: dict[str, Any], trace_id: str, shift: int, renamed: str | None) -> dict[str, Any]:
    out = {**span, "traceId": trace_id}
    for key in ("startTimeUnixNano", "endTimeUnixNano"):
        out[key] = str(int(span[key]) + shift)
    out["events"] = [
        {**e, "timeUnixNano": str(int(e["timeUnixNano"]) + shift)} for e in span.get("events", [])
    ]
    if renamed is not None:
        out["attributes"] = [
            {"key": a["key"], "value": {"stringValue": renamed}}
            if a["key"] == "replay.run.id"
            else a
            for a in span["attributes"]
        ]
    return out


def three_services(backend: Backend, recorded: Recorded) -> None:
    """SUPPORT in three traces of "support-agent", CLAUDE in a trace of "claude-agent"."""
    keep(backend, recorded, SUPPORT, SUPPORT_TRACES, "support-agent")
    keep(backend, recorded, CLAUDE, (CLAUDE_TRACE,), "claude-agent")


def asked(backend: Backend) -> list[tuple[str, dict[str, str]]]:
    """Each request's path and query parameters."""
    out = []
    for path, _ in backend.requests:
        parts = urlsplit(path)
        out.append((parts.path, {k: v[0] for k, v in parse_qs(parts.query).items()}))
    return out


def test_jaeger_finds_a_run_split_over_traces_by_run_id(
    recorded: Recorded, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PHOENIX_API_KEY", "px-for-phoenix-only")  # never sent elsewhere
    three_services(backend, recorded)
    ref = f"jaeger://127.0.0.1:{backend.port}"
    run = load_run(f"{ref}#{SUPPORT}")
    assert run.run_id == SUPPORT and run.source == ref
    assert_matches_wire(run, recorded)
    # Every service is searched (the API takes one at a time), in the week from an hour
    # before the time the run id carries; the answers hold the traces themselves.
    search = {
        "query.start_time_min": "2026-11-21T08:00:00Z",
        "query.start_time_max": "2026-11-28T08:00:00Z",
        "query.num_traces": "101",
        "query.attributes": json.dumps({"replay.run.id": SUPPORT}),
    }
    assert asked(backend) == [
        ("/api/v3/services", {}),
        ("/api/v3/traces", {"query.service_name": "claude-agent", **search}),
        ("/api/v3/traces", {"query.service_name": "support-agent", **search}),
    ]
    assert not any("Authorization" in headers for headers in backend.headers)


def test_tempo_finds_a_run_split_over_traces_by_run_id(
    recorded: Recorded, backend: Backend
) -> None:
    three_services(backend, recorded)
    ref = f"tempo://127.0.0.1:{backend.port}"
    run = load_run(f"{ref}#{SUPPORT}")
    assert run.run_id == SUPPORT and run.source == ref
    assert_matches_wire(run, recorded)
    start = started(SUPPORT) - 3600
    search = {
        "q": '{ span.replay.run.id = "r_20261121T090000_a1b2c3d4" }',
        "start": str(start),
        "end": str(start + WEEK),
        "limit": "101",
        "spss": "1",
    }
    # The search answers ids (without their leading zeros); each trace is then read.
    assert asked(backend) == [
        ("/api/search", search),
        *((f"/api/v2/traces/{trace_id}", {}) for trace_id in SUPPORT_TRACES),
    ]


@pytest.mark.parametrize("scheme", ["jaeger", "tempo"])
def test_the_id_of_one_trace_brings_the_whole_run(
    recorded: Recorded, backend: Backend, scheme: str
) -> None:
    three_services(backend, recorded)
    run = load_run(f"{scheme}://127.0.0.1:{backend.port}#{SUPPORT_TRACES[1].upper()}")
    assert_matches_wire(run, recorded)
    paths = [path for path, _ in asked(backend)]
    # That trace first, then the run id its spans carry, searched for.
    assert paths[0] == f"/api/{'v3' if scheme == 'jaeger' else 'v2'}/traces/{SUPPORT_TRACES[1]}"
    assert paths[1] == ("/api/v3/services" if scheme == "jaeger" else "/api/search")


@pytest.mark.parametrize("scheme", ["jaeger", "tempo"])
def test_any_run_id_is_searched_for_in_the_past_week(
    recorded: Recorded, backend: Backend, scheme: str
) -> None:
    """A run id set by hand carries no time: the week up to an hour from now is searched;
    quotes and backslashes in it travel escaped."""
    run_id = 'nightly "eval" \\ été'
    keep(
        backend,
        recorded,
        CLAUDE,
        (CLAUDE_TRACE,),
        "claude-agent",
        renamed=run_id,
        at=int(time.time()) - 60,
    )
    before = int(time.time())
    run = load_run(f"{scheme}://127.0.0.1:{backend.port}#{run_id}")
    assert run.run_id == run_id
    query = asked(backend)[-1 if scheme == "jaeger" else 0][1]
    if scheme == "jaeger":
        assert json.loads(query["query.attributes"]) == {"replay.run.id": run_id}
        low, high = (
            calendar.timegm(time.strptime(query[f"query.start_time_{end}"], "%Y-%m-%dT%H:%M:%SZ"))
            for end in ("min", "max")
        )
    else:
        assert query["q"] == '{ span.replay.run.id = "nightly \\"eval\\" \\\\ été" }'
        low, high = int(query["start"]), int(query["end"])
    assert high - low == WEEK and before + 3600 <= high <= time.time() + 3600


@pytest.mark.parametrize("scheme", ["jaeger", "tempo"])
def test_an_unknown_run_is_one_line(
    recorded: Recorded, backend: Backend, tmp_path: Path, scheme: str
) -> None:
    three_services(backend, recorded)
    base = f"{scheme}://127.0.0.1:{backend.port}"
    done = run_cli("import", f"{base}#r_20261101T000000_deadbeef", "--store", str(tmp_path / "s"))
    where = " in its 2 services" if scheme == "jaeger" else ""
    assert assert_bad_input(done) == (
        f"Error: {base}: no trace carries replay.run.id 'r_20261101T000000_deadbeef' from "
        f"2026-10-31T23:00:00Z to 2026-11-07T23:00:00Z{where} (an older run: give its trace "
        "ids, …/TRACE_ID,TRACE_ID)"
    )


@pytest.mark.parametrize("scheme", ["jaeger", "tempo"])
def test_import_a_run_found_by_search(
    recorded: Recorded, backend: Backend, tmp_path: Path, scheme: str
) -> None:
    three_services(backend, recorded)
    ref = f"{scheme}://127.0.0.1:{backend.port}#{SUPPORT}"
    done = run_cli("import", ref, "--store", str(tmp_path / "s"))
    assert done.exit_code == 0, done.output
    steps = len(recorded.exchanges[SUPPORT])
    assert f"{SUPPORT}: imported {steps} steps ({steps} exact, 0 semantic)" in done.stdout


def test_a_jaeger_that_ignores_the_run_id_filter_is_refused(
    recorded: Recorded, backend: Backend
) -> None:
    """Before v2.19 Jaeger's HTTP search dropped ``query.attributes``: it answers every trace
    of the service, and the run may be among them only in part."""
    three_services(backend, recorded)
    keep(backend, recorded, ERRORS, (ERRORS_TRACE,), "support-agent", at=started(SUPPORT) + 60)
    backend.traces.jaeger_filters = False
    ref = f"jaeger://127.0.0.1:{backend.port}"
    with pytest.raises(SourceError) as caught:
        load_run(f"{ref}#{SUPPORT}")
    assert str(caught.value) == (
        f"{ref}: the server's search answered traces without run {SUPPORT!r} (Jaeger before "
        "v2.19 ignores the attribute filter); give the run's trace ids (…/TRACE_ID,TRACE_ID)"
    )


@pytest.mark.parametrize("scheme", ["jaeger", "tempo"])
def test_a_run_of_more_traces_than_the_bound_is_refused(
    recorded: Recorded, backend: Backend, monkeypatch: pytest.MonkeyPatch, scheme: str
) -> None:
    monkeypatch.setattr(_search, "MAX_TRACES", 2)
    three_services(backend, recorded)
    ref = f"{scheme}://127.0.0.1:{backend.port}"
    with pytest.raises(SourceError) as caught:
        load_run(f"{ref}#{SUPPORT}")
    assert str(caught.value).startswith(
        f"{ref}: more than 2 traces carry replay.run.id {SUPPORT!r}; "
    )
    # Nothing past the search was read.
    assert all("/traces/" not in path for path, _ in asked(backend))


def test_jaeger_with_more_services_than_the_bound_is_refused(
    recorded: Recorded, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_search, "MAX_SERVICES", 1)
    three_services(backend, recorded)
    ref = f"jaeger://127.0.0.1:{backend.port}"
    with pytest.raises(SourceError) as caught:
        load_run(f"{ref}#{SUPPORT}")
    assert str(caught.value) == (
        f"{ref}: more than 1 services to search for run {SUPPORT!r}; give the run's trace ids "
        "(…/TRACE_ID,TRACE_ID)"
    )
    assert len(backend.requests) == 1


@pytest.mark.parametrize("scheme", ["jaeger", "tempo"])
def test_the_byte_bound_holds_over_the_search_and_every_trace(
    recorded: Recorded, backend: Backend, monkeypatch: pytest.MonkeyPatch, scheme: str
) -> None:
    keep(backend, recorded, SUPPORT, SUPPORT_TRACES, "support-agent")
    # A run of two processes: Jaeger answers each service's traces apart.
    backend.traces.resource_spans[0]["resource"]["attributes"][0]["value"]["stringValue"] = "w"
    ref = f"{scheme}://127.0.0.1:{backend.port}"
    load_run(f"{ref}#{SUPPORT}")
    bound = sum(backend.sizes) - 1  # each answer fits in it; all of them do not
    assert len(backend.sizes) >= 3 and max(backend.sizes) <= bound
    monkeypatch.setenv("OTEL_REPLAY_SOURCE_MAX_BYTES", str(bound))
    with pytest.raises(SourceError) as caught:
        load_run(f"{ref}#{SUPPORT}")
    assert str(caught.value).startswith(f"{ref} answers more than {bound} bytes")


def test_the_time_bound_holds_over_the_search_and_every_trace(
    recorded: Recorded, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_limits, "TIMEOUT_S", 1.0)
    keep(backend, recorded, SUPPORT, SUPPORT_TRACES, "support-agent")
    backend.traces.delay = 0.3  # each request ends well inside 1 s; the four do not
    with pytest.raises(SourceError) as caught:
        load_run(f"tempo://127.0.0.1:{backend.port}#{SUPPORT}")
    assert str(caught.value).endswith(
        ": the download took longer than 1 s (download it, then give the file)"
    )


def test_a_search_the_server_refuses_says_why(recorded: Recorded, backend: Backend) -> None:
    """A Tempo told to search at most a day: its reason, in its words."""
    keep(backend, recorded, SUPPORT, SUPPORT_TRACES, "support-agent")
    backend.traces.tempo_max_search_s = 24 * 3600
    ref = f"tempo://127.0.0.1:{backend.port}"
    with pytest.raises(SourceError) as caught:
        load_run(f"{ref}#{SUPPORT}")
    start = started(SUPPORT) - 3600
    assert str(caught.value) == (
        f"{ref}: the server answered HTTP 400 Bad Request (range specified by start and end "
        f"exceeds 24h0m0s. received start={start} end={start + WEEK})"
    )


def test_the_search_window() -> None:
    at = started(SUPPORT)
    assert Window.of(SUPPORT, now=0) == Window(at - 3600, at - 3600 + WEEK)
    assert Window.of("nightly-42", now=10**9) == Window(10**9 + 3600 - WEEK, 10**9 + 3600)
    # Not a time: a hand-made run id that only looks generated.
    assert Window.of("r_20261340T000000_x", now=10**9) == Window.of("x", now=10**9)
    assert str(Window(0, WEEK)) == "from 1970-01-01T00:00:00Z to 1970-01-08T00:00:00Z"
