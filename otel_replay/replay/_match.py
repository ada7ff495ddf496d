"""Which recorded step answers a request: most exact first (``hash``, ``canonical``,
``messages``, ``closest``, ``position``)."""

from __future__ import annotations

import bisect
import contextlib
import contextvars
import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from otel_replay import attributes as A
from otel_replay._canonical import canonical_json, sha256_tag
from otel_replay._forks import mend_in_child
from otel_replay.codecs import Codec, LlmRequest, detect
from otel_replay.errors import CodecError
from otel_replay.replay._diff import (
    json_paths_differing,
    normal_message,
    parse_json,
    recorded_llm,
    tool_schema_version,
    without_trace_context,
)
from otel_replay.replay._ledger import Ledger
from otel_replay.replay._model import RecordedStep, Run, endpoint_of
from otel_replay.replay._unsent import Unsent, UnsentAnswers, without_unsent

__all__ = [
    "VOLATILE_FIELDS",
    "Content",
    "Match",
    "MatchKind",
    "Matcher",
    "Near",
    "closeness",
    "content_of",
    "recorded_content",
]

MatchKind = Literal["hash", "canonical", "messages", "closest", "position"]

VOLATILE_FIELDS: frozenset[str] = frozenset(
    {"user", "metadata", "prompt_cache_key", "safety_identifier", "request_id"}
)
"""Top-level JSON request fields canonical matching ignores: they identify the caller or the
attempt (end-user ids, tracing metadata, cache keys), not what is asked."""


@dataclass(slots=True)  # not frozen: a frozen one is slower to make, once per request
class Match:
    """How a request was answered: the recorded step, the level that matched, and whether the
    step had already been served."""

    recorded: RecordedStep
    how: MatchKind
    repeat: bool = False


_LAST_SERVED: contextvars.ContextVar[tuple[object, int, int] | None] = contextvars.ContextVar(
    "otel_replay_last_served", default=None
)
"""(the matcher, the recorded step it last gave, the one it gave before) for this thread or
task: of several recorded steps a request matches alike, the first recorded after the last
one is its own. The one before stands again when a fault takes the last one's place."""


IDLE_S = 2.0
"""How long a streamed piece waits for the requests it came after once the replay makes no
request at all: past that, the replay went another way and the piece is served. Time the
program could not run, the machine busy with others, does not count (see :class:`_Starved`)."""

IDLE_MAX_S = 60.0
"""However starved the program, a piece waits no longer than this after the last request."""


@dataclass(frozen=True, slots=True)
class Near:
    """A recorded step close to an unmatched request, with the JSON paths that differ."""

    recorded: RecordedStep
    fields: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Live:
    """A live request as the matching levels read it: its body parsed once."""

    path: str
    parsed: Any
    codec: Codec | None
    endpoint: str


def _read(method: str, url: str, body: bytes) -> _Live:
    path = urlsplit(url).path
    parsed = parse_json(body)
    codec = detect(method.upper(), path, parsed)
    return _Live(path, parsed, codec, endpoint_of(method, url, codec.name if codec else None))


def endpoint_of_request(method: str, url: str, body: bytes) -> str:
    """The endpoint key of a live request (see :func:`~otel_replay.replay._model.endpoint_of`)."""
    return _read(method, url, body).endpoint


def _canonical_key(value: Any) -> str | None:
    """The canonical-JSON key of a parsed body (None when it is not JSON)."""
    value = without_trace_context(value)
    if not isinstance(value, Mapping):
        return None if value is None else sha256_tag(canonical_json(value))
    kept = {k: v for k, v in value.items() if k not in VOLATILE_FIELDS}
    return sha256_tag(canonical_json(kept))


def _texts(parts: Any) -> list[str]:
    """The text contents of a list of GenAI message parts, empty ones left out."""
    if not isinstance(parts, list):
        return []
    return [
        p["content"]
        for p in parts
        if isinstance(p, Mapping)
        and p.get("type") == "text"
        and isinstance(p.get("content"), str)
        and p["content"]
    ]


def _conversation_key(model: Any, system: Any, messages: Any) -> str | None:
    """What ``messages`` matching compares: the model, then role and texts message by message
    (system instructions first, as a ``system`` turn, so instrumentations that put them in
    the history and those that keep them apart agree; roles as :func:`normal_message` names
    them). None without messages."""
    if not isinstance(messages, list) or not messages:
        return None
    instructions = _texts(system)
    turns: list[list[Any]] = [["system", instructions]] if instructions else []
    for message in messages:
        if not isinstance(message, Mapping):
            return None
        turns.append([normal_message(message)["role"], _texts(message.get("parts"))])
    return sha256_tag(canonical_json([model if isinstance(model, str) else None, turns]))


