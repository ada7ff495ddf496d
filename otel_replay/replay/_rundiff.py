"""Two recorded runs side by side: their steps aligned, and what differs, pair by pair."""

from __future__ import annotations

import difflib
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from otel_replay import attributes as A
from otel_replay._canonical import sha256_tag
from otel_replay.replay._change import Change, ChangeKind, body_change, category, change
from otel_replay.replay._diff import (
    MintedIds,
    Request,
    answer_messages,
    json_paths_differing,
    llm_changes,
    message_changes,
    parse_json,
    recorded_llm,
    request_changes,
    short_tag,
    value_at,
    without_trace_context,
)
from otel_replay.replay._match import closeness, recorded_content
from otel_replay.replay._model import RecordedStep, Run

__all__ = ["PairStatus", "RunDiff", "StepPair", "diff_runs", "step_changes"]

PairStatus = Literal["same", "changed", "added", "removed", "inside"]
"""``same``: one step in both runs, alike. ``changed``: one step in both, not alike.
``removed``: a step only run A has. ``added``: a step only run B has. ``inside``: a step one
run made inside a step both runs have (a tool, a side effect), where the other run made nothing
inside it: that run served the step whole from a recording (a replay never runs a served tool's
body), so what the body did is no difference."""


@dataclass(frozen=True, slots=True)
class StepPair:
    """One row of the alignment: a step of run A, of run B, or of both.

    ``a`` is None for an ``added`` step and ``b`` for a ``removed`` one. ``changes`` are
    ``a`` → ``b`` (``Change.recorded`` is A's value, ``Change.replayed`` B's); empty unless
    the status is ``changed``.
    """

    a: RecordedStep | None
    b: RecordedStep | None
    status: PairStatus
    changes: tuple[Change, ...] = ()

    @property
    def recorded(self) -> RecordedStep:
        """The step that names the pair: A's, or B's when only B has it."""
        recorded = self.a if self.a is not None else self.b
        assert recorded is not None  # a pair always has a side
        return recorded

    def fields(self) -> list[str]:
        """The kinds of field that differ, first-seen order (``model``, ``messages``,
        ``response``), for one-word summaries."""
        return list(dict.fromkeys(_category(c.field) for c in self.changes))

    def to_json(self) -> dict[str, Any]:
        """The JSON-ready form: both step indexes (None on the side that lacks the step),
        kind, endpoint (``b_endpoint``: B's, when it is another), status and each change as
        ``field``/``before``/``after`` (whole values, A's then B's; ``kind``: changed,
        added or removed; ``differs_at``: offset of the first differing character)."""
        recorded = self.recorded
        return {
            "a": None if self.a is None else self.a.step.index,
            "b": None if self.b is None else self.b.step.index,
            "kind": recorded.step.kind,
            "endpoint": recorded.endpoint,
            "b_endpoint": None
            if self.a is None or self.b is None or self.a.endpoint == self.b.endpoint
            else self.b.endpoint,
            "status": self.status,
            "changes": [
                {
                    "field": c.field,
                    "kind": c.kind,
                    "before": c.recorded,
                    "after": c.replayed,
                    "differs_at": c.differs_at,
                }
                for c in self.changes
            ],
        }


