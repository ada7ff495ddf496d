"""Steps beyond HTTP (a tool call, a value, a checkpoint), recorded like an HTTP step and,
under replay, served by the installed :class:`Server` instead of run."""

from __future__ import annotations

import contextvars
import json
import random
import threading
import uuid
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from otel_replay import attributes as A
from otel_replay._canonical import canonical_json, parse_json, sha256_tag
from otel_replay._clock import wall_ns
from otel_replay._inline import encode_body
from otel_replay._workers import in_pool_worker, unmatched
from otel_replay.envelope._effect import ToolEffect
from otel_replay.envelope._jsonable import (
    Unfit,
    first_line,
    loaded_dotted_class,
    restoring,
    shape_content_type,
    take_shape,
)
from otel_replay.errors import RecordedError, RecordedValueError, RecordedValueInPoolError
from otel_replay.runs import current_run, qualified_name
from otel_replay.step import ENVELOPE_KINDS, Step, address, describe_effect

if TYPE_CHECKING:
    from otel_replay.capture import Recorder

__all__ = [
    "ENVELOPE_KINDS",
    "INJECTED_ERROR",
    "TOOL_ERROR",
    "Call",
    "Served",
    "Server",
    "active",
    "address",
    "claim_tool_call",
    "current_call_key",
    "current_server",
    "enclosing_step",
    "forked_answer",
    "named_call",
    "note_tool_calls",
    "perform",
    "perform_async",
    "recorded_at",
    "serving",
    "tool_call",
    "use_recorder",
    "use_server",
]

_KEY_NAMESPACE = uuid.UUID("6f1c1f0e-7c2b-4f4e-9a57-0a7e9d5f3b21")
_NO_ARGUMENTS = b"{}"
_NO_ARGUMENTS_HASH = sha256_tag(_NO_ARGUMENTS)
# The error.type of a call that answered with a failure instead of raising (the MCP semantic
# conventions' value for a CallToolResult with isError): never a Python class's name.
TOOL_ERROR = "tool_error"
# The error.type of a tool failure a fork injects in place of the recorded answer
# (``replay._faults``): raised at the call, never run live instead.
INJECTED_ERROR = "otel_replay.errors.InjectedToolError"

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Served:
    """A recorded step's answer: its response body, its ``error.type`` (None: it returned),
    which recorded step it was (``run_id``, ``index``) and the shape of the value its body
    was written from (see ``_jsonable``; None when the JSON is the value)."""

    body: bytes
    error_type: str | None
    run_id: str
    index: int
    shape: str | None = None
    effect: ToolEffect | None = None
    """A tool step's effect in this replay: the call's own, or the recording's word that it
    writes (see ``_effect.in_replay``)."""
    order: int | None = None
    """The replay's number for the call it answered (what :meth:`Server.ran_live` names)."""
    forked: str | None = None
    """What a fork served instead of the recorded answer (``replay.fork.change``)."""
    draws: int = 0
    """The words the recorded body drew from the global ``random`` (``replay.random.draws``),
    drawn again when the step is served, so the program's later draws are as recorded."""


class Server(Protocol):
    """What answers envelope steps under replay (the replay session). A tool it says
    :meth:`runs_live` has its recorded step matched (and reported), but runs live."""

    def runs_live(self, effect: ToolEffect | None) -> bool:
        """Whether a tool call with ``effect`` runs live instead of being served (a read
        tool under ``--live-tools read``, a write tool in a fork that allows writes)."""

    def serve(
        self,
        method: str,
        url: str,
        body: bytes,
        request_hash: str | None = None,
        call_id: str | None = None,
        effect: ToolEffect | None = None,
    ) -> Served | None:
        """The recorded answer to ``body`` (the canonical arguments as the call made them;
        ``request_hash`` the hash of their redacted form when already known; ``call_id`` the
        model's tool call it answers, when known; ``effect`` a tool's, as the call has it);
        None when there is none and the call may run live. Raises UnmatchedRequestError in
        strict mode when there is none."""

    def holds(self, url: str) -> bool:
        """Whether the recording has any step at ``url`` (``checkpoint:langgraph.get_tuple``):
        a foreign trace (no replay kit), or a run whose code made no such call, has none."""

    def ran_live(self, served: Served, body: bytes, error_type: str | None) -> None:
        """The tool ``served`` matched ran live instead (:meth:`runs_live`) and
        answered ``body`` (as recorded: its result, or what it raised, ``error_type``)."""

    def bad_value(self, error: RecordedValueError) -> None:
        """A served step's recorded value could not be given back (``error`` is raised next):
        the replay's verdict is bad input, whatever the program does with the error."""

    def answered(self, span_id: int, output_messages: Any) -> None:
        """The model call recorded under span ``span_id`` was answered with these GenAI
        ``output_messages`` (a fork pairs the tool-call ids its live answers mint)."""

    def went_live(self) -> bool:
        """Whether the replay is a fork past its live point (``--live-from``): a call it did
        not serve runs live, and its step says so (``replay.fork.change`` ``live``)."""


