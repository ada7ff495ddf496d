"""One replay in one process: match each request, answer it, and report every event."""

from __future__ import annotations

import builtins
import contextvars
import json
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import IO, Any

from opentelemetry import context, trace
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY

from otel_replay import attributes as A
from otel_replay._bodies import is_sse
from otel_replay._canonical import sha256_tag
from otel_replay._forks import mend_in_child
from otel_replay._ignore import (
    ANSWER_BODY,
    ANSWER_HEADERS,
    DEFAULT_RULES,
    IgnoreRules,
    call_of,
    status_for,
)
from otel_replay._printable import printable
from otel_replay._workers import unmatched
from otel_replay.capture import in_exchange
from otel_replay.envelope import Served, ToolEffect, content_type_shape, in_replay
from otel_replay.errors import RecordedValueError
from otel_replay.redact import Redactor
from otel_replay.replay._background import without_background
from otel_replay.replay._change import Change, change
from otel_replay.replay._diff import (
    MintedIds,
    Request,
    endpoint_codec,
    parse_json,
    request_changes,
)
from otel_replay.replay._faults import injected_answer, injected_served
from otel_replay.replay._fork import Fault, ForkPlan
from otel_replay.replay._live_from import LiveFrom, result_changes, write_refusal
from otel_replay.replay._match import Match, Matcher, endpoint_of_request
from otel_replay.replay._model import RecordedStep, Run
from otel_replay.replay._override import served_instead
from otel_replay.replay._result import AgentStatus, BadValue, ReplayResult
from otel_replay.replay._served import ServedStep, live_event
from otel_replay.replay._unsent import Unsent
from otel_replay.replay.synth import synthesize
from otel_replay.runs import qualified_name
from otel_replay.settings import Timing

__all__ = ["Answer", "ReplaySession", "cancelled_by_program", "interruption"]


_SENT_LIVE: contextvars.ContextVar[tuple[object, int] | None] = contextvars.ContextVar(
    "otel_replay_sent_live", default=None
)
"""(the session, the order of the request) when this thread or task's last request went live
past a fork's live point: its transport tells the session how the live call ended."""


@dataclass(slots=True)  # not frozen: a frozen one is slower to make, once per request
class Answer:
    """What the transport serves for one request.

    ``chunks`` are the body's pieces in recorded order and ``times`` when each is due (ns after
    the request, zeros under ``fast`` timing). ``error_type`` set means: raise that transport
    error, before any response when ``status_code`` is None, after the chunks otherwise.
    ``awaits`` says what each chunk, then the end, waits for (empty: nothing); ``unsent``
    which events of each chunk may answer requests the replay never makes (empty: none; see
    ``Matcher.deliverable``). ``complete``: the recorded body reached its end (False: the
    program let the response go before it).
    """

    status_code: int | None
    headers: tuple[tuple[str, str], ...]
    chunks: tuple[bytes, ...]
    times: tuple[int, ...]
    error_type: str | None
    awaits: tuple[frozenset[int], ...] = ()
    complete: bool = True
    unsent: tuple[tuple[Unsent, ...], ...] = ()

    @property
    def whole(self) -> bytes | None:
        """The body, when it is served in one piece at once with nothing after it (no
        pacing, nothing awaited, no error); None otherwise."""
        chunks = self.chunks
        if len(chunks) > 1 or self.awaits or self.error_type is not None:
            return None
        if not chunks:
            return b""
        return None if self.times[0] else chunks[0]


def _shaped(recorded: RecordedStep, body: bytes) -> RecordedStep:
    """``recorded``, its synthesised response re-made as a stream or not when today's request
    ``body`` asks for the other: the response must take the shape the request asked for, and a
    span from another instrumentation may not say whether the recorded call streamed."""
    if recorded.fidelity != "semantic":  # recorded bytes: served as they came
        return recorded
    parsed = parse_json(body)
    stream = isinstance(parsed, dict) and parsed.get("stream") is True
    streamed = any(
        k.lower() == "content-type" and is_sse(v) for k, v in recorded.step.response_headers
    )
    if streamed == stream:
        return recorded
    made = synthesize(
        recorded.endpoint, recorded.attributes, stream, duration_ns=recorded.duration_ns
    )
    reshaped = replace(
        recorded.step,
        response_headers=list(made.headers),
        response_body=made.body,
        chunks=list(made.chunks),
    )
    return replace(recorded, step=reshaped)


