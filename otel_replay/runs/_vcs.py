"""Which code is running: the commit and whether the work tree was dirty."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from otel_replay import settings

__all__ = ["CodeVersion", "code_version"]

# CI systems' own variables, checked in order after OTEL_REPLAY_COMMIT; the first that is set
# wins over asking git.
_COMMIT_VARIABLES = (
    "GITHUB_SHA",
    "CI_COMMIT_SHA",
    "BUILDKITE_COMMIT",
    "CIRCLE_SHA1",
    "GIT_COMMIT",
    "SOURCE_VERSION",
)


@dataclass(frozen=True, slots=True)
class CodeVersion:
    """The running code's revision (None when unknown) and dirtiness (None when unknown)."""

    revision: str | None
    dirty: bool | None


@cache
def code_version() -> CodeVersion:
    """Read once per process: ``OTEL_REPLAY_COMMIT``, else a CI system's commit variable, else
    git in the running script's directory or the working directory. Never raises; what cannot
    be known stays None."""
    configured: str | None = settings.read("OTEL_REPLAY_COMMIT")
    if configured:
        return CodeVersion(configured, None)
    for name in _COMMIT_VARIABLES:
        try:
            value = settings.commit_given(os.environ.get(name, ""))
        except ValueError:  # not text a store can keep (bytes that are not UTF-8): not it
            continue
        if value:
            return CodeVersion(value, None)
    for where in _candidate_dirs():
        revision = _git(where, "rev-parse", "HEAD")
        if revision is not None:
            status = _git(where, "status", "--porcelain", "--untracked-files=no")
            return CodeVersion(revision, None if status is None else bool(status))
    return CodeVersion(None, None)


def _candidate_dirs() -> list[Path]:
    """The running script's directory (unless the script is an installed tool's: ``python -m
    pytest``, a console script of the environment), then the working directory."""
    dirs = []
    script = sys.argv[0] if sys.argv and sys.argv[0] else ""
    if script and Path(script).exists() and not _installed(Path(script).resolve()):
        dirs.append(Path(script).resolve().parent)
    cwd = Path.cwd()
    if cwd not in dirs:
        dirs.append(cwd)
    return dirs


def _installed(script: Path) -> bool:
    """Whether ``script`` belongs to the Python environment (a package's module, a console
    script in its ``bin``), not to the code being run."""
    if any(part in ("site-packages", "dist-packages") for part in script.parts):
        return True
    prefixes = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    return any(script.is_relative_to(prefix) for prefix in prefixes)


def _git(where: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(where), *args],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None
