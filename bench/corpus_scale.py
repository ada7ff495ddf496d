"""A corpus of golden runs on two cores: 200 bundles of 10 to 30 steps under ``pytest -n 2``
against ``-n 1`` (pytest-xdist), and under ``otel-replay replay --all -j 2`` against ``-j 1``.

The bundles: runs of ``_corpus_agent`` of 10, 15, 20, 25 and 30 steps (a recorded value, the
number of questions, then one Chat Completions call per question), really recorded against the
stand-in once, then copied in turn to 200 bundles with run ids of their own (``_bundles``).

* pytest: one test per bundle (``@pytest.mark.otel_replay(BUNDLE)``, parametrized), which runs
  the agent in-process against its bundle and asserts ``replay_result.identical``; the
  session's wall time, start-up included, with only the otel-replay and xdist plugins loaded.
* ``replay --all DIR -- python bench/_corpus_agent.py``: each bundle replayed by a program
  of its own, in strict mode (namespaces and the seccomp filter, where the system allows);
  the command's wall time. ``--cli-bundles`` replays the first N bundles only (a full pass
  at -j 1 takes minutes).

An untimed pass first runs one test and replays one bundle with bytecode writing on, so no
timed process compiles the package from source (as one installed from a wheel never does; a
``PYTHONDONTWRITEBYTECODE`` environment would otherwise have every worker compile it).
Rounds alternate the variants, so drift in the machine's load touches each alike; printed are
each variant's median wall time (and its best, which others' work on the machine can only
lengthen), the CPU time of the command and all it started (a machine
busy with other work slows the wall time, and leaves no second core to gain), the speed-up
of 2 workers over 1, and for pytest the most a second worker can give: the session's
start-up (``-n 1`` selecting no test) does not shrink with it; and pytest's CPU: the start-up,
a marked test's (``-n 1`` beyond its start-up, per test) and a second worker's own.

Target: at least 1.7x faster with 2 workers than with 1, on a machine with 2 idle cores.

    python bench/corpus_scale.py [--bundles 200] [--cli-bundles 200] [--rounds 3] [--folder DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from _bundles import copies, record

TARGET_SPEEDUP = 1.7
BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
LENGTHS = {f"s{steps}": steps - 1 for steps in (10, 15, 20, 25, 30)}
CLI = str(Path(sys.executable).with_name("otel-replay"))

TESTS = """
import httpx
import pytest

from _corpus_agent import DEAD, converse, turns

BUNDLES = {bundles!r}
CLIENT = httpx.Client(base_url=DEAD)

@pytest.mark.parametrize(
    "bundle", [pytest.param(b, marks=pytest.mark.otel_replay(b), id=b[-12:]) for b in BUNDLES]
)
def test_bundle(bundle, replay_result):
    converse(CLIENT, turns())
    assert replay_result.identical, replay_result.first_divergence
"""


_NO_AUTOLOAD = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
"""Only the otel-replay and xdist plugins, whatever else the environment has installed."""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    path = [str(BENCH), str(ROOT), env.get("PYTHONPATH", "")]
    return env | {"PYTHONPATH": os.pathsep.join(p for p in path if p)}


@dataclass(frozen=True)
class Timing:
    """A command's wall seconds, and the CPU seconds of it and of all it started."""

    wall: float
    cpu: float


def _timed(command: list[str], env: dict[str, str]) -> Timing:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 5):  # 5: pytest selected no test (the start-up pass)
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-3000:]}{done.stderr}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return Timing(elapsed, cpu)


def pytest_session(folder: Path, workers: int, *, select: str = "") -> Timing:
    """``pytest -n workers`` over the corpus (``select``: its ``-k``; a test name that is
    none leaves the start-up: the session, the workers, the collection)."""
    env = _env() | _NO_AUTOLOAD
    plugins = ["-p", "xdist.plugin", "-p", "otel_replay.testing.pytest_plugin"]
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugins]
    chosen = ["-k", select] if select else []
    return _timed([*command, "-n", str(workers), *chosen, str(folder / "tests")], env)


def replay_all(folder: Path, jobs: int) -> Timing:
    """Seconds of ``replay --all -j jobs`` over the CLI's corpus."""
    store = folder / f"store-j{jobs}"
    shutil.rmtree(store, ignore_errors=True)  # each pass records its replays afresh
    agent = [sys.executable, str(BENCH / "_corpus_agent.py")]
    command = [CLI, "replay", "--store", str(store), "--all", str(folder / "cli"), "-j", str(jobs)]
    return _timed([*command, "--", *agent], _env())


