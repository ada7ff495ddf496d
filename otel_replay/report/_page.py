"""What the report page holds, as one JSON-ready document: the runs, their steps, the rows of
the timeline (a run's steps, or two runs' aligned pairs) and their distinct contents.

Each distinct piece of content (a body, a message, a set of tool definitions, a changed
value) is stored once in ``contents`` and steps refer to it by position, so a conversation
that re-sends its history costs its unique messages, not the square of its length. Without
content the document holds no body, message, header or changed value: only metadata.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from otel_replay import attributes as A
from otel_replay._bodies import shown_text
from otel_replay.codecs import CODECS
from otel_replay.errors import CodecError
from otel_replay.replay import RecordedStep, Run, RunDiff, StepPair, json_list, recorded_llm
from otel_replay.step import ENVELOPE_KINDS

__all__ = ["page"]


@dataclass(slots=True)
class Contents:
    """Distinct contents, in order of first use: :meth:`ref` gives the position of a value,
    adding it when new."""

    values: list[Any] = field(default_factory=list)
    _at: dict[str, int] = field(default_factory=dict)

    def ref(self, value: Any) -> int:
        key = value if isinstance(value, str) else "\0" + json.dumps(value, sort_keys=True)
        at = self._at.get(key)
        if at is None:
            at = self._at[key] = len(self.values)
            self.values.append(value)
        return at

    def refs(self, values: Sequence[Any]) -> list[int]:
        return [self.ref(value) for value in values]


def page(
    a: Run, diff: RunDiff | None, *, content: bool, notes: Sequence[str] = ()
) -> dict[str, Any]:
    """The document the page's script reads: run ``a`` alone, or ``diff`` (of ``a`` and
    another run) aligned; ``content`` False leaves out every body, message and value."""
    contents = Contents()
    runs = [a] if diff is None else [diff.a, diff.b]
    steps: list[dict[str, Any]] = []
    at: list[dict[int, int]] = []  # per run: step index -> position in ``steps``
    summaries: list[dict[str, Any]] = []
    for run in runs:
        depths = _depths(run.steps)
        start = min((s.step.start_ns for s in run.steps if s.step.start_ns), default=0)
        places: dict[int, int] = {}
        begin = len(steps)
        for recorded in run.steps:
            places[recorded.step.index] = len(steps)
            talk = _conversation(recorded) if recorded.step.kind == "llm" else None
            shown = _step(recorded, depths[recorded.step.index], start, talk)
            if content:
                shown.update(_content(recorded, talk, contents))
            steps.append(shown)
        at.append(places)
        summaries.append(_run(run, steps[begin:]))
    if diff is None:
        rows = [{"a": at[0][index]} for index in _tree_order(a.steps)]
        first = None
    else:
        rows = [_row(pair, at, contents if content else None) for pair in diff.pairs]
        divergence = diff.first_divergence
        first = None if divergence is None else diff.pairs.index(divergence)
    return {
        "runs": summaries,
        "steps": steps,
        "rows": rows,
        "first": first,
        "diff": diff is not None,
        "counts": None if diff is None else diff.counts(),
        "content": content,
        "notes": list(notes),
        "contents": contents.values,
    }


def _run(run: Run, shown: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The header's facts of ``run``, whose steps are ``shown``."""
    first = run.steps[0].attributes if run.steps else {}
    fidelity = [s["fidelity"] for s in shown]
    started = None
    if run.start_ns:
        when = datetime.fromtimestamp(run.start_ns / 1e9, tz=timezone.utc)
        started = when.strftime("%Y-%m-%d %H:%M:%S UTC")
    return {
        "id": run.run_id,
        "source": run.source,
        "status": run.status,
        "error": run.error_type,
        "missing": run.missing,
        "mode": first.get(A.REPLAY_MODE) or "record",
        "parent": first.get(A.REPLAY_PARENT_RUN_ID),
        "commit": run.commit,
        "seed": run.seed,
        "started": started,
        "steps": len(shown),
        "exact": fidelity.count("exact"),
        "semantic": fidelity.count("semantic"),
        "tokens_in": _total(s["tokens_in"] for s in shown),
        "tokens_out": _total(s["tokens_out"] for s in shown),
    }


def _total(counts: Iterable[int | None]) -> int | None:
    """The sum of the counts known; None when no step said (not 0: nothing was counted)."""
    known = [count for count in counts if count is not None]
    return sum(known) if known else None


def _depths(steps: Sequence[RecordedStep]) -> dict[int, int]:
    """How many steps each step was made inside (0: an outer step); a chain that names a
    step the run lacks, or goes round, stops there."""
    parents = {s.step.index: s.step.within for s in steps}
    out: dict[int, int] = {}
    for index, within in parents.items():
        depth, parent, seen = 0, within, {index}
        while parent is not None and parent in parents and parent not in seen:
            seen.add(parent)
            depth += 1
            parent = parents[parent]
        out[index] = depth
    return out


def _tree_order(steps: Sequence[RecordedStep]) -> list[int]:
    """The steps' indexes as the timeline lists them: each step followed by the steps made
    inside it, depth first (so tools that ran at once each have their own steps beneath
    them); a step whose ``within`` names a step the run lacks is an outer one, and steps
    whose chain goes round come last."""
    indexes = {s.step.index for s in steps}
    inside: dict[int | None, list[int]] = {}
    for recorded in steps:
        within = recorded.step.within
        inside.setdefault(within if within in indexes else None, []).append(recorded.step.index)
    out: list[int] = []
    seen: set[int] = set()
    for start in [*inside.get(None, []), *(s.step.index for s in steps)]:
        stack = [start]
        while stack:
            index = stack.pop()
            if index not in seen:
                seen.add(index)
                out.append(index)
                stack.extend(reversed(inside.get(index, [])))
    return out


