"""The store's layout on disk (or in a bucket) and its format version.

::

    <root>/FORMAT                         {"format": "otel-replay-store", "version": 2}
    <root>/index.sqlite                   runs and steps (local stores; see ``_index``)
    <root>/pins/<run>                     empty file: the run is kept forever
    <root>/packs/<run>/<stream>-<first>-<last>.pack

A *stream* is what one writer (one open :class:`~otel_replay.store.Store`) wrote for one run:
its objects are numbered from 0 and packed into files named by the stream's id and the range
of numbers they hold (hexadecimal). Run directory names are the run id, percent-encoded. The
packs are the source of truth: every flush writes a record (steps and spans) into them, so the
index can be rebuilt from the packs alone.

``FORMAT`` is checked on every open. Any other version is refused with a one-line error naming
the store, its version and the one this build reads, and nothing is rewritten; a non-empty
directory without ``FORMAT`` is refused too, never adopted.

Version 2 (this one) keeps each fact once. Against version 1:

* a run's packs sit directly in its directory, the stream id leading their names (version 1
  had a directory per stream: one directory fewer to create and fsync per run);
* records no longer hold the sha256 or the size of the bodies: the index holds them, and
  rebuilding the index computes them from the bodies (``_sync``); a recipe carries the first
  4 bytes of the sha256 of what it rebuilds (``_pack``), so a body rebuilt wrongly is caught
  even where no index holds its hash;
* records leave out the provider, model and tokens of their steps, which their spans state
  (``_records``); a span's ``sha256:<hex>`` string that is the hash of a stored object (its
  request or response body, say) is stored as a reference to that object, and the long strings
  taken out of spans no longer carry a fingerprint of their own (``_spans``);
* the index (schema version 4; a cache, rebuilt from the packs) keeps a run's streams in the
  run's row, and a step's provider, model, trace, start and object numbers relative to its
  run's and its request's; it has no secondary index (a run's row sits at a rowid given by the
  hash of its id) and keeps its statements without spaces (``_rows``). An index of another
  schema version is refused with a hint to rebuild it (``verify --rebuild-index``).

Version 1 was never released, so its stores are refused, not read: reading them would take a
second reader for its records and index. (Version 1 itself was refined in place before
version 2 replaced it; none of its stores was ever shipped.)
"""

from __future__ import annotations

import hashlib
import json
import re
from urllib.parse import quote

from otel_replay.errors import StoreFormatError, StoreNotFoundError
from otel_replay.store._fs import Backend, LocalBackend

__all__ = [
    "FORMAT_FILE",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "INDEX_FILE",
    "PACKS_DIR",
    "PINS_DIR",
    "ensure_format",
    "pack_name",
    "pack_path",
    "parse_pack_name",
    "pin_path",
    "run_dir",
    "run_name",
    "stream_label",
]

FORMAT_NAME = "otel-replay-store"
FORMAT_VERSION = 2
FORMAT_FILE = "FORMAT"
INDEX_FILE = "index.sqlite"
PACKS_DIR = "packs"
PINS_DIR = "pins"

_PACK_NAME = re.compile(r"^([0-9a-f]{16})-([0-9a-f]{8,16})-([0-9a-f]{8,16})\.pack$")
_IGNORED_IN_EMPTY_DIR = (".tmp-", ".DS_Store")


def _quote(name: str) -> str:
    """A file name for ``name``: percent-encoded, never ``.``/``..``, bounded in length."""
    quoted = quote(name, safe="-_~") or "%00"
    if len(quoted) > 180:
        digest = hashlib.sha256(name.encode()).hexdigest()[:16]
        quoted = f"{quoted[:120]}~{digest}"
    return quoted


def run_name(run_id: str) -> str:
    """The name of the directory of ``run_id`` under ``packs/``."""
    return _quote(run_id)


def run_dir(run_id: str) -> str:
    """The directory (relative to the root) holding the packs of ``run_id``."""
    return f"{PACKS_DIR}/{_quote(run_id)}"


