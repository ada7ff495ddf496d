"""Text from anywhere made safe to print: no value can break a line or drive the terminal."""

from __future__ import annotations

import re

__all__ = ["clipped", "printable"]

# C0 and C1 controls, DEL, undecodable bytes (kept as lone surrogates) and the invisible
# marks that reorder or hide text.
_UNPRINTABLE = re.compile(
    "[\x00-\x1f\x7f-\x9f\ud800-\udfff\u200b-\u200f\u202a-\u202e\u2066-\u2069]"
)


def printable(text: str) -> str:
    """``text`` with control characters, undecodable bytes and bidirectional marks written
    as escapes (``\\x00``, ``\\n`` as ``\\x0a``, ``\\u202e``), so a hostile value (a run
    id, a message) can neither break a line nor drive the terminal."""
    return _UNPRINTABLE.sub(_escape, text)


def clipped(text: str, limit: int = 100) -> str:
    """``text`` cut to ``limit`` characters (the last one ``…``) for a message: a name given
    by anyone (a run id of 100,000 characters) keeps its line short."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that did not decode (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
