"""Results come back as the values they were, not as their JSON.

A tool, a side effect or a checkpoint that returned a model, a dataclass, a tuple, a set of
uuids, bytes, an enum or a NaN is served on replay as that value, with or without a return
annotation, from the store and from OTLP data alone. A recording's shape never makes replay
import a module or build a class that is not a value type, and a shape that does not fit is
served as the JSON it describes.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import enum
import json
import math
import sys
import types
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

import otel_replay
from otel_replay.store import Store
from tests.export._support import Pipeline
from tests.replay.conftest import collector_json

RAN: list[str] = []
SHAPE = "application/json; otel-replay-shape="


class Status(enum.Enum):
    SHIPPED = "shipped"
    LOST = "lost"


class Line(BaseModel):
    sku: str
    qty: int


@dataclasses.dataclass
class Parcel:
    tracking: uuid.UUID
    sent: dt.datetime
    lines: list[Line]


@otel_replay.tool
def find_parcel(order_id: str):  # type: ignore[no-untyped-def]  # deliberately unannotated
    """A parcel, returned without a return annotation."""
    RAN.append("find_parcel")
    return Parcel(
        uuid.UUID(int=7),
        dt.datetime(2026, 11, 2, 8, 0, tzinfo=dt.timezone.utc),
        [Line(sku="K-1", qty=2), Line(sku="K-2", qty=1)],
    )


@otel_replay.tool
def measurements(order_id: str) -> dict[str, Any]:
    """Sensor readings: not every one is a finite number."""
    RAN.append("measurements")
    return {"weight": float("nan"), "limit": float("inf"), "floor": -math.inf, "ok": 1.5}


LABEL = b"\xff\xd8 not utf-8 \x00"


def raw_label() -> Any:
    RAN.append("raw_label")
    return LABEL


def table(nan_at: int | None) -> list[dict[str, Any]]:
    """Rows as a search tool returns them; one score not a number at ``nan_at``."""
    return [
        {"id": n, "score": math.nan if n == nan_at else n / 8, "tags": ["a", n], "seen": None}
        for n in range(60)
    ]


def agent() -> dict[str, Any]:
    """Every result kind that plain JSON would change, as an agent gets them."""
    return {
        "parcel": find_parcel("A-1"),
        "readings": measurements("A-1"),
        "label": otel_replay.side_effect("raw_label", raw_label),
        "pair": otel_replay.side_effect("pair", lambda: ("A-1", 2)),
        "tags": otel_replay.side_effect("tags", lambda: {uuid.UUID(int=1), uuid.UUID(int=2)}),
        "status": otel_replay.side_effect("status", lambda: Status.LOST),
        "by_id": otel_replay.side_effect("by_id", lambda: {1: "one", 22: "twenty-two"}),
        "plain": otel_replay.side_effect("plain", lambda: {"a": [1, 2.5, None, "x"]}),
        "table": otel_replay.side_effect("table", lambda: table(nan_at=None)),
        "rows": otel_replay.side_effect("rows", lambda: table(nan_at=37)),
        "state": otel_replay.checkpoint(
            "seen", {"when": dt.date(2026, 11, 3), "done": frozenset({"a"}), "left": (1, 2)}
        ),
    }


def assert_same_values(again: dict[str, Any], seen: dict[str, Any]) -> None:
    parcel = again["parcel"]
    assert isinstance(parcel, Parcel) and parcel == seen["parcel"]
    assert isinstance(parcel.tracking, uuid.UUID) and isinstance(parcel.lines[0], Line)
    readings = again["readings"]
    assert math.isnan(readings["weight"])
    assert readings["limit"] == math.inf and readings["floor"] == -math.inf
    assert readings["ok"] == 1.5
    assert again["label"] == LABEL
    assert again["pair"] == ("A-1", 2) and isinstance(again["pair"], tuple)
    assert again["tags"] == {uuid.UUID(int=1), uuid.UUID(int=2)}
    assert again["status"] is Status.LOST
    assert again["by_id"] == {1: "one", 22: "twenty-two"}
    assert again["plain"] == {"a": [1, 2.5, None, "x"]}
    assert again["table"] == table(nan_at=None)
    rows = again["rows"]
    assert math.isnan(rows[37]["score"])
    assert rows[:37] + rows[38:] == table(nan_at=None)[:37] + table(nan_at=None)[38:]
    assert again["state"] == seen["state"]
    assert isinstance(again["state"]["done"], frozenset)


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[tuple[Path, str, dict[str, Any], list[ReadableSpan]]]:
    RAN.clear()
    memory = InMemorySpanExporter()
    with Pipeline(tmp_path / "store") as pipeline:
        pipeline.provider.add_span_processor(SimpleSpanProcessor(memory))
        seen = agent()
        run_id = pipeline.run.run_id
    assert RAN == ["find_parcel", "measurements", "raw_label"]
    RAN.clear()
    yield tmp_path / "store", run_id, seen, list(memory.get_finished_spans())


@pytest.mark.parametrize("source", ["store", "otlp"])
def test_replay_gives_back_the_values_not_their_json(
    recorded: tuple[Path, str, dict[str, Any], list[ReadableSpan]], tmp_path: Path, source: str
) -> None:
    store, run_id, seen, spans = recorded
    ref = run_id
    if source == "otlp":
        ref = str(tmp_path / "trace.json")
        Path(ref).write_text(json.dumps(collector_json(spans)))
    with otel_replay.replaying(ref, store=str(store)) as result:
        again = agent()
    assert RAN == [], "a recorded call ran under replay"
    assert result.identical, result.first_divergence
    assert_same_values(again, seen)


def test_the_json_stays_readable_and_the_shape_rides_in_the_content_type(
    recorded: tuple[Path, str, dict[str, Any], list[ReadableSpan]],
) -> None:
    store, run_id, _, spans = recorded
    by_name = {span.name: dict(span.attributes or {}) for span in spans}
    readings = by_name["execute_tool measurements"]
    assert json.loads(readings["gen_ai.tool.call.result"]) == {
        "weight": "NaN",
        "limit": "Infinity",
        "floor": "-Infinity",
        "ok": 1.5,
    }
    assert readings["replay.response.content_type"] == (
        SHAPE + '["dict",[[0,"float"],[1,"float"],[2,"float"]]]'
    )
    parcel = by_name["execute_tool find_parcel"]
    assert parcel["replay.response.content_type"] == SHAPE + f'"{__name__}:Parcel"'
    # a shape holds positions and class names, never the value's keys or data
    assert "K-1" not in parcel["replay.response.content_type"]
    with Store.open(store, create=False) as opened:
        stored = [opened.read_step(step) for step in opened.steps(run_id)]
    steps = {step.url: step for step in stored}
    label = steps["value:raw_label"]
    assert label.response_headers == [("content-type", SHAPE + '"bytes64"')]
    assert base64.urlsafe_b64decode(json.loads(label.response_body)) == LABEL
    state = SHAPE + '["dict",[[0,"datetime:date"],[1,["frozenset",[]]],[2,["tuple",[]]]]]'
    assert steps["checkpoint:seen"].response_headers == [("content-type", state)]
    # a value JSON gives back as it was carries no content type at all
    for plain in ("plain", "table"):
        assert steps[f"value:{plain}"].response_headers == []
        assert "replay.response.content_type" not in by_name[f"value {plain}"]
    assert steps["value:rows"].response_headers == [
        ("content-type", SHAPE + '["list",[[37,["dict",[[1,"float"]]]]]]')
    ]


def _with_shape(spans: list[ReadableSpan], tool: str, content_type: str) -> dict[str, Any]:
    """The spans as OTLP JSON, the content type of ``tool``'s span replaced."""
    data = collector_json(spans)
    for resource in data["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                if span["name"] != f"execute_tool {tool}":
                    continue
                for attribute in span["attributes"]:
                    if attribute["key"] == "replay.response.content_type":
                        attribute["value"] = {"stringValue": content_type}
    return data


ParcelAlias = Parcel  # the same class under a name that is not its own
NEVER_IMPORTED = "tests.replay._never_imported"


class _LazyModule(types.ModuleType):
    """A module whose attributes come from a lazy ``__getattr__`` (an import, in real ones)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.asked: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.asked.append(name)
        return Parcel


@pytest.mark.parametrize(
    "shape",
    [
        '"otel_replay_never_imported:Thing"',  # a module nobody imported
        f'"{NEVER_IMPORTED}:Thing"',  # a module on the path, not imported
        '"otel_replay_lazy:Parcel"',  # a name only a module's lazy __getattr__ has
        f'"{__name__}:ParcelAlias"',  # an alias, not the class's own name
        '["dict",[[1,"datetime:datetime"],[1,"datetime:datetime"]]]',  # a position twice
        '"os:system"',  # not a class
        '"subprocess:Popen"',  # a class, but no value type
        '["list",{"*":"builtins:int"}]',  # a list shape for a JSON object
        '["dict",[[9,"float"]]]',  # a position that is not there
        "[",  # not JSON
    ],
)
def test_a_shape_that_does_not_fit_serves_the_json_and_imports_nothing(
    recorded: tuple[Path, str, dict[str, Any], list[ReadableSpan]],
    tmp_path: Path,
    shape: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store, _, _, spans = recorded
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(_with_shape(spans, "find_parcel", SHAPE + shape)))
    lazy = _LazyModule("otel_replay_lazy")
    monkeypatch.setitem(sys.modules, "otel_replay_lazy", lazy)
    with otel_replay.replaying(str(trace), store=str(store)) as result:
        again = agent()["parcel"]
    assert lazy.asked == []
    assert RAN == []
    assert result.identical, result.first_divergence
    assert again == {
        "tracking": str(uuid.UUID(int=7)),
        "sent": "2026-11-02T08:00:00Z",
        "lines": [{"sku": "K-1", "qty": 2}, {"sku": "K-2", "qty": 1}],
    }
    assert "otel_replay_never_imported" not in sys.modules
    assert NEVER_IMPORTED not in sys.modules


class Refused(Exception):
    """What the refusing tool raises."""


@otel_replay.tool
def refuse(order_id: str) -> str:
    RAN.append("refuse")
    raise Refused(f"no {order_id}")


@pytest.mark.parametrize(
    ("error_type", "raised"),
    [
        (f"{__name__}.Refused", Refused),  # as recorded
        (f"{NEVER_IMPORTED}.Boom", otel_replay.RecordedError),  # a module not imported
        ("subprocess.Popen", otel_replay.RecordedError),  # a class, but no exception
        ("a." * 5_000 + "B", otel_replay.RecordedError),  # a name no class has
    ],
)
def test_a_recorded_error_type_is_raised_again_only_from_what_is_loaded(
    tmp_path: Path, error_type: str, raised: type[BaseException]
) -> None:
    memory = InMemorySpanExporter()
    with Pipeline(tmp_path / "store") as pipeline:
        pipeline.provider.add_span_processor(SimpleSpanProcessor(memory))
        with pytest.raises(Refused):
            refuse("A-1")
    data = collector_json(list(memory.get_finished_spans()))
    for resource in data["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for attribute in span["attributes"]:
                    if attribute["key"] == "error.type":
                        attribute["value"] = {"stringValue": error_type}
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(data))
    RAN.clear()
    replay = otel_replay.replaying(str(trace), store=str(tmp_path / "store"))
    with replay as result, pytest.raises(raised, match="no A-1"):
        refuse("A-1")
    assert RAN == []
    assert result.identical, result.first_divergence
    assert NEVER_IMPORTED not in sys.modules


def test_a_replay_recorded_as_a_run_keeps_the_shapes_for_its_own_replay(
    recorded: tuple[Path, str, dict[str, Any], list[ReadableSpan]], tmp_path: Path
) -> None:
    store, run_id, seen, _ = recorded
    with Pipeline(tmp_path / "again") as pipeline:
        with otel_replay.replaying(run_id, store=str(store)):
            agent()
        replay_run = pipeline.run.run_id
    with otel_replay.replaying(replay_run, store=str(tmp_path / "again")) as result:
        twice = agent()
    assert RAN == []
    assert result.identical, result.first_divergence
    assert_same_values(twice, seen)
