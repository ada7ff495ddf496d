"""The exporter's writer thread: the only thread that touches the store.

It drains the exporter's hand-off queue in batches. A step goes to the store with its span,
in one put (the store then takes the span's inline bodies for the step's, compared rather than
hashed again), once the span has ended: a step whose span is still open (another
instrumentation's span, ended after the response) stays *parked* and is polled every few
milliseconds. Steps sharing one span (a retry inside such a span) are written with it once.
Spans that reach ``export()`` without coming through the hand-off are posted as
:class:`Spans`. Barriers (:class:`Barrier`) are answered once everything queued before them
is durable.

A run's end (:class:`~otel_replay.step.RunEnd`, posted by the capture when a ``run()`` block
exits) is written with the steps queued before it. One batch is one ``Store.flush``
(fsync-ed): the first step of a batch waits up to :data:`GATHER_S` for others (a barrier cuts
the wait short), so a burst is written in few large flushes and a quiet agent's step is
durable within that time. When a flush fails the store keeps the
batch and the writer retries with back-off; the bytes stay counted in the hand-off, whose bound
then holds the application back instead of memory growing.
"""

from __future__ import annotations

import contextlib
import hashlib
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_replay import attributes as A
from otel_replay.capture._handoff import Consumer
from otel_replay.export._encode import run_id_of, span_to_dict
from otel_replay.export._failures import Failures
from otel_replay.step import RunEnd, Step
from otel_replay.store import Store

__all__ = ["Barrier", "Spans", "Writer"]

BATCH_MAX = 512
"""Queue items taken per flush at most: large enough that a burst is written in few flushes,
small enough that one batch takes a fraction of a second."""
GATHER_S = 0.05
"""After the first step of a batch arrives, how long the writer waits for more before writing
(a barrier cuts it short). Waking once per batch instead of once per step keeps the writer
from taking the GIL from the application at every step."""
PARK_POLL_S = 0.005
"""How often parked steps are checked for their span's end."""
PARK_MAX_S = 60.0
"""A step whose span has not ended after this long is written with the span as it is."""
RETRY_MIN_S, RETRY_MAX_S = 0.25, 5.0
"""Back-off between attempts when the store cannot be opened or flushed."""
WRITTEN_MAX = 4096
"""Span ids remembered as written, so a span shared by several steps is written once."""
SPANS_MAX = 100_000
"""Spans from ``export()`` held while the store is failing; older ones are given up beyond."""
MERGE_S = 1.0
"""The most a shutdown spends, counted from its start, merging the packs and record files the
session wrote (a tenth of the timeout when that is less). Merging only saves space: what a
shutdown leaves, ``gc`` or ``compact`` merges later."""


class Barrier:
    """A message in the writer's queue, answered once everything before it is durable.

    ``parked``: also write parked steps now, with their spans as they are (for SIGTERM).
    ``final``: the last message; the writer writes everything and stops.
    """

    __slots__ = ("done", "final", "ok", "parked")

    def __init__(self, *, parked: bool = False, final: bool = False) -> None:
        self.done = threading.Event()
        self.ok = False
        self.parked = parked or final
        self.final = final


class Spans:
    """Encoded spans from ``export()`` that did not come through the hand-off."""

    __slots__ = ("spans",)

    def __init__(self, spans: list[dict[str, Any]]) -> None:
        self.spans = spans


@dataclass(slots=True)
class _Group:
    """Steps ready to be put, with their span: put together, so the store finds the span's
    inline bodies among the steps' bodies instead of hashing them again.

    ``span`` is None when it is not recorded (sampled out) or was written with an earlier
    step; ``end_ns`` stands in for the end of a span that never ended (its last step's end).
    ``size`` is what the steps count in the hand-off.
    """

    steps: list[Step]
    span: ReadableSpan | None
    end_ns: int
    size: int


DISCARDED_MAX = 1024
"""Sampled-out runs remembered, so that what comes of them after their end is dropped."""


def kept(run_id: str, share: float) -> bool:
    """Whether run ``run_id``, ended without an error, keeps its fixtures under
    ``OTEL_REPLAY_SAMPLE_OK=share``: decided by the run id's hash, so every process and
    every exporter of one run decides alike."""
    if share >= 1:
        return True
    digest = hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") < share * 2**64


