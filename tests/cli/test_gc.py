"""``otel-replay gc`` and ``pin``: expired runs are listed, then removed; pinned runs stay."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from click.testing import Result

from tests.cli._recording import CLAUDE, ERRORS, SUPPORT

Invoke = Callable[..., Result]
EXPIRE_OK_RUNS = {"OTEL_REPLAY_RETAIN_OK_DAYS": "0"}


def _run_ids(invoke: Invoke, store: Path) -> list[str]:
    return [
        run["run_id"] for run in json.loads(invoke("runs", "--json", "--store", str(store)).stdout)
    ]


def _listed(stdout: str) -> list[str]:
    return [line.split()[0] for line in stdout.splitlines() if line.startswith("r_")]


def test_nothing_has_expired_under_the_default_policy(invoke: Invoke, store: Path) -> None:
    result = invoke("gc", "--store", str(store))
    assert result.exit_code == 0
    assert result.stdout.startswith(
        "No expired runs (retention: ok runs 7 days, error runs 30 days, pinned forever)."
    )
    assert "3 runs kept (0 pinned)" in result.stdout
    assert _run_ids(invoke, store) == [CLAUDE, ERRORS, SUPPORT]


def test_dry_run_lists_then_gc_removes_and_pinned_runs_stay(invoke: Invoke, store: Path) -> None:
    pinned = invoke("pin", "r_20261121T0900", "--store", str(store))
    assert pinned.stdout == f"Pinned {SUPPORT}: gc keeps it until it is unpinned.\n"
    files = sorted(p.relative_to(store) for p in store.rglob("*.pack"))

    planned = invoke("gc", "--dry-run", "--store", str(store), env=EXPIRE_OK_RUNS)
    assert planned.exit_code == 0, planned.output
    assert planned.stdout.startswith("Would remove 1 expired run (retention: ok runs 0 days")
    assert _listed(planned.stdout) == [CLAUDE]
    assert "Would free " in planned.stdout and "Nothing was changed (dry run)." in planned.stdout
    assert "2 runs kept (1 pinned)" in planned.stdout
    assert sorted(p.relative_to(store) for p in store.rglob("*.pack")) == files
    assert _run_ids(invoke, store) == [CLAUDE, ERRORS, SUPPORT]

    done = invoke("gc", "--store", str(store), env=EXPIRE_OK_RUNS)
    assert done.exit_code == 0
    assert done.stdout.startswith("Removed 1 expired run")
    assert _listed(done.stdout) == [CLAUDE] and "Freed " in done.stdout
    assert _run_ids(invoke, store) == [ERRORS, SUPPORT]  # the error run keeps 30 days
    assert not (store / "packs" / CLAUDE).exists()
    assert invoke("verify", "--store", str(store)).exit_code == 0


def test_json_report(invoke: Invoke, store: Path) -> None:
    planned = json.loads(
        invoke("gc", "--dry-run", "--json", "--store", str(store), env=EXPIRE_OK_RUNS).stdout
    )
    assert planned["dry_run"] is True and set(planned["runs_removed"]) == {CLAUDE, SUPPORT}
    assert planned["runs_kept"] == 1 and planned["bytes_freed"] > 0
    assert planned["blobs_removed"] > 0 and planned["files_removed"] >= 2  # their records
    done = json.loads(invoke("gc", "--json", "--store", str(store), env=EXPIRE_OK_RUNS).stdout)
    assert done["dry_run"] is False
    for key in ("runs_removed", "blobs_removed", "files_removed"):
        assert done[key] == planned[key], key
    # The dry run's bytes are a lower bound: what repacking saves is known once it ran.
    assert done["bytes_freed"] >= planned["bytes_freed"]
    assert _run_ids(invoke, store) == [ERRORS]


def test_unpin_puts_a_run_back_under_the_policy(invoke: Invoke, store: Path) -> None:
    invoke("pin", SUPPORT, "--store", str(store))
    result = invoke("pin", SUPPORT, "--unpin", "--store", str(store))
    assert result.stdout.startswith(f"Unpinned {SUPPORT}: it expires 20")
    assert json.loads(invoke("runs", "--json", "--store", str(store)).stdout)[-1]["pinned"] is False
