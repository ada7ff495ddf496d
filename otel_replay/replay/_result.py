"""The outcome of a replay: each request and how it was answered, and the comparison."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from otel_replay import attributes as A
from otel_replay.envelope import address
from otel_replay.replay._calls import Checkpoint, ModelCall, ToolCall, Value, read_calls
from otel_replay.replay._change import Change
from otel_replay.replay._live_from import WentLive, went_live
from otel_replay.replay._model import RecordedStep, Run
from otel_replay.replay._served import ServedStep
from otel_replay.replay._textdiff import excerpts
from otel_replay.runs import qualified_name

__all__ = [
    "AgentStatus",
    "BadValue",
    "Divergence",
    "InjectedFault",
    "Isolation",
    "Outcome",
    "ReplayResult",
]

_MESSAGE_LIMIT = 300
# Changes that sum others up (a hash of the prompt, of the tool definitions): named after them.
_DIGESTS = frozenset({"prompt hash", "tool schema version"})
_MAX_NAMED = 5

Outcome = Literal["identical", "diverged", "agent_failed", "bad_recording"]
"""What a replay came to: ``identical``; ``diverged`` (whatever the program did after);
``agent_failed``: every step as recorded, but the program failed (a non-zero exit status, a
signal, an uncaught exception), or it failed before its first request (a script that is not
there, an import error at its top: nothing was compared); or ``bad_recording``: a recorded
step's value could not be given back (:class:`BadValue`), whatever happened before or
after."""


@dataclass(frozen=True, slots=True)
class Divergence:
    """Where the replay first departs from the recording.

    ``kind`` is ``changed`` (a request differs from its recorded step), ``extra`` (a request
    the recording lacks) or ``unused`` (a recorded step nothing asked for). ``step`` is the
    recorded step index (None for an extra request); ``served`` the request of the replay.
    """

    kind: str
    step: int | None
    served: ServedStep | None
    changes: tuple[Change, ...]
    because: str | None = None
    """Why an unused step was never requested, when the replay knows (a fault took an
    attempt of its call's retry budget)."""

    def describe(self) -> str:
        """One line naming the step."""
        if self.kind == "extra" and self.served is not None:
            return (
                f"request {self.served.order} ({self.served.method} {self.served.url}) "
                "has no recorded step"
            )
        if self.kind == "unused":
            why = f": {self.because}" if self.because else ""
            return f"recorded step {self.step} was never requested{why}"
        if self.served is not None and self.served.live:
            return f"step {self.step} ran live and differs from the recording"
        if self.served is not None and self.served.refused:
            return f"step {self.step} differs from the recording and was refused"
        return f"step {self.step} differs from the recording"

    def __repr__(self) -> str:
        # What ``assert result.identical, result.first_divergence`` shows in a test, on one
        # line: the step and its endpoint, then the change that says what changed (a
        # message's text, not the prompt's hash, which only says that something did), then
        # what else differs. pytest cuts the middle out of a repr past 240 characters (short
        # of -vv), so the windows around a change are narrow.
        served = self.served
        if self.kind != "changed" or served is None:
            return f"<Divergence: {self.describe()}>"
        line = f"step {self.step} ({served.endpoint})" + (", ran live" if served.live else "")
        line += ", refused" if served.refused else ""
        if served.repeat and not self.changes:
            line += f": requested again ({served.repeated})"
        if self.changes:
            first, *rest = sorted(self.changes, key=lambda c: c.field in _DIGESTS)
            line += f": {_narrow(first)}"
            if rest:
                line += "; also differs: " + ", ".join(c.field for c in rest[:_MAX_NAMED])
                if len(rest) > _MAX_NAMED:
                    line += f" and {len(rest) - _MAX_NAMED} more"
        return f"<Divergence: {line}>"


def _narrow(change: Change) -> str:
    """``change`` on one line: a long text as a narrow window around its change, each side,
    a line break as ``↵`` (pytest breaks the line at a ``\\n`` in a repr, and its summary
    line would end before the change)."""
    if change.kind == "changed" and not change.short:
        recorded, replayed = (
            (v or "").replace("\n", "↵") for v in (change.recorded, change.replayed)
        )
        windows = excerpts(recorded, replayed, context=16, width=40)
        if windows is not None:
            return f"{change.field}: {windows[0]} → {windows[1]}"
    return change.describe()


@dataclass(frozen=True, slots=True)
class InjectedFault:
    """A fault a fork injected (``--inject``), and what the program did after it.

    ``step`` is the recorded step it stood in for, ``fault`` what was served there
    (``inject tool:error``), ``request`` the request that got it, ``retry`` the later request
    that got the step's recorded answer (None: the program never asked for it again; the
    step was requested all the same, so it is not left unused). ``attempt``: the step is
    attempt N of a tool call under a retry budget (None otherwise): the fault took attempt N
    of the replay's budget, an attempt more than the recording made, so each recorded attempt
    after it comes one attempt later (the last may find the budget spent).
    """

    step: int
    endpoint: str
    fault: str
    request: int
    retry: int | None
    attempt: int | None

    def describe(self) -> str:
        """One line: where the fault went and whether the program asked again."""
        said = f"{self.fault} at step {self.step} ({self.endpoint}): request {self.request} got it"
        if self.retry is None:
            said += "; the program never asked for the recorded answer again"
        else:
            said += f", its retry (request {self.retry}) the recorded answer"
        if self.attempt is not None:
            said += (
                f"; the fault took attempt {self.attempt} of the tool's retry budget, an "
                "attempt more than the recording made"
            )
        return said

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` form."""
        return {
            "step": self.step,
            "endpoint": self.endpoint,
            "fault": self.fault,
            "request": self.request,
            "retry": self.retry,
            "attempt": self.attempt,
        }


@dataclass(frozen=True, slots=True)
class BadValue:
    """A recorded step whose value the replay could not give back to the program (it raised
    :class:`~otel_replay.errors.RecordedValueError` there): ``run_id`` and ``step`` name the
    recorded step, ``name`` its kind and name (``checkpoint langgraph.get_tuple``), ``what``
    what is wrong with its value."""

    run_id: str
    step: int
    name: str
    what: str

    def describe(self) -> str:
        """``run RUN step N (NAME): WHAT``, the error's own message."""
        return f"run {self.run_id} step {self.step} ({self.name}): {self.what}"

    def to_json(self) -> dict[str, Any]:
        """The report-file and ``--json`` form (see :meth:`from_json`)."""
        return {
            "run": self.run_id,
            "step": self.step,
            "name": self.name,
            "what": self.what,
            "message": self.describe(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BadValue:
        """Rebuild it from its report-file form; raises KeyError/TypeError/ValueError when
        damaged."""
        return cls(str(data["run"]), int(data["step"]), str(data["name"]), str(data["what"]))


def _sole_member(exc: BaseException) -> BaseException | None:
    """The one exception ``exc`` groups, when it is an exception group of one (the builtin
    ``BaseExceptionGroup``, or the ``exceptiongroup`` backport's on Python 3.10); else None."""
    if not any(c.__name__ == "BaseExceptionGroup" for c in type(exc).__mro__):
        return None
    members = getattr(exc, "exceptions", None)
    if isinstance(members, tuple) and len(members) == 1:
        member = members[0]
        return member if isinstance(member, BaseException) else None
    return None


@dataclass(frozen=True, slots=True)
class AgentStatus:
    """How the replayed program ended.

    ``exit_code`` is its exit status (None in-process, where it has no process of its own;
    negative when a signal killed it, as :mod:`subprocess` reports it). ``error`` is the
    uncaught exception that ended it, as ``module.Type: first line of the message`` (in-process:
    the exception that left the ``replaying()`` block); None when none was seen.
    """

    exit_code: int | None = None
    error: str | None = None

    @classmethod
    def raised(cls, exc: BaseException, exit_code: int | None = None) -> AgentStatus:
        """The status of a program that ``exc`` ended (its message's first line, cut to 300
        characters: an ``UnmatchedRequestError`` goes on to list candidates). An exception
        group holding one exception (what an anyio or asyncio task group raises, as the MCP
        SDK's clients do) names that exception, and the group after it: the group's own
        message says only how many it holds."""
        group, sole = None, exc
        while (inner := _sole_member(sole)) is not None:
            group = group or qualified_name(sole)
            sole = inner
        lines = str(sole).strip().splitlines()
        message = lines[0] if lines else ""
        if len(message) > _MESSAGE_LIMIT:
            message = message[: _MESSAGE_LIMIT - 1] + "…"
        name = qualified_name(sole)
        error = f"{name}: {message}" if message else name
        return cls(exit_code, error if group is None else f"{error} (in {group})")

    @property
    def failed(self) -> bool:
        """It exited with a non-zero status, was killed, or raised."""
        return self.error is not None or self.exit_code not in (None, 0)

    @property
    def signal(self) -> str | None:
        """The name of the signal that killed it (``SIGKILL``), None otherwise."""
        if self.exit_code is None or self.exit_code >= 0:
            return None
        try:
            return signal.Signals(-self.exit_code).name
        except ValueError:
            return f"signal {-self.exit_code}"

    def describe(self) -> str:
        """``exited with status 0``, ``raised ValueError: boom and exited with status 1``,
        ``was killed by SIGKILL``; in-process: ``raised ValueError: boom`` or ``returned``."""
        code = self.exit_code
        if self.signal is not None:
            ended = f"was killed by {self.signal}"
        elif code is None:
            ended = ""
        else:
            ended = f"exited with status {code}"
        if self.error is None:
            return ended or "returned"
        return f"raised {self.error}" + (f" and {ended}" if ended else "")

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` form."""
        return {"exit_code": self.exit_code, "signal": self.signal, "error": self.error}


@dataclass(frozen=True, slots=True)
class Isolation:
    """How the kernel kept the replayed command (and all it started) from the outside.

    ``isolated``: it ran in a network namespace of its own, so the network was out of route;
    ``how`` names the namespaces (``network namespace``, ``user, network, PID and mount
    namespaces``…), ``loopback`` says whether its private loopback was up and
    ``private_proc`` whether its ``/proc`` showed its own processes only (else the host's,
    and under ``/proc/PID/net`` their sockets). Otherwise ``reason`` says why not
    (``--no-isolate``, ``unshare: Operation not permitted``…).

    ``seccomp``: a seccomp filter refused every unix socket the replay did not make itself
    and, without a network namespace, every IP connection (loopback included); otherwise
    ``seccomp_reason`` says why there was none. Neither: only the in-process guards applied.
    """

    isolated: bool
    how: str | None = None
    loopback: bool = False
    reason: str | None = None
    private_proc: bool = False
    seccomp: bool = False
    seccomp_reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` form."""
        return {
            "isolated": self.isolated,
            "how": self.how,
            "loopback": self.loopback,
            "reason": self.reason,
            "private_proc": self.private_proc,
            "seccomp": self.seccomp,
            "seccomp_reason": self.seccomp_reason,
        }


class ReplayResult:
    """The comparison of a replay with its recording.

    In-process (:func:`otel_replay.replaying`) it fills in while the code runs and is final
    when the ``with`` block exits. ``identical`` is True when every recorded step was asked
    for exactly once with the recorded request, and no network access was refused; processes
    started are reported (:attr:`subprocesses`) but do not make a replay differ. ``isolation``
    is set by the ``replay`` verb (None in-process: no namespace). ``agent`` says how the
    replayed program ended (set by the ``replay`` verb, and by ``replaying()`` when its block
    raises); :attr:`outcome` puts the two together.
    """

    def __init__(
        self,
        run: Run,
        steps: Sequence[ServedStep],
        network: Sequence[str],
        subprocesses: Sequence[str] = (),
    ) -> None:
        self.run = run
        self._steps = steps
        self._network = network
        self._subprocesses = subprocesses
        self.ignored: Counter[str] = Counter()
        """Background calls (``OTEL_REPLAY_IGNORE``, OpenTelemetry's own exports) answered
        by otel-replay instead of the recording, by ``host[:port]/path``: never compared,
        never network attempts."""
        self.elapsed_s: float = 0.0
        self.hooked = True
        """A process of the replayed program loaded otel-replay's replay (set by the
        ``replay`` verb: False when none did, so nothing it sent could be seen)."""
        self.isolation: Isolation | None = None
        self.agent: AgentStatus = AgentStatus()
        self.bad_value: BadValue | None = None
        """The first recorded step whose value could not be given back, if one was met: the
        replay stopped there (outcome ``bad_recording``)."""
        self.live_network: list[str] = []
        """Network operations a replay that is not strict let through, in order, every one,
        failed ones included (a name that did not resolve): never a divergence, always
        reported."""
        self.live_from: int | None = None
        """The fork's live point (``--live-from``), None when it has none."""

    @property
    def went_live(self) -> WentLive | None:
        """Where a fork with a live point went live (None: it has none, or never got
        there); see ``_live_from``."""
        return None if self.live_from is None else went_live(self._steps, self.live_from)

    @property
    def steps(self) -> list[ServedStep]:
        """The requests of the replay, in order."""
        return sorted(self._steps, key=lambda s: s.order)

    def tool_calls(self, name: str) -> list[ToolCall]:
        """The calls of tool ``name`` the replayed code made, in order (matched or not), with
        their arguments and the result or error the code got (:class:`ToolCall`)."""
        method, url = address("tool", name)
        mine = [step for step in self.steps if step.method == method and step.url == url]
        return read_calls(mine, self._by_index(), ToolCall)

    def model_calls(self) -> list[ModelCall]:
        """The model calls the replayed code made, in order (matched or not): each one's
        request messages, system instructions, tools offered, and the answer served
        (``output``, ``text``, ``tool_calls``); see :class:`ModelCall`."""
        return read_calls(self.steps, self._by_index(), ModelCall)

    @property
    def values(self) -> list[Value]:
        """The values the replayed code asked for (``now()``, ``uuid4()``,
        ``side_effect()``), in order, each with its ``name`` and the ``value`` it got."""
        return read_calls(self.steps, self._by_index(), Value)

    def checkpoints(self, name: str) -> list[Checkpoint]:
        """The checkpoints named ``name`` the replayed code passed, in order, each with the
        ``state`` it got back (the recorded one, or a fork's ``state=``)."""
        method, url = address("checkpoint", name)
        mine = [step for step in self.steps if step.method == method and step.url == url]
        return read_calls(mine, self._by_index(), Checkpoint)

    def _by_index(self) -> dict[int, RecordedStep]:
        return {recorded.step.index: recorded for recorded in self.run.steps}

    @property
    def network_attempts(self) -> list[str]:
        """Network operations strict mode refused, in order, every one (``host:port`` for a
        connect, ``host:port (sendto)``, ``name lookup host:port``…)."""
        return list(self._network)

    @property
    def subprocesses(self) -> list[str]:
        """Command lines of the processes the replayed code started during a strict replay, in
        order, every one. With neither a network namespace nor the seccomp filter (see
        :attr:`isolation`), each is a possible network escape."""
        return list(self._subprocesses)

    @property
    def faults(self) -> list[InjectedFault]:
        """The faults the fork injected, in the order they were served, each with what the
        program did after it."""
        steps = self.steps
        recorded = {s.step.index: s for s in self.run.steps}
        found: list[InjectedFault] = []
        for step in steps:
            if not step.injected or step.recorded is None or step.forked is None:
                continue
            retry = next(
                (
                    later.order
                    for later in steps
                    if later.order > step.order
                    and later.recorded == step.recorded
                    and not later.injected
                ),
                None,
            )
            attempt = recorded[step.recorded].attributes.get(A.REPLAY_TOOL_ATTEMPT)
            found.append(
                InjectedFault(
                    step.recorded,
                    step.endpoint,
                    step.forked,
                    step.order,
                    retry,
                    attempt if isinstance(attempt, int) else None,
                )
            )
        return found

    def _late_attempts(self) -> dict[int, str]:
        """Why each recorded attempt of a budgeted tool call after a fault's attempt came
        late, by step index: the fault took an attempt, or ended the call."""
        why: dict[int, str] = {}
        recorded = {s.step.index: s for s in self.run.steps}
        for fault in self.faults:
            if fault.attempt is None:
                continue
            reason = (
                f"the fault injected at step {fault.step} took an attempt of its call's retry "
                "budget"
                if fault.retry is not None
                else f"its call ended at the fault injected at step {fault.step}"
            )
            first = recorded[fault.step]
            expected = fault.attempt + 1
            for later in self.run.steps:
                if later.step.index <= fault.step or later.endpoint != first.endpoint:
                    continue
                if later.step.request_hash != first.step.request_hash:
                    continue
                if later.attributes.get(A.REPLAY_TOOL_ATTEMPT) != expected:
                    break  # another call of the tool with the same arguments
                why.setdefault(later.step.index, reason)
                expected += 1
        return why

    @property
    def unused(self) -> list[RecordedStep]:
        """Recorded steps no request asked for, but those made inside a tool or side effect
        that was itself served from the recording (its body, and so they, did not run
        again), or that is itself unused (listed, it says they were not made either). A step
        a fault was injected at was asked for, its recorded answer given or not (see
        :attr:`faults`)."""
        used = {s.recorded for s in self._steps}
        within = {s.step.index: s.step.within for s in self.run.steps}

        def covered(index: int) -> bool:
            seen: set[int] = set()
            parent = within.get(index)
            while parent is not None and parent not in seen:
                if parent in used:
                    return True
                seen.add(parent)
                parent = within.get(parent)
            return False

        unused = [
            s for s in self.run.steps if s.step.index not in used and not covered(s.step.index)
        ]
        twins = self._twins_of_faulted(unused)
        unused = [s for s in unused if s.step.index not in twins]
        left = {s.step.index for s in unused}
        return [s for s in unused if s.step.within not in left]

    def _twins_of_faulted(self, unused: Sequence[RecordedStep]) -> set[int]:
        """The unused steps a fault's "retry" stood for: a step a fault was injected at gives
        its recorded answer to the next request like it, which may be the program's next
        call of its own, not a retry (a loop that logs the timeout and goes on). Each later
        step that recorded the same exchange (request and answer hashes) counts as asked for
        once per request that took the faulted step's answer: the program asked what the
        recording asked, as often, and got what it got. Not the attempts of a tool's retry
        budget, where the fault is an attempt more than the recording made."""
        recorded = {s.step.index: s for s in self.run.steps}
        taken: set[int] = set()
        for fault in self.faults:
            if fault.attempt is not None:  # a budget's attempts: see _late_attempts
                continue
            first = recorded[fault.step]
            asked = [
                s
                for s in self._steps
                if s.recorded == fault.step and not s.injected and s.how == "hash"
            ]
            same = [
                s
                for s in unused
                if s.step.index > fault.step
                and s.step.index not in taken
                and s.endpoint == first.endpoint
                and s.step.request_hash == first.step.request_hash
                and s.step.response_hash == first.step.response_hash
            ]
            taken.update(s.step.index for s in same[: len(asked)])
        return taken

    @property
    def extra(self) -> list[ServedStep]:
        """Requests with no recorded step."""
        return [s for s in self.steps if s.recorded is None]

    @property
    def first_divergence(self) -> Divergence | None:
        """The first request (in replay order) that differs or has no recorded step, else the
        first recorded step left unused; None when the replay is identical."""
        for step in self.steps:
            if step.recorded is None:
                return Divergence("extra", None, step, ())
            if step.changes or step.repeat:
                return Divergence("changed", step.recorded, step, step.changes)
        unused = self.unused
        if unused:
            index = unused[0].step.index
            because = self._late_attempts().get(index)
            return Divergence("unused", index, None, (), because)
        return None

    @property
    def identical(self) -> bool:
        """True when nothing diverged and every recorded value was given back."""
        return self.first_divergence is None and not self._network and self.bad_value is None

    @property
    def failed_before_any_request(self) -> bool:
        """The program failed before it made any request or network attempt (a script that
        is not there, an import error at its top): its failure, not a divergence, is what
        the replay found."""
        return self.agent.failed and not self._steps and not self._network

    @property
    def outcome(self) -> Outcome:
        """``bad_recording`` when a recorded value could not be given back, else
        ``agent_failed`` when the program failed before any request, else ``diverged`` when
        not :attr:`identical`, else ``agent_failed`` when the program failed, else
        ``identical``."""
        if self.bad_value is not None:
            return "bad_recording"
        if self.failed_before_any_request:
            return "agent_failed"
        if not self.identical:
            return "diverged"
        return "agent_failed" if self.agent.failed else "identical"

    def matched(self) -> Counter[str]:
        """How many requests matched at each level (``hash``, ``canonical``, ``position``,
        ``none``)."""
        return Counter(s.how for s in self._steps)

    def fidelity(self) -> Counter[str]:
        """How many served requests were answered ``exact`` or ``semantic``."""
        return Counter(s.fidelity for s in self._steps if s.fidelity is not None)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready summary for machines (``otel-replay replay --json``)."""
        first = self.first_divergence
        return {
            "run": self.run.run_id,
            "source": self.run.source,
            "outcome": self.outcome,
            "identical": self.identical,
            "agent": self.agent.to_json(),
            "bad_value": None if self.bad_value is None else self.bad_value.to_json(),
            "recorded_steps": len(self.run.steps),
            "served": sum(1 for s in self._steps if s.recorded is not None and not s.refused),
            "matched": dict(self.matched()),
            "fidelity": dict(self.fidelity()),
            "first_divergence": None
            if first is None
            else {
                "kind": first.kind,
                "step": first.step,
                "request": None if first.served is None else first.served.order,
                "changes": [c.to_json() for c in first.changes],
                "because": first.because,
            },
            "unused": [s.step.index for s in self.unused],
            "faults": [f.to_json() for f in self.faults],
            "extra": [s.to_json() for s in self.extra],
            "steps": [s.to_json() for s in self.steps],
            "network_attempts": self.network_attempts,
            "network_live": list(self.live_network),
            "live_from": self.live_from,
            "went_live": None if self.went_live is None else self.went_live.to_json(),
            "ignored": dict(self.ignored),
            "hooked": self.hooked,
            "subprocesses": self.subprocesses,
            "isolation": None if self.isolation is None else self.isolation.to_json(),
            "elapsed_s": round(self.elapsed_s, 6),
        }
