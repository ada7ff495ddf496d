"""One request of a replay as it was served, and its report-file form."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from otel_replay.replay._change import Change

__all__ = ["ServedStep", "changes_from_json", "live_event"]


@dataclass(slots=True)  # not frozen: a frozen one is slower to make, once per request
class ServedStep:
    """One request of the replay, in the order today's code sent it (not to be changed).

    ``recorded`` is the index of the recorded step that answered it (None: no match, the
    request was refused in strict mode or went live otherwise); ``how`` is the match level
    (``hash``, ``canonical``, ``position``) or ``none``; ``changes`` what differs from the
    recorded request (empty when identical) and, for a step that ran live, from the recorded
    answer (``result $.path``, ``error``). ``live``: the call was not answered from the
    recording (an unmatched request let through, or a read tool under ``--live-tools read``,
    matched all the same). ``effect`` and ``effect_reason``: a tool call's effect in the
    replay and why it has it (``write``, ``default``; see ``envelope._effect``), None for other
    calls. ``forked``: what a fork served here instead of the recorded answer
    (``override @result.json``, ``inject http:429``; see ``_fork``), None when it did not.
    ``request_body``: the request as sent (redacted); ``response_body``: the answer the
    program got (the recorded one, a fork's in its place, or a live tool's); None when not
    known (an injected fault, a step read back from a report file). Neither is in the
    report-file form. ``refused``: the call was matched to its recorded step and refused
    (``UnmatchedRequestError``): a fork serves a write tool only the call it recorded, so
    the program got nothing, neither the recorded answer nor a live one.
    """

    order: int
    method: str
    url: str
    endpoint: str
    request_hash: str
    how: str
    recorded: int | None
    repeat: bool
    fidelity: str | None
    changes: tuple[Change, ...]
    live: bool = False
    effect: str | None = None
    effect_reason: str | None = None
    forked: str | None = None
    request_body: bytes | None = field(default=None, repr=False, compare=False)
    response_body: bytes | None = field(default=None, repr=False, compare=False)
    refused: bool = False

    @property
    def identical(self) -> bool:
        """The request equals its recorded one and was answered from the recording, or, run
        live, answered as recorded."""
        return self.recorded is not None and not self.changes and not self.repeat

    @property
    def repeated(self) -> str:
        """Why a request that asked for its recorded step again (``repeat``) differs: the
        step was served already; or, past a fork's live point, a live call already stood for
        it, and this one was sent live again (a retry after the live world failed the first,
        or the program's own loop): nothing was served."""
        if self.live:
            return "a live call already stood for it: this one was sent live again"
        return "it was already served"

    @property
    def injected(self) -> bool:
        """A fault the fork injected was served here in place of the recorded answer, which
        is still to be served (to the program's retry: see ``_faults``)."""
        return self.forked is not None and self.forked.startswith("inject ")

    def ran_live(self, changes: Iterable[Change], answer: bytes | None = None) -> ServedStep:
        """This step once its call ran live: marked live, with ``changes`` (how its answer
        differs from the recorded one) after its request's, and ``answer`` its live answer."""
        return replace(self, live=True, changes=(*self.changes, *changes), response_body=answer)

    def to_json(self) -> dict[str, Any]:
        """The report-file form (see :meth:`from_json`)."""
        return {
            "type": "step",
            "order": self.order,
            "method": self.method,
            "url": self.url,
            "endpoint": self.endpoint,
            "request_hash": self.request_hash,
            "how": self.how,
            "recorded": self.recorded,
            "repeat": self.repeat,
            "fidelity": self.fidelity,
            "changes": [c.to_json() for c in self.changes],
            "live": self.live,
            "effect": self.effect,
            "effect_reason": self.effect_reason,
            "forked": self.forked,
            "refused": self.refused,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ServedStep:
        """Rebuild a step from its report-file form; raises KeyError/TypeError when damaged."""
        return cls(
            order=int(data["order"]),
            method=str(data["method"]),
            url=str(data["url"]),
            endpoint=str(data["endpoint"]),
            request_hash=str(data["request_hash"]),
            how=str(data["how"]),
            recorded=None if data["recorded"] is None else int(data["recorded"]),
            repeat=bool(data["repeat"]),
            fidelity=data["fidelity"],
            changes=changes_from_json(data["changes"]),
            live=bool(data.get("live", False)),
            effect=data.get("effect"),
            effect_reason=data.get("effect_reason"),
            forked=data.get("forked"),
            refused=bool(data.get("refused", False)),
        )


def changes_from_json(data: Iterable[Mapping[str, Any]]) -> tuple[Change, ...]:
    """Changes from their report-file form; raises KeyError/TypeError when damaged. A
    "change" between two equal values is no change and is left out."""
    return tuple(
        Change(c["field"], c["kind"], c["recorded"], c["replayed"])
        for c in data
        if c["kind"] != "changed" or c["recorded"] != c["replayed"]
    )


def live_event(order: int, changes: Iterable[Change]) -> dict[str, Any]:
    """The report-file event saying that request ``order`` ran live, its answer differing
    from the recorded one by ``changes`` (applied with :meth:`ServedStep.ran_live`)."""
    return {"type": "step-live", "order": order, "changes": [c.to_json() for c in changes]}
