"""Exact bytes in, exact bytes out: bodies, fixtures and spans, through real files."""

from __future__ import annotations

import itertools
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from otel_replay.step import RunFacts
from otel_replay.store import Store
from tests.store._data import chat_bodies, fixture, span


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
            store.put([fixture("run-a", index, request, response)])
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


def test_fixture_comes_back_equal(tmp_path: Path) -> None:
    original = fixture("run-b", 0, b'{"messages":[]}', b"streamed")
    original.chunks = [(3, 100), (5, 250)]
    original.complete = False
    original.error_type = "ReadTimeout"
    with Store.open(tmp_path / "s") as store:
        store.put([original, fixture("run-b", 1, b"x", None)])
        store.flush()
        assert store.fixture(("run-b", 0)) == original
        no_response = store.fixture(store.step("run-b", 1))
        assert no_response.response_hash is None and no_response.response_body == b""
        assert store.response_body(("run-b", 1)) == b""


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
        store.put([fixture("run-c", 0, request, response)], given[:1])
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


def test_history_costs_its_unique_bytes(tmp_path: Path) -> None:
    """Bytes on disk grow with the new messages, not with the re-sent history."""
    pairs = chat_bodies(40, seed=3)
    sizes = []
    with Store.open(tmp_path / "s") as store:
        for index, (request, response) in enumerate(pairs):
            store.put([fixture("run-d", index, request, response)])
            store.flush()
            sizes.append(_store_bytes(tmp_path / "s" / "objects"))
    growth = [b - a for a, b in itertools.pairwise(sizes)]
    last_request = len(pairs[-1][0])
    # each step adds one user and one assistant message (compressed) and a manifest of
    # digests (33 bytes a message until gc or close recompresses manifests together), never
    # the history
    assert max(growth[10:]) < last_request / 4
    raw = sum(len(q) + len(r) for q, r in pairs)
    fixtures = _store_bytes(tmp_path / "s" / "objects") + _store_bytes(tmp_path / "s" / "runs")
    assert raw / fixtures > 30  # the index is a cache of fixed size per store, counted apart


def test_close_compacts_small_packs(tmp_path: Path) -> None:
    pairs = chat_bodies(12, seed=5)
    with Store.open(tmp_path / "s") as store:
        for index, (request, response) in enumerate(pairs):
            store.put([fixture("run-e", index, request, response)])
            store.flush()
        before = len(list((tmp_path / "s" / "objects").rglob("*.pack")))
    after = list((tmp_path / "s" / "objects").rglob("*.pack"))
    assert before == 12 and len(after) == 1
    assert len(list((tmp_path / "s" / "runs").rglob("*.rec"))) == 1  # its records merged too
    with Store.open(tmp_path / "s") as store:
        assert [store.request_body(s) for s in store.steps("run-e")] == [q for q, _ in pairs]


def test_put_refuses_what_it_cannot_store_faithfully(tmp_path: Path) -> None:
    bad = fixture("run-g", 0, b"abc")
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
        store.put([fixture("run-h", n, *pairs[n]) for n in burst], [spans[n] for n in burst])
        store.flush()
        after_burst = _store_bytes(tmp_path / "s" / "objects")
        for n in range(20, 30):  # a step per flush: deduplicated against the burst
            store.put([fixture("run-h", n, *pairs[n])], [spans[n]])
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
        store.put([fixture("run-i", 0, b"q", b"a")], [given])
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
    given = fixture("run-c", 0, b"request", b"reply!!")
    given.chunks = [(7, given.end_ns - given.start_ns)]
    given.request_headers = [("content-length", "7"), ("x", "y")]
    for key, value in change.items():
        setattr(given, key, value)
    with Store.open(tmp_path / "s") as store:
        store.put([given])
        store.flush()
    with Store.rebuild(tmp_path / "s") as store:
        assert store.fixture(("run-c", 0)) == given
