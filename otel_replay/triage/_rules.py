"""The failure rules: what in a recorded run earns which ``replay.failure.category`` label
(its severity comes with the category: ``_severity``). docs/triage.md states them for users;
keep the two alike.

Each rule reads a rebuilt :class:`~otel_replay.replay.Run` (steps with their bytes, or
rebuilt from their spans' GenAI attributes) and returns step labels. Pure functions, no I/O.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import urlsplit

from otel_replay import attributes as A
from otel_replay._canonical import canonical_json
from otel_replay.codecs import CODECS
from otel_replay.errors import CodecError
from otel_replay.replay import RecordedStep, Run, diff_runs
from otel_replay.step import refused_by_replay
from otel_replay.store import FailureLabel
from otel_replay.triage._severity import CATEGORIES, SEVERITY

__all__ = [
    "DRIFT",
    "MISMATCH",
    "REPEATS",
    "drift_error",
    "mismatch_labels",
    "refused_by_replay",
    "step_labels",
]

Category = A.ReplayFailureCategoryValues
CONTRACT = Category.CONTRACT_VIOLATION.value
DRIFT = Category.ENVIRONMENT_DRIFT.value
HALLUCINATION = Category.MODEL_HALLUCINATION.value
EXHAUSTION = Category.TOOL_EXHAUSTION.value
MISMATCH = Category.REPLAY_MISMATCH.value
OVERFLOW = Category.RETRY_OVERFLOW.value

REPEATS = 3
"""Calls of one tool with the same arguments in a row that make tool exhaustion: a second
call may be a retry, a third is a loop."""

_MAX_REASON = 200
# The last part of an error type that names a failure of the network or of a provider: what a
# timeout, a lost connection or a refused call raise (httpx, urllib3, aiohttp, the SDKs, the
# builtins); an answer cut off raises requests' ChunkedEncodingError, aiohttp's
# ClientPayloadError, http.client's IncompleteRead.
_TIMEOUT = re.compile(r"Timeout|TimedOut")
_CONNECTION = re.compile(
    r"Connect|Disconnect|RemoteProtocol|NetworkError|ReadError|WriteError|ProtocolError"
    r"|ChunkedEncoding|ClientPayload|IncompleteRead"
)
_PROVIDER = re.compile(r"InternalServer|RateLimit|Overloaded|ServiceUnavailable|APIStatus")
_CONTRACT_ERROR = "ToolContractError"


def _label(step: int | None, category: str, rule: str, reason: str) -> FailureLabel:
    if len(reason) > _MAX_REASON:
        reason = reason[: _MAX_REASON - 1] + "…"
    return FailureLabel(step, category, SEVERITY[category], rule, reason)


def _last(error_type: str) -> str:
    return error_type.rsplit(".", 1)[-1]


def drift_error(error_type: str | None) -> bool:
    """Whether an exception type names an environment failure: a timeout, a connection
    error, a provider's 5xx or rate limit (``openai.InternalServerError``, ``httpx.ReadTimeout``,
    ``ConnectionError``…)."""
    if not error_type:
        return False
    return (
        _timeout(error_type) or _connection(error_type) or bool(_PROVIDER.search(_last(error_type)))
    )


def _call(recorded: RecordedStep) -> str:
    """How a step is named in a reason: ``openai.chat_completions``, ``GET /tools/orders/7``,
    ``tool lookup_order``."""
    if recorded.endpoint.startswith("tool:"):
        return f"tool {recorded.endpoint.removeprefix('tool:')}"
    if recorded.step.kind == "http":
        parts = urlsplit(recorded.step.url)
        return f"{recorded.step.method} {parts.path or recorded.step.url}"
    return recorded.endpoint


def step_labels(run: Run) -> list[FailureLabel]:
    """Every step label the rules give ``run`` (see docs/triage.md), in step order; a step
    may hold more than one."""
    steps = run.steps
    found = [
        *_stamped(steps),
        *_contract(steps),
        *_drift(steps),
        *_hallucination(steps),
        *_exhaustion(steps),
    ]
    return sorted(found, key=lambda label: label.step or 0)


# -- retry overflow: labelled when recorded (Budget stamps the step) --------------------------


def _stamped(steps: Sequence[RecordedStep]) -> Iterator[FailureLabel]:
    for recorded in steps:
        category = recorded.attributes.get(A.REPLAY_FAILURE_CATEGORY)
        if category not in CATEGORIES:
            continue
        attempt = recorded.attributes.get(A.REPLAY_TOOL_ATTEMPT)
        what = f"attempt {attempt} of {_call(recorded)}" if attempt else _call(recorded)
        error = f" ({recorded.step.error_type})" if recorded.step.error_type else ""
        why = (
            "its retry budget ran out"
            if category == OVERFLOW
            else f"labelled {category} when recorded"
        )
        yield _label(recorded.step.index, str(category), "stamped", f"{what} failed{error}: {why}")


# -- contract violation ---------------------------------------------------------------------


def _contract(steps: Sequence[RecordedStep]) -> Iterator[FailureLabel]:
    for recorded in steps:
        error_type = recorded.step.error_type
        if recorded.step.kind != "tool" or not error_type or _last(error_type) != _CONTRACT_ERROR:
            continue
        message = _raised_message(recorded.step.response_body) or error_type
        yield _label(recorded.step.index, CONTRACT, "tool_contract", message)


def _raised_message(body: bytes) -> str | None:
    """The message of a tool step that raised (its body: ``{"message": ..., "type": ...}``)."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    message = value.get("message") if isinstance(value, dict) else None
    return message if isinstance(message, str) and message else None


