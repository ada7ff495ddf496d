"""``Store.verify``: re-read everything, re-hash every body, check the index against the packs.

Per stream in the index: every pack file is read whole, its trailer checked (crc32) and every
frame decompressed (zstd checksum); every recipe is decoded and its references checked; every
record is decoded and compared with the index rows of its steps. Then every step's request and
response bodies are reassembled and re-hashed against the index. Each problem names the thing
that is damaged: the pack file, the stream and object, the blob hash, the run and step.

Streams found on storage but not in the index, and records of a stream beyond what the index
lists, are checked too: an index rebuilt from the packs leaves out what follows an unreadable
pack or a body that fails its check (``_sync``), and that must not make the store look intact.
(A stream, or the tail of one, that reads back whole but is not indexed is a writer killed
between publishing and committing, no damage; ``gc`` removes such a stream.)
"""

from __future__ import annotations

from collections import defaultdict

from otel_replay.errors import CorruptBlobError
from otel_replay.store._format import run_name, stream_label
from otel_replay.store._fs import Backend
from otel_replay.store._index import Index
from otel_replay.store._pack import KIND_RECIPE, KIND_RECORD, PackError, decode_recipe
from otel_replay.store._reader import PackFile, Reader, cover
from otel_replay.store._records import decode_record
from otel_replay.store._rows import StepRef
from otel_replay.store._spans import restore
from otel_replay.store._sync import list_streams, unindexable
from otel_replay.store._types import Progress, VerifyProblem

__all__ = ["unindexed_damage", "verify"]


def _check_pack(
    reader: Reader, location: str, pack: PackFile, committed: int, problems: list[VerifyProblem]
) -> bool:
    """Check one pack file; False (and a problem) when it is damaged."""
    path = f"{location}/{pack.rel}"
    try:
        index = reader.pack_index(pack.rel)
        if (index.first, index.last) != (pack.first, pack.last):
            raise PackError(f"holds objects {index.first}-{index.last}, its name says otherwise")
        for offset, (number, start, length, kind) in enumerate(index.entries):
            data = reader.frame(pack.rel, index, number)[start : start + length]
            oid = index.first + offset
            if kind == KIND_RECIPE:
                refs = [part for part in decode_recipe(data)[1] if isinstance(part, int)]
                if any(ref >= max(committed, pack.last + 1) for ref in refs):
                    raise PackError(f"recipe {oid} refers to an object that does not exist")
            elif kind == KIND_RECORD:
                try:
                    decode_record(data)
                except ValueError as exc:
                    raise PackError(f"record {oid}: {exc}") from None
    except (PackError, OSError) as exc:
        problems.append(VerifyProblem("pack", f"{path}: {exc}", path=path))
        return False
    return True


def _check_stream(
    reader: Reader,
    location: str,
    run_id: str,
    stream: int,
    committed: int,
    refs: list[StepRef],
    problems: list[VerifyProblem],
) -> None:
    where = f"{location}/{stream_label(run_id, stream)}"
    reader.forget(run_id, stream)
    listed = reader.list_packs(run_id, stream)
    healthy = [p for p in listed if _check_pack(reader, location, p, committed, problems)]
    covered = -1
    for pack in cover(healthy):
        if pack.first > covered + 1 and covered + 1 < committed:
            problems.append(
                VerifyProblem(
                    "object",
                    f"{where}: objects {covered + 1}-{min(pack.first, committed) - 1} are missing",
                    path=where,
                    run_id=run_id,
                )
            )
        covered = max(covered, pack.last)
    if covered + 1 < committed:
        problems.append(
            VerifyProblem(
                "object",
                f"{where}: objects {covered + 1}-{committed - 1} are missing",
                path=where,
                run_id=run_id,
            )
        )
    # a damaged pack explains a short index by itself; a killed writer's tail reads back whole
    tail = unindexable(reader, stream, healthy, committed) if healthy == listed else None
    if tail is not None:
        problems.append(
            VerifyProblem(
                "record",
                f"{where}: {tail} (the index lists the stream only up to object {committed})",
                path=where,
                run_id=run_id,
            )
        )
    by_step = {(ref.record_oid, ref.index): ref for ref in refs}
    records = sorted(
        {
            index.first + offset
            for pack in cover(healthy)
            for index in (reader.pack_index(pack.rel),)
            for offset, entry in enumerate(index.entries)
            if entry[3] == KIND_RECORD and index.first + offset < committed
        }
    )
    for oid in records:
        try:
            record = decode_record(reader.raw(run_id, stream, oid)[1])
            restore(
                record.spans, record.ext, record.tags, lambda n: reader.object(run_id, stream, n)
            )
        except (CorruptBlobError, ValueError, LookupError, TypeError) as exc:
            problems.append(
                VerifyProblem("record", f"{where}: record {oid}: {exc}", path=where, run_id=run_id)
            )
            continue
        for step in record.steps:
            ref = by_step.get((oid, step.index))
            if ref is None:
                continue
            if (
                record.run_id != run_id
                or step.request_oid != ref.request_oid
                or step.response_oid != ref.response_oid
            ):
                problems.append(
                    VerifyProblem(
                        "index",
                        f"index row of run {run_id!r} step {ref.index} does not match record "
                        f"{oid} of {where}",
                        path=where,
                        run_id=run_id,
                        step_index=ref.index,
                    )
                )
    for ref in refs:
        if ref.record_oid not in records:
            problems.append(
                VerifyProblem(
                    "index",
                    f"index row of run {run_id!r} step {ref.index} points at record "
                    f"{ref.record_oid} of {where}, which is not there",
                    path=where,
                    run_id=run_id,
                    step_index=ref.index,
                )
            )


