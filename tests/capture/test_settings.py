"""The settings table."""

from __future__ import annotations

import pytest

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


def test_every_setting_is_documented() -> None:
    every = (*settings.SETTINGS, *settings.CLI_CHANNEL)
    names = [s.name for s in every]
    assert len(names) == len(set(names))
    assert all(s.name.startswith("OTEL_REPLAY_") and s.doc for s in every)