_recorder: Recorder | None = None
_server: Server | None = None
# The step an idempotency key stands for: (run id, step index), the key made on demand.
_call_key: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar(
    "otel_replay_call_key", default=None
)
_enclosing: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar(
    "otel_replay_enclosing_tool", default=None
)
# While a served body is turned back into its value: a fork's change served it (an override
# or a state), not the recording.
_forked_answer: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "otel_replay_forked_answer", default=False
)


def forked_answer() -> bool:
    """Whether the answer being restored now (inside ``perform``'s ``restore``) is a fork's
    change (``--override``, ``--state``) rather than the recorded one: a step whose answer the
    replay can also give from its own state (a LangGraph checkpointer's read) must give this
    one, or the fork would change nothing the program sees."""
    return _forked_answer.get()


def use_recorder(recorder: Recorder | None) -> None:
    """Record envelope steps with ``recorder`` (the instrumentor's), or stop (None)."""
    global _recorder  # noqa: PLW0603 - set by the instrumentor
    _recorder = recorder


def use_server(server: Server | None) -> None:
    """Serve envelope steps from ``server`` (a replay session), or run them live (None)."""
    global _server  # noqa: PLW0603 - set by the replay installer
    _server = server


# The tool calls models asked for, per run (the latest runs only), waiting for the tool
# steps that answer them: (id, name, arguments).
_ASKED_RUNS = 16
_ASKED_PER_RUN = 256
_asked: OrderedDict[str, deque[tuple[str, str, Any]]] = OrderedDict()
_asked_lock = threading.Lock()


def note_tool_calls(run_id: str, output_messages: Any) -> None:
    """Remember the tool calls in a model response's GenAI output messages, so the tool steps
    that answer them can name them (``gen_ai.tool.call.id``)."""
    calls = [
        (part["id"], part["name"], part.get("arguments"))
        for message in output_messages
        if isinstance(message, dict)
        for part in message.get("parts") or ()
        if isinstance(part, dict)
        and part.get("type") == "tool_call"
        and isinstance(part.get("id"), str)
        and isinstance(part.get("name"), str)
    ]
    if not calls:
        return
    with _asked_lock:
        waiting = _asked.pop(run_id, None) or deque(maxlen=_ASKED_PER_RUN)
        waiting.extend(calls)
        _asked[run_id] = waiting
        while len(_asked) > _ASKED_RUNS:
            _asked.popitem(last=False)


def claim_tool_call(run_id: str, name: str, arguments: bytes) -> str | None:
    """The id of the oldest unanswered tool call of run ``run_id`` to tool ``name`` whose
    arguments all appear, equal, in ``arguments`` (the call's canonical JSON, defaults
    applied; parsed only when some call to ``name`` waits); it is answered from then on.
    None when there is none."""
    with _asked_lock:
        waiting = _asked.get(run_id)
        candidates = [call for call in waiting or () if call[1] == name]
        if not candidates:
            return None
        parsed = parse_json(arguments)
        for call in candidates:
            if _fits(call[2], parsed):
                assert waiting is not None
                waiting.remove(call)
                return call[0]
    return None


def _fits(asked: Any, arguments: Any) -> bool:
    if not isinstance(asked, dict) or not isinstance(arguments, dict):
        return bool(asked == arguments)
    return all(key in arguments and arguments[key] == value for key, value in asked.items())


