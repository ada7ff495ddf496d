"""Framework tools, checkpointers, stores and sessions as steps, with no code change.

Each hook patches its framework when imported, only while held by the instrumentor or a
replay; an unknown framework version is left alone with one warning. A hook's module is
loaded with its framework: a process that uses none (every replayed test, every pytest-xdist
worker) loads none of them."""

from __future__ import annotations

import importlib
import logging
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import wrapt

__all__ = ["attach", "detach"]

_log = logging.getLogger("otel_replay")


@dataclass(frozen=True, slots=True)
class _Hook:
    """The ``patch(module)`` of our module ``adapter`` makes the tools of ``module`` steps
    and returns the undo."""

    module: str
    adapter: str

    def patch(self, module: ModuleType) -> Callable[[], None]:
        patch: Callable[[ModuleType], Callable[[], None]] = importlib.import_module(
            f"{__name__}.{self.adapter}"
        ).patch
        return patch(module)


_HOOKS = (
    _Hook("langchain_core.tools.base", "_langchain"),
    _Hook("langgraph.checkpoint.base", "_langgraph_checkpoint"),
    _Hook("langgraph.store.base", "_langgraph_store"),
    _Hook("agents.run_internal.tool_execution", "_openai_agents"),
    _Hook("agents.memory.session", "_openai_agents_session"),
    _Hook("mcp.client.session", "_mcp"),
    _Hook("pydantic_ai.toolsets.function", "_pydantic_ai"),
    _Hook("smolagents.tools", "_smolagents"),
    _Hook("haystack.tools.tool", "_haystack"),
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
