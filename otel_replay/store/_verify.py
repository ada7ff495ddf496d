"""``verify``: re-read every file, re-hash every object, check the index against the files."""

from __future__ import annotations

import hashlib

from otel_replay.errors import CorruptBlobError
from otel_replay.store import _rows
from otel_replay.store._derived import rebuild
from otel_replay.store._format import parse_pack_path
from otel_replay.store._fs import Backend
from otel_replay.store._index import Index
from otel_replay.store._manifest import ManifestError, decode_manifest
from otel_replay.store._pack import KIND_MANIFEST, PackError, decompress_frame, entries
from otel_replay.store._read import MAX_DEPTH, ObjectReader
from otel_replay.store._records import Record, decode_records
from otel_replay.store._repack import covering, record_groups
from otel_replay.store._reports import VerifyProblem
from otel_replay.store._sync import list_files, read_pack_table
from otel_replay.store._types import Progress

__all__ = ["verify"]


def _check_pack(
    backend: Backend, reader: ObjectReader, rel: str, problems: list[VerifyProblem]
) -> set[bytes]:
    """Check one pack; the digests of its objects that are intact."""
    where = f"{backend.location}/{rel}"
    data = backend.read(rel)
    name = parse_pack_path(rel)
    if hashlib.sha256(data).hexdigest() != name:
        problems.append(VerifyProblem("pack", f"{where}: does not match its name (sha256)", rel))
    try:
        table = entries(read_pack_table(backend, rel, len(data)))
    except PackError as exc:
        problems.append(VerifyProblem("pack", f"{where}: cannot be read: {exc}", rel))
        return set()
    frames: dict[int, bytes | None] = {}
    stored: dict[bytes, tuple[int, bytes]] = {}  # this pack's objects: kind, stored bytes
    for entry in table:
        if entry.frame_offset not in frames:
            try:
                frame = data[entry.frame_offset : entry.frame_offset + entry.frame_size]
                frames[entry.frame_offset] = decompress_frame(frame)
            except PackError as exc:
                frames[entry.frame_offset] = None
                problems.append(
                    VerifyProblem(
                        "pack", f"{where}: frame at byte {entry.frame_offset}: {exc}", rel
                    )
                )
        content = frames[entry.frame_offset]
        if content is not None:
            stored[entry.digest] = (entry.kind, content[entry.offset : entry.offset + entry.size])

    def assemble(digest: bytes, depth: int) -> bytes:
        # A manifest's chunks are looked for in its own pack first: a pack the index does
        # not know yet (its writer was cut off before the commit) is checked whole.
        kind, raw = stored[digest] if digest in stored else reader.raw(digest)
        if kind != KIND_MANIFEST or depth > MAX_DEPTH:
            return raw
        return b"".join(
            assemble(part[0], depth + 1) if isinstance(part, tuple) else part
            for part in decode_manifest(raw)
        )

    good: set[bytes] = set()
    for digest in stored:
        tag = f"sha256:{digest.hex()}"
        try:
            body = assemble(digest, 0)
        except (CorruptBlobError, ManifestError) as exc:
            problems.append(VerifyProblem("object", f"object {tag} in {where}: {exc}", rel, tag))
            continue
        if hashlib.sha256(body).digest() != digest:
            problems.append(
                VerifyProblem(
                    "object", f"object {tag} in {where} does not match its hash", rel, tag
                )
            )
            continue
        good.add(digest)
    return good


def _check_indexed(
    records: list[Record],
    indexed: set[tuple[str | bytes, str, int]],
    location: str,
    rel: str,
    problems: list[VerifyProblem],
) -> None:
    """A problem for the steps of an indexed record file that the index does not list."""
    missing = [
        (record.run_id, entry["index"])
        for record in records
        for entry in record.steps
        if (_rows.id_param(record.run_id), record.recording, entry["index"]) not in indexed
    ]
    if missing:
        run_id, first = missing[0]
        problems.append(
            VerifyProblem(
                "index",
                f"record file {location}/{rel} holds {len(missing)} step(s) the index lacks "
                f"(run {run_id!r} step {first} first); `verify --rebuild-index` reads them",
                rel,
                run_id=run_id,
                step_index=first,
            )
        )