Closeness = tuple[int, ...]
"""How close a recorded request is to a live one; greater is closer, and equal values tell
two recorded requests apart by nothing."""


@dataclass(frozen=True, slots=True)
class Content:
    """What :func:`closeness` reads of a request, read once: for a model call, its system
    prompt (instructions, then the system turns it opens with, as canonical JSON of their
    texts), its other messages (canonical JSON of :func:`normal_message`) and its tools;
    for another call, its JSON body (None when not JSON)."""

    system: bytes | None
    messages: tuple[bytes, ...] = ()
    tools: str | None = None
    body: Any = None


def content_of(llm: LlmRequest | None, body: Any) -> Content:
    """The :class:`Content` of a request: ``llm`` the model call it makes (None: not one),
    ``body`` its parsed JSON body."""
    if llm is None:
        return Content(None, body=without_trace_context(body))
    system = _texts(llm.system_instructions)
    messages = [normal_message(m) for m in llm.input_messages]
    opening = 0
    while opening < len(messages) and _role(messages[opening]) == "system":
        system.extend(_texts(messages[opening].get("parts")))
        opening += 1
    rest = tuple(canonical_json(m) for m in messages[opening:])
    return Content(canonical_json(system), rest, tool_schema_version(llm))


def recorded_content(recorded: RecordedStep) -> Content:
    """The :class:`Content` of a recorded step's request (from its span when it has no
    bytes)."""
    return content_of(recorded_llm(recorded), parse_json(recorded.request_body))


def closeness(old: Content, new: Content) -> Closeness:
    """How close request ``old`` is to ``new``, by content.

    Model calls, from most telling: how many messages (system turns aside) the two have
    alike at the same place (a conversation's history, tool call ids included, is its own),
    whether their system prompts are the same, whether their tools are, how many characters
    the first message that differs (else the system prompt) keeps at its two ends (an edit in
    one place), and how near their message counts are. So a request of one of several
    concurrent conversations is closest to that conversation's steps, whichever of them it
    changed. Other JSON requests: the fewer fields differ, the closer. Anything else, or a
    model call against another call: ``()``.
    """
    if old.system is not None and new.system is not None:
        pairs = list(zip(old.messages, new.messages, strict=False))
        first = next(((a, b) for a, b in pairs if a != b), (old.system, new.system))
        return (
            sum(a == b for a, b in pairs),
            int(old.system == new.system),
            int(old.tools == new.tools),
            _ends_alike(*first),
            -abs(len(old.messages) - len(new.messages)),
        )
    if old.system is None and new.system is None and old.body is not None and new.body is not None:
        return (-len(json_paths_differing(old.body, new.body)),)
    return ()


def _ends_alike(a: bytes, b: bytes) -> int:
    """How many bytes ``a`` and ``b`` share at their start and, after that, at their end."""
    # Byte by byte is what is meant here: these are not paths.
    head = len(os.path.commonprefix([a, b]))  # noqa: RUF071
    return head + len(os.path.commonprefix([a[head:][::-1], b[head:][::-1]]))  # noqa: RUF071


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, Mapping) else None


def _recorded_conversation(recorded: RecordedStep) -> str | None:
    attrs = recorded.attributes
    messages = attrs.get("gen_ai.input.messages")
    if not isinstance(messages, str):
        return None
    system = attrs.get("gen_ai.system_instructions")
    return _conversation_key(
        recorded.step.model or attrs.get("gen_ai.request.model"),
        parse_json(system.encode()) if isinstance(system, str) else None,
        parse_json(messages.encode()),
    )


def _live_llm(live: _Live) -> LlmRequest | None:
    """The model call a live request makes (None: not one, or one its codec refuses)."""
    if live.codec is None or not isinstance(live.parsed, Mapping):
        return None
    try:
        return live.codec.parse_request(live.path, live.parsed)
    except CodecError:
        return None


def _request_conversation(live: _Live) -> str | None:
    llm = _live_llm(live)
    if llm is None:
        return None
    return _conversation_key(llm.model, llm.system_instructions, llm.input_messages)


WAIT_SLICE_S = 0.05
"""How often a piece waiting for requests looks again at what was served: another process of
the program may have served them (it cannot wake this one)."""


