"""Copy runs rebuilt from a source into a store: recorded bytes as steps, spans as spans;
an archive directory incrementally."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from otel_replay import attributes as A
from otel_replay._canonical import sha256_tag
from otel_replay.errors import RunNotFoundError, SourceError
from otel_replay.replay._model import RecordedStep
from otel_replay.replay.sources._archive import ArchiveRead, archive_parts
from otel_replay.replay.sources._build import SourceRun, Unbuilt, build_runs
from otel_replay.replay.sources._group import select
from otel_replay.replay.sources._limits import Limits
from otel_replay.replay.sources._load import span_runs
from otel_replay.replay.sources._runs import (
    SpanRun,
    attrs_of,
    has_steps,
    int_value,
    is_run_span,
    step_index,
)
from otel_replay.step import RunEnd, RunFacts, Step

if TYPE_CHECKING:  # a bundle's replay loads no store
    from otel_replay.store import StepInfo, Store

__all__ = ["ArchiveImport", "ImportReport", "import_archive", "import_runs", "run_error_type"]


Outcome = Literal["imported", "present", "completed"]


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What happened to one run: ``imported``, ``present`` (already in the store), or
    ``completed`` (the store held part of it: the steps and spans it lacked were added).
    ``stored`` counts the steps put with their recorded bytes (the others go in as spans).
    ``missing``: what the run still lacks when its spans hold it only in part (it stays
    ``incomplete`` until an import completes it), else None."""

    run_id: str
    outcome: Outcome
    steps: int
    exact: int
    semantic: int
    stored: int
    missing: str | None = None


def import_runs(store: Store, runs: Iterable[SourceRun]) -> list[ImportReport]:
    """Put ``runs`` into ``store`` and flush; one report per run, in order.

    A run the store holds part of (its steps or its own span that the store lacks, beside
    some it holds) is completed, written into the recording that holds the rest so that it
    stays one run. A bundle's run (no spans) has a span made for each step from its
    manifest, so that every step it holds is imported. Raises SourceError naming the run
    (and the store) when the store already holds a different run with the same id (none of
    its step spans, or for a bundle none of its requests); nothing is imported then.
    """
    planned: list[tuple[SourceRun, list[Step], list[dict[str, Any]], _Held | None]] = []
    reports: list[ImportReport] = []
    for given in runs:
        bundled = not given.spans and not given.in_store
        loaded = _with_spans(given) if bundled else given
        run = loaded.run
        held = _held_bundle(store, loaded) if bundled else _held(store, loaded)
        present = held is not None and held.missing == 0
        stored = [] if present else _stored_steps(loaded, held)
        spans = [] if present else _new_spans(loaded, held)
        if not present:
            planned.append((loaded, stored, spans, held))
        exact = sum(recorded.fidelity == "exact" for recorded in run.steps)
        outcome: Outcome = "present" if present else "imported" if held is None else "completed"
        reports.append(
            ImportReport(
                run_id=run.run_id,
                outcome=outcome,
                steps=len(run.steps),
                exact=exact,
                semantic=len(run.steps) - exact,
                stored=len(stored),
                missing=run.missing if run.status == "incomplete" else None,
            )
        )
    for loaded, steps, spans, held in planned:
        if held is None:
            _put(store, loaded, steps, spans)
            continue
        # Another recording's run: written by a store of that recording, or it would be
        # recorded again under a new name.
        with type(store).open(
            store.location,
            create=False,
            recording=store.recording_of(loaded.run.run_id),
            inherited_runs=[loaded.run.run_id],
        ) as adding:
            _put(adding, loaded, steps, spans)
            adding.flush()
    store.flush()
    return reports


def _put(store: Store, loaded: SourceRun, steps: list[Step], spans: list[dict[str, Any]]) -> None:
    store.put(steps, spans, runs=[_run_facts(loaded)])
    run = loaded.run
    if run.status == "incomplete":
        # Its last spans have not arrived: it stays open until an import completes it.
        store.keep_open(run.run_id)
        return
    ends = [e for e in (span.get("end_ns") for span in loaded.spans) if isinstance(e, int)]
    store.end_run(RunEnd(run.run_id, max(ends, default=0), run.error_type))


def run_error_type(loaded: SourceRun) -> str | None:
    """How the run failed, as the capture wrote it on the run's own span; None when it did
    not fail (a failed step the program got over fails no run)."""
    return loaded.run.error_type


@dataclass(frozen=True, slots=True)
class _Held:
    """What the store holds of a run: its step indexes and the ids of its spans, and how
    many of the loaded run's step spans and own spans it lacks."""

    steps: frozenset[int]
    span_ids: frozenset[str]
    missing: int


