"""Failure labels (``otel-replay triage``): derived from a run's recording, kept as one small
JSON file per run under ``labels/`` so that an index rebuilt from the files has them again
(and other machines sharing a remote store see them), and as rows of the index's ``labels``
table for lookups. Labelling a run again replaces its file whole; its recording is never
touched.

The index remembers the size and time of each file it read (``label_files``): a sync reads
only the files new or changed since. A file this store wrote is read once more by the next
sync, to learn its time."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from otel_replay.store import _rows
from otel_replay.store._format import LABELS_DIR, label_path
from otel_replay.store._fs import Backend
from otel_replay.store._index import Index
from otel_replay.store._types import FailureLabel

if TYPE_CHECKING:  # loaded by read_files, which neither show nor runs calls
    from otel_replay.store._reports import VerifyProblem

__all__ = ["labels", "read_files", "write"]

VERSION = 1
_FIELDS = ("step", "category", "severity", "rule", "reason")


def _encode(run_name: str, found: Sequence[FailureLabel]) -> bytes:
    # The standard library's JSON: a run name not valid UTF-8 (lone surrogates) round-trips.
    listed = [{field: getattr(label, field) for field in _FIELDS} for label in found]
    return json.dumps({"v": VERSION, "run": run_name, "labels": listed}, indent=1).encode()


def _decode(data: bytes) -> tuple[str, list[FailureLabel]]:
    """The run name and labels of a labels file; ValueError when it is not one."""
    value: Any = json.loads(data)
    if not isinstance(value, dict) or value.get("v") != VERSION:
        raise ValueError("not a labels file of a known version")
    run, listed = value.get("run"), value.get("labels")
    if not isinstance(run, str) or not isinstance(listed, list):
        raise ValueError("no run name or no labels")
    found = []
    for item in listed:
        step = item.get("step") if isinstance(item, dict) else None
        texts = [item.get(field) for field in _FIELDS[1:]] if isinstance(item, dict) else [None]
        if not all(isinstance(t, str) for t in texts) or not (
            step is None or (isinstance(step, int) and not isinstance(step, bool))
        ):
            raise ValueError(f"malformed label: {item!r}"[:200])
        found.append(FailureLabel(step, *texts))
    return run, found


def _replace_rows(
    conn: sqlite3.Connection,
    run: int,
    found: Sequence[FailureLabel],
    path: str,
    seen: tuple[int, float | None],
) -> None:
    conn.execute("DELETE FROM labels WHERE run = ?", (run,))
    conn.executemany(
        "INSERT INTO labels (run, step_index, category, severity, rule, reason) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [(run, x.step, x.category, x.severity, x.rule, x.reason) for x in found],
    )
    conn.execute(
        "INSERT OR REPLACE INTO label_files (path, run, size, mtime) VALUES (?, ?, ?, ?)",
        (path, run, *seen),
    )


def write(
    backend: Backend,
    index: Index,
    labelled: Sequence[tuple[_rows.RunRow, Sequence[FailureLabel]]],
) -> int:
    """Make each run's labels those given: files first (a run left with none loses its
    file), then the index, in one transaction. A run whose labels are already those is left
    alone; the number of runs whose labels changed."""
    conn = index.conn()
    with index.guard():
        held = labels(conn)
        filed = {run for (run,) in conn.execute("SELECT run FROM label_files")}
    changed = [
        (row, list(found))
        for row, found in labelled
        if held.get(row.name, []) != list(found) or (bool(found) != (row.id in filed))
    ]
    written = [(label_path(row.name), _encode(row.name, found)) for row, found in changed if found]
    backend.publish_many(written)
    for row, found in changed:
        if not found:
            backend.delete(label_path(row.name))
    backend.sync()
    sizes = {path: len(data) for path, data in written}
    with index.transaction() as tx:
        for row, found in changed:
            path = label_path(row.name)
            if found:
                _replace_rows(tx.conn, row.id, found, path, (sizes[path], None))
            else:
                tx.execute("DELETE FROM labels WHERE run = ?", (row.id,))
                tx.execute("DELETE FROM label_files WHERE run = ?", (row.id,))
    return len(changed)


def labels(conn: sqlite3.Connection, name: str | None = None) -> dict[str, list[FailureLabel]]:
    """The labels of every labelled run, or of the run named ``name``, by run name; each
    run's own label first, then its steps' in order."""
    where = "" if name is None else "WHERE runs.name = ? "
    params: tuple[object, ...] = () if name is None else (_rows.id_param(name),)
    rows = conn.execute(
        "SELECT runs.name, labels.step_index, labels.category, labels.severity, labels.rule, "
        "labels.reason FROM labels JOIN runs ON runs.id = labels.run "
        f"{where}ORDER BY runs.id, labels.step_index IS NOT NULL, labels.step_index, labels.rowid",
        params,
    )
    found: dict[str, list[FailureLabel]] = {}
    for run_name, *label in rows:
        found.setdefault(_rows.run_name_of(run_name), []).append(FailureLabel(*label))
    return found


def read_files(index: Index, backend: Backend, *, forget_missing: bool) -> list[VerifyProblem]:
    """Index the labels files new or changed since the index read them (and, with
    ``forget_missing``, forget the labels whose file is gone); a notice for each file that
    cannot be read (its run is labelled again by the next triage)."""
    from otel_replay.store._reports import VerifyProblem  # noqa: PLC0415 - see the imports

    conn = index.conn()
    with index.guard():
        known = {
            path: (size, mtime)
            for path, size, mtime in conn.execute("SELECT path, size, mtime FROM label_files")
        }
    listed = {rel: info for rel, info in backend.find(LABELS_DIR).items() if rel.endswith(".json")}
    problems: list[VerifyProblem] = []
    for rel, (size, mtime) in sorted(listed.items()):
        if known.get(rel) == (size, mtime):
            continue
        try:
            run_name, found = _decode(backend.read(rel))
        except (OSError, ValueError) as exc:
            message = f"labels file {backend.location}/{rel} cannot be read ({exc})"
            problems.append(VerifyProblem("labels", message, path=rel))
            continue
        with index.guard():
            row = _rows.run_row(conn, run_name)
        if row is None or label_path(row.name) != rel:
            continue  # a run not indexed (yet), or a file filed under another run's name
        with index.transaction() as tx:
            _replace_rows(tx.conn, row.id, found, rel, (size, mtime))
    if forget_missing and set(known) - set(listed):
        with index.transaction() as tx:
            for rel in set(known) - set(listed):
                tx.execute(
                    "DELETE FROM labels WHERE run IN (SELECT run FROM label_files WHERE path = ?)",
                    (rel,),
                )
                tx.execute("DELETE FROM label_files WHERE path = ?", (rel,))
    return problems
