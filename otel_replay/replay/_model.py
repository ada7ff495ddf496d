"""A recorded run as replay sees it: ordered steps with what is needed to serve them back.

Every source (the store, OTLP JSON or protobuf files, an OTLP JSON URL) is turned into a
:class:`Run`; the replay transport, the matcher and the divergence report only ever see this.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Fidelity", "RecordedStep", "Run", "endpoint_of"]

_ENVELOPE_PREFIXES = ("tool:", "value:", "checkpoint:")

Fidelity = Literal["exact", "semantic"]
"""``exact``: the recorded bytes themselves (from the store or an inline body).
``semantic``: a provider-format response synthesised from the span's GenAI attributes."""


def endpoint_of(method: str, url_or_path: str, codec: str | None) -> str:
    """The endpoint key steps are matched on.

    A model call is keyed by its codec (``openai.chat_completions``), so the same API behind
    another base URL, proxy or deployment still matches. Any other call is keyed by its
    method and path, without scheme, host or query (hosts move between environments). A
    step beyond HTTP is keyed by its pseudo URL (``tool:lookup_order``, ``value:now``).
    """
    if codec is not None:
        return codec
    if url_or_path.startswith(_ENVELOPE_PREFIXES):
        return url_or_path  # a tool, value or checkpoint: tool:lookup_order
    path = url_or_path
    if "://" in path:
        path = path.split("://", 1)[1]
        path = "/" + path.split("/", 1)[1] if "/" in path else "/"
    path = path.split("?", 1)[0].split("#", 1)[0] or "/"
    return f"{method.upper()} {path}"


@dataclass(frozen=True, slots=True)
class RecordedStep:
    """One recorded request and what came back.

    ``request_body`` is the exact (redacted) request body when the source has it, else None
    (a span from another instrumentation). ``response_body`` is always set: the exact bytes
    (``fidelity="exact"``) or synthesised ones (``"semantic"``). ``chunks`` are
    ``(size, ns after the request was sent)`` pairs that add up to ``len(response_body)``; empty
    means one chunk. ``error_type`` with ``status_code`` None is a transport error: replay
    raises it again instead of answering.
    """

    index: int
    kind: str
    endpoint: str
    method: str
    url: str | None
    request_body: bytes | None
    request_hash: str | None
    status_code: int | None
    response_headers: tuple[tuple[str, str], ...]
    response_body: bytes
    fidelity: Fidelity
    chunks: tuple[tuple[int, int], ...] = ()
    complete: bool = True
    error_type: str | None = None
    provider: str | None = None
    model: str | None = None
    prompt_hash: str | None = None
    tool_schema_version: str | None = None
    duration_ns: int = 0
    attributes: Mapping[str, Any] = field(default_factory=dict)
    """The step span's attributes as recorded (empty when the source had no span)."""
    within: int | None = None
    """The index of the tool (or side effect) step whose body made this step: when that step
    is served from the recording, this one is not expected again."""
    start_ns: int | None = None
    """When the step started (Unix nanoseconds), when known: a response that was still coming
    while later steps ran is served in step with them (see ``Matcher.awaited``)."""


@dataclass(frozen=True, slots=True)
class Run:
    """A recorded run: its steps in ``replay.step.index`` order and its replay kit.

    ``source`` says where it came from, for messages (``store ./.otel-replay``, a file path,
    a URL). ``resource`` holds the recording process's resource attributes (SDK and service
    versions) when known.
    """

    run_id: str
    source: str
    steps: tuple[RecordedStep, ...]
    commit: str | None = None
    seed: int | None = None
    code_dirty: bool | None = None
    resource: Mapping[str, Any] = field(default_factory=dict)
    start_ns: int | None = None
    """When the recorded run started (Unix nanoseconds), when known: a replay's clock."""