@dataclass(frozen=True, slots=True)
class RunDiff:
    """Runs A and B, their steps aligned in order (``pairs``)."""

    a: Run
    b: Run
    pairs: tuple[StepPair, ...]

    @property
    def first_divergence(self) -> StepPair | None:
        """The first pair (in step order) that is neither ``same`` nor ``inside``; None when
        identical."""
        return next((p for p in self.pairs if p.status not in ("same", "inside")), None)

    @property
    def identical(self) -> bool:
        """Whether every step of each run is the same step of the other, in the same order."""
        return self.first_divergence is None

    def counts(self) -> dict[PairStatus, int]:
        """How many pairs have each status (every status present, zero or not)."""
        out: dict[PairStatus, int] = {
            "same": 0,
            "changed": 0,
            "removed": 0,
            "added": 0,
            "inside": 0,
        }
        for pair in self.pairs:
            out[pair.status] += 1
        return out

    def forked(self) -> list[tuple[Literal["A", "B"], RecordedStep, str]]:
        """What a fork (either run) changed on purpose, step by step, A's then B's: the run,
        the step and its ``replay.fork.change`` (``override @lost.json``, ``live``). The
        differences that follow start there."""
        sides: tuple[tuple[Literal["A", "B"], Run], ...] = (("A", self.a), ("B", self.b))
        return [
            (side, recorded, change)
            for side, run in sides
            for recorded in run.steps
            if isinstance(change := recorded.attributes.get(A.REPLAY_FORK_CHANGE), str)
        ]

    def to_json(self) -> dict[str, Any]:
        """The JSON-ready form (``otel-replay diff --json`` adds the runs' facts)."""
        first = self.first_divergence
        return {
            "identical": self.identical,
            "forked": [
                {
                    "run": side,
                    "step": recorded.step.index,
                    "endpoint": recorded.endpoint,
                    "change": change,
                }
                for side, recorded, change in self.forked()
            ],
            "counts": self.counts(),
            "pairs": [pair.to_json() for pair in self.pairs],
            "first_divergence": None if first is None else first.to_json(),
        }


def diff_runs(a: Run, b: Run) -> RunDiff:
    """Align the steps of ``a`` and ``b`` and compare each pair (see the module docstring).

    Pure: reads only the runs' steps. Every step of each run appears in exactly one pair, in
    its run's step order, save that the steps made inside a step follow its pair: the runs'
    outer steps are aligned, then, for each pair, the steps made inside each side (``inside``
    when only one side made any).
    """
    inner_a, inner_b = _inner(a.steps), _inner(b.steps)
    pairs = _align_level(inner_a[None], inner_b[None], inner_a, inner_b)
    return RunDiff(a, b, tuple(_minted_ids_aside(pairs)))


def _minted_ids_aside(pairs: Iterable[StepPair]) -> Iterator[StepPair]:
    """``pairs``, each request of B compared with the tool-call ids B's earlier answers
    minted in place of A's put back (:class:`MintedIds`): a fork's live answers name their
    tool calls anew, and the program echoes the new ids in every later request. A pair's
    own answers are paired after its request is compared."""
    minted = MintedIds()
    for pair in pairs:
        a, b = pair.a, pair.b
        if a is None or b is None:
            yield pair
            continue
        sent = b.request_body
        if sent is None or not minted:
            yield pair
        else:
            body = minted.restore(sent)
            restored = b
            if body is not sent:
                step = replace(b.step, request_body=body, request_hash=sha256_tag(body))
                restored = replace(b, step=step)
            changes = [*step_changes(a, restored), *minted.stale(sent)]
            yield StepPair(a, b, "changed" if changes else "same", tuple(changes))
        live = answer_messages(b)
        if live:
            minted.learn(a, live)


Inner = dict[int | None, list[RecordedStep]]
"""Steps by the step they were made inside (None: none, the run's outer steps), in order."""


def _inner(steps: Sequence[RecordedStep]) -> Inner:
    """The steps under each step; a step whose ``within`` chain names a step the run lacks,
    or goes round (a damaged source), counts as an outer step."""
    parents = {recorded.step.index: recorded.step.within for recorded in steps}
    out: Inner = {None: []}
    for recorded in steps:
        parent, seen = recorded.step.within, {recorded.step.index}
        while parent is not None and parent in parents and parent not in seen:
            seen.add(parent)
            parent = parents[parent]
        out.setdefault(recorded.step.within if parent is None else None, []).append(recorded)
    return out


def _align_level(
    xs: Sequence[RecordedStep], ys: Sequence[RecordedStep], inner_a: Inner, inner_b: Inner
) -> Iterator[StepPair]:
    for pair in _align(xs, ys):
        yield pair
        kids_a = inner_a.get(pair.a.step.index, []) if pair.a is not None else []
        kids_b = inner_b.get(pair.b.step.index, []) if pair.b is not None else []
        if pair.a is not None and pair.b is not None and (not kids_a or not kids_b):
            yield from (StepPair(s, None, "inside") for s in _below(kids_a, inner_a))
            yield from (StepPair(None, s, "inside") for s in _below(kids_b, inner_b))
        else:
            yield from _align_level(kids_a, kids_b, inner_a, inner_b)