def current_call_key() -> str | None:
    """The idempotency key of the tool call running on this thread or task, if any."""
    step = _call_key.get()
    return None if step is None else str(uuid.uuid5(_KEY_NAMESPACE, f"{step[0]}\0{step[1]}"))


def enclosing_step(run_id: str) -> int | None:
    """The index of the step of run ``run_id`` whose body is running on this thread or task
    (``replay.step.within`` for the steps made inside it), if any."""
    enclosing = _enclosing.get()
    return enclosing[1] if enclosing is not None and enclosing[0] == run_id else None


@dataclass(slots=True)
class Call:
    """One envelope step to make: ``arguments`` are canonical JSON; ``attributes`` the
    kind's own span attributes; ``effect`` ``write`` keeps it from running live in replay."""

    kind: str
    name: str
    arguments: bytes
    span_name: str
    attributes: dict[str, Any] = field(default_factory=dict)
    effect: ToolEffect | None = None
    content_keys: tuple[str, str] | None = None
    """For tools: the GenAI attributes that carry the arguments and the result as text."""
    instant: bool = False
    """The live call makes no steps of its own (reading the clock, drawing an id): its step
    is recorded after it ran, in one go."""
    key: tuple[str, int] | None = None
    """The step the call's idempotency key stands for: its own, set when the step begins,
    unless given (the later attempts of a retried call keep their first attempt's)."""
    failure_attributes: Callable[[BaseException], Mapping[str, Any]] | None = None
    """What the step's span also says when the call raises the given exception (a retry
    budget's last attempt: ``replay.failure.category`` ``retry_overflow``)."""


_TOOL_CONTENT_KEYS = ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result")


