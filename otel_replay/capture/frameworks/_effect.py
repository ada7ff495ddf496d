"""Which framework tools have side effects (effect ``write``: never run in replay).

A tool writes when ``OTEL_REPLAY_WRITE_TOOLS`` (names or shell-style globs) names it, or when
its MCP server says it does (``readOnlyHint`` false); every other tool reads, as for
``@otel_replay.tool``. Either side can only add writers: a server that wrongly claims to
only read cannot make a tool the user named run live in a replay.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from otel_replay.capture.tools import Effect

__all__ = ["effect_of", "use_write_tools"]

_write_tools: tuple[str, ...] = ()


def use_write_tools(patterns: tuple[str, ...]) -> None:
    """Tools whose name matches one of ``patterns`` (names or shell-style globs) write."""
    global _write_tools  # noqa: PLW0603 - set when the hooks are attached
    _write_tools = patterns


def effect_of(name: str, read_only: bool | None = None) -> Effect:
    """The effect of tool ``name``, whose server said ``read_only`` (None: said nothing)."""
    if read_only is False or any(fnmatchcase(name, pattern) for pattern in _write_tools):
        return "write"
    return "read"
