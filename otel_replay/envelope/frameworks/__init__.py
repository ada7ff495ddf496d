"""Framework tools as tool steps, with no code change: LangChain/LangGraph tools, OpenAI Agents
SDK function tools, Pydantic AI function tools, smolagents and Haystack tools and MCP client
``call_tool``; and what LangGraph checkpointers and stores and Agents SDK sessions read, as
checkpoint steps.

Each hook patches one framework module when it is imported (now, if it already is), and only
while someone holds the hooks: the instrumentor (recording) or a replay installer (serving).
A framework that is not installed costs nothing; a framework version whose shape a hook does
not recognise is left alone, with one warning, and its tools run as they would without us.

Each hook's module says where it cuts in and how results are recorded and given back;
``envelope._effect`` says which tools only read (and may run live in a replay).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import wrapt

from otel_replay.envelope.frameworks import (
    _haystack,
    _langchain,
    _langgraph_checkpoint,
    _langgraph_store,
    _mcp,
    _openai_agents,
    _openai_agents_session,
    _pydantic_ai,
    _smolagents,
)

__all__ = ["attach", "detach"]

_log = logging.getLogger("otel_replay")


@dataclass(frozen=True, slots=True)
class _Hook:
    """``patch(module)`` makes the tools of ``module`` steps and returns the undo."""

    module: str
    patch: Callable[[ModuleType], Callable[[], None]]


_HOOKS = (
    _Hook("langchain_core.tools.base", _langchain.patch),
    _Hook("langgraph.checkpoint.base", _langgraph_checkpoint.patch),
    _Hook("langgraph.store.base", _langgraph_store.patch),
    _Hook("agents.run_internal.tool_execution", _openai_agents.patch),
    _Hook("agents.memory.session", _openai_agents_session.patch),
    _Hook("mcp.client.session", _mcp.patch),
    _Hook("pydantic_ai.toolsets.function", _pydantic_ai.patch),
    _Hook("smolagents.tools", _smolagents.patch),
    _Hook("haystack.tools.tool", _haystack.patch),
)

# Reentrant: a patch may import modules whose own hooks then fire on this thread.
_lock = threading.RLock()
_holders = 0
_undo: dict[str, Callable[[], None]] = {}
_awaiting: set[str] = set()
_warned: set[str] = set()  # one warning per framework per process


def attach() -> None:
    """Hold the hooks (nesting): patch the frameworks imported already, and the others when
    they are."""
    global _holders  # noqa: PLW0603 - one set of patches per process
    with _lock:
        _holders += 1
        for hook in _HOOKS:
            module = sys.modules.get(hook.module)
            if module is not None:
                _apply(hook, module)
            elif hook.module not in _awaiting:
                _awaiting.add(hook.module)
                wrapt.register_post_import_hook(_on_import(hook), hook.module)


def detach() -> None:
    """Let go of the hooks; the last holder to let go takes every patch off."""
    global _holders  # noqa: PLW0603 - one set of patches per process
    with _lock:
        _holders = max(0, _holders - 1)
        if _holders:
            return
        for undo in _undo.values():
            undo()
        _undo.clear()


def _on_import(hook: _Hook) -> Callable[[ModuleType], None]:
    def imported(module: ModuleType) -> None:
        with _lock:
            if _holders:
                _apply(hook, module)

    return imported


def _apply(hook: _Hook, module: ModuleType) -> None:
    if hook.module in _undo:
        return
    try:
        _undo[hook.module] = hook.patch(module)
    except Exception as exc:  # a framework version we do not know: its tools run unrecorded
        if hook.module in _warned:
            return
        _warned.add(hook.module)
        _log.warning(
            "otel-replay: the tools of %s are not recorded (its version is not supported: %s)",
            hook.module,
            exc,
        )
