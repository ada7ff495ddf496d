"""Forks through the CLI and ``replaying()``: overrides, states and writes served as asked,
recorded as runs of their own, and told apart by ``runs``, ``show`` and ``diff``.

One recording of ``_fork_agent`` (a step of every kind) serves every test; each CLI fork is
one ``otel-replay replay`` of it, with the stand-in stopped.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

import otel_replay
from examples.standin import StandIn
from otel_replay.errors import ConfigError
from otel_replay.store import Store
from tests.export._support import INSTRUMENT, ROOT, subprocess_env
from tests.replay._fork_agent import run_agent
from tests.replay.conftest import run_pytest

CLI = Path(sys.executable).parent / "otel-replay"
RUN = "r_forked"
DEAD = "http://127.0.0.1:9"  # nothing listens: a request that got out would fail
CHAT_BODY = {
    "id": "chatcmpl-fork",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o-mini",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "From JSON."},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The store holding run ``r_forked`` and the agent's database."""
    root = tmp_path_factory.mktemp("forks")
    store, database = root / "store", root / "orders.sqlite"
    with StandIn(event_delay=0.001) as standin:
        done = subprocess.run(
            [str(INSTRUMENT), sys.executable, "-m", "tests.replay._fork_agent", str(database)],
            env=subprocess_env(store, OTEL_REPLAY_RUN_ID=RUN, STANDIN_URL=standin.base_url),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    return store, database


def _cli(store: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "STANDIN_"))}
    return subprocess.run(
        [str(CLI), *args, "--store", str(store)] if args[0] != "replay" else [str(CLI), *args],
        env=env | {"STANDIN_URL": DEAD, "PYTHONPATH": str(ROOT)},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _fork(
    recorded: tuple[Path, Path], *flags: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    store, database = recorded
    agent = [sys.executable, "-m", "tests.replay._fork_agent", str(database)]
    return _cli(
        store, "replay", RUN, "--store", str(store), "--json", *flags, "--", *agent, cwd=cwd
    )


def _refunds(database: Path) -> int:
    with closing(sqlite3.connect(database)) as db, db:
        return int(db.execute("SELECT count(*) FROM refunds").fetchone()[0])


@pytest.mark.subprocess
def test_an_overridden_tool_result_reaches_the_program_and_the_fork_is_a_run(
    recorded: tuple[Path, Path], tmp_path: Path
) -> None:
    store, _ = recorded
    (tmp_path / "lost.json").write_text('{"order_id": "A-1234", "status": "lost"}')
    done = _fork(recorded, "--override", "2=@lost.json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr  # what the program sends next differs
    assert 'lookup_order -> {"order_id": "A-1234", "status": "lost"}' in done.stderr
    report = json.loads(done.stdout)
    assert report["fork"] == [{"step": 2, "change": "override @lost.json"}]
    by_step = {s["recorded"]: s for s in report["steps"]}
    assert by_step[2]["forked"] == "override @lost.json"
    assert report["first_divergence"]["step"] == 3  # the next model request carries the result
    assert any(
        '"status": "lost"' in str(c["replayed"]) for c in report["first_divergence"]["changes"]
    )
    # Recorded as a fork of the run, the changed step marked on its span.
    fork_id = report["replay_run_id"]
    with Store.open(store, create=False) as opened:
        info = opened.run(fork_id)
        spans = {
            s["attributes"].get("replay.step.index"): s["attributes"] for s in opened.spans(fork_id)
        }
    assert (info.mode, info.parent_run_id) == ("fork", RUN)
    assert spans[2]["replay.fork.change"] == "override @lost.json"
    assert {a["replay.fork.step"] for a in spans.values()} == {2}
    assert "replay.fork.change" not in spans[3]
    # runs: the fork under its parent; show: which steps were served or changed; diff: the
    # changed step first.
    runs = _cli(store, "runs").stdout.splitlines()
    parent = next(i for i, line in enumerate(runs) if line.startswith(RUN))
    assert any(line.startswith(f"└ {fork_id}") for line in runs[parent + 1 :])
    shown = _cli(store, "show", fork_id).stdout
    assert "override @lost.json" in shown and "served" in shown
    diffed = _cli(store, "diff", RUN, fork_id)
    assert diffed.returncode == 1
    lines = diffed.stdout.splitlines()
    assert "changed in B: step 2 (tool:lookup_order): override @lost.json" in lines[2]
    assert "first divergence: step 2 (tool:lookup_order): response" in diffed.stdout
    diffed_json = json.loads(_cli(store, "diff", RUN, fork_id, "--json").stdout)
    assert diffed_json["forked"] == [
        {"run": "B", "step": 2, "endpoint": "tool:lookup_order", "change": "override @lost.json"}
    ]


@pytest.mark.subprocess
def test_a_fork_of_a_fork_is_drawn_under_its_own_parent(recorded: tuple[Path, Path]) -> None:
    store, database = recorded
    first = json.loads(_fork(recorded, "--override", "8=text:Once.").stdout)["replay_run_id"]
    agent = [sys.executable, "-m", "tests.replay._fork_agent", str(database)]
    flags = ["--store", str(store), "--json", "--override", "8=text:Twice."]
    again = _cli(store, "replay", first, *flags, "--", *agent)
    second = json.loads(again.stdout)["replay_run_id"]
    runs = _cli(store, "runs").stdout.splitlines()
    at = next(i for i, line in enumerate(runs) if line.startswith(f"└ {first}"))
    assert runs[at + 1].startswith(f"  └ {second}"), runs  # one level further in
    assert f"fork of {first}" in runs[at + 1]


@pytest.mark.subprocess
def test_a_model_answer_is_overridden_as_text_and_as_json_streamed_or_not(
    recorded: tuple[Path, Path], tmp_path: Path
) -> None:
    (tmp_path / "answer.json").write_text(json.dumps(CHAT_BODY))
    # Step 3 was a plain JSON answer, step 8 a stream: each is served in the shape asked.
    done = _fork(
        recorded, "--override", "3=@answer.json", "--override", "8=text:All sorted.", cwd=tmp_path
    )
    assert "agent> From JSON.\n" in done.stderr
    assert done.stderr.rstrip().endswith("agent> All sorted.")
    done = _fork(
        recorded, "--override", "3=text:In text.", "--override", "8=@answer.json", cwd=tmp_path
    )
    assert "agent> In text.\n" in done.stderr
    assert done.stderr.rstrip().endswith("agent> From JSON.")
    forked = {s["recorded"]: s["forked"] for s in json.loads(done.stdout)["steps"]}
    assert forked[3] == "override text:In text." and forked[8] == "override @answer.json"


@pytest.mark.subprocess
def test_a_long_inline_answer_is_named_by_its_start(recorded: tuple[Path, Path]) -> None:
    inline = json.dumps(CHAT_BODY)
    done = _fork(recorded, "--override", f"3={inline}")
    assert "agent> From JSON.\n" in done.stderr
    change = f"override {inline[:59]}…"
    assert json.loads(done.stdout)["fork"] == [{"step": 3, "change": change}]


@pytest.mark.subprocess
def test_a_value_and_an_http_answer_are_overridden(recorded: tuple[Path, Path]) -> None:
    store, _ = recorded
    done = _fork(
        recorded,
        "--override",
        '0="00000000-0000-4000-8000-000000000000"',
        "--override",
        '4=503:{"city": "Oslo"}',
    )
    assert done.returncode == 0, done.stderr  # every request as recorded: only answers changed
    assert done.stderr.startswith("ticket 00000000-0000-4000-8000-000000000000\n")
    assert "\nweather Oslo\n" in done.stderr
    fork_id = json.loads(done.stdout)["replay_run_id"]
    with Store.open(store, create=False) as opened:
        weather = next(s for s in opened.steps(fork_id) if s.index == 4)
        marks = {
            s["attributes"].get("replay.step.index"): s["attributes"].get("replay.fork.change")
            for s in opened.spans(fork_id)
        }
    assert weather.status_code == 503
    assert marks[4] == 'override 503:{"city": "Oslo"}'  # on the HTTP step's own span
    assert marks[0] == 'override "00000000-0000-4000-8000-000000000000"'


@pytest.mark.subprocess
def test_a_write_tool_runs_only_with_allow_writes(recorded: tuple[Path, Path]) -> None:
    _, database = recorded
    before = _refunds(database)
    done = _fork(recorded, "--override", "3=text:Hm.")
    assert done.returncode == 1, done.stderr  # the answer changed: a fork, not a replay
    assert _refunds(database) == before  # served from the recording
    done = _fork(recorded, "--allow-writes")
    assert done.returncode == 0, done.stderr  # it ran, and answered as recorded
    assert _refunds(database) == before + 1
    report = json.loads(done.stdout)
    assert report["fork"] == [{"step": None, "change": "write tools run (--allow-writes)"}]
    refund = next(s for s in report["steps"] if s["endpoint"] == "tool:refund_order")
    assert refund["live"] is True


@pytest.mark.subprocess
def test_a_write_the_fork_refused_is_shown_refused_not_served(
    recorded: tuple[Path, Path],
) -> None:
    """Step 6 overridden to ask ``refund_order`` for another order: the fork refuses the
    write (the recording refunded A-1234), and ``show FORK`` said ``served`` in its fork
    column for the step that was refused."""
    store, database = recorded
    before = _refunds(database)
    call = {"name": "refund_order", "arguments": '{"order_id": "B-5678", "reason": "broken"}'}
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_other", "type": "function", "function": call}],
    }
    body = {
        **CHAT_BODY,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }
    done = _fork(recorded, "--override", f"6={json.dumps(body)}")
    assert done.returncode == 1, done.stdout + done.stderr
    assert _refunds(database) == before
    report = json.loads(done.stdout)
    refund = next(s for s in report["steps"] if s["endpoint"] == "tool:refund_order")
    assert (refund["recorded"], refund["refused"]) == (7, True)
    shown = json.loads(_cli(store, "show", report["replay_run_id"], "--json").stdout)
    forks = {s["index"]: s["fork"] for s in shown["steps"]}
    assert forks[6].startswith('override {"id": "chatcmpl-fork"') and forks[7] == "refused"
    assert forks[5] == "served"


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--override", "42=1"), "--override 42: no such step (run r_forked has steps 0-8)"),
        (("--inject", "2=timeout", "--inject", "2=timeout"), "--inject: step 2 is given twice"),
        (("--inject", "2=http:429"), "step 2 is a tool step (tool:lookup_order)"),
        (("--state", "nowhere={}"), "no checkpoint of that name (its checkpoints: after_search)"),
        (("--override", "4=999:@error.json"), "expected STATUS:SPEC with STATUS 100-599"),
        (
            ("--state", "after_search={}", "--live-from", "5"),
            "--state after_search: its checkpoint (step 5) is not served from the recording",
        ),
        (
            ("--override", '3={"type": "message", "content": [{"type": "text", "text": "Hi"}]}'),
            "not an openai.chat_completions response body (it has no 'choices' list)",
        ),
    ],
)
def test_a_bad_fork_is_one_line_and_exit_2(
    recorded: tuple[Path, Path], flags: tuple[str, ...], message: str
) -> None:
    done = _fork(recorded, *flags)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.subprocess
