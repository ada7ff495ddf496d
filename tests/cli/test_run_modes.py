"""Run modes in ``runs``, ``show`` and ``latest``: recordings, replays and forks.

The store holds the real recordings of ``_recording``; a replay and a fork of the support run
are added as ``otel-replay replay`` records them (the same steps, under a run of their own whose
facts say the mode and the run they re-executed). ``tests/replay/test_replay_modes.py`` makes a
replay through the real CLI.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

from click.testing import Result

from otel_replay.step import RunFacts
from otel_replay.store import Store
from tests.cli._checks import assert_bad_input
from tests.cli._recording import CLAUDE, ERRORS, SUPPORT, Recorded

Invoke = Callable[..., Result]

REPLAY = "r_20261121T100000_00000001"
FORK = "r_20261121T100500_00000002"


def _add_rerun(store: Path, recorded: Recorded, run_id: str, mode: str, start_ns: int) -> None:
    """The support run's steps again, as run ``run_id`` in ``mode``, started at ``start_ns``
    (after every recording), naming the support run as its parent."""
    facts = RunFacts(run_id, mode=mode, seed=7, start_ns=start_ns, parent_run_id=SUPPORT)
    offset = start_ns - recorded.steps[SUPPORT][0].start_ns
    steps = [
        dataclasses.replace(
            step,
            run_id=run_id,
            run=facts,
            start_ns=step.start_ns + offset,
            end_ns=step.end_ns + offset,
        )
        for step in recorded.steps[SUPPORT]
    ]
    with Store.open(store, create=False) as opened:
        opened.put(steps)


def _newest_ns(recorded: Recorded) -> int:
    return max(step.end_ns for steps in recorded.steps.values() for step in steps)


def _with_reruns(store: Path, recorded: Recorded) -> Path:
    _add_rerun(store, recorded, REPLAY, "replay", _newest_ns(recorded) + 10**9)
    _add_rerun(store, recorded, FORK, "fork", _newest_ns(recorded) + 2 * 10**9)
    return store


def _table_ids(stdout: str) -> list[str]:
    return [line.split()[0] for line in stdout.splitlines() if line.startswith("r_")]


def test_runs_says_each_runs_mode_and_parent(
    invoke: Invoke, store: Path, recorded: Recorded
) -> None:
    _with_reruns(store, recorded)
    result = invoke("runs", "--store", str(store))
    assert result.exit_code == 0, result.output
    rows = {
        line.removeprefix("└ ").split()[0]: line
        for line in result.stdout.splitlines()
        if line.startswith(("r_", "└ r_"))
    }
    # Newest first, a fork drawn under the run it forked; a replay stands on its own.
    assert list(rows) == [REPLAY, CLAUDE, ERRORS, SUPPORT, FORK]
    assert rows[FORK].startswith("└ ")
    assert f"   fork of {SUPPORT}   " in rows[FORK]
    assert f"   replay of {SUPPORT}   " in rows[REPLAY]
    assert "   record   " in rows[SUPPORT]

    listed = json.loads(invoke("runs", "--json", "--store", str(store)).stdout)
    modes = {run["run_id"]: (run["mode"], run["parent_run_id"]) for run in listed}
    assert modes == {
        FORK: ("fork", SUPPORT),
        REPLAY: ("replay", SUPPORT),
        CLAUDE: ("record", None),
        ERRORS: ("record", None),
        SUPPORT: ("record", None),
    }


def test_runs_filters_by_mode(invoke: Invoke, store: Path, recorded: Recorded) -> None:
    _with_reruns(store, recorded)
    replays = invoke("runs", "--mode", "replay", "--store", str(store))
    assert _table_ids(replays.stdout) == [REPLAY]
    assert replays.stdout.rstrip().endswith(f"1 replay run in {store}")
    recordings = invoke("runs", "--mode", "record", "--json", "--store", str(store))
    assert [run["run_id"] for run in json.loads(recordings.stdout)] == [CLAUDE, ERRORS, SUPPORT]
    assert _table_ids(invoke("runs", "--mode", "fork", "--store", str(store)).stdout) == [FORK]
    limited = invoke("runs", "--mode", "record", "-n", "1", "--store", str(store))
    assert _table_ids(limited.stdout) == [CLAUDE] and "1 of 3 record runs" in limited.stdout
    bad = invoke("runs", "--mode", "live", "--store", str(store))
    assert_bad_input(bad, "'live'", "--mode")


def test_no_run_of_a_mode(invoke: Invoke, store: Path) -> None:
    result = invoke("runs", "--mode", "fork", "--store", str(store))
    assert result.exit_code == 0
    assert result.stdout == f"No fork runs in the store at {store} yet.\n"


def test_latest_is_the_latest_recording(invoke: Invoke, store: Path, recorded: Recorded) -> None:
    _with_reruns(store, recorded)
    shown = json.loads(invoke("show", "latest", "--json", "--store", str(store)).stdout)
    assert shown["run"]["run_id"] == CLAUDE  # the replay and the fork are newer
    assert (shown["run"]["mode"], shown["run"]["parent_run_id"]) == ("record", None)


def test_show_names_the_run_a_replay_replays(
    invoke: Invoke, store: Path, recorded: Recorded
) -> None:
    _with_reruns(store, recorded)
    result = invoke("show", REPLAY, "--store", str(store))
    assert result.exit_code == 0, result.output
    header = result.stdout.splitlines()[0]
    assert header.startswith(f"run {REPLAY}  ok  replay of {SUPPORT}  ")
    assert invoke("show", SUPPORT, "--store", str(store)).stdout.startswith(
        f"run {SUPPORT}  ok  record  "
    )
    document = json.loads(invoke("show", FORK, "--json", "--store", str(store)).stdout)
    assert (document["run"]["mode"], document["run"]["parent_run_id"]) == ("fork", SUPPORT)
    assert len(document["steps"]) == 9


def test_the_parent_survives_an_index_rebuild(
    invoke: Invoke, store: Path, recorded: Recorded
) -> None:
    """The parent is in the run's records, not only in the index (a cache)."""
    _with_reruns(store, recorded)
    assert invoke("verify", "--rebuild-index", "--store", str(store)).exit_code == 0
    with Store.open(store, create=False) as opened:
        run = opened.run(REPLAY)
    assert (run.mode, run.parent_run_id) == ("replay", SUPPORT)


def test_latest_with_only_replays_says_so(
    invoke: Invoke, tmp_path: Path, recorded: Recorded
) -> None:
    store = tmp_path / "replays-only"
    Store.open(store).close()
    _add_rerun(store, recorded, REPLAY, "replay", _newest_ns(recorded))
    line = assert_bad_input(invoke("show", "latest", "--store", str(store)), str(store))
    assert line.endswith("has no recordings yet, only replays or forks (name one by its id)")
    assert invoke("show", REPLAY, "--store", str(store)).exit_code == 0