# -- environment drift ----------------------------------------------------------------------


def _drift(steps: Sequence[RecordedStep]) -> Iterator[FailureLabel]:
    for position, recorded in enumerate(steps):
        step = recorded.step
        if A.REPLAY_FORK_CHANGE in recorded.attributes:
            continue  # a fork's injected fault is the experiment, not the world
        if recorded.attributes.get(A.REPLAY_FAILURE_CATEGORY) in CATEGORIES:
            continue  # labelled when recorded (a budget's last attempt): that label says it
        error_type = step.error_type or ""
        if error_type in signal.Signals.__members__:
            continue  # cut off by the process's own end (SIGTERM, SIGHUP): a kill, not the world
        if step.kind == "tool":
            if error_type and (_timeout(error_type) or _connection(error_type)):
                yield _label(
                    step.index, DRIFT, "tool_error", f"{_call(recorded)} raised {error_type}"
                )
            continue
        if step.kind not in ("llm", "http"):
            continue
        status = step.status_code
        if status is not None and status >= 500:
            yield _label(step.index, DRIFT, "http_5xx", f"HTTP {status} from {_call(recorded)}")
        elif status == 429 and not _retried_through(recorded, steps[position + 1 :]):
            reason = f"HTTP 429 from {_call(recorded)}, and no retry of the request got through"
            yield _label(step.index, DRIFT, "rate_limited", reason)
        elif status is None and error_type and not refused_by_replay(error_type):
            rule = "timeout" if _timeout(error_type) else "connection"
            what = "timed out" if rule == "timeout" else "failed to connect or lost the connection"
            yield _label(step.index, DRIFT, rule, f"{_call(recorded)} {what} ({error_type})")
        elif status is not None and status < 400 and not step.complete and error_type:
            reason = f"the connection dropped in the middle of {_call(recorded)}'s answer"
            yield _label(step.index, DRIFT, "connection", f"{reason} ({error_type})")


def _timeout(error_type: str) -> bool:
    return bool(_TIMEOUT.search(_last(error_type)))


def _connection(error_type: str) -> bool:
    return bool(_CONNECTION.search(_last(error_type)))


def _retried_through(refused: RecordedStep, later: Sequence[RecordedStep]) -> bool:
    """Whether a later step sent the same request and got an answer (a retry got through);
    a step whose request bytes were not recorded has nothing to compare."""
    return bool(refused.step.request_hash) and any(
        other.step.request_hash == refused.step.request_hash
        and other.step.status_code is not None
        and other.step.status_code < 400
        for other in later
    )


# -- model hallucination --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _ToolCall:
    name: str
    arguments: Any
    """Parsed JSON, or the text as the model wrote it when it does not parse."""


@dataclass(frozen=True, slots=True)
class _ModelTurn:
    """What a model call offered and what the model called: ``offered`` is None when the
    recording does not say (a span of another instrumentation without tool definitions)."""

    offered: Mapping[str, Mapping[str, Any]] | None
    calls: tuple[_ToolCall, ...]


