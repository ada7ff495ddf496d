"""Where two texts differ, as one window per side around the change. Pure functions."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Excerpt", "Spot", "excerpts", "one_line", "spot"]

_SNAP = 20
"""How far (characters) the differing span may grow to take in whole words."""


@dataclass(frozen=True, slots=True)
class Spot:
    """Where two texts differ.

    ``first`` is the first character that differs (0-based; the same in both texts).
    ``start`` is where the shown span begins (``first`` moved back to the start of its word),
    ``recorded_end`` and ``replayed_end`` where it ends in each text (after them, the texts
    agree to their ends).
    """

    first: int
    start: int
    recorded_end: int
    replayed_end: int


@dataclass(frozen=True, slots=True)
class Excerpt:
    """One side's window around a change, each part escaped to one line: ``before`` (the
    shared context, opening with an ellipsis when cut), ``changed`` (this side's differing
    span, possibly empty, cut in its middle when long) and ``after`` (the shared context
    after it). ``changed`` opens with ``same``, the few characters of its word the two sides
    share, so the first differing character is at ``len(before + same)``."""

    before: str
    changed: str
    after: str
    same: str = ""

    def __str__(self) -> str:
        return self.before + self.changed + self.after


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def spot(recorded: str, replayed: str) -> Spot | None:
    """Where ``recorded`` and ``replayed`` differ; None when they are equal.

    The span is the smallest one outside the longest common prefix and suffix, widened to
    whole words (by at most a few characters), so ``order details`` against ``delivery
    dates`` shows both phrases rather than ``order detail`` and ``delivery date``.
    """
    if recorded == replayed:
        return None
    first = _common_prefix(recorded, replayed)
    # The common suffix may not reach into the common prefix of the shorter text.
    limit = min(len(recorded), len(replayed)) - first
    suffix = 0
    while suffix < limit and recorded[-1 - suffix] == replayed[-1 - suffix]:
        suffix += 1
    start = first
    while start > 0 and first - start < _SNAP and _in_word(recorded, start):
        start -= 1
    grow = 0
    tail = len(recorded) - suffix
    while grow < suffix and grow < _SNAP and _in_word(recorded, tail + grow):
        grow += 1
    return Spot(first, start, len(recorded) - suffix + grow, len(replayed) - suffix + grow)


def _in_word(text: str, index: int) -> bool:
    """Whether ``index`` falls inside a word: the characters on both sides of it are neither
    whitespace nor the text's ends."""
    return 0 < index < len(text) and not text[index - 1].isspace() and not text[index].isspace()


def one_line(text: str) -> str:
    """``text`` on one line: newlines, carriage returns and tabs written as ``\\n``, ``\\r``
    and ``\\t`` (whitespace changes stay visible)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def _cut_middle(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    head = width * 2 // 3
    tail = width - head - 1
    return f"{text[:head]}…{text[len(text) - tail :]}" if tail > 0 else text[:head] + "…"


def excerpts(
    recorded: str, replayed: str, *, context: int = 40, width: int = 80
) -> tuple[Excerpt, Excerpt] | None:
    """The windows to print for a changed text: ``context`` characters on each side of the
    differing span, the span cut in its middle past ``width`` characters; None when equal."""
    where = spot(recorded, replayed)
    if where is None:
        return None
    start = where.start
    lead = max(0, start - context)
    if _in_word(recorded, lead):  # the context opens with a whole word when one starts near
        space = recorded.find(" ", lead, lead + _SNAP)
        lead = space + 1 if 0 <= space < start else lead
    before = ("…" if lead else "") + one_line(recorded[lead:start])

    def side(text: str, end: int) -> Excerpt:
        stop = end + context
        if _in_word(text, stop):  # and closes with a whole one
            space = text.rfind(" ", max(end, stop - _SNAP), stop)
            stop = space if space > end else stop
        after = text[end:stop]
        more = "…" if stop < len(text) else ""
        changed = one_line(_cut_middle(text[start:end], width))
        return Excerpt(before, changed, one_line(after) + more, same)

    same = one_line(recorded[start : where.first])

    return side(recorded, where.recorded_end), side(replayed, where.replayed_end)