def tool_call(
    name: str,
    arguments: bytes,
    effect: ToolEffect,
    *,
    description: str | None = None,
    schema_version: str | None = None,
    call_id: str | None = None,
) -> Call:
    """The :class:`Call` of tool ``name`` with canonical ``arguments``: its span is
    ``execute_tool {name}`` with the GenAI tool attributes. ``call_id`` is the model tool call
    it answers when the caller knows it; otherwise the oldest unanswered model call to ``name``
    with these arguments is claimed (:func:`claim_tool_call`)."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.type": "function",
        A.REPLAY_TOOL_EFFECT: effect.effect,
        A.REPLAY_TOOL_EFFECT_REASON: effect.reason,
    }
    if schema_version is not None:
        attributes[A.REPLAY_TOOL_SCHEMA_VERSION] = schema_version
    if description:
        attributes["gen_ai.tool.description"] = description
    if call_id is None:
        call_id = claim_tool_call(current_run().run_id, name, arguments)
    if call_id is not None:
        attributes["gen_ai.tool.call.id"] = call_id
    return Call(
        kind="tool",
        name=name,
        arguments=arguments,
        span_name=f"execute_tool {name}",
        attributes=attributes,
        effect=effect,
        content_keys=_TOOL_CONTENT_KEYS,
    )


def named_call(kind: str, name: str, arguments: bytes = _NO_ARGUMENTS, *, instant: bool) -> Call:
    """The :class:`Call` of a ``value`` or ``checkpoint`` step named ``name``: its span is
    ``{kind} {name}``, its name in ``replay.value.name``; matched by name, then arguments."""
    return Call(
        kind=kind,
        name=name,
        arguments=arguments,
        span_name=f"{kind} {name}",
        attributes={A.REPLAY_VALUE_NAME: name},
        instant=instant,
    )


def serving() -> bool:
    """Whether a replay answers steps now (what a step would change must not change)."""
    return _server is not None


def recorded_at(kind: str, name: str) -> bool:
    """Under replay, whether the recording has steps of ``kind`` named ``name`` at all (False:
    a foreign trace, or a run whose code made no such call; the hook then answers the call
    without the recording); True when not replaying."""
    server = _server
    return server is None or server.holds(address(kind, name)[1])


def current_server() -> Server | None:
    """The replay session serving steps now, if any."""
    return _server


def active() -> bool:
    """Whether envelope steps are recorded or served now (else a framework hook stands
    aside and the call runs as if we were not there)."""
    return _recorder is not None or _server is not None


def _error_body(exc: BaseException) -> bytes:
    """The response body of a step that raised ``exc``."""
    return canonical_json({"type": qualified_name(exc), "message": str(exc)})


def _recorded_exception(body: bytes, error_type: str) -> BaseException:
    """The exception a step recorded, to raise again: its class (found by its qualified name
    among the modules already imported, see ``loaded_class``) with its message;
    :class:`RecordedError` when the class is not there or cannot be rebuilt."""
    try:
        message = str(parse_json(body).get("message", ""))
    except (ValueError, AttributeError):
        message = ""
    return _rebuilt(error_type, message)


def _rebuilt(error_type: str, message: str) -> BaseException:
    cls = loaded_dotted_class(error_type)  # never imported: the name is recorded input
    if cls is not None and issubclass(cls, BaseException):
        try:
            return cls(message)
        except Exception:  # a constructor that wants more than a message
            pass
        try:
            exc: BaseException = cls.__new__(cls)
            exc.args = (message,)
            return exc
        except Exception:  # nor can it be made bare
            pass
    return RecordedError(error_type, message)


class _Open:
    """One envelope step in flight: its span and Step (when recording) and, under replay,
    the recorded answer.

    An ``instant`` call's span is opened only when it ends, with every attribute at once:
    its live call makes no steps of its own that would need a parent, and one span start
    costs less than a start and an update.
    """

    __slots__ = (
        "after",
        "attrs",
        "body",
        "call",
        "done",
        "drawn",
        "drawn_from",
        "index",
        "key",
        "live",
        "owns_span",
        "recorder",
        "request_hash",
        "run",
        "served",
        "span",
        "start_ns",
        "tracked",
        "within",
    )

    def __init__(self, call: Call) -> None:
        self.call = call
        self.recorder = _recorder
        self.span: Span | None = None
        self.owns_span = True
        self.done = False
        self.tracked: _InFlight | None = None
        run = self.run = current_run()
        index = self.index = run.next_step()
        self.after = run.step_after(index)
        self.key = (run.run_id, index)
        request_hash: str | None = None
        if self.recorder is not None:
            self.start_ns = wall_ns()
            if call.arguments == _NO_ARGUMENTS:  # nothing in it to redact or hash again
                self.body, request_hash = _NO_ARGUMENTS, _NO_ARGUMENTS_HASH
            else:
                self.body = self.recorder.redactor.body(call.arguments)
                request_hash = sha256_tag(self.body)
            self.request_hash = request_hash
            self.within = enclosing_step(run.run_id)
            if not call.instant:
                self._open({})
                # Open until it ends, so a SIGTERM that ends the process under it records it.
                self.tracked = _InFlight(self)
                self.recorder.open_steps.begin(self.tracked)
        self.drawn_from: _Measure | None = None  # a live body's draws being measured
        self.drawn = 0
        self.served: Served | None = None
        self.live: Served | None = None
        server = _server
        if server is not None:
            method, url = address(call.kind, call.name)
            try:
                call_id = call.attributes.get("gen_ai.tool.call.id")
                self.served = server.serve(
                    method, url, call.arguments, request_hash, call_id, call.effect
                )
            except BaseException as exc:
                self.finish(_error_body(exc), qualified_name(exc))
                raise
            if self.served is not None:
                self.key = (self.served.run_id, self.served.index)
                if self.served.forked is not None:
                    self._mark({A.REPLAY_FORK_CHANGE: self.served.forked})
                if self.served.effect is not None and self.served.effect != call.effect:
                    self._take_effect(self.served.effect)
                if server.runs_live(call.effect) and self.served.error_type != INJECTED_ERROR:
                    # Matched and reported; the tool runs live, and its answer is compared.
                    self.live, self.served = self.served, None
            elif (
                call.effect is not None and call.effect.writes and not server.runs_live(call.effect)
            ):
                self._refuse_write(call.effect)
            elif server.went_live():
                self._mark({A.REPLAY_FORK_CHANGE: "live"})
        call.key = self.key = call.key or self.key  # a retry's later attempts keep the first's

    def _refuse_write(self, effect: ToolEffect) -> NoReturn:
        """A write tool the recording has no call of: it never runs in a replay."""
        said = describe_effect(effect.effect, effect.reason)
        message = (
            f"otel-replay: tool {self.call.name!r} (step {self.index}) has no recorded call "
            "to serve, and a write tool never runs in replay or a fork without "
            f"--allow-writes ({said}; OTEL_REPLAY_READ_TOOLS names the tools that only read)"
        )
        refused = unmatched(message)
        self.finish(_error_body(refused), qualified_name(refused))
        raise refused

    def _take_effect(self, effect: ToolEffect) -> None:
        """The recording says this tool writes, whatever today's settings say (a replay run
        without the ``OTEL_REPLAY_WRITE_TOOLS`` it was recorded with): it is a write tool
        (``effect``, reason ``recorded``), so it never runs live, and the replay's own run
        records it as one."""
        self.call.effect = effect
        self._mark(
            {A.REPLAY_TOOL_EFFECT: effect.effect, A.REPLAY_TOOL_EFFECT_REASON: effect.reason}
        )

    def _mark(self, said: dict[str, Any]) -> None:
        """Put ``said`` on the step's span, open already or still to come."""
        self.call.attributes.update(said)
        if self.span is not None and self.owns_span:
            self.span.set_attributes(said)

    def _open(self, end_attrs: dict[str, Any]) -> Span:
        """Start the step's span: the run's and the call's attributes, the request's, and
        ``end_attrs`` (an instant call's response attributes)."""
        recorder = self.recorder
        assert recorder is not None
        call = self.call
        attrs = self.run.step_attributes()
        attrs[A.REPLAY_STEP_INDEX] = self.index
        attrs[A.REPLAY_STEP_KIND] = call.kind
        if self.within is not None:
            attrs[A.REPLAY_STEP_WITHIN] = self.within
        if self.after is not None:
            attrs[A.REPLAY_STEP_AFTER] = self.after
        attrs.update(call.attributes)
        attrs[A.REPLAY_REQUEST_HASH] = self.request_hash
        attrs[A.REPLAY_REQUEST_SIZE] = len(self.body)
        # A retried call's attempts each get a span of their own (the framework's span is
        # their parent): enriching it would give it the first attempt's outcome.
        retried = A.REPLAY_TOOL_ATTEMPT in call.attributes
        foreign = _foreign_tool_span(call) if call.kind == "tool" and not retried else None
        self.owns_span = foreign is None
        self._content(self.body, A.REPLAY_REQUEST_BODY, 0, attrs)
        attrs.update(end_attrs)
        if foreign is not None:
            self.span = foreign
            foreign.set_attributes(attrs)
        else:
            self.span = recorder.tracer.start_span(
                call.span_name, kind=SpanKind.INTERNAL, attributes=attrs, start_time=self.start_ns
            )
        return self.span

    def _content(self, body: bytes, inline_key: str, which: int, attrs: dict[str, Any]) -> None:
        """Put ``body`` on the span: as the GenAI content attribute of a tool when content
        is captured (it is the same text), else inline within the limit. On a framework's
        span, inline too: the framework may set the GenAI attribute again, its own way."""
        recorder = self.recorder
        assert recorder is not None
        keys = self.call.content_keys
        as_content = keys is not None and recorder.capture_content
        if keys is not None and as_content:
            attrs[keys[which]] = body.decode("utf-8", errors="replace")
        inline = not as_content or not self.owns_span
        if inline and recorder.inline_limit and len(body) <= recorder.inline_limit:
            attrs[inline_key] = encode_body(body)

    def finish(
        self,
        body: bytes,
        error_type: str | None,
        shape: str | None = None,
        raised: BaseException | None = None,
    ) -> None:
        """End the step with response ``body`` (``error_type``: what it raised, or
        :data:`TOOL_ERROR` for a result that says it failed; ``shape``:
        of the value a served body was written from, else that of the body encode_exact
        wrote; ``raised``: the exception the call raises, for its ``failure_attributes``);
        once, whoever ends it (its call, or the SIGTERM handler's thread cutting it off)."""
        written = take_shape(body)  # taken even unrecorded: it holds on to the body
        shape = shape or written
        live, server = self.live, _server
        if live is not None and server is not None:
            self.live = None
            server.ran_live(live, body, error_type)
        recorder = self.recorder
        if recorder is None or self.done:
            return
        tracked = self.tracked
        if tracked is not None and not recorder.open_steps.claim(tracked):
            return  # cut off already
        describe = self.call.failure_attributes
        said = describe(raised) if describe is not None and raised is not None else None
        self._end(recorder, body, error_type, shape, said)

    def _end(
        self,
        recorder: Recorder,
        body: bytes,
        error_type: str | None,
        shape: str | None = None,
        said: Mapping[str, Any] | None = None,
    ) -> None:
        """Record the step's end: response ``body`` (written with ``shape``, see
        ``_jsonable``) or, with ``error_type``, what it raised (with :data:`TOOL_ERROR`: the
        result that says it failed); ``said``: more for its span to say."""
        self.done = True
        body = recorder.redactor.body(body)
        response_hash = sha256_tag(body)
        returned = error_type is None or error_type == TOOL_ERROR
        attrs: dict[str, Any] = {
            A.REPLAY_RESPONSE_HASH: response_hash,
            A.REPLAY_RESPONSE_SIZE: len(body),
            A.REPLAY_RESPONSE_COMPLETE: returned,
        }
        headers: list[tuple[str, str]] = []
        if shape is not None and returned:
            content_type = shape_content_type(shape)
            attrs[A.REPLAY_RESPONSE_CONTENT_TYPE] = content_type
            headers.append(("content-type", content_type))
        if returned:
            self._content(body, A.REPLAY_RESPONSE_BODY, 1, attrs)
        elif recorder.inline_limit and len(body) <= recorder.inline_limit:
            attrs[A.REPLAY_RESPONSE_BODY] = encode_body(body)
        if error_type is not None:
            attrs["error.type"] = error_type
        if said:
            attrs.update(said)
        drawn = self._drawn()
        if drawn:
            attrs[A.REPLAY_RANDOM_DRAWS] = drawn
        span = self.span
        if span is None:
            span = self._open(attrs)
        else:
            span.set_attributes(attrs)
        if error_type is not None and self.owns_span:
            span.set_status(Status(StatusCode.ERROR))
        if recorder.handoff.wanted:
            ctx = span.get_span_context()
            method, url = address(self.call.kind, self.call.name)
            step = Step(
                run_id=self.run.run_id,
                index=self.index,
                trace_id=ctx.trace_id,
                span_id=ctx.span_id,
                kind=self.call.kind,
                method=method,
                url=url,
                request_headers=[],
                request_body=self.body,
                request_hash=self.request_hash,
                status_code=200,
                response_headers=headers,
                response_body=body,
                response_hash=response_hash,
                complete=True,
                error_type=error_type,
                start_ns=self.start_ns,
                end_ns=wall_ns(),
                run=self.run.facts(),
                within=self.within,
            )
            recorder.handoff.put(step, span)
        if self.owns_span:
            span.end()

    def _drawn(self) -> int:
        """The words the body drew from the global ``random`` since :meth:`running` began
        (``replay.random.draws``), or those its served step's body drew when recorded."""
        served = self.served
        if served is not None:
            return _fitting(served.draws)
        measure, self.drawn_from = self.drawn_from, None
        if measure is not None:
            self.drawn = _BODIES.end(measure)
        return self.drawn

    @contextmanager
    def running(self, measured: bool = False) -> Iterator[None]:
        """While the live call runs: its idempotency key is current, the steps it makes are
        marked as made within it, its span is the current span (what the call does, an HTTP
        request, a nested tool, a framework's RPC, is its child), and what it raises ends
        the step. ``measured``: the step records the words its body draws from the global
        ``random`` (a synchronous body: an awaiting one would count other tasks' draws)."""
        if measured and self.recorder is not None:
            self.drawn_from = _BODIES.begin()
        token = _call_key.set(self.key)
        inside = _enclosing.set((self.run.run_id, self.index))
        span = self.span if self.owns_span else None  # a framework's span is current already
        current = None if span is None else otel_context.attach(trace.set_span_in_context(span))
        try:
            yield
        except BaseException as exc:
            self.finish(_error_body(exc), qualified_name(exc), raised=exc)
            raise
        finally:
            if current is not None:
                otel_context.detach(current)
            _enclosing.reset(inside)
            _call_key.reset(token)
            self.run.step_after(self.index)  # what follows follows the tool, not its body
            if self.drawn_from is not None:  # the body is over, whether it finished or not
                self._drawn()


