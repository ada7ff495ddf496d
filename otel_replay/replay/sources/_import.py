"""Copy runs rebuilt from a source into a store: recorded bytes as steps, spans as spans.

Only bytes that were recorded become a :class:`~otel_replay.step.Step` (a step with both its
exact request and response bodies), with the facts its span and its run's spans give; a
synthesised response is never stored as if it had been recorded: a semantic step goes in as its
span alone and is synthesised again whenever it is loaded.

A run is imported ended, as it ended: failed (``error (TYPE)`` in ``runs``) when its own span
says the application failed, with that span's ``error.type``.

Importing is idempotent: a run whose steps the store already holds (same span ids) is left
as it is and reported ``present``. A different run under the same id is refused, and then
nothing at all is imported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from otel_replay import attributes as A
from otel_replay._canonical import sha256_tag
from otel_replay.errors import RunNotFoundError, SourceError
from otel_replay.replay._model import RecordedStep
from otel_replay.replay.sources._build import SourceRun
from otel_replay.replay.sources._runs import attrs_of, int_value
from otel_replay.step import RunEnd, RunFacts, Step
from otel_replay.store import Store

__all__ = ["ImportReport", "import_runs"]


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What happened to one run: ``imported``, or ``present`` (already in the store)."""

    run_id: str
    outcome: Literal["imported", "present"]
    steps: int
    exact: int
    semantic: int
    fixtures: int


def import_runs(store: Store, runs: Iterable[SourceRun]) -> list[ImportReport]:
    """Put ``runs`` into ``store`` and flush; one report per run, in order.

    Raises SourceError naming the run (and the store) when the store already holds a
    different run with the same id; nothing is imported then.
    """
    planned: list[tuple[SourceRun, list[Step], list[dict[str, Any]]]] = []
    reports: list[ImportReport] = []
    for loaded in runs:
        run = loaded.run
        present = _already_there(store, loaded)
        fixtures = [] if present else _fixtures(loaded)
        spans = [] if present else [_owned(span, run.run_id) for span in loaded.spans]
        if not present:
            planned.append((loaded, fixtures, spans))
        exact = sum(step.fidelity == "exact" for step in run.steps)
        reports.append(
            ImportReport(
                run_id=run.run_id,
                outcome="present" if present else "imported",
                steps=len(run.steps),
                exact=exact,
                semantic=len(run.steps) - exact,
                fixtures=len(fixtures),
            )
        )
    for loaded, fixtures, spans in planned:
        store.put(fixtures, spans, runs=[_run_facts(loaded)])
        # An imported run is whole: it is closed, ended where its last span ended, failed
        # as its own span says.
        ends = [e for e in (span.get("end_ns") for span in loaded.spans) if isinstance(e, int)]
        store.end_run(RunEnd(loaded.run.run_id, max(ends, default=0), _error_type(loaded)))
    store.flush()
    return reports


def _error_type(loaded: SourceRun) -> str | None:
    """How the run failed, as the capture wrote it on the run's own span (``runs._failed``):
    the ``error.type`` of the ``invoke_agent`` span of the run that ended last (a ``run()``
    block's, or the process run's last root span), when its status is ERROR; None when the
    run did not fail (a failed step the program got over fails no run)."""
    run_id = loaded.run.run_id
    own = [span for span in loaded.spans if _is_run_span(span, run_id)]
    if not own:
        return None
    last = max(own, key=lambda span: _int_or_zero(span.get("end_ns")))
    status = last.get("status")
    if not isinstance(status, Mapping) or status.get("code") != "ERROR":
        return None
    error_type = attrs_of(last).get("error.type")
    if isinstance(error_type, str) and error_type:
        return error_type
    message = status.get("message")
    return message if isinstance(message, str) and message else "error"


def _is_run_span(span: Mapping[str, Any], run_id: str) -> bool:
    """A span the capture opens for a run itself (not for one of its steps)."""
    attrs = attrs_of(span)
    return (
        attrs.get("gen_ai.operation.name") == "invoke_agent"
        and attrs.get(A.REPLAY_RUN_ID) == run_id
        and A.REPLAY_STEP_INDEX not in attrs
    )


def _int_or_zero(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _already_there(store: Store, loaded: SourceRun) -> bool:
    run_id = loaded.run.run_id
    try:
        held = store.steps(run_id)
    except RunNotFoundError:
        return False
    if loaded.in_store:
        return True
    ids = {f"{step.span_id:016x}" for step in held}
    ids.update(str(span.get("span_id")) for span in store.spans(run_id))
    wanted = {str(span.get("span_id")) for span in loaded.step_spans.values()}
    if wanted <= ids:
        return True
    raise SourceError(
        f"the store at {store.location} already holds a different run {run_id!r}; nothing imported"
    )


def _owned(span: Mapping[str, Any], run_id: str) -> dict[str, Any]:
    """A copy of ``span`` that names its run: spans of other instrumentations do not, and
    a ``replay.run.id`` that is not a run id (empty, not a string) is replaced."""
    attributes = dict(span.get("attributes") or {})
    attributes[A.REPLAY_RUN_ID] = run_id
    return {**span, "attributes": attributes}


def _fixtures(loaded: SourceRun) -> list[Step]:
    facts = _run_facts(loaded)
    out = []
    for step in loaded.run.steps:
        span = loaded.step_spans.get(step.index)
        if span is not None and _recorded(step):
            out.append(_fixture(facts, step, span))
    return out


def _run_facts(loaded: SourceRun) -> RunFacts:
    """The facts of ``loaded``'s run, from its spans' run kit (start: its first span's)."""
    run = loaded.run
    starts = [s for s in (span.get("start_ns") for span in loaded.spans) if isinstance(s, int)]
    modes = (attrs_of(span).get(A.REPLAY_MODE) for span in loaded.spans)
    return RunFacts(
        run_id=run.run_id,
        mode=next((m for m in modes if isinstance(m, str) and m), "record"),
        seed=run.seed,
        commit=run.commit,
        code_dirty=run.code_dirty,
        start_ns=min(starts, default=0),
    )


def _recorded(step: RecordedStep) -> bool:
    """True when the step's request and response are both the recorded bytes."""
    return (
        step.fidelity == "exact"
        and step.request_body is not None
        and step.request_hash is not None
        and (step.status_code is not None or step.error_type is not None)
    )


def _fixture(facts: RunFacts, step: RecordedStep, span: Mapping[str, Any]) -> Step:
    assert step.request_body is not None and step.request_hash is not None
    start = span.get("start_ns")
    end = span.get("end_ns")
    attrs = attrs_of(span)
    llm = step.kind == "llm"
    return Step(
        run_id=facts.run_id,
        step_index=step.index,
        trace_id=int(str(span.get("trace_id")), 16),
        span_id=int(str(span.get("span_id")), 16),
        kind=step.kind,
        method=step.method,
        url=step.url or "",
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
    )
