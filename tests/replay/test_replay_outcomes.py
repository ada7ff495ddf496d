"""What ``otel-replay replay`` reports and returns, for real recordings of the support agent.

The agent is recorded once under ``opentelemetry-instrument`` against the stand-in (the real
openai SDK), the stand-in is stopped, and the real CLI replays it after each change:

* a change deep in a long text shows the changed words on both sides, lined up, with a caret
  under the first differing character; ``--json`` carries both whole texts;
* a changed tool description shows the old wording and the new;
* each outcome has its own exit status (0 identical, 1 diverged, 2 bad input, 3 the agent failed
  without diverging, 70 a bug in otel-replay) and the agent's own status is in the report.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from examples.support_agent import SYSTEM_PROMPT
from otel_replay.runs import qualified_name
from tests.replay.test_replay_cli import AGENT, CLI, agent_store, replay

pytestmark = pytest.mark.subprocess

__all__ = ["agent_store"]  # the recording, shared as a fixture

AgentStore = tuple[Path, str, str]
# The prompt reworded past its 200th character: both sides' first 200 characters are equal.
REWORDED = SYSTEM_PROMPT.replace("never invent order details.", "never invent delivery dates.")
CHANGED_AT = SYSTEM_PROMPT.index("order details.")


def _json(done: Any) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def _script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(body)
    return str(path)


def _run_agent_then(tmp_path: Path, tail: str) -> str:
    """A script that runs the support agent as ``python examples/support_agent.py`` would,
    then ``tail``."""
    return _script(
        tmp_path,
        "agent_then.py",
        f"import runpy, sys\nrunpy.run_path({str(AGENT)!r}, run_name='__main__')\n{tail}\n",
    )


Replayed = subprocess.CompletedProcess[str]

_RAISE_IN_A_TASK_GROUP = """
import anyio
async def ask():
    raise ValueError('no more questions')
async def main():
    async with anyio.create_task_group() as group:
        group.start_soon(ask)
