"""Golden bundles: one recorded run as a directory to check in and review, written by
``otel-replay export RUN DIR`` and read back as a replay source."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import secrets
import shutil
import stat
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from otel_replay._canonical import sha256_tag
from otel_replay._schema import SchemaCheck
from otel_replay.errors import SourceError
from otel_replay.redact import Redactor
from otel_replay.replay._model import RecordedStep, Run
from otel_replay.replay.sources import _bundle_redact as redact
from otel_replay.replay.sources._bundle_schema import FORMAT, SCHEMA
from otel_replay.replay.sources._limits import Limits, read_file
from otel_replay.step import Step

__all__ = ["MANIFEST", "is_bundle", "lacks_manifest", "read_bundle", "write_bundle"]

MANIFEST = "bundle.json"
VERSION = 1
_STEPS = "steps"
_BODY_NAME = re.compile(r"[0-9]{1,9}\.(?:request|response)\.(?:json|sse|txt|bin)")
_SUFFIXES = {"application/json": "json", "text/event-stream": "sse", "text/": "txt"}


def is_bundle(path: Path) -> bool:
    """Whether ``path`` is a directory holding a bundle's manifest."""
    try:
        return path.is_dir() and (path / MANIFEST).exists()
    except OSError:  # a name too long to be a path (a run id, say): no bundle, not an error
        return False


def lacks_manifest(path: Path) -> bool:
    """Whether ``path`` is a directory holding a bundle's body files (``steps/0.request.json``
    …) but no manifest: a bundle damaged or half copied, not a Collector's archive."""
    steps = path / _STEPS
    try:
        if not steps.is_dir() or (path / MANIFEST).exists():
            return False
        with os.scandir(steps) as entries:
            return any(_BODY_NAME.fullmatch(entry.name) for entry in entries)
    except OSError:
        return False


def write_bundle(run: Run, directory: Path, redactor: Redactor, *, replace: bool = False) -> int:
    """Write ``run`` as a bundle into ``directory`` (which must not exist, or be empty, or
    with ``replace`` hold a bundle); returns how many body files were written. Raises
    SourceError when ``directory`` holds anything else (nothing is overwritten) and OSError
    when it cannot be written.

    The bundle is written into a hidden sibling and renamed to ``directory`` once whole, so
    a failed or interrupted export leaves nothing at ``directory`` that reads as a bundle
    (only, if killed, a ``.NAME.*.partial`` sibling). A link to a directory is written
    through: the bundle takes the place of the empty directory it points to. A bundle already
    at ``directory`` (``replace``) is exchanged with the new one in one step (``renameat2``),
    so ``directory`` holds one whole bundle or the other at every moment, and what else it
    held (files beside ``bundle.json`` and ``steps/``) is kept; where the file
    system cannot exchange, the old one is moved aside first (a ``.NAME.*.old`` sibling if
    killed right then) and put back if the new one cannot take its place."""
    target = directory.resolve()
    old = replace and is_bundle(target)
    if not old and target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise SourceError(f"{directory} already exists and is not an empty directory")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = _sibling(target, "partial")
    staging.mkdir()
    try:
        written = _write_into(staging, run, redactor)
        if old:
            _keep_others(target, staging)
            _swap(staging, target)  # staging now holds the old bundle, removed below
            shutil.rmtree(staging, ignore_errors=True)
        else:
            # Atomic, and it replaces only an empty directory: one that filled up meanwhile
            # is left as it is (OSError, ENOTEMPTY).
            os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return written


def _keep_others(old: Path, new: Path) -> None:
    """Copy what ``old`` holds besides the bundle itself (a reviewer's notes, a test's
    inputs) into ``new``: a bundle replaced keeps them."""
    for entry in old.iterdir():
        if entry.name in (MANIFEST, _STEPS):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, new / entry.name, symlinks=True)
        else:
            shutil.copy2(entry, new / entry.name, follow_symlinks=False)


