"""Span attributes a stored body determines: kept as a reference, rebuilt exactly on read.

A recorded model call's span carries its bodies again (``replay.request.body``,
``replay.response.body``) and the codec's reading of them (``gen_ai.input.messages``,
``gen_ai.system_instructions``, ``gen_ai.tool.definitions``, ``gen_ai.output.messages``) with
their hashes (``replay.prompt.hash``, ``replay.tool.schema.version``).
Stored as given they cost more than the bodies' own chunks: they are other bytes. When a
span is put with its step, each of these attributes is rebuilt from the step's bodies at
once; one that comes out byte for byte the same is left out of the record, which names it
and how it was rebuilt (:class:`Derivation`). Any other value (a foreign span's, one edited
after capture, a body that is not the step's) is kept as given.

A crc32 of the rebuilt values is kept too: should a later codec read a body differently,
the span is reported damaged rather than shown changed.
"""

from __future__ import annotations

import contextlib
import functools
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from otel_replay import attributes as A
from otel_replay._bodies import is_sse
from otel_replay._inline import BASE64_PREFIX, encode_body
from otel_replay.codecs import request_content, response_content
from otel_replay.step import Reading, Step

__all__ = ["Derivation", "Sources", "derivable", "rebuild"]

REQUEST_CONTENT = (
    "gen_ai.input.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
    A.REPLAY_PROMPT_HASH,
    A.REPLAY_TOOL_SCHEMA_VERSION,
)
RESPONSE_CONTENT = ("gen_ai.output.messages",)
_RESPONSE_READ = frozenset({*RESPONSE_CONTENT, A.REPLAY_RESPONSE_BODY})
_CONTENT = (*REQUEST_CONTENT, *RESPONSE_CONTENT)
"""The content attributes a codec reads, in the order they are looked for."""
_CONTENT_KEYS = frozenset(_CONTENT)

if TYPE_CHECKING:
    from otel_replay.codecs import Codec


@functools.cache
def _codecs() -> dict[str, Codec]:
    """The provider codecs by name, imported when a span is first derived or rebuilt (a
    store opened to list runs never needs them)."""
    from otel_replay.codecs import CODECS  # noqa: PLC0415 - only where spans are derived

    return {codec.name: codec for codec in CODECS}


@dataclass(frozen=True, slots=True)
class Derivation:
    """How a span's left-out attributes are rebuilt: their keys, the codec that read the
    bodies (None: only the inline bodies were left out), the response's status and whether
    it was streamed, and the crc32 of the rebuilt values (UTF-8, in key order)."""

    keys: list[str]
    codec: str | None
    status: int
    sse: bool
    crc: int

    def value(self) -> dict[str, Any]:
        """The record's JSON of it."""
        return {
            "keys": self.keys,
            "codec": self.codec,
            "status": self.status,
            "sse": self.sse,
            "crc": self.crc,
        }

    @classmethod
    def from_value(cls, value: Any) -> Derivation:
        """The derivation a record states; ValueError when malformed."""
        if not isinstance(value, dict):
            raise ValueError("a span's derivation is not an object")
        keys, codec, status = value.get("keys"), value.get("codec"), value.get("status")
        sse, crc = value.get("sse"), value.get("crc")
        if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
            raise ValueError("a span's derived keys are malformed")
        if not (codec is None or isinstance(codec, str)):
            raise ValueError(f"a span names an unknown codec {codec!r}")
        if not (type(status) is int and isinstance(sse, bool) and type(crc) is int):
            raise ValueError("a span's derivation is malformed")
        return cls(keys, codec, status, sse, crc)


@dataclass(frozen=True, slots=True)
class Sources:
    """What the steps put with some spans offer to rebuild them from: each body by
    ``sha256:<hex>``, each response's status and whether it was streamed, by its hash, and
    what the capture read from the bodies (:class:`~otel_replay.step.Reading`), by request
    hash."""

    bodies: dict[str, bytes]
    responses: dict[str, tuple[int, bool]]
    readings: dict[str, Reading]

    @classmethod
    def of(cls, steps: list[Step], bodies: dict[str, bytes]) -> Sources:
        """The sources of ``steps`` (``bodies``: theirs, checked)."""
        responses: dict[str, tuple[int, bool]] = {}
        readings: dict[str, Reading] = {}
        for step in steps:
            if step.response_hash is not None and step.status_code is not None:
                content_type = next(
                    (v for k, v in step.response_headers if k.lower() == "content-type"), ""
                )
                responses[step.response_hash] = (step.status_code, is_sse(content_type))
            reading = step.reading
            if reading is not None and reading.request_hash == step.request_hash:
                readings[reading.request_hash] = reading
        return cls(bodies, responses, readings)


def _content(
    codec: Codec, request: bytes | None, response: bytes | None, status: int, sse: bool
) -> dict[str, str]:
    """What ``codec`` reads from the bodies, as the capture writes it on the span."""
    out: dict[str, str] = {}
    # A codec meeting a body it does not read derives nothing from it.
    if request is not None:
        with contextlib.suppress(Exception):
            out.update(request_content(codec.parse_request("", orjson.loads(request))))
    if response is not None:
        with contextlib.suppress(Exception):
            out.update(response_content(codec.parse_response(status, response, sse)))
    return out


