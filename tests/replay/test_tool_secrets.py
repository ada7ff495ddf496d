"""A secret a program sends under a credential key is redacted there and everywhere it recurs:
a tool's ``password`` argument quoted back by the tool's own error reaches neither the store
nor the exported spans."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_replay
from otel_replay.redact import REDACTED, Redactor
from tests.export._support import Pipeline, stored_bytes

PASSWORD = "pw-TOOLARG-7f3e9a1c"


class LoginRefused(Exception):
    """The tool's own error, quoting what it was given."""


@otel_replay.tool(effect="write")
def log_in(user: str, password: str) -> None:
    raise LoginRefused(f"login refused for {user} with password {password}")


def test_a_credential_argument_quoted_by_the_tools_error_is_redacted(tmp_path: Path) -> None:
    memory = InMemorySpanExporter()
    with Pipeline(tmp_path / "store") as pipeline:
        pipeline.provider.add_span_processor(SimpleSpanProcessor(memory))
        with pytest.raises(LoginRefused):
            log_in("ann", PASSWORD)
    spans = memory.get_finished_spans()
    exported = repr([(s.attributes, s.events, s.status.description) for s in spans])
    assert "login refused for ann with password" in exported  # the error is recorded...
    assert PASSWORD not in exported  # ...without the password it quoted
    assert f"password {REDACTED}" in exported
    assert PASSWORD.encode() not in stored_bytes(tmp_path / "store")


def test_a_credential_keys_value_is_scrubbed_from_what_follows() -> None:
    redactor = Redactor()
    sent = redactor.body(b'{"user":"ann","client_secret":"cs-BODY-0a1b2c3d"}')
    assert sent == b'{"user":"ann","client_secret":"REDACTED"}'
    echoed = redactor.body(b'{"error":"bad secret cs-BODY-0a1b2c3d","user":"ann"}')
    assert echoed == b'{"error":"bad secret REDACTED","user":"ann"}'
    short = redactor.body(b'{"password":"pw1"}')  # too short to learn: ordinary text stays
    assert short == b'{"password":"REDACTED"}'
    assert redactor.body(b'{"note":"pw1 is short"}') == b'{"note":"pw1 is short"}'
    word = redactor.body(b'{"auth":"optional"}')  # a word, not a secret: ordinary text stays
    assert word == b'{"auth":"REDACTED"}'
    assert redactor.body(b'{"note":"optional"}') == b'{"note":"optional"}'