def _locates_nothing(index: Index, backend: Backend, name: str, rel: str) -> bool:
    """Whether the index locates none of the objects of pack ``name`` (at ``rel``) there."""
    try:
        table = entries(read_pack_table(backend, rel, backend.size(rel)))
    except (PackError, OSError):
        return False  # checked whole, and named
    with index.guard():
        return not _rows.pack_objects(index.conn(), name, [entry.digest for entry in table])


def _gone_pack(index: Index, name: str) -> VerifyProblem:
    """A pack the index lists whose file is missing: damage when the index locates objects
    in it; else a leftover (they were all copied elsewhere first: nothing is missing)."""
    with index.guard():
        lost = len(_rows.pack_objects(index.conn(), name, None))
    if lost:
        return VerifyProblem(
            "index", f"index lists pack {name} but its file is missing ({lost} objects)"
        )
    return VerifyProblem(
        "leftover",
        f"index lists pack {name}, whose file is gone, holding nothing (a compaction or gc "
        "is running, or was cut off); the next gc forgets it",
    )


def _pack_problems(
    index: Index, backend: Backend, reader: ObjectReader, name: str, rel: str, known: bool
) -> list[VerifyProblem]:
    """What one pack file holds wrong, or is worth a notice for."""
    where = f"{backend.location}/{rel}"
    if known and _locates_nothing(index, backend, name, rel):
        # Garbage: its objects are not read (a chunk one of them references may be gone).
        return [
            VerifyProblem(
                "leftover",
                f"pack {where} holds nothing the index locates (copies of what other packs "
                "hold, or what a gc that was cut off was removing); the next gc removes it",
                rel,
            )
        ]
    problems: list[VerifyProblem] = []
    held = _check_pack(backend, reader, rel, problems)
    if known:
        return problems
    with index.guard():
        copies = bool(held) and _rows.existing(index.conn(), list(held)) == held
    if copies:
        problems.append(
            VerifyProblem(
                "leftover",
                f"pack {where} holds only objects other packs hold (a compaction or gc was cut "
                "off); the next gc removes it",
                rel,
            )
        )
    else:
        problems.append(
            VerifyProblem(
                "unindexed",
                f"pack {where} is not in the index (a writer was cut off before its commit, or "
                "another process wrote it); `verify --rebuild-index` reads it",
                rel,
            )
        )
    return problems


def _unknown_record(location: str, rel: str, covered_by: str | None) -> VerifyProblem:
    """A record file the index does not list: a leftover when another file of its writer
    holds its records (``covered_by``)."""
    if covered_by is not None:
        return VerifyProblem(
            "leftover",
            f"record file {location}/{rel} holds records that {covered_by} holds too (a merge "
            "is running, or was cut off); the next gc removes it",
            rel,
        )
    return VerifyProblem("unindexed", f"record file {location}/{rel} is not in the index", rel)


