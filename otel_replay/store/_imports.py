"""The import ledger: the trace files ``otel-replay import DIR`` read, kept as small JSON
files under ``imports/`` so that an index rebuilt from the files knows them again (the index's
``imported_files`` table is for lookups, filled from these files).

Each note is a file of its own (``imports/<16 hex digits>.json``), so two importers never
write one file; past :data:`MERGE_AT` files, a note merges them into one. A merge publishes
the merged file before it deletes the ones it read, so killed anywhere it loses no entry, and
two merges at once each keep what they read."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from otel_replay.store import _rows
from otel_replay.store._format import IMPORTS_DIR, new_recording_id
from otel_replay.store._fs import Backend
from otel_replay.store._index import Index
from otel_replay.store._reports import ImportedFile, VerifyProblem

__all__ = ["MERGE_AT", "LedgerEntry", "note", "read_ledgers"]

VERSION = 1
MERGE_AT = 16
"""Ledger files past which a note merges them into one: an import run every minute by cron
keeps a handful of files, not one per run."""

_SUFFIX = ".json"


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One file the ledger names, and when it was read (Unix nanoseconds)."""

    file: ImportedFile
    read_ns: int

    @property
    def key(self) -> tuple[int, int, bytes]:
        """What tells one file from another (see :class:`ImportedFile`)."""
        return self.file.size, self.file.mtime_ns, self.file.head


def _path(name: str) -> str:
    return f"{IMPORTS_DIR}/{name}{_SUFFIX}"


def _encode(entries: Iterable[LedgerEntry]) -> bytes:
    # The standard library's JSON: a path not valid UTF-8 (lone surrogates) round-trips.
    listed = [
        {
            "path": e.file.path,
            "size": e.file.size,
            "mtime_ns": e.file.mtime_ns,
            "head": e.file.head.hex(),
            "digest": e.file.digest.hex(),
            "read_ns": e.read_ns,
        }
        for e in entries
    ]
    return json.dumps({"v": VERSION, "files": listed}, separators=(",", ":")).encode()


def _decode(data: bytes) -> list[LedgerEntry]:
    """The entries of a ledger file; ValueError when it is not one."""
    value: Any = json.loads(data)
    if not isinstance(value, dict) or value.get("v") != VERSION:
        raise ValueError("not a ledger of a known version")
    try:
        return [
            LedgerEntry(
                ImportedFile(
                    str(item["path"]),
                    int(item["size"]),
                    int(item["mtime_ns"]),
                    bytes.fromhex(item["head"]),
                    bytes.fromhex(item["digest"]),
                ),
                int(item["read_ns"]),
            )
            for item in value["files"]
        ]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"malformed entry: {exc!r}") from None


def _names(backend: Backend) -> list[str]:
    return [
        name.removesuffix(_SUFFIX)
        for name in backend.listdir(IMPORTS_DIR)
        if name.endswith(_SUFFIX) and not name.startswith(".")
    ]


def _publish(backend: Backend, index: Index, entries: Sequence[LedgerEntry]) -> str:
    """Write ``entries`` as a new ledger file, then index them; the file's name."""
    name = new_recording_id()
    backend.publish(_path(name), _encode(entries))
    backend.sync()
    with index.transaction() as tx:
        _rows.note_imported(tx.conn, entries, name)
    return name


def note(backend: Backend, index: Index, files: Sequence[ImportedFile], now_ns: int) -> None:
    """Remember ``files`` as read at ``now_ns``: a ledger file, then the index; past
    :data:`MERGE_AT` ledger files, merge them."""
    if not files:
        return
    _publish(backend, index, [LedgerEntry(file, now_ns) for file in files])
    names = _names(backend)
    if len(names) > MERGE_AT:
        _merge(backend, index, names)


def _merge(backend: Backend, index: Index, names: list[str]) -> None:
    """One ledger file for those named (an unreadable one is left as it is)."""
    merged: dict[tuple[int, int, bytes], LedgerEntry] = {}
    read: list[str] = []
    for name in names:
        try:
            entries = _decode(backend.read(_path(name)))
        except (OSError, ValueError):
            continue
        read.append(name)
        for entry in entries:
            held = merged.get(entry.key)
            if held is None or entry.read_ns >= held.read_ns:
                merged[entry.key] = entry
    if len(read) < 2:
        return
    _publish(backend, index, sorted(merged.values(), key=lambda e: e.read_ns))
    for name in read:
        backend.delete(_path(name))
    backend.sync()
    with index.transaction() as tx:
        _rows.forget_ledgers(tx.conn, read)


def read_ledgers(index: Index, backend: Backend, *, forget_missing: bool) -> list[VerifyProblem]:
    """Index the ledger files the index has not read (and, ``forget_missing``, forget the
    names of those gone: their entries stay, a merged file holds them); one notice per file
    that cannot be read (it costs reading its trace files again, nothing else)."""
    with index.guard():
        known = set(_rows.ledgers(index.conn()))
    listed = _names(backend)
    problems: list[VerifyProblem] = []
    for name in sorted(set(listed) - known):
        path = _path(name)
        try:
            entries = _decode(backend.read(path))
        except (OSError, ValueError) as exc:
            problems.append(
                VerifyProblem(
                    "ledger",
                    f"import ledger {backend.location}/{path} cannot be read ({exc}); the "
                    "files it names will be read again by the next import",
                    path=path,
                )
            )
            continue
        with index.transaction() as tx:
            _rows.note_imported(tx.conn, entries, name)
    gone = known - set(listed)
    if forget_missing and gone:
        with index.transaction() as tx:
            _rows.forget_ledgers(tx.conn, sorted(gone))
    return problems