def _model_turn(recorded: RecordedStep) -> _ModelTurn | None:
    """The tool calls of a model call that answered, from its bytes when recorded, else from
    its span's GenAI attributes; None when neither says."""
    step = recorded.step
    if step.kind != "llm" or step.status_code != 200 or not step.complete:
        return None  # an answer cut short may end mid-arguments: the network's doing
    codec = next((c for c in CODECS if c.name == recorded.endpoint), None)
    if codec is not None and recorded.fidelity == "exact" and recorded.request_known:
        try:
            request = codec.parse_request(
                urlsplit(step.url).path, json.loads(recorded.step.request_body)
            )
            streamed = any(
                k.lower() == "content-type" and "event-stream" in v
                for k, v in step.response_headers
            )
            response = codec.parse_response(200, step.response_body, streamed)
        except (CodecError, ValueError, TypeError, AttributeError):
            return None
        return _ModelTurn(_offered(request.tool_definitions), _calls(response.output_messages))
    definitions = _json_attribute(recorded.attributes.get("gen_ai.tool.definitions"))
    messages = _json_attribute(recorded.attributes.get("gen_ai.output.messages"))
    if not isinstance(messages, list):
        return None
    offered = _offered(definitions) if isinstance(definitions, list) else None
    return _ModelTurn(offered, _calls(messages))


