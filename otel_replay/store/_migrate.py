"""Converting a format-version-2 store to version 3, in place, losing nothing."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from otel_replay.errors import StoreError, StoreFormatError, StoreNotFoundError
from otel_replay.step import RunEnd, RunFacts
from otel_replay.store._format import FORMAT_FILE, read_format_version
from otel_replay.store._v2 import read_listing, read_v2
from otel_replay.store.store import Store

__all__ = ["Migration", "migrate"]


@dataclass(frozen=True, slots=True)
class Migration:
    """What ``migrate`` did: the runs and steps carried over, where the old store is kept,
    the steps of the old store that could not be carried (``lost``; the old store's index
    lists them), and one line per thing that could not be read or carried. ``resumed``: a
    migration cut off between its two renames was finished (nothing else was done)."""

    runs: int
    steps: int
    backup: Path
    problems: list[str] = field(default_factory=list)
    lost: int = 0
    resumed: bool = False


def _siblings(root: Path) -> tuple[Path, Path]:
    return root.with_name(root.name + ".v3-new"), root.with_name(root.name + ".v2-backup")


def migrate(root: Path) -> Migration:
    """Convert the version-2 store at ``root`` (see the module docstring).

    Raises StoreNotFoundError when there is no store, StoreFormatError when it is not
    version 2 (a version-3 store needs nothing), StoreError when the backup name is taken.
    """
    new, backup = _siblings(root)
    if not root.exists() and new.is_dir() and backup.is_dir():
        new.rename(root)  # cut off between the two renames: finish the swap
        return Migration(0, 0, backup, resumed=True)
    where = root / FORMAT_FILE
    try:
        version = read_format_version(where.read_bytes(), str(where))
    except FileNotFoundError:
        raise StoreNotFoundError(f"no otel-replay store at {root}") from None
    if version != 2:
        raise StoreFormatError(f"{where} is format version {version}; migrate converts version 2")
    if backup.exists():
        raise StoreError(f"{backup} exists already: move it away, then migrate again")
    if new.exists():
        shutil.rmtree(new)  # an earlier attempt, cut off before the swap: it is rewritten
    runs = steps = lost = 0
    listing = read_listing(root)
    problems = (
        []
        if listing.problem is None
        else [f"{listing.problem}: steps lost with a whole pack cannot be named"]
    )
    with Store.open(new) as store:
        for run in read_v2(root, listing):
            problems.extend(run.problems)
            lost += run.lost
            if not (run.steps or run.spans):
                continue  # nothing of it could be read: named in its problems
            facts = run.steps[0].run if run.steps and run.steps[0].run else RunFacts(run.run_id)
            store.put(run.steps, run.spans, runs=[facts])
            ends = [s.get("end_ns") for s in run.spans] + [s.end_ns for s in run.steps]
            store.end_run(
                RunEnd(run.run_id, max((e for e in ends if isinstance(e, int)), default=0))
            )
            store.flush()
            if run.pinned:
                store.pin(run.run_id)
            runs += 1
            steps += len(run.steps)
    root.rename(backup)
    new.rename(root)
    return Migration(runs, steps, backup, problems, lost)