class _InFlight:
    """A tool step's entry among its recorder's open steps (:mod:`._open_steps`)."""

    __slots__ = ("opened",)

    def __init__(self, opened: _Open) -> None:
        self.opened = opened

    def finish(self, complete: bool) -> None:
        """At exit: a body still running (a daemon thread's) has no answer to record."""

    def cut(self, cause: str) -> bool:
        """The process is being cut off by ``cause`` (``SIGTERM``) while the body runs: the
        step is recorded, its arguments kept, as an error of that type."""
        opened = self.opened
        recorder = opened.recorder
        if recorder is None or not recorder.open_steps.claim(self):
            return False
        message = f"the process was cut off by {cause} while the {opened.call.kind} ran"
        opened._end(recorder, canonical_json({"type": cause, "message": message}), cause)
        return True


class _Measure:
    """One synchronous body's draws from the global ``random`` being measured."""

    __slots__ = ("beside", "state", "thread")

    def __init__(self, thread: int, state: Any) -> None:
        self.thread = thread
        self.state = state
        self.beside = False
        """Another thread's measured body ran at the same time."""


class _Bodies:
    """The bodies measured at once. Bodies of two threads that ran at the same time each saw
    the other's draws: counted apart, a replay serving both would draw them twice. Such a
    group's draws, from its first body's start to its last one's end, are the count of the
    body that ends last, 0 the others' (the total is what a replay serving them all must
    draw again). A body nested in another of its thread keeps its own count: a replay
    serving the outer one runs neither."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: list[_Measure] = []
        self._first: Any = None
        """The generator's state as the first of the running bodies began."""

    def begin(self) -> _Measure:
        measure = _Measure(threading.get_ident(), random.getstate())
        with self._lock:
            if not self._running:
                self._first = measure.state
            for other in self._running:
                if other.thread != measure.thread:
                    other.beside = measure.beside = True
            self._running.append(measure)
        return measure

    def end(self, measure: _Measure) -> int:
        """The words ``measure``'s body drew (for a group that ran beside each other, all
        the group drew, from its last body; 0 from the others)."""
        after = random.getstate()
        with self._lock:
            self._running.remove(measure)
            if not measure.beside:
                return words_drawn(measure.state, after)
            return 0 if self._running else words_drawn(self._first, after)


