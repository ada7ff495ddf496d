"""The in-memory stand-in (:class:`Shadow`) that answers a LangGraph checkpointer under replay,
in place of the user's store."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["MISSING", "Shadow", "shadow_of"]

MISSING: Any = object()
"""No recorded read answers this one (a non-strict replay went past its recording)."""

_shadows: weakref.WeakKeyDictionary[Any, Shadow] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def shadow_of(saver: Any) -> Shadow:
    """The replay's stand-in for ``saver`` (made at its first use)."""
    with _lock:
        shadow = _shadows.get(saver)
        if shadow is None:
            shadow = _shadows[saver] = Shadow(getattr(saver, "serde", None))
        return shadow


def _configurable(config: Any) -> dict[str, Any]:
    return dict((config or {}).get("configurable") or {})


def _id(item: Any) -> Any:
    return _configurable(item.config).get("checkpoint_id")


class Shadow:
    """One saver's checkpoints as the replay sees them (docs/architecture.md, "Recording"). Its
    methods are called with our wrappers stood aside, so the ``InMemorySaver`` they use is
    not recorded."""

    def __init__(self, serde: Any) -> None:
        from langgraph.checkpoint import memory  # noqa: PLC0415 - LangGraph's

        # ``MemorySaver`` is its name before langgraph-checkpoint 2.0.
        saver = getattr(memory, "InMemorySaver", None) or memory.MemorySaver
        self.memory: Any = saver(serde=serde) if serde is not None else saver()
        self.loaded: set[Any] = set()
        self.deleted: set[Any] = set()
        self._lock = threading.RLock()

    # -- reads: ``recorded`` is what the matched recorded read returned, or MISSING; ``forked``:
    # a fork put it there (--override, --state), and it is the answer, whatever the replay
    # itself wrote: the thread is then what the fork says, and the graph goes on from it ---

    def get_tuple(self, config: Any, recorded: Any, *, forked: bool = False) -> Any:
        with self._lock:
            if forked and recorded is not MISSING:
                self._forget(config)
                if recorded is not None:
                    self._load(recorded)
                return recorded
            own = self.memory.get_tuple(config)
            if own is not None or recorded is MISSING or recorded is None:
                return own
            if _configurable(config).get("thread_id") in self.deleted:
                return None
            self._load(recorded)
            return recorded

    def list(
        self,
        config: Any,
        filter: Any,
        before: Any,
        limit: Any,
        recorded: Any,
        *,
        forked: bool = False,
    ) -> list[Any]:
        with self._lock:
            if forked and recorded is not MISSING:
                return list(recorded)[:limit] if isinstance(limit, int) else list(recorded)
            own = list(self.memory.list(config, filter=filter, before=before))
            thread = _configurable(config).get("thread_id")
            if recorded is MISSING:
                recorded = []
            elif not own and thread not in self.deleted:
                return list(recorded)[:limit] if isinstance(limit, int) else list(recorded)
            older: list[Any] = []
            if thread not in self.deleted:
                seen = {_id(item) for item in own}
                found = False
                for item in recorded:
                    if found and _id(item) not in seen:
                        older.append(item)
                    found = found or _id(item) in self.loaded
            items = own + older
            return items[:limit] if isinstance(limit, int) else items

    def delta(self, config: Any, channels: Any, recorded: Any, *, forked: bool = False) -> Any:
        with self._lock:
            if forked and recorded is not MISSING:
                return recorded
            if self.memory.get_tuple(config) is not None or recorded is MISSING:
                return self.memory.get_delta_channel_history(config=config, channels=channels)
            return recorded

    # -- writes ----------------------------------------------------------------------------

    def write(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``method`` of the saver (``put``, ``put_writes``, ``delete_thread``...) done to the
        shadow instead; one the in-memory saver cannot do is dropped."""
        with self._lock:
            if method == "delete_thread":
                thread = args[0] if args else kwargs.get("thread_id")
                self.deleted.add(thread)
            action: Callable[..., Any] | None = getattr(self.memory, method, None)
            if action is None:
                return None
            try:
                return action(*args, **kwargs)
            except NotImplementedError:
                return None

    def _forget(self, config: Any) -> None:
        """Drop what the replay wrote to the thread ``config`` reads (its root namespace: a
        subgraph's checkpoints go with the thread; a subgraph's own read drops nothing)."""
        configurable = _configurable(config)
        thread = configurable.get("thread_id")
        if thread is not None and not configurable.get("checkpoint_ns"):
            self.memory.delete_thread(thread)

    def _load(self, item: Any) -> None:
        """Put a recorded checkpoint tuple in the shadow, every channel value with it."""
        checkpoint = item.checkpoint
        configurable = _configurable(item.config)
        parent = {
            "thread_id": configurable.get("thread_id"),
            "checkpoint_ns": configurable.get("checkpoint_ns", ""),
        }
        parent_id = _configurable(item.parent_config).get("checkpoint_id")
        if parent_id is not None:
            parent["checkpoint_id"] = parent_id
        self.memory.put(
            {"configurable": parent},
            checkpoint,
            item.metadata or {},
            dict(checkpoint.get("channel_versions") or {}),
        )
        at = {"configurable": {**parent, "checkpoint_id": checkpoint.get("id")}}
        by_task: dict[Any, list[tuple[Any, Any]]] = {}
        for task_id, channel, value in item.pending_writes or ():
            by_task.setdefault(task_id, []).append((channel, value))
        for task_id, writes in by_task.items():
            self.memory.put_writes(at, writes, task_id)
        self.loaded.add(checkpoint.get("id"))
