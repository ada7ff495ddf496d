"""``otel-replay replay RUN -- CMD``: record real programs, stop the provider, replay them.

Each recording runs a real program (the example support agent, or the SDK matrix script with
openai 3.x on httpx2, openai 2.x on httpx, anthropic) under ``opentelemetry-instrument`` with
the ``replay`` exporter, against the stand-in. The stand-in is then stopped and the program is
replayed by the real CLI: its output must be identical, it must make no real connection (an
audit hook in the script sees every ``socket.connect``), and the report must say so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import otel_replay.replay._boot
from examples.standin import StandIn
from otel_replay.cli._replay import _kept
from otel_replay.replay import ReplayResult, ServedStep
from otel_replay.replay.sources import load_run
from otel_replay.replay.sources._build import build_run
from otel_replay.replay.sources._runs import SpanRun
from otel_replay.store import Store
from tests.export._support import INSTRUMENT, ROOT, subprocess_env

pytestmark = pytest.mark.subprocess

CLI = Path(sys.executable).parent / "otel-replay"
SCRIPT = Path(__file__).with_name("_sdk_script.py")
AGENT = ROOT / "examples" / "support_agent.py"
LEGACY = ROOT / ".venv" / "legacy-openai"


def _record(
    store: Path, run_id: str, argv: list[str], **env: str
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(INSTRUMENT), sys.executable, *argv],
        env=subprocess_env(store, OTEL_REPLAY_RUN_ID=run_id, **env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def replay(
    store: Path, run: str, *command: str, flags: Sequence[str] = (), **env: str
) -> subprocess.CompletedProcess[str]:
    """``otel-replay replay RUN --store STORE FLAGS -- CMD`` with a clean environment."""
    base = {k: v for k, v in subprocess_env(store).items() if not k.startswith("OTEL_")}
    return subprocess.run(
        [str(CLI), "replay", run, "--store", str(store), *flags, "--", *command],
        env=base | env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _last_json(stdout: str) -> dict[str, Any]:
    return dict(json.loads(stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def agent_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """The support agent recorded into a store; the stand-in is stopped afterwards."""
    store = tmp_path_factory.mktemp("agent") / "store"
    with StandIn(event_delay=0.001) as standin:
        done = _record(store, "r_agent", [str(AGENT)], STANDIN_URL=standin.base_url)
    return store, "r_agent", done.stdout


@dataclass(frozen=True)
class AgentReplay:
    """One replay of the recorded agent, into a copy of its store, and when it ran."""

    store: Path
    done: subprocess.CompletedProcess[str]
    started_ns: int
    ended_ns: int


@pytest.fixture(scope="module")
def agent_replay(
    agent_store: tuple[Path, str, str], tmp_path_factory: pytest.TempPathFactory
) -> AgentReplay:
    """The agent replayed once by the CLI with the provider gone; the tests below read
    different things off the one replay."""
    store = Path(shutil.copytree(agent_store[0], tmp_path_factory.mktemp("replayed") / "store"))
    before = time.time_ns()
    done = replay(store, agent_store[1], sys.executable, str(AGENT))
    return AgentReplay(store, done, before, time.time_ns())


def test_the_agent_replays_identically_without_the_provider(
    agent_store: tuple[Path, str, str], agent_replay: AgentReplay
) -> None:
    _, run, recorded_output = agent_store
    store, done = agent_replay.store, agent_replay.done
    assert done.returncode == 0, done.stdout + done.stderr
    # The agent printed exactly what it printed when it was recorded.
    replayed_output = done.stdout[: len(recorded_output)]
    assert replayed_output == recorded_output
    report = done.stdout[len(recorded_output) :]
    assert f"replay of run {run} (store {store}): identical" in report
    assert "9 requests, 9 served from 9 recorded steps; matched: hash 9; fidelity: exact 9" in (
        report
    )
    assert "network attempts: 0" in report
    assert "Traceback" not in done.stderr
    # A program that loads otel-replay is not said not to (the next test's unhooked case).
    assert "no process of the program loaded" not in done.stdout
    # The re-execution is a run of its own in the store, recorded in mode replay.
    new_id = report.rsplit("recorded as run ", 1)[1].split()[0]
    with Store.open(store, create=False) as opened:
        spans = opened.spans(new_id)
        assert len(opened.steps(new_id)) == 9
    modes = {
        s["attributes"].get("replay.mode") for s in spans if "replay.step.index" in s["attributes"]
    }
    assert modes == {"replay"}


def test_a_script_s_draws_from_random_repeat_without_a_run_block(tmp_path: Path) -> None:
    """A script that draws from ``random`` before its first step, outside any ``run()``
    block: the process run records the seed ``random`` was given at instrumentation, and the
    replay gives it again, so the prompt is the same and the replay identical."""
    store = tmp_path / "store"
    agent = ["-m", "tests.replay._random_agent"]
    with StandIn(event_delay=0.001) as standin:
        recorded = _record(store, "r_random", agent, STANDIN_URL=standin.base_url)
    with Store.open(store, create=False) as opened:
        assert opened.run("r_random").seed is not None
    done = replay(store, "r_random", sys.executable, *agent, STANDIN_URL="http://127.0.0.1:9")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(recorded.stdout)  # the same draws in the same prompt
    assert f"replay of run r_random (store {store}): identical" in done.stdout


def test_a_replays_spans_time_its_steps_by_the_wall_clock(agent_replay: AgentReplay) -> None:
    """The replayed application reads the recorded run's time; the spans its replay exports
    say when the replay ran and how long each step took, so that the replay read from its
    spans alone (a trace backend, the Collector's archive) times every step as the store
    does, HTTP and model calls as the run's own span."""
    done, before, after = agent_replay.done, agent_replay.started_ns, agent_replay.ended_ns
    assert done.returncode == 0, done.stdout + done.stderr
    replayed = done.stdout.rsplit("recorded as run ", 1)[1].split()[0]
    with Store.open(agent_replay.store, create=False) as opened:
        spans = opened.spans(replayed)
        stored = {step.index: step for step in opened.read_steps(replayed)}
    assert all(before <= s["start_ns"] <= s["end_ns"] <= after for s in spans), spans
    from_spans = build_run(SpanRun(replayed, tuple(spans)), "its spans").run
    assert {s.step.kind for s in from_spans.steps} == {"llm", "http"}
    for step in from_spans.steps:
        wall = stored[step.step.index]
        assert abs(step.step.start_ns - wall.start_ns) < 50_000_000, step.step.index
        assert 0 <= step.duration_ns <= wall.end_ns - wall.start_ns + 50_000_000


def test_a_read_only_store_replays_and_says_the_replay_was_not_recorded(
    agent_store: tuple[Path, str, str], tmp_path: Path
) -> None:
    """A store on a read-only mount (a CI cache, a shared volume) serves the replay; nothing
    claims the replay was recorded there, and no write failure is reported."""
    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is needed for a read-only mount")
    store, run, recorded_output = agent_store
    copy = tmp_path / "a-read-only-mount-of-the-team-store-shared-by-every-ci-job"
    shutil.copytree(store, copy)
    before = sorted((p, p.read_bytes()) for p in copy.rglob("*") if p.is_file())
    base = {k: v for k, v in subprocess_env(copy).items() if not k.startswith("OTEL_")}
    command = [str(CLI), "replay", run, "--store", str(copy), "--", sys.executable, str(AGENT)]
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', copy, *command],
        env=base,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(recorded_output)
    # The summary is one line however long (a script reads the run id off it).
    (summary,) = [line for line in done.stdout.splitlines() if "; subprocesses: " in line]
    assert len(summary) > 240 and summary.endswith(
        f"subprocesses: 0; not recorded (the store at {copy} is read-only)"
    )
    assert "otel-replay" not in done.stderr  # no write failure, no lost steps
    assert sorted((p, p.read_bytes()) for p in copy.rglob("*") if p.is_file()) == before


def test_a_program_that_never_loads_otel_replay_is_named_as_such(
    agent_store: tuple[Path, str, str],
) -> None:
    """A command whose Python lacks otel-replay (here: isolated mode, no sitecustomize, no
    site-packages) sends nothing the replay can see: the report says why, not just that
    every step went unrequested."""
    store, run, _ = agent_store
    done = replay(store, run, sys.executable, "-I", "-S", "-c", "print('ran')")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ran" in done.stdout
    assert (
        "no process of the program loaded otel-replay's replay, so nothing it sent was seen"
        in done.stdout
    )
    as_json = replay(store, run, sys.executable, "-I", "-S", "-c", "pass", flags=["--json"])
    assert json.loads(as_json.stdout)["hooked"] is False


# Whether a process has loaded what a replay loads (its store is SQLite), once the resource
# tracker has started up: it then waits on its pipe for the program's commands.
TRACKER_PROGRAM = """
import time
from multiprocessing import resource_tracker

def proc(pid, name):
    with open(f"/proc/{pid}/{name}") as entry:
        return entry.read()

def replayed(pid):
    return "_sqlite3" in proc(pid, "maps")

resource_tracker.ensure_running()
tracker = resource_tracker._resource_tracker._pid
deadline = time.monotonic() + 100
while "pipe_read" not in proc(tracker, "wchan"):
    assert time.monotonic() < deadline, "the resource tracker did not start"
    time.sleep(0.05)
print("program", replayed("self"), "tracker", replayed(tracker))
"""


def test_multiprocessing_s_resource_tracker_is_not_replayed(
    agent_store: tuple[Path, str, str],
) -> None:
    """It runs none of the program's code: it starts as a plain Python would, not with a
    replay's start-up (a forkserver or spawned worker does run the program's code, and is)."""
    store, run, _ = agent_store
    done = replay(store, run, sys.executable, "-c", TRACKER_PROGRAM)
    assert "program True tracker False" in done.stdout, done.stdout + done.stderr


def test_the_summary_claims_a_recording_only_where_the_store_holds_it(
    agent_store: tuple[Path, str, str], tmp_path: Path
) -> None:
    store, run, _ = agent_store
    recorded = load_run(run, store=str(store))
    served = ServedStep(
        0, "POST", "http://x/v1", "POST /v1", "sha256:00", "hash", 0, False, None, ()
    )
    made_one = ReplayResult(recorded, [served], [])
    made_none = ReplayResult(recorded, [], [])
    unhooked = ReplayResult(recorded, [served], [])
    unhooked.hooked = False
    assert _kept(str(store), run, made_one).describe() == f"recorded as run {run}"
    assert _kept(str(store), "r_never", made_one).describe() == (
        f"not recorded (the store at {store} did not take it)"
    )
    not_a_store = tmp_path / "file"
    not_a_store.write_text("x")
    assert _kept(str(not_a_store), run, made_one).run_id is None
    assert _kept(str(store), run, unhooked).describe() == (
        "not recorded (no process of the program loaded otel-replay)"
    )
    assert _kept(str(store), run, made_none).describe() == (
        "not recorded (the program made no request)"
    )


def test_a_changed_system_prompt_is_reported_field_by_field(
    agent_store: tuple[Path, str, str],
) -> None:
    store, run, _ = agent_store
    done = replay(
        store,
        run,
        sys.executable,
        str(AGENT),
        SUPPORT_SYSTEM_PROMPT="You are Ada. Answer in one word.",
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "diverged — step 0 differs from the recording" in done.stdout
    assert "first divergence: step 0 (openai.chat_completions), request 0, matched by closest" in (
        done.stdout
    )
    lines = done.stdout.splitlines()
    at = lines.index(
        "  system instructions (message 0): differs from character 20 (224 → 40 characters)"
    )
    assert lines[at + 1].startswith(
        "    recorded: system: You are Ada, the customer-support assistant"
    )
    assert lines[at + 2] == "    replayed: system: You are Ada. Answer in one word."
    # The caret stands under the first character that differs (',' against '.').
    assert lines[at + 3] == " " * len("    recorded: system: You are Ada") + "^"
    assert "prompt hash: sha256:" in done.stdout


def test_json_report_names_the_step_and_fields(agent_store: tuple[Path, str, str]) -> None:
    store, run, _ = agent_store
    env = subprocess_env(store, SUPPORT_SYSTEM_PROMPT="Be brief.")
    env = {k: v for k, v in env.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [
            str(CLI),
            "replay",
            run,
            "--store",
            str(store),
            "--json",
            "--",
            sys.executable,
            str(AGENT),
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)  # the agent's own output went to stderr
    assert "customer> Hi! Where is my order A-1234?" in done.stderr
    assert document["identical"] is False
    assert document["agent_exit_code"] == 0
    first = document["first_divergence"]
    assert (first["kind"], first["step"], first["request"]) == ("changed", 0, 0)
    fields = [c["field"] for c in first["changes"]]
    assert fields == ["prompt hash", "system instructions (message 0)"]
    assert first["changes"][1]["replayed"] == "system: Be brief."
    # Each model call is compared with the recorded one of its turn (the closest by content);
    # the last one left, by position.
    assert document["matched"] == {"hash": 3, "closest": 5, "position": 1}
    assert document["network_attempts"] == []


@pytest.mark.parametrize(
    ("suite", "legacy"),
    [("openai", False), ("openai", True), ("anthropic", False)],
    ids=["openai-httpx2", "openai2-httpx", "anthropic"],
)
def test_sdk_matrix_replays_identically(tmp_path: Path, suite: str, legacy: bool) -> None:
    if legacy:
        assert (LEGACY / "openai").is_dir(), f"openai 2.x is missing from {LEGACY}: make setup"
    extra = {"PYTHONPATH": f"{LEGACY}{os.pathsep}{ROOT}"} if legacy else {}
    store = tmp_path / "store"
    with StandIn(event_delay=0.001) as standin:
        argv = [str(SCRIPT), str(ROOT), suite, standin.openai_base_url, standin.anthropic_base_url]
        recorded = _last_json(_record(store, "r_matrix", argv, **extra).stdout)
    assert recorded["connects"], "the recording should have reached the stand-in"
    if legacy:
        assert recorded["sdk"].startswith("2.")
    done = replay(store, "r_matrix", sys.executable, *argv, **extra)
    assert done.returncode == 0, done.stdout + done.stderr
    replayed = json.loads(done.stdout.splitlines()[0])
    assert replayed["sdk"] == recorded["sdk"]
    assert replayed["outputs"] == recorded["outputs"]
    assert replayed["connects"] == []
    assert "identical" in done.stdout
    assert "network attempts: 0" in done.stdout


def test_a_socket_opened_by_the_program_is_refused_and_reported(
    agent_store: tuple[Path, str, str],
) -> None:
    store, run, _ = agent_store
    code = (
        "import socket\n"
        "try:\n"
        "    socket.create_connection(('127.0.0.1', 9), timeout=1)\n"
        "except ConnectionRefusedError as exc:\n"
        "    print('refused:', exc)\n"
    )
    done = replay(store, run, sys.executable, "-c", code)
    assert done.returncode == 1
    assert "refused: otel-replay strict replay refused network access to 127.0.0.1:9" in (
        done.stdout
    )
    assert "refused network access: 127.0.0.1:9" in done.stdout
    assert "network attempts: 1" in done.stdout
    assert "recorded step 0 was never requested" in done.stdout


def test_the_agent_exit_status_is_surfaced(agent_store: tuple[Path, str, str]) -> None:
    store, run, _ = agent_store
    code = f"import runpy, sys; runpy.run_path({str(AGENT)!r}, run_name='__main__'); sys.exit(4)"
    done = replay(store, run[:4], sys.executable, "-c", code)  # a unique prefix names the run
    # The agent failed without diverging: 3, whatever its own status; that is in the report.
    assert done.returncode == 3, done.stdout + done.stderr
    assert ": identical steps, but the agent failed — it exited with status 4" in done.stdout
    assert done.stdout.splitlines()[-1] == "the agent exited with status 4"


def test_an_extra_request_fails_strictly_with_the_closest_recorded_ones(
    agent_store: tuple[Path, str, str],
) -> None:
    store, run, _ = agent_store
    code = (
        "import httpx\n"
        "for order in ('Z-9', 'Z-10'):\n"
        "    httpx.post('http://127.0.0.1:8765/tools/refunds', json={'order_id': order})\n"
    )
    done = replay(store, run, sys.executable, "-c", code)
    assert done.returncode == 1
    # The second request has nothing left to match: it stops the program with the closest.
    assert "UnmatchedRequestError: otel-replay: no recorded step of run 'r_agent' matches POST" in (
        done.stderr
    )
    assert "closest recorded requests:" in done.stderr
    assert "  step 7 POST /tools/refunds, served 1 time(s): differs in $.order_id" in done.stderr
    assert "requests with no recorded step: 1 (POST http://127.0.0.1:8765/tools/refunds)" in (
        done.stdout
    )
    # The request got the next recorded refund by position, then nothing is left to serve.
    assert "first divergence: step 7 (POST /tools/refunds), request 0, matched by position" in (
        done.stdout
    )
    assert "body $.order_id: A-1234 → Z-9" in done.stdout
    assert "body $.reason: removed (was item arrived damaged)" in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["r_nope"], "r_nope"),
        (["missing.jsonl"], "missing.jsonl"),
    ],
)
def test_bad_input_is_one_line_with_exit_2(
    agent_store: tuple[Path, str, str], args: list[str], message: str
) -> None:
    store, _, _ = agent_store
    done = replay(store, args[0], sys.executable, "-c", "print('never runs')")
    assert done.returncode == 2
    assert "never runs" not in done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"resourceSpans": [{"resource": {', "truncated.jsonl"),
        (b'{"resourceSpans": []}\n', "has no replayable steps"),
    ],
    ids=["truncated", "nothing-replayable"],
)
def test_a_bad_source_file_is_one_line_with_exit_2(
    tmp_path: Path, content: bytes, message: str
) -> None:
    source = tmp_path / "truncated.jsonl"
    source.write_bytes(content)
    done = replay(tmp_path / "store", str(source), sys.executable, "-c", "print('never runs')")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "never runs" not in done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0]
    assert str(source) in lines[0]


@pytest.mark.parametrize(
    ("run", "message"),
    [("", "needs OTEL_REPLAY_RUN"), ("r_nope", "r_nope")],
    ids=["no-run", "unknown-run"],
)
def test_a_process_asked_to_replay_that_cannot_does_not_run_live(
    agent_store: tuple[Path, str, str], run: str, message: str
) -> None:
    store, _, _ = agent_store
    boot = Path(otel_replay.replay._boot.__file__).parent
    env = {k: v for k, v in subprocess_env(store).items() if not k.startswith("OTEL_")}
    env |= {
        "OTEL_REPLAY_MODE": "replay",
        "OTEL_REPLAY_RUN": run,
        "OTEL_REPLAY_STORE": str(store),
        "PYTHONPATH": f"{boot}{os.pathsep}{ROOT}",
    }
    done = subprocess.run(
        [sys.executable, "-c", "print('ran live')"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "ran live" not in done.stdout
    line = done.stderr.strip()
    assert line.startswith("otel-replay: cannot replay: ") and message in line
    assert "\n" not in line
