"""The exporter's writer thread: the only thread that touches the store."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import queue
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY
from opentelemetry.sdk.trace import ReadableSpan

from otel_replay import attributes as A
from otel_replay.export._encode import run_id_of, span_to_dict
from otel_replay.export._sigterm import keep_off_this_thread
from otel_replay.runs import Consumer
from otel_replay.step import RunEnd, Step
from otel_replay.store import Buffered, Store

__all__ = ["Barrier", "Failures", "Spans", "Writer"]

BATCH_MAX = 512
"""Queue items taken per flush at most: large enough that a burst is written in few flushes,
small enough that one batch takes a fraction of a second."""
GATHER_S = 0.05
"""After the first step of a batch arrives, how long the writer waits for more before writing
(a barrier cuts it short; a full batch already queued skips it). Waking once per batch
instead of once per step keeps the writer from taking the GIL from the application at every
step."""
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
    ``close``: then close the store (if it is the writer's); a later write opens it again.
    ``final``: the last message; the writer writes everything, closes the store and stops.
    """

    __slots__ = ("close", "done", "final", "ok", "parked")

    def __init__(self, *, parked: bool = False, close: bool = False, final: bool = False) -> None:
        self.done = threading.Event()
        self.ok = False
        self.parked = parked or close or final
        self.close = close
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
    ``sizes`` are what the steps count in the hand-off.
    """

    steps: list[Step]
    span: ReadableSpan | None
    end_ns: int
    sizes: list[int]


@dataclass(slots=True)
class _Unflushed:
    """Put into the store, not durable yet: each run's steps' sizes in the hand-off (in the
    order put), and how many spans."""

    steps: dict[str, list[int]] = field(default_factory=dict)
    spans: int = 0

    def __bool__(self) -> bool:
        return bool(self.steps or self.spans)

    def add(self, steps: list[Step], sizes: list[int], spans: int) -> None:
        for step, size in zip(steps, sizes, strict=True):
            self.steps.setdefault(step.run_id, []).append(size)
        self.spans += spans

    def settle(self, left: Buffered | None) -> tuple[int, int, int]:
        """Forget what became durable, when the store still holds ``left`` (None: nothing):
        (steps, spans, bytes) made durable. A store that wrote part of its buffer wrote
        each run's earliest steps."""
        steps = size = 0
        for run_id, sizes in list(self.steps.items()):
            keep = 0 if left is None else left.steps.get(run_id, 0)
            done = sizes[: len(sizes) - keep]
            steps += len(done)
            size += sum(done)
            if keep:
                self.steps[run_id] = sizes[len(sizes) - keep :]
            else:
                del self.steps[run_id]
        spans = self.spans - (0 if left is None else min(left.spans, self.spans))
        self.spans -= spans
        return steps, spans, size


DISCARDED_MAX = 1024
"""Sampled-out runs remembered, so that what comes of them after their end is dropped."""


def kept(run_id: str, share: float) -> bool:
    """Whether run ``run_id``, ended without an error, is kept under
    ``OTEL_REPLAY_SAMPLE_OK=share``: decided by the run id's hash, so every process and
    every exporter of one run decides alike."""
    if share >= 1:
        return True
    digest = hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") < share * 2**64


