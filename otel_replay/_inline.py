"""Inline bodies: the exact bytes of a body as a span attribute string, and back.

UTF-8 travels as text; anything else, and text starting with ``base64:``, as ``base64:`` plus
padded standard base64 (``semconv/registry/replay.yaml``)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence

__all__ = ["BASE64_PREFIX", "decode_body", "encode_body", "fit_chunks"]

BASE64_PREFIX = "base64:"
_PREFIX_BYTES = BASE64_PREFIX.encode()


def encode_body(body: bytes) -> str:
    """The attribute value carrying ``body`` exactly."""
    if not body.startswith(_PREFIX_BYTES):
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError:
            pass
    return BASE64_PREFIX + base64.b64encode(body).decode("ascii")


def decode_body(value: str) -> bytes:
    """The bytes an attribute value made by :func:`encode_body` carries.

    Raises ValueError when a ``base64:`` value is not valid base64.
    """
    if value.startswith(BASE64_PREFIX):
        try:
            return base64.b64decode(value[len(BASE64_PREFIX) :], validate=True)
        except binascii.Error as exc:
            raise ValueError(f"inline body is not valid base64: {exc}") from None
    return value.encode("utf-8")


def fit_chunks(sizes: Sequence[int], total: int) -> list[int]:
    """Chunk sizes that add up to ``total``, keeping the recorded boundaries where they fit.

    The sizes a transport delivered can disagree with the recorded body: the body was decoded
    from its content-encoding, or redaction changed its length. Boundaries past the end are
    dropped and the last chunk takes whatever is left, so serving the body in these chunks
    always yields exactly the recorded bytes.
    """
    out: list[int] = []
    offset = 0
    for size in sizes:
        if size <= 0:
            continue
        if offset + size >= total:
            out.append(total - offset)
            return out
        out.append(size)
        offset += size
    if out:
        out[-1] += total - offset
    else:
        out.append(total)
    return out