_BODIES = _Bodies()


def words_drawn(before: Any, after: Any) -> int:
    """How many 32-bit words the Mersenne Twister of ``random`` drew to go from state
    ``before`` to ``after`` (``random.getstate()``); 0 when none, or when ``after`` is not
    within ``_MAX_DRAWN`` words of ``before`` (the body seeded the generator itself)."""
    if before[1] == after[1]:
        return 0
    key, at = before[1][:-1], before[1][-1]
    wanted, wanted_at = after[1][:-1], after[1][-1]
    if key == wanted and wanted_at >= at:
        return int(wanted_at - at)
    clone = random.Random()
    clone.setstate(before)
    drawn = _BLOCK - at  # to the end of this block: the next word makes the next block
    clone.getrandbits(32 * drawn)
    while drawn < _MAX_DRAWN:
        clone.getrandbits(32)  # the next block, and its first word
        drawn += 1
        if clone.getstate()[1][:-1] == wanted:
            return int(drawn + wanted_at - 1)
        clone.getrandbits(32 * (_BLOCK - 1))
        drawn += _BLOCK - 1
    return 0


_BLOCK = 624  # the words of one Mersenne Twister block
_MAX_DRAWN = 64 * _BLOCK


def _fitting(words: int) -> int:
    """``words`` when a recording could have written it (a recording is input), else 0."""
    return words if 0 < words <= _MAX_DRAWN else 0