def verify(
    index: Index, backend: Backend, reader: ObjectReader, progress: Progress | None = None
) -> list[VerifyProblem]:
    """See the module docstring."""
    problems: list[VerifyProblem] = []
    conn = index.conn()
    with index.guard():
        (check,) = conn.execute("PRAGMA quick_check").fetchone()
        if check != "ok":
            problems.append(VerifyProblem("index", f"index {index.path}: {check}"))
        known_packs = {name for (name,) in conn.execute("SELECT name FROM packs")}
        known_records = {path for (path,) in conn.execute("SELECT path FROM records")}
        steps = conn.execute(
            "SELECT runs.name, step_index, request_hash, response_hash "
            "FROM steps JOIN runs ON runs.id = steps.run ORDER BY runs.id, step_index"
        ).fetchall()
        indexed_steps = set(
            conn.execute(
                "SELECT runs.run_id, runs.recording, step_index FROM steps "
                "JOIN runs ON runs.id = steps.run"
            )
        )
    listing = list_files(backend)  # after the index, as a sync lists (``_sync.sync``)
    total = len(listing.packs) + len(listing.records) + len(steps)
    done = 0
    for rel in sorted(listing.temps):
        problems.append(
            VerifyProblem(
                "temp", f"temporary file {backend.location}/{rel} (a writer was cut off)", rel
            )
        )
    for rel in sorted(listing.strays):
        problems.append(VerifyProblem("unindexed", f"stray file {backend.location}/{rel}", rel))
    on_disk = {parse_pack_path(rel): rel for rel in listing.packs}
    problems.extend(_gone_pack(index, name) for name in sorted(known_packs - set(on_disk)))
    for name, rel in sorted(on_disk.items(), key=lambda item: item[1]):
        assert name is not None
        problems.extend(_pack_problems(index, backend, reader, name, rel, name in known_packs))
        done += 1
        if progress:
            progress(done, total)
    for rel in sorted(known_records - set(listing.records)):
        problems.append(
            VerifyProblem("index", f"index lists record file {rel} but it is missing", rel)
        )
    covered = {
        rel: wide
        for paths in record_groups(listing.records).values()
        for rel, wide in covering(paths).items()
    }
    for rel in sorted(listing.records):
        decoded = decode_records(backend.read(rel))
        for problem in decoded.problems:
            problems.append(
                VerifyProblem("record", f"record file {backend.location}/{rel}: {problem}", rel)
            )
        if rel not in known_records:
            problems.append(_unknown_record(backend.location, rel, covered.get(rel)))
        else:
            _check_indexed(decoded.records, indexed_steps, backend.location, rel, problems)
        _check_derived(decoded.records, reader, f"{backend.location}/{rel}", rel, problems)
        done += 1
        if progress:
            progress(done, total)
    checked: set[bytes] = set()
    for name, step_index, request, response in steps:
        run_name = _rows.run_name_of(name)
        for digest in (request, response):
            if digest is None or digest in checked:
                continue
            tag = _rows.hash_tag(digest)
            try:
                reader.content(bytes(digest))
                checked.add(digest)
            except CorruptBlobError as exc:
                problems.append(
                    VerifyProblem(
                        "body",
                        f"run {run_name!r} step {step_index}: body {tag} cannot be read: {exc}",
                        blob=tag,
                        run_id=run_name,
                        step_index=step_index,
                    )
                )
        done += 1
        if progress:
            progress(done, total)
    problems.extend(_incomplete(index))
    return problems


def _check_derived(
    records: list[Record],
    reader: ObjectReader,
    where: str,
    rel: str,
    problems: list[VerifyProblem],
) -> None:
    """Rebuild the attributes each span of ``records`` left out as derived (``_derived``),
    naming each span whose attributes do not come back as recorded."""

    def body(tag: str) -> bytes:
        return reader.content(bytes.fromhex(tag.removeprefix("sha256:")))

    for record in records:
        for entry in record.spans:
            if entry.derived is None:
                continue
            try:
                rebuild(entry.span.get("attributes") or {}, entry.derived, body)
            except (ValueError, CorruptBlobError) as exc:
                problems.append(
                    VerifyProblem(
                        "record",
                        f"record file {where}: span {entry.span.get('span_id')} of run "
                        f"{record.run_id!r}: its content attributes cannot be rebuilt: {exc}",
                        rel,
                        run_id=record.run_id,
                    )
                )


def _incomplete(index: Index) -> list[VerifyProblem]:
    """A notice for each run its recorder did not close."""
    with index.guard():
        runs = _rows.run_infos(index.conn())
    return [
        VerifyProblem(
            "incomplete",
            f"run {run.run_id!r} was not closed by its recorder (cut off, still recording, or "
            "imported before its last spans arrived): "
            f"{run.step_count} steps stored",
            run_id=run.run_id,
        )
        for run in runs
        if run.status == "incomplete"
    ]
