"""The rest of the public surface: defaults from settings, progress, bursts, span shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from otel_replay.errors import ConfigError
from otel_replay.store import Retention, Store
from otel_replay.store._facts import span_facts
from tests.store._data import chat_bodies, fixture, span


def test_location_defaults_to_the_setting(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OTEL_REPLAY_STORE", str(tmp_path / "from-env"))
    with Store.open() as store:
        assert store.location == str(tmp_path / "from-env")
    assert (tmp_path / "from-env" / "FORMAT").exists()


@pytest.mark.parametrize("value", ["-1", "soon", "nan", "inf"])
def test_bad_retention_settings_name_the_variable(monkeypatch, value: str) -> None:
    monkeypatch.setenv("OTEL_REPLAY_RETAIN_ERROR_DAYS", value)
    with pytest.raises(ConfigError, match="OTEL_REPLAY_RETAIN_ERROR_DAYS"):
        Retention.from_env()


def test_verify_reports_progress(tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    with Store.open(tmp_path / "s") as store:
        for index, (request, response) in enumerate(chat_bodies(5)):
            store.put([fixture("p", index, request, response)])
        store.flush()
        assert store.verify(progress=lambda done, total: calls.append((done, total))) == []
    assert calls == [(n, 6) for n in range(1, 7)]


def test_a_burst_in_one_flush(tmp_path: Path) -> None:
    bodies = [
        (f'{{"n": {n}, "pad": "{"x" * 3000}"}}'.encode(), b"y" * (n % 700)) for n in range(1500)
    ]
    with Store.open(tmp_path / "s") as store:
        store.put(fixture("burst", n, q, r) for n, (q, r) in enumerate(bodies))
        store.flush()
        assert store.run("burst").step_count == 1500
        assert store.request_body(("burst", 1499)) == bodies[1499][0]
        assert store.verify() == []
    assert len(list((tmp_path / "s").rglob("*.pack"))) == 1


def test_compact_merges_every_stream(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s") as store:
        store.compact_after = None
        for run_id in ("a", "b"):
            for index, (request, response) in enumerate(chat_bodies(3)):
                store.put([fixture(run_id, index, request, response)])
                store.flush()
        assert store.compact() == 6
        assert len(list((tmp_path / "s").rglob("*.pack"))) == 2
        assert store.verify() == []


def test_span_facts_read_otlp_json_attribute_lists() -> None:
    otlp = {
        "name": "chat",
        "startTimeUnixNano": "100",
        "endTimeUnixNano": "250",
        "status": {"code": 2},
        "attributes": [
            {"key": "replay.run.id", "value": {"stringValue": "r"}},
            {"key": "replay.step.index", "value": {"intValue": "3"}},
            {"key": "gen_ai.request.model", "value": {"stringValue": "m"}},
            {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12"}},
        ],
    }
    facts = span_facts([otlp, span("other", 0)])
    run = facts["r"]
    assert (run.start_ns, run.end_ns, run.error) == (100, 250, True)
    assert run.steps[3] == (None, "m", 12, None)  # provider, model, tokens in and out
    assert set(facts) == {"r", "other"}


def test_many_runs_in_one_process_keep_few_streams_open(tmp_path: Path, monkeypatch) -> None:
    from otel_replay.store import _flush

    monkeypatch.setattr(_flush, "MAX_WRITERS", 2)
    pairs = chat_bodies(4)
    with Store.open(tmp_path / "s") as store:
        for index, (request, response) in enumerate(pairs):
            for run_id in ("a", "b", "c"):
                store.put([fixture(run_id, index, request, response)])
                store.flush()
        assert len(store._writers) == 2
        for run_id in ("a", "b", "c"):
            assert [store.request_body(s) for s in store.steps(run_id)] == [q for q, _ in pairs]
        assert store.verify() == []


def test_spans_prepared_ahead_are_stored_like_dicts(tmp_path: Path) -> None:
    given = [span("pre", 0, note="n" * 700, **{"gen_ai.request.model": "m"}), span("pre", None)]
    prepared = [Store.prepare(item) for item in given]
    given[0]["attributes"]["note"] = "changed after prepare"
    with Store.open(tmp_path / "s") as store:
        store.put([fixture("pre", 0, b"q", b"a")], [prepared[0], given[1]])
        store.flush()
        assert store.spans("pre")[0]["attributes"]["note"] == "n" * 700
        assert store.spans("pre")[1] == given[1]
        assert store.step("pre", 0).model == "m"
        with pytest.raises(ValueError, match=r"Store\.prepare"):
            store.put(spans=[("pre", "not prepared", ())])  # type: ignore[list-item]
        with pytest.raises(ValueError, match=r"replay\.run\.id"):
            Store.prepare({"name": "anonymous", "attributes": {}})