def _json_attribute(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return None


def _offered(definitions: Sequence[Any]) -> dict[str, Mapping[str, Any]]:
    """The tools offered, by name (each definition as the GenAI attributes write it)."""
    return {
        d["name"]: d
        for d in definitions
        if isinstance(d, Mapping) and isinstance(d.get("name"), str)
    }


def _calls(messages: Sequence[Any]) -> tuple[_ToolCall, ...]:
    calls = []
    for message in messages:
        parts = message.get("parts") if isinstance(message, Mapping) else None
        for part in parts if isinstance(parts, list) else ():
            if isinstance(part, Mapping) and part.get("type") == "tool_call":
                calls.append(_ToolCall(str(part.get("name")), part.get("arguments")))
    return tuple(calls)


def _hallucination(steps: Sequence[RecordedStep]) -> Iterator[FailureLabel]:
    for recorded in steps:
        turn = _model_turn(recorded)
        if turn is None:
            continue
        problems = [p for call in turn.calls if (p := _wrong_call(call, turn.offered))]
        if problems:
            rule, reason = problems[0]
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            yield _label(recorded.step.index, HALLUCINATION, rule, reason + more)


def _wrong_call(
    call: _ToolCall, offered: Mapping[str, Mapping[str, Any]] | None
) -> tuple[str, str] | None:
    """What is wrong with one tool call (the rule and why), None when nothing is."""
    if offered is not None and call.name not in offered:
        names = ", ".join(sorted(offered)) or "none"
        return (
            "unoffered_tool",
            f"the model called {call.name}, a tool the request did not offer (offered: {names})",
        )
    arguments = call.arguments
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return (
                "unparsable_arguments",
                f"the model's arguments for {call.name} are not JSON: {arguments[:60]!r}",
            )
    if offered is None:
        return None
    if arguments is None:
        arguments = {}  # no arguments at all: as SDKs pass them, an empty object
    schema = offered[call.name].get("parameters")
    if not isinstance(schema, Mapping):
        return None
    error = _schema_error(canonical_json(schema), arguments)
    if error is None:
        return None
    return (
        "invalid_arguments",
        f"the model's arguments for {call.name} break its schema at {error}",
    )


@cache
def _validator(schema: bytes) -> Any:
    """A JSON Schema validator for ``schema`` (canonical JSON), None when it is not one."""
    import jsonschema  # noqa: PLC0415 - first use only

    parsed = json.loads(schema)
    cls = jsonschema.validators.validator_for(parsed, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(parsed)
    except jsonschema.SchemaError:
        return None
    return cls(parsed)


def _schema_error(schema: bytes, instance: Any) -> str | None:
    """``$.path: what is wrong`` where ``instance`` breaks ``schema``, None when it holds
    (or the schema is not a valid one: nothing to hold the model to)."""
    import jsonschema  # noqa: PLC0415 - first use only

    validator = _validator(schema)
    if validator is None:
        return None
    error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
    return None if error is None else f"{error.json_path}: {error.message}"


# -- tool exhaustion -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Made:
    """One tool call made: the tool, its arguments (canonical JSON) and its step."""

    name: str
    arguments: bytes
    step: int


def _made_calls(steps: Sequence[RecordedStep]) -> list[_Made]:
    """The run's tool calls in order: its tool steps when it has any (a budget's attempts
    after the first are the same call), else the calls its model asked for (tools over plain
    HTTP leave no tool step)."""
    tools = [r for r in steps if r.step.kind == "tool"]
    if tools:
        return [
            _Made(_tool_name(r), r.step.request_body, r.step.index)
            for r in tools
            if (r.attributes.get(A.REPLAY_TOOL_ATTEMPT) or 1) == 1
        ]
    made = []
    for recorded in steps:
        turn = _model_turn(recorded)
        for call in turn.calls if turn is not None else ():
            arguments = call.arguments
            if isinstance(arguments, str):
                with contextlib.suppress(ValueError):  # else compared as the text it is
                    arguments = json.loads(arguments)
            made.append(_Made(call.name, canonical_json(arguments), recorded.step.index))
    return made


def _tool_name(recorded: RecordedStep) -> str:
    name = recorded.attributes.get("gen_ai.tool.name")
    return name if isinstance(name, str) else recorded.endpoint.removeprefix("tool:")


def _exhaustion(steps: Sequence[RecordedStep]) -> Iterator[FailureLabel]:
    made = _made_calls(steps)
    start = 0
    while start < len(made):
        end = start + 1
        while end < len(made) and (made[end].name, made[end].arguments) == (
            made[start].name,
            made[start].arguments,
        ):
            end += 1
        streak = made[start:end]
        if len(streak) >= REPEATS:
            shown = ", ".join(str(m.step) for m in streak[:8]) + (", …" if len(streak) > 8 else "")
            yield _label(
                streak[REPEATS - 1].step,
                EXHAUSTION,
                "repeated_call",
                f"{streak[0].name} called {len(streak)} times in a row with the same arguments "
                f"(steps {shown})",
            )
        start = end


# -- replay mismatch ------------------------------------------------------------------------


def _refusal(refused: RecordedStep) -> str:
    """Why the replay refused the request of step ``refused``: what the refusal said, for a
    tool step (whose body keeps it: a write a fork served only with its recorded arguments is
    a call the recording has, with other arguments); else that the recording lacks it."""
    said = _raised_message(refused.step.response_body) if refused.step.kind == "tool" else None
    if said is not None:
        first = said.strip().splitlines()[0].removeprefix("otel-replay: ")
        return f"the replay refused {_call(refused)}: {first}"
    return (
        f"the replay refused {_call(refused)}: the recording has no such request "
        f"({refused.step.error_type})"
    )


def mismatch_labels(run: Run, parent: Run | None, fork_step: int | None) -> list[FailureLabel]:
    """Where a replay (or a fork, before its first changed step ``fork_step``) of ``parent``
    did not do what ``parent`` did: a request the replay refused, and the first divergence
    from the recording (when ``parent`` is known)."""
    found = [
        _label(r.step.index, MISMATCH, "unmatched_request", _refusal(r))
        for r in run.steps
        if refused_by_replay(r.step.error_type)
    ]
    if parent is None:
        return found
    first = diff_runs(parent, run).first_divergence
    if first is None:
        return found
    where = first.a.step.index if first.a is not None else None
    if fork_step is not None and (where is None or where >= fork_step):
        return found  # a fork differs from its first changed step on: that is its point
    step = first.b.step.index if first.b is not None else None
    if first.status == "removed":
        reason = f"the replay never made step {where} ({_call(first.recorded)}) of {parent.run_id}"
    elif first.status == "added":  # the label is on the step: its reason need not name it
        reason = f"{_call(first.recorded)} is not in {parent.run_id}"
    else:
        reason = f"{_call(first.recorded)} differs from {parent.run_id}: " + (
            ", ".join(first.fields())
        )
    if all(label.step != step for label in found):
        found.append(_label(step, MISMATCH, "diverged", reason))
    return found
