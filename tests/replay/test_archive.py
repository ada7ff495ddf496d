"""The Collector file exporter's archive as a source: one file or a rotated directory, in
every framing the exporter writes (``_collector_files``), and ``otel-replay import DIR`` run
again and again, as a cron job runs it, while the archive grows and rotates."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
import zstandard
from click.testing import Result

from otel_replay.replay.sources import load_run, load_sources
from otel_replay.replay.sources._archive import archive_files
from otel_replay.replay.sources._framing import is_length_prefixed
from otel_replay.store import Store
from tests.cli._checks import assert_bad_input, run_cli
from tests.replay._collector_files import (
    Exporter,
    backup_name,
    batches,
    split,
    write_rotated,
)
from tests.replay.conftest import (
    CLAUDE,
    ERRORS,
    LARGE,
    SUPPORT,
    Recorded,
    assert_matches_wire,
    run_spans,
)
from tests.report._document import document

EXPORTERS = [Exporter(f, c) for f in ("json", "proto") for c in ("none", "zstd", "native")]
RUNS = {SUPPORT, CLAUDE, ERRORS, LARGE}
CLI = Path(sys.executable).parent / "otel-replay"


def _id(exporter: Exporter) -> str:
    return f"{exporter.format}-{exporter.compression}"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_REPLAY_STORE", raising=False)
    monkeypatch.delenv("OTEL_REPLAY_SOURCE_MAX_BYTES", raising=False)


@pytest.mark.parametrize("exporter", EXPORTERS, ids=_id)
def test_a_rotated_archive_replays_as_recorded(
    recorded: Recorded, tmp_path: Path, exporter: Exporter
) -> None:
    """Every run of a directory of backups and a live file, the recorded run's spans spread
    over all three files, is rebuilt byte for byte; each file alone is a source too."""
    archive = tmp_path / "archive"
    paths = write_rotated(archive, exporter, split(batches(recorded.raw, 3), 3))
    assert len(paths) == 3
    run = load_run(f"{archive}#{SUPPORT}")
    assert_matches_wire(run, recorded)
    assert {r.run.run_id for r in load_sources(str(archive))} == RUNS
    # The run's spans really are spread: no one file holds all its steps.
    for path in paths:
        alone = [r.run for r in load_sources(str(path)) if r.run.run_id == SUPPORT]
        assert not alone or len(alone[0].steps) < len(run.steps)
    whole = tmp_path / "one-file"
    whole.write_bytes(exporter.file(batches(recorded.raw, 3)))
    assert_matches_wire(load_run(f"{whole}#{SUPPORT}"), recorded)


def test_group_by_subdirectories_and_live_files_of_their_own(
    recorded: Recorded, tmp_path: Path
) -> None:
    """``group_by`` writes ``path`` with ``*`` replaced by a resource attribute: a live file
    (and its backups) per value, in directories of their own."""
    archive = tmp_path / "archive"
    support = batches(run_spans(recorded, SUPPORT), 2)
    others = batches(run_spans(recorded, CLAUDE, ERRORS, LARGE), 2)
    write_rotated(archive / "support-agent", Exporter("proto", "zstd"), split(support, 2))
    write_rotated(archive / "triage-agent", Exporter("json"), split(others, 2), "spans.jsonl")
    assert {r.run.run_id for r in load_sources(str(archive))} == RUNS
    assert_matches_wire(load_run(f"{archive}#{SUPPORT}"), recorded)


def test_files_are_read_backups_oldest_first_then_the_live_file(tmp_path: Path) -> None:
    names = [
        "traces.json",
        backup_name("traces.json", "2026-11-21T10-00-00.000", "time"),
        backup_name("traces.json", "2026-11-21T09-30-00.000"),
        backup_name("traces.json", "2026-11-21T09-59-59.999", "size"),
        "telemetry.log.zst",
        backup_name("telemetry.log.zst", "2026-11-21T09-00-00.000", "size"),
        "sub/traces",
        "sub/" + backup_name("traces", "2026-11-21T08-00-00.000", "size"),
        ".hidden",
    ]
    for name in names:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    assert [str(f.path.relative_to(tmp_path)) for f in archive_files(tmp_path)] == [
        "sub/traces-2026-11-21T08-00-00.000-size",
        "sub/traces",
        "telemetry.log-2026-11-21T09-00-00.000-size.zst",
        "telemetry.log.zst",
        "traces-2026-11-21T09-30-00.000.json",
        "traces-2026-11-21T09-59-59.999-size.json",
        "traces-2026-11-21T10-00-00.000-time.json",
        "traces.json",
    ]
    assert archive_files(tmp_path)[0].live == tmp_path / "sub" / "traces"


@pytest.mark.parametrize("exporter", EXPORTERS, ids=_id)
def test_the_live_files_half_written_end_is_left_out_with_a_note(
    recorded: Recorded, tmp_path: Path, exporter: Exporter, caplog: pytest.LogCaptureFixture
) -> None:
    archive = tmp_path / "archive"
    support = run_spans(recorded, SUPPORT)
    live = write_rotated(archive, exporter, [batches(support, 2), batches(recorded.raw, 50)])[-1]
    with live.open("ab") as stream:  # the Collector is writing its next record
        stream.write(exporter.half_written(support[:1]))
    with caplog.at_level(logging.WARNING, logger="otel_replay"):
        assert_matches_wire(load_run(f"{archive}#{SUPPORT}"), recorded)
    (note,) = [r.getMessage() for r in caplog.records]
    assert str(live) in note and "being written" in note, note
    # In a rotated backup, the same cut is damage, not a write in progress.
    backup = archive / backup_name("traces.json", "2026-11-21T11-00-00.000", "size")
    live.rename(backup)
    result = _cli_import(tmp_path, str(archive))
    assert_bad_input(result, str(backup))


@pytest.mark.parametrize(
    ("exporter", "named"),
    [(Exporter("json"), ":3: invalid or truncated JSON"), (Exporter("proto"), " record 3")],
    ids=["json", "proto"],
)
def test_a_corrupt_record_in_the_middle_of_a_file_is_an_error_naming_it(
    recorded: Recorded, tmp_path: Path, exporter: Exporter, named: str
) -> None:
    archive = tmp_path / "archive"
    (live,) = write_rotated(archive, exporter, [batches(recorded.raw, 5)])
    data = bytearray(live.read_bytes())
    third = exporter.file(batches(recorded.raw, 5)[:2])
    data[len(third) + 6 : len(third) + 12] = b"\xff" * 6
    live.write_bytes(bytes(data))
    line = assert_bad_input(_cli_import(tmp_path, f"{archive}#{SUPPORT}"), f"{live}{named}")
    assert len(line) < 300


def test_bad_archives_are_one_line_naming_the_file(recorded: Recorded, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-archive" / "traces"
    assert_bad_input(_cli_import(tmp_path, f"{missing}/"), str(missing))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "holds no trace files" in assert_bad_input(_cli_import(tmp_path, str(empty)), str(empty))
    gone = tmp_path / "dangling"
    gone.mkdir()
    (gone / "traces.json").symlink_to(tmp_path / "rotated-away.json")
    assert "cannot read" in assert_bad_input(
        _cli_import(tmp_path, str(gone)), str(gone / "traces.json")
    )
    if os.geteuid() != 0:  # root reads it anyway
        locked = tmp_path / "locked"
        locked.mkdir()
        (locked / "traces.json").write_bytes(b"{}\n")
        (locked / "traces.json").chmod(0)
        line = assert_bad_input(_cli_import(tmp_path, str(locked)), str(locked / "traces.json"))
        assert "Permission denied" in line
    frames = Exporter("json", "native").file(batches(recorded.raw, 3))
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "traces.json").write_bytes(frames[:40] + b"\x00" * 64 + frames[104:])
    assert "corrupt zstd data" in assert_bad_input(
        _cli_import(tmp_path, str(corrupt)), str(corrupt / "traces.json")
    )
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / backup_name("traces.json", "2026-11-21T09-00-00.000")).write_bytes(frames[:-9])
    assert "truncated zstd data" in assert_bad_input(_cli_import(tmp_path, str(cut)), str(cut))
    single = tmp_path / "single.json.zst"
    single.write_bytes(frames[:-9])
    assert "truncated zstd data" in assert_bad_input(
        _cli_import(tmp_path, str(single)), str(single)
    )


@pytest.mark.parametrize("framing", ["record", "native"])
def test_a_zstd_bomb_is_refused_in_one_line(tmp_path: Path, framing: str) -> None:
    bomb = zstandard.ZstdCompressor().compress(b"\0" * (64 * 1024 * 1024))
    assert len(bomb) < 64 * 1024
    archive = tmp_path / "archive"
    archive.mkdir()
    data = len(bomb).to_bytes(4, "big") + bomb if framing == "record" else bomb
    (archive / "traces.json").write_bytes(data)
    env = {"OTEL_REPLAY_SOURCE_MAX_BYTES": str(8 * 1024 * 1024)}
    line = assert_bad_input(
        _cli_import(tmp_path, str(archive), env=env), str(archive / "traces.json")
    )
    assert "decompresses to more than 8388608 bytes" in line


def _cli_import(tmp_path: Path, source: str, env: dict[str, str] | None = None) -> Result:
    return run_cli("import", source, "--store", str(tmp_path / "store"), env=env)


# -- import, as a cron job runs it -------------------------------------------------------------


def _import(archive: Path, store: Path) -> list[str]:
    result = run_cli("import", str(archive), "--store", str(store))
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def _ids(store: Path) -> list[str]:
    with Store.open(store, create=False) as opened:
        return [info.run_id for info in opened.runs()]


def test_import_twice_then_grow_then_rotate(recorded: Recorded, tmp_path: Path) -> None:
    """The first import reads every file; the second reads none and changes nothing; a run
    whose spans kept coming (the live file grew, then rotated) is completed, not recorded
    again; a backup that was the live file when it was read is not read after its rename."""
    archive, store = tmp_path / "archive", tmp_path / "store"
    exporter = Exporter("json", "zstd")
    support = batches(run_spans(recorded, SUPPORT), 2)
    others = batches(run_spans(recorded, CLAUDE, ERRORS, LARGE), 3)
    first, later = support[:2], support[2:]
    write_rotated(archive, exporter, [others, first])
    out = _import(archive, store)
    assert out[-1] == f"2 files read, 0 skipped, 4 runs imported, 0 completed into {store}"
    imported = f"{SUPPORT}: imported 4 steps (4 exact, 0 semantic), 4 stored with their bytes"
    assert f"{imported}; incomplete: the run's own span" in next(x for x in out if SUPPORT in x)
    assert _import(archive, store) == [
        f"0 files read, 2 skipped, 0 runs imported, 0 completed into {store}"
    ]
    # The live file grows: read again, the run completed.
    live = archive / "traces.json"
    with live.open("ab") as stream:
        stream.write(exporter.file(later[:1]))
    out = _import(archive, store)
    assert out[-1] == f"1 file read, 1 skipped, 0 runs imported, 1 completed into {store}"
    # Rotation renames it; the rest of the run goes to a new live file.
    live.rename(archive / backup_name("traces.json", "2026-11-21T09-30-00.000", "size"))
    live.write_bytes(exporter.file(later[1:]))
    out = _import(archive, store)
    assert out == [
        f"{SUPPORT}: completed, now 9 steps (9 exact, 0 semantic), 3 more stored",
        f"1 file read, 2 skipped, 0 runs imported, 1 completed into {store}",
    ]
    assert _ids(store).count(SUPPORT) == 1 and set(_ids(store)) == RUNS
    assert_matches_wire(load_run(SUPPORT, store=str(store)), recorded)
    assert load_run(SUPPORT, store=str(store)).seed == load_run(f"{archive}#{SUPPORT}").seed
    assert _import(archive, store)[-1].startswith("0 files read, 3 skipped, 0 runs imported")
    result = run_cli("verify", "--store", str(store))
    assert result.exit_code == 0, result.output


def test_a_live_files_half_written_line_is_read_once_it_is_whole(
    recorded: Recorded, tmp_path: Path
) -> None:
    archive, store = tmp_path / "archive", tmp_path / "store"
    exporter = Exporter("json")
    spans = batches(recorded.raw, 4)
    (live,) = write_rotated(archive, exporter, [spans])
    whole = live.read_bytes()
    live.write_bytes(whole[:-50])
    result = run_cli("import", str(archive), "--store", str(store))
    assert result.exit_code == 0, result.output
    assert "left out a line being written" in result.stderr and str(live) in result.stderr
    with Store.open(store, create=False) as opened:
        partial = {info.run_id: info.step_count for info in opened.runs()}
    live.write_bytes(whole)
    _import(archive, store)
    assert_matches_wire(load_run(SUPPORT, store=str(store)), recorded)
    with Store.open(store, create=False) as opened:
        assert sum(i.step_count for i in opened.runs()) >= sum(partial.values())
        assert sorted(i.run_id for i in opened.runs()) == sorted(RUNS)


def test_a_live_file_whose_first_line_is_half_written_is_left_out_not_refused(
    recorded: Recorded, tmp_path: Path
) -> None:
    """Right after a rotation the live file holds the first line the Collector is writing,
    with no newline yet: the backups are imported, the live file is left out with a note,
    and read once whole."""
    archive, store = tmp_path / "archive", tmp_path / "store"
    exporter = Exporter("json")
    support = run_spans(recorded, SUPPORT)
    rest = [span for span in recorded.raw if span not in support]
    live = write_rotated(archive, exporter, [batches(support, 4), [rest]])[-1]
    whole = live.read_bytes()
    live.write_bytes(whole[: len(whole) // 2])
    assert b"\n" not in live.read_bytes()
    result = run_cli("import", str(archive), "--store", str(store))
    assert result.exit_code == 0, result.output
    assert f"{live}:1: left out a line being written" in result.stderr
    assert _ids(store) == [SUPPORT]
    live.write_bytes(whole)
    _import(archive, store)
    assert sorted(_ids(store)) == sorted(RUNS)


@pytest.mark.subprocess
def test_an_import_killed_anywhere_is_finished_by_the_next(
    recorded: Recorded, tmp_path: Path
) -> None:
    """``kill -9`` at several points of an import that reads the archive in parts (runs
    completed part after part), then one more import: every run is in the store once and
    whole, and the store verifies clean."""
    archive, store = tmp_path / "archive", tmp_path / "store"
    files = write_rotated(archive, Exporter("json"), split(batches(recorded.raw, 2), 4))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_REPLAY")}
    env["OTEL_REPLAY_SOURCE_MAX_BYTES"] = str(max(f.stat().st_size for f in files) + 1)
    for delay in (0.35, 0.5, 0.65, 0.8):  # an import takes about 0.9 s here
        child = subprocess.Popen(
            [str(CLI), "import", str(archive), "--store", str(store)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    out = run_cli("import", str(archive), "--store", str(store), env=env).stdout.splitlines()
    assert out[-1].endswith(f"completed into {store}"), out
    assert sorted(_ids(store)) == sorted(RUNS)
    assert_matches_wire(load_run(SUPPORT, store=str(store)), recorded)
    assert _import(archive, store)[-1].startswith(f"0 files read, {len(files)} skipped, 0 runs")
    done = run_cli("verify", "--store", str(store))
    assert done.exit_code == 0, done.output  # notices (a write cut off) lose nothing


def test_import_of_a_copied_archive_adds_nothing(recorded: Recorded, tmp_path: Path) -> None:
    """A copy of an archive (``cp -p``: times kept) is known file by file; a copy with new
    times is read again, and adds no run twice."""
    archive, store = tmp_path / "archive", tmp_path / "store"
    write_rotated(archive, Exporter("proto"), split(batches(recorded.raw, 3), 2))
    _import(archive, store)
    kept = shutil.copytree(archive, tmp_path / "kept")
    assert _import(kept, store)[-1].startswith("0 files read, 2 skipped")
    touched = shutil.copytree(archive, tmp_path / "touched", copy_function=shutil.copyfile)
    assert _import(touched, store)[-1] == (
        f"2 files read, 0 skipped, 0 runs imported, 0 completed into {store}"
    )
    assert sorted(_ids(store)) == sorted(RUNS)


def test_a_run_with_no_step_does_not_stop_the_others(recorded: Recorded, tmp_path: Path) -> None:
    """An agent that failed before its first call leaves a run span and nothing to replay:
    the archive's other runs are read and imported all the same; named, it is refused."""
    archive = tmp_path / "archive"
    (live,) = write_rotated(archive, Exporter("json"), [batches(recorded.raw, 4)])
    span = {
        "traceId": "5b8aa5a2d2c872e8321cf37308d69df2",
        "spanId": "051581bf3cb55c13",
        "name": "invoke_agent support",
        "startTimeUnixNano": "1763715600000000000",
        "endTimeUnixNano": "1763715600100000000",
        "status": {"code": 2, "message": "KeyError"},
        "attributes": [
            {"key": "replay.run.id", "value": {"stringValue": "r_failed_early"}},
            {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
        ],
    }
    line = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": [span]}]}]}
    with live.open("ab") as stream:
        stream.write(orjson.dumps(line) + b"\n")
    assert {r.run.run_id for r in load_sources(str(archive))} == RUNS
    store = tmp_path / "store"
    assert _import(archive, store)[-1].startswith("1 file read, 0 skipped, 4 runs imported")
    refused = _cli_import(tmp_path, f"{archive}#r_failed_early")
    assert "has no replayable steps" in assert_bad_input(refused, "r_failed_early")


def test_an_archive_past_the_bound_is_imported_a_part_at_a_time(
    recorded: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read whole, the archive is past ``OTEL_REPLAY_SOURCE_MAX_BYTES``; import reads it
    in parts within the bound, and a run whose spans span parts is one run, whole."""
    archive, store = tmp_path / "archive", tmp_path / "store"
    paths = write_rotated(archive, Exporter("json"), split(batches(recorded.raw, 2), 4))
    bound = str(max(path.stat().st_size for path in paths) + 1)
    monkeypatch.setenv("OTEL_REPLAY_SOURCE_MAX_BYTES", bound)
    shown = run_cli("show", f"{archive}#{SUPPORT}", "--store", str(store))
    line = assert_bad_input(shown, str(archive))
    assert f"more than {bound} bytes" in line and f"otel-replay import {archive}" in line
    out = _import(archive, store)
    assert out[-1] == (
        f"{len(paths)} files read, 0 skipped, 4 runs imported, 0 completed into {store}"
    )
    assert f"{SUPPORT}: imported 9 steps (9 exact, 0 semantic), 9 stored with their bytes" in out
    assert sorted(_ids(store)) == sorted(RUNS)
    assert_matches_wire(load_run(SUPPORT, store=str(store)), recorded)


def test_varint_delimited_protobuf_is_not_taken_for_length_prefixed_records() -> None:
    """A varint-delimited message whose bytes 2-5 look like a record start (4 bytes of
    length, then field 1) is not the exporter's framing: its "first record" does not fit."""
    message = bytes([0x0A, 38, 0x0A, 0x0A]) + bytes(36)
    delimited = bytes([len(message)]) + message
    assert delimited[4:5] == b"\n"
    assert not is_length_prefixed(delimited)
    record = b"\n\x03abc"
    assert is_length_prefixed(len(record).to_bytes(4, "big") + record)
    assert is_length_prefixed(len(record).to_bytes(4, "big") + record[:2], growing=True)


# -- what is not a run of the archive stops no other ------------------------------------------

UNBUILT = "r_unbuildable"


def _unbuildable_line() -> bytes:
    """One OTLP JSON line: a run whose one step, a GET, was recorded without its body (over
    the inline limit), so it cannot be rebuilt."""

    def attr(key: str, value: str | int) -> dict[str, object]:
        kind = "intValue" if isinstance(value, int) else "stringValue"
        return {"key": key, "value": {kind: str(value)}}

    span = {
        "traceId": "6b8aa5a2d2c872e8321cf37308d69df2",
        "spanId": "151581bf3cb55c13",
        "name": "GET",
        "startTimeUnixNano": "1763715600000000000",
        "endTimeUnixNano": "1763715600100000000",
        "attributes": [
            attr("replay.run.id", UNBUILT),
            attr("replay.step.index", 0),
            attr("replay.step.kind", "http"),
            attr("http.request.method", "GET"),
            attr("url.full", "http://files.test/big"),
            attr("http.response.status_code", 200),
        ],
    }
    line = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": [span]}]}]}
    return orjson.dumps(line) + b"\n"


def test_a_run_that_cannot_be_rebuilt_stops_no_other(recorded: Recorded, tmp_path: Path) -> None:
    """A run whose GET body was over the inline limit: listing the archive lists it with the
    others and says why it cannot be rebuilt, another run is picked and replayed, and
    ``import`` imports the others and reports it on a line of its own, once."""
    archive, store = tmp_path / "archive", tmp_path / "store"
    (live,) = write_rotated(archive, Exporter("json"), [batches(recorded.raw, 4)])
    with live.open("ab") as stream:
        stream.write(_unbuildable_line())
    line = assert_bad_input(run_cli("show", str(archive)), f"holds {len(RUNS) + 1} runs")
    assert "pick one" in line and SUPPORT in line and UNBUILT in line
    assert "1 of them cannot be rebuilt" in line and "step 0 (GET)" in line
    assert_matches_wire(load_run(f"{archive}#{SUPPORT}"), recorded)
    for source in (str(live), str(archive)):
        result = run_cli("import", source, "--store", str(store))
        assert result.exit_code == 0, result.output
        assert result.stderr.count(UNBUILT) == 1 and "not imported" in result.stderr
        assert "no recorded response body" in result.stderr
        assert sorted(_ids(store)) == sorted(RUNS)
    assert _import(archive, store) == [
        f"0 files read, 1 skipped, 0 runs imported, 0 completed into {store}"
    ]
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "traces.json").write_bytes(_unbuildable_line())
    refused = run_cli("import", str(alone), "--store", str(tmp_path / "other"))
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    assert refused.stderr.splitlines()[-1] == (
        f"Error: nothing imported from {alone}: no run of it could be rebuilt"
    )


def test_a_stray_file_is_left_out_with_a_note(
    recorded: Recorded, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A README beside the trace files is left out with a note naming it (once: the next
    import skips it silently); a file named as a trace file that is no OTLP data is still an
    error naming it."""
    archive, store = tmp_path / "archive", tmp_path / "store"
    write_rotated(archive, Exporter("proto", "zstd"), split(batches(recorded.raw, 3), 2))
    (archive / "README.txt").write_text("notes\n")
    shown = run_cli("show", f"{archive}#{SUPPORT}")
    assert shown.exit_code == 0, shown.output
    assert f"{archive / 'README.txt'}: left out, not a trace file" in caplog.text
    result = run_cli("import", str(archive), "--store", str(store))
    assert result.exit_code == 0, result.output
    assert "README.txt: left out, not a trace file" in result.stderr
    assert result.stdout.splitlines()[-1].startswith("2 files read, 0 skipped, 4 runs imported")
    again = run_cli("import", str(archive), "--store", str(store))
    assert again.stderr == "" and again.stdout.startswith("0 files read, 3 skipped")
    (archive / "traces-old.json").write_text("notes\n")
    line = assert_bad_input(run_cli("show", f"{archive}#{SUPPORT}"), "traces-old.json")
    assert "invalid or truncated JSON" in line


def test_a_stray_files_hostile_name_is_noted_on_one_escaped_line(
    recorded: Recorded, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Anyone who can write into the archive names its files: a name holding a terminal
    escape and a newline is noted escaped, on one line, by ``show`` and ``import``."""
    archive, store = tmp_path / "archive", tmp_path / "store"
    write_rotated(archive, Exporter("json"), [batches(recorded.raw, 2)])
    (archive / "\x1b[2Jevil\nname.txt").write_text("notes\n")
    noted = f"{archive}/\\x1b[2Jevil\\x0aname.txt: left out, not a trace file"
    shown = run_cli("show", f"{archive}#{SUPPORT}")
    assert shown.exit_code == 0, shown.output
    assert f"otel-replay: {noted}" in caplog.text.splitlines()[0]
    assert "\x1b" not in caplog.text
    result = run_cli("import", str(archive), "--store", str(store))
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [f"otel-replay: {noted}"]


@pytest.mark.subprocess
def test_a_pipe_beside_the_trace_files_is_passed_over(recorded: Recorded, tmp_path: Path) -> None:
    """A named pipe in the archive (once: ``show`` waited for a writer forever) is no trace
    file: it is passed over, unopened, and the runs are read."""
    archive = tmp_path / "archive"
    write_rotated(archive, Exporter("json"), [batches(recorded.raw, 2)])
    os.mkfifo(archive / "traces-fifo.json")
    done = subprocess.run(
        [str(CLI), "show", f"{archive}#{SUPPORT}", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["run"]["run_id"] == SUPPORT
    assert [f.path.name for f in archive_files(archive)] == ["traces.json"]


def test_import_says_which_runs_were_there_already(recorded: Recorded, tmp_path: Path) -> None:
    """An archive whose runs the store holds (imported from a file before): each is reported
    as already there, and nothing changes."""
    archive, store = tmp_path / "archive", tmp_path / "store"
    (live,) = write_rotated(archive, Exporter("json"), [batches(recorded.raw, 4)])
    single = tmp_path / "single.json"
    single.write_bytes(live.read_bytes())
    assert run_cli("import", str(single), "--store", str(store)).exit_code == 0
    out = _import(archive, store)
    assert out[-1] == f"1 file read, 0 skipped, 0 runs imported, 0 completed into {store}"
    there = [line for line in out if "already in the store" in line]
    assert len(there) == len(RUNS) and all("nothing changed" in line for line in there)
    assert any(line.startswith(f"{SUPPORT}: already in the store") for line in there)


def test_the_import_ledger_survives_an_index_rebuild(recorded: Recorded, tmp_path: Path) -> None:
    """The files imported are remembered in the store's files, not only in its index: after
    ``verify --rebuild-index`` (or a deleted index) the next import reads nothing, and a cron
    job's many imports keep a few ledger files, not one per import."""
    archive, store = tmp_path / "archive", tmp_path / "store"
    files = write_rotated(archive, Exporter("json", "zstd"), split(batches(recorded.raw, 2), 3))
    _import(archive, store)
    rebuilt = run_cli("verify", "--rebuild-index", "--store", str(store))
    assert rebuilt.exit_code == 0, rebuilt.output
    skipped = f"0 files read, {len(files)} skipped, 0 runs imported, 0 completed into {store}"
    assert _import(archive, store) == [skipped]
    (store / "index.sqlite").unlink()
    assert _import(archive, store) == [skipped]
    for number in range(40):  # a file a minute, as the live file is rotated
        (archive / f"other-{number:02d}.json").write_bytes(files[0].read_bytes())
        _import(archive, store)
    ledgers = list((store / "imports").iterdir())
    assert 1 <= len(ledgers) <= 17
    rebuilt = run_cli("verify", "--rebuild-index", "--store", str(store))
    assert rebuilt.exit_code == 0, rebuilt.output
    everything = f"0 files read, {len(files) + 40} skipped, 0 runs imported, 0 completed"
    assert _import(archive, store) == [f"{everything} into {store}"]
    assert sorted(_ids(store)) == sorted(RUNS)


def test_a_run_read_before_its_last_spans_arrived_is_incomplete_until_they_do(
    recorded: Recorded, tmp_path: Path
) -> None:
    """The Collector exports a span when it ends, the run's own span (its ``run()`` block's)
    last: an import made before that span arrived says the run is incomplete, and so do
    ``runs``, ``show`` and the report, until the import that reads it completes the run."""
    archive, store = tmp_path / "archive", tmp_path / "store"
    exporter = Exporter("json", "zstd")
    spans = run_spans(recorded, SUPPORT)
    assert spans[-1].name == "invoke_agent support-agent"
    early, last = batches(spans[:-1], 3), [spans[-1:]]
    write_rotated(archive, exporter, [early])
    out = _import(archive, store)
    run_span = f"{spans[-1].context.span_id:016x}"
    missing = f"the run's own span {run_span} (step 0 names it) is not there yet"
    assert out[0] == (
        f"{SUPPORT}: imported 9 steps (9 exact, 0 semantic), 9 stored with their bytes; "
        f"incomplete: {missing}"
    )

    def status() -> str:
        listed = json.loads(run_cli("runs", "--json", "--store", str(store)).stdout)
        return str(next(run["status"] for run in listed if run["run_id"] == SUPPORT))

    assert status() == "incomplete"
    shown = run_cli("show", SUPPORT, "--store", str(store)).stdout.splitlines()
    assert "  incomplete  " in shown[0] and shown[1] == f"incomplete: {missing}"
    as_json = run_cli("show", SUPPORT, "--json", "--store", str(store)).stdout
    assert f"{json.loads(as_json)['missing']} is not there yet" == missing
    for source in (SUPPORT, f"{archive}#{SUPPORT}"):
        report = tmp_path / "report.html"
        done = run_cli("report", source, "-o", str(report), "--store", str(store))
        assert done.exit_code == 0, done.output
        (said,) = document(report.read_text())["runs"]
        assert (said["status"], said["missing"]) == (
            "incomplete",
            missing.removesuffix(" is not there yet"),
        )
    # The live file rotates; the new one holds the run's span.
    (archive / "traces.json").rename(
        archive / backup_name("traces.json", "2026-11-21T09-30-00.000")
    )
    (archive / "traces.json").write_bytes(exporter.file(last))
    assert _import(archive, store)[0] == (
        f"{SUPPORT}: completed, now 9 steps (9 exact, 0 semantic), 0 more stored"
    )
    assert status() == "ok"
    assert "incomplete" not in run_cli("show", SUPPORT, "--store", str(store)).stdout
    assert run_cli("verify", "--store", str(store)).exit_code == 0