def _below(steps: Sequence[RecordedStep], inner: Inner) -> Iterator[RecordedStep]:
    """``steps`` and everything made inside them, depth first."""
    for recorded in steps:
        yield recorded
        yield from _below(inner.get(recorded.step.index, []), inner)


def step_changes(a: RecordedStep, b: RecordedStep) -> list[Change]:
    """What differs from step ``a`` to step ``b``: the request (as the replay report compares
    a request with its recorded step), then the response. Empty when they are alike."""
    return [*_request_changes(a, b), *_response_changes(a, b)]


def _key(recorded: RecordedStep) -> tuple[str, str, str, str] | None:
    """Steps with equal keys are the same step (their request bytes are the same); None
    without a request hash."""
    if not recorded.step.request_hash:
        return None
    return (
        recorded.step.kind,
        recorded.step.method.upper(),
        recorded.endpoint,
        recorded.step.request_hash,
    )


def _meaning(recorded: RecordedStep) -> tuple[str, str, bytes, tuple[bytes, ...]] | None:
    """Model calls with equal meanings ask the same conversation (messages as
    :func:`normal_message` makes them): the same step where one run has no request bytes
    (another instrumentation's span) or they differ in what the conversation does not hold
    (a parameter). None for any other step."""
    content = recorded_content(recorded)
    if content.system is None:
        return None
    return (recorded.step.kind, recorded.endpoint, content.system, content.messages)


def _slot(recorded: RecordedStep) -> tuple[str, str]:
    """Steps with equal slots are the same call made differently (another prompt, other
    arguments): the same kind, at the same endpoint or tool."""
    return (recorded.step.kind, recorded.endpoint)


def _align(a: Sequence[RecordedStep], b: Sequence[RecordedStep]) -> list[StepPair]:
    pairs: list[StepPair] = []
    left_a, left_b = _twins(a, b, _key, pairs)
    left_a, left_b = _repeats(left_a, left_b, a, b, pairs)
    left_a, left_b = _twins(left_a, left_b, _meaning, pairs)
    pairs.extend(_align_block(left_a, left_b))
    return _in_order(pairs, a, b)


def _twins(
    a: Sequence[RecordedStep],
    b: Sequence[RecordedStep],
    key: Callable[[RecordedStep], Hashable | None],
    pairs: list[StepPair],
) -> tuple[list[RecordedStep], list[RecordedStep]]:
    """Pair the n-th step of A with the n-th of B that has the same ``key`` (None: a step
    this key says nothing of), onto ``pairs``; the steps of each left unpaired, in order."""
    same: dict[Hashable, deque[RecordedStep]] = {}
    for y in b:
        k = key(y)
        if k is not None:
            same.setdefault(k, deque()).append(y)
    left_a: list[RecordedStep] = []
    taken: set[int] = set()
    for x in a:
        k = key(x)
        twins = same.get(k) if k is not None else None
        if twins:
            y = twins.popleft()
            taken.add(y.step.index)
            pairs.append(_pair(x, y))
        else:
            left_a.append(x)
    return left_a, [y for y in b if y.step.index not in taken]


def _repeats(
    left_a: list[RecordedStep],
    left_b: list[RecordedStep],
    a: Sequence[RecordedStep],
    b: Sequence[RecordedStep],
    pairs: list[StepPair],
) -> tuple[list[RecordedStep], list[RecordedStep]]:
    """A step left unpaired whose very request the other run made, fewer times, or that asks
    again what its own run's last call to that endpoint asked and got an error for (a retry
    one run made, after a fault injected into a fork, say): only in its own run, onto
    ``pairs``, rather than paired with some other call further on. The steps of each left,
    in order."""
    keys_a = {k for k in map(_key, a) if k is not None}
    keys_b = {k for k in map(_key, b) if k is not None}
    retries_a, retries_b = _retries(a), _retries(b)
    kept_a = []
    for x in left_a:
        if _key(x) in keys_b or x.step.index in retries_a:
            pairs.append(StepPair(x, None, "removed"))
        else:
            kept_a.append(x)
    kept_b = []
    for y in left_b:
        if _key(y) in keys_a or y.step.index in retries_b:
            pairs.append(StepPair(None, y, "added"))
        else:
            kept_b.append(y)
    return kept_a, kept_b