anyio.run(main)
"""
# The group anyio raises: the builtin on Python 3.11+, the backport's before.
if sys.version_info >= (3, 11):
    _GROUP = "ExceptionGroup"
else:  # pragma: no cover - Python 3.10
    import exceptiongroup

    _GROUP = qualified_name(exceptiongroup.ExceptionGroup("", [ValueError()]))


@pytest.fixture(scope="module")
def reworded(agent_store: AgentStore) -> tuple[Replayed, Replayed]:
    """The agent replayed with its prompt ``REWORDED``: the text report, then ``--json``'s
    (each read by more than one test below)."""
    store, run, _ = agent_store
    command = (sys.executable, str(AGENT))
    return (
        replay(store, run, *command, SUPPORT_SYSTEM_PROMPT=REWORDED),
        replay(store, run, *command, flags=["--json"], SUPPORT_SYSTEM_PROMPT=REWORDED),
    )


def test_a_prompt_changed_past_its_200th_character_shows_the_changed_words(
    reworded: tuple[Replayed, Replayed],
) -> None:
    assert CHANGED_AT > 200
    done, as_json = reworded
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    head = lines.index(
        "  system instructions (message 0): differs from character "
        f"{len('system: ') + CHANGED_AT + 1} ({len(SYSTEM_PROMPT) + 8} → {len(REWORDED) + 8} "
        "characters)"
    )
    # The same context before the change on both sides, then each side's words.
    assert lines[head + 1] == (
        "    recorded: …address and issue refunds; never invent order details."
    )
    assert lines[head + 2] == (
        "    replayed: …address and issue refunds; never invent delivery dates."
    )
    assert lines[head + 3] == " " * lines[head + 1].index("order details.") + "^"
    # The steps table and the summary still say the rest.
    assert "differs: prompt hash, system instructions" in done.stdout
    assert lines[-1] == "the agent exited with status 0"

    document = _json(as_json)
    changes = {c["field"]: c for c in document["first_divergence"]["changes"]}
    prompt = changes["system instructions (message 0)"]
    assert prompt == {
        "field": "system instructions (message 0)",
        "kind": "changed",
        "recorded": "system: " + SYSTEM_PROMPT,
        "replayed": "system: " + REWORDED,
        "differs_at": len("system: ") + CHANGED_AT,
    }


def test_a_changed_tool_description_shows_the_old_and_the_new(
    agent_store: AgentStore, tmp_path: Path
) -> None:
    store, run, _ = agent_store
    script = _script(
        tmp_path,
        "reworded_tool.py",
        "import examples.support_agent as agent\n"
        "agent.TOOLS[0]['function']['description'] = "
        "'Get the status and items of an order (delivery dates are estimates).'\n"
        "agent.main()\n",
    )
    done = replay(store, run, sys.executable, script)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    head = lines.index(
        "  tool lookup_order $.description: differs from character 5 (47 → 68 characters)"
    )
    assert lines[head + 1] == "    recorded: Get an order's status, items and delivery date."
    assert lines[head + 2] == (
        "    replayed: Get the status and items of an order (delivery dates are estimates)."
    )
    assert lines[head + 3] == " " * len("    recorded: Get ") + "^"
    assert any(line.startswith("  tool schema version: sha256:") for line in lines)

    document = _json(replay(store, run, sys.executable, script, flags=["--json"]))
    (tool,) = [
        c for c in document["first_divergence"]["changes"] if c["field"].startswith("tool look")
    ]
    assert (tool["recorded"], tool["replayed"]) == (
        "Get an order's status, items and delivery date.",
        "Get the status and items of an order (delivery dates are estimates).",
    )


@pytest.mark.parametrize(
    ("scenario", "status", "outcome", "agent_exit", "error"),
    [
        ("identical", 0, "identical", 0, None),
        ("changed prompt", 1, "diverged", 0, None),
        ("exit 3 after identical steps", 3, "agent_failed", 3, None),
        ("raises after identical steps", 3, "agent_failed", 1, "ValueError: no more questions"),
        # A task group (anyio's, as the MCP SDK's clients use) wraps the error in a group
        # whose own message says only "unhandled errors in a TaskGroup (1 sub-exception)".
        (
            "raises in a task group after identical steps",
            3,
            "agent_failed",
            1,
            f"ValueError: no more questions (in {_GROUP})",
        ),
    ],
)
def test_each_outcome_has_its_own_exit_status(
    agent_store: AgentStore,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    scenario: str,
    status: int,
    outcome: str,
    agent_exit: int,
    error: str | None,
) -> None:
    store, run, _ = agent_store
    command = [sys.executable, str(AGENT)]
    if scenario.startswith("exit 3"):
        command = [sys.executable, _run_agent_then(tmp_path, "sys.exit(3)")]
    elif scenario.startswith("raises in a task group"):
        command = [sys.executable, _run_agent_then(tmp_path, _RAISE_IN_A_TASK_GROUP)]
    elif scenario.startswith("raises"):
        command = [
            sys.executable,
            _run_agent_then(tmp_path, "raise ValueError('no more questions')"),
        ]

    if scenario == "changed prompt":  # the prompt REWORDED: replayed once for the module
        done, as_json = request.getfixturevalue("reworded")
    else:
        done = replay(store, run, *command)
        as_json = replay(store, run, *command, flags=["--json"])
    assert done.returncode == status, done.stdout + done.stderr
    verdict = next(line for line in done.stdout.splitlines() if line.startswith("replay of run"))
    last = done.stdout.splitlines()[-1]
    if outcome == "identical":
        assert verdict.endswith(": identical")
        assert last == "the agent exited with status 0"
    elif outcome == "diverged":
        assert verdict.endswith("diverged — step 0 differs from the recording")
    elif error is None:
        assert verdict.endswith(": identical steps, but the agent failed — it exited with status 3")
        assert last == "the agent exited with status 3"
    else:
        assert last == f"the agent raised {error} and exited with status 1"
        assert "Traceback" in done.stderr  # the agent's own, as Python printed it

    document = _json(as_json)
    assert document["outcome"] == outcome
    assert document["exit_code"] == status
    assert document["agent_exit_code"] == agent_exit
    assert document["agent"] == {"exit_code": agent_exit, "signal": None, "error": error}
    assert document["identical"] is (outcome != "diverged")


@pytest.mark.parametrize(
    ("program", "failure"),
    [
        ("missing.py", "exited with status 2"),
        (
            "broken.py",
            "raised ModuleNotFoundError: No module named 'no_such_module' and exited with status 1",
        ),
    ],
)
def test_a_program_that_never_started_is_the_agents_failure(
    agent_store: AgentStore, tmp_path: Path, program: str, failure: str
) -> None:
    store, run, _ = agent_store
    _script(tmp_path, "broken.py", "import no_such_module\n")
    command = [sys.executable, str(tmp_path / program)]
    done = replay(store, run, *command)
    assert done.returncode == 3, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith(f"): the agent failed before its first request — it {failure}")
    assert lines[-1] == f"the agent {failure}"
    assert "never requested" not in done.stdout
    assert "did not take it" not in done.stdout  # nothing said against the store
    assert "not recorded (the program made no request)" in lines[-2]

    document = _json(replay(store, run, *command, flags=["--json"]))
    assert (document["outcome"], document["exit_code"]) == ("agent_failed", 3)
    assert document["served"] == 0 and document["identical"] is False


def test_an_agent_killed_by_a_signal_failed(agent_store: AgentStore, tmp_path: Path) -> None:
    store, run, _ = agent_store
    script = _run_agent_then(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    done = replay(store, run, sys.executable, script)
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "the agent was killed by SIGKILL"


def test_bad_input_is_2(agent_store: AgentStore) -> None:
    store, _, _ = agent_store
    done = replay(store, "r_missing", sys.executable, "-c", "print('never runs')")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"Error: no run 'r_missing' in the store at {store} (list them with: otel-replay runs)"
    ]


def test_a_bug_in_otel_replay_is_70_with_one_line_and_the_traceback_in_a_file(
    agent_store: AgentStore, tmp_path: Path
) -> None:
    """The replayed program appends a step event our reader cannot read to the report the
    replay reads back (``OTEL_REPLAY_REPORT``): the parent's own parsing raises, as a bug in
    it would, and that must come out as one line and exit 70."""
    store, run, _ = agent_store
    script = _run_agent_then(
        tmp_path,
        "import os\n"
        "with open(os.environ['OTEL_REPLAY_REPORT'], 'a') as report:\n"
        '    report.write(\'{"type": "step", "order": "first"}\\n\')',
    )
    done = replay(store, run, sys.executable, script, TMPDIR=str(tmp_path))
    assert done.returncode == 70, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    line = done.stderr.strip().splitlines()[-1]
    head = (
        "Error: internal error: ValueError: invalid literal for int() with base 10: 'first' "
        "(a bug in otel-replay; traceback written to "
    )
    assert line.startswith(head), line
    written = Path(line.removeprefix(head).removesuffix(")"))
    assert written.parent == tmp_path
    text = written.read_text()
    assert "Traceback (most recent call last):" in text
    assert "in from_json" in text and text.rstrip().endswith("'first'")


def test_the_exit_statuses_are_in_the_help() -> None:
    done = subprocess.run(
        [str(CLI), "replay", "--help"], capture_output=True, text=True, timeout=60, check=True
    )
    assert "\n  Exit status:\n" in done.stdout
    for line in (
        "  0   identical: every recorded step was requested as recorded, and the",
        "  1   diverged: a request differs from its step or has none, a recorded step",
        "  2   bad input: unknown run, unreadable source, bad option",
        "  3   the agent failed without diverging: non-zero exit status, killed by a",
        "  70  a bug in otel-replay: one line, with where the traceback was written",
    ):
        assert f"\n  {line}\n" in done.stdout, line


def test_no_strict_counts_the_attempts_it_lets_through_failed_lookups_included(
    agent_store: AgentStore, tmp_path: Path
) -> None:
    """Under --no-strict nothing is refused, and nothing is left uncounted: a name lookup that
    fails (a service name no system knows: it fails locally, asking no one) and a connect
    nothing answers are attempts all the same."""
    store, run, _ = agent_store
    script = _run_agent_then(
        tmp_path,
        "import socket\n"
        "for _ in range(2):\n"
        "    try:\n"
        "        socket.getaddrinfo('localhost', 'no-such-service-otel-replay')\n"
        "    except socket.gaierror as exc:\n"
        "        print('lookup failed:', type(exc).__name__)\n"
        "try:\n"
        "    socket.create_connection(('127.0.0.1', 9), timeout=1)\n"
        "except OSError as exc:\n"
        "    print('connect failed:', type(exc).__name__)",
    )
    done = replay(store, run, sys.executable, script, flags=["--no-strict"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("lookup failed: gaierror") == 2
    assert "connect failed: ConnectionRefusedError" in done.stdout
    lines = done.stdout.splitlines()
    assert [line for line in lines if line.startswith("network access let through")] == [
        "network access let through (--no-strict): name lookup "
        "localhost:no-such-service-otel-replay (2 times)",
        "network access let through (--no-strict): 127.0.0.1:9",
    ]
    assert "; network attempts: 3 (let through: --no-strict); " in done.stdout
    assert not any(line.startswith("refused network access") for line in lines)

    document = _json(replay(store, run, sys.executable, script, flags=["--no-strict", "--json"]))
    assert document["network_live"] == [
        "name lookup localhost:no-such-service-otel-replay",
        "name lookup localhost:no-such-service-otel-replay",
        "127.0.0.1:9",
    ]
    assert document["network_attempts"] == []
    assert document["outcome"] == "identical"
