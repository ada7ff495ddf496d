"""The recorded exchange: :class:`Step`, the one shape every stage imports, and its run's facts."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "ENVELOPE_KINDS",
    "RunEnd",
    "RunFacts",
    "Step",
    "address",
    "describe_effect",
    "refused_by_replay",
]

ENVELOPE_KINDS = ("tool", "value", "checkpoint")
"""The kinds of step recorded above HTTP (``otel_replay.tool``, values, checkpoints)."""
_METHODS = {"tool": "TOOL", "value": "VALUE", "checkpoint": "CHECKPOINT"}

_EFFECT_WHY = {
    ("read", "hint"): "readOnlyHint true",
    ("write", "hint"): "readOnlyHint false",
    ("read", "setting"): "OTEL_REPLAY_READ_TOOLS",
    ("write", "setting"): "OTEL_REPLAY_WRITE_TOOLS",
    ("write", "default"): "declared nowhere",
    ("write", "recorded"): "as recorded",
}


def address(kind: str, name: str) -> tuple[str, str]:
    """The pseudo method and URL a step of ``kind`` (one of :data:`ENVELOPE_KINDS`) named
    ``name`` is stored and matched by."""
    return _METHODS[kind], f"{kind}:{name}"


def describe_effect(effect: str, reason: str) -> str:
    """``write: declared nowhere``, ``read: OTEL_REPLAY_READ_TOOLS``…: the effect and why."""
    return f"{effect}: {_EFFECT_WHY.get((effect, reason), reason)}"


_REPLAY_REFUSALS = ("UnmatchedRequestError", "NetworkBlockedError")


def refused_by_replay(error_type: str | None) -> bool:
    """Whether a step's ``error.type`` is a replay's refusal of its call (a request the
    recording lacks, a write a fork serves only with its recorded arguments, the network)."""
    return error_type is not None and error_type.rsplit(".", 1)[-1] in _REPLAY_REFUSALS


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What is known of a run when it starts: its id, mode, seed and code version.

    ``start_ns`` is the wall-clock start (Unix nanoseconds); ``commit`` the revision recorded
    (``vcs.ref.head.revision``) and ``code_dirty`` whether the working tree had changes; each
    None when unknown. ``parent_run_id`` is, for a replay or a fork, the run it re-executed
    (``replay.parent.run.id``); None for a recording.
    """

    run_id: str
    mode: str = "record"
    seed: int | None = None
    commit: str | None = None
    code_dirty: bool | None = None
    start_ns: int = 0
    parent_run_id: str | None = None


@dataclass(slots=True)
class Reading:
    """What the capture made of a step's bodies: the very bytes objects it hashed (the
    request's under ``request_hash`` and, once it is in, the response's under
    ``response_hash``, with its ``status`` and whether it was streamed, ``sse``), and the
    very strings it put on the span from them (``values``, by attribute: inline bodies and,
    read by ``codec``, content attributes).

    Identity is the proof: a body that *is* the one hashed needs no second hash, and a span
    value that *is* one of these strings was made from those bodies by the functions the
    store rebuilds it with, so the store leaves it out without reading the bodies again.
    Anything else (edited, copied, truncated, another's) is checked the slow way."""

    request_body: bytes
    request_hash: str
    codec: str | None
    values: dict[str, str]
    response_body: bytes | None = None
    response_hash: str | None = None
    status: int = 0
    sse: bool = False

    def hashed(self, step: Step) -> tuple[bool, bool]:
        """Whether ``step``'s request and response bodies are the ones this hashed, under
        the hashes it states."""
        return (
            step.request_body is self.request_body and step.request_hash == self.request_hash,
            step.response_body is self.response_body and step.response_hash == self.response_hash,
        )


@dataclass(slots=True)
class Step:
    """One recorded exchange: everything needed to serve it back byte-exact, and its facts.

    Bodies are the exact bytes after redaction (the response decoded from any
    content-encoding); ``request_hash`` and ``response_hash`` are ``sha256:<hex>`` of them
    (``response_hash`` None when no response came). ``chunks`` holds, for each chunk the
    application received, its size and its arrival time in nanoseconds after the request was
    sent. ``complete`` is False when the response was cut short. ``error_type`` names a
    transport error (with ``status_code`` None) or the error of an answered call.
    ``provider``, ``model`` and the token counts are the model call's, None for other steps.
    """

    run_id: str
    index: int
    trace_id: int
    span_id: int
    kind: str
    method: str
    url: str
    request_headers: list[tuple[str, str]]
    request_body: bytes
    request_hash: str
    status_code: int | None = None
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    response_body: bytes = b""
    response_hash: str | None = None
    chunks: list[tuple[int, int]] = field(default_factory=list)
    complete: bool = False
    error_type: str | None = None
    start_ns: int = 0
    end_ns: int = 0
    provider: str | None = None
    model: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    run: RunFacts | None = None
    """The facts of the step's run (None: only its id is known)."""
    within: int | None = None
    """The index of the tool step whose body was running when this step was made."""
    reading: Reading | None = field(default=None, compare=False, repr=False)
    """What the capture made of this step's bodies (never stored)."""

    @property
    def size(self) -> int:
        """Bytes of body this step keeps alive."""
        return len(self.request_body) + len(self.response_body)


@dataclass(frozen=True, slots=True)
class RunEnd:
    """A run's end, handed to the exporter when a ``run()`` block exits.

    ``end_ns`` is the wall-clock end (Unix nanoseconds); ``error_type`` the qualified name of
    the exception that left the block, None when it ended normally.
    """

    run_id: str
    end_ns: int
    error_type: str | None = None
