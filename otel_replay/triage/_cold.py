"""Cold cases: runs that cannot be replayed exactly, why, and the capture settings that would
have kept what is missing. docs/triage.md states the checks for users; keep the two alike."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from otel_replay import attributes as A
from otel_replay.codecs import INFERENCE_OPERATIONS
from otel_replay.replay import Run

__all__ = ["KINDS", "ColdCase", "cold_cases"]

FOREIGN, NO_BYTES, NO_CONTENT, SAMPLED_OUT, NO_COMMIT = (
    "foreign",
    "no_bytes",
    "no_content",
    "sampled_out",
    "no_commit",
)
KINDS = (FOREIGN, NO_BYTES, NO_CONTENT, SAMPLED_OUT, NO_COMMIT)

_EXPORTER = "OTEL_TRACES_EXPORTER=otlp,replay"
_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY"
_COMMIT = "OTEL_REPLAY_COMMIT=<revision> (or record from a git checkout)"
_OUTPUT = "gen_ai.output.messages"


@dataclass(frozen=True, slots=True)
class ColdCase:
    """Why a run cannot be replayed exactly: ``kind`` (one of :data:`KINDS`), what is
    missing (``detail``, one line) and the capture settings that would have kept it."""

    kind: str
    detail: str
    settings: tuple[str, ...]


def _attrs(span: Mapping[str, Any]) -> Mapping[str, Any]:
    attrs = span.get("attributes")
    return attrs if isinstance(attrs, Mapping) else {}


def _index(span: Mapping[str, Any]) -> int | None:
    value = _attrs(span).get(A.REPLAY_STEP_INDEX)
    if isinstance(value, str) and value.isdecimal():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _is_model_call(span: Mapping[str, Any]) -> bool:
    attrs = _attrs(span)
    return (
        attrs.get(A.REPLAY_STEP_KIND) == "llm"
        or attrs.get("gen_ai.operation.name") in INFERENCE_OPERATIONS
    )


def _size(span: Mapping[str, Any]) -> int:
    """The larger of a step span's body sizes (0 when it does not say)."""
    sizes = [_attrs(span).get(k) for k in (A.REPLAY_REQUEST_SIZE, A.REPLAY_RESPONSE_SIZE)]
    return max((s for s in sizes if isinstance(s, int) and not isinstance(s, bool)), default=0)


def _steps(numbers: Sequence[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:8])
    return f"step{'s' if len(numbers) > 1 else ''} {shown}{', …' if len(numbers) > 8 else ''}"


def cold_cases(
    *,
    run: Run | None,
    spans: Sequence[Mapping[str, Any]],
    commit: str | None,
    held: bool | None,
    problem: str | None = None,
) -> list[ColdCase]:
    """The cold cases of one run: ``run`` as rebuilt (None when it cannot be: ``problem``
    says why), its ``spans``, the ``commit`` it recorded; ``held``: whether the store holds
    a run of its id (None when the run was read from the store itself)."""
    steps = run.steps if run is not None else ()
    exact = {s.step.index for s in steps if s.fidelity == "exact" and s.request_known}
    kit = any(A.REPLAY_RUN_ID in _attrs(span) for span in spans)
    cases: list[ColdCase] = []
    if spans and not kit and not exact:
        cases.append(
            ColdCase(
                FOREIGN,
                "recorded by another instrumentation: its spans carry no replay kit and no "
                "bytes; its model answers are rebuilt from what the spans say",
                (_EXPORTER, "opentelemetry-instrument (otel-replay's instrumentor)"),
            )
        )
    step_spans = {i: span for span in spans if (i := _index(span)) is not None}
    silent = sorted(
        i
        for i, span in step_spans.items()
        if i not in exact
        and _is_model_call(span)
        and _OUTPUT not in _attrs(span)
        and A.REPLAY_RESPONSE_BODY not in _attrs(span)
    )
    if kit and silent:
        cases.append(
            ColdCase(
                NO_CONTENT,
                f"content capture was off for {_steps(silent)}: the spans hold neither the "
                "messages nor the bytes of the model calls",
                (_CONTENT,),
            )
        )
    bare = sorted({s.step.index for s in steps} - exact)
    if kit and (bare or (problem and not silent)):
        largest = max((_size(step_spans[i]) for i in bare if i in step_spans), default=0)
        detail = (
            f"no recorded bytes for {_steps(bare)} of {len(steps)}: model answers are "
            "rebuilt from the spans' messages"
            if bare
            else f"cannot be rebuilt: {problem}"
        )
        limit = (
            f"OTEL_REPLAY_INLINE_LIMIT={largest}"
            if largest
            else "OTEL_REPLAY_INLINE_LIMIT (bodies up to it travel in the spans)"
        )
        cases.append(ColdCase(NO_BYTES, detail, (_EXPORTER, limit)))
    if kit and held is not None:
        cases += _sampled_out(steps, step_spans, held, bool(bare or problem))
    if commit is None:
        cases.append(
            ColdCase(
                NO_COMMIT,
                "the run names no commit (vcs.ref.head.revision): which code recorded it is "
                "unknown",
                (_COMMIT,),
            )
        )
    return cases


def _sampled_out(
    steps: Sequence[Any], step_spans: Mapping[int, Any], held: bool, lacking: bool
) -> list[ColdCase]:
    """A run of a trace source whose fixtures the store lacks, and steps a sampler dropped."""
    cases = []
    if lacking and not held:
        cases.append(
            ColdCase(
                SAMPLED_OUT,
                "the store does not hold this run's fixtures: a successful run may be sampled "
                "out (OTEL_REPLAY_SAMPLE_OK), or it was recorded without the replay exporter",
                ("OTEL_REPLAY_SAMPLE_OK=1", _EXPORTER),
            )
        )
    known = set(step_spans) | {s.step.index for s in steps}
    missing = sorted(set(range(max(known, default=-1) + 1)) - known)
    if missing:
        where = "; the store holds them: triage or replay the run by its id" if held else ""
        cases.append(
            ColdCase(
                SAMPLED_OUT,
                f"missing from the trace: {_steps(missing)} (a sampler dropped their spans){where}",
                ("OTEL_TRACES_SAMPLER=parentbased_always_on", "OTELCOL_SAMPLE_OK_PERCENT=100"),
            )
        )
    return cases