def test_replaying_takes_the_fork_options(recorded: tuple[Path, Path], tmp_path: Path) -> None:
    store, _ = recorded
    database = str(tmp_path / "scratch.sqlite")
    with otel_replay.replaying(
        RUN, store=str(store), state={"after_search": {"city": "Rome"}}
    ) as result:
        said = run_agent(database, DEAD)
    refund_request = next(s for s in result.steps if s.recorded == 6)
    assert any("Rome" in str(c.replayed) for c in refund_request.changes)  # the state steered it
    assert next(s.forked for s in result.steps if s.recorded == 5) == "state after_search"
    with otel_replay.replaying(RUN, store=str(store), override={8: "text:Done."}) as result:
        said = run_agent(database, DEAD)
    assert said[-1] == "agent> Done."
    late = otel_replay.replaying(RUN, store=str(store), override={8: "{}"}, live_from=4)
    with pytest.raises(ConfigError, match="--override 8: the step is not served"):
        late.__enter__()


MARKED = """
import pytest
from tests.replay._fork_agent import run_agent

STORE, RUN, BUNDLE, DB, DEAD = {store!r}, {run!r}, {bundle!r}, {db!r}, {dead!r}

@pytest.mark.otel_replay(RUN, store=STORE, override={{8: "text:Done."}})
def test_last_answer_overridden(replay_result):
    assert run_agent(DB, DEAD)[-1] == "agent> Done."
    assert replay_result.identical, replay_result.first_divergence

@pytest.mark.otel_replay(RUN, store=STORE, override={{3: "text:Nope."}})
def test_an_earlier_answer_changes_what_follows(replay_result):
    run_agent(DB, DEAD)
    assert replay_result.identical, replay_result.first_divergence

@pytest.mark.otel_replay(BUNDLE)
def test_the_exported_fork_is_a_source(replay_result):
    assert run_agent(DB, DEAD)[-1] == "agent> Done."
    assert replay_result.identical, replay_result.first_divergence
"""


@pytest.mark.subprocess
def test_the_marker_takes_the_fork_options_and_a_fork_exports(
    recorded: tuple[Path, Path], tmp_path: Path
) -> None:
    store, _ = recorded
    fork_id = json.loads(_fork(recorded, "--override", "8=text:Done.").stdout)["replay_run_id"]
    bundle = tmp_path / "golden"
    assert _cli(store, "export", fork_id, str(bundle)).returncode == 0
    tests = MARKED.format(
        store=str(store), run=RUN, bundle=str(bundle), db=str(tmp_path / "db.sqlite"), dead=DEAD
    )
    (tmp_path / "test_marked.py").write_text(tests)
    session = run_pytest(tmp_path)
    out = session.stdout
    assert "PASSED test_marked.py::test_last_answer_overridden" in out, out
    assert "PASSED test_marked.py::test_the_exported_fork_is_a_source" in out, out
    assert (
        "FAILED test_marked.py::test_an_earlier_answer_changes_what_follows - AssertionError: "
        "<Divergence: step 6 (openai.chat_completions)"
    ) in out, out