def _retries(steps: Sequence[RecordedStep]) -> set[int]:
    """The indexes of the steps that send again the request of the step before them at the
    same endpoint, which failed (an HTTP error, no answer, an answer cut short, an error
    raised or returned)."""
    out: set[int] = set()
    last: dict[tuple[str, str], RecordedStep] = {}
    for recorded in steps:
        slot = _slot(recorded)
        before = last.get(slot)
        last[slot] = recorded
        if before is None or _key(recorded) is None or _key(recorded) != _key(before):
            continue
        failed = before.step
        status = failed.status_code
        if status is None or status >= 400 or not failed.complete or failed.error_type:
            out.add(recorded.step.index)
    return out


def _in_order(
    pairs: list[StepPair], a: Sequence[RecordedStep], b: Sequence[RecordedStep]
) -> list[StepPair]:
    """``pairs`` in A's order, a pair of B's step alone after the pair of the B step before
    it (first when none is before it)."""
    at_a = {recorded.step.index: place for place, recorded in enumerate(a)}
    at_b = {recorded.step.index: place for place, recorded in enumerate(b)}
    anchor: dict[int, int] = {}  # place in B -> place in A of its pair
    for pair in pairs:
        if pair.a is not None and pair.b is not None:
            anchor[at_b[pair.b.step.index]] = at_a[pair.a.step.index]

    def place(pair: StepPair) -> tuple[int, int, int]:
        if pair.a is not None:
            return (at_a[pair.a.step.index], 0, 0)
        assert pair.b is not None
        mine = at_b[pair.b.step.index]
        before = max((p for p in anchor if p < mine), default=None)
        return (-1 if before is None else anchor[before], 1, mine)

    return sorted(pairs, key=place)