class Writer:
    """Writes what the hand-off and ``export()`` give it into the store, one ``Store.flush`` per
    batch; a step waits, *parked*, until its span has ended."""

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
        self._discarded: OrderedDict[str, None] = OrderedDict()
        # One token per barrier posted: it ends the writer's wait for a batch to gather. A
        # SimpleQueue, because barriers are posted from signal handlers too.
        self._urgent: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._open_store = open_store
        self._where = where
        self._owns_store = owns_store
        self._failures = failures
        self._store: Store | None = None
        # Held while the thread is in the store (see :meth:`pause`).
        self._in_store = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="otel-replay-writer", daemon=True)
        # Steps whose span is still open, by span id: several steps can share one span (an
        # SDK retry inside another instrumentation's span); the span is written once.
        self._parked: dict[int, tuple[list[tuple[Step, int]], ReadableSpan, float]] = {}
        # Spans written lately: a later step of the same span is put without it. FIFO
        # dicts are OrderedDicts: forgetting the oldest entry of a plain dict scans the slots
        # its earlier deletions left, a cost that grows with the churn.
        self._written: OrderedDict[int, None] = OrderedDict()
        # Ready for the next put: steps with their spans (SDK spans are encoded as they are
        # put), spans from export() (encoded), and run ends.
        self._groups: list[_Group] = []
        self._spans: list[dict[str, Any]] = []
        self._ends: list[RunEnd] = []
        # Put into the store, not yet durable.
        self._unflushed = _Unflushed()
        self._refused = 0  # bytes of steps the store refused, given back at the next flush
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
        self.lost = Buffered({}, 0)
        """Steps (how many of each run) and spans given up because the store still failed
        at the end."""
        self.error = ""
        """The last failure to open or write the store, on one line (empty: none yet)."""
        self.flush_errors = 0
        """Store flushes (or opens) that failed; each was retried."""
        self.cycles = 0
        """Batches handled so far (a barrier that times out while this stands still means
        the store is stuck, not merely slow)."""

    @property
    def pending(self) -> int:
        """Steps and spans taken from the queue and not durable yet."""
        left = self.unwritten()
        return sum(left.steps.values()) + left.spans

    def unwritten(self) -> Buffered:
        """Steps (how many of each run) and spans taken from the queue, not durable yet."""
        groups = list(self._groups)
        held = [step for steps, _, _ in list(self._parked.values()) for step, _ in steps]
        held += [step for group in groups for step in group.steps]
        steps = Counter(step.run_id for step in held)
        for run_id, sizes in list(self._unflushed.steps.items()):
            steps[run_id] += len(sizes)
        spans = len(self._spans) + self._unflushed.spans + sum(g.span is not None for g in groups)
        return Buffered(dict(steps), spans)

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

    def barrier(self, timeout: float, *, parked: bool = False, close: bool = False) -> bool:
        """Wait until everything queued so far is durable (see :class:`Barrier`); False on
        failure or timeout.

        Safe in a signal handler: it posts without a lock and waits on an event of its own.
        """
        if not self._thread.is_alive():
            return False
        if close:  # merging at close is optional: it takes a small part of the time, at most
            self._merge_until = time.monotonic() + min(MERGE_S, timeout / 10)
        return self._wait(Barrier(parked=parked, close=close), timeout)

    def stop(self, timeout: float) -> bool:
        """Write everything (parked steps too), close the store if it is ours, and stop."""
        if not self._thread.is_alive():
            return False
        started = time.monotonic()
        self._merge_until = started + min(MERGE_S, timeout / 10)
        ok = self._wait(Barrier(final=True), timeout)
        self._thread.join(max(0.0, started + timeout - time.monotonic()))
        return ok

    def pause(self, timeout: float) -> bool:
        """Wait up to ``timeout`` until the thread is out of the store, and keep it out until
        :meth:`resume`; False (nothing held) when it did not come out in time.

        For a fork: the child gets a copy of SQLite's process-wide state as it is, and a
        lock the thread held then (the index's write lock, a mutex) would stay held in the
        child for good, where no thread is left to release it. Its own writer would wait for
        it until the child ended, the child's steps unwritten.
        """
        return self._in_store.acquire(timeout=timeout)

    def resume(self) -> None:
        """Let the thread into the store again, after :meth:`pause`."""
        self._in_store.release()

    def abandon(self) -> Buffered:
        """What will not be written, the process ending now: the steps (how many of each run)
        and spans still queued, which are dropped, and those taken but not durable yet."""
        left = self.unwritten()
        steps = Counter(left.steps)
        spans = left.spans
        for item in self._consumer.drain():
            if type(item) is tuple:
                steps[item[0].run_id] += 1
            elif isinstance(item, Spans):
                spans += len(item.spans)
        return Buffered(dict(steps), spans)

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
        keep_off_this_thread()  # and off the store's threads, which start from this one
        # The store's own requests (a remote store's, through aiohttp or urllib3) are not the
        # application's: unsuppressed, the capture would record each write as a step, whose
        # write would be recorded again. The context follows the calls onto fsspec's loop.
        context.attach(context.set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
        final = False
        while not final:
            try:
                final = self._cycle()
            except Exception as exc:  # a bug of ours: keep the thread (and the data) alive
                self._failures.report("writer", "the replay exporter's writer failed: %r", exc)
                time.sleep(RETRY_MIN_S)
        with self._in_store:
            self._close()

    def _cycle(self) -> bool:
        first = self._consumer.get(timeout=self._sleep_time())
        if (
            first is not None
            and not isinstance(first, Barrier)
            and self._consumer.backlog() < BATCH_MAX - 1
        ):
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
        with self._in_store:
            ok, release = self._persist(retry_now=bool(barriers))
            if ok and any(b.close for b in barriers):
                self._close()
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

    def _accept(self, step: Step, span: Any, size: int) -> None:
        # Every step is parked, so steps sharing a span are grouped; the sweep that follows
        # each batch moves those whose span has ended on.
        if isinstance(span, ReadableSpan):
            parked = self._parked.get(step.span_id)
            if parked is None:
                self._parked[step.span_id] = ([(step, size)], span, time.monotonic())
            else:
                parked[0].append((step, size))
        else:
            self._ready([(step, size)], span)

    def _ready(self, steps: list[tuple[Step, int]], span: Any) -> None:
        group = _Group([s for s, _ in steps], None, steps[-1][0].end_ns, [n for _, n in steps])
        self._groups.append(group)
        if not isinstance(span, ReadableSpan) or run_id_of(span) is None:
            return  # a non-recording span (sampled out): the steps alone
        span_id = steps[0][0].span_id
        if span_id in self._written:
            return
        self._written[span_id] = None
        if len(self._written) > WRITTEN_MAX:
            self._written.popitem(last=False)
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
        if not (self._groups or self._spans or self._ends or self._unflushed):
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
            # A full device takes what fits: that part is durable, its room is given back.
            _, _, size = self._settle(store.buffered())
            self._failed_attempt("write", exc)
            return False, size
        _, _, size = self._settle(None)
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
                    self._unflushed.add([], [], self._put_one(store, [], [span]))
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
                self._discarded.popitem(last=False)
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
            put = [self._put_one(store, [step], []) for step in group.steps]
            steps = [step for step, ok in zip(group.steps, put, strict=True) if ok]
            sizes = [size for size, ok in zip(group.sizes, put, strict=True) if ok]
            spans_put = sum(self._put_one(store, [], [s]) for s in spans)
            self._unflushed.add(steps, sizes, spans_put)
            self._refused += sum(size for size, ok in zip(group.sizes, put, strict=True) if not ok)
        else:
            self._unflushed.add(group.steps, group.sizes, len(spans))

    def _settle(self, left: Buffered | None) -> tuple[int, int, int]:
        """Count what the store made durable (it still holds ``left``): (steps, spans, bytes
        to give back to the hand-off, refused steps' too)."""
        steps, spans, size = self._unflushed.settle(left)
        self.steps += steps
        self.spans += spans
        size, self._refused = size + self._refused, 0
        return steps, spans, size

    def _put_one(self, store: Store, steps: list[Step], spans: list[dict[str, Any]]) -> int:
        """Put one step or span: 1, or 0 when the store refuses it (counted and reported)."""
        try:
            store.put(steps, spans)
            return 1
        except ValueError as exc:
            self.failed += 1
            what = "step" if steps else "span"
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
        self.error = f"{type(exc).__name__}: {_one_line(exc)}"
        self._failures.report(
            "store",
            "cannot %s the store at %s (%s); steps are kept and the write is retried",
            what,
            self._where,
            self.error,
        )
        self._retry_at = time.monotonic() + self._retry_s
        self._retry_s = min(RETRY_MAX_S, self._retry_s * 2)
        if len(self._spans) > SPANS_MAX:
            dropped = len(self._spans) - SPANS_MAX
            del self._spans[:dropped]
            self.failed += dropped

    def _give_up(self) -> int:
        """At the end, with the store still failing: count what is lost (:attr:`lost`), and
        free its bytes."""
        left = self.unwritten()
        self.lost = left
        self.failed += sum(left.steps.values()) + left.spans
        size = sum(sum(sizes) for sizes in self._unflushed.steps.values()) + self._refused
        size += sum(sum(group.sizes) for group in self._groups)
        self._groups, self._spans = [], []
        self._unflushed, self._refused = _Unflushed(), 0
        return size

    def _close(self) -> None:
        """Close the store if it is ours; a later write opens it again."""
        store = self._store
        if store is not None and self._owns_store:
            self._store = None
            try:
                store.close(timeout=max(0.0, self._merge_until - time.monotonic()))
            except Exception as exc:
                if not self._failing:  # else what it could not write is named once, at the end
                    self._failures.report(
                        "close", "closing the store at %s failed: %s", self._where, _one_line(exc)
                    )


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


_log = logging.getLogger("otel_replay.export")


class Failures:
    """Logs the first failure of each kind as a warning; later ones of that kind at debug.

    Messages name the store and the error's one-line message (store errors never quote
    bodies or headers), never a body.
    """

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def report(self, kind: str, message: str, *args: object) -> None:
        """Log ``message % args`` for a failure of ``kind``."""
        with self._lock:
            first = kind not in self._seen
            self._seen.add(kind)
        _log.log(logging.WARNING if first else logging.DEBUG, "otel-replay: " + message, *args)

    def recovered(self, kind: str, message: str, *args: object) -> None:
        """Log that failures of ``kind`` stopped (only if one was reported), and re-arm it."""
        with self._lock:
            if kind not in self._seen:
                return
            self._seen.discard(kind)
        _log.warning("otel-replay: " + message, *args)
