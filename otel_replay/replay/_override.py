"""What a fork serves in place of a recorded step's answer (``--override``, ``--state``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from otel_replay._bodies import is_sse
from otel_replay._canonical import canonical_json
from otel_replay.codecs import CODECS
from otel_replay.errors import CodecError
from otel_replay.replay._model import RecordedStep
from otel_replay.replay.synth import synthesize

if TYPE_CHECKING:  # the plan's module checks overrides with parsed_answer
    from otel_replay.replay._fork import ForkPlan, Override

__all__ = ["parsed_answer", "served_instead"]

_OUTPUT = "gen_ai.output.messages"
# The list each provider's response body answers in: the codecs parse leniently (capture must
# not fail), so a body without it (another provider's, or none) is caught here.
_ANSWERS = {
    "openai.chat_completions": "choices",
    "openai.responses": "output",
    "anthropic.messages": "content",
}
_JSON = "application/json"
_TEXT = "text/plain; charset=utf-8"


def served_instead(plan: ForkPlan, recorded: RecordedStep) -> tuple[RecordedStep, str | None]:
    """The step to serve for ``recorded`` under ``plan`` and what the fork changed there
    (``override @result.json``, ``state after_search``), or ``recorded`` itself and None."""
    override = plan.overrides.get(recorded.step.index)
    if override is not None:
        return _overridden(recorded, override), override.describe()
    if plan.states and recorded.step.kind == "checkpoint":
        state = plan.states.get(recorded.endpoint.partition(":")[2])
        if state is not None:
            return _answered(recorded, state.body), state.describe()
    return recorded, None


def _overridden(recorded: RecordedStep, override: Override) -> RecordedStep:
    if recorded.step.kind == "llm":
        return _model_answer(recorded, override)
    if recorded.step.kind == "http":
        headers = recorded.step.response_headers
        if override.text:
            headers = [*_without(headers, "content-type"), ("content-type", _TEXT)]
        status = override.status or recorded.step.status_code or 200
        return _answered(recorded, override.body, status=status, headers=headers)
    body = canonical_json(override.body.decode()) if override.text else override.body
    return _answered(recorded, body)


def _answered(
    recorded: RecordedStep,
    body: bytes,
    *,
    status: int = 200,
    headers: list[tuple[str, str]] | None = None,
    chunks: list[tuple[int, int]] | None = None,
) -> RecordedStep:
    """``recorded`` answering ``body`` whole and without error, with ``status``, ``headers``
    (None: the recorded ones) and ``chunks`` (None: at once)."""
    step = replace(
        recorded.step,
        status_code=status,
        response_headers=recorded.step.response_headers if headers is None else headers,
        response_body=body,
        chunks=chunks or [],
        complete=True,
        error_type=None,
    )
    return replace(recorded, step=step)


def _model_answer(recorded: RecordedStep, override: Override) -> RecordedStep:
    """A model step answering ``override``: a message saying its text, or the provider
    response body it holds, in the recorded call's shape (the session reshapes it to the
    request's)."""
    attributes = dict(recorded.attributes)
    if override.text:
        message = {
            "role": "assistant",
            "parts": [{"type": "text", "content": override.body.decode()}],
            "finish_reason": "stop",
        }
        attributes[_OUTPUT] = json.dumps([message])
        attributes["gen_ai.response.finish_reasons"] = ["stop"]
        streamed = any(
            k.lower() == "content-type" and is_sse(v) for k, v in recorded.step.response_headers
        )
        made = synthesize(recorded.endpoint, attributes, streamed)
        headers, body, chunks = list(made.headers), made.body, list(made.chunks)
    else:
        attributes.update(parsed_answer(recorded.endpoint, override.body))
        headers = [
            *_without(recorded.step.response_headers, "content-type"),
            ("content-type", _JSON),
        ]
        body, chunks = override.body, []
    served = _answered(recorded, body, headers=headers, chunks=chunks)
    return replace(served, fidelity="semantic", attributes=attributes)


def parsed_answer(endpoint: str, body: bytes) -> dict[str, object]:
    """The GenAI response attributes of a provider response ``body`` for ``endpoint`` (output
    messages included), as the session needs them to serve it as a stream; raises
    :class:`~otel_replay.errors.CodecError` when it is not that provider's response."""
    codec = next((c for c in CODECS if c.name == endpoint), None)
    if codec is None:
        return {}
    response = codec.parse_response(200, body, False)
    key = _ANSWERS.get(endpoint)
    if key is not None and not isinstance(json.loads(body).get(key), list):
        raise CodecError(f"it has no {key!r} list")
    attributes: dict[str, object] = dict(response.attributes)
    if response.output_messages:
        attributes[_OUTPUT] = json.dumps(response.output_messages)
    return attributes


def _without(headers: Sequence[tuple[str, str]], name: str) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers if k.lower() != name]
