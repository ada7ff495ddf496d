"""The urllib3 and aiohttp seams wrap a library when it is imported, not before: a process
that never uses it does not pay for importing it, and an undo before the import keeps the
wrapping from ever happening."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from otel_replay.capture.transports import wrap_on_import


@pytest.fixture
def library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The name of an installed module nobody has imported yet."""
    name = f"late_library_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_the_wrapping_waits_for_the_import_and_is_undone(library: str) -> None:
    done: list[str] = []

    def wrap(module: ModuleType) -> Callable[[], None]:
        done.append(f"wrapped {module.VALUE}")
        return lambda: done.append("unwrapped")

    undo = wrap_on_import(library, wrap)
    assert undo is not None and done == [] and library not in sys.modules
    importlib.import_module(library)
    assert done == ["wrapped 1"]
    undo()
    undo()  # twice is harmless
    assert done == ["wrapped 1", "unwrapped"]


def test_undone_before_the_import_it_never_wraps(library: str) -> None:
    done: list[ModuleType] = []
    undo = wrap_on_import(library, done.append)
    assert undo is not None
    undo()
    importlib.import_module(library)
    assert done == []


def test_a_module_imported_already_is_wrapped_at_once(library: str) -> None:
    module = importlib.import_module(library)
    done: list[ModuleType] = []
    wrap_on_import(library, done.append)
    assert done == [module]


def test_a_library_not_installed_is_not_waited_for() -> None:
    assert wrap_on_import("no_such_library_anywhere.sub", lambda module: None) is None
