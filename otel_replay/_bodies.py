"""Small helpers on exact HTTP bodies and headers."""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import Any

import orjson

__all__ = [
    "content_headers",
    "decode_content",
    "header",
    "is_json",
    "is_sse",
    "is_stream",
    "json_value",
    "raw_header",
    "shown_text",
]


def header(headers: Iterable[tuple[str, str]], name: str) -> str:
    """The first value of header ``name`` (case-insensitive), or ``""``."""
    for key, value in headers:
        if key.lower() == name:
            return value
    return ""


def raw_header(headers: list[tuple[bytes, bytes]], name: bytes) -> str:
    """``header`` on raw pairs: the first value of ``name`` (lower-case), decoded, or ``""``.

    Decodes only the value it returns; the other headers stay bytes.
    """
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return ""


def content_headers(headers: list[tuple[bytes, bytes]]) -> tuple[str, str]:
    """The first ``Content-Type`` and first ``Content-Encoding`` values (``""`` when absent),
    in one pass over the raw pairs."""
    content_type = encoding = ""
    for key, value in headers:
        name = key.lower()
        if name == b"content-type":
            if not content_type:
                content_type = value.decode("latin-1")
        elif name == b"content-encoding" and not encoding:
            encoding = value.decode("latin-1")
    return content_type, encoding


def is_json(content_type: str) -> bool:
    """True for ``application/json`` and ``+json`` media types."""
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def is_sse(content_type: str) -> bool:
    """True for a Server-Sent Events body."""
    return content_type.partition(";")[0].strip().lower() == "text/event-stream"


def is_stream(content_type: str) -> bool:
    """True for a body of successive JSON events: Server-Sent Events or newline-delimited
    JSON."""
    media = content_type.partition(";")[0].strip().lower()
    return media in ("text/event-stream", "application/x-ndjson", "application/jsonl")


def decode_content(body: bytes, encoding: str) -> bytes | None:
    """``body`` decoded from its ``Content-Encoding``; None when the coding is not supported.

    Recorded response bodies are kept decoded, so a recorded step never depends on which
    decompressors the replaying machine has.
    """
    codings = [c.strip().lower() for c in encoding.split(",") if c.strip()]
    for coding in reversed(codings):
        if coding == "identity":
            continue
        if coding in ("gzip", "x-gzip"):
            body = zlib.decompress(body, wbits=zlib.MAX_WBITS | 32)
        elif coding == "deflate":
            try:
                body = zlib.decompress(body)
            except zlib.error:
                body = zlib.decompress(body, wbits=-zlib.MAX_WBITS)
        elif coding == "br":
            try:
                import brotli  # type: ignore[import-not-found]  # noqa: PLC0415
            except ImportError:
                return None
            body = brotli.decompress(body)
        else:
            return None
    return body


def json_value(body: bytes | None) -> Any:
    """The JSON value of ``body`` (an object or an array), or None when it is absent or not
    JSON."""
    if not body or body[:1] not in (b"{", b"["):
        return None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


_MOSTLY_TEXT = 0.05
"""The share of a body's bytes that may be no UTF-8 (a Latin-1 name in a log line) for it to be
shown as text, each such byte as U+FFFD; past it, or with a NUL, the body is binary."""


def shown_text(body: bytes | None) -> str | None:
    """``body`` as text to show a person: its UTF-8 text, a few bytes that are not UTF-8 shown
    as U+FFFD; None when it is binary (or not known)."""
    if body is None:
        return None
    try:
        return body.decode()
    except UnicodeDecodeError:
        pass
    undecoded = len(body) - len(body.decode(errors="ignore").encode())
    if undecoded > _MOSTLY_TEXT * len(body) or b"\x00" in body:
        return None
    return body.decode(errors="replace")