def _name(recorded: RecordedStep) -> str:
    """What the timeline calls a step: ``gpt-4o-mini`` (a model call's model, else its
    endpoint), ``GET /tools/weather``, ``lookup_order``."""
    step = recorded.step
    if step.kind in ENVELOPE_KINDS:
        return recorded.endpoint.partition(":")[2] or recorded.endpoint
    if step.kind == "llm" and step.model:
        return step.model
    return recorded.endpoint


def _step(
    recorded: RecordedStep, depth: int, start_ns: int, talk: _Conversation | None
) -> dict[str, Any]:
    step, attrs = recorded.step, recorded.attributes
    tokens_in, tokens_out = step.tokens_in, step.tokens_out
    if talk is not None:  # a source that kept no counts (a bundle): the response's usage
        tokens_in = talk.tokens_in if tokens_in is None else tokens_in
        tokens_out = talk.tokens_out if tokens_out is None else tokens_out
    fork = attrs.get(A.REPLAY_FORK_CHANGE)
    if fork is None and attrs.get(A.REPLAY_MODE) == "fork":
        fork = "served"
    return {
        "index": step.index,
        "kind": step.kind,
        "name": _name(recorded),
        "endpoint": recorded.endpoint,
        "model": step.model,
        "offset_ms": (step.start_ns - start_ns) / 1e6 if step.start_ns and start_ns else None,
        "duration_ms": recorded.duration_ns / 1e6,
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "status": step.status_code,
        "error": step.error_type,
        "complete": step.complete,
        "fidelity": recorded.fidelity,
        "within": step.within,
        "depth": depth,
        "fork": fork if isinstance(fork, str) else None,
        "effect": attrs.get(A.REPLAY_TOOL_EFFECT),
        # None: the source did not carry the request's bytes (not an empty request)
        "request_size": None if recorded.request_body is None else len(recorded.request_body),
        "response_size": len(step.response_body),
    }


def _is_sse(headers: Sequence[tuple[str, str]]) -> bool:
    return any(k.lower() == "content-type" and "text/event-stream" in v.lower() for k, v in headers)


@dataclass(slots=True)
class _Conversation:
    """A model call's content, read from its bodies by the provider codec, else from its
    span's GenAI attributes (a span of another instrumentation, without bytes)."""

    system: list[Any] = field(default_factory=list)
    tools: list[Any] = field(default_factory=list)
    input: list[Any] = field(default_factory=list)
    output: list[Any] = field(default_factory=list)
    finish: list[str] = field(default_factory=list)
    tokens_in: int | None = None
    tokens_out: int | None = None


def _conversation(recorded: RecordedStep) -> _Conversation:
    out = _Conversation()
    request = recorded_llm(recorded)  # from its bytes, else from its span's attributes
    if request is not None:
        out.system, out.tools = request.system_instructions, request.tool_definitions
        out.input = request.input_messages
    step = recorded.step
    codec = next((c for c in CODECS if c.name == recorded.endpoint), None)
    if codec is not None and step.status_code is not None:
        try:
            streamed = _is_sse(step.response_headers)
            response = codec.parse_response(step.status_code, step.response_body, streamed)
            out.output = response.output_messages
            said = response.attributes
            reasons = said.get("gen_ai.response.finish_reasons")
            out.finish = [str(r) for r in reasons] if isinstance(reasons, list | tuple) else []
            out.tokens_in = _count(said.get("gen_ai.usage.input_tokens"))
            out.tokens_out = _count(said.get("gen_ai.usage.output_tokens"))
        except (ValueError, CodecError):
            pass
    if not out.output:
        out.output = json_list(recorded.attributes.get("gen_ai.output.messages"))
    return out


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _content(
    recorded: RecordedStep, talk: _Conversation | None, contents: Contents
) -> dict[str, Any]:
    """The step's content, as references into ``contents``: a model call's messages (and its
    raw response when no message could be read from it, an error object say), any other
    step's bodies; the request's URL and the headers of both sides."""
    step = recorded.step
    out: dict[str, Any] = {"url": step.url or None}
    request, response = shown_text(recorded.request_body), shown_text(step.response_body)
    if talk is not None:
        out.update(
            system=contents.ref(talk.system) if talk.system else None,
            tools=contents.ref(talk.tools) if talk.tools else None,
            input=contents.refs(talk.input),
            output=contents.refs(talk.output),
            finish=talk.finish,
        )
        if talk.input or talk.system:
            request = None  # the messages say it; the bytes would repeat the whole history
        if talk.output:
            response = None
    out["request"] = None if not request else contents.ref(request)
    out["response"] = None if not response else contents.ref(response)
    headers = [
        [[k, v] for k, v in step.request_headers],
        [[k, v] for k, v in step.response_headers],
    ]
    out["headers"] = contents.ref(headers) if any(headers) else None
    return out


def _row(pair: StepPair, at: list[dict[int, int]], contents: Contents | None) -> dict[str, Any]:
    """One pair of the alignment: the positions of its steps, its status and its changes
    (field and kind; the values too, as references, when ``contents`` is given)."""
    changes = []
    for change in pair.changes:
        shown: dict[str, Any] = {"field": change.field, "kind": change.kind}
        if contents is not None:
            shown.update(
                before=None if change.recorded is None else contents.ref(change.recorded),
                after=None if change.replayed is None else contents.ref(change.replayed),
            )
        changes.append(shown)
    return {
        "a": None if pair.a is None else at[0][pair.a.step.index],
        "b": None if pair.b is None else at[1][pair.b.step.index],
        "status": pair.status,
        "fields": pair.fields(),
        "changes": changes,
    }
