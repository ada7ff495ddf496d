"""Pure text helpers for the CLI: sizes, times, durations and one-line previews."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

from otel_replay._printable import printable

__all__ = [
    "ago",
    "human_bytes",
    "iso_time",
    "json_text",
    "local_time",
    "ms",
    "one_line",
    "plural",
    "printable",
    "when",
]

_SPACE = re.compile(r"\s+")
# What json.dumps(ensure_ascii=False) leaves raw that a terminal acts on: C1 controls (0x9b
# is CSI), DEL, line and paragraph separators, the invisible marks that reorder text, and
# lone surrogates (a run id from undecodable bytes), which no terminal encoding can write.
_RAW_IN_JSON = re.compile(
    "[\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def json_text(document: Any) -> str:
    """``document`` as indented JSON for ``--json``: non-ASCII text as it is, but every
    character that could drive a terminal as a ``\\uXXXX`` escape (the same JSON value)."""
    text = json.dumps(document, indent=2, ensure_ascii=False)
    return _RAW_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def one_line(text: str, width: int) -> str:
    """``text`` with every run of whitespace made one space, cut to ``width`` characters
    (the last one an ellipsis when cut)."""
    flat = _SPACE.sub(" ", text).strip()
    return flat if len(flat) <= width else flat[: max(width - 1, 0)].rstrip() + "…"


def plural(count: int, noun: str) -> str:
    """``1 run``, ``3 runs``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def human_bytes(size: int) -> str:
    """``size`` bytes as ``812 B``, ``28.4 KB``, ``3.1 MB`` (powers of 1024)."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1024 or unit == "TB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def ms(duration_ns: int | float | None) -> str:
    """A duration in nanoseconds as milliseconds (``12.3``), ``-`` when unknown."""
    if duration_ns is None:
        return "-"
    value = duration_ns / 1e6
    return f"{value:.1f}" if value < 10_000 else f"{value:,.0f}"


def local_time(ns: int) -> str:
    """Unix nanoseconds as local wall-clock time, ``2026-11-21 18:19:30``."""
    return dt.datetime.fromtimestamp(ns / 1e9).strftime("%Y-%m-%d %H:%M:%S")


def iso_time(ns: int) -> str:
    """Unix nanoseconds as ISO 8601 with the local UTC offset, for machines."""
    return dt.datetime.fromtimestamp(ns / 1e9).astimezone().isoformat(timespec="milliseconds")


def ago(ns: int, now_ns: int) -> str:
    """How long before ``now_ns`` the instant ``ns`` was: ``just now``, ``5 min ago``,
    ``3 h ago``, ``2 days ago`` (``in the future`` for clock skew)."""
    seconds = (now_ns - ns) / 1e9
    if seconds < -60:
        return "in the future"
    if seconds < 60:
        return "just now"
    for size, unit in ((86_400, "day"), (3_600, "h"), (60, "min")):
        if seconds >= size:
            count = int(seconds // size)
            plural = "s" if unit == "day" and count != 1 else ""
            return f"{count} {unit}{plural} ago"
    raise AssertionError("unreachable")


def when(ns: int, now_ns: int) -> str:
    """Local time plus how long ago: ``2026-11-21 18:19:30 (5 min ago)``."""
    return f"{local_time(ns)} ({ago(ns, now_ns)})"