def _sibling(target: Path, what: str) -> Path:
    return target.parent / f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.{what}"


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _swap(new: Path, target: Path) -> None:
    """Exchange the directories ``new`` and ``target`` (each then holds the other's bundle)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        exchange = libc.renameat2
    except (OSError, AttributeError):
        exchange = None
    if exchange is not None:
        paths = (os.fsencode(new), os.fsencode(target))
        if exchange(_AT_FDCWD, paths[0], _AT_FDCWD, paths[1], _RENAME_EXCHANGE) == 0:
            return
        error = ctypes.get_errno()
        if error not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(error, os.strerror(error), str(target))
    aside = _sibling(target, "old")
    os.rename(target, aside)
    try:
        os.rename(new, target)
    except BaseException:
        os.rename(aside, target)
        raise
    os.rename(aside, new)


def _write_into(directory: Path, run: Run, redactor: Redactor) -> int:
    redact.learn(run, redactor)
    (directory / _STEPS).mkdir()
    steps: list[dict[str, Any]] = []
    written = 0
    for recorded in run.steps:
        facts, bodies = _step_document(recorded, redactor)
        for name, data in bodies.items():
            (directory / _STEPS / name).write_bytes(data)
            written += 1
        steps.append(facts)
    kit: dict[str, Any] = {
        "id": run.run_id,
        "commit": run.commit,
        "seed": run.seed,
        "code_dirty": run.code_dirty,
        "start_ns": run.start_ns,
        "resource": redact.attributes(run.resource, redactor),
    }
    if run.status != "ok":
        # How it ended travels with it: a failed or cut-off run handed over as a bundle must
        # not come back `ok`. Left out when ok, so an ok run's bundle reads as it always did.
        kit["status"] = run.status
        kit["error_type"] = run.error_type
    manifest = {"format": FORMAT, "version": VERSION, "run": kit, "steps": steps}
    text = json.dumps(manifest, indent=2, ensure_ascii=False, sort_keys=False) + "\n"
    (directory / MANIFEST).write_text(text, encoding="utf-8")
    return written


def _step_document(
    recorded: RecordedStep, redactor: Redactor
) -> tuple[dict[str, Any], dict[str, bytes]]:
    """A step's facts for the manifest, and its body files by name."""
    # Header text is Latin-1 on the wire; a source that held other characters gets "?".
    headers = redactor.headers(
        [
            (k.encode("latin-1", "replace"), v.encode("latin-1", "replace"))
            for k, v in recorded.step.response_headers
        ]
    )
    suffix = _suffix(dict((k.lower(), v) for k, v in headers), recorded.step.response_body)
    bodies: dict[str, bytes] = {}
    request_name = request_hash = None
    if recorded.request_body is not None:
        request = redactor.body(recorded.request_body)
        request_name = f"{recorded.step.index}.request.{'json' if _is_json(request) else 'bin'}"
        bodies[request_name] = request
        # Unchanged by redaction, the recorded hash stands; redacted again, the bytes'.
        recorded_hash = recorded.step.request_hash or None
        request_hash = recorded_hash if request is recorded.request_body else sha256_tag(request)
    response_name = f"{recorded.step.index}.response.{suffix}"
    response = redactor.body(recorded.step.response_body, stream=suffix == "sse")
    bodies[response_name] = response
    chunks = recorded.step.chunks
    if response is not recorded.step.response_body and chunks:
        chunks = redact.rechunked(
            recorded.step.response_body, chunks, response, redactor, suffix == "sse"
        )
    facts: dict[str, Any] = {
        "index": recorded.step.index,
        "kind": recorded.step.kind,
        "endpoint": redact.endpoint(recorded.endpoint, redactor),
        "method": recorded.step.method,
        "url": redactor.url(recorded.step.url) if recorded.step.url else None,
        "request": None if request_name is None else f"{_STEPS}/{request_name}",
        "request_hash": request_hash,
        "status_code": recorded.step.status_code,
        "response_headers": [list(pair) for pair in headers],
        "response": f"{_STEPS}/{response_name}",
        "fidelity": recorded.fidelity,
        "chunks": [list(chunk) for chunk in chunks],
        "complete": recorded.step.complete,
        "error_type": recorded.step.error_type,
        "provider": recorded.step.provider,
        "model": recorded.step.model,
        "prompt_hash": recorded.prompt_hash,
        "tool_schema_version": recorded.tool_schema_version,
        "duration_ns": recorded.duration_ns,
        "attributes": redact.attributes(recorded.attributes, redactor),
        "within": recorded.step.within,
        "start_ns": recorded.step.start_ns or None,
    }
    return facts, bodies


def _is_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except (ValueError, RecursionError):  # nested past what json reads: a body all the same
        return False
    return True


def _suffix(headers: Mapping[str, str], body: bytes) -> str:
    """A response file's suffix: by its content type, else (a tool's or a value's answer,
    which has none) ``json`` when it parses as JSON."""
    kind = headers.get("content-type")
    if kind is None:
        return "json" if _is_json(body) else "bin"
    kind = kind.split(";", 1)[0].strip().lower()
    for prefix, suffix in _SUFFIXES.items():
        if kind.startswith(prefix):
            return suffix
    return "bin"


