"""``--live-from N``: a fork served from the recording up to step N, then live."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from otel_replay._forks import mend_in_child
from otel_replay.envelope import ToolEffect
from otel_replay.replay._audit import AuditGuard
from otel_replay.replay._guard import Listener, SocketGuard
from otel_replay.replay._match import Match
from otel_replay.replay._observe import NetworkObserver
from otel_replay.step import describe_effect

if TYPE_CHECKING:
    from otel_replay.replay._served import ServedStep
from otel_replay.replay._change import Change, body_change, change
from otel_replay.replay._diff import json_paths_differing, parse_json, value_at

__all__ = ["LiveFrom", "LiveGuard", "WentLive", "result_changes", "went_live", "write_refusal"]

_BY_CONTENT = frozenset({"hash", "canonical", "messages"})


@dataclass(frozen=True, slots=True)
class WentLive:
    """Where a fork went live: at request ``order`` of the replay, which stands for recorded
    step ``step`` (None: no recorded step); ``early`` when that was before the step asked
    for, because the request differed from the recording."""

    order: int
    step: int | None
    early: bool

    def describe(self, live_from: int) -> str:
        """One line: ``live from step 3 (request 3)``, or why it went live sooner."""
        at = f"request {self.order}"
        if self.step is not None:
            at = f"step {self.step} ({at})"
        if not self.early:
            return f"live from {at}"
        return f"live from {at}, before step {live_from}: its request differs from the recording"

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` form."""
        return {"request": self.order, "step": self.step, "early": self.early}


class LiveFrom:
    """The live point of one fork: step ``step`` (``ForkPlan.live_from``); past it, write
    tools go live too when ``allow_writes``."""

    def __init__(self, step: int, allow_writes: bool = False) -> None:
        self.step = step
        self.allow_writes = allow_writes
        self._live = False
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []
        mend_in_child(self)

    @property
    def live(self) -> bool:
        """Whether the fork has gone live."""
        return self._live

    def on_live(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` once, when the fork goes live (at once if it has)."""
        with self._lock:
            if not self._live:
                self._listeners.append(listener)
                return
        listener()

    def sends(self, match: Match | None, effect: ToolEffect | None) -> bool:
        """Whether the call ``match`` answers (None: no recorded step does) goes live; the
        first call past the live point takes the fork live, telling the listeners before it
        goes. ``effect``: a tool's; a write tool is sent only if the fork allows writes."""
        listeners: list[Callable[[], None]] = []
        with self._lock:
            if not self._live:
                if (
                    match is not None
                    and match.recorded.step.index < self.step
                    and match.how in _BY_CONTENT
                ):
                    return False
                self._live = True
                listeners, self._listeners = self._listeners, []
        for listener in listeners:  # the guards come off before the call reaches a socket
            listener()
        return effect is None or not effect.writes or self.allow_writes

    def refusal(
        self, match: Match, effect: ToolEffect | None, changes: Sequence[Change]
    ) -> str | None:
        """Why the write tool call ``match`` answers, held back past the live point (see
        :meth:`sends`), is refused rather than served (:func:`write_refusal`); None to serve
        it."""
        if not self._live or self.allow_writes:
            return None
        return write_refusal(match, effect, changes, "past the live point ")

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()


def write_refusal(
    match: Match, effect: ToolEffect | None, changes: Sequence[Change], where: str = ""
) -> str | None:
    """Why a fork refuses to serve the write tool call ``match`` answers: the recorded step
    answered other arguments (``changes``), or it was served already; None to serve it (or
    when ``effect`` is no write). A recorded result is the answer to its own call only,
    never to a what-if's other one. ``where`` begins the rule's clause (``past the live
    point ``)."""
    if effect is None or not effect.writes:
        return None
    recorded = match.recorded
    if match.repeat:
        why = f"its recorded call (step {recorded.step.index}) was served already"
    elif changes or match.how not in _BY_CONTENT:
        differs = "; ".join(c.describe() for c in changes) or f"matched by {match.how}"
        why = f"its recorded call (step {recorded.step.index}) had other arguments ({differs})"
    else:
        return None
    name = recorded.endpoint.removeprefix("tool:")
    said = describe_effect(effect.effect, effect.reason)
    return (
        f"otel-replay: tool {name!r} is a write ({said}) and {why}: {where}a fork serves a "
        "write tool only the call it recorded, and runs none without --allow-writes"
    )


_Guard = SocketGuard | AuditGuard | NetworkObserver


class LiveGuard:
    """Strict replay's in-process guards until the fork goes live, then an observer that
    counts the network attempts it lets through. ``on_attempt`` hears of refusals,
    ``on_process`` of processes started (while refusing), ``on_live`` of attempts let
    through."""

    def __init__(
        self,
        live_from: LiveFrom,
        on_attempt: Listener,
        on_process: Callable[[str], None],
        on_live: Callable[[str], None],
    ) -> None:
        self._live_from = live_from
        self._strict: tuple[_Guard, ...] = (
            SocketGuard(on_attempt),
            AuditGuard(on_attempt, on_process),
        )
        self._observer: tuple[_Guard, ...] = (NetworkObserver(on_live),)
        self._lock = threading.Lock()
        self._installed: tuple[_Guard, ...] = ()

    def install(self) -> None:
        """Start guarding: refusing, or counting once the fork is live."""
        with self._lock:
            self._put(self._observer if self._live_from.live else self._strict)
        self._live_from.on_live(self._go_live)

    def uninstall(self) -> None:
        """Stop guarding."""
        with self._lock:
            self._put(())

    def _go_live(self) -> None:
        with self._lock:
            if self._installed is self._strict:
                self._put(self._observer)

    def _put(self, guards: tuple[_Guard, ...]) -> None:
        for guard in reversed(self._installed):
            guard.uninstall()
        self._installed = guards
        for guard in guards:
            guard.install()


def went_live(steps: Iterable[ServedStep], live_from: int) -> WentLive | None:
    """Where the fork whose replayed ``steps`` these are went live (its first live call the
    rule would not have served: a tool it matched before and ran live all the same, under
    ``--live-tools read`` or ``--allow-writes``, is not it), or None if it never did."""
    for step in sorted(steps, key=lambda s: s.order):
        recorded = step.recorded
        served = recorded is not None and recorded < live_from and step.how in _BY_CONTENT
        if step.live and not served:
            early = (step.order if recorded is None else recorded) < live_from
            return WentLive(step.order, recorded, early)
    return None


def result_changes(
    recorded: bytes, recorded_error: str | None, live: bytes, live_error: str | None
) -> list[Change]:
    """Every difference between the recorded answer of a step and its live one; empty when
    the live call answered as recorded."""
    changes: list[Change] = []
    if recorded_error != live_error:
        changes.append(change("error", recorded_error, live_error))
    if recorded == live:
        return changes
    old, new = parse_json(recorded), parse_json(live)
    if old is not None and new is not None:
        changes.extend(
            change(f"result {path}", value_at(old, path), value_at(new, path))
            for path in json_paths_differing(old, new)
        )
        return changes
    changes.append(body_change("result", recorded, live))
    return changes