def _held(store: Store, loaded: SourceRun) -> _Held | None:
    """What ``store`` holds of ``loaded``'s run (None: nothing); SourceError when it holds
    a different run by that id."""
    run_id = loaded.run.run_id
    try:
        held = store.steps(run_id)
    except RunNotFoundError:
        return None
    if loaded.in_store:
        return _Held(frozenset(s.index for s in held), frozenset(), 0)
    ids = {f"{step.span_id:016x}" for step in held}
    held_spans = store.spans(run_id)
    ids.update(str(span.get("span_id")) for span in held_spans)
    steps = {str(span.get("span_id")) for span in loaded.step_spans.values()}
    own = {str(s.get("span_id")) for s in loaded.spans if is_run_span(s, run_id)}
    # A run row with nothing in it is what an import cut off before its steps leaves.
    if ids and steps and not steps & ids:
        raise SourceError(
            f"the store at {store.location} already holds a different run {run_id!r}; "
            "nothing imported"
        )
    _refuse_other_step_spans(store, loaded, held, held_spans)
    return _Held(frozenset(s.index for s in held), frozenset(ids), len((steps | own) - ids))


def _refuse_other_step_spans(
    store: Store,
    loaded: SourceRun,
    held: Iterable[StepInfo],
    held_spans: Iterable[Mapping[str, Any]],
) -> None:
    """SourceError when a step the store holds of the run (``held``, ``held_spans``) comes
    from another span than the one ``loaded`` gives for it: both would claim the step, and
    the run could no longer be read (two sources that share a run id and some span ids, one
    of them forged)."""
    claimed = {step.index: f"{step.span_id:016x}" for step in held}
    for stored in held_spans:
        try:
            index = step_index(stored)
        except ValueError:  # the store's reader names it
            continue
        if index is not None:
            claimed.setdefault(index, str(stored.get("span_id")))
    for index, span in sorted(loaded.step_spans.items()):
        theirs, ours = claimed.get(index), str(span.get("span_id"))
        if theirs is not None and theirs != ours:
            raise SourceError(
                f"the store at {store.location} holds step {index} of run "
                f"{loaded.run.run_id!r} from span {theirs}, not {ours}: another recording "
                "by that id; nothing imported"
            )


def _with_spans(loaded: SourceRun) -> SourceRun:
    """A bundle's run with a span for each step, made from what its manifest kept of the
    step's own span (its attributes, times, outcome): a bundle holds no spans, and the store
    keeps a step's facts (tokens, a tool's effect, a value's name) and a step without its
    bytes (semantic) in its span. Ids are made from the run id and the step's index."""
    run = loaded.run
    trace = _hex(run.run_id, 32)
    made = {
        recorded.step.index: _step_span(run.run_id, trace, recorded, run.resource)
        for recorded in run.steps
    }
    return replace(loaded, spans=tuple(made.values()), step_spans=made)


def _hex(text: str, digits: int) -> str:
    return sha256_tag(text.encode()).removeprefix("sha256:")[:digits]


def _step_span(
    run_id: str, trace: str, recorded: RecordedStep, resource: Mapping[str, Any]
) -> dict[str, Any]:
    step = recorded.step
    attributes = dict(recorded.attributes)
    attributes.update(
        {A.REPLAY_RUN_ID: run_id, A.REPLAY_STEP_INDEX: step.index, A.REPLAY_STEP_KIND: step.kind}
    )
    if step.kind == "llm":
        operation = str(attributes.get("gen_ai.operation.name") or "chat")
        name = f"{operation} {step.model}" if step.model else operation
    elif step.kind == "http":
        name = step.method
    else:
        name = recorded.endpoint
    parent = None if step.within is None else _hex(f"{run_id}\0{step.within}", 16)
    return {
        "name": name,
        "kind": "CLIENT" if step.kind in ("llm", "http") else "INTERNAL",
        "trace_id": trace,
        "span_id": _hex(f"{run_id}\0{step.index}", 16),
        "parent_span_id": parent,
        "start_ns": step.start_ns,
        "end_ns": step.end_ns,
        "status": {"code": "ERROR" if step.error_type else "UNSET", "message": ""},
        "attributes": attributes,
        "events": [],
        "links": [],
        "resource": dict(resource),
    }


def _held_bundle(store: Store, loaded: SourceRun) -> _Held | None:
    """:func:`_held` for a bundle's run, whose spans were made on reading it: the run is the
    store's when every step both hold has the same request and response (the store's spans
    have other ids: it may be the store the bundle was exported from). Two runs of one agent
    share some requests, so one step alike does not make them the same run."""
    run_id = loaded.run.run_id
    try:
        held = {step.index: step for step in store.steps(run_id)}
    except RunNotFoundError:
        return None
    indexes = set(held)
    indexes.update(
        index
        for index in (
            int_value(attrs_of(span).get(A.REPLAY_STEP_INDEX)) for span in store.spans(run_id)
        )
        if index is not None
    )
    steps = {recorded.step.index: recorded.step for recorded in loaded.run.steps}
    both = held.keys() & steps.keys()
    if any(
        held[i].request_hash != steps[i].request_hash
        or not _same_response(held[i].response_hash, steps[i])
        for i in both
    ):
        raise SourceError(
            f"the store at {store.location} already holds a different run {run_id!r}; "
            "nothing imported"
        )
    ids = frozenset(str(loaded.step_spans[i].get("span_id")) for i in indexes & steps.keys())
    return _Held(frozenset(indexes), ids, len(steps.keys() - indexes))