def _align_block(a: Sequence[RecordedStep], b: Sequence[RecordedStep]) -> Iterator[StepPair]:
    """Steps of A and B that differ: paired by slot (the closest in content first), then in
    order where the kinds agree."""
    slots_a, slots_b = [_slot(s) for s in a], [_slot(s) for s in b]
    matcher = difflib.SequenceMatcher(a=slots_a, b=slots_b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        xs, ys = a[i1:i2], b[j1:j2]
        if op == "equal":
            yield from _closest_pairs(xs, ys)
            continue
        paired = 0
        while paired < min(len(xs), len(ys)) and xs[paired].step.kind == ys[paired].step.kind:
            yield _pair(xs[paired], ys[paired])
            paired += 1
        for x in xs[paired:]:
            yield StepPair(x, None, "removed")
        for y in ys[paired:]:
            yield StepPair(None, y, "added")


CLOSEST_MAX = 10_000
"""Past this many candidate pairs (steps of A times steps of B) a block is paired in order:
comparing each with each would take longer than the diff is worth."""


def _closest_pairs(xs: Sequence[RecordedStep], ys: Sequence[RecordedStep]) -> Iterator[StepPair]:
    """As many steps of one slot on each side: each of A's, in order, with the closest in
    content of B's left (:func:`closeness`; the first of them on a tie)."""
    if len(xs) * len(ys) > CLOSEST_MAX:
        yield from (_pair(x, y) for x, y in zip(xs, ys, strict=True))
        return
    left = [(y, recorded_content(y)) for y in ys]
    for x in xs:
        mine = recorded_content(x)
        scores = [closeness(mine, content) for _, content in left]
        y, _ = left.pop(scores.index(max(scores)))
        yield _pair(x, y)


def _pair(a: RecordedStep, b: RecordedStep) -> StepPair:
    changes = step_changes(a, b)
    return StepPair(a, b, "changed" if changes else "same", tuple(changes))


def _same_request(a: RecordedStep, b: RecordedStep) -> bool:
    """The same request bytes (by the bytes, or by their hash where A has none)."""
    if a.request_body is not None:
        return a.request_body == b.request_body
    return bool(a.step.request_hash) and a.step.request_hash == b.step.request_hash


def _request_changes(a: RecordedStep, b: RecordedStep) -> list[Change]:
    """A step without request bytes (another instrumentation's span) is compared through what
    its span says, as the replay compares a request with it; never by a hash of bytes that
    only one side has."""
    changes: list[Change]
    if _same_request(a, b):
        changes = []
    elif b.request_body is not None:
        changes = request_changes(a, Request(b.step.method, b.step.url or "", b.request_body))
        if (
            not changes
            and a.request_body is not None
            and a.step.request_hash != b.step.request_hash
        ):
            # Bytes the request comparison sets aside (volatile fields, key order).
            changes = _set_aside_changes(a, b)
    elif a.request_body is not None:  # only A has bytes: B is compared as a recording is
        turned = request_changes(b, Request(a.step.method, a.step.url or "", a.request_body))
        changes = [_reversed(c) for c in turned]
    elif a.step.request_hash and b.step.request_hash:  # ours, without bytes
        changes = [
            change("request hash", short_tag(a.step.request_hash), short_tag(b.step.request_hash))
        ]
    else:
        old, new = recorded_llm(a), recorded_llm(b)
        changes = [] if old is None or new is None else llm_changes(old, new, a, partial=True)
    if a.endpoint != b.endpoint:
        changes.insert(0, Change("endpoint", "changed", a.endpoint, b.endpoint))
    return changes


_OPPOSITE: dict[ChangeKind, ChangeKind] = {
    "added": "removed",
    "removed": "added",
    "changed": "changed",
}


def _reversed(c: Change) -> Change:
    """A change of B → A told as A → B."""
    return Change(c.field, _OPPOSITE[c.kind], c.replayed, c.recorded)


def _set_aside_changes(a: RecordedStep, b: RecordedStep) -> list[Change]:
    """What differs in two requests the replay would take as the same: each JSON field (a
    volatile one, such as ``user``), else the hash (key order, spacing). The trace context
    an MCP client writes into each request is another in every run, never a change."""
    old, new = parse_json(a.request_body), parse_json(b.request_body)
    if old is not None and new is not None:
        if not json_paths_differing(old, new):
            pass  # equal as JSON: the bytes differ (key order, spacing)
        else:
            old, new = without_trace_context(old), without_trace_context(new)
            return [
                change(f"body {path}", value_at(old, path), value_at(new, path))
                for path in json_paths_differing(old, new)
            ]
    return [
        change(
            "request hash",
            short_tag(a.step.request_hash or None),
            short_tag(b.step.request_hash or None),
        )
    ]


def _response_changes(a: RecordedStep, b: RecordedStep) -> list[Change]:
    """Status, error, completeness, then what a model said (each output message, as
    ``show`` reads it), then the bytes. A streamed answer's first differing byte is most
    often an id or a timestamp, so the messages come before the bytes that carry them."""
    changes: list[Change] = []
    if a.step.status_code != b.step.status_code:
        changes.append(change("response status", a.step.status_code, b.step.status_code))
    if a.step.error_type != b.step.error_type:
        changes.append(change("response error", a.step.error_type, b.step.error_type))
    if a.step.complete != b.step.complete:
        changes.append(change("response complete", a.step.complete, b.step.complete))
    if a.step.response_body != b.step.response_body:
        changes.extend(_output_changes(a, b))
        changes.extend(
            _json_changes("response", a.step.response_body, b.step.response_body)
            or [body_change("response body", a.step.response_body, b.step.response_body)]
        )
    return changes


def _output_changes(a: RecordedStep, b: RecordedStep) -> list[Change]:
    """``response message N`` for each output message that differs (``assistant:
    refund_order({...}) → assistant: Sorry, I cannot refund.``)."""
    old, new = answer_messages(a), answer_messages(b)
    if old is None or new is None:
        return []
    return [
        Change(f"response {c.field}", c.kind, c.recorded, c.replayed)
        for c in message_changes(old, new)
    ]


def _json_changes(label: str, old: bytes | None, new: bytes | None) -> list[Change]:
    """Each differing JSON field of two bodies (``label $.path``); empty when either is not
    JSON or they are equal as JSON."""
    old_json, new_json = parse_json(old), parse_json(new)
    if old_json is None or new_json is None:
        return []
    return [
        change(f"{label} {path}", value_at(old_json, path), value_at(new_json, path))
        for path in json_paths_differing(old_json, new_json)
    ]


def _category(field: str) -> str:
    head = field.split(" ", 1)[0]
    return head if head in ("response", "endpoint") else category(field)
