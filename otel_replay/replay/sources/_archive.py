"""The Collector file exporter's output directory as a source: live files, their rotated
backups and ``group_by`` subdirectories, read in the order they were written.

Rotation (timberjack, lumberjack before it) renames the live file ``NAME.EXT`` to
``NAME-<time>.EXT`` (``NAME-<time>-size.EXT`` or ``-time.EXT`` with timberjack), the time
``2006-01-02T15-04-05.000`` in UTC or local time, and starts a new live file. A run whose
spans are spread over several files is read as one: each live file's backups oldest first,
then the live file. A live file may end in a record the Collector is writing: it is left out
with a note, not an error. A file that is not the exporter's (a README beside them: not named
like a trace file, and its first byte starts none of its formats) is left out with a note.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from otel_replay.errors import SourceError
from otel_replay.replay.sources._documents import Document, decode
from otel_replay.replay.sources._framing import ZSTD_MAGIC
from otel_replay.replay.sources._limits import Limits

if TYPE_CHECKING:  # the store is loaded by what reads an archive, not by every replay
    from otel_replay.store import ImportedFile

__all__ = ["ArchiveFile", "ArchiveRead", "archive_files", "archive_parts", "read_archive"]

_HEAD_BYTES = 64 * 1024
# Names a trace file is given: such a file is read, and an error when it is no OTLP data.
_TRACE_SUFFIXES = frozenset(
    (".json", ".jsonl", ".ndjson", ".pb", ".proto", ".protobuf", ".otlp", ".bin", ".gz", ".zst")
)
# What OTLP data starts with: JSON ("{", "[", whitespace, a byte order mark), a record's
# 4-byte big-endian length or protobuf's first field (bytes below 0x20), gzip (0x1f), zstd.
_STARTS = frozenset(b"{[ \xef")
_BACKUP = re.compile(
    r"^(?P<name>.+)-(?P<time>\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}\.\d{3})(?:-(?:size|time))?$"
)


@dataclass(frozen=True, slots=True)
class ArchiveFile:
    """One file of an archive: its path, the live file it was rotated from (itself when it
    is the live file) and the rotation time its name carries (None: the live file)."""

    path: Path
    live: Path
    rotated: str | None


def archive_files(root: Path) -> list[ArchiveFile]:
    """The files under ``root`` (hidden ones aside, and pipes, sockets and devices: none holds
    an archive's trace file, and opening a pipe waits for a writer), in the order they were
    written.

    Raises SourceError naming ``root`` when it holds none.
    """
    files = [_archive_file(path) for path in _walk(root)]
    if not files:
        raise SourceError(f"{root} holds no trace files (an empty directory)")
    return sorted(files, key=lambda f: (str(f.live), f.rotated is None, f.rotated or ""))


def _walk(root: Path) -> Iterator[Path]:
    for folder, dirs, names in os.walk(root, onerror=_unreadable):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            path = Path(folder, name)
            if not name.startswith(".") and not _special(path):
                yield path


def _special(path: Path) -> bool:
    """True for a pipe, socket or device (a link that leads nowhere is read, and named as
    unreadable)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode)


def _unreadable(exc: OSError) -> None:
    raise SourceError(f"cannot read {exc.filename}: {exc.strerror or exc}")


def _archive_file(path: Path) -> ArchiveFile:
    # The time goes before the last extension; a name without one ends with the time,
    # whose milliseconds look like an extension.
    for suffix in (path.suffix, ""):
        backup = _BACKUP.match(path.name[: len(path.name) - len(suffix)])
        if backup is not None:
            return ArchiveFile(path, path.with_name(backup["name"] + suffix), backup["time"])
    return ArchiveFile(path, path, None)


@dataclass(slots=True)
class ArchiveRead:
    """What reading (part of) an archive gave: the documents of the files read, in order,
    and their size once decompressed; the files read (as an import remembers them), those
    skipped as imported already, those left out as no trace files (remembered too, so that
    a cron job notes each once), and the notes on half-written ends and stray files."""

    documents: list[Document] = field(default_factory=list)
    size: int = 0
    read: list[ImportedFile] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    stray: list[ImportedFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def read_archive(root: Path, limits: Limits) -> ArchiveRead:
    """Every file of the archive at ``root``, read within ``limits`` all together.

    Raises SourceError naming the file (and the line or record) when one cannot be read,
    is corrupt, is truncated (but for a live file's last record), or when the archive is
    past the limits.
    """
    whole = ArchiveRead()
    for part in archive_parts(root, limits):
        if whole.size + part.size > limits.max_bytes:
            raise SourceError(
                f"{limits.too_large(str(root))}; `otel-replay import {root}` reads it a "
                "part at a time"
            )
        whole.documents += part.documents
        whole.size += part.size
        whole.read += part.read
        whole.notes += part.notes
    return whole


def archive_parts(
    root: Path, limits: Limits, skip: Callable[[ImportedFile], bool] | None = None
) -> Iterator[ArchiveRead]:
    """The archive at ``root`` read in parts, in order, each part whole files within
    ``limits`` once decompressed; a file ``skip`` says was imported already is not read.

    Raises SourceError as :func:`read_archive` does (one file past the limits included).
    """
    from otel_replay.store import ImportedFile  # noqa: PLC0415 - a bundle's replay needs none

    part = ArchiveRead()
    for file in archive_files(root):
        head, size, mtime_ns, first = _peek(file.path)
        if size == 0:
            continue  # a live file just started (or rotated): nothing in it yet
        if skip is not None and skip(ImportedFile(str(file.path), size, mtime_ns, head, b"")):
            part.skipped.append(file.path)
            continue
        if _stray(file.path, first):
            part.notes.append(f"{file.path}: left out, not a trace file")
            part.stray.append(ImportedFile(str(file.path), size, mtime_ns, head, head))
            continue
        data = _read(file.path, limits)
        decoded = decode(data, str(file.path), limits, growing=file.rotated is None)
        if part.size and part.size + decoded.size > limits.max_bytes:
            yield part
            part = ArchiveRead()
        part.documents += decoded.documents
        part.size += decoded.size
        if decoded.cut is not None:
            part.notes.append(decoded.cut)
        digest = hashlib.sha256(data).digest()
        head = hashlib.sha256(data[:_HEAD_BYTES]).digest()
        part.read.append(ImportedFile(str(file.path), len(data), mtime_ns, head, digest))
    yield part


def _peek(path: Path) -> tuple[bytes, int, int, bytes]:
    """The sha256 of a file's first bytes, its size, its modification time and its first
    four bytes."""
    try:
        with path.open("rb") as stream:
            stat = os.fstat(stream.fileno())
            first = stream.read(_HEAD_BYTES)
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror or exc}") from None
    return hashlib.sha256(first).digest(), stat.st_size, stat.st_mtime_ns, first[:4]


def _stray(path: Path, first: bytes) -> bool:
    """True for a file beside the trace files that is none: not named like one, and not
    starting as OTLP data does. A trace file damaged from its first byte is read (and is an
    error naming it) when its name says what it is."""
    if any(suffix.lower() in _TRACE_SUFFIXES for suffix in path.suffixes):
        return False
    return bool(first) and not (first[0] < 0x20 or first[0] in _STARTS or first == ZSTD_MAGIC)


def _read(path: Path, limits: Limits) -> bytes:
    try:
        with path.open("rb") as stream:
            data = stream.read(limits.max_bytes + 1)
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > limits.max_bytes:
        raise limits.too_large(str(path))
    return data
