"""Exact bytes in, exact bytes out: bodies, fixtures and spans, through real files."""

from __future__ import annotations

import itertools
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from otel_replay.step import RunEnd, RunFacts, Step
from otel_replay.store import RunInfo, Store, _derived, _write
from tests.store._data import chat_bodies, make_step, span, tag


def _store_bytes(root: Path) -> int:
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())


def _generated_bodies(count: int) -> list[bytes]:
    rng = random.Random(7)
    bodies: list[bytes] = [b"", b"{}", b"\x00" * 3, os.urandom(70_000)]
    for n in range(count):
        kind = n % 5
        if kind == 0:
            content = "".join(rng.choice('ab"\\/\n\u00e9\u4e2d\U0001f600') for _ in range(2000))
            messages = [
                {"role": "user", "content": content[: rng.randrange(2000)]} for _ in range(5)
            ]
            bodies.append(json.dumps({"messages": messages}, ensure_ascii=n % 2 == 0).encode())
        elif kind == 1:
            nested = [[[i, [str(i) * 100]] for i in range(rng.randrange(30))]]
            bodies.append(json.dumps({"input": nested, "tools": nested}).encode())
        elif kind == 2:
            bodies.append(
                json.dumps({"messages": ["x" * 700] * 3}).encode()[: -rng.randrange(1, 40)]
            )
        elif kind == 3:
            bodies.append(rng.randbytes(rng.randrange(5000)))
        else:
            bodies.append(
                ("data: " + json.dumps({"delta": "tok"}) + "\n\n").encode() * rng.randrange(200)
            )
    return bodies


def test_every_body_comes_back_byte_exact(tmp_path: Path) -> None:
    bodies = _generated_bodies(60)
    pairs = list(zip(bodies, reversed(bodies), strict=True))
    with Store.open(tmp_path / "s") as store:
        for index, (request, response) in enumerate(pairs):
            store.put([make_step("run-a", index, request, response)])
            if index % 7 == 0:
                store.flush()
    with Store.open(tmp_path / "s") as store:
        steps = store.steps("run-a")
        assert [s.index for s in steps] == list(range(len(pairs)))
        for step in steps:
            request, response = pairs[step.index]
            assert store.request_body(step) == request
            assert store.response_body(step) == response
        assert store.verify() == []


def test_step_comes_back_equal(tmp_path: Path) -> None:
    original = make_step("run-b", 0, b'{"messages":[]}', b"streamed")
    original.chunks = [(3, 100), (5, 250)]
    original.complete = False
    original.error_type = "ReadTimeout"
    with Store.open(tmp_path / "s") as store:
        store.put([original, make_step("run-b", 1, b"x", None)])
        store.flush()
        assert store.read_step("run-b", 0) == original
        no_response = store.read_step(store.step("run-b", 1))
        assert no_response.response_hash is None and no_response.response_body == b""
        assert store.response_body("run-b", 1) == b""


def test_spans_come_back_as_given(tmp_path: Path) -> None:
    request, response = chat_bodies(3)[-1]
    history = json.dumps(json.loads(request)["messages"])
    given = [
        span(
            "run-c",
            0,
            **{
                "gen_ai.input.messages": history,
                "replay.request.body": request.decode(),
                "note": "\u00e9" * 600,
                "nested": {"list": [1, 2.5, None, True, "y" * 900]},
            },
        ),
        span("run-c", None, **{"replay.seed": 42}),
    ]
    facts = RunFacts("run-c", seed=42, commit="abc123", code_dirty=True, start_ns=5)
    given[0]["events"] = [{"name": "e", "attributes": {"big": "z" * 1000}}]
    with Store.open(tmp_path / "s") as store:
        store.put([make_step("run-c", 0, request, response)], given[:1])
        store.flush()
        store.put(spans=given[1:], runs=[facts])
        store.flush()
        assert store.spans("run-c") == given
        run = store.run("run-c")  # the run's facts are given, never read out of its spans
        assert (run.seed, run.commit, run.code_dirty, run.start_ns) == (42, "abc123", True, 5)
    with Store.open(tmp_path / "s") as store:
        assert store.spans("run-c") == given
        assert store.verify() == []
    with Store.rebuild(tmp_path / "s") as store:
        assert store.spans("run-c") == given
        assert store.run("run-c").seed == 42