def _is_exception(error_type: str | None) -> bool:
    """Whether ``error.type`` names a Python exception (``httpx.ReadError``, or a builtin such
    as ``ConnectionResetError``), as the capture writes for a transport error."""
    if not error_type:
        return False
    if "." in error_type:
        return True
    builtin = getattr(builtins, error_type, None)
    return isinstance(builtin, type) and issubclass(builtin, BaseException)


_CANCELLED = frozenset(
    {"asyncio.exceptions.CancelledError", "asyncio.CancelledError", "CancelledError"}
)


def cancelled_by_program(error_type: str | None) -> bool:
    """Whether a response's recorded end is the program cancelling its own read (a task
    cancelled, a session closing its event stream), not the server ending it: a replay holds
    such a stream open after its last piece until the program lets go, as the server did."""
    return error_type in _CANCELLED


def interruption(error_type: str | None) -> KeyboardInterrupt | None:
    """The interruption a step recorded in place of a response (Ctrl-C while the request was
    on its way), raised again as itself: as a transport error the client would retry it."""
    if error_type in ("KeyboardInterrupt", "builtins.KeyboardInterrupt"):
        return KeyboardInterrupt()
    return None


def _answer(recorded: RecordedStep, timing: Timing, matcher: Matcher) -> Answer:
    step = recorded.step
    body = step.response_body
    chunks: list[bytes] = []
    ats: list[int] = []  # when each chunk came, ns after the request
    offset = 0
    for size, at in step.chunks:
        chunks.append(body[offset : offset + size])
        ats.append(at)
        offset += size
    if offset < len(body):
        chunks.append(body[offset:])
        ats.append(recorded.duration_ns)
    times = tuple(ats) if timing == "recorded" else (0,) * len(ats)
    awaits: tuple[frozenset[int], ...] = ()
    unsent: tuple[tuple[Unsent, ...], ...] = ()
    if matcher.started_during(recorded):
        awaits = tuple(matcher.awaited(recorded, at) for at in (*ats, recorded.duration_ns))
        unsent = matcher.unsent(recorded, tuple(chunks), ats)
    # A step that ended in a transport error mid-stream replays its bytes, then the error
    # again; an HTTP error status (error.type "429", "rate_limit_exceeded") is just a response.
    error_type = step.error_type
    error = error_type if error_type and not step.complete and _is_exception(error_type) else None
    if step.status_code is None and error is None:
        error = error_type or "TransportError"
    return Answer(
        step.status_code,
        recorded.served_headers,
        tuple(chunks),
        times,
        error,
        awaits,
        step.complete,
        unsent,
    )


_IGNORED = {
    status: Answer(status, ANSWER_HEADERS, (ANSWER_BODY,), (0,), None) for status in (200, 404)
}
_IGNORED_HEAD = Answer(404, ANSWER_HEADERS, (), (), None)


@dataclass(slots=True)  # not frozen: a frozen one is slower to make, once per request
class _Serving:
    """How the recording answers one call: the step served (a fork's override in its
    place), the order of the serving recorded, a tool call's effect in the replay (the
    call's own, which the recording may outweigh), what the fork changed there
    (``replay.fork.change``) and the fault it injects in the step's place, if any."""

    recorded: RecordedStep
    order: int
    effect: ToolEffect | None
    forked: str | None
    fault: Fault | None


