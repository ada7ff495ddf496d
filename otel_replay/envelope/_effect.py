"""Which tools may run live in a replay: a tool's effect (``read`` or ``write``) and why.

A tool reads only when someone says so: its author (``@otel_replay.tool(effect="read")``,
reason ``declared``), its MCP server (``readOnlyHint: true``, reason ``hint``) or the user
(``OTEL_REPLAY_READ_TOOLS``, reason ``setting``). Every other tool writes (reason ``default``)
and never runs live in a replay. A word that it writes outweighs every word that it reads:
``OTEL_REPLAY_WRITE_TOOLS`` (``setting``) first, then ``effect="write"`` (``declared``), then
``readOnlyHint: false`` (``hint``); so a tool in both lists writes.

In a replay, a recording that says a tool writes, for a reason other than ``default``,
outweighs today's read (reason ``recorded``): a replay on a machine without the settings the
run was recorded with runs none of its writes. A write recorded by default does not: what
nobody declared then may be declared a read now, without recording again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import translate
from typing import Literal

__all__ = [
    "Effect",
    "Reason",
    "ToolEffect",
    "effect_of",
    "in_replay",
    "use_tool_lists",
]

Effect = Literal["read", "write"]
Reason = Literal["declared", "hint", "setting", "default", "recorded"]


@dataclass(frozen=True, slots=True)
class ToolEffect:
    """A tool's effect and the reason it has it (``replay.tool.effect``,
    ``replay.tool.effect_reason``)."""

    effect: Effect
    reason: Reason

    @property
    def writes(self) -> bool:
        """Whether the tool has side effects (it never runs live in a replay)."""
        return self.effect == "write"


# The few effects there are, made once: a tool's effect is decided at each of its calls.
_WRITE_SETTING = ToolEffect("write", "setting")
_WRITE_DECLARED = ToolEffect("write", "declared")
_WRITE_HINT = ToolEffect("write", "hint")
_WRITE_DEFAULT = ToolEffect("write", "default")
_WRITE_RECORDED = ToolEffect("write", "recorded")
_READ_DECLARED = ToolEffect("read", "declared")
_READ_HINT = ToolEffect("read", "hint")
_READ_SETTING = ToolEffect("read", "setting")

_NOTHING = re.compile(r"(?!)")
_write_tools = _NOTHING
_read_tools = _NOTHING


def _matcher(patterns: tuple[str, ...]) -> re.Pattern[str]:
    if not patterns:
        return _NOTHING
    return re.compile("|".join(translate(pattern) for pattern in patterns))


def use_tool_lists(write: tuple[str, ...], read: tuple[str, ...]) -> None:
    """Tools whose name matches one of ``write`` (``OTEL_REPLAY_WRITE_TOOLS``) write; those
    matching one of ``read`` (``OTEL_REPLAY_READ_TOOLS``) read, unless another word says they
    write. Names or shell-style globs, matched case-sensitively."""
    global _write_tools, _read_tools
    _write_tools, _read_tools = _matcher(write), _matcher(read)


def effect_of(
    *names: str, declared: Effect | None = None, read_only: bool | None = None
) -> ToolEffect:
    """The effect of the tool called ``names`` (a tool may go by more than one), which its
    author ``declared`` and its server's ``readOnlyHint`` says ``read_only`` (None: not
    said)."""
    if any(_write_tools.match(name) for name in names):
        return _WRITE_SETTING
    if declared == "write":
        return _WRITE_DECLARED
    if read_only is False:
        return _WRITE_HINT
    if declared == "read":
        return _READ_DECLARED
    if read_only is True:
        return _READ_HINT
    if any(_read_tools.match(name) for name in names):
        return _READ_SETTING
    return _WRITE_DEFAULT


def in_replay(today: ToolEffect, recorded: object, recorded_reason: object) -> ToolEffect:
    """The effect a tool has in a replay: ``today``'s, unless the recording says it writes
    (``recorded``, ``recorded_reason``: the step's attributes, None when absent) for a reason
    other than ``default``."""
    if today.writes or recorded != "write" or recorded_reason == "default":
        return today
    return _WRITE_RECORDED