def stream_label(run_id: str, stream: int) -> str:
    """How messages name a stream: the start of its packs' paths (relative to the root)."""
    return f"{run_dir(run_id)}/{stream:016x}"


def pack_name(stream: int, first: int, last: int) -> str:
    """File name of the pack of ``stream`` holding objects ``first`` to ``last``."""
    return f"{stream:016x}-{first:08x}-{last:08x}.pack"


def pack_path(run_id: str, stream: int, first: int, last: int) -> str:
    """The path (relative to the root) of a pack; see :func:`pack_name`."""
    return f"{run_dir(run_id)}/{pack_name(stream, first, last)}"


def parse_pack_name(name: str) -> tuple[int, int, int] | None:
    """``(stream, first, last)`` of a pack file name, or None if it is not one."""
    match = _PACK_NAME.match(name)
    if match is None:
        return None
    stream, first, last = (int(group, 16) for group in match.groups())
    return (stream, first, last) if first <= last else None


def pin_path(run_id: str) -> str:
    """The marker file that pins ``run_id``."""
    return f"{PINS_DIR}/{_quote(run_id)}"


def _format_bytes() -> bytes:
    return json.dumps({"format": FORMAT_NAME, "version": FORMAT_VERSION}).encode() + b"\n"


def _check(data: bytes, where: str) -> None:
    try:
        meta = json.loads(data)
        name, version = meta["format"], meta["version"]
    except (ValueError, TypeError, KeyError):
        raise StoreFormatError(
            f"{where} is not a readable otel-replay FORMAT file; refusing to use the store "
            "(nothing was changed)"
        ) from None
    if name != FORMAT_NAME:
        raise StoreFormatError(f"{where} says format {name!r}, not {FORMAT_NAME!r}")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise StoreFormatError(f"{where} has an unknown format version {version!r}")
    if version > FORMAT_VERSION:
        raise StoreFormatError(
            f"{where} is format version {version}; this otel-replay reads version "
            f"{FORMAT_VERSION}. Upgrade otel-replay to read it (nothing was changed)"
        )
    if version < FORMAT_VERSION:
        raise StoreFormatError(
            f"{where} is format version {version}, an older layout; this otel-replay reads "
            f"version {FORMAT_VERSION} only. Read it with the otel-replay that wrote it, or "
            "record into a new store (nothing was changed)"
        )


def ensure_format(backend: Backend, *, create: bool) -> None:
    """Check the store's ``FORMAT``, creating the store when it is new and ``create`` is set.

    Raises StoreFormatError (a version other than :data:`FORMAT_VERSION`, or a non-empty
    directory without ``FORMAT``), StoreNotFoundError (no store and ``create`` is False) or
    StoreNotWritableError (the store cannot be created).
    """
    where = f"{backend.location}/{FORMAT_FILE}"
    try:
        _check(backend.read(FORMAT_FILE), where)
        return
    except (FileNotFoundError, NotADirectoryError):
        pass
    except IsADirectoryError:
        raise StoreFormatError(f"{where} is a directory, not a FORMAT file") from None
    others = [
        name
        for name in backend.listdir("")
        if not name.startswith(_IGNORED_IN_EMPTY_DIR) and name != FORMAT_FILE
    ]
    if others:
        raise StoreFormatError(
            f"{backend.location} is not empty but has no {FORMAT_FILE} file: it is not an "
            "otel-replay store (or one older than format versions); refusing to use it, "
            "nothing was changed. Use an empty or new directory"
        )
    if not create:
        raise StoreNotFoundError(f"no otel-replay store at {backend.location}")
    if isinstance(backend, LocalBackend):
        backend.makedirs("")
    if not backend.publish(FORMAT_FILE, _format_bytes(), replace=False):
        _check(backend.read(FORMAT_FILE), where)  # another process created it first
    backend.sync()