def _same_response(held: str | None, step: Step) -> bool:
    """Whether a held step's response hash is a bundled step's response. A step that got no
    answer (cut off by SIGTERM before it) has no hash in the store, and an empty response
    file in its bundle."""
    if held is None:
        return step.status_code is None and not step.response_body
    return held == _response_hash(step)


def _response_hash(step: Step) -> str | None:
    """The hash of a bundled step's response (a bundle holds the body, not its hash)."""
    if step.response_hash is not None or step.response_body is None:
        return step.response_hash
    return sha256_tag(step.response_body)


def _new_spans(loaded: SourceRun, held: _Held | None) -> list[dict[str, Any]]:
    """The spans of ``loaded`` to put: those the store does not hold yet."""
    run_id = loaded.run.run_id
    kinds = {step.step.index: step.step.kind for step in loaded.run.steps}
    # By the span itself, not its ids: two spans may share ids (a forged file, a seeded
    # run's SDK ids), and only the step's own span is marked as one.
    steps = {id(span): kinds[index] for index, span in loaded.step_spans.items()}
    return [
        _owned(span, run_id, steps.get(id(span)))
        for span in loaded.spans
        if held is None or str(span.get("span_id")) not in held.span_ids
    ]


def _owned(span: Mapping[str, Any], run_id: str, kind: str | None) -> dict[str, Any]:
    """A copy of ``span`` that names its run (spans of other instrumentations do not, and a
    ``replay.run.id`` that is not a run id, empty or not a string, is replaced) and, when it
    is the span of a step of ``kind``, says so (``replay.step.kind``: the store counts the
    steps it holds no bytes of by their spans; another instrumentation's spans do not say)."""
    attributes = dict(span.get("attributes") or {})
    attributes[A.REPLAY_RUN_ID] = run_id
    if kind is not None:
        attributes.setdefault(A.REPLAY_STEP_KIND, kind)
    return {**span, "attributes": attributes}


def _stored_steps(loaded: SourceRun, held: _Held | None = None) -> list[Step]:
    facts = _run_facts(loaded)
    out = []
    for recorded in loaded.run.steps:
        span = loaded.step_spans.get(recorded.step.index)
        if held is not None and recorded.step.index in held.steps:
            continue
        if span is not None and _recorded(recorded):
            out.append(_stored(facts, recorded, span))
    return out


def _run_facts(loaded: SourceRun) -> RunFacts:
    """The facts of ``loaded``'s run, from its spans' run kit (start: its first span's, or
    the run's own start when earlier)."""
    run = loaded.run
    starts = [s for s in (span.get("start_ns") for span in loaded.spans) if isinstance(s, int)]
    if run.start_ns:  # a bundle's run began before its first step
        starts.append(run.start_ns)
    modes = (attrs_of(span).get(A.REPLAY_MODE) for span in loaded.spans)
    mode = next((m for m in modes if isinstance(m, str) and m), "record")
    # A replay's or a fork's spans name the run it re-executed: `runs` lists it under it.
    parents = (attrs_of(span).get(A.REPLAY_PARENT_RUN_ID) for span in loaded.spans)
    parent = next((p for p in parents if isinstance(p, str) and p), None)
    return RunFacts(
        run_id=run.run_id,
        mode=mode,
        seed=run.seed,
        commit=run.commit,
        code_dirty=run.code_dirty,
        start_ns=min(starts, default=0),
        parent_run_id=None if mode == "record" else parent,
    )


def _recorded(recorded: RecordedStep) -> bool:
    """True when the step's request and response are both the recorded bytes."""
    step = recorded.step
    return (
        recorded.fidelity == "exact"
        and recorded.request_known
        and bool(step.request_hash)
        and (step.status_code is not None or step.error_type is not None)
    )