def test_a_span_s_inline_body_is_left_out_only_when_it_is_its_step_s_body() -> None:
    request = b'{"messages": [{"role": "user", "content": "' + b"q" * 2000 + b'"}]}'
    named = tag(request)
    attributes = {
        "replay.request.hash": named,
        "replay.request.body": request.decode(),
        "other": "x" * 1500,
        "lies.hash": named,  # names the request beside a string that is not it
        "lies": "y" * len(request),
    }
    sources = _derived.Sources({named: request}, {}, {})
    encoded = _write.encode_span(span("run-s", 0, **attributes), sources)
    assert {s.key for s in encoded.strings} == {"other", "lies"}
    entry = json.loads(encoded.entry)
    assert entry["derived"]["keys"] == ["replay.request.body"]
    # Every attribute keeps its place: a null stands in for what was taken out.
    assert list(entry["span"]["attributes"]) == list(span("run-s", 0, **attributes)["attributes"])
    assert entry["span"]["attributes"]["replay.request.body"] is None
    # Not the step's body: kept as given (a long string, stored as a body of its own).
    other = _write.encode_span(
        span("run-s", 0, **{**attributes, "replay.request.body": "z" * 1500}), sources
    )
    assert "derived" not in json.loads(other.entry)
    assert {s.key for s in other.strings} == {"replay.request.body", "other", "lies"}


def test_spans_put_with_their_steps_come_back_as_given(tmp_path: Path) -> None:
    pairs = chat_bodies(6, seed=2)
    given = [
        span(
            "run-s",
            n,
            **{
                "replay.request.hash": tag(q),
                "replay.request.body": q.decode(),
                "replay.response.hash": tag(r),
                "replay.response.body": r.decode(),
                "gen_ai.input.messages": json.dumps(json.loads(q)["messages"]),
            },
        )
        for n, (q, r) in enumerate(pairs)
    ]
    with Store.open(tmp_path / "s") as store:
        for n, (q, r) in enumerate(pairs):
            store.put([make_step("run-s", n, q, r)], [given[n]])
        store.flush()
        assert store.spans("run-s") == given
    with Store.open(tmp_path / "s") as store:
        assert store.spans("run-s") == given
        assert store.verify() == []


def test_history_costs_its_unique_bytes(tmp_path: Path) -> None:
    """Bytes on disk grow with the new messages, not with the re-sent history."""
    pairs = chat_bodies(40, seed=3)
    sizes = []
    with Store.open(tmp_path / "s") as store:
        for index, (request, response) in enumerate(pairs):
            store.put([make_step("run-d", index, request, response)])
            store.flush()
            sizes.append(_store_bytes(tmp_path / "s" / "objects"))
    growth = [b - a for a, b in itertools.pairwise(sizes)]
    last_request = len(pairs[-1][0])
    # each step adds one user and one assistant message (compressed) and a manifest of
    # digests (33 bytes a message until gc or close recompresses manifests together), never
    # the history
    assert max(growth[10:]) < last_request / 4
    raw = sum(len(q) + len(r) for q, r in pairs)
    stored = _store_bytes(tmp_path / "s" / "objects") + _store_bytes(tmp_path / "s" / "runs")
    assert raw / stored > 30  # the index is a cache of fixed size per store, counted apart


def test_close_compacts_small_packs(tmp_path: Path) -> None:
    pairs = chat_bodies(12, seed=5)
    with Store.open(tmp_path / "s") as store:
        for index, (request, response) in enumerate(pairs):
            store.put([make_step("run-e", index, request, response)])
            store.flush()
        before = len(list((tmp_path / "s" / "objects").rglob("*.pack")))
    after = list((tmp_path / "s" / "objects").rglob("*.pack"))
    assert before == 12 and len(after) == 1
    assert len(list((tmp_path / "s" / "runs").rglob("*.rec"))) == 1  # its records merged too
    with Store.open(tmp_path / "s") as store:
        assert [store.request_body(s) for s in store.steps("run-e")] == [q for q, _ in pairs]


def test_put_refuses_what_it_cannot_store_faithfully(tmp_path: Path) -> None:
    bad = make_step("run-g", 0, b"abc")
    bad.request_hash = "sha256:" + "0" * 64
    with Store.open(tmp_path / "s") as store:
        with pytest.raises(ValueError, match="request hash"):
            store.put([bad])
        with pytest.raises(ValueError, match=r"replay\.run\.id"):
            store.put(spans=[{"name": "orphan", "attributes": {}}])
        with pytest.raises(ValueError, match="JSON-ready"):
            store.put(spans=[span("run-g", 0, blob=b"bytes")])
        store.flush()
        assert store.runs() == []