def warm_up(folder: Path) -> None:
    """One test under pytest and one bundle under ``replay --all``, untimed, with bytecode
    writing on: every module a timed process imports is then read compiled."""
    env = {k: v for k, v in _env().items() if k != "PYTHONDONTWRITEBYTECODE"}
    first = sorted((folder / "corpus").iterdir())[0]
    warm = folder / "cli-warm"
    shutil.rmtree(warm, ignore_errors=True)
    warm.mkdir()
    (warm / first.name).symlink_to(first)
    plugins = ["-p", "xdist.plugin", "-p", "otel_replay.testing.pytest_plugin"]
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugins]
    _timed([*pytest, "-n", "1", "-k", first.name, str(folder / "tests")], env | _NO_AUTOLOAD)
    agent = [sys.executable, str(BENCH / "_corpus_agent.py")]
    store = ["--store", str(folder / "store-warm")]
    _timed([CLI, "replay", *store, "--all", str(warm), "--", *agent], env)


def prepare(folder: Path, bundles: int, cli_bundles: int) -> None:
    """The corpus (``folder/corpus``), its test module and the CLI's part of it."""
    record(folder / "recorded", dict(LENGTHS))
    corpus = copies([folder / "recorded" / name for name in LENGTHS], bundles, folder / "corpus")
    tests = folder / "tests"
    tests.mkdir(exist_ok=True)
    (tests / "pytest.ini").write_text("[pytest]\n")
    module = TESTS.format(bundles=[str(path) for path in corpus])
    (tests / "test_corpus.py").write_text(textwrap.dedent(module))
    cli = folder / "cli"
    shutil.rmtree(cli, ignore_errors=True)
    cli.mkdir()
    for path in corpus[:cli_bundles]:
        (cli / path.name).symlink_to(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundles", type=int, default=200)
    parser.add_argument("--cli-bundles", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--folder", type=Path, default=Path(tempfile.gettempdir()) / "otel-replay-corpus-bench"
    )
    parser.add_argument("--skip", choices=["pytest", "cli"], default=None)
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    prepare(args.folder, args.bundles, min(args.cli_bundles, args.bundles))
    warm_up(args.folder)
    variants: dict[str, Callable[[], Timing]] = {}
    if args.skip != "pytest":
        variants["pytest -n 1"] = lambda: pytest_session(args.folder, 1)
        variants["pytest -n 2"] = lambda: pytest_session(args.folder, 2)
        variants["pytest -n 1, no test"] = lambda: pytest_session(args.folder, 1, select="none")
    if args.skip != "cli":
        variants["replay --all -j 1"] = lambda: replay_all(args.folder, 1)
        variants["replay --all -j 2"] = lambda: replay_all(args.folder, 2)
    timings: dict[str, list[Timing]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, run in variants.items():
            timings[name].append(run())
            print(f"  {name}: {timings[name][-1].wall:.1f} s", flush=True)
    cli = min(args.cli_bundles, args.bundles)
    print(
        f"{args.bundles} bundles under pytest, {cli} under replay --all; "
        f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f} (others' work included)"
    )
    wall = {name: statistics.median(t.wall for t in values) for name, values in timings.items()}
    cpu = {name: statistics.median(t.cpu for t in values) for name, values in timings.items()}
    best = {name: min(t.wall for t in values) for name, values in timings.items()}
    for name in timings:
        print(
            f"{name:>20} {wall[name]:8.1f} s wall {cpu[name]:8.1f} s CPU"
            f"  (best of {args.rounds}: {best[name]:.1f} s wall)"
        )
    for one, two in (("pytest -n 1", "pytest -n 2"), ("replay --all -j 1", "replay --all -j 2")):
        if one in wall:
            speedup = wall[one] / wall[two]
            verdict = "ok" if speedup >= TARGET_SPEEDUP else "UNDER"
            print(
                f"{two} vs 1: {speedup:.2f}x  target >= {TARGET_SPEEDUP}x  {verdict}"
                f"  (best walls: {best[one] / best[two]:.2f}x)"
            )
    if "pytest -n 1" in wall:
        # Amdahl: the start-up does not shrink with a second worker, the tests at best halve.
        start = wall["pytest -n 1, no test"]
        bound = wall["pytest -n 1"] / (start + (wall["pytest -n 1"] - start) / 2)
        print(
            f"pytest: start-up {start:.1f} s of {wall['pytest -n 1']:.1f} s; 2 workers "
            f"can be at most {bound:.2f}x faster"
        )
        # CPU, unlike wall time, is not stretched by other work on the machine.
        per_test = (cpu["pytest -n 1"] - cpu["pytest -n 1, no test"]) / args.bundles
        print(
            f"pytest CPU: start-up {cpu['pytest -n 1, no test']:.1f} s; a marked test "
            f"{per_test * 1000:.1f} ms (the replay's imports in its worker included); a "
            f"second worker {cpu['pytest -n 2'] - cpu['pytest -n 1']:.1f} s more"
        )


if __name__ == "__main__":
    main()
