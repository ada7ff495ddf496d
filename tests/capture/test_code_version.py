"""Where a run's commit is looked for: the running script's directory, unless the script is
the environment's own (``python -m pytest``, a console script), then the working directory."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from otel_replay.runs._vcs import _candidate_dirs


def test_an_installed_tools_script_is_not_where_the_commit_is_looked_for(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Once, a bundle recorded under `python -m pytest` in a directory with no git took the
    # commit of the repository pytest happened to be installed in.
    monkeypatch.chdir(tmp_path)
    main = Path(pytest.__file__).with_name("__main__.py")
    console = Path(sys.prefix) / "bin" / "pytest"
    for script in (main, console):
        monkeypatch.setattr(sys, "argv", [str(script)])
        assert _candidate_dirs() == [tmp_path.resolve()]


def test_the_applications_script_is_looked_at_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / "agent.py").write_text("print('hi')\n")
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(sys, "argv", [str(project / "agent.py")])
    assert _candidate_dirs() == [project.resolve(), elsewhere.resolve()]
