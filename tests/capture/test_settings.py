"""The settings table."""

from __future__ import annotations

import pytest

import otel_replay
from otel_replay import settings
from otel_replay.errors import ConfigError


def test_defaults() -> None:
    loaded = settings.load({})
    assert loaded.store == "./.otel-replay"
    assert loaded.mode == "record"
    assert loaded.run is None and loaded.run_id is None
    assert loaded.inline_limit == 32768
    assert loaded.redact == ()


def test_values_parse() -> None:
    loaded = settings.load(
        {
            "OTEL_REPLAY_MODE": " Replay ",
            "OTEL_REPLAY_RUN_ID": "r_1",
            "OTEL_REPLAY_INLINE_LIMIT": "0",
            "OTEL_REPLAY_REDACT": r"acct-\d+, ssn=\d{9}",
        }
    )
    assert loaded.mode == "replay"
    assert loaded.run_id == "r_1"
    assert loaded.inline_limit == 0
    assert [p.pattern for p in loaded.redact] == [rb"acct-\d+", rb"ssn=\d{9}"]


def test_a_variable_set_to_nothing_reads_as_unset() -> None:
    """OpenTelemetry's rule for its variables: empty is unset (an ``OTEL_REPLAY_STORE=`` once
    put the store in the working directory, ``OTEL_REPLAY_INLINE_LIMIT=`` turned otel-replay
    off)."""
    every = (*settings.SETTINGS, *settings.CLI_CHANNEL)
    for blank in ("", "  "):
        assert settings.load({s.name: blank for s in every}) == settings.load({})
    assert settings.read("OTEL_REPLAY_STORE", {"OTEL_REPLAY_STORE": ""}) == "./.otel-replay"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("OTEL_REPLAY_MODE", "sometimes"),
        ("OTEL_REPLAY_INLINE_LIMIT", "-1"),
        ("OTEL_REPLAY_INLINE_LIMIT", "lots"),
        ("OTEL_REPLAY_REDACT", "(unclosed"),
        # Finite, but past what a timer or a count of nanoseconds holds.
        ("OTEL_REPLAY_RETAIN_OK_DAYS", "1e300"),
        ("OTEL_REPLAY_RETAIN_ERROR_DAYS", "1e300"),
    ],
)
def test_bad_values_name_the_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name) as info:
        settings.load({name: value})
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("OTEL_REPLAY_FLUSH_TIMEOUT_MS", "1.5s", "expected a whole number >= 0"),
        ("OTEL_REPLAY_INLINE_LIMIT", "32k", "expected a whole number >= 0"),
        ("OTEL_REPLAY_SOURCE_MAX_BYTES", "1e9", "expected a whole number >= 1"),
        ("OTEL_REPLAY_GC_GRACE_S", "an hour", "expected a number of seconds >= 0"),
        ("OTEL_REPLAY_SAMPLE_OK", "10%", "expected a share between 0 and 1"),
        ("OTEL_REPLAY_RETAIN_OK_DAYS", "forever", "expected a number of days >= 0"),
    ],
)
def test_a_number_that_does_not_parse_says_what_is_expected(
    name: str, value: str, expected: str
) -> None:
    """Not Python's "invalid literal for int() with base 10": the line a platform engineer
    reads says what the variable takes."""
    with pytest.raises(ConfigError) as info:
        settings.load({name: value})
    assert str(info.value).startswith(f"{name}={value!r} is invalid: {expected}")
    assert "literal" not in str(info.value) and "convert" not in str(info.value)


@pytest.mark.parametrize(
    "run_id",
    ["../../escape", "ok/../../x", "phoenix://x:1", "latest", "dir#r_1", "r_1@2", "-r",
     ".hidden", "a\tb", "a\nb", "a\x00b", "a b", "x" * 201],
)  # fmt: skip
def test_a_run_id_that_reads_as_something_else_is_refused(run_id: str) -> None:
    with pytest.raises(ConfigError, match=r"^OTEL_REPLAY_RUN_ID=.* is invalid: a run id is"):
        settings.load({"OTEL_REPLAY_RUN_ID": run_id})
    with pytest.raises(ConfigError, match=r"^run\(run_id=.*\) is invalid: a run id is"):
        otel_replay.run("agent", run_id=run_id)


@pytest.mark.parametrize(
    "run_id", ["r_1", "ci-1234.2", "2026-11-29T10:00:00", "répéter", "x" * 200]
)
def test_a_run_id_that_names_only_a_run_is_taken(run_id: str) -> None:
    assert settings.load({"OTEL_REPLAY_RUN_ID": f" {run_id} "}).run_id == run_id
    assert otel_replay.run("agent", run_id=run_id).state.run_id == run_id


def test_every_setting_is_documented() -> None:
    every = (*settings.SETTINGS, *settings.CLI_CHANNEL)
    names = [s.name for s in every]
    assert len(names) == len(set(names))
    assert all(s.name.startswith("OTEL_REPLAY_") and s.doc for s in every)


@pytest.mark.parametrize("pattern", ["x*", "a|", "(?:)", r"\b", ".*?", "^", "[a-z]*"])
def test_a_redaction_pattern_that_matches_empty_text_is_refused(pattern: str) -> None:
    """``x*`` once passed, and redacted between every byte of every body: ``{"a": 1}`` was
    stored as ``REDACTED{REDACTED"REDACTEDaREDACTED…``, no longer JSON, never replayed."""
    given = r"acct-\d+," + pattern
    with pytest.raises(ConfigError) as info:
        settings.load({"OTEL_REPLAY_REDACT": given})
    assert (
        str(info.value)
        == f"OTEL_REPLAY_REDACT={given!r} is invalid: {pattern!r} matches empty text"
    )


@pytest.mark.parametrize(
    "commit", ["\udcff\udcfe", "abc\udcff", "abc\ndef", "a\x1b[2Jb", "f" * 201]
)
def test_a_commit_a_store_cannot_keep_is_refused(commit: str) -> None:
    """Bytes that are not UTF-8 (``\\udcff`` as Python reads them from the environment) once
    passed, and the store could not write the run: every step of it was lost."""
    with pytest.raises(ConfigError, match=r"^OTEL_REPLAY_COMMIT=.* is invalid: expected print"):
        settings.load({"OTEL_REPLAY_COMMIT": commit})


@pytest.mark.parametrize("commit", ["0f3c9a1d" * 5, "v1.2.3-dirty", "release 7", "f" * 200])
def test_a_commit_is_taken_as_given(commit: str) -> None:
    assert settings.load({"OTEL_REPLAY_COMMIT": f" {commit}\n"}).commit == commit