def read_bundle(directory: Path, limits: Limits) -> Run:
    """The run of the bundle at ``directory``. Raises SourceError naming the bundle (and
    the file) when it is not one, is of another version, or anything in it is wrong."""
    where = str(directory)
    manifest_path = directory / MANIFEST
    _plain_file(manifest_path, where)
    try:
        document = json.loads(read_file(manifest_path, limits), object_pairs_hook=_unique_keys)
    except _DuplicateKeyError as exc:
        raise SourceError(
            f"{where}: {MANIFEST} has the key {exc.key!r} twice in one object "
            "(a reviewer would read one, the replay the other)"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise SourceError(f"{where}: {MANIFEST} is not JSON ({exc})") from None
    if isinstance(document, dict) and document.get("format") == FORMAT:
        version = document.get("version")
        if version != VERSION:
            raise SourceError(
                f"{where}: a bundle of format version {version!r}; this otel-replay reads "
                f"version {VERSION}"
            )
    error = _manifest_check().first_error(document)
    if error is not None:
        at = "/".join(str(p) for p in error.absolute_path)[:200] or "the top"
        message = error.message if len(error.message) <= 200 else error.message[:200] + "…"
        raise SourceError(f"{where}: {MANIFEST} is not a bundle manifest (at {at}: {message})")
    facts = document["run"]
    _plain_directory(directory / _STEPS, where)
    budget = [limits.max_bytes]
    steps = tuple(_step(facts["id"], item, directory, limits, budget) for item in document["steps"])
    indices = [recorded.step.index for recorded in steps]
    if len(set(indices)) != len(indices):
        raise SourceError(f"{where}: two steps of {MANIFEST} have one index")
    return Run(
        run_id=facts["id"],
        source=where,
        steps=tuple(sorted(steps, key=lambda s: s.step.index)),
        commit=facts.get("commit"),
        seed=_int(facts.get("seed")),
        code_dirty=facts.get("code_dirty"),
        resource=_restored(facts.get("resource", {})),
        start_ns=_int(facts.get("start_ns")),
        status=facts.get("status", "ok"),
        error_type=facts.get("error_type"),
    )


@cache
def _manifest_check() -> SchemaCheck:
    """The manifest's schema checks, built once per process (every bundle read uses them)."""
    return SchemaCheck(SCHEMA)


def _int(value: float | None) -> int | None:
    """A number the schema took as an integer (JSON's ``3.0`` is one) as an int."""
    return None if value is None else int(value)


def _step(
    run_id: str, item: Mapping[str, Any], directory: Path, limits: Limits, budget: list[int]
) -> RecordedStep:
    index = int(item["index"])
    request = None
    if item.get("request") is not None:
        request = _body(directory, item["request"], limits, budget)
        recorded = item.get("request_hash")
        if recorded is not None and sha256_tag(request) != recorded:
            raise SourceError(
                f"{directory}: {item['request']} does not have the hash step {index} recorded "
                "(edited by hand? a request body must stay as it was sent)"
            )
    response = _body(directory, item["response"], limits, budget)
    chunks = [(int(size), int(at)) for size, at in item.get("chunks", ())]
    if chunks and sum(size for size, _ in chunks) != len(response):
        raise SourceError(f"{directory}: the chunks of step {index} do not add up to its response")
    start = _int(item.get("start_ns")) or 0
    step = Step(
        run_id=run_id,
        index=index,
        trace_id=0,
        span_id=0,
        kind=item["kind"],
        method=item["method"],
        url=item.get("url") or "",
        request_headers=[],
        request_body=request or b"",
        request_hash=item.get("request_hash") or ("" if request is None else sha256_tag(request)),
        status_code=_int(item.get("status_code")),
        response_headers=[(k, v) for k, v in item.get("response_headers", ())],
        response_body=response,
        chunks=chunks,
        complete=item.get("complete", True),
        error_type=item.get("error_type"),
        provider=item.get("provider"),
        model=item.get("model"),
        within=_int(item.get("within")),
        start_ns=start,
        end_ns=start + int(item.get("duration_ns", 0)),
    )
    return RecordedStep(
        step,
        endpoint=item["endpoint"],
        fidelity=item["fidelity"],
        request_known=request is not None,
        prompt_hash=item.get("prompt_hash"),
        tool_schema_version=item.get("tool_schema_version"),
        attributes=_restored(item.get("attributes", {})),
    )


def _body(directory: Path, name: str, limits: Limits, budget: list[int]) -> bytes:
    """A body file named in the manifest, read only from ``steps/`` under the bundle."""
    folder, _, file = name.partition("/")
    if folder != _STEPS or not _BODY_NAME.fullmatch(file):
        raise SourceError(f"{directory}: {name!r} is not a body file a bundle may name")
    path = directory / _STEPS / file
    _plain_file(path, str(directory))
    data = read_file(path, Limits(budget[0], limits.max_line_bytes, limits.timeout_s))
    budget[0] -= len(data)
    return data


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's members; _DuplicateKeyError for a key given twice (json keeps the
    last one silently)."""
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKeyError(key)
            seen.add(key)
    return document


def _plain_directory(path: Path, where: str) -> None:
    """SourceError unless ``path`` is a directory itself, not a link to one elsewhere."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return  # no bodies at all: a step that names one says which is missing
    except OSError as exc:
        raise SourceError(f"{where}: cannot read {path.name}/: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(mode):
        raise SourceError(f"{where}: {path.name}/ is not a directory of the bundle (a link?)")


def _plain_file(path: Path, where: str) -> None:
    """SourceError unless ``path`` is a regular file (a link could reach anything)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError as exc:
        raise SourceError(f"{where}: cannot read {path.name}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise SourceError(f"{where}: {path.name} is not a plain file")


def _restored(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes as a span holds them: sequences as tuples."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in attributes.items()}
