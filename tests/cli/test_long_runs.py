"""A long run is read in time linear in its steps: ``show``, ``report`` and loading it for a
replay decode each stored record once, not once per step (that made a 1,000-step run take
minutes)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from otel_replay.replay.sources import load_run
from otel_replay.store import Store, _records
from tests.cli._checks import run_cli
from tests.store._data import make_step

RUN = "r_20261129T080000_10ab10ab"
SIZES = (20, 40)


def _request(index: int) -> bytes:
    message = {"role": "user", "content": f"question {index}"}
    return json.dumps({"model": "gpt-4o-mini", "messages": [message]}).encode()


def _response(index: int) -> bytes:
    message = {"role": "assistant", "content": f"answer {index}"}
    return json.dumps({"choices": [{"index": 0, "message": message}]}).encode()


def _long_store(folder: Path, steps: int) -> Path:
    """A store with one run of ``steps`` steps, flushed one by one (one record each, merged
    into one record file at close), without spans: ``show`` reads every step's record."""
    with Store.open(folder) as store:
        for index in range(steps):
            store.put([make_step(RUN, index, _request(index), _response(index))], [])
            store.flush()
    return folder


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], int]]:
    """How many records were decoded since the fixture was made (``reset`` via the call)."""
    count = 0
    decode = _records.decode_record

    def counting(data: bytes) -> _records.Record:
        nonlocal count
        count += 1
        return decode(data)

    def taken() -> int:
        nonlocal count
        seen, count = count, 0
        return seen

    monkeypatch.setattr(_records, "decode_record", counting)
    yield taken


@pytest.mark.parametrize("steps", SIZES)
def test_show_decodes_each_record_a_bounded_number_of_times(
    tmp_path: Path, decodes: Callable[[], int], steps: int
) -> None:
    store = _long_store(tmp_path / "store", steps)
    decodes()
    done = run_cli("show", RUN, "--json", "--store", str(store))
    assert done.exit_code == 0, done.output
    shown = json.loads(done.stdout)["steps"]
    assert [s["index"] for s in shown] == list(range(steps))
    assert shown[-1]["output_messages"][0]["parts"][0]["content"] == f"answer {steps - 1}"
    assert decodes() <= 3 * steps  # the spans' pass and the steps' pass; was 2 * steps**2


@pytest.mark.parametrize("steps", SIZES)
def test_loading_a_stored_run_decodes_each_record_a_bounded_number_of_times(
    tmp_path: Path, decodes: Callable[[], int], steps: int
) -> None:
    store = _long_store(tmp_path / "store", steps)
    decodes()
    run = load_run(RUN, store=str(store))
    assert [s.step.response_body for s in run.steps] == [_response(i) for i in range(steps)]
    assert decodes() <= 3 * steps


@pytest.mark.parametrize("steps", SIZES)
def test_report_decodes_each_record_a_bounded_number_of_times(
    tmp_path: Path, decodes: Callable[[], int], steps: int
) -> None:
    store = _long_store(tmp_path / "store", steps)
    decodes()
    out = tmp_path / "report.html"
    done = run_cli("report", RUN, "-o", str(out), "--store", str(store))
    assert done.exit_code == 0, done.output
    assert f"answer {steps - 1}" in out.read_text()
    assert decodes() <= 3 * steps


def test_reading_every_step_at_once_is_reading_each_step(tmp_path: Path) -> None:
    store_dir = _long_store(tmp_path / "store", 5)
    with Store.open(store_dir, create=False) as store:
        assert store.read_steps(RUN) == [store.read_step(RUN, i) for i in range(5)]
