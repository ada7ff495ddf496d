"""One run's verdict: its failure labels (its steps', then its own, chosen among them) and its
cold cases, whether it was read from the store or from a trace source."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from otel_replay import attributes as A
from otel_replay.replay import Run
from otel_replay.replay.sources import SourceRun, Unbuilt, run_error_type
from otel_replay.store import FailureLabel, RunInfo
from otel_replay.triage._cold import ColdCase, cold_cases
from otel_replay.triage._rules import (
    DRIFT,
    MISMATCH,
    drift_error,
    mismatch_labels,
    refused_by_replay,
    step_labels,
)
from otel_replay.triage._severity import (
    CATEGORIES,
    CRITICAL,
    ERROR,
    SEVERITY,
    failed,
    severity_rank,
)

__all__ = ["Subject", "Verdict", "judge"]

Span = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Subject:
    """A run to triage, wherever it was read: its rebuilt steps (``loaded``; None when it
    cannot be rebuilt, ``problem`` says why), its spans, how it ended (``status``: ``ok``,
    ``error``, ``incomplete``; ``error_type``: the run's own error), its mode and the run it
    re-executed, and ``held``: whether the store holds a run of its id (None when it was
    read from the store)."""

    run_id: str
    source: str
    loaded: Run | None
    spans: tuple[Span, ...]
    status: str
    error_type: str | None
    start_ns: int
    mode: str
    parent_run_id: str | None
    commit: str | None
    held: bool | None
    problem: str | None = None

    @classmethod
    def stored(
        cls,
        info: RunInfo,
        loaded: SourceRun | None,
        source: str,
        unbuilt: Unbuilt | None = None,
    ) -> Subject:
        """Run ``info`` of the store, rebuilt (``loaded``: None when it has no step, or
        cannot be rebuilt: ``unbuilt`` says why)."""
        spans = loaded.spans if loaded is not None else unbuilt.spans if unbuilt else ()
        return cls(
            run_id=info.run_id,
            source=source,
            loaded=None if loaded is None else loaded.run,
            spans=spans,
            status=info.status,
            error_type=info.error_type,
            start_ns=info.start_ns,
            mode=info.mode or "record",
            parent_run_id=info.parent_run_id,
            commit=info.commit or (None if loaded is None else loaded.run.commit),
            held=None,
            problem=None if unbuilt is None else unbuilt.problem,
        )

    @classmethod
    def read(cls, loaded: SourceRun, held: bool) -> Subject:
        """A run rebuilt from a trace source."""
        error_type = run_error_type(loaded)
        return cls(
            run_id=loaded.run.run_id,
            source=loaded.run.source,
            loaded=loaded.run,
            spans=loaded.spans,
            status="error" if error_type else "ok",
            error_type=error_type,
            start_ns=loaded.run.start_ns or 0,
            mode=_kit(loaded.spans, A.REPLAY_MODE) or "record",
            parent_run_id=_kit(loaded.spans, A.REPLAY_PARENT_RUN_ID),
            commit=loaded.run.commit,
            held=held,
        )

    @classmethod
    def unbuilt(cls, unbuilt: Unbuilt, source: str, held: bool) -> Subject:
        """A run of a trace source that cannot be rebuilt."""
        starts = [s.get("start_ns") for s in unbuilt.spans]
        return cls(
            run_id=unbuilt.run_id,
            source=source,
            loaded=None,
            spans=unbuilt.spans,
            status="unbuilt",
            error_type=None,
            start_ns=min((t for t in starts if isinstance(t, int)), default=0),
            mode=_kit(unbuilt.spans, A.REPLAY_MODE) or "record",
            parent_run_id=_kit(unbuilt.spans, A.REPLAY_PARENT_RUN_ID),
            commit=_kit(unbuilt.spans, "vcs.ref.head.revision"),
            held=held,
            problem=unbuilt.problem,
        )

    def fork_step(self) -> int | None:
        """A fork's first changed step (``replay.fork.step``), None for any other run."""
        for span in self.spans:
            value = _attrs(span).get(A.REPLAY_FORK_STEP)
            if isinstance(value, str) and value.isdecimal():
                value = int(value)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return None


def _attrs(span: Span) -> Mapping[str, Any]:
    attrs = span.get("attributes")
    return attrs if isinstance(attrs, Mapping) else {}


def _kit(spans: Sequence[Span], key: str) -> str | None:
    """The first string value of attribute ``key`` among ``spans``."""
    for span in spans:
        value = _attrs(span).get(key)
        if isinstance(value, str) and value:
            return value
    return None


@dataclass(frozen=True, slots=True)
class Verdict:
    """What triage found in one run: its labels (its own, ``step`` None, first; then its
    steps'), its cold cases, and the facts a summary shows. ``stored``: the run is the
    store's (its labels are kept there)."""

    run_id: str
    source: str
    stored: bool
    status: str
    error_type: str | None
    start_ns: int
    mode: str
    labels: tuple[FailureLabel, ...]
    cold: tuple[ColdCase, ...]

    @property
    def label(self) -> FailureLabel | None:
        """The run's own label, None when triage found nothing to label it with."""
        return self.labels[0] if self.labels and self.labels[0].step is None else None

    @property
    def failed(self) -> bool:
        """See :func:`~otel_replay.triage.failed`."""
        return failed(self.status, self.label)


def judge(subject: Subject, parent: Run | None) -> Verdict:
    """The verdict on ``subject``; ``parent`` is the run it replays or forks, when known."""
    run = subject.loaded
    found = step_labels(run) if run is not None else []
    if run is not None and subject.mode in ("replay", "fork"):
        fork_step = subject.fork_step() if subject.mode == "fork" else None
        found += mismatch_labels(run, parent, fork_step)
    # In step order, what concerns no one step (a step the replay never made) last.
    found.sort(key=lambda x: (x.step is None, x.step or 0))
    own = _run_label(subject, found)
    steps = [x for x in found if x.step is not None]
    cold = cold_cases(
        run=run,
        spans=subject.spans,
        commit=subject.commit,
        held=subject.held,
        problem=subject.problem,
    )
    return Verdict(
        run_id=subject.run_id,
        source=subject.source,
        stored=subject.held is None,
        status=subject.status,
        error_type=subject.error_type,
        start_ns=subject.start_ns,
        mode=subject.mode,
        labels=tuple([own, *steps] if own is not None else steps),
        cold=tuple(cold),
    )


def _stamped(spans: Sequence[Span]) -> str | None:
    """The category the capture stamped on the run's own span (``runs._failed``)."""
    for span in spans:
        attrs = _attrs(span)
        category = attrs.get(A.REPLAY_FAILURE_CATEGORY)
        if A.REPLAY_STEP_INDEX not in attrs and category in CATEGORIES:
            return str(category)
    return None


def _run_label(subject: Subject, found: Sequence[FailureLabel]) -> FailureLabel | None:
    """The run's own label: for a run that failed, what ended it (``critical``): the category
    its span was stamped with, else environment drift when its error is a provider's or the
    network's, else a replay's refusal, else the first ``error`` found in it (a warning alone
    does not explain a failure: the run stays unlabelled); for any other run, the most severe
    label found (the first among equals), with its severity."""
    if subject.status != "error":
        if not found:
            return None
        top = max(severity_rank(x.severity) for x in found)
        return _own(next(x for x in found if severity_rank(x.severity) == top), None)
    error_type = subject.error_type or "an error"
    category = _stamped(subject.spans)
    if category is None and drift_error(subject.error_type):
        # A fork that injected a fault and failed with a provider's or the network's error
        # failed of its experiment (the agent did not get over the fault), not of the world:
        # drift only where a step of its own found it (the live world past a live point).
        if not _injected(subject.loaded) or any(x.category == DRIFT for x in found):
            category = DRIFT
    elif category is None and refused_by_replay(subject.error_type):
        category = MISMATCH
    if category is not None:
        last = [x for x in found if x.category == category]
        if last:
            return _own(last[-1], CRITICAL)
        return FailureLabel(None, category, CRITICAL, "run_error", f"the run failed: {error_type}")
    errors = [x for x in found if severity_rank(x.severity) >= severity_rank(ERROR)]
    return _own(errors[0], CRITICAL) if errors else None


def _injected(run: Run | None) -> bool:
    """Whether a fork served a fault in place of a step of ``run`` (``--inject``)."""
    if run is None:
        return False
    for recorded in run.steps:
        change = recorded.attributes.get(A.REPLAY_FORK_CHANGE)
        if isinstance(change, str) and change.startswith("inject "):
            return True
    return False


def _own(label: FailureLabel, severity: str | None) -> FailureLabel:
    """``label`` (a step's) made the run's own, ``severity`` (default: the category's)."""
    where = f"step {label.step}: " if label.step is not None else ""
    return FailureLabel(
        None,
        label.category,
        severity or SEVERITY[label.category],
        label.rule,
        where + label.reason,
    )