def test_a_burst_and_single_steps_are_deduplicated_alike(tmp_path: Path) -> None:
    pairs = chat_bodies(30, seed=9)
    spans = [
        span("run-h", n, **{"replay.request.body": q.decode(), "gen_ai.input.messages": q.decode()})
        for n, (q, _) in enumerate(pairs)
    ]
    with Store.open(tmp_path / "s") as store:
        burst = range(20)  # one flush: split like any other
        store.put([make_step("run-h", n, *pairs[n]) for n in burst], [spans[n] for n in burst])
        store.flush()
        after_burst = _store_bytes(tmp_path / "s" / "objects")
        for n in range(20, 30):  # a step per flush: deduplicated against the burst
            store.put([make_step("run-h", n, *pairs[n])], [spans[n]])
            store.flush()
        grown = _store_bytes(tmp_path / "s" / "objects") - after_burst
        assert store.spans("run-h") == spans
        for step in store.steps("run-h"):
            assert store.request_body(step) == pairs[step.index][0]
    raw = sum(len(q) + len(r) for q, r in pairs)
    assert after_burst < sum(len(q) + len(r) for q, r in pairs[:20]) / 8
    assert grown < raw / 12  # the history the burst stored is never stored again


def test_a_span_changed_after_put_is_stored_as_it_was_put(tmp_path: Path) -> None:
    given = span("run-i", 0, text="t" * 700, short="s")
    with Store.open(tmp_path / "s") as store:
        store.put([make_step("run-i", 0, b"q", b"a")], [given])
        expected = json.loads(json.dumps(given))
        given["attributes"]["short"] = "changed"
        given["attributes"]["text"] = "changed"
        store.flush()
        assert store.spans("run-i") == [expected]


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"error_type": "ReadTimeout", "complete": False, "status_code": None},
        {"chunks": [(3, 10), (4, 20)]},
        {"chunks": [(7, 5)]},  # one chunk, but not at the end of the step
        {"response_headers": [("Content-Length", "7"), ("content-length", "8")]},
        {"request_headers": [("content-length", "02")]},  # not the size as written
    ],
)
def test_what_a_record_leaves_out_comes_back(tmp_path: Path, change: dict[str, Any]) -> None:
    given = make_step("run-c", 0, b"request", b"reply!!")
    given.chunks = [(7, given.end_ns - given.start_ns)]
    given.request_headers = [("content-length", "7"), ("x", "y")]
    for key, value in change.items():
        setattr(given, key, value)
    with Store.open(tmp_path / "s") as store:
        store.put([given])
        store.flush()
    with Store.rebuild(tmp_path / "s") as store:
        assert store.read_step("run-c", 0) == given


def _sse(events: int) -> tuple[bytes, list[tuple[int, int]]]:
    """A server-sent events body and the chunks it arrived in (one per event)."""
    parts = [
        ("data: " + json.dumps({"choices": [{"delta": {"content": f"tok{n} "}}]}) + "\n\n").encode()
        for n in range(events)
    ]
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts), [(len(part), 1_000_000 * (n + 1)) for n, part in enumerate(parts)]


def test_every_step_field_and_the_runs_facts_come_back(tmp_path: Path) -> None:
    facts = RunFacts(
        "run-f",
        mode="fork",
        seed=-3,
        commit="0" * 40,
        code_dirty=False,
        start_ns=11,
        parent_run_id="run-e",
    )
    request = json.dumps({"model": "gpt-x", "stream": True, "messages": [{"role": "user"}]})
    streamed, chunks = _sse(40)
    steps = [
        Step(
            run_id="run-f",
            index=0,
            trace_id=(1 << 128) - 1,
            span_id=(1 << 64) - 1,
            kind="llm",
            method="POST",
            url="https://api.example.test/v1/chat/completions?x=1&y=%20",
            request_headers=[("Content-Type", "application/json"), ("X-A", "1"), ("x-a", "2")],
            request_body=request.encode(),
            request_hash=tag(request.encode()),
            status_code=200,
            response_headers=[("content-type", "text/event-stream"), ("set-cookie", "a=\u00e9")],
            response_body=streamed,
            response_hash=tag(streamed),
            chunks=chunks,
            complete=True,
            start_ns=1_700_000_000_000_000_001,
            end_ns=1_700_000_000_900_000_002,
            provider="openai",
            model="gpt-x",
            tokens_in=12,
            tokens_out=40,
            run=facts,
        ),
        Step(
            run_id="run-f",
            index=7,  # indexes need not be dense
            trace_id=1,
            span_id=2,
            kind="http",
            method="GET",
            url="http://localhost:1/",
            request_headers=[],
            request_body=b"",
            request_hash=tag(b""),
            error_type="httpx.ConnectError",
            start_ns=1_700_000_001_000_000_000,
            end_ns=1_700_000_001_000_000_000,
            run=facts,
        ),
    ]
    with Store.open(tmp_path / "s") as store:
        store.put(steps)
        store.flush()
    for opened in (Store.open(tmp_path / "s"), Store.rebuild(tmp_path / "s")):
        with opened as store:
            for step in steps:
                # A step comes back whole, with its run's facts, whatever record held them.
                assert store.read_step("run-f", step.index) == step
            info = store.step("run-f", 0)
            assert (info.provider, info.model, info.tokens_in, info.tokens_out) == (
                "openai",
                "gpt-x",
                12,
                40,
            )
            assert (info.request_size, info.response_size) == (len(request), len(streamed))
            assert (info.trace_id, info.span_id) == ((1 << 128) - 1, (1 << 64) - 1)
            failed = store.step("run-f", 7)
            assert (failed.status_code, failed.response_hash, failed.error_type) == (
                None,
                None,
                "httpx.ConnectError",
            )
            run = store.run("run-f")
            assert run == RunInfo(
                run_id="run-f",
                recorded_id="run-f",
                recording=1,
                mode="fork",
                start_ns=11,
                end_ns=steps[1].end_ns,  # close ends the run at its last step's end
                status="ok",  # one step failed, the run did not
                error_type=None,
                error_steps=1,
                commit="0" * 40,
                code_dirty=False,
                seed=-3,
                step_count=2,
                tokens_in=12,
                tokens_out=40,
                bytes=len(request) + len(streamed),
                pinned=False,
                models=("gpt-x",),
                parent_run_id="run-e",
            )