class Matcher:
    """Matches the requests of one replay against one recorded run; thread-safe, and
    process-safe (see :attr:`ledger`)."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self._lock = threading.Lock()
        self._asked = threading.Condition(self._lock)  # notified when a step is served
        self._waiting = 0  # threads waiting on it: a request notifies only when some do
        self._starved = _Starved()  # read under the lock
        self._wakers: tuple[Callable[[], None], ...] = ()
        self.ledger = Ledger(run)
        """What was served, and the last request (matched or not), for every process."""
        self._token = object()  # names this matcher in ``_LAST_SERVED``
        self._by_hash: dict[tuple[str, str | None], list[RecordedStep]] = {}
        self._by_endpoint: dict[str, list[RecordedStep]] = {}
        self._by_canonical: dict[str, list[RecordedStep]] | None = None
        self._by_conversation: dict[str, list[RecordedStep]] | None = None
        self._contents: dict[int, Content] = {}  # by step index, read when first needed
        self._unsent: UnsentAnswers | None = None  # made when a stream first asks
        # Recorded bodies by their bytes: a request whose bytes equal a recording's has that
        # recording's hash, found in a dict lookup instead of a sha256 of the body.
        self._hash_of_body: dict[bytes, str] = {}
        for recorded in run.steps:
            if recorded.step.request_hash and recorded.request_body is not None:
                key = (recorded.step.request_hash, _recorded_target(recorded))
                self._by_hash.setdefault(key, []).append(recorded)
                self._hash_of_body.setdefault(recorded.request_body, recorded.step.request_hash)
            self._by_endpoint.setdefault(recorded.endpoint, []).append(recorded)
        # (start, index) of the steps a response can wait for, in start order (awaited).
        self._starts: list[tuple[int, int]] = sorted(
            (recorded.step.start_ns, recorded.step.index)
            for recorded in run.steps
            if recorded.step.within is None and recorded.step.start_ns > 0
        )
        mend_in_child(self)

    def match(
        self,
        method: str,
        url: str,
        body: bytes | None,
        request_hash: str,
        call_id: str | None = None,
    ) -> Match | None:
        """The recorded step that answers this request, or None. ``body`` is the exact
        redacted body and ``request_hash`` its ``sha256:<hex>``; ``call_id`` the model's tool
        call a tool step answers, when known. Marks the step served.

        ``body`` None asks for a ``hash`` match only: None, with nothing marked or counted,
        when there is none (then ask again with the body)."""
        found = self._by_hash.get((request_hash, None)) or self._by_hash.get(
            (request_hash, _target(method, url))
        )
        live = None
        if not found:
            if body is None:
                return None
            live = _read(method, url, body)  # parsed before the account is held
        # The account's lock is the one matching needs (it guards the lazy tables too); the
        # matcher's own is taken only to wake a streamed piece waiting for requests.
        with self.ledger.locked():
            ledger = self.ledger
            result: Match | None
            if found:
                endpoint = found[0].endpoint
                result = self._take(found, "hash", call_id)
            else:
                assert live is not None
                endpoint = live.endpoint
                result = self._by_content(live, call_id) or self._by_messages(live)
            ordinal = ledger.arrive(endpoint)
            if result is None:
                assert live is not None
                result = self._by_closeness(live, ordinal)
            if result is not None:
                ledger.serve(result.recorded.step.index)
                _LAST_SERVED.set((self._token, result.recorded.step.index, self._last_served()))
        if self._waiting:  # read unlocked: a waiter counts itself before it looks (``wait``)
            with self._asked:
                self._asked.notify_all()
        for wake in self._wakers:
            wake()
        return result

    def divert(self, recorded: RecordedStep) -> bool:
        """Whether the fault a fork injects at ``recorded``, just matched, fires now (once in the
        whole program): if so, the step counts as not served, and the next request like this
        one matches it as if this one never came."""
        with self.ledger.locked():
            fires = self.ledger.divert(recorded.step.index, recorded.endpoint)
        last = _LAST_SERVED.get()
        if fires and last is not None and last[0] is self._token:
            _LAST_SERVED.set((self._token, last[2], last[2]))  # this request never came
        return fires

    def _last_served(self) -> int:
        """The recorded step this thread or task was last given, -1 before any."""
        last = _LAST_SERVED.get()
        return last[1] if last is not None and last[0] is self._token else -1

    def started_during(self, recorded: RecordedStep) -> bool:
        """Whether the recording started a step another's response can wait for while
        ``recorded``'s response came (see :meth:`awaited`)."""
        start = recorded.step.start_ns
        if start <= 0:  # not known
            return False
        end = start + max([recorded.duration_ns, *(at for _, at in recorded.step.chunks)])
        starts = self._starts
        first = bisect.bisect_right(starts, (start, math.inf))
        return first < len(starts) and starts[first][0] < end

    def awaited(self, recorded: RecordedStep, at_ns: int) -> frozenset[int]:
        """What the piece of ``recorded``'s response that came ``at_ns`` after its request waits
        for: the steps the recording started between the request and that piece, except
        those a tool's body made (a served tool makes none of them)."""
        start = recorded.step.start_ns
        if start <= 0 or at_ns <= 0:
            return frozenset()
        # Each chunk of every streamed response asks this: a search, not a scan of the run.
        starts = self._starts
        first = bisect.bisect_right(starts, (start, math.inf))
        last = bisect.bisect_left(starts, (start + at_ns, -1), lo=first)
        return frozenset(index for _, index in starts[first:last])

    def unsent(
        self, recorded: RecordedStep, pieces: tuple[bytes, ...], ats: list[int]
    ) -> tuple[tuple[Unsent, ...], ...]:
        """For each piece of ``recorded``'s streamed response (that came ``ats`` ns after its
        request), its events answering a request a tool step's body made (``_unsent``)."""
        if self._unsent is None:
            self._unsent = UnsentAnswers(self.run)
        return self._unsent.find(recorded, pieces, ats)

    def deliverable(self, piece: bytes, unsent: tuple[Unsent, ...]) -> bytes:
        """``piece`` without those of ``unsent`` the replay never asked for: their tool step
        was served and the request not made. Asked once the piece's wait is over."""
        return without_unsent(piece, unsent, self.ledger.served) if unsent else piece

    def reached(self, steps: frozenset[int]) -> bool:
        """Whether every one of ``steps`` has been served."""
        served = self.ledger.served
        return all(served(index) for index in steps)

    def wait(self, steps: frozenset[int]) -> None:
        """Block until every one of ``steps`` has been served, or the replay has asked for
        nothing for :data:`IDLE_S` (see :meth:`patience`)."""
        with self._asked:
            self._waiting += 1
            try:
                while not self.reached(steps):
                    left = self._patience()
                    if left <= 0:
                        return
                    self._asked.wait(min(left, WAIT_SLICE_S))
            finally:
                self._waiting -= 1

    async def wait_async(self, steps: frozenset[int]) -> None:
        """:meth:`wait` without blocking the event loop (asyncio)."""
        if not steps or self.reached(steps):
            return
        import asyncio  # noqa: PLC0415 - loaded by any caller; the replay verb loads none

        loop = asyncio.get_running_loop()
        asked = asyncio.Event()

        def wake() -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(asked.set)

        undo = self.on_served(wake)
        try:
            while True:
                asked.clear()
                remaining = self.patience()
                if remaining <= 0 or self.reached(steps):
                    return
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asked.wait(), remaining)
        finally:
            undo()

    def patience(self) -> float:
        """Seconds a piece waiting for requests may still wait: :data:`IDLE_S` after the
        replay's last request. However slow the replay (a busy machine), a piece waits for the
        requests it came after, so the program sees them in the recorded order; a replay
        that stopped asking (it diverged, or went another way) gets the rest of the stream."""
        with self._lock:
            return self._patience()

    def _patience(self) -> float:
        asked, now = self.ledger.last_asked(), time.monotonic()
        if now - asked >= IDLE_MAX_S:
            return 0.0
        return asked + IDLE_S + self._starved.since(asked, now) - now

    def on_served(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Call ``wake`` (from whichever thread serves) after each served request; returns
        the undo."""
        with self._lock:
            self._wakers = (*self._wakers, wake)

        def undo() -> None:
            with self._lock:
                wakers = list(self._wakers)
                wakers.remove(wake)
                self._wakers = tuple(wakers)

        return undo

    def recorded_hash(self, body: bytes) -> str | None:
        """The ``request_hash`` a recorded step holds for exactly these bytes, or None."""
        return self._hash_of_body.get(body)

    def holds(self, endpoint: str) -> bool:
        """Whether the run has any step of ``endpoint``."""
        return endpoint in self._by_endpoint

    def served_count(self, index: int) -> int:
        """How many times recorded step ``index`` has been served."""
        return self.ledger.served(index)

    def unused(self) -> list[RecordedStep]:
        """Recorded steps no request has been answered with, in recorded order."""
        served = self.ledger.served
        return [s for s in self.run.steps if not served(s.step.index)]

    def nearest(self, method: str, url: str, body: bytes, count: int = 3) -> list[Near]:
        """The ``count`` recorded steps closest to a request: those of its endpoint first,
        closest in content (:func:`closeness`) first, then those with the fewest differing
        fields."""
        live = _read(method, url, body)
        content = content_of(_live_llm(live), live.parsed)
        ranked: list[tuple[bool, Closeness, int, int, Near]] = []
        for recorded in self.run.steps:
            fields = _fields_differing(recorded, method, live.path, live.parsed)
            same = recorded.endpoint == live.endpoint
            near = closeness(self._content(recorded), content) if same else ()
            ranked.append(
                (
                    not same,
                    tuple(-n for n in near),
                    len(fields),
                    recorded.step.index,
                    Near(recorded, fields),
                )
            )
        ranked.sort(key=lambda item: item[:4])
        return [item[4] for item in ranked[:count]]

    def _take(self, steps: list[RecordedStep], how: MatchKind, call_id: str | None = None) -> Match:
        """Of ``steps`` (alike for the request), the one answering the model's tool call
        ``call_id``; else this thread's or task's own: the first not served yet that its
        thread made right after the step this one was last given (``replay.step.after``), so
        concurrent threads drawing ``uuid4()`` or calling ``now()`` each get the values their
        own thread drew; else the first not served recorded after that step (a recording
        without ``replay.step.after``), else the first not served."""
        served = self.ledger.served
        if call_id is not None:
            for recorded in steps:
                if not served(recorded.step.index) and _call_id(recorded) == call_id:
                    return Match(recorded, how)
        last = self._last_served()
        later: RecordedStep | None = None
        first: RecordedStep | None = None
        for recorded in steps:
            if served(recorded.step.index):
                continue
            if _after(recorded) == last:
                return Match(recorded, how)
            if later is None and recorded.step.index > last:
                later = recorded
            if first is None:
                first = recorded
        chosen = later or first
        if chosen is not None:
            return Match(chosen, how)
        return Match(steps[-1], how, repeat=True)

    def _by_content(self, live: _Live, call_id: str | None = None) -> Match | None:
        key = _canonical_key(live.parsed)
        if key is None:
            return None
        if self._by_canonical is None:
            self._by_canonical = {}
            for recorded in self.run.steps:
                step_key = _canonical_key(parse_json(recorded.request_body))
                if step_key is not None:
                    self._by_canonical.setdefault(step_key, []).append(recorded)
        candidates = [s for s in self._by_canonical.get(key, ()) if s.endpoint == live.endpoint]
        return self._take(candidates, "canonical", call_id) if candidates else None

    def _by_messages(self, live: _Live) -> Match | None:
        if self._by_conversation is None:
            self._by_conversation = {}
            for recorded in self.run.steps:
                step_key = (
                    _recorded_conversation(recorded) if recorded.request_body is None else None
                )
                if step_key is not None:
                    self._by_conversation.setdefault(step_key, []).append(recorded)
        if not self._by_conversation:
            return None
        key = _request_conversation(live)
        candidates = [
            s for s in self._by_conversation.get(key or "", ()) if s.endpoint == live.endpoint
        ]
        return self._take(candidates, "messages") if candidates else None

    def _content(self, recorded: RecordedStep) -> Content:
        content = self._contents.get(recorded.step.index)
        if content is None:
            content = self._contents[recorded.step.index] = recorded_content(recorded)
        return content

    def _by_closeness(self, live: _Live, ordinal: int) -> Match | None:
        """The step not served yet of the live request's endpoint closest to it in content
        (:func:`closeness`); where content tells them apart by nothing, the ``ordinal``-th
        (or the next one not served yet after it; failing that, the first one not served yet,
        as when a changed request comes after the steps recorded after it), by position."""
        steps = self._by_endpoint.get(live.endpoint, ())
        served = self.ledger.served
        left = [recorded for recorded in steps if not served(recorded.step.index)]
        later = [recorded for recorded in steps[ordinal:] if not served(recorded.step.index)]
        after = {recorded.step.index for recorded in later}
        if len(left) > 1:
            content = content_of(_live_llm(live), live.parsed)
            scores = [closeness(self._content(recorded), content) for recorded in left]
            best = max(scores)
            if any(score != best for score in scores):
                closest = [
                    recorded for recorded, score in zip(left, scores, strict=True) if score == best
                ]
                in_order = [
                    recorded for recorded in closest if recorded.step.index in after
                ] or closest
                return Match(in_order[0], "closest")
        return Match((later or left)[0], "position") if left else None

    def _after_fork_in_child(self) -> None:
        # A thread of the parent may have held the lock; the account itself is shared.
        self._lock = threading.Lock()
        self._asked = threading.Condition(self._lock)


class _Starved:
    """How long, since the replay's last request, the program was ready to run but could not
    (other processes had the CPUs): a starved program is slow to make its next request, not
    done asking, and a piece served before that request comes reaches a client that never
    sent it (an MCP session drops the answer, then waits for it for ever).

    Measured as the largest growth of any of the process's threads' run-queue wait
    (``/proc/self/task/*/schedstat``) between two looks; nothing where Linux does not say.
    """

    def __init__(self) -> None:
        self._at = -1.0  # when last looked (time.monotonic()); -1: never
        self._queued: dict[str, int] = {}  # each thread's run-queue wait then, ns
        self._asked = -1.0  # the last request it was counted from
        self._starved = 0.0

    def since(self, asked: float, now: float) -> float:
        """Seconds the program waited for a CPU between ``asked`` and ``now``, as far as the
        looks tell."""
        queued = _run_queue_waits()
        grown = 0.0
        if self._at >= 0:
            before = self._queued  # a thread started since the last look waited since then
            grown = max((ns - before.get(tid, 0) for tid, ns in queued.items()), default=0) / 1e9
        if asked != self._asked:
            self._asked, self._starved = asked, 0.0
        # A wait shows once the thread runs again, so the growth can go back past the last
        # look, even past ``asked``: what is counted stays within the time since ``asked``.
        self._starved = min(self._starved + max(grown, 0.0), max(now - asked, 0.0))
        self._at, self._queued = now, queued
        return self._starved


def _run_queue_waits() -> dict[str, int]:
    """Nanoseconds each thread of this process has spent ready to run but not running; {}
    where the kernel does not say."""
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return {}
    waits = {}
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/schedstat", "rb") as stat:
                waits[tid] = int(stat.read().split()[1])
        except (OSError, ValueError, IndexError):  # the thread ended meanwhile
            continue
    return waits


def _after(recorded: RecordedStep) -> int:
    """The step its thread made before ``recorded`` (``replay.step.after``), -1 for none."""
    after = recorded.attributes.get(A.REPLAY_STEP_AFTER)
    return after if isinstance(after, int) and not isinstance(after, bool) else -1


def _call_id(recorded: RecordedStep) -> Any:
    """The model's tool call a recorded tool step answered (None when not known)."""
    return recorded.attributes.get("gen_ai.tool.call.id")


def _target(method: str, url: str) -> str:
    """What besides the body identifies a call other than a model call (GETs all have the
    same empty body): method, path and query."""
    parts = urlsplit(url)
    return f"{method.upper()} {parts.path}?{parts.query}"


def _recorded_target(recorded: RecordedStep) -> str | None:
    """:func:`_target` of a recorded step; None for a model call, whose body says it all."""
    if recorded.step.kind == "llm":
        return None
    if not recorded.step.url:  # no URL recorded: the endpoint's path, and no query
        return f"{recorded.endpoint}?"
    return _target(recorded.step.method, recorded.step.url)


def _fields_differing(recorded: RecordedStep, method: str, path: str, new: Any) -> tuple[str, ...]:
    fields: list[str] = []
    if recorded.step.method.upper() != method.upper():
        fields.append("method")
    if recorded.step.url and urlsplit(recorded.step.url).path != path:
        fields.append("path")
    old = parse_json(recorded.request_body)
    if old is None and recorded.request_body is None:
        old = _attributes_as_request(recorded.attributes)
    old, new = without_trace_context(old), without_trace_context(new)
    if old is not None or new is not None:
        fields.extend(p if p != "$" else "body" for p in json_paths_differing(old, new))
    return tuple(fields)


def _attributes_as_request(attrs: Mapping[str, Any]) -> dict[str, Any] | None:
    """A recorded step without bytes, shown through the request attributes it has."""
    model = attrs.get("gen_ai.request.model")
    return {"model": model} if model is not None else None