def _intact_digest(reader: Reader, ref: StepRef, oid: int) -> bytes | None:
    """The sha256 of an object that reads back intact (its frame's checksum, its recipe's
    check), or None."""
    try:
        return reader.hashed(ref.run_id, ref.stream, oid)[1]
    except CorruptBlobError:
        return None


def _check_bodies(reader: Reader, ref: StepRef, problems: list[VerifyProblem]) -> None:
    bodies = [(ref.request_oid, ref.request_digest)]
    if ref.response_oid is not None and ref.response_digest is not None:
        bodies.append((ref.response_oid, ref.response_digest))
    for oid, digest in bodies:
        try:
            reader.body(ref.run_id, ref.stream, oid, digest)
        except CorruptBlobError as exc:
            intact = _intact_digest(reader, ref, oid)
            if intact is not None:  # the body passes its own checks: the index is what is wrong
                problems.append(
                    VerifyProblem(
                        "index",
                        f"index row of run {ref.run_id!r} step {ref.index} says "
                        f"sha256:{digest.hex()} for a body that hashes to sha256:{intact.hex()} "
                        "(`otel-replay verify --rebuild-index` rebuilds the index)",
                        blob="sha256:" + digest.hex(),
                        run_id=ref.run_id,
                        step_index=ref.index,
                    )
                )
            problems.append(
                VerifyProblem(
                    "body",
                    f"run {ref.run_id!r} step {ref.index}: {exc}",
                    blob="sha256:" + digest.hex(),
                    run_id=ref.run_id,
                    step_index=ref.index,
                )
            )


def unindexed_damage(
    reader: Reader, location: str, stream: int, packs: list[PackFile]
) -> list[VerifyProblem]:
    """The problems of a stream the index does not list (``packs``: all its pack files);
    empty when every pack is sound and every record could be indexed."""
    found: list[VerifyProblem] = []
    for pack in packs:
        _check_pack(reader, location, pack, 0, found)
    folder = packs[0].rel.rsplit("/", 1)[0]
    where = f"{location}/{folder}/{stream:016x}"
    if not found:
        problem = unindexable(reader, stream, packs)
        if problem is not None:
            found.append(VerifyProblem("record", f"{where}: {problem}", path=where))
    if found:
        found.append(
            VerifyProblem(
                "index",
                f"{where} is not in the index: a pack or a body of it cannot be read, so the "
                "steps it holds are not listed",
                path=where,
            )
        )
    return found


def verify(
    index: Index, backend: Backend, reader: Reader, progress: Progress | None = None
) -> list[VerifyProblem]:
    """Check the whole store; the problems found (empty when it is intact)."""
    problems: list[VerifyProblem] = []
    streams = index.streams()
    refs: dict[tuple[str, int], list[StepRef]] = defaultdict(list)
    for ref in index.step_refs():
        refs[(ref.run_id, ref.stream)].append(ref)
    for run_id, stream in set(refs) - {(run, s) for run, s, _ in streams}:
        name = f"{stream:016x}" if stream >= 0 else f"number {-1 - stream}"
        problems.append(
            VerifyProblem(
                "index",
                f"index lists steps of run {run_id!r} in unknown stream {name}",
                run_id=run_id,
            )
        )
    indexed = {(run_name(run), s) for run, s, _ in streams}
    unindexed = [
        (key, packs) for key, packs in sorted(list_streams(backend).items()) if key not in indexed
    ]
    total = len(streams) + len(unindexed) + sum(len(items) for items in refs.values())
    done = 0
    for run_id, stream, committed in streams:
        stream_refs = refs.get((run_id, stream), [])
        _check_stream(reader, backend.location, run_id, stream, committed, stream_refs, problems)
        done += 1
        if progress is not None:
            progress(done, total)
        for ref in stream_refs:
            _check_bodies(reader, ref, problems)
            done += 1
            if progress is not None:
                progress(done, total)
    for (_, stream), packs in unindexed:
        problems.extend(unindexed_damage(reader, backend.location, stream, packs))
        done += 1
        if progress is not None:
            progress(done, total)
    return problems
