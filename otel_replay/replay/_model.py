"""A recorded run as replay sees it (:class:`Run`): ordered steps with what is needed to
serve them back. Every source becomes one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from otel_replay.step import Step

__all__ = ["Fidelity", "RecordedStep", "Run", "endpoint_of"]

_ENVELOPE_PREFIXES = ("tool:", "value:", "checkpoint:")
_HOP = frozenset({"content-encoding", "content-length", "transfer-encoding"})

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
    """One recorded step as replay serves it: its :class:`Step` and what replay adds to it.

    ``step.response_body`` is always set: the exact bytes (``fidelity="exact"``) or synthesised
    ones (``"semantic"``); ``step.chunks`` add up to its length (empty means one chunk).
    ``step.error_type`` with ``step.status_code`` None is a transport error: replay raises it
    again instead of answering. A fact the source lacks is left empty in ``step``: ``url`` and
    ``request_hash`` "", ``start_ns`` 0 (``end_ns`` is then the duration), ids 0; and
    ``request_known`` False when the source has no request body (a span from another
    instrumentation). ``step.within`` is the tool (or side effect) step whose body made this
    one: when that step is served from the recording, this one is not expected again.
    """

    step: Step
    endpoint: str
    fidelity: Fidelity
    request_known: bool = True
    prompt_hash: str | None = None
    tool_schema_version: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    """The step span's attributes as recorded (empty when the source had no span)."""
    served_headers: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)
    """``step.response_headers`` as replay serves them: without the framing headers, which
    no longer apply (the recorded body is already decoded from its content-encoding, and the
    stream knows its length). Made with the step, not on every serving of it."""

    def __post_init__(self) -> None:
        served = tuple([(k, v) for k, v in self.step.response_headers if k.lower() not in _HOP])
        object.__setattr__(self, "served_headers", served)

    @property
    def request_body(self) -> bytes | None:
        """The exact (redacted) request body, None when the source does not have it."""
        return self.step.request_body if self.request_known else None

    @property
    def duration_ns(self) -> int:
        return self.step.end_ns - self.step.start_ns


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
    status: str = "ok"
    """How the recorded run ended: ``ok``; ``error`` (``error_type`` names its own error);
    ``incomplete``: its recorder never closed it, or its source holds it only in part (not
    all its spans had arrived when it was read; ``missing`` says what is not there)."""
    error_type: str | None = None
    missing: str | None = None
