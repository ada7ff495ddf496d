"""A fork's plan (:class:`ForkPlan`): what differs from the recording, and at which steps."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from otel_replay import attributes as A
from otel_replay._canonical import canonical_json
from otel_replay.envelope import TIME_VALUE, UUID_VALUES
from otel_replay.errors import CodecError, ConfigError, SourceError
from otel_replay.replay._model import RecordedStep, Run
from otel_replay.replay._override import parsed_answer
from otel_replay.replay.synth import ENDPOINTS

__all__ = ["Fault", "FaultKind", "ForkPlan", "Override", "State"]

FaultKind = Literal["http", "timeout", "disconnect", "stream-cut", "tool-error"]

# Which step kinds take which faults: a transport fault needs a transport, a tool error a tool.
_FAULTS_FOR: dict[str, frozenset[str]] = {
    "llm": frozenset({"http", "timeout", "disconnect", "stream-cut"}),
    "http": frozenset({"http", "timeout", "disconnect", "stream-cut"}),
    "tool": frozenset({"tool-error"}),
}
_STATUS = re.compile(r"([0-9]{3}):")


@dataclass(frozen=True, slots=True)
class Override:
    """Step ``step`` answers ``body`` instead of what was recorded.

    ``text``: ``body`` is the UTF-8 of a ``text:`` shortcut (a model step answers with a
    message saying it; a tool or value step returns it as a string; an HTTP step serves it).
    Otherwise ``body`` is JSON (a provider response body, a tool result, a value) or, for an
    HTTP step, any bytes. ``status``: an HTTP step's status (None: the recorded one).
    ``given`` is the SPEC as the user wrote it, for messages.
    """

    step: int
    body: bytes
    text: bool = False
    status: int | None = None
    given: str = ""

    def describe(self) -> str:
        """``override @result.json``: what ``replay.fork.change`` and the report say."""
        return f"override {_shown(self.given) or 'value'}"


@dataclass(frozen=True, slots=True)
class Fault:
    """A fault served or raised at step ``step`` in place of its answer.

    ``http``: a response with ``status`` and ``body`` (None: an empty one); ``timeout``,
    ``disconnect``: the transport's own error; ``stream-cut``: the recorded body cut after
    ``cut_at`` bytes; ``tool-error``: the tool raises, with ``message`` when given.
    """

    step: int
    kind: FaultKind
    status: int | None = None
    body: bytes | None = None
    cut_at: int | None = None
    message: str | None = None
    given: str = ""

    def describe(self) -> str:
        """``inject http:429``: what ``replay.fork.change`` and the report say."""
        return f"inject {_shown(self.given) or self.kind}"


@dataclass(frozen=True, slots=True)
class State:
    """``checkpoint(name, ...)`` returns ``body`` (JSON) instead of its state."""

    name: str
    body: bytes
    given: str = ""

    def describe(self) -> str:
        """``state after_search``: what ``replay.fork.change`` and the report say."""
        return f"state {self.name}"


@dataclass(frozen=True, slots=True)
class ForkPlan:
    """Everything a fork changes; an empty plan is a plain replay.

    ``overrides`` and ``injections`` by step index (``replay.step.index``), ``states`` by
    checkpoint name; ``live_from``: from this step on, calls go live; ``allow_writes``: write
    tools run.
    """

    overrides: Mapping[int, Override] = field(default_factory=dict)
    injections: Mapping[int, Fault] = field(default_factory=dict)
    states: Mapping[str, State] = field(default_factory=dict)
    live_from: int | None = None
    allow_writes: bool = False

    @property
    def empty(self) -> bool:
        """Nothing changes: the replay is not a fork."""
        return not (
            self.overrides
            or self.injections
            or self.states
            or self.live_from is not None
            or self.allow_writes
        )

    @classmethod
    def build(
        cls,
        *,
        override: Iterable[str] | Mapping[int, object] | None = None,
        inject: Iterable[str] | Mapping[int, str] | None = None,
        state: Iterable[str] | Mapping[str, object] | None = None,
        live_from: int | None = None,
        allow_writes: bool = False,
        base: Path | None = None,
    ) -> ForkPlan:
        """The plan from the CLI's strings (``"3=@result.json"``, one per flag) or from
        mappings (``{3: "@result.json"}``; a value that is not a string is the JSON value
        itself). ``@FILE`` is read from ``base`` (default: the working directory) now."""
        overrides: dict[int, Override] = {}
        for step, spec in _pairs("--override", override, _step_number):
            if step in overrides:
                raise ConfigError(f"--override: step {step} is given twice")
            overrides[step] = _override(step, spec, base)
        injections: dict[int, Fault] = {}
        for step, spec in _pairs("--inject", inject, _step_number):
            if step in injections:
                raise ConfigError(f"--inject: step {step} is given twice")
            if not isinstance(spec, str):
                raise ConfigError(f"--inject {step}: the fault must be a string, not {spec!r}")
            injections[step] = _fault(step, spec, base)
        states: dict[str, State] = {}
        for name, spec in _pairs("--state", state, _state_name):
            if name in states:
                raise ConfigError(f"--state: {name!r} is given twice")
            body = _json_body(f"--state {name}", spec, base)
            states[name] = State(name, body, spec if isinstance(spec, str) else "")
        if live_from is not None and (type(live_from) is not int or live_from < 0):
            raise ConfigError(f"--live-from {live_from!r}: expected a step number >= 0")
        if type(allow_writes) is not bool:
            raise ConfigError(f"allow_writes={allow_writes!r} is not True or False")
        return cls(overrides, injections, states, live_from, allow_writes)

    def check(self, run: Run, *, live_read_tools: bool = False) -> ForkPlan:
        """This plan, once every step it names exists in ``run`` and takes what it is given;
        raises ConfigError naming the first that does not. ``live_read_tools``: read tools
        run (``--live-tools read``), so the steps made inside them are asked for."""
        steps = {recorded.step.index: recorded for recorded in run.steps}
        span = f"run {run.run_id} has steps {min(steps)}-{max(steps)}" if steps else "no steps"

        def step_of(flag: str, index: int) -> RecordedStep:
            found = steps.get(index)
            if found is None:
                raise ConfigError(f"{flag} {index}: no such step ({span})")
            return found

        if self.live_from is not None:
            step_of("--live-from", self.live_from)
        for index in sorted(set(self.overrides) & set(self.injections)):
            raise ConfigError(f"step {index} is given to both --override and --inject")
        for index, override in sorted(self.overrides.items()):
            recorded = step_of("--override", index)
            self._before_live("--override", index)
            self._reached("--override", recorded, steps, live_read_tools)
            _fits_override(override, recorded)
        for index, fault in sorted(self.injections.items()):
            recorded = step_of("--inject", index)
            self._before_live("--inject", index)
            self._reached("--inject", recorded, steps, live_read_tools)
            if fault.kind not in _FAULTS_FOR.get(recorded.step.kind, ()):
                raise ConfigError(
                    f"--inject {index}={_shown(fault.given)}: step {index} is "
                    f"{_a(recorded.step.kind)} "
                    f"({recorded.endpoint}), which a {fault.kind} fault does not fit"
                )
            size = None if recorded.step.response_body is None else len(recorded.step.response_body)
            if fault.kind == "stream-cut" and size is not None and (fault.cut_at or 0) >= size:
                raise ConfigError(
                    f"--inject {index}={_shown(fault.given)}: step {index}'s recorded answer "
                    f"is {size:,} bytes; a cut at or past its end cuts nothing"
                )
        named: dict[str, int] = {}  # each checkpoint name's first step
        for s in run.steps:
            if s.step.kind == "checkpoint":
                named.setdefault(_checkpoint_name(s), s.step.index)
        for name in self.states:
            if name not in named:
                known = ", ".join(sorted(n for n in named if n)) or "none"
                raise ConfigError(
                    f"--state {name}: run {run.run_id} has no checkpoint of that name "
                    f"(its checkpoints: {known})"
                )
            if self.live_from is not None and named[name] >= self.live_from:
                raise ConfigError(
                    f"--state {name}: its checkpoint (step {named[name]}) is not served from "
                    f"the recording (--live-from {self.live_from} runs it live)"
                )
        return self

    def _reached(
        self, flag: str, recorded: RecordedStep, steps: Mapping[int, RecordedStep], live_reads: bool
    ) -> None:
        """ConfigError when ``recorded`` was made inside the body of a tool the fork serves whole
        (a write without --allow-writes, a read without --live-tools read): nothing would
        ever ask for the step."""
        seen = {recorded.step.index}
        tool = steps.get(recorded.step.within) if recorded.step.within is not None else None
        while tool is not None and tool.step.index not in seen:
            writes = _writes(tool)
            if not (self.allow_writes if writes else live_reads):
                effect, flag_that_runs = (
                    ("write", "--allow-writes") if writes else ("read", "--live-tools read")
                )
                raise ConfigError(
                    f"{flag} {recorded.step.index}: the step is made inside step {tool.step.index} "
                    f"({tool.endpoint}), a {effect} tool the fork serves whole without "
                    f"running it; change step {tool.step.index}, or add {flag_that_runs}"
                )
            seen.add(tool.step.index)
            tool = steps.get(tool.step.within) if tool.step.within is not None else None

    def _before_live(self, flag: str, index: int) -> None:
        if self.live_from is not None and index >= self.live_from:
            raise ConfigError(
                f"{flag} {index}: the step is not served from the recording "
                f"(--live-from {self.live_from} runs it live)"
            )

    def fork_step(self, run: Run) -> int | None:
        """The first step of ``run`` that does not come from the recording
        (``replay.fork.step``); None for an empty plan, or for ``allow_writes`` alone
        before any write tool step."""
        firsts = [*self.overrides, *self.injections]
        if self.live_from is not None:
            firsts.append(self.live_from)
        for recorded in run.steps:
            if recorded.step.kind == "checkpoint" and _checkpoint_name(recorded) in self.states:
                firsts.append(recorded.step.index)
                break
        if self.allow_writes:
            writes = (s.step.index for s in run.steps if s.step.kind == "tool" and _writes(s))
            firsts.extend(list(writes)[:1])
        return min(firsts, default=None)

    def changes(self, run: Run) -> list[tuple[int | None, str]]:
        """What the plan changes, in step order: ``(step, what)`` with ``what`` as
        ``replay.fork.change`` says it (a state at the first checkpoint of its name; the
        step None for what applies to no one step)."""
        found: list[tuple[int | None, str]] = [
            *((step, override.describe()) for step, override in self.overrides.items()),
            *((step, fault.describe()) for step, fault in self.injections.items()),
        ]
        for name, state in self.states.items():
            at = next((s.step.index for s in run.steps if _checkpoint_name(s) == name), None)
            found.append((at, state.describe()))
        if self.live_from is not None:
            found.append((self.live_from, "live from here on"))
        found.sort(key=lambda pair: -1 if pair[0] is None else pair[0])
        if self.allow_writes:
            found.append((None, "write tools run (--allow-writes)"))
        return found

    def to_json(self) -> str:
        """The plan as one line of JSON (bodies in base64); :meth:`from_json` reads it."""
        return json.dumps(
            {
                "overrides": [_encoded(o) for o in self.overrides.values()],
                "injections": [_encoded(f) for f in self.injections.values()],
                "states": [_encoded(s) for s in self.states.values()],
                "live_from": self.live_from,
                "allow_writes": self.allow_writes,
            }
        )

    @classmethod
    def read(cls, path: str) -> ForkPlan:
        """The plan :meth:`to_json` wrote to the file at ``path``; ConfigError when it is
        missing or damaged."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"OTEL_REPLAY_FORK: cannot read {path}: {exc.strerror}") from None
        return cls.from_json(text)

    @classmethod
    def from_json(cls, text: str) -> ForkPlan:
        """The plan :meth:`to_json` wrote; ConfigError when it is damaged."""
        try:
            data = json.loads(text)
            overrides = [Override(**_decoded(o)) for o in data["overrides"]]
            injections = [Fault(**_decoded(f)) for f in data["injections"]]
            states = [State(**_decoded(s)) for s in data["states"]]
            return cls(
                {o.step: o for o in overrides},
                {f.step: f for f in injections},
                {s.name: s for s in states},
                data["live_from"],
                bool(data["allow_writes"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"OTEL_REPLAY_FORK is damaged ({exc})") from None


def _pairs(
    flag: str,
    given: Iterable[str] | Mapping[Any, object] | None,
    key: Any,
) -> list[tuple[Any, object]]:
    """``(key, spec)`` pairs from ``N=SPEC`` strings or a mapping, keys checked by ``key``."""
    if given is None:
        return []
    if isinstance(given, Mapping):
        return [(key(flag, k), v) for k, v in given.items()]
    if isinstance(given, (str, bytes)):
        given = [given] if isinstance(given, str) else [given.decode()]
    pairs: list[tuple[Any, object]] = []
    for item in given:
        if not isinstance(item, str) or "=" not in item:
            raise ConfigError(f"{flag} {item!r}: expected KEY=VALUE")
        raw, _, spec = item.partition("=")
        pairs.append((key(flag, raw.strip()), spec))
    return pairs


def _step_number(flag: str, raw: object) -> int:
    if type(raw) is int:
        number = raw
    elif isinstance(raw, str) and raw.isdigit():
        number = int(raw)
    else:
        raise ConfigError(f"{flag} {raw!r}: the step must be a number >= 0")
    if number < 0:
        raise ConfigError(f"{flag} {raw!r}: the step must be a number >= 0")
    return number


def _state_name(flag: str, raw: object) -> str:
    if not isinstance(raw, str) or not raw:
        raise ConfigError(f"{flag} {raw!r}: expected a checkpoint name")
    return raw


def _read(what: str, spec: str, base: Path | None) -> bytes:
    """The bytes ``@FILE`` names, within the bound a trace source has (``@/dev/zero`` read
    for ever)."""
    from otel_replay.replay.sources import Limits, read_file  # noqa: PLC0415 - import cycle

    path = Path(os.path.expanduser(spec[1:]))
    if base is not None and not path.is_absolute():
        path = base / path
    try:
        return read_file(path, Limits.from_env())
    except OSError as exc:
        raise ConfigError(f"{what}: cannot read {path}: {exc.strerror or exc}") from None
    except SourceError as exc:
        raise ConfigError(f"{what}: {exc}") from None


def _json_body(what: str, spec: object, base: Path | None) -> bytes:
    """A JSON value's bytes from a SPEC (``@FILE``, ``text:TEXT``, inline JSON) or a value."""
    if not isinstance(spec, str):
        try:
            return canonical_json(spec)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{what}: {spec!r} is not a JSON value ({exc})") from None
    if spec.startswith("text:"):
        return canonical_json(spec[5:])
    body = _read(what, spec, base) if spec.startswith("@") else spec.encode()
    _must_be_json(what, spec, body)
    return body


def _must_be_json(what: str, spec: str, body: bytes) -> None:
    try:
        json.loads(body)
    except ValueError:
        raise ConfigError(
            f"{what}={_shown(spec)}: not JSON (give @FILE, text:TEXT or inline JSON)"
        ) from None


def _override(step: int, spec: object, base: Path | None) -> Override:
    what = f"--override {step}"
    if isinstance(spec, bytes):
        return Override(step, spec)
    if not isinstance(spec, str):
        return Override(step, _json_body(what, spec, base))
    status: int | None = None
    rest = spec
    matched = _STATUS.match(spec)
    if matched is not None:
        status, rest = int(matched.group(1)), spec[matched.end() :]
        if not 100 <= status <= 599:  # a typo, not a body that happens to start so
            raise ConfigError(f"{what}={_shown(spec)}: expected STATUS:SPEC with STATUS 100-599")
    if rest.startswith("text:"):
        return Override(step, rest[5:].encode(), text=True, status=status, given=spec)
    body = _read(what, rest, base) if rest.startswith("@") else rest.encode()
    return Override(step, body, status=status, given=spec)


_FAULT_FORMS = "http:STATUS[:BODY], timeout, disconnect, stream-cut:BYTES or tool:error[:MESSAGE]"


def _fault(step: int, spec: str, base: Path | None) -> Fault:
    what = f"--inject {step}={spec}"
    kind, _, rest = spec.partition(":")
    if kind == "http":
        status, _, body = rest.partition(":")
        if not (status.isdigit() and 100 <= int(status) <= 599):
            raise ConfigError(f"{what}: expected http:STATUS[:BODY] with STATUS 100-599")
        data = _read(what, body, base) if body.startswith("@") else body.encode() or None
        return Fault(step, "http", status=int(status), body=data, given=spec)
    if spec in ("timeout", "disconnect"):
        return Fault(step, cast(FaultKind, spec), given=spec)
    if kind == "stream-cut":
        if not rest.isdigit():
            raise ConfigError(f"{what}: expected stream-cut:BYTES with BYTES a number >= 0")
        return Fault(step, "stream-cut", cut_at=int(rest), given=spec)
    if kind == "tool" and rest.partition(":")[0] == "error":
        message = rest.partition(":")[2] or None
        return Fault(step, "tool-error", message=message, given=spec)
    raise ConfigError(f"{what}: unknown fault (expected {_FAULT_FORMS})")


def _fits_override(override: Override, recorded: RecordedStep) -> None:
    """ConfigError when ``override`` cannot answer ``recorded`` (by the step's kind)."""
    what = f"--override {override.step}={_shown(override.given) or '…'}"
    if override.status is not None and recorded.step.kind != "http":
        raise ConfigError(
            f"{what}: only an HTTP step takes a status; step {recorded.step.index} is "
            f"{_a(recorded.step.kind)} ({recorded.endpoint})"
        )
    if recorded.step.kind == "llm" and recorded.endpoint not in ENDPOINTS:
        raise ConfigError(
            f"{what}: step {recorded.step.index} calls {recorded.endpoint}, "
            "whose answers otel-replay cannot make"
        )
    if recorded.step.kind == "value" and recorded.endpoint.removeprefix("value:") in UUID_VALUES:
        _fits_uuid(what, override, recorded)
    if (
        recorded.step.kind == "value"
        and recorded.endpoint == f"value:{TIME_VALUE}"
        and recorded.request_body in (b"{}", None)  # not side_effect("now", fn, ...)
    ):
        _fits_time(what, override, recorded)
    if override.text or recorded.step.kind == "http":
        return
    try:
        value = json.loads(override.body)
    except ValueError:
        raise ConfigError(
            f"{what}: step {recorded.step.index} is {_a(recorded.step.kind)} "
            f"({recorded.endpoint}), whose "
            "answer is JSON (give @FILE, text:TEXT or inline JSON)"
        ) from None
    if recorded.step.kind != "llm":
        return
    if not isinstance(value, dict):
        raise ConfigError(
            f"{what}: step {recorded.step.index} is a model step ({recorded.endpoint}); "
            "give a provider "
            "response body (a JSON object) or text:TEXT"
        )
    try:
        parsed_answer(recorded.endpoint, override.body)
    except CodecError as exc:
        raise ConfigError(f"{what}: not an {recorded.endpoint} response body ({exc})") from None


def _fits_uuid(what: str, override: Override, recorded: RecordedStep) -> None:
    try:
        text = override.body.decode() if override.text else json.loads(override.body)
        uuid.UUID(text)
    except (AttributeError, TypeError, ValueError):
        raise ConfigError(
            f"{what}: step {recorded.step.index} is a value ({recorded.endpoint}) whose "
            "answer is a UUID's text (text:0b0e7c2a-6f3c-4f5e-9d1a-2c8e4b7a9f10)"
        ) from None


def _fits_time(what: str, override: Override, recorded: RecordedStep) -> None:
    """``now()`` gives an aware datetime, which the program compares with others: an answer
    that is not one would fail in the program, as if the recording were bad."""
    try:
        text = override.body.decode() if override.text else json.loads(override.body)
        aware = dt.datetime.fromisoformat(text).tzinfo is not None
    except (AttributeError, TypeError, ValueError):
        aware = False
    if not aware:
        raise ConfigError(
            f"{what}: step {recorded.step.index} is a value ({recorded.endpoint}) whose "
            "answer is an ISO 8601 time with a UTC offset (text:2026-11-21T09:05:00+00:00)"
        )


def _shown(spec: str) -> str:
    """``spec`` cut to 60 characters: an inline JSON body can be long, and it is echoed in
    messages, the report and ``replay.fork.change``."""
    return spec if len(spec) <= 60 else spec[:59] + "…"


def _a(kind: str) -> str:
    """``a model step``, ``an HTTP step``: a step kind as a message says it."""
    return {"llm": "a model step", "http": "an HTTP step"}.get(kind, f"a {kind} step")


def _checkpoint_name(recorded: RecordedStep) -> str:
    return (
        recorded.endpoint.partition(":")[2] if recorded.endpoint.startswith("checkpoint:") else ""
    )


def _writes(recorded: RecordedStep) -> bool:
    return bool(recorded.attributes.get(A.REPLAY_TOOL_EFFECT, "write") != "read")


def _encoded(item: Override | Fault | State) -> dict[str, object]:
    data = {name: getattr(item, name) for name in item.__dataclass_fields__}
    return {
        k: base64.b64encode(v).decode("ascii") if isinstance(v, bytes) else v
        for k, v in data.items()
    }


def _decoded(data: Mapping[str, object]) -> dict[str, Any]:
    return {
        k: base64.b64decode(cast(str, v)) if k == "body" and v is not None else v
        for k, v in data.items()
    }
