"""The public API is exactly what ``otel_replay.__all__`` says, and importing it is cheap."""

from __future__ import annotations

import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

import otel_replay


def test_every_exported_name_resolves_and_is_documented() -> None:
    for name in otel_replay.__all__:
        value = getattr(otel_replay, name)
        if name != "__version__":
            assert value.__doc__, f"{name} has no docstring"


def test_nothing_public_is_missing_from_all() -> None:
    public = {
        name
        for name, value in vars(otel_replay).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name not in ("annotations", "importlib", "TYPE_CHECKING", "Any")
    }
    assert public <= set(otel_replay.__all__)


@pytest.mark.subprocess
def test_import_does_not_load_the_sdk_or_the_clients() -> None:
    code = (
        "import sys, otel_replay; "
        "print(sorted(m for m in ('opentelemetry.sdk', 'httpx', 'httpx2', 'orjson') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        otel_replay.no_such_thing  # type: ignore[attr-defined]  # noqa: B018


def test_the_docs_document_every_setting_and_public_name() -> None:
    from otel_replay import settings

    docs = Path(__file__).resolve().parent.parent / "docs"
    table = (docs / "configuration.md").read_text()
    documented = set(re.findall(r"^\| `(OTEL_REPLAY_[A-Z_]+)` \|", table, re.MULTILINE))
    assert documented == {s.name for s in settings.SETTINGS}
    api = (docs / "api.md").read_text()
    named = set(re.findall(r"^\| `([A-Za-z_0-9]+)[(`]", api, re.MULTILINE))
    assert named == set(otel_replay.__all__) - {"__version__"}
