"""Golden-test overhead: what a test marked ``@pytest.mark.otel_replay(BUNDLE)`` pays per test,
beside the same test under pytest-recording (vcrpy) with the same exchanges as a cassette.

The test: ``_corpus_agent.converse`` asks ten questions over one ``httpx.Client`` (made once
per module, so no variant pays for a client): ten distinct Chat Completions requests, the
history re-sent each time. The exchanges were really recorded against the stand-in, seen by
otel-replay's capture (the 10-step bundle, as ``export`` writes it) and by vcrpy (the YAML
cassette) at once. Variants, each a pytest session of its own running the test ``--tests``
times (parametrized), plugins loaded explicitly and nothing else:

* ``bare`` — the client's transport is an ``httpx.MockTransport`` answering each recorded
  request with its recorded response: the test's own work, the floor.
* ``otel-replay`` — ``@pytest.mark.otel_replay(BUNDLE)``; the test also asserts
  ``replay_result.identical``.
* ``pytest-recording`` — ``@pytest.mark.vcr`` on the cassette, record mode ``none`` (its
  default, as in CI), requests told apart by method, URI and body (as otel-replay tells them
  apart by their bodies).

Each test's time is its whole run protocol (set-up, call, tear-down: where both plugins do
their work), taken by a hook in the session; printed are the medians over tests, the median
of ``--rounds`` sessions, and each tool's overhead: its median minus the bare one.

Target: otel-replay's overhead at most 0.5x pytest-recording's.

pytest-recording cannot live in the project's venv (its ``--record-mode`` clashes with
cassetter's pytest plugin, which the dev tools install): the bench installs it once into its
folder (``pip install --target``, no dependencies: vcrpy is a dev tool) and puts it on the
sessions' path.

    python bench/golden_overhead.py [--tests 200] [--rounds 3] [--folder DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import yaml
from _bundles import MATCH_ON, record

TARGET_RATIO = 0.5
PYTEST_RECORDING = "pytest-recording==0.14.1"
BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent

CONFTEST = """
import json, os, time
import pytest

TIMES = []

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    started = time.perf_counter()
    yield
    TIMES.append(time.perf_counter() - started)

def pytest_sessionfinish(session):
    with open(os.environ["BENCH_TIMES"], "w") as out:
        json.dump(TIMES, out)

@pytest.fixture(scope="module")
def vcr_config():
    return {{"match_on": {match_on!r}}}

@pytest.fixture(scope="module")
def vcr_cassette_dir():
    return {cassettes!r}

@pytest.fixture
def default_cassette_name():
    return "ten-steps"
"""

TESTS = """
import httpx
import pytest

from _corpus_agent import converse

BUNDLE, BASE, BODIES = {bundle!r}, {base!r}, {bodies!r}

def answer(request):
    return httpx.Response(200, content=BODIES[request.content.decode()],
                          headers={{"content-type": "application/json"}})

CLIENT = httpx.Client(base_url=BASE{transport})

@pytest.mark.parametrize("n", range({tests}))
{mark}
def test_ten_questions(n{fixture}):
    assert len(converse(CLIENT, 10)) == 10
    {check}
"""

VARIANTS = {
    "bare": {
        "transport": ", transport=httpx.MockTransport(answer)",
        "mark": "",
        "fixture": "",
        "check": "",
        "plugins": [],
    },
    "otel-replay": {
        "transport": "",
        "mark": "@pytest.mark.otel_replay(BUNDLE)",
        "fixture": ", replay_result",
        "check": "assert replay_result.identical, replay_result.first_divergence",
        "plugins": ["otel_replay.testing.pytest_plugin"],
    },
    "pytest-recording": {
        "transport": "",
        "mark": "@pytest.mark.vcr",
        "fixture": "",
        "check": "",
        "plugins": ["pytest_recording.plugin"],
    },
}


def install_pytest_recording(folder: Path) -> Path:
    """pytest-recording in ``folder/site`` (installed when missing); that directory."""
    site = folder / "site"
    if not (site / "pytest_recording").is_dir():
        print(f"installing {PYTEST_RECORDING} into {site}", flush=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--target",
                str(site),
                PYTEST_RECORDING,
            ],
            check=True,
        )
    return site


def write_sessions(folder: Path, tests: int) -> None:
    """The conftest and one test module per variant, under ``folder/NAME``."""
    recorded = folder / "recorded"
    record(recorded, {"ten": None}, cassette=recorded / "ten-steps.yaml")
    cassette = yaml.safe_load((recorded / "ten-steps.yaml").read_text())
    exchanges = [
        (i["request"]["body"], i["response"]["body"]["string"]) for i in cassette["interactions"]
    ]
    base = cassette["interactions"][0]["request"]["uri"].removesuffix("/v1/chat/completions")
    for name, parts in VARIANTS.items():
        session = folder / name
        session.mkdir(exist_ok=True)
        (session / "pytest.ini").write_text("[pytest]\n")
        conftest = CONFTEST.format(match_on=MATCH_ON, cassettes=str(recorded))
        (session / "conftest.py").write_text(textwrap.dedent(conftest))
        module = TESTS.format(
            bundle=str(recorded / "ten"),
            base=base,
            bodies=dict(exchanges),
            tests=tests,
            **{k: v for k, v in parts.items() if k != "plugins"},
        )
        (session / "test_golden.py").write_text(textwrap.dedent(module))


def session(folder: Path, name: str, site: Path) -> list[float]:
    """Run variant ``name``'s session; each test's seconds."""
    times = folder / name / "times.json"
    plugins = [arg for plugin in VARIANTS[name]["plugins"] for arg in ("-p", plugin)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    path = [str(BENCH), str(site), str(ROOT), env.get("PYTHONPATH", "")]
    env |= {
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTHONPATH": os.pathsep.join(p for p in path if p),
        "BENCH_TIMES": str(times),
    }
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugins]
    done = subprocess.run(
        [*command, str(folder / name)], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"the {name} session failed:\n{done.stdout[-3000:]}{done.stderr}")
    return list(json.loads(times.read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--folder", type=Path, default=Path(tempfile.gettempdir()) / "otel-replay-golden-bench"
    )
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    site = install_pytest_recording(args.folder)
    write_sessions(args.folder, args.tests)
    medians: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for _ in range(args.rounds):  # variants alternate, so drift in the machine touches all
        for name in VARIANTS:
            medians[name].append(statistics.median(session(args.folder, name, site)))
    per_test = {name: statistics.median(values) * 1e3 for name, values in medians.items()}
    print(
        f"{args.tests} tests a session, {args.rounds} sessions a variant; ms per test "
        "(median over tests, median of sessions)"
    )
    bare = per_test["bare"]
    for name, ms in per_test.items():
        extra = "" if name == "bare" else f"   overhead {ms - bare:7.3f} ms"
        print(f"{name:>17} {ms:8.3f} ms{extra}")
    ours = per_test["otel-replay"] - bare
    theirs = per_test["pytest-recording"] - bare
    ratio = ours / theirs
    verdict = "ok" if ratio <= TARGET_RATIO else "OVER"
    print(
        f"otel-replay's overhead / pytest-recording's: {ratio:.2f}x  target <= "
        f"{TARGET_RATIO}x  {verdict}"
    )


if __name__ == "__main__":
    main()
