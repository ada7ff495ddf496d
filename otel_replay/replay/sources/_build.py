"""A run's spans (and the store's steps, when it comes from the store) into a Run."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from otel_replay import attributes as A
from otel_replay.errors import SourceError
from otel_replay.replay._model import RecordedStep, Run
from otel_replay.replay.sources._runs import (
    Span,
    SpanRun,
    attrs_of,
    inference_steps,
    is_inference,
    outcome,
    step_spans,
)
from otel_replay.replay.sources._steps import StepProblem, build_step
from otel_replay.step import Step

if TYPE_CHECKING:  # a bundle or a file is replayed without loading the store
    from otel_replay.store import RunInfo, Store

__all__ = [
    "SourceRun",
    "Unbuilt",
    "UnbuiltRun",
    "UnbuiltRuns",
    "build_run",
    "build_runs",
    "stored_run",
]


@dataclass(frozen=True, slots=True)
class SourceRun:
    """A run rebuilt from a source, with what it was rebuilt from.

    ``spans`` are every span of the run (store span dicts); ``step_spans`` the one each step
    came from, by step index (a step rebuilt from the store's step alone has none), an attempt
    beneath another instrumentation's call span carrying the call's GenAI attributes (its
    model, and for the attempt that succeeded its tokens) as a model-call span of ours would.
    ``in_store`` is True when the source was the store itself.
    """

    run: Run
    spans: tuple[Span, ...]
    step_spans: Mapping[int, Span] = field(default_factory=dict)
    in_store: bool = False


@dataclass(frozen=True, slots=True)
class Unbuilt:
    """A run of a source that cannot be rebuilt, and why: the one line of its SourceError,
    naming the source, the run and the step; and the run's spans."""

    run_id: str
    problem: str
    spans: tuple[Span, ...] = ()


class UnbuiltRun(SourceError):
    """A step of a source's run cannot be rebuilt (its bytes were not recorded and its span
    does not say enough to synthesise them): ``unbuilt`` says which run, why, and holds its
    spans."""

    def __init__(self, unbuilt: Unbuilt) -> None:
        super().__init__(unbuilt.problem)
        self.unbuilt = unbuilt


class UnbuiltRuns(SourceError):
    """A source holds several runs and some cannot be rebuilt. The message lists every run
    (as a source of several does when none is picked); ``runs`` are those rebuilt, so that
    one bad run stops neither ``import`` nor the others, ``unbuilt`` the others."""

    def __init__(self, message: str, runs: list[SourceRun], unbuilt: list[Unbuilt]) -> None:
        super().__init__(message)
        self.runs = runs
        self.unbuilt = unbuilt


def build_runs(runs: Iterable[SpanRun], source: str) -> tuple[list[SourceRun], list[Unbuilt]]:
    """:func:`build_run` of each of ``runs``; one that cannot be rebuilt is set aside, with
    why, rather than stopping the others."""
    built: list[SourceRun] = []
    unbuilt: list[Unbuilt] = []
    for run in runs:
        try:
            built.append(build_run(run, source))
        except UnbuiltRun as exc:
            unbuilt.append(exc.unbuilt)
        except SourceError as exc:
            unbuilt.append(Unbuilt(run.run_id, str(exc), run.spans))
    return built, unbuilt


def build_run(
    spans: SpanRun,
    source: str,
    stored: Mapping[int, Step] | None = None,
    *,
    in_store: bool = False,
    empty: bool = False,
) -> SourceRun:
    """The Run of ``spans`` (plus ``stored``, the store's steps by index), read from
    ``source`` (named in errors).

    Raises UnbuiltRun (a SourceError) naming the source, the run and the step when a step
    cannot be rebuilt, SourceError when (unless ``empty``) the run has no replayable step.
    """
    stored = stored or {}
    where = f"{source}: run {spans.run_id!r}"
    try:
        by_index = step_spans(spans)
    except ValueError as exc:
        raise SourceError(f"{where}: {exc}") from None
    foreign = by_index is None and not stored
    if by_index is None:
        by_index = inference_steps(spans) if foreign else {}
    calls = {s.get("span_id"): s for s in spans.spans if is_inference(s)}
    by_index = {index: _beneath_call(span, calls) for index, span in by_index.items()}
    steps: list[RecordedStep] = []
    for index in sorted(set(by_index) | set(stored)):
        span = by_index.get(index)
        try:
            steps.append(build_step(spans.run_id, index, span, stored.get(index)))
        except StepProblem as exc:
            name = f" ({span.get('name')})" if span is not None else ""
            problem = f"{where}: step {index}{name}: {exc}"
            raise UnbuiltRun(Unbuilt(spans.run_id, problem, spans.spans)) from None
        except SourceError as exc:
            problem = f"{where}: step {index}: {exc}"
            raise UnbuiltRun(Unbuilt(spans.run_id, problem, spans.spans)) from None
    if not steps and not empty:
        raise SourceError(
            f"{where} has no replayable steps (no model, HTTP, tool or value step spans)"
        )
    kit = _kit(spans.spans)
    ended = outcome(spans, None if foreign else by_index)
    run = Run(
        run_id=spans.run_id,
        source=source,
        steps=tuple(steps),
        commit=kit.get("vcs.ref.head.revision"),
        seed=kit.get(A.REPLAY_SEED),
        code_dirty=kit.get(A.REPLAY_CODE_DIRTY),
        resource=_resource(spans.spans, by_index),
        start_ns=_start(spans.spans, stored),
        status=ended.status,
        error_type=ended.error_type,
        missing=ended.missing,
    )
    return SourceRun(run, spans.spans, by_index, in_store)


def stored_run(
    store: Store, info: RunInfo, *, empty: bool = False, spans: bool = True
) -> SourceRun:
    """Run ``info`` of the open ``store``, rebuilt from its steps and spans; SourceError when
    it has no step, unless ``empty`` (to show a run that failed before its first call).
    ``spans`` False leaves its spans out: its stored steps as they are, for a run whose
    spans cannot be rebuilt (SourceError says why)."""
    run_id = info.run_id
    stored = {s.index: s for s in store.read_steps(run_id)}
    read = SpanRun(run_id, tuple(store.spans(run_id)) if spans else ())
    built = build_run(read, f"store {store.location}", stored, in_store=True, empty=empty)
    run = built.run
    # The index keeps the kit even when the spans carrying it were not stored.
    run = replace(
        run,
        commit=run.commit or info.commit,
        seed=run.seed if run.seed is not None else info.seed,
        code_dirty=run.code_dirty if run.code_dirty is not None else info.code_dirty,
        start_ns=info.start_ns or run.start_ns,
        # As the store says: its recorder's end, or an import's reading of the spans.
        status=info.status,
        error_type=info.error_type,
        missing=run.missing if info.status == "incomplete" else None,
    )
    return SourceRun(run, built.spans, built.step_spans, in_store=True)


def _beneath_call(span: Span, calls: Mapping[Any, Span]) -> Span:
    """An attempt span beneath another instrumentation's call span (``capture._calls``), with
    the call's GenAI attributes added as a model-call span of ours carries them."""
    call = calls.get(span.get("parent_span_id"))
    if call is None or is_inference(span):
        return span
    # Loaded here: ``show`` rebuilds a run of ours without the capture stage and its SDK.
    from otel_replay.capture import attempt_attributes  # noqa: PLC0415

    return {**span, "attributes": attempt_attributes(attrs_of(span), attrs_of(call))}


def _kit(spans: tuple[Span, ...]) -> dict[str, Any]:
    """The run kit, from the ``invoke_agent`` span first, else from any span carrying it."""
    ordered = sorted(
        spans, key=lambda s: attrs_of(s).get("gen_ai.operation.name") != "invoke_agent"
    )
    kit: dict[str, Any] = {}
    for key, wanted in (
        ("vcs.ref.head.revision", str),
        (A.REPLAY_SEED, int),
        (A.REPLAY_CODE_DIRTY, bool),
    ):
        for span in ordered:
            value = attrs_of(span).get(key)
            if wanted is int and isinstance(value, str) and value.lstrip("-").isdigit():
                value = int(value)
            if isinstance(value, wanted) and not (wanted is int and isinstance(value, bool)):
                kit[key] = value
                break
    return kit


def _start(spans: tuple[Span, ...], stored: Mapping[int, Step]) -> int | None:
    """The earliest start among the run's spans and stored steps."""
    starts = [s.get("start_ns") for s in spans] + [step.start_ns for step in stored.values()]
    known = [t for t in starts if isinstance(t, int) and t > 0]
    return min(known, default=None)


def _resource(spans: tuple[Span, ...], steps: Mapping[int, Span]) -> dict[str, Any]:
    for span in (*steps.values(), *spans):
        resource = span.get("resource")
        if isinstance(resource, Mapping) and resource:
            return dict(resource)
    return {}