def _stored(facts: RunFacts, recorded: RecordedStep, span: Mapping[str, Any]) -> Step:
    """The step the store keeps for ``recorded``, with the facts its span gives."""
    step = recorded.step
    start = span.get("start_ns")
    end = span.get("end_ns")
    attrs = attrs_of(span)
    llm = step.kind == "llm"
    return Step(
        run_id=facts.run_id,
        index=step.index,
        trace_id=int(str(span.get("trace_id")), 16),
        span_id=int(str(span.get("span_id")), 16),
        kind=step.kind,
        method=step.method,
        url=step.url,
        request_headers=[],
        request_body=step.request_body,
        request_hash=step.request_hash,
        status_code=step.status_code,
        response_headers=list(step.response_headers),
        response_body=step.response_body,
        response_hash=sha256_tag(step.response_body) if step.status_code is not None else None,
        chunks=list(step.chunks),
        complete=step.complete,
        error_type=step.error_type,
        start_ns=start if isinstance(start, int) else 0,
        end_ns=end if isinstance(end, int) else 0,
        provider=step.provider if llm else None,
        model=step.model if llm else None,
        tokens_in=int_value(attrs.get("gen_ai.usage.input_tokens")) if llm else None,
        tokens_out=int_value(attrs.get("gen_ai.usage.output_tokens")) if llm else None,
        run=facts,
        within=step.within,
    )


@dataclass(frozen=True, slots=True)
class ArchiveImport:
    """What importing an archive directory did: files read and skipped (imported before,
    unchanged), the notes on half-written ends and stray files left out, one report per run
    read, and the runs that could not be rebuilt (not imported, the others imported all the
    same)."""

    read: int
    skipped: int
    notes: list[str]
    runs: list[ImportReport]
    unbuilt: list[Unbuilt]


def import_archive(
    store: Store, root: Path, selector: str | None = None, limits: Limits | None = None
) -> ArchiveImport:
    """Import the runs of the archive directory ``root`` that ``store`` lacks, reading only
    the files it has not imported whole before (by size, time and first bytes: a renamed
    file is known); ``selector`` picks one run (then every file is read, and none is
    remembered as read).

    The files are read in parts within ``limits`` (default: from the environment), in the
    order written, each part imported and its files remembered before the next is read:
    cut off anywhere, the next import reads the rest. A run spread over several parts (or
    over files imported before) is rebuilt from the spans the store holds and those read,
    and completed. A run that cannot be rebuilt is set aside (:attr:`ArchiveImport.unbuilt`),
    its files remembered all the same. Raises SourceError (an unreadable or corrupt file, a
    different run by a held id, no run ``selector``, the run ``selector`` cannot be rebuilt).
    """
    limits = limits if limits is not None else Limits.from_env()
    known = {(f.size, f.mtime_ns, f.head) for f in store.imported_files()} if not selector else ()
    done = ArchiveImport(0, 0, [], [], [])
    source = str(root)
    for part in archive_parts(root, limits, lambda f: (f.size, f.mtime_ns, f.head) in known):
        grouped = span_runs(part.documents, source)
        if selector is not None:
            grouped = select(grouped, selector)
        whole = [_with_held(store, run) for run in grouped]
        # A run with no step (an agent that failed before its first call) has nothing to
        # replay, and must not stop every later import.
        runs = [run for run in whole if selector is not None or has_steps(run)]
        built, unbuilt = build_runs(runs, source)
        if selector is not None and unbuilt:
            raise SourceError(unbuilt[0].problem)
        reports = import_runs(store, built) if built else []
        if selector is None:
            store.note_imported(part.read + part.stray)
        done = _merged(done, part, reports, unbuilt)
    if selector is not None and not done.runs:
        raise SourceError(f"{source} has no run {selector!r}")
    return done


def _merged(
    done: ArchiveImport, part: ArchiveRead, reports: list[ImportReport], unbuilt: list[Unbuilt]
) -> ArchiveImport:
    """``done`` and one more part: a run imported by an earlier part and completed by this
    one was imported (its stored steps added up), one that was there before and completed
    now was completed; a run that cannot be rebuilt is said once, as this part left it."""
    runs = {report.run_id: report for report in done.runs}
    for report in reports:
        earlier = runs.get(report.run_id)
        if earlier is not None and earlier.outcome != "present":
            stored = earlier.stored + report.stored
            runs[report.run_id] = replace(report, outcome=earlier.outcome, stored=stored)
        else:
            runs[report.run_id] = report
    later = {u.run_id for u in unbuilt} | {r.run_id for r in reports}
    return ArchiveImport(
        done.read + len(part.read),
        done.skipped + len(part.skipped),
        done.notes + part.notes,
        list(runs.values()),
        [u for u in done.unbuilt if u.run_id not in later] + unbuilt,
    )


def _with_held(store: Store, run: SpanRun) -> SpanRun:
    """``run`` with the spans the store holds of it before its own (its earlier files')."""
    try:
        held = store.spans(run.run_id)
    except RunNotFoundError:
        return run
    ids = {(span.get("trace_id"), span.get("span_id")) for span in held}
    fresh = [s for s in run.spans if (s.get("trace_id"), s.get("span_id")) not in ids]
    return SpanRun(run.run_id, (*held, *fresh))
