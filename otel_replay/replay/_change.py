"""One difference between a recorded request and today's (:class:`Change`), and the helpers
that render a value for it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from otel_replay._canonical import sha256_tag
from otel_replay.replay._textdiff import excerpts, spot

__all__ = [
    "SHORT",
    "Change",
    "ChangeKind",
    "body_change",
    "category",
    "change",
    "preview",
    "whole",
]

ChangeKind = Literal["changed", "added", "removed"]


@dataclass(frozen=True, slots=True)
class Change:
    """One difference. ``field`` names it (``model``, ``parameter temperature``,
    ``system instructions``, ``message 3``, ``tool lookup_order $.description``,
    ``body $.limit``...); ``recorded`` and ``replayed`` are the whole values as text (a
    message as ``role: text``, other JSON values as compact JSON; None when absent), never
    cut: the report shows where they differ (:mod:`otel_replay.replay._textdiff`)."""

    field: str
    kind: ChangeKind
    recorded: str | None
    replayed: str | None

    def __post_init__(self) -> None:
        if self.kind == "changed" and self.recorded == self.replayed:
            raise ValueError(f"{self.field!r}: a change needs two different values")

    @property
    def differs_at(self) -> int | None:
        """The offset (0-based) of the first character where a changed value differs; None
        otherwise."""
        if self.recorded is None or self.replayed is None:
            return None
        where = spot(self.recorded, self.replayed)
        return None if where is None else where.first

    @property
    def short(self) -> bool:
        """Whether both values fit on a report line as they are (no window needed)."""
        return all(
            value is None or (len(value) <= SHORT and "\n" not in value)
            for value in (self.recorded, self.replayed)
        )

    def describe(self) -> str:
        """One line for the report: short values whole, long ones as the window around the
        change on each side (``…context CHANGED context…``), added or removed ones cut."""
        if self.kind == "added":
            return f"{self.field}: added {preview(self.replayed, 100)}"
        if self.kind == "removed":
            return f"{self.field}: removed (was {preview(self.recorded, 100)})"
        recorded, replayed = self.recorded or "", self.replayed or ""
        windows = None if self.short else excerpts(recorded, replayed, context=24, width=60)
        if windows is None:
            return f"{self.field}: {recorded} → {replayed}"
        return f"{self.field}: {self.where()}: {windows[0]} → {windows[1]}"

    def where(self) -> str:
        """``differs from character N (A → B characters)``, N counted from 1, for a person."""
        at = self.differs_at
        first = "" if at is None else f" from character {at + 1}"
        lengths = f"{len(self.recorded or '')} → {len(self.replayed or '')} characters"
        return f"differs{first} ({lengths})"

    def to_json(self) -> dict[str, Any]:
        """The JSON-ready form the replay report carries (whole values, and where they
        first differ)."""
        return {
            "field": self.field,
            "kind": self.kind,
            "recorded": self.recorded,
            "replayed": self.replayed,
            "differs_at": self.differs_at,
        }


SHORT = 60
"""Values up to this many characters (on one line) are printed whole, ``a → b``."""


def preview(value: Any, limit: int = 80) -> str:
    """A one-line rendering of ``value`` cut to ``limit`` characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def whole(value: Any) -> str:
    """A value as the report carries it: a string as it is, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def change(field: str, before: Any, after: Any) -> Change:
    """The change of ``field`` from ``before`` to ``after`` (None: absent on that side), two
    values that differ. Values that read the same as text (``"1"`` and ``1``) are shown as
    JSON, where their types tell them apart."""
    if before is None:
        return Change(field, "added", None, whole(after))
    if after is None:
        return Change(field, "removed", whole(before), None)
    old, new = whole(before), whole(after)
    if old == new:
        old, new = json.dumps(before, ensure_ascii=False), json.dumps(after, ensure_ascii=False)
    return Change(field, "changed", old, new)


def body_change(field: str, old: bytes, new: bytes) -> Change:
    """Two different bodies whole: as text when both are UTF-8, else as their sizes (and
    digests, when the sizes agree)."""
    try:
        return Change(field, "changed", old.decode(), new.decode())
    except UnicodeDecodeError:
        pass
    before, after = f"{len(old)} bytes", f"{len(new)} bytes"
    if before == after:
        before, after = f"{before} {sha256_tag(old)[:19]}", f"{after} {sha256_tag(new)[:19]}"
    return Change(field, "changed", before, after)


def category(field: str) -> str:
    """The kind of a change's field, for one-word summaries: ``message 3`` → ``messages``,
    ``tool lookup`` → ``tools``, ``body $.x`` → ``body``, ``argument $.x`` → ``arguments``,
    ``result $.x`` → ``result``; others as they are."""
    head = field.split(" (", 1)[0]
    if head.startswith("message "):
        return "messages"
    if head.startswith("tool ") and head != "tool schema version":
        return "tools"
    if head.startswith("body "):
        return "body"
    if head.startswith("argument "):
        return "arguments"
    if head.startswith("result "):
        return "result"
    return head