class Writer:
    """Writes what the hand-off and ``export()`` give it into the store; see the module."""

    def __init__(
        self,
        consumer: Consumer,
        open_store: Callable[[], Store],
        where: str,
        *,
        owns_store: bool,
        failures: Failures,
        sample_ok: float = 1.0,
    ) -> None:
        self._consumer = consumer
        self._sample_ok = sample_ok
        # Runs that ended without an error and were sampled out (OTEL_REPLAY_SAMPLE_OK): to
        # discard once their end is durable, then discarded (what of them comes later is
        # dropped; the latest runs only).
        self._to_discard: list[str] = []
        self._discarded: dict[str, None] = {}
        # One token per barrier posted: it ends the writer's wait for a batch to gather. A
        # SimpleQueue, because barriers are posted from signal handlers too.
        self._urgent: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._open_store = open_store
        self._where = where
        self._owns_store = owns_store
        self._failures = failures
        self._store: Store | None = None
        self._thread = threading.Thread(target=self._run, name="otel-replay-writer", daemon=True)
        # Steps whose span is still open, by span id: several steps can share one span (an
        # SDK retry inside another instrumentation's span); the span is written once.
        self._parked: dict[int, tuple[list[tuple[Step, int]], ReadableSpan, float]] = {}
        # Spans written lately: a later step of the same span brings its fixture only.
        self._written: dict[int, None] = {}
        # Ready for the next put: steps with their spans (SDK spans are encoded as they are
        # put), spans from export() (encoded), and run ends.
        self._groups: list[_Group] = []
        self._spans: list[dict[str, Any]] = []
        self._ends: list[RunEnd] = []
        # Put into the store, not yet durable.
        self._unflushed = (0, 0, 0)  # steps, spans, bytes
        self._failing = False
        self._merge_until = 0.0
        self._retry_at = 0.0
        self._retry_s = RETRY_MIN_S
        self.steps = 0
        """Steps made durable."""
        self.spans = 0
        """Spans made durable."""
        self.failed = 0
        """Steps and spans given up (invalid, or the store still failing at the end)."""
        self.flush_errors = 0
        """Store flushes (or opens) that failed; each was retried."""
        self.cycles = 0
        """Batches handled so far (a barrier that times out while this stands still means
        the store is stuck, not merely slow)."""

    @property
    def pending(self) -> int:
        """Steps and spans taken from the queue and not durable yet."""
        steps, spans, _ = self._unflushed
        parked = sum(len(steps) for steps, _, _ in self._parked.values())
        ready = sum(len(g.steps) + (g.span is not None) for g in self._groups)
        return ready + len(self._spans) + parked + steps + spans

    @property
    def opened(self) -> bool:
        """The store has been opened (the first write was attempted)."""
        return self._store is not None

    @property
    def failing(self) -> bool:
        """The last attempt to write the store failed (it is being retried)."""
        return self._failing

    def backlog(self) -> int:
        """About how many steps and messages wait in the queue."""
        return self._consumer.backlog()

    def start(self) -> None:
        self._thread.start()

    def alive(self) -> bool:
        return self._thread.is_alive()

    # -- called from other threads --------------------------------------------------------

    def submit(self, spans: list[dict[str, Any]]) -> None:
        """Write ``spans`` (encoded) with the next flush."""
        self._consumer.post(Spans(spans))

    def barrier(self, timeout: float, *, parked: bool = False) -> bool:
        """Wait until everything queued so far is durable; False on failure or timeout.

        Safe in a signal handler: it posts without a lock and waits on an event of its own.
        """
        if not self._thread.is_alive():
            return False
        return self._wait(Barrier(parked=parked), timeout)

    def stop(self, timeout: float) -> bool:
        """Write everything (parked steps too), close the store if it is ours, and stop."""
        if not self._thread.is_alive():
            return False
        started = time.monotonic()
        self._merge_until = started + min(MERGE_S, timeout / 10)
        ok = self._wait(Barrier(final=True), timeout)
        self._thread.join(max(0.0, started + timeout - time.monotonic()))
        return ok

    def _wait(self, barrier: Barrier, timeout: float) -> bool:
        self._consumer.post(barrier)
        self._urgent.put(None)
        deadline = time.monotonic() + timeout
        # Wait in slices: if the thread ends without answering, do not wait for nothing.
        while not barrier.done.wait(min(0.1, max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline or not self._thread.is_alive():
                return barrier.done.is_set() and barrier.ok
        return barrier.ok

    # -- the thread -----------------------------------------------------------------------

    def _run(self) -> None:
        final = False
        while not final:
            try:
                final = self._cycle()
            except Exception as exc:  # a bug of ours: keep the thread (and the data) alive
                self._failures.report("writer", "the replay exporter's writer failed: %r", exc)
                time.sleep(RETRY_MIN_S)
        self._close()

    def _cycle(self) -> bool:
        first = self._consumer.get(timeout=self._sleep_time())
        if first is not None and not isinstance(first, Barrier):
            self._gather()
        items = [] if first is None else [first]
        items.extend(self._consumer.drain(BATCH_MAX))
        barriers: list[Barrier] = []
        for item in items:
            if type(item) is tuple:
                self._accept(*item)
            elif isinstance(item, Spans):
                self._spans.extend(item.spans)
            elif isinstance(item, RunEnd):
                self._ends.append(item)
            elif isinstance(item, Barrier):
                barriers.append(item)
        final = any(b.final for b in barriers)
        self._sweep(force=any(b.parked for b in barriers))
        ok, release = self._persist(retry_now=bool(barriers))
        if final and not ok:
            release += self._give_up()
        for barrier in barriers:
            barrier.ok = ok
            barrier.done.set()
        # After answering: releasing takes the hand-off's lock, which a thread interrupted by
        # SIGTERM may hold while the handler waits for the barrier above.
        if release:
            self._consumer.release(release)
        self.cycles += 1
        return final

    def _gather(self) -> None:
        """Let a batch gather for up to :data:`GATHER_S`, less when a barrier is posted."""
        with contextlib.suppress(queue.Empty):
            self._urgent.get(timeout=GATHER_S)

    def _sleep_time(self) -> float | None:
        if self._parked:
            return PARK_POLL_S
        if self._failing or self._groups or self._spans or self._ends:
            return max(0.0, self._retry_at - time.monotonic())
        return None

    def _accept(self, fixture: Step, span: Any, size: int) -> None:
        # Every step is parked, so steps sharing a span are grouped; the sweep that follows
        # each batch moves those whose span has ended on.
        if isinstance(span, ReadableSpan):
            parked = self._parked.get(fixture.span_id)
            if parked is None:
                self._parked[fixture.span_id] = ([(fixture, size)], span, time.monotonic())
            else:
                parked[0].append((fixture, size))
        else:
            self._ready([(fixture, size)], span)

    def _ready(self, steps: list[tuple[Step, int]], span: Any) -> None:
        group = _Group([s for s, _ in steps], None, steps[-1][0].end_ns, sum(n for _, n in steps))
        self._groups.append(group)
        if not isinstance(span, ReadableSpan) or run_id_of(span) is None:
            return  # a non-recording span (sampled out): the steps alone
        span_id = steps[0][0].span_id
        if span_id in self._written:
            return
        self._written[span_id] = None
        if len(self._written) > WRITTEN_MAX:
            del self._written[next(iter(self._written))]
        group.span = span

    def _sweep(self, *, force: bool) -> None:
        """Move parked steps whose span ended (all of them with ``force``, or after
        :data:`PARK_MAX_S`) to the ready list."""
        if not self._parked:
            return
        now = time.monotonic()
        for span_id, (steps, span, since) in list(self._parked.items()):
            if span.end_time is not None or force or now - since > PARK_MAX_S:
                del self._parked[span_id]
                self._ready(steps, span)

    def _persist(self, *, retry_now: bool) -> tuple[bool, int]:
        """Put what is ready into the store and flush it: (durable?, bytes to release)."""
        if not (self._groups or self._spans or self._ends or any(self._unflushed[:2])):
            return not self._failing, 0
        if not retry_now and time.monotonic() < self._retry_at:
            return False, 0
        store = self._open()
        if store is None:
            return False, 0
        try:
            self._put(store)
        except Exception as exc:  # e.g. a store closed under us: keep what is left, retry
            self._failed_attempt("write", exc)
            return False, 0
        try:
            store.flush()
            self._discard(store)
        except Exception as exc:
            self._failed_attempt("write", exc)
            return False, 0
        done_steps, done_spans, size = self._unflushed
        self._unflushed = (0, 0, 0)
        self.steps += done_steps
        self.spans += done_spans
        if self._failing:
            self._failing = False
            self._retry_s = RETRY_MIN_S
            self._failures.recovered(
                "store",
                "the store at %s is writable again; the kept steps are written",
                self._where,
            )
        return True, size

    def _put(self, store: Store) -> None:
        """Buffer what is ready into the store, taking each item off the ready lists once the
        store has it (an error other than a refusal leaves the rest for the retry). An item
        the store refuses (ValueError) is counted and left out, never the items around it.

        Each SDK span is turned into its dict only as it is put, with its steps: the store
        encodes it at once, so a batch holds encoded spans, not thousands of dicts.
        """
        done = 0
        discarded = self._discarded
        try:
            for group in self._groups:
                if group.steps[0].run_id not in discarded:
                    self._put_group(store, group)
                done += 1
        finally:
            del self._groups[:done]
        done = 0
        try:
            for span in self._spans:
                if span.get("attributes", {}).get(A.REPLAY_RUN_ID) not in discarded:
                    self._count(0, self._put_one(store, [], [span]), 0)
                done += 1
        finally:
            del self._spans[:done]
        while self._ends:
            end = self._ends[0]
            store.end_run(end)
            if end.error_type is None and not kept(end.run_id, self._sample_ok):
                self._to_discard.append(end.run_id)
            del self._ends[0]

    def _discard(self, store: Store) -> None:
        """Remove the runs sampled out, now that their end is durable."""
        while self._to_discard:
            run_id = self._to_discard[0]
            store.discard(run_id)
            self._discarded[run_id] = None
            if len(self._discarded) > DISCARDED_MAX:
                del self._discarded[next(iter(self._discarded))]
            del self._to_discard[0]

    def _put_group(self, store: Store, group: _Group) -> None:
        spans: list[dict[str, Any]] = []
        if group.span is not None:
            try:
                spans.append(span_to_dict(group.span, end_ns=group.end_ns))
            except Exception as exc:
                group.span = None  # counted once, whatever happens to the steps
                self.failed += 1
                self._failures.report("encode", "a span could not be encoded: %r", exc)
        try:
            store.put(group.steps, spans)
        except ValueError:  # one of them is refused: find which, keep the others
            steps = sum(self._put_one(store, [step], []) for step in group.steps)
            self._count(steps, sum(self._put_one(store, [], [s]) for s in spans), group.size)
        else:
            self._count(len(group.steps), len(spans), group.size)

    def _count(self, steps: int, spans: int, size: int) -> None:
        """Note steps and spans put (and the bytes of the steps), durable at the next flush."""
        old = self._unflushed
        self._unflushed = (old[0] + steps, old[1] + spans, old[2] + size)

    def _put_one(self, store: Store, fixtures: list[Step], spans: list[dict[str, Any]]) -> int:
        """Put one step or span: 1, or 0 when the store refuses it (counted and reported)."""
        try:
            store.put(fixtures, spans)
            return 1
        except ValueError as exc:
            self.failed += 1
            what = "step" if fixtures else "span"
            self._failures.report(f"invalid {what}", f"a {what} was not stored: %s", exc)
            return 0

    def _open(self) -> Store | None:
        if self._store is None:
            try:
                self._store = self._open_store()
            except Exception as exc:
                self._failed_attempt("open", exc)
                return None
        return self._store

    def _failed_attempt(self, what: str, exc: BaseException) -> None:
        # One kind for open and write: either way the store cannot be written (and the
        # recovery message re-arms it).
        self.flush_errors += 1
        self._failing = True
        self._failures.report(
            "store",
            "cannot %s the store at %s (%s: %s); steps are kept and the write is retried",
            what,
            self._where,
            type(exc).__name__,
            _one_line(exc),
        )
        self._retry_at = time.monotonic() + self._retry_s
        self._retry_s = min(RETRY_MAX_S, self._retry_s * 2)
        if len(self._spans) > SPANS_MAX:
            dropped = len(self._spans) - SPANS_MAX
            del self._spans[:dropped]
            self.failed += dropped

    def _give_up(self) -> int:
        """At the end, with the store still failing: count what is lost, free its bytes."""
        steps, spans, size = self._unflushed
        lost = steps + spans + len(self._spans)
        for group in self._groups:
            lost += len(group.steps) + (group.span is not None)
            size += group.size
        self._groups, self._spans = [], []
        self._unflushed = (0, 0, 0)
        if lost:
            self.failed += lost
            self._failures.report(
                "lost",
                "%d steps and spans could not be written to the store at %s",
                lost,
                self._where,
            )
        return size

    def _close(self) -> None:
        if self._store is not None and self._owns_store:
            try:
                self._store.close(timeout=max(0.0, self._merge_until - time.monotonic()))
            except Exception as exc:
                self._failures.report(
                    "close", "closing the store at %s failed: %s", self._where, _one_line(exc)
                )


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
