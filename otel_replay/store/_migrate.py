"""Converting a store of an earlier format version to the current one (4), losing nothing.

Version 2 is read by its own reader and written anew beside the old store, which is kept.
Version 3 differs only in its records (spans kept whole, where version 4 leaves out what
the step's bodies rebuild): each record file is rewritten in place, its spans re-encoded,
once the rewritten records are read back and found to give every span exactly as before;
``FORMAT`` changes last. Packs are not touched: the copies of derived attributes they held
are freed by the next ``gc``. Cut off, it is run again.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from otel_replay.errors import StoreError, StoreFormatError, StoreNotFoundError
from otel_replay.step import RunEnd, RunFacts
from otel_replay.store._derived import Sources
from otel_replay.store._format import FORMAT_FILE, read_format_version, write_format
from otel_replay.store._records import (
    Record,
    decode_records,
    encode_record,
    merge_frames,
    step_from_entry,
)
from otel_replay.store._repack import repack_level
from otel_replay.store._sync import list_files
from otel_replay.store._v2 import read_listing, read_v2
from otel_replay.store._write import encode_span, step_bodies
from otel_replay.store.store import Store

__all__ = ["Migration", "migrate"]


@dataclass(frozen=True, slots=True)
class Migration:
    """What ``migrate`` did: the version it converted from, the runs and steps carried over,
    where the old store is kept (version 2; None: converted in place),
    the steps of the old store that could not be carried (``lost``; the old store's index
    lists them), and one line per thing that could not be read or carried. ``resumed``: a
    migration cut off between its two renames was finished (nothing else was done)."""

    runs: int
    steps: int
    backup: Path | None
    problems: list[str] = field(default_factory=list)
    lost: int = 0
    resumed: bool = False
    version: int = 2


def _siblings(root: Path) -> tuple[Path, Path]:
    return root.with_name(root.name + ".v4-new"), root.with_name(root.name + ".v2-backup")


def migrate(root: Path) -> Migration:
    """Convert the version-2 or version-3 store at ``root`` (see the module docstring).

    Raises StoreNotFoundError when there is no store, StoreFormatError when it is of
    another version (a version-4 store needs nothing), StoreError when the backup name is
    taken (version 2) or a record file cannot be rewritten (version 3).
    """
    new, backup = _siblings(root)
    if not root.exists() and new.is_dir() and backup.is_dir():
        new.rename(root)  # cut off between the two renames: finish the swap
        return Migration(0, 0, backup, resumed=True)
    where = root / FORMAT_FILE
    try:
        version = read_format_version(where.read_bytes(), str(where))
    except FileNotFoundError:
        raise StoreNotFoundError(f"no otel-replay store at {root}") from None
    if version == 3:
        return _from_version_3(root)
    if version != 2:
        raise StoreFormatError(
            f"{where} is format version {version}; migrate converts versions 2 and 3"
        )
    if backup.exists():
        raise StoreError(f"{backup} exists already: move it away, then migrate again")
    if new.exists():
        shutil.rmtree(new)  # an earlier attempt, cut off before the swap: it is rewritten
    runs = steps = lost = 0
    listing = read_listing(root)
    problems = (
        []
        if listing.problem is None
        else [f"{listing.problem}: steps lost with a whole pack cannot be named"]
    )
    with Store.open(new) as store:
        for run in read_v2(root, listing):
            problems.extend(run.problems)
            lost += run.lost
            if not (run.steps or run.spans):
                continue  # nothing of it could be read: named in its problems
            facts = run.steps[0].run if run.steps and run.steps[0].run else RunFacts(run.run_id)
            store.put(run.steps, run.spans, runs=[facts])
            ends = [s.get("end_ns") for s in run.spans] + [s.end_ns for s in run.steps]
            store.end_run(
                RunEnd(run.run_id, max((e for e in ends if isinstance(e, int)), default=0))
            )
            store.flush()
            if run.pinned:
                store.pin(run.run_id)
            runs += 1
            steps += len(run.steps)
    root.rename(backup)
    new.rename(root)
    return Migration(runs, steps, backup, problems, lost)


def _from_version_3(root: Path) -> Migration:
    """Rewrite the record files of the version-3 store at ``root`` (module docstring)."""
    problems: list[str] = []
    runs: set[str] = set()
    steps = 0
    with Store._previous_format(root) as store:
        backend = store._backend
        for rel in sorted(list_files(backend).records):
            decoded = decode_records(backend.read(rel))
            if decoded.problems:
                # Rewritten, its damaged entries would be gone: it stays as it is (version-3
                # records read as they are).
                problems.extend(
                    f"record file {rel}: {p} (left as it was)" for p in decoded.problems
                )
                continue
            try:
                records = [_reencoded(store, record, rel) for record in decoded.records]
            except (OSError, ValueError) as exc:
                problems.append(f"record file {rel}: {exc} (left as it was)")
                continue
            data = merge_frames(records, repack_level(sum(map(len, records))))
            backend.publish(rel, data, replace=True)
            with store._index.transaction() as tx:
                tx.conn.execute("UPDATE records SET size = ? WHERE path = ?", (len(data), rel))
            for record in decoded.records:
                runs.add(record.run_id)
                steps += len(record.steps)
        backend.sync()
        write_format(backend)
    return Migration(len(runs), steps, None, problems, version=3)


def _reencoded(store: Store, record: Record, rel: str) -> bytes:
    """The JSON of ``record`` as version 4 writes it; ValueError (naming the span) unless it
    reads back to the very spans ``record`` gives."""
    given = [store._span(entry, rel) for entry in record.spans]
    steps = [
        step_from_entry(
            record.run_id,
            entry,
            store.body("sha256:" + entry["request"]),
            b"" if entry["response"] is None else store.body("sha256:" + entry["response"]),
        )
        for entry in record.steps
    ]
    sources = Sources.of(steps, step_bodies(steps))
    data = encode_record(
        record.run_id,
        record.recording,
        record.seq,
        facts=record.facts,
        steps=record.steps,
        spans=[encode_span(span, sources).entry for span in given],
        end=record.end,
        name=record.name,
    )
    again = decode_records(merge_frames([data], 1)).records
    if len(again) != 1 or [store._span(e, rel) for e in again[0].spans] != given:
        raise ValueError("its spans do not read back the same once re-encoded")
    return data