def _reading(attrs: Mapping[str, Any], sources: Sources) -> Reading | None:
    """What the capture read from the span's own bodies, or None. A reading whose response
    is another body, or read with another status or framing than the step's, would rebuild
    its response values otherwise: then only its request values count."""
    tag = attrs.get(A.REPLAY_REQUEST_HASH)
    reading = sources.readings.get(tag) if isinstance(tag, str) else None
    if reading is None or reading.response_hash is None:
        return reading
    response = attrs.get(A.REPLAY_RESPONSE_HASH)
    if response == reading.response_hash and sources.responses.get(response) == (
        reading.status,
        reading.sse,
    ):
        return reading
    values = {k: v for k, v in reading.values.items() if k not in _RESPONSE_READ}
    return Reading(reading.request_body, reading.request_hash, reading.codec, values)


def _crc(values: Sequence[str | bytes]) -> int:
    """The crc32 of ``values`` (a string as its UTF-8 bytes), one after the other."""
    crc = 0
    for value in values:
        data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
        crc = zlib.crc32(data, crc)
    return crc


def _body(attrs: Mapping[str, Any], key: str, bodies: Mapping[str, bytes]) -> bytes | None:
    tag = attrs.get(key)
    return bodies.get(tag) if isinstance(tag, str) else None


def derivable(attrs: Mapping[str, Any], sources: Sources) -> Derivation | None:
    """Which attributes of a span ``sources`` rebuild byte for byte, or None (none do)."""
    request = _body(attrs, A.REPLAY_REQUEST_HASH, sources.bodies)
    response = _body(attrs, A.REPLAY_RESPONSE_HASH, sources.bodies)
    if request is None and response is None:
        return None
    reading = _reading(attrs, sources)
    read = reading.values if reading is not None else {}
    rebuilt: dict[str, str] = {}
    # The UTF-8 of an inline body that is not base64 is the body it was made from: its crc32
    # is taken over those bytes, not over the text encoded again.
    raw: dict[str, bytes] = {}
    for key, body, read_from in (
        (A.REPLAY_REQUEST_BODY, request, None if reading is None else reading.request_body),
        (A.REPLAY_RESPONSE_BODY, response, None if reading is None else reading.response_body),
    ):
        if body is not None and isinstance(value := attrs.get(key), str):
            made_from = read_from
            if read.get(key) is not value:
                value, made_from = encode_body(body), body
            rebuilt[key] = value
            if made_from is not None and not value.startswith(BASE64_PREFIX):
                raw[key] = made_from
    status, sse = sources.responses.get(str(attrs.get(A.REPLAY_RESPONSE_HASH)), (0, False))
    name: str | None = None
    chosen: dict[str, str] = {}
    wanted = [k for k in _CONTENT if isinstance(attrs.get(k), str)]
    if reading is not None and all(attrs[key] is read.get(key) for key in wanted):
        name, chosen = reading.codec, {key: attrs[key] for key in wanted}
        rebuilt.update(chosen)
    elif wanted:
        # The codec that rebuilds the most of them: bodies of one API may read partly alike
        # through another's codec (a plain user message), the rest not.
        best = 0
        for codec in _codecs().values():
            content = _content(codec, request, response, status, sse)
            matched = sum(content.get(key) == attrs[key] for key in wanted)
            if matched > best:
                best, name, chosen = matched, codec.name, content
            if matched == len(wanted):
                break
        if name is not None:
            rebuilt.update(chosen)
    keys = [key for key, value in attrs.items() if key in rebuilt and rebuilt[key] == value]
    if not keys:
        return None
    if _CONTENT_KEYS.isdisjoint(keys):
        name = None
    crc = _crc([raw.get(key) or rebuilt[key] for key in keys])
    return Derivation(keys, name, status, sse, crc)


def rebuild(
    attrs: Mapping[str, Any], derivation: Derivation, body: Callable[[str], bytes]
) -> dict[str, str]:
    """The attributes ``derivation`` left out of a span (``attrs``: the rest), rebuilt from
    its bodies (``body(tag)``: the stored bytes under ``sha256:<hex>``); ValueError when
    they do not come out as they were."""
    tags = {key: attrs.get(key) for key in (A.REPLAY_REQUEST_HASH, A.REPLAY_RESPONSE_HASH)}
    needs_request = any(
        key == A.REPLAY_REQUEST_BODY or key in REQUEST_CONTENT for key in derivation.keys
    )
    needs_response = any(
        key == A.REPLAY_RESPONSE_BODY or key in RESPONSE_CONTENT for key in derivation.keys
    )
    request = response = None
    if needs_request:
        tag = tags[A.REPLAY_REQUEST_HASH]
        if not isinstance(tag, str):
            raise ValueError("its request hash is gone")
        request = body(tag)
    if needs_response:
        tag = tags[A.REPLAY_RESPONSE_HASH]
        if not isinstance(tag, str):
            raise ValueError("its response hash is gone")
        response = body(tag)
    rebuilt: dict[str, str] = {}
    if request is not None:
        rebuilt[A.REPLAY_REQUEST_BODY] = encode_body(request)
    if response is not None:
        rebuilt[A.REPLAY_RESPONSE_BODY] = encode_body(response)
    if derivation.codec is not None:
        codec = _codecs().get(derivation.codec)
        if codec is None:
            raise ValueError(f"it names a codec this otel-replay lacks: {derivation.codec!r}")
        rebuilt.update(_content(codec, request, response, derivation.status, derivation.sse))
    missing = [key for key in derivation.keys if key not in rebuilt]
    if missing:
        raise ValueError(f"{', '.join(missing)} cannot be rebuilt from the bodies")
    out = {key: rebuilt[key] for key in derivation.keys}
    if _crc(list(out.values())) != derivation.crc:
        raise ValueError("its rebuilt content attributes differ from those recorded")
    return out