def test_spans_with_lone_surrogates_come_back_as_given(tmp_path: Path) -> None:
    """Strings decoded from bytes that are not UTF-8 (surrogateescape) are kept as they are,
    short ones in the record and long ones (stored as bodies) alike."""
    given = span(
        "run-s",
        0,
        short="caf\udce9",
        long="\udce9\u00e9" * 700,  # over 1 KB: stored as a body
        high="\ud800" + "z" * 1100,
        nested={"list": ["\udcff", {"k\udc80": "v"}]},
    )
    given["events"] = [{"name": "ev\udce9", "attributes": {"big": "\udc00" * 600}}]
    with Store.open(tmp_path / "s") as store:
        store.put([make_step("run-s", 0, b"q", b"a")], [given])
        store.flush()
        assert store.spans("run-s") == [given]
    with Store.rebuild(tmp_path / "s") as store:
        assert store.spans("run-s") == [given]
        assert store.verify() == []


def test_runs_are_incomplete_until_their_recorder_ends_them(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = Store.open(root)
    for run_id in ("fine", "raised", "step-failed", "ended-early"):
        store.put([make_step(run_id, 0, b"q", b"a")])
    store.put([make_step("step-failed", 1, b"q2", None, error_type="ReadTimeout")])
    store.end_run(RunEnd("raised", 1_800_000_000 * 10**9, "ValueError"))
    store.end_run(RunEnd("ended-early", 1_750_000_000 * 10**9))
    store.flush()
    with Store.open(root) as reader:  # another process's view, before close
        assert {r.run_id: r.status for r in reader.runs()} == {
            "fine": "incomplete",
            "raised": "error",
            "step-failed": "incomplete",
            "ended-early": "ok",
        }
        assert reader.run("raised").error_type == "ValueError"
        assert reader.run("ended-early").end_ns == 1_750_000_000 * 10**9
    store.close()
    with Store.open(root) as reader:
        assert {r.run_id: (r.status, r.error_steps) for r in reader.runs()} == {
            "fine": ("ok", 0),
            "raised": ("error", 0),
            "step-failed": ("ok", 1),  # counted apart: the run went on
            "ended-early": ("ok", 0),
        }
        assert reader.run("fine").end_ns == make_step("fine", 0, b"q").end_ns


def test_a_second_recording_of_an_id_is_a_run_of_its_own(tmp_path: Path) -> None:
    root = tmp_path / "s"
    first, second = Store.open(root), Store.open(root)
    first.put([make_step("same", 0, b"from first", start_ns=10)])
    first.flush()
    second.put(
        [make_step("same", n, q, start_ns=20) for n, q in enumerate([b"from second", b"more"])]
    )
    second.flush()
    first.put([make_step("same", 1, b"first again", start_ns=10)])  # still its own run
    first.close()
    second.close()
    with Store.open(root) as store:
        assert [(r.run_id, r.recorded_id, r.recording) for r in store.runs()] == [
            ("same", "same", 1),
            ("same@2", "same", 2),
        ]
        assert [store.request_body(s) for s in store.steps("same")] == [
            b"from first",
            b"first again",
        ]
        assert [store.request_body(s) for s in store.steps("same@2")] == [b"from second", b"more"]
    with Store.rebuild(root) as store:  # numbered by when each recording started
        assert [store.request_body(s) for s in store.steps("same@2")] == [b"from second", b"more"]
