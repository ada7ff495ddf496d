"""The store's layout on disk (or in a bucket), its paths and names, and its format version."""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass

from otel_replay.errors import StoreFormatError, StoreNotFoundError
from otel_replay.store._fs import Backend, LocalBackend

__all__ = [
    "FORMAT_FILE",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "IMPORTS_DIR",
    "INDEX_FILE",
    "LABELS_DIR",
    "LOCK_FILE",
    "OBJECTS_DIR",
    "PINS_DIR",
    "RUNS_DIR",
    "RecordName",
    "ensure_format",
    "id_bytes",
    "is_recording_id",
    "label_path",
    "new_recording_id",
    "pack_path",
    "parse_pack_path",
    "parse_record_name",
    "pin_path",
    "read_format_version",
    "record_path",
    "run_dir",
    "run_key",
    "write_format",
]

FORMAT_NAME = "otel-replay-store"
FORMAT_VERSION = 4
FORMAT_FILE = "FORMAT"
INDEX_FILE = "index.sqlite"
LOCK_FILE = "LOCK"
OBJECTS_DIR = "objects"
RUNS_DIR = "runs"
PINS_DIR = "pins"
LABELS_DIR = "labels"
IMPORTS_DIR = "imports"

_PACK_PATH = re.compile(r"^objects/([0-9a-f]{2})/([0-9a-f]{64})\.pack$")
_RECORD_NAME = re.compile(r"^([0-9a-f]{16})-([0-9a-f]{8})-([0-9a-f]{8})\.rec$")
_ID = re.compile(r"[0-9a-f]{16}")
_IGNORED_IN_EMPTY_DIR = (".tmp-", ".DS_Store")


def id_bytes(run_id: str) -> bytes:
    """The bytes of a run id: UTF-8, with lone surrogates (ids decoded from non-UTF-8 bytes)
    kept as they are."""
    return run_id.encode("utf-8", "surrogatepass")


def run_key(run_id: str) -> str:
    """The directory name of a run id (see the module docstring)."""
    return hashlib.sha256(id_bytes(run_id)).hexdigest()[:32]


def run_dir(run_id: str) -> str:
    """The directory (relative to the root) holding the records of ``run_id``."""
    key = run_key(run_id)
    return f"{RUNS_DIR}/{key[:2]}/{key}"


def record_path(run_id: str, writer: str, first: int, last: int) -> str:
    """The path of a record file of ``writer`` holding records ``first`` to ``last``."""
    return f"{run_dir(run_id)}/{writer}-{first:08x}-{last:08x}.rec"


def new_recording_id() -> str:
    """A fresh recording (or writer) id: 16 random hex digits."""
    return os.urandom(8).hex()  # secrets.token_hex(8), without loading random


def is_recording_id(value: str) -> bool:
    """Whether ``value`` is a recording (or writer) id as :func:`new_recording_id` makes."""
    return _ID.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class RecordName:
    """A parsed record file name: the writer and the records it holds."""

    writer: str
    first: int
    last: int


def parse_record_name(name: str) -> RecordName | None:
    """The writer and record range of a record file name, or None if it is not one."""
    match = _RECORD_NAME.match(name)
    if match is None:
        return None
    first, last = int(match[2], 16), int(match[3], 16)
    return RecordName(match[1], first, last) if first <= last else None


def pack_path(name: str) -> str:
    """The path of the pack named ``name`` (the sha256 hex of its bytes)."""
    return f"{OBJECTS_DIR}/{name[:2]}/{name}.pack"


def parse_pack_path(rel: str) -> str | None:
    """The name of the pack at ``rel``, or None if ``rel`` is not a pack path."""
    match = _PACK_PATH.match(rel)
    return match[2] if match is not None and match[2].startswith(match[1]) else None


def pin_path(run_name: str) -> str:
    """The marker file that pins the run named ``run_name``."""
    return f"{PINS_DIR}/{run_key(run_name)}"


def label_path(run_name: str) -> str:
    """The file holding the failure labels of the run named ``run_name``."""
    return f"{LABELS_DIR}/{run_key(run_name)}.json"


def _format_bytes() -> bytes:
    return json.dumps({"format": FORMAT_NAME, "version": FORMAT_VERSION}).encode() + b"\n"


def read_format_version(data: bytes, where: str) -> int:
    """The version a FORMAT file states; StoreFormatError when it is not one of ours."""
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
    return version


def _check(data: bytes, where: str, *, previous: bool = False) -> None:
    version = read_format_version(data, where)
    if previous and version == FORMAT_VERSION - 1:
        return
    if version > FORMAT_VERSION:
        raise StoreFormatError(
            f"{where} is format version {version}; this otel-replay reads version "
            f"{FORMAT_VERSION}. Upgrade otel-replay to read it (nothing was changed)"
        )
    if version in (2, 3):
        raise StoreFormatError(
            f"{where} is format version {version}; this otel-replay reads version "
            f"{FORMAT_VERSION}. Convert it with `otel-replay migrate` (nothing was changed)"
        )
    if version < FORMAT_VERSION:
        raise StoreFormatError(
            f"{where} is format version {version}, a pre-release layout; this otel-replay "
            f"reads version {FORMAT_VERSION} only. Record into a new store (nothing was changed)"
        )


def write_format(backend: Backend) -> None:
    """Mark the store as of :data:`FORMAT_VERSION` (a migration's last step)."""
    backend.publish(FORMAT_FILE, _format_bytes(), replace=True)
    backend.sync()


def ensure_format(backend: Backend, *, create: bool, previous: bool = False) -> None:
    """Check the store's ``FORMAT``, creating the store when it is new and ``create`` is set
    (``previous``: the version before :data:`FORMAT_VERSION` is accepted too, to migrate it).

    Raises StoreFormatError (a version other than :data:`FORMAT_VERSION`, or a non-empty
    directory without ``FORMAT``), StoreNotFoundError (no store and ``create`` is False) or
    StoreNotWritableError (the store cannot be created).
    """
    where = f"{backend.location}/{FORMAT_FILE}"
    try:
        _check(backend.read(FORMAT_FILE), where, previous=previous)
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
        advice = ". Use an empty or new directory" if create else ""
        raise StoreFormatError(
            f"{backend.location} is not empty but has no {FORMAT_FILE} file: it is not an "
            f"otel-replay store; refusing to use it, nothing was changed{advice}"
        )
    if not create:
        missing = backend.where_missing()
        gone = f": the {missing} does not exist" if missing else ""
        raise StoreNotFoundError(f"no otel-replay store at {backend.location}{gone}")
    if isinstance(backend, LocalBackend):
        backend.makedirs("")
    if not backend.publish(FORMAT_FILE, _format_bytes(), replace=False):
        _check(backend.read(FORMAT_FILE), where)  # another process created it first
    backend.sync()
