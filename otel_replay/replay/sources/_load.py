"""From a reference (run id, file, URL, each with an optional ``#RUN_ID``) to runs."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from otel_replay import settings
from otel_replay._printable import clipped, printable
from otel_replay.errors import (
    OtelReplayError,
    RunNotFoundError,
    SourceError,
    StoreNotFoundError,
)
from otel_replay.replay._model import Run
from otel_replay.replay.sources._archive import read_archive
from otel_replay.replay.sources._build import (
    SourceRun,
    UnbuiltRuns,
    build_run,
    build_runs,
    stored_run,
)
from otel_replay.replay.sources._bundle import MANIFEST, is_bundle, lacks_manifest, read_bundle
from otel_replay.replay.sources._documents import Document, documents
from otel_replay.replay.sources._group import (
    GroupingError,
    RunSummary,
    describe,
    group_runs,
    select,
    summary,
)
from otel_replay.replay.sources._limits import Limits, read_file
from otel_replay.replay.sources._runs import SpanRun, has_steps
from otel_replay.replay.sources._spans import span_dicts

__all__ = ["archive_of", "is_remote", "load_run", "load_sources", "only_run", "read_runs"]

_log = logging.getLogger("otel_replay")

_FILE_SUFFIXES = (".json", ".jsonl", ".ndjson", ".pb", ".protobuf", ".otlp", ".bin", ".gz")


def load_run(ref: str, *, store: str | None = None) -> Run:
    """The run ``ref`` names, rebuilt with its payloads.

    ``ref`` is a run id in the store (``store``, default ``OTEL_REPLAY_STORE``), a file
    (OTLP JSON lines, one OTLP JSON document, or OTLP protobuf, gzip or zstd, as the
    Collector's file exporter writes them or not: the content decides; a path or a ``file:``
    URL of this host), a bundle directory (``otel-replay export``), a directory of such
    files (the file exporter's rotated output: :mod:`._archive`), an http(s) URL answering
    OTLP JSON (Jaeger's ``{"result": …}``, Tempo's ``{"trace": …}`` too) or a trace backend
    (``phoenix://``, ``jaeger://``, ``tempo://``: :mod:`._backends`). ``ref#RUN_ID`` picks
    one run of a source that holds several (by run id, or by the trace id of any of its
    traces); without it such a source is an error that lists them. Which spans make a run:
    :mod:`otel_replay.replay.sources._group`.

    Raises SourceError (missing, truncated or corrupt source, nothing replayable, several runs
    and no selector) or StoreError (unknown run id, store missing or of an unknown format),
    each with one line naming the thing.
    """
    return only_run(load_sources(ref, store=store), ref)


def only_run(runs: list[SourceRun], ref: str) -> Run:
    """The one run of ``runs`` (loaded from ``ref``); SourceError listing them when several,
    each with its id, first span time and number of steps."""
    if len(runs) > 1:
        listed = describe(
            [RunSummary(r.run.run_id, r.run.start_ns, len(r.run.steps)) for r in runs]
        )
        path, selector = _split(ref)
        if path is None or _exists(Path(os.path.expanduser(ref))):
            said = f"{ref} holds"
        elif selector is None:  # an empty selector picks nothing: the source itself is named
            ref = said = ref[: ref.rindex("#")]
            said += " holds"
        else:  # a prefix several runs' ids share
            said = f"{ref} names"
            ref = ref[: len(ref) - len(selector) - 1]
        raise SourceError(f"{said} {len(runs)} runs; pick one with {ref}#RUN_ID: {listed}")
    return runs[0].run


def load_sources(ref: str, *, store: str | None = None) -> list[SourceRun]:
    """Every run ``ref`` names (one when it names a run id or has a ``#RUN_ID``), with the
    spans each was rebuilt from. Raises like :func:`load_run`; never returns an empty list.

    Files and URLs are read within the source limits (:class:`Limits`)."""
    if is_remote(ref):
        from otel_replay.replay.sources._backends import download, source_name  # noqa: PLC0415

        where, _, wanted = ref.partition("#")
        limits = Limits.from_env()
        data = download(where, limits, wanted or None)
        return read_runs(data, source_name(where), wanted or None, limits)
    if ref[:5].lower() == "file:":
        ref = _local(ref)
    path, selector = _split(ref)
    if path is not None:
        limits = Limits.from_env()
        if is_bundle(path):
            return [_bundled(path, selector, limits)]
        if path.is_dir():
            _refuse_headless_bundle(path)
            archive = read_archive(path, limits)
            for note in archive.notes:
                _log.warning("otel-replay: %s", printable(note))  # a file's name: any bytes
            return runs_of(archive.documents, str(path), selector, stepless="skip")
        try:
            data = read_file(path, limits)
        except OSError as exc:
            raise SourceError(f"cannot read {path}: {exc.strerror or exc}") from None
        return read_runs(data, str(path), selector, limits)
    if _looks_like_path(ref):
        held = _held_by_id(ref, store)
        if held is None:
            raise SourceError(f"no such file: {ref}")
        return [held]
    return [_from_store(ref, store)]


def is_remote(ref: str) -> bool:
    """True when ``ref`` is an http(s) URL or names a trace backend (``phoenix://`` …). The
    code that downloads them (urllib, http.client, ssl) is loaded for a reference with a
    scheme only: most name a stored run or a file."""
    if "://" not in ref:
        return False
    from otel_replay.replay.sources import _backends  # noqa: PLC0415

    return _backends.is_remote(ref)


def archive_of(ref: str) -> tuple[Path, str | None] | None:
    """The archive directory ``ref`` names (not a bundle) and its ``#RUN_ID`` selector, or
    None when ``ref`` names something else."""
    if ref[:5].lower() == "file:":
        ref = _local(ref)
    path, selector = _split(ref)
    if path is None or not path.is_dir() or is_bundle(path):
        return None
    _refuse_headless_bundle(path)
    return path, selector


def _refuse_headless_bundle(path: Path) -> None:
    """SourceError for a bundle directory without its manifest, which would otherwise be
    read as a Collector's archive and refused for its body files, not for what it lacks."""
    if lacks_manifest(path):
        raise SourceError(
            f"{path}: a bundle without its {MANIFEST} (steps/ holds its bodies): copy or "
            "export it again"
        )


def read_runs(
    data: bytes, source: str, selector: str | None = None, limits: Limits | None = None
) -> list[SourceRun]:
    """The runs in the OTLP ``data`` read from ``source``; only ``selector``'s when given (a
    run id, or the trace id of one of the run's traces).

    Raises SourceError naming the source when the data is damaged, holds nothing replayable,
    has spans that cannot be grouped into runs, has no run ``selector``, or is past ``limits``
    (default: from the environment).
    """
    limits = limits if limits is not None else Limits.from_env()
    return runs_of(documents(data, source, limits), source, selector)


def runs_of(
    docs: list[Document],
    source: str,
    selector: str | None = None,
    stepless: Literal["refuse", "skip"] = "refuse",
) -> list[SourceRun]:
    """:func:`read_runs` of documents already read. ``stepless="skip"`` leaves out the runs
    with no step (unless ``selector`` names one): an archive holds every run the Collector
    saw, an agent that failed before its first call among them. Raises :class:`UnbuiltRuns`
    when some of several runs cannot be rebuilt."""
    grouped = span_runs(docs, source, selector)
    if selector is None and stepless == "skip":
        grouped = [run for run in grouped if has_steps(run)]
    if not grouped:
        raise SourceError(f"{source} has no replayable steps (no GenAI or replay step spans)")
    if len(grouped) == 1:
        return [build_run(grouped[0], source)]
    built, unbuilt = build_runs(grouped, source)
    if unbuilt:
        # One bad run must not hide the others: listed, they can still be picked by id.
        listed = describe([summary(run) for run in grouped])
        why = unbuilt[0].problem.removeprefix(f"{source}: ")
        raise UnbuiltRuns(
            f"{source} holds {len(grouped)} runs; pick one with {source}#RUN_ID: {listed}; "
            f"{len(unbuilt)} of them cannot be rebuilt: {why}",
            built,
            unbuilt,
        )
    return built


def span_runs(docs: list[Document], source: str, selector: str | None = None) -> list[SpanRun]:
    """The runs of ``docs`` as spans, ``selector``'s only when given; SourceError naming
    ``source`` when the spans cannot be grouped or no run is ``selector``."""
    try:
        grouped = group_runs(span_dicts(docs))
    except GroupingError as exc:
        raise SourceError(f"{source}: {exc}") from None
    if selector is None:
        return grouped
    # A run id, a trace id, else a unique prefix of a run id (as a store's run is named).
    chosen = select(grouped, selector) or [r for r in grouped if r.run_id.startswith(selector)]
    if not chosen:
        raise SourceError(f"{source} has no run {selector!r}; it holds: {_ids(grouped)}")
    return chosen


def _bundled(path: Path, selector: str | None, limits: Limits) -> SourceRun:
    run = read_bundle(path, limits)
    if selector is not None and selector != run.run_id:
        raise SourceError(f"{path} has no run {selector!r}; it holds {run.run_id!r}")
    return SourceRun(run, ())


def _ids(runs: list[SpanRun]) -> str:
    return describe([summary(run) for run in runs])


def _split(ref: str) -> tuple[Path | None, str | None]:
    """The existing file ``ref`` names and its ``#RUN_ID`` selector (None, None: not a file)."""
    whole = Path(os.path.expanduser(ref))
    if _exists(whole):
        return whole, None
    # The selector is a run id, and a run id may hold "#" too: the file is the first prefix
    # before a "#" that exists.
    at = ref.find("#")
    while at >= 0:
        head = Path(os.path.expanduser(ref[:at]))
        if at and _exists(head):
            return head, ref[at + 1 :] or None
        at = ref.find("#", at + 1)
    return None, None


def _exists(path: Path) -> bool:
    """Whether ``path`` exists; False for a name no file can have (too long, a NUL byte),
    which is then taken for a run id."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def _local(url: str) -> str:
    """The path (and ``#RUN_ID``) a ``file:`` URL names; SourceError for another host's."""
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise SourceError(f"{url}: a file URL on another host ({parts.netloc}) is no source")
    from urllib.request import url2pathname  # noqa: PLC0415 - with file: URLs only

    path = url2pathname(parts.path)
    if not path:
        raise SourceError(f"{url}: a file URL that names no file")
    return f"{path}#{parts.fragment}" if parts.fragment else path


def _looks_like_path(ref: str) -> bool:
    base = ref.rpartition("#")[0] or ref
    return os.sep in base or "/" in base or base.lower().endswith(_FILE_SUFFIXES)


def _held_by_id(ref: str, location: str | None) -> SourceRun | None:
    """The stored run whose id is exactly ``ref``, a name no file has that reads like a path
    (an id imported from spans may hold a ``/``); None when there is no such run, or no
    readable store."""
    try:
        return _from_store(ref, location)
    except OtelReplayError:  # no store, no such run, or a store that cannot say: no file
        return None


def _from_store(run_id: str, location: str | None) -> SourceRun:
    from otel_replay.store import Store  # noqa: PLC0415 - see the imports

    where = location if location is not None else settings.read("OTEL_REPLAY_STORE")
    try:
        opened = Store.open(where, create=False)
    except StoreNotFoundError as exc:
        raise StoreNotFoundError(f"{exc}; and {run_id!r} is not a file or URL either") from None
    with opened:
        try:
            info = opened.run(run_id)
        except RunNotFoundError:
            raise RunNotFoundError(
                f"no run {clipped(run_id)!r} in the store at {opened.location}, and no file "
                "by that name"
            ) from None
        return stored_run(opened, info)