class ReplaySession:
    """Answers requests from ``run``.

    ``strict`` (the default) refuses a request with no recorded match by raising
    :class:`~otel_replay.errors.UnmatchedRequestError`; otherwise :meth:`answer` returns None
    and the caller sends the request live. ``report`` is a text file that receives one JSON
    line per event. ``ignore``: the rules of the calls that are not the agent's.
    """

    def __init__(
        self,
        run: Run,
        *,
        strict: bool = True,
        timing: Timing = "fast",
        redactor: Redactor | None = None,
        report: IO[bytes] | None = None,
        live_read_tools: bool = False,
        ignore: IgnoreRules = DEFAULT_RULES,
        fork: ForkPlan | None = None,
    ) -> None:
        """``report`` is a binary file opened for appending (each event one write);
        ``fork`` what this replay serves differently from the recording (``_fork``)."""
        run = without_background(run, ignore)  # a recording's steps of ignored calls
        self.run = run
        self.strict = strict
        self.ignore = ignore
        """The background calls answered without the recording (``OTEL_REPLAY_IGNORE``)."""
        self.live_read_tools = live_read_tools
        """Read tools run live; their recorded steps are still matched and reported."""
        self.fork = fork if fork is not None else ForkPlan()
        """The fork's plan, checked against ``run`` (empty: a plain replay)."""
        self._changes_answers = bool(
            self.fork.overrides or self.fork.states or self.fork.injections
        )
        self.timing: Timing = timing
        live_from = self.fork.live_from
        self.live_from = None if live_from is None else LiveFrom(live_from, self.fork.allow_writes)
        """The fork's live point, when it has one (``_live_from``)."""
        self.minted = MintedIds()
        """The tool-call ids the fork's live answers minted in place of the recorded ones."""
        self._live_spans: dict[int, int] = {}  # capture span id -> order of its live request
        self.matcher = Matcher(run)
        self.reached: Callable[[int], None] | None = None
        """Told the recorded end (Unix ns) of each step served from the recording: the
        world's clock follows the recording from step to step (``World.reach``)."""
        self._redactor = redactor or Redactor()
        self._report = report
        self._lock = threading.Lock()
        self._steps: list[ServedStep] = []
        self._network: list[str] = []
        self._subprocesses: list[str] = []
        self._started = time.perf_counter()
        self.result = ReplayResult(run, self._steps, self._network, self._subprocesses)
        self.result.live_from = live_from
        # The replay verb learns the program loaded us; its first process is the program.
        self._write({"type": "start", "pid": os.getpid()})
        mend_in_child(self)

    def answer(
        self,
        method: str,
        url: str,
        body: bytes,
        request_hash: str | None = None,
        headers: Iterable[tuple[bytes, bytes]] = (),
        *,
        telemetry: bool = False,
    ) -> Answer | None:
        """The recorded answer to a request (``body`` as sent, before redaction;
        ``request_hash`` the ``sha256:<hex>`` of the redacted body when already known;
        ``headers`` the raw request headers, whose credentials redaction learns first, as
        the capture does). ``telemetry``: the request was made with instrumentation
        suppressed (an OpenTelemetry exporter sending), so it is never the agent's.

        A background call (an ``OTEL_REPLAY_IGNORE`` match; telemetry under strict replay)
        gets otel-replay's own answer; telemetry otherwise gets None, as an unmatched request
        in a replay that is not strict: it goes out as it would."""
        if telemetry or self.ignore.match_url(url) is not None:
            return self._background(method, url, telemetry)
        self._redactor.learn(headers, url)
        # Compared with, and reported beside, the recorded URL: redacted as the capture did.
        url = self._redactor.url(url)
        served = self._served_step(method, url, body, request_hash, sent=True)
        if served is None:
            if self.went_live() and in_exchange():  # the capture's span of this exchange
                trace.get_current_span().set_attribute(A.REPLAY_FORK_CHANGE, "live")
            return None
        recorded, fault = served.recorded, served.fault
        if served.forked is not None and in_exchange():  # the capture's span of this exchange
            trace.get_current_span().set_attribute(A.REPLAY_FORK_CHANGE, served.forked)
        answer = _answer(_shaped(recorded, body), self.timing, self.matcher)
        return answer if fault is None else injected_answer(fault, recorded, answer)

    def _background(self, method: str, url: str, telemetry: bool) -> Answer | None:
        """otel-replay's answer to a background call (``telemetry``, or a call an ignore rule
        matches), counted in the result; None for telemetry when the replay is not strict."""
        # OpenTelemetry's own export: strict replay opens no socket, so it is answered here; a
        # replay that is not strict lets it go where it was configured to.
        if telemetry and not self.strict:
            return None
        self._count_ignored(self._redactor.body(call_of(url).encode()).decode(errors="replace"))
        return _IGNORED_HEAD if method.upper() == "HEAD" else _IGNORED[status_for(method)]

    def _count_ignored(self, call: str) -> None:
        with self._lock:
            self.result.ignored[call] += 1
            self._write({"type": "ignored", "call": call})

    def serve(
        self,
        method: str,
        url: str,
        body: bytes,
        request_hash: str | None = None,
        call_id: str | None = None,
        effect: ToolEffect | None = None,
    ) -> Served | None:
        """The recorded answer to a step beyond HTTP (a tool call, a value, a checkpoint),
        ``body`` its canonical arguments, redacted here as the capture redacts them
        (``request_hash``: their hash when the capture computed it; ``call_id``: the model's
        tool call it answers; ``effect``: a tool's, as the call has it, which the recording
        may outweigh); None or UnmatchedRequestError as :meth:`answer`."""
        body = self._redactor.body(body)
        served = self._served_step(method, url, body, request_hash, call_id=call_id, effect=effect)
        if served is None:
            return None
        recorded = served.recorded
        content_type = next(
            (v for k, v in recorded.step.response_headers if k.lower() == "content-type"), None
        )
        shape = content_type_shape(content_type)
        answer = Served(
            recorded.step.response_body,
            recorded.step.error_type,
            self.run.run_id,
            recorded.step.index,
            shape,
            served.effect,
            served.order,
            served.forked,
            _whole(recorded.attributes.get(A.REPLAY_RANDOM_DRAWS)),
        )
        return answer if served.fault is None else injected_served(served.fault, recorded, answer)

    def went_live(self) -> bool:
        """Whether this replay is a fork past its live point (``_live_from``)."""
        return self.live_from is not None and self.live_from.live

    def runs_live(self, effect: ToolEffect | None) -> bool:
        """Whether a tool call with ``effect`` runs live instead of being served: a read tool
        under ``live_read_tools``, a write tool in a fork that allows writes."""
        if effect is None:
            return False
        return self.fork.allow_writes if effect.writes else self.live_read_tools

    def ran_live(self, served: Served, body: bytes, error_type: str | None) -> None:
        """The tool ``served`` matched ran live (:meth:`runs_live`) and answered
        ``body`` (``error_type``: what it raised), before redaction: its step is marked live,
        with what differs from the recorded answer as changes (``_live_result``), which make
        the replay diverge there. In the report file: a ``step-live`` event naming the step
        by its ``order``."""
        if served.order is None:
            return
        body = self._redactor.body(body)
        found = tuple(result_changes(served.body, served.error_type, body, error_type))
        self._mark_live(served.order, found, body)

    def sent_live(self) -> int | None:
        """The order of the request this thread or task just sent live past the fork's live
        point (:meth:`answer` returned None for it), taken once; None for any other."""
        sent = _SENT_LIVE.get()
        if sent is None or sent[0] is not self:
            return None
        _SENT_LIVE.set(None)
        return sent[1]

    def live_ended(
        self, order: int | None, status_code: int | None, error: BaseException | None = None
    ) -> None:
        """The live call of request ``order`` (:meth:`sent_live`; None: nothing to say)
        answered ``status_code``, or failed with ``error``: where the recording's call ended
        otherwise (a provider down, a 429 where it answered), its step says so and the
        replay diverges there. What a live model answered is not compared: it is new."""
        if order is None:
            return
        with self._lock:
            index = next((s.recorded for s in reversed(self._steps) if s.order == order), None)
        recorded = next((r.step for r in self.run.steps if r.step.index == index), None)
        if recorded is None:
            return
        was_error = recorded.error_type if recorded.status_code is None else None
        now_error = None if error is None else qualified_name(error)
        found = []
        if was_error != now_error:
            found.append(change("error", was_error, now_error))
        if recorded.status_code != status_code:
            found.append(change("status", recorded.status_code, status_code))
        if found:
            self._mark_live(order, tuple(found), None)

    def answered(self, span_id: int, output_messages: Any) -> None:
        """The model call the capture recorded under span ``span_id`` was answered with
        ``output_messages`` (GenAI output messages): when it was sent live past the fork's
        live point, its tool-call ids are paired with those of the recorded answer of the
        step it stands for (:class:`MintedIds`), so that later requests echoing them still
        match the recording."""
        with self._lock:
            order = self._live_spans.pop(span_id, None)
            if order is None:
                return
            index = next((s.recorded for s in reversed(self._steps) if s.order == order), None)
        recorded = next((r for r in self.run.steps if r.step.index == index), None)
        if recorded is not None:
            self.minted.learn(recorded, output_messages)

    def _mark_live(self, order: int, found: tuple[Change, ...], body: bytes | None) -> None:
        """Step ``order`` ran live, its answer differing by ``found``; in the report file too."""
        with self._lock:
            steps = self._steps
            for at in range(len(steps) - 1, -1, -1):  # the latest steps are the likeliest
                if steps[at].order == order:
                    steps[at] = steps[at].ran_live(found, body)
                    break
            self._write(live_event(order, found))

    def holds(self, url: str) -> bool:
        """Whether the run has any step beyond HTTP at ``url`` (``tool:lookup_order``): a
        foreign trace (no replay kit), or a run whose code made no such call, has none."""
        return self.matcher.holds(url)

    def _served_step(
        self,
        method: str,
        url: str,
        body: bytes,
        request_hash: str | None,
        sent: bool = False,
        call_id: str | None = None,
        effect: ToolEffect | None = None,
    ) -> _Serving | None:
        """How the recording answers the (redacted) request; None (recorded as live: an
        unmatched call outside strict mode, or a fork past its live point) or
        UnmatchedRequestError (strict) when it does not.

        ``sent``: ``body`` is as sent, not redacted yet. Bytes equal to a recorded body need
        no redaction (the recording holds redacted bytes), so they are looked up by their hash
        first, and redacted only when that finds nothing (code that did not change costs one
        dict lookup of its bytes).

        Past a fork's live point, the tool-call ids its live answers minted are put back to
        the recorded ones before matching (:class:`MintedIds`); the step keeps the request
        as sent."""
        sent_body = body
        body, call_id, stale = self._restored(body, call_id)
        restored = body is not sent_body
        if restored:
            request_hash = None  # the hash of the body as sent
        match: Match | None = None
        if sent:
            sent_hash = request_hash or self.matcher.recorded_hash(body) or sha256_tag(body)
            match = self.matcher.match(method, url, None, sent_hash)
            redacted = body if match is not None else self._redactor.body(body)
            if redacted is body:
                request_hash = sent_hash
            body = redacted
        if request_hash is None:
            request_hash = sha256_tag(body)
        if match is None:
            match = self.matcher.match(method, url, body, request_hash, call_id)
        shown = body
        if restored:
            shown = self._redactor.body(sent_body) if sent else sent_body
        if match is None:
            self._record_unmatched(
                method, url, shown, request_hash, effect, self._goes_live(None, effect)
            )
            return None
        recorded = match.recorded
        if effect is not None:
            attrs = recorded.attributes
            effect = in_replay(
                effect, attrs.get(A.REPLAY_TOOL_EFFECT), attrs.get(A.REPLAY_TOOL_EFFECT_REASON)
            )
        live = self._goes_live(match, effect)
        changes = (
            ()
            if match.how == "hash"
            else tuple(request_changes(recorded, Request(method, url, body)))
        )
        if stale:
            changes = (*changes, *stale)
        if self.live_from is not None:
            refused = self.live_from.refusal(match, effect, changes)
        elif self._changes_answers and not self.fork.allow_writes:
            refused = write_refusal(match, effect, changes)
        else:
            refused = None
        served, forked, fault = recorded, None, None
        if self._changes_answers and not live and refused is None:
            served, forked, fault = self._forked(recorded)
        # Fields by position: a class called with keywords has them gathered into a dict and
        # spread out again, which costs more than the rest of making it, for every request.
        order = self._record(
            ServedStep(
                -1,  # order, given by _record
                method,
                url,
                recorded.endpoint,
                request_hash,
                match.how,
                recorded.step.index,  # recorded
                match.repeat,
                recorded.fidelity,
                changes,
                live,
                None if effect is None else effect.effect,
                None if effect is None else effect.reason,  # effect_reason
                forked,
                shown,  # request_body: as sent
                None if live or fault is not None or refused else served.step.response_body,
                refused is not None,
            )
        )
        if refused is not None:
            raise unmatched(refused)
        if live:
            if effect is None:  # a call over HTTP: its transport says how it ends
                self._sending_live(recorded, order)
            return None
        reached = self.reached
        if reached is not None and recorded.step.end_ns:
            reached(recorded.step.end_ns)
        return _Serving(served, order, effect, forked, fault)

    def _sending_live(self, recorded: RecordedStep, order: int) -> None:
        """Request ``order``, which stands for ``recorded``, goes out live over HTTP: its
        transport tells how it ended (:meth:`live_ended`) and, for a model call the capture
        records, the capture what it answered (:meth:`answered`)."""
        _SENT_LIVE.set((self, order))
        if in_exchange() and endpoint_codec(recorded.endpoint) is not None:
            span_id = trace.get_current_span().get_span_context().span_id
            with self._lock:
                self._live_spans[span_id] = order

    def _restored(
        self, body: bytes, call_id: str | None
    ) -> tuple[bytes, str | None, tuple[Change, ...]]:
        """``body`` and ``call_id`` with the tool-call ids minted live put back, once the
        fork is live, and the recorded ids the body still uses where the live answer minted
        others (changes; see :class:`MintedIds`)."""
        if self.live_from is None or not self.live_from.live:
            return body, call_id, ()
        minted = self.minted
        return minted.restore(body), minted.restore_id(call_id), tuple(minted.stale(body))

    def _forked(self, recorded: RecordedStep) -> tuple[RecordedStep, str | None, Fault | None]:
        """What the fork serves for ``recorded`` (``recorded`` itself when it changes nothing
        there), what it changed (``replay.fork.change``), and the fault it injects in the
        step's place, if any (once: the retry gets the step)."""
        served, forked = served_instead(self.fork, recorded)
        fault = self.fork.injections.get(recorded.step.index)
        if fault is not None and self.matcher.divert(recorded):
            return served, f"inject {fault.given}", fault
        return served, forked, None

    def _goes_live(self, match: Match | None, effect: ToolEffect | None) -> bool:
        """Whether a fork with a live point sends this call live (``_live_from``)."""
        return self.live_from is not None and self.live_from.sends(match, effect)

    def network_attempt(
        self, address: str, host: str | None = None, port: int | None = None
    ) -> None:
        """The socket guard or the audit hook refused ``address`` (as they describe it; the
        ``host`` and ``port`` it was for, when known). A refusal of background traffic (an
        OpenTelemetry export, or a host a rule ignores whatever the path) is listed as ignored
        instead of counted."""
        if context.get_value(_SUPPRESS_INSTRUMENTATION_KEY) or (
            host is not None and self.ignore.match(host, port, None) is not None
        ):
            self._count_ignored(address)
            return
        with self._lock:
            self._network.append(address)
            self._write({"type": "network", "address": address})

    def network_live(self, what: str) -> None:
        """A replay that is not strict let the program reach for the network (``what`` as
        the strict guards would have listed the refusal); counted, not refused."""
        with self._lock:
            self.result.live_network.append(what)
            self._write({"type": "network-live", "address": what})

    def uncaught(self, exc: BaseException) -> None:
        """The replayed program is ending on ``exc``, which nothing caught. Its message is
        redacted as any error message of the process (a key it sent, quoted back)."""
        status = AgentStatus.raised(exc)
        if status.error is not None:
            said = self._redactor.body(status.error.encode(errors="surrogatepass"))
            status = replace(status, error=said.decode(errors="replace"))
        with self._lock:
            self.result.agent = status
            error = status.error
            self._write({"type": "uncaught", "error": error, "pid": os.getpid()})

    def bad_value(self, error: RecordedValueError) -> None:
        """A served step's recorded value could not be given back (``error`` is raised to the
        program next): the first such step is the replay's verdict, whatever the program
        does with the error."""
        found = BadValue(error.run_id, error.step_index, error.step_name, error.what)
        with self._lock:
            if self.result.bad_value is None:
                self.result.bad_value = found
            self._write({"type": "bad-value", **found.to_json(), "pid": os.getpid()})

    def subprocess_started(self, command: str) -> None:
        """The replayed code started a process (``command`` as one line); the user's
        ``OTEL_REPLAY_REDACT`` patterns are applied before it is kept."""
        command = self._redactor.body(command.encode()).decode(errors="replace")
        with self._lock:
            self._subprocesses.append(command)
            self._write({"type": "subprocess", "command": command})

    def close(self) -> None:
        """Write the closing event (elapsed time) and stop writing."""
        with self._lock:
            self.result.elapsed_s = time.perf_counter() - self._started
            self._write({"type": "end", "elapsed_s": self.result.elapsed_s, "pid": os.getpid()})
            self._report = None

    def join(self, ticket: object) -> None:
        """In a worker process started fresh, before it made any request: serve from the
        account of the process that started it (its ticket), not one of its own."""
        self.matcher.ledger.attach(ticket)

    def _record(self, step: ServedStep) -> int:
        """Append ``step``, numbered (its ``order``) in arrival order (in the whole program's:
        worker processes share the numbers); its number."""
        with self._lock:
            step.order = self.matcher.ledger.next_order()
            self._steps.append(step)
            if self._report is not None:
                self._write(step.to_json())
            return step.order

    def _write(self, event: dict[str, object]) -> None:
        if self._report is not None:
            line = json.dumps(event, ensure_ascii=False) + "\n"
            # One write per event: the program's worker processes append to the same file.
            self._report.write(line.encode("utf-8", "backslashreplace"))
            self._report.flush()

    def _after_fork_in_child(self) -> None:
        # A thread of the parent may have held the lock. The report file is shared (opened
        # for appending), as is the matcher's account.
        self._lock = threading.Lock()

    def _record_unmatched(
        self,
        method: str,
        url: str,
        body: bytes,
        request_hash: str,
        effect: ToolEffect | None,
        live: bool,
    ) -> None:
        """A request no recorded step answers. It runs ``live`` when a fork past its live
        point sends it; otherwise strict replay refuses it (a write tool past the live point
        is left to the capture, which refuses it naming the tool), and a lax one lets it run,
        but for a write tool (``effect``) the fork does not allow, which the capture refuses."""
        endpoint = endpoint_of_request(method, url, body)
        self._record(
            ServedStep(
                order=-1,
                method=method,
                url=url,
                endpoint=endpoint,
                request_hash=request_hash,
                how="none",
                recorded=None,
                repeat=False,
                fidelity=None,
                changes=(),
                live=live
                or (
                    not self.strict
                    and not (effect is not None and effect.writes and not self.fork.allow_writes)
                ),
                effect=None if effect is None else effect.effect,
                effect_reason=None if effect is None else effect.reason,
                request_body=body,
            )
        )
        if self.strict and not live and not self.went_live():
            raise unmatched(self._unmatched_message(method, url, body))

    def _unmatched_message(self, method: str, url: str, body: bytes) -> str:
        lines = [
            f"otel-replay: no recorded step of run {self.run.run_id!r} matches {method} {url}"
            " (strict replay opens no connection)"
        ]
        near = self.matcher.nearest(method, url, body)
        if near:
            lines.append("closest recorded requests:")
        for candidate in near:
            used = self.matcher.served_count(candidate.recorded.step.index)
            fields = ", ".join(candidate.fields[:8]) or "nothing (already served)"
            if len(candidate.fields) > 8:
                fields += f", … {len(candidate.fields) - 8} more"
            state = f", served {used} time(s)" if used else ""
            recorded = candidate.recorded
            lines.append(
                f"  step {recorded.step.index} {recorded.endpoint}{state}: differs in {fields}"
            )
        # The run id, the URL, endpoints and field paths may come from a hostile recording: the
        # message reaches tracebacks and test reports, so none may drive the terminal.
        return "\n".join(printable(line) for line in lines)


def _whole(value: Any) -> int:
    """A recorded count (an int attribute of a span, which a hostile source may make
    anything), or 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
