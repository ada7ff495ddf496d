"""``--live-from N``: a fork served from the recording up to step N, then live."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
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
from otel_replay.replay._diff import answer_messages, json_paths_differing, parse_json, value_at
from otel_replay.replay._model import RecordedStep

__all__ = [
    "LiveFrom",
    "LiveGuard",
    "MintedIds",
    "WentLive",
    "result_changes",
    "tool_call_ids",
    "went_live",
    "write_refusal",
]

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


_CALL_PARTS = frozenset({"tool_call", "server_tool_call"})


def tool_call_ids(messages: Iterable[Any]) -> list[tuple[Any, str]]:
    """The tool calls of a model's answer (its GenAI output messages, as the codecs read
    them), in order: (the tool's name, the call's id)."""
    return [
        (part.get("name"), part["id"])
        for message in messages
        if isinstance(message, Mapping)
        for part in message.get("parts") or ()
        if isinstance(part, Mapping)
        and part.get("type") in _CALL_PARTS
        and isinstance(part.get("id"), str)
    ]


def _quoted(value: str) -> tuple[bytes, ...]:
    """``value`` as a JSON string, in the forms a client writes it."""
    return tuple({json.dumps(value).encode(), json.dumps(value, ensure_ascii=False).encode()})


class MintedIds:
    """The tool-call ids a fork's live answers minted in place of the recorded answers' ones.

    A provider names each tool call anew (``call_…``, ``toolu_…``): past the live point, the
    program echoes the live ids in every later request, where the recording has the
    recorded ones. Each live model answer is paired with the recorded answer of the step it
    stands for (:meth:`learn`: the n-th tool call of one with the n-th of the other, when
    they call the same tool), and a later request is compared with the live ids put back
    (:meth:`restore`). Only that renaming is set aside: an id used where the recording had
    another, a recorded id sent where the live answer minted a new one (:meth:`stale`), or
    any other difference still counts."""

    def __init__(self) -> None:
        self._back: dict[str, str] = {}  # live id -> recorded id
        self._ahead: dict[str, str] = {}  # recorded id -> live id
        self._lock = threading.Lock()
        mend_in_child(self)

    def learn(self, recorded: RecordedStep, live: Iterable[Any]) -> None:
        """Pair the tool calls of ``live`` (the output messages of the live answer to the
        call ``recorded`` stands for) with those of ``recorded``'s answer."""
        old = answer_messages(recorded)
        if not old:
            return
        with self._lock:
            for (old_name, old_id), (new_name, new_id) in zip(
                tool_call_ids(old), tool_call_ids(live), strict=False
            ):
                if old_name != new_name or old_id == new_id:
                    continue
                if old_id in self._ahead or new_id in self._back:
                    continue  # paired already: the first pairing stands
                self._ahead[old_id], self._back[new_id] = new_id, old_id

    def restore(self, body: bytes) -> bytes:
        """``body`` with each live id that stands in a JSON string of its own put back to
        the recorded id it replaced (``body`` itself when it holds none)."""
        if not self._back:
            return body
        with self._lock:
            pairs = list(self._back.items())
        for new_id, old_id in pairs:
            for quoted in _quoted(new_id):
                if quoted in body:
                    body = body.replace(quoted, json.dumps(old_id, ensure_ascii=False).encode())
        return body

    def restore_id(self, call_id: str | None) -> str | None:
        """The recorded id a live tool-call id replaced (``call_id`` itself otherwise)."""
        if call_id is None:
            return None
        return self._back.get(call_id, call_id)

    def stale(self, body: bytes) -> list[Change]:
        """A ``tool call id`` change for each recorded id ``body`` (as the program sent it)
        still uses where the live answer minted another: the live world never named it."""
        if not self._ahead:
            return []
        with self._lock:
            pairs = sorted(self._ahead.items())
        return [
            change("tool call id minted live", new_id, old_id)
            for old_id, new_id in pairs
            if any(quoted in body for quoted in _quoted(old_id))
        ]

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
