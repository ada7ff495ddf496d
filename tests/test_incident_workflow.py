"""The incident workflow of the README, step by step, through the CLI and real pytest.

The example support agent, on the stand-in's `standin-loop` model, asks for the same order
lookup until it gives up (a RuntimeError). One recording of that; then, as the README's
section "The incident workflow" shows: 1. triage finds it; 2. a replay reproduces it; 3. the
fixed agent (the README's patch: a repeated tool call hands the customer to a colleague)
replayed against it; 4. diff; 5. that replay exported as a golden test; 6. pytest passes on the
fixed agent and fails, on one readable error, on the agent without the fix.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from examples.standin import StandIn
from tests.cli._checks import run_cli
from tests.export._support import INSTRUMENT, ROOT, subprocess_env
from tests.replay.test_replay_cli import replay

pytestmark = pytest.mark.subprocess

RUN = "r_20261129T030000_10051005"
LOOP = {"SUPPORT_MODEL": "standin-loop"}

FIX = (  # the README's patch to examples/support_agent.py, hunk by hunk: (before, after)
    (
        "class SupportAgent:",
        'class HandOff(Exception):\n    """The agent gives the conversation to a human."""\n'
        "\n\nclass SupportAgent:",
    ),
    (
        "        for _ in range(MAX_STEPS):\n",
        "        asked: list[tuple[str, str]] = []\n        for _ in range(MAX_STEPS):\n",
    ),
    (
        "                return text\n",
        "                return text\n"
        "            if [(c.name, c.arguments) for c in calls] == asked:  # the same calls again\n"
        '                raise HandOff("Sorry, I\'m stuck: a colleague will take it from here.")\n'
        "            asked = [(c.name, c.arguments) for c in calls]\n",
    ),
    (
        "            except (openai.APIConnectionError",
        "            except HandOff as handoff:\n"
        '                print(f"agent> {handoff}")\n'
        "                return\n"
        "            except (openai.APIConnectionError",
    ),
)

GOLDEN = """
import pytest

import agent


@pytest.mark.otel_replay("tests/golden/stuck-lookup")
def test_a_tool_loop_is_handed_to_a_colleague(replay_result, monkeypatch, capsys):
    monkeypatch.setenv("SUPPORT_MODEL", "standin-loop")
    agent.main()
    assert replay_result.identical, replay_result.first_divergence
    assert len(replay_result.model_calls()) == 2
    assert capsys.readouterr().out.endswith("a colleague will take it from here.\\n")
"""


def _fixed(source: str) -> str:
    for before, after in FIX:
        assert source.count(before) == 1, before
        source = source.replace(before, after)
    return source


def _pytest(work: Path, standin_url: str) -> subprocess.CompletedProcess[str]:
    paths = [str(ROOT), str(work), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    path = os.pathsep.join(p for p in paths if p)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SUPPORT_", "STANDIN_"))
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_golden.py", "-p", "no:cacheprovider"],
        env=env | {"PYTHONPATH": path, "STANDIN_URL": standin_url},
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_incident_workflow_of_the_readme(tmp_path: Path) -> None:
    store = tmp_path / ".otel-replay"
    agent = Path(shutil.copy(ROOT / "examples" / "support_agent.py", tmp_path / "agent.py"))
    with StandIn(event_delay=0.001) as standin:
        url = {"STANDIN_URL": standin.base_url}
        recorded = subprocess.run(
            [str(INSTRUMENT), sys.executable, str(agent)],
            env=subprocess_env(store, OTEL_REPLAY_RUN_ID=RUN, **url, **LOOP),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert recorded.returncode == 1
    assert "RuntimeError: no final answer after 6 model calls" in recorded.stderr

    # 1. Triage finds the failed run, and `runs` lists it by its category.
    triage = run_cli("triage", "--store", str(store))
    assert triage.exit_code == 0, triage.output
    assert "tool_exhaustion   critical      1       1" in triage.stdout
    assert (
        "step 4: lookup_order called 6 times in a row with the same arguments "
        "(steps 0, 2, 4, 6, 8, 10)"
    ) in triage.stdout
    failed = run_cli("runs", "--failed", "--category", "tool_exhaustion", "--store", str(store))
    assert RUN in failed.stdout and "1 failed tool_exhaustion run" in failed.stdout

    # 2. Replayed, with no stand-in: the same 12 steps, the same failure (exit 3).
    again = replay(store, RUN, sys.executable, str(agent), **url, **LOOP)
    assert again.returncode == 3, again.stderr
    assert "identical steps, but the agent failed" in again.stdout
    assert "RuntimeError: no final answer after 6 model calls" in again.stdout

    # 3. The fix, replayed against the recording: it stops after the second lookup request.
    agent.write_text(_fixed(agent.read_text()))
    fixed = replay(store, RUN, sys.executable, str(agent), **url, **LOOP)
    assert fixed.returncode == 1, fixed.stderr
    assert "agent> Sorry, I'm stuck: a colleague will take it from here." in fixed.stdout
    assert "diverged — recorded step 3 was never requested" in fixed.stdout
    assert "the agent exited with status 0" in fixed.stdout
    fork = re.findall(r"recorded as run (r_\w+)", fixed.stdout)[-1]

    # 4. Diff: the first three steps the same, the loop's nine removed.
    diff = run_cli("diff", RUN, fork, "--store", str(store))
    assert diff.exit_code == 1, diff.output
    assert "first divergence: step 3 (GET /tools/orders/A-1234) of A is not in B" in diff.stdout
    assert "12 aligned steps: 3 same, 0 changed, 9 removed, 0 added" in diff.stdout

    # 5. The fixed run exported as a golden test's bundle.
    bundle = tmp_path / "tests" / "golden" / "stuck-lookup"
    exported = run_cli("export", fork, str(bundle), "--store", str(store))
    assert exported.exit_code == 0, exported.output
    assert "(3 steps, " in exported.stdout
    (tmp_path / "tests" / "test_golden.py").write_text(GOLDEN)

    # 6. CI passes on the fixed agent, and fails once the fix is gone, saying why.
    passed = _pytest(tmp_path, url["STANDIN_URL"])
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "1 passed" in passed.stdout
    shutil.copy(ROOT / "examples" / "support_agent.py", agent)
    regressed = _pytest(tmp_path, url["STANDIN_URL"])
    assert regressed.returncode == 1, regressed.stdout + regressed.stderr
    assert (
        "UnmatchedRequestError: otel-replay: no recorded step of run "
        f"'{fork}' matches POST {url['STANDIN_URL']}/v1/chat/completions"
    ) in regressed.stdout
    assert "step 2 openai.chat_completions, served 1 time(s): differs in $.messages[4]" in (
        regressed.stdout
    )
