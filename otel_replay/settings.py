"""Settings read from the environment, in one table (:data:`SETTINGS`, :func:`load`).

:data:`CLI_CHANNEL` lists the ones the ``replay`` verb sets for the process it replays."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

from otel_replay.errors import ConfigError

if TYPE_CHECKING:
    from otel_replay._ignore import IgnoreRules

__all__ = [
    "CLI_CHANNEL",
    "CLOCKS",
    "COMMIT_MAX",
    "SETTINGS",
    "TIMINGS",
    "Clock",
    "Mode",
    "Setting",
    "Settings",
    "Timing",
    "commit_given",
    "load",
    "read",
    "replay_requested",
    "run_id_given",
    "turn_off",
]

Mode = Literal["record", "replay", "off"]
Timing = Literal["fast", "recorded"]
Clock = Literal["recorded", "live"]


def _mode(raw: str) -> Mode:
    value = raw.strip().lower()
    if value not in ("record", "replay", "off"):
        raise ValueError("expected one of record, replay, off")
    return cast(Mode, value)


TIMINGS: tuple[Timing, ...] = get_args(Timing)
"""The values of :data:`Timing`, in order."""


def _timing(raw: str) -> Timing:
    value = raw.strip().lower()
    if value not in TIMINGS:
        raise ValueError("expected fast or recorded")
    return value


CLOCKS: tuple[Clock, ...] = get_args(Clock)
"""The values of :data:`Clock`, in order."""


def _clock(raw: str) -> Clock:
    value = raw.strip().lower()
    if value not in CLOCKS:
        raise ValueError("expected recorded or live")
    return value


def _number(raw: str, kind: type[int] | type[float], expected: str) -> Any:
    # int('1.5s') says "invalid literal for int() with base 10": name what is expected instead.
    try:
        return kind(raw.strip())
    except ValueError:
        raise ValueError(expected) from None


def _non_negative_int(raw: str) -> int:
    expected = "expected a whole number >= 0"
    value: int = _number(raw, int, expected)
    if value < 0:
        raise ValueError(expected)
    return value


# Text each pattern is tried on: one with an empty match in it would redact between every
# byte of every body (``x*`` turns ``{"a": 1}`` into ``REDACTED{REDACTED"…``).
_EMPTY_MATCH_PROBES = (b"", b'{"key": "value 1", "n": [-2.5e3, true]}\n')


def _patterns(raw: str) -> tuple[re.Pattern[bytes], ...]:
    out = []
    for text in raw.split(","):
        if not text.strip():
            continue
        pattern = re.compile(text.strip().encode())
        if any(not m.group() for probe in _EMPTY_MATCH_PROBES for m in pattern.finditer(probe)):
            raise ValueError(f"{text.strip()!r} matches empty text")
        out.append(pattern)
    return tuple(out)


def _text(raw: str) -> str | None:
    return raw.strip() or None


def _location(raw: str) -> str:
    """A path (or URL) as given; a ``~`` or ``~user`` that names no home directory (a
    container's user without one, a user that does not exist) is refused rather than taken
    as a directory named ``~`` where the process happens to run."""
    value = raw.strip()
    if value.startswith("~") and os.path.expanduser(value) == value:
        head = value.split("/", 1)[0]
        raise ValueError(f"{head} names no home directory")
    return value


def _optional_location(raw: str) -> str | None:
    return _location(raw) or None


COMMIT_MAX = 200
"""The longest commit (or other revision text) a recording may be given."""


def commit_given(raw: str) -> str | None:
    """A revision given to a recording (``OTEL_REPLAY_COMMIT``, a CI system's variable), or
    None for an empty one. ValueError for one a store cannot keep or a terminal cannot show
    on one line: bytes that are not UTF-8 (the environment carries any), control characters,
    more than :data:`COMMIT_MAX` characters."""
    value = raw.strip()
    if not value:
        return None
    if len(value) > COMMIT_MAX or not value.isprintable():
        raise ValueError(f"expected printable UTF-8 text of at most {COMMIT_MAX} characters")
    return value


RUN_ID_MAX = 200
"""The longest run id a recording may be given."""
_RUN_ID_REFUSED = re.compile(r"[\x00-\x20\x7f/\\#@]|^[.-]|^latest$")


def run_id_given(raw: str) -> str | None:
    """A run id given to a recording (``OTEL_REPLAY_RUN_ID``, ``run(run_id=...)``), or None
    for an empty one (an id is made). ValueError for one that would read as something else
    where runs are named (a path, a URL, ``DIR#RUN``, ``RUN@2``, ``latest``, an option) or
    could not be printed on one line."""
    value = raw.strip()
    if not value:
        return None
    if len(value) > RUN_ID_MAX:
        raise ValueError(f"a run id is at most {RUN_ID_MAX} characters, not {len(value)}")
    if not value.isprintable() or _RUN_ID_REFUSED.search(value):
        raise ValueError(
            "a run id is printable text with no space, '/', '\\', '#' or '@', not starting "
            "with '.' or '-', and not 'latest'"
        )
    return value


def _flag(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ValueError("expected true or false")


def _positive_int(raw: str) -> int:
    expected = "expected a whole number >= 1"
    value: int = _number(raw, int, expected)
    if value < 1:
        raise ValueError(expected)
    return value


_MAX_DAYS = 36500
"""The longest duration a setting may name, 100 years: longer ones (1e300) overflow the
nanosecond integers they become."""


def _seconds(raw: str) -> float:
    expected = "expected a number of seconds >= 0"
    value: float = _number(raw, float, expected)
    if not 0 <= value <= _MAX_DAYS * 86_400:
        raise ValueError(expected)
    return value


def _live_tools(raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("", "read"):
        raise ValueError("expected read (or nothing)")
    return value == "read"


def _names(raw: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(name.strip() for name in raw.split(",") if name.strip()))


def _ignore_rules(raw: str) -> IgnoreRules:
    # Loaded when the setting is read: a verb that reads none starts without the rules.
    from otel_replay._ignore import parse  # noqa: PLC0415

    return parse(raw)


def _share(raw: str) -> float:
    expected = "expected a share between 0 and 1"
    value: float = _number(raw, float, expected)
    if not 0 <= value <= 1:
        raise ValueError(expected)
    return value


def _days(raw: str) -> float:
    expected = f"expected a number of days >= 0 (at most {_MAX_DAYS})"
    value: float = _number(raw, float, expected)
    if not 0 <= value <= _MAX_DAYS:
        raise ValueError(expected)
    return value


@dataclass(frozen=True, slots=True)
class Setting:
    """One environment variable: its name, default (raw text), parser and meaning."""

    name: str
    default: str
    parse: Callable[[str], Any]
    doc: str


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "OTEL_REPLAY_STORE", "./.otel-replay", _location, "store location: a path or fsspec URL"
    ),
    Setting("OTEL_REPLAY_MODE", "record", _mode, "record, replay or off"),
    Setting("OTEL_REPLAY_RUN", "", _text, "run id (or path/URL of a source) to replay"),
    Setting("OTEL_REPLAY_RUN_ID", "", run_id_given, "run id to use when recording"),
    Setting(
        "OTEL_REPLAY_INLINE_LIMIT",
        "32768",
        _non_negative_int,
        "bodies up to this many bytes also travel inside the exported span; 0 turns it off",
    ),
    Setting(
        "OTEL_REPLAY_REDACT",
        "",
        _patterns,
        "extra comma-separated regexes whose matches are redacted from bodies and headers",
    ),
    Setting(
        "OTEL_REPLAY_COMMIT",
        "",
        commit_given,
        "commit to record as vcs.ref.head.revision; else CI variables, else git",
    ),
    Setting(
        "OTEL_REPLAY_FLUSH_TIMEOUT_MS",
        "10000",
        _non_negative_int,
        "longest the replay exporter waits for its writes (export, force_flush, shutdown, SIGTERM)",
    ),
    Setting(
        "OTEL_REPLAY_HANDLE_SIGTERM",
        "true",
        _flag,
        "the replay exporter persists what it holds on SIGTERM, then calls the previous handler",
    ),
    Setting(
        "OTEL_REPLAY_RETAIN_OK_DAYS",
        "7",
        _days,
        "days a run without errors is kept after its last activity, unless pinned",
    ),
    Setting(
        "OTEL_REPLAY_SAMPLE_OK",
        "1.0",
        _share,
        "share of runs that end without an error whose fixtures are kept (runs with an error, "
        "and runs that never ended, always are)",
    ),
    Setting(
        "OTEL_REPLAY_RETAIN_ERROR_DAYS",
        "30",
        _days,
        "days a run with an error is kept after its last activity, unless pinned",
    ),
    Setting(
        "OTEL_REPLAY_GC_GRACE_S",
        "3600",
        _seconds,
        "seconds gc leaves a file nothing references before deleting it (remote stores: from "
        "its condemnation, by the server's clock)",
    ),
    Setting(
        "OTEL_REPLAY_CACHE_DIR",
        "",
        _optional_location,
        "where the index of a remote (fsspec URL) store is kept; default ~/.cache/otel-replay",
    ),
    Setting(
        "OTEL_REPLAY_CLOCK",
        "recorded",
        _clock,
        "replay mode: recorded (the application's wall clock starts at the recorded run's "
        "start and ticks on) or live",
    ),
    Setting(
        "OTEL_REPLAY_SOURCE_MAX_BYTES",
        str(256 * 1024 * 1024),
        _positive_int,
        "most bytes a trace source (file or download) may hold, counted after gunzip too",
    ),
    Setting(
        "OTEL_REPLAY_WRITE_TOOLS",
        "",
        _names,
        "comma-separated names or globs of tools that have side effects (never run in "
        "replay); outweighs every word that a tool only reads",
    ),
    Setting(
        "OTEL_REPLAY_READ_TOOLS",
        "",
        _names,
        "comma-separated names or globs of framework tools that only read; a tool declared "
        "nowhere is a write and never runs live",
    ),
    Setting(
        "OTEL_REPLAY_IGNORE",
        "",
        _ignore_rules,
        "comma-separated HOST[:PORT][/PATH] globs of background traffic (SDK telemetry), neither "
        "recorded nor compared; added to the known telemetry endpoints (-defaults drops them)",
    ),
)
"""The settings a user sets, each for a reason docs/configuration.md gives."""

CLI_CHANNEL: tuple[Setting, ...] = (
    Setting(
        "OTEL_REPLAY_STRICT",
        "true",
        _flag,
        "replay mode: refuse unmatched requests and every socket (set by replay --no-strict)",
    ),
    Setting(
        "OTEL_REPLAY_TIMING",
        "fast",
        _timing,
        "replay mode: fast (no delays: streams at once, sleeps return at once) or recorded "
        "(stream chunks paced as recorded, sleeps kept; set by replay --timing)",
    ),
    Setting(
        "OTEL_REPLAY_REPORT",
        "",
        _text,
        "replay mode: file the replayed process appends its replay events to (set by the CLI)",
    ),
    Setting(
        "OTEL_REPLAY_LIVE_TOOLS",
        "",
        _live_tools,
        "replay mode: 'read' runs read tools live instead of serving their recorded results "
        "(set by replay --live-tools read); write tools never run",
    ),
    Setting(
        "OTEL_REPLAY_FORK",
        "",
        _text,
        "replay mode: file holding the fork's plan (set by replay --override, --inject, "
        "--state, --live-from, --allow-writes)",
    ),
)
"""Not settings: the ``replay`` verb's channel to the process it replays (its options, and
where to report), set by the verb, read by the replayed process; a user does not set them."""


@dataclass(frozen=True, slots=True)
class Settings:
    """The parsed settings; build it with :func:`load`."""

    store: str
    mode: Mode
    run: str | None
    run_id: str | None
    inline_limit: int
    redact: tuple[re.Pattern[bytes], ...]
    commit: str | None
    flush_timeout_ms: int
    handle_sigterm: bool
    retain_ok_days: float
    retain_error_days: float
    sample_ok: float
    cache_dir: str | None
    strict: bool
    timing: Timing
    clock: Clock
    report: str | None
    live_read_tools: bool
    fork: str | None
    write_tools: tuple[str, ...]
    read_tools: tuple[str, ...]
    ignore: IgnoreRules


_BY_NAME = {setting.name: setting for setting in (*SETTINGS, *CLI_CHANNEL)}


def read(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """Parse one setting from ``environ`` (default ``os.environ``).

    A variable set to nothing (or blanks) reads as unset: its default. Raises ConfigError
    naming the variable when its value does not parse.
    """
    setting = _BY_NAME[name]
    raw = (os.environ if environ is None else environ).get(name, "")
    if not raw.strip():
        # OpenTelemetry's rule for its variables: an empty one is as if unset. A deployment
        # template that renders OTEL_REPLAY_STORE= must not put the store in the working dir.
        raw = setting.default
    try:
        return setting.parse(raw)
    except (ValueError, re.error) as exc:
        shown = raw if len(raw) <= 200 else raw[:199] + "…"  # the error stays one short line
        raise ConfigError(f"{name}={shown!r} is invalid: {exc}") from None


_turned_off: set[str] = set()


def turn_off(error: ConfigError) -> None:
    """Say, once per process and in one log line naming the variable, that otel-replay is off
    because of a bad setting. For code that runs inside OpenTelemetry's start-up (the
    instrumentor, the ``replay`` exporter): it must then do nothing, so that the rest of
    OpenTelemetry (other instrumentations, the user's own exporters) runs untouched."""
    message = str(error)
    if message not in _turned_off:
        _turned_off.add(message)
        import logging  # noqa: PLC0415 - a bad setting is rare: the CLI starts without logging

        logging.getLogger("otel_replay").error(
            "otel-replay: %s; otel-replay is off in this process", message
        )


def replay_requested(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``OTEL_REPLAY_MODE`` asks for replay (read leniently: a process asked to
    replay must never run live because another setting is bad)."""
    raw = (os.environ if environ is None else environ).get("OTEL_REPLAY_MODE", "")
    return raw.strip().lower() == "replay"


def load(environ: Mapping[str, str] | None = None) -> Settings:
    """Read every setting from ``environ`` (default ``os.environ``).

    Raises ConfigError naming the variable when a value does not parse.
    """
    values = {name: read(name, environ) for name in _BY_NAME}
    return Settings(
        store=values["OTEL_REPLAY_STORE"],
        mode=values["OTEL_REPLAY_MODE"],
        run=values["OTEL_REPLAY_RUN"],
        run_id=values["OTEL_REPLAY_RUN_ID"],
        inline_limit=values["OTEL_REPLAY_INLINE_LIMIT"],
        redact=values["OTEL_REPLAY_REDACT"],
        commit=values["OTEL_REPLAY_COMMIT"],
        flush_timeout_ms=values["OTEL_REPLAY_FLUSH_TIMEOUT_MS"],
        handle_sigterm=values["OTEL_REPLAY_HANDLE_SIGTERM"],
        retain_ok_days=values["OTEL_REPLAY_RETAIN_OK_DAYS"],
        retain_error_days=values["OTEL_REPLAY_RETAIN_ERROR_DAYS"],
        sample_ok=values["OTEL_REPLAY_SAMPLE_OK"],
        cache_dir=values["OTEL_REPLAY_CACHE_DIR"],
        strict=values["OTEL_REPLAY_STRICT"],
        timing=values["OTEL_REPLAY_TIMING"],
        clock=values["OTEL_REPLAY_CLOCK"],
        report=values["OTEL_REPLAY_REPORT"],
        live_read_tools=values["OTEL_REPLAY_LIVE_TOOLS"],
        fork=values["OTEL_REPLAY_FORK"],
        write_tools=values["OTEL_REPLAY_WRITE_TOOLS"],
        read_tools=values["OTEL_REPLAY_READ_TOOLS"],
        ignore=values["OTEL_REPLAY_IGNORE"],
    )