def _draw_again(words: int) -> None:
    """Move the global ``random`` on by ``words`` 32-bit words, as a body drawing them did."""
    words = _fitting(words)
    while words > 0:
        some = min(words, _BLOCK)
        random.getrandbits(32 * some)
        words -= some


def _served(opened: _Open, restore: Callable[[bytes], T]) -> T:
    served = opened.served
    assert served is not None
    _draw_again(served.draws)
    if served.error_type is not None and served.error_type != TOOL_ERROR:
        recorded = _recorded_exception(served.body, served.error_type)
        opened.finish(served.body, served.error_type, served.shape, raised=recorded)
        raise recorded
    opened.finish(served.body, served.error_type, served.shape)  # a replay's own run keeps it
    token = _forked_answer.set(served.forked is not None)
    try:
        with restoring(served.body, served.shape):
            return restore(served.body)
    except Unfit as exc:
        what = str(exc)
    except json.JSONDecodeError as exc:  # orjson's too
        what = f"the recorded value is not JSON ({first_line(exc)})"
    except RecursionError:
        what = "the recorded value is nested too deeply to rebuild"
    except Exception as exc:  # whatever rebuilding it met: the recording is input
        what = f"the recorded value cannot be rebuilt ({qualified_name(exc)}: {first_line(exc)})"
        raise _bad_value(opened, served, what) from exc
    finally:
        _forked_answer.reset(token)
    raise _bad_value(opened, served, what) from None


