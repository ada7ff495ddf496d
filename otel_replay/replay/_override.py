"""What a fork serves in place of a recorded step's answer (``--override``, ``--state``).

:func:`served_instead` turns the recorded step a request matched into the step the fork
serves: the same request, another answer. A model step's answer is made a provider response
(``text:`` through ``replay.synth``; a JSON body as given), and it is marked ``semantic`` so
the session serves it in the shape today's request asks for, streamed (the provider's SSE
framing) or not. A tool, value or checkpoint step returns the given JSON; an HTTP step serves
the given body, with the given status when there is one.
"""

from __future__ import annotations

import json
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


def served_instead(plan: ForkPlan, step: RecordedStep) -> tuple[RecordedStep, str | None]:
    """The step to serve for ``step`` under ``plan`` and what the fork changed there
    (``override @result.json``, ``state after_search``), or ``step`` itself and None."""
    override = plan.overrides.get(step.index)
    if override is not None:
        return _overridden(step, override), override.describe()
    if plan.states and step.kind == "checkpoint":
        state = plan.states.get(step.endpoint.partition(":")[2])
        if state is not None:
            return _answered(step, state.body), state.describe()
    return step, None


def _overridden(step: RecordedStep, override: Override) -> RecordedStep:
    if step.kind == "llm":
        return _model_answer(step, override)
    if step.kind == "http":
        headers = step.response_headers
        if override.text:
            headers = (*_without(headers, "content-type"), ("content-type", _TEXT))
        status = override.status or step.status_code or 200
        return replace(_answered(step, override.body), status_code=status, response_headers=headers)
    body = canonical_json(override.body.decode()) if override.text else override.body
    return _answered(step, body)


def _answered(step: RecordedStep, body: bytes) -> RecordedStep:
    """``step`` answering ``body`` whole, at once and without error."""
    return replace(
        step, response_body=body, chunks=(), complete=True, error_type=None, status_code=200
    )


def _model_answer(step: RecordedStep, override: Override) -> RecordedStep:
    """A model step answering ``override``: a message saying its text, or the provider
    response body it holds, in the recorded call's shape (the session reshapes it to the
    request's)."""
    attributes = dict(step.attributes)
    if override.text:
        message = {
            "role": "assistant",
            "parts": [{"type": "text", "content": override.body.decode()}],
            "finish_reason": "stop",
        }
        attributes[_OUTPUT] = json.dumps([message])
        attributes["gen_ai.response.finish_reasons"] = ["stop"]
        streamed = any(k.lower() == "content-type" and is_sse(v) for k, v in step.response_headers)
        made = synthesize(step.endpoint, attributes, streamed)
        headers, body, chunks = made.headers, made.body, made.chunks
    else:
        attributes.update(parsed_answer(step.endpoint, override.body))
        headers = (*_without(step.response_headers, "content-type"), ("content-type", _JSON))
        body, chunks = override.body, ()
    return replace(
        step,
        status_code=200,
        response_headers=headers,
        response_body=body,
        chunks=chunks,
        complete=True,
        error_type=None,
        fidelity="semantic",
        attributes=attributes,
    )


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


def _without(headers: tuple[tuple[str, str], ...], name: str) -> tuple[tuple[str, str], ...]:
    return tuple((k, v) for k, v in headers if k.lower() != name)
