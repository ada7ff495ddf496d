"""A replay's steps read for a test: tool calls with their arguments and results, model
calls with their messages and answer, values, and checkpoints with their state.

Each is the :class:`ServedStep` it comes from (its match, changes, liveness) with what its
bodies say decoded. A body comes from the replay when it kept one (in-process), else from
the recorded step that answered (a report file keeps no bodies)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

import orjson

from otel_replay._bodies import is_sse
from otel_replay.codecs import CODECS, Message, Part
from otel_replay.errors import CodecError
from otel_replay.replay._diff import parse_json
from otel_replay.replay._model import RecordedStep
from otel_replay.replay._served import ServedStep

__all__ = ["Checkpoint", "ModelCall", "ToolCall", "Value", "read_calls"]

_STEP_FIELDS = tuple(f.name for f in fields(ServedStep))
_CODECS = {codec.name: codec for codec in CODECS}
S = TypeVar("S", bound=ServedStep)


@dataclass(slots=True, kw_only=True)
class ToolCall(ServedStep):
    """A call of an ``@otel_replay.tool`` (or a framework tool): ``name``; ``arguments`` as
    today's code passed them (the decoded JSON object); ``result`` the decoded JSON answer
    the code got (None when it raised); ``error`` the ``error.type`` of the exception it got
    instead (None: it returned)."""

    name: str
    arguments: Any = None
    result: Any = None
    error: str | None = None


@dataclass(slots=True, kw_only=True)
class ModelCall(ServedStep):
    """A call to a model API: ``provider`` and ``model`` as requested, ``system`` (system
    instructions), ``messages`` (the input messages today's code sent) and ``tools`` (the
    tool definitions offered), and ``output``: the answer's messages. Messages are in the
    GenAI semantic conventions' shape, whatever the provider: ``{"role": "user", "parts":
    [{"type": "text", "content": "…"}]}``; a tool call is a part ``{"type": "tool_call",
    "id", "name", "arguments"}``. ``output`` is empty when no answer was served (an
    unmatched request) or its body is not the provider's."""

    provider: str | None = None
    model: str | None = None
    system: list[Part] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    output: list[Message] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The answer's text: its messages' text parts, joined by newlines."""
        return "\n".join(
            str(part.get("content", ""))
            for message in self.output
            for part in message.get("parts", ())
            if part.get("type") == "text"
        )

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The tool calls the answer asks for, in order: ``{"id", "name", "arguments"}``
        (arguments decoded when the provider sent JSON text)."""
        return [
            {"id": part.get("id"), "name": part.get("name"), "arguments": part.get("arguments")}
            for message in self.output
            for part in message.get("parts", ())
            if part.get("type") == "tool_call"
        ]


@dataclass(slots=True, kw_only=True)
class Value(ServedStep):
    """A value step (``otel_replay.now()``, ``uuid4()``, ``side_effect(name, …)``):
    ``name`` (``now``, ``uuid4``, the side effect's name) and ``value``, the decoded JSON
    the code got (``now()``: its ISO 8601 text; ``uuid4()``: its text; None when the side
    effect raised: ``error`` names what)."""

    name: str
    value: Any = None
    error: str | None = None


@dataclass(slots=True, kw_only=True)
class Checkpoint(ServedStep):
    """An ``otel_replay.checkpoint(name, state)``: ``state`` is the decoded JSON state the
    code got back (the recorded one, or the one a fork put in its place)."""

    name: str
    state: Any = None


def read_calls(
    steps: Sequence[ServedStep], recorded: Mapping[int, RecordedStep], kind: type[S]
) -> list[S]:
    """The steps of ``kind`` among ``steps`` (in replay order), their bodies decoded;
    ``recorded`` is the run's steps by index."""
    out: list[S] = []
    for step in steps:
        answered_by = recorded.get(step.recorded) if step.recorded is not None else None
        request = step.request_body
        if request is None and answered_by is not None:
            request = answered_by.request_body
        response = step.response_body
        if response is None and answered_by is not None and step.forked is None:
            response = answered_by.step.response_body
        made = _READERS[kind](step, request, response, answered_by)
        if made is not None:
            out.append(cast(S, made))
    return out


def _fields(step: ServedStep) -> dict[str, Any]:
    return {name: getattr(step, name) for name in _STEP_FIELDS}


def _named(step: ServedStep, envelope: str) -> str | None:
    """The name of a step beyond HTTP of ``envelope`` kind (``tool:NAME``), else None."""
    kind, _, name = step.url.partition(":")
    return name if kind == envelope and step.method == envelope.upper() else None


def _error(answered_by: RecordedStep | None) -> str | None:
    return None if answered_by is None else answered_by.step.error_type


def _tool_call(
    step: ServedStep, request: bytes | None, response: bytes | None, by: RecordedStep | None
) -> ToolCall | None:
    name, error = _named(step, "tool"), _error(by)
    if name is None:
        return None
    arguments, result = _json(request), None if error else _json(response)
    return ToolCall(**_fields(step), name=name, arguments=arguments, result=result, error=error)


def _value(
    step: ServedStep, request: bytes | None, response: bytes | None, by: RecordedStep | None
) -> Value | None:
    name, error = _named(step, "value"), _error(by)
    if name is None:
        return None
    return Value(**_fields(step), name=name, value=None if error else _json(response), error=error)


def _checkpoint(
    step: ServedStep, request: bytes | None, response: bytes | None, by: RecordedStep | None
) -> Checkpoint | None:
    name = _named(step, "checkpoint")
    return None if name is None else Checkpoint(**_fields(step), name=name, state=_json(response))


def _model_call(
    step: ServedStep, request: bytes | None, response: bytes | None, by: RecordedStep | None
) -> ModelCall | None:
    codec = _CODECS.get(step.endpoint)
    if codec is None:
        return None
    made = ModelCall(**_fields(step))
    body = parse_json(request)
    if isinstance(body, Mapping):
        with contextlib.suppress(CodecError):
            asked = codec.parse_request(urlsplit(step.url).path, body)
            made.provider, made.model = asked.provider, asked.model
            made.system, made.messages = asked.system_instructions, asked.input_messages
            made.tools = asked.tool_definitions
    if response is not None and by is not None:
        headers = by.step.response_headers
        streamed = any(k.lower() == "content-type" and is_sse(v) for k, v in headers)
        with contextlib.suppress(CodecError):
            answer = codec.parse_response(by.step.status_code or 200, response, streamed)
            made.output = answer.output_messages
    return made


_READERS: dict[
    type[ServedStep],
    Callable[[ServedStep, bytes | None, bytes | None, RecordedStep | None], ServedStep | None],
] = {ToolCall: _tool_call, Value: _value, Checkpoint: _checkpoint, ModelCall: _model_call}


def _json(body: bytes | None) -> Any:
    """A body's JSON value; its text when it is not JSON (None: no body)."""
    if body is None:
        return None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace")