def _bad_value(opened: _Open, served: Served, what: str) -> RecordedValueError:
    """The error that ends the replay at ``served``, told to the replay first. Inside a
    ``Pool`` task it is also an ``Exception``, so that the pool hands it on (see errors)."""
    kind = RecordedValueInPoolError if in_pool_worker() else RecordedValueError
    call = opened.call
    error = kind(served.run_id, served.index, f"{call.kind} {call.name}", what)
    server = _server
    if server is not None:
        server.bad_value(error)
    return error


def perform(
    call: Call, live: Callable[[], T], encode: Callable[[T], bytes], restore: Callable[[bytes], T]
) -> T:
    """Make the step ``call``: served from the recording under replay (``restore`` turns the
    recorded body into the value; what it raises, :class:`Unfit` or another error, becomes a
    :class:`~otel_replay.errors.RecordedValueError`), else ``live()``, whose value ``encode``
    records (it may raise, as a contract check does). What the step raised is raised again."""
    opened = _Open(call)
    if opened.served is not None:
        return _served(opened, restore)
    if call.instant:
        try:
            value = live()
            body = encode(value)
        except BaseException as exc:
            opened.finish(_error_body(exc), qualified_name(exc), raised=exc)
            raise
    else:
        with opened.running(measured=True):
            value = live()
            body = encode(value)
    opened.finish(body, None)
    return value


async def perform_async(
    call: Call,
    live: Callable[[], Awaitable[T]],
    encode: Callable[[T], bytes],
    restore: Callable[[bytes], T],
    *,
    failed: Callable[[T], bool] | None = None,
) -> T:
    """:func:`perform` for a coroutine. A value ``failed`` says is a failure (a result with
    an error flag) is recorded as the step's result with ``error.type`` :data:`TOOL_ERROR`,
    and given back as a value under replay."""
    opened = _Open(call)
    if opened.served is not None:
        return _served(opened, restore)
    with opened.running():
        value = await live()
        body = encode(value)
    opened.finish(body, _failure(failed, value))
    return value


def _failure(failed: Callable[[T], bool] | None, value: T) -> str | None:
    """The ``error.type`` of a step that returned ``value``: :data:`TOOL_ERROR` when
    ``failed`` says the value is a failure. Never raises: a check that fails records none."""
    if failed is None:
        return None
    try:
        return TOOL_ERROR if failed(value) else None
    except Exception:
        return None


def _foreign_tool_span(call: Call) -> Span | None:
    """The current span when a framework already opened ``execute_tool`` for this tool: we
    enrich it instead of emitting a second one."""
    span = trace.get_current_span()
    if not span.is_recording():
        return None
    attrs = getattr(span, "attributes", None) or {}
    if attrs.get("gen_ai.operation.name") != "execute_tool":
        return None
    if A.REPLAY_STEP_INDEX in attrs:
        return None  # already one of ours: a tool calling a tool gets its own span
    name = attrs.get("gen_ai.tool.name")
    return span if name in (None, call.name) else None
