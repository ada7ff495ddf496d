"""Golden tests that stay current: ``--otel-replay-record=none|new|all``, what
``replay_result`` shows of a replay, async tests (pytest-asyncio, anyio), a marker over a
directory of bundles, and pytest-xdist; each in a pytest session of its own (``pytester``)
that loads the plugin as a user's does, recording the agent against the stand-in."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from examples.standin import StandIn
from otel_replay.redact import Redactor
from otel_replay.replay import Run
from otel_replay.replay.sources import load_run, write_bundle
from tests.replay._recorded import recorded_step

pytest_plugins = ["pytester"]

AGENT = Path(__file__).with_name("_golden_agent.py")
INI = """[pytest]
asyncio_mode = strict
asyncio_default_fixture_loop_scope = function
"""

GOLDEN = """
import pytest
from agent import run_agent, run_agent_async

ORDER = {"order_id": "A-1234", "status": "shipped"}


def check(replay_result, answer):
    assert replay_result.identical, replay_result.first_divergence
    first, second = replay_result.model_calls()
    assert first.messages == [
        {"role": "user", "parts": [{"type": "text", "content": "Where is my order A-1234?"}]}
    ]
    assert [t["name"] for t in first.tools] == ["lookup_order"]
    assert [(c["name"], c["arguments"]) for c in first.tool_calls] == [
        ("lookup_order", {"order_id": "A-1234"})
    ]
    assert second.messages[-1]["role"] == "tool" and second.text == answer
    (call,) = replay_result.tool_calls("lookup_order")
    assert (call.arguments, call.result, call.error) == ({"order_id": "A-1234"}, ORDER, None)
    (now,) = replay_result.values
    assert now.name == "now" and now.value.startswith("20")
    (state,) = replay_result.checkpoints("after_lookup")
    assert state.state == {"order": ORDER}
    assert [s.endpoint for s in replay_result.steps] == [
        "openai.chat_completions", "value:now", "tool:lookup_order",
        "checkpoint:after_lookup", "openai.chat_completions",
    ]


@pytest.mark.otel_replay("golden/sync")
def test_sync(replay_result):
    check(replay_result, run_agent())


@pytest.mark.asyncio
@pytest.mark.otel_replay("golden/asyncio")
async def test_asyncio(replay_result):
    check(replay_result, await run_agent_async())


@pytest.mark.anyio
@pytest.mark.otel_replay("golden/anyio")
async def test_anyio(replay_result):
    check(replay_result, await run_agent_async())
"""


@pytest.fixture(scope="module")
def provider() -> StandIn:
    with StandIn() as standin:
        yield standin


@pytest.fixture
def project(pytester: pytest.Pytester, provider: StandIn, monkeypatch: pytest.MonkeyPatch):
    """A project with the agent and its golden tests, the provider at ``GOLDEN_URL``."""
    monkeypatch.setenv("GOLDEN_URL", provider.openai_base_url)
    monkeypatch.setenv("COLUMNS", "400")  # summary lines uncut
    shutil.copy(AGENT, pytester.path / "agent.py")
    pytester.makeini(INI)
    pytester.makepyfile(test_golden=GOLDEN)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:xdist", *args)


def test_record_new_then_replay_then_a_regression_fails_readably(
    project: pytest.Pytester, provider: StandIn
) -> None:
    missing = run(project, "-k", "test_sync")
    missing.assert_outcomes(errors=1, deselected=2)
    missing.stdout.fnmatch_lines(
        [
            "*otel-replay: cannot replay '*/golden/sync': *(record it: pytest "
            "--otel-replay-record=new)"
        ]
    )

    recorded = run(project, "--otel-replay-record=new")
    recorded.assert_outcomes(passed=3)
    golden = project.path / "golden"
    recorded.stdout.fnmatch_lines(
        [
            "*= otel-replay =*",
            f"test_golden.py::test_sync: recorded {golden / 'sync'} (5 steps)",
            f"test_golden.py::test_asyncio: recorded {golden / 'asyncio'} (5 steps)",
            f"test_golden.py::test_anyio[[]asyncio[]]: recorded {golden / 'anyio'} (5 steps)",
        ]
    )
    assert sorted(p.name for p in golden.iterdir()) == ["anyio", "asyncio", "sync"]
    assert (golden / "sync" / "bundle.json").is_file()
    assert "sk-golden-not-a-secret" not in (golden / "sync" / "bundle.json").read_text()

    # CI: replays, the provider never asked; `new` leaves existing bundles alone.
    asked = len(provider.received)
    for args in ((), ("--otel-replay-record=new",)):
        replayed = run(project, *args)
        replayed.assert_outcomes(passed=3)
        assert "otel-replay =" not in replayed.stdout.str()
    assert len(provider.received) == asked

    # A regression: another model asked for. The summary line names the step and the change.
    agent = project.path / "agent.py"
    agent.write_text(agent.read_text().replace('MODEL = "gpt-4o-mini"', 'MODEL = "gpt-4o"'))
    regressed = run(project, "-k", "test_sync")
    regressed.assert_outcomes(failed=1, deselected=2)
    regressed.stdout.fnmatch_lines(
        [
            "FAILED test_golden.py::test_sync - AssertionError: <Divergence: step 0 "
            "(openai.chat_completions): model: gpt-4o-mini → gpt-4o*"
        ]
    )


def test_record_all_replaces_each_bundle_and_prints_the_diff(
    project: pytest.Pytester, provider: StandIn
) -> None:
    run(project, "--otel-replay-record=new", "-k", "test_sync").assert_outcomes(
        passed=1, deselected=2
    )
    bundle = project.path / "golden" / "sync"
    (bundle / "NOTES.md").write_text("why this run is golden\n")
    # The same code, live again: the provider's answers carry new ids and times, shown as
    # changes of the response only.
    again = run(project, "--otel-replay-record=all", "-k", "test_sync")
    again.assert_outcomes(passed=1, deselected=2)
    again.stdout.fnmatch_lines(
        [
            f"test_golden.py::test_sync: re-recorded {bundle}:",
            "*tool:lookup_order * same",
            "first divergence: step 0 (openai.chat_completions gpt-4o-mini): response",
        ]
    )

    agent = project.path / "agent.py"
    agent.write_text(agent.read_text().replace('MODEL = "gpt-4o-mini"', 'MODEL = "gpt-4o"'))
    asked = len(provider.received)
    changed = run(project, "--otel-replay-record=all", "-k", "test_sync")
    changed.assert_outcomes(passed=1, deselected=2)
    assert len(provider.received) == asked + 2  # a live run
    out = changed.stdout.str()
    # The lines `otel-replay diff OLD NEW` prints: both runs, the aligned steps, the first
    # divergence and its change.
    changed.stdout.fnmatch_lines(
        [
            f"test_golden.py::test_sync: re-recorded {bundle}:",
            "A: run r_*",
            "B: run r_*",
            "*openai.chat_completions gpt-4o-mini → gpt-4o*changed: model, response",
            "first divergence: step 0 (openai.chat_completions gpt-4o-mini): model, response",
            "  model: gpt-4o-mini → gpt-4o",
            "5 aligned steps: *",
        ]
    )
    assert "Traceback" not in out
    # The new bundle replays the new code; the reviewer's notes stayed with it.
    run(project, "-k", "test_sync").assert_outcomes(passed=1, deselected=2)
    assert (bundle / "NOTES.md").read_text() == "why this run is golden\n"
    assert not [p for p in bundle.parent.iterdir() if p.name.startswith(".")]


def test_a_test_that_fails_while_recording_leaves_its_bundle_as_it_was(
    project: pytest.Pytester,
) -> None:
    run(project, "--otel-replay-record=new", "-k", "test_sync").assert_outcomes(
        passed=1, deselected=2
    )
    bundle = project.path / "golden" / "sync"
    before = {p: p.read_bytes() for p in bundle.rglob("*") if p.is_file()}
    agent = project.path / "agent.py"
    agent.write_text(agent.read_text().replace('"shipped"', '"lost"'))
    failed = run(project, "--otel-replay-record=all", "-k", "test_sync")
    failed.assert_outcomes(failed=1, deselected=2)
    failed.stdout.fnmatch_lines(
        ["test_golden.py::test_sync: not recorded: the test did not pass (the bundle is as it was)"]
    )
    assert {p: p.read_bytes() for p in bundle.rglob("*") if p.is_file()} == before


SHARED = """
import pytest
from agent import run_agent

@pytest.mark.otel_replay("golden/shared")
@pytest.mark.parametrize("n", [1, 2])
def test_twice(replay_result, n):
    run_agent()

@pytest.mark.otel_replay("r_20200101T000000_deadbeef")
def test_a_run_id(replay_result):
    pass
"""


def test_a_bundle_named_by_two_tests_or_a_run_id_is_not_recorded(project: pytest.Pytester) -> None:
    project.makepyfile(test_golden=SHARED)
    result = run(project, "--otel-replay-record=new")
    result.assert_outcomes(errors=3)
    result.stdout.fnmatch_lines(
        [
            "test_golden.py::test_twice[[]1[]]: replayed, not recorded: 2 tests name the bundle "
            "*/golden/shared (record it from one test of its own)",
            "test_golden.py::test_a_run_id: replayed, not recorded: "
            "'r_20200101T000000_deadbeef' is not a bundle directory",
        ]
    )
    assert not (project.path / "golden").exists()
    replayed = run(project, "-k", "test_twice")  # the hint names one test to record it from
    replayed.stdout.fnmatch_lines(
        [
            "*otel-replay: cannot replay '*/golden/shared': *(record it from this test alone: "
            "pytest --otel-replay-record=new 'test_golden.py::test_twice[[]1[]]')"
        ]
    )


IN_A_RUN = """
import pytest
import otel_replay
from agent import run_agent


@pytest.mark.otel_replay("golden/in-a-run")
def test_in_a_run(replay_result):
    with otel_replay.run(name="support-agent"):
        run_agent()
    assert len(replay_result.model_calls()) == 2


@pytest.mark.otel_replay("golden/two-runs")
def test_two_runs(replay_result):
    for _ in range(2):
        with otel_replay.run(name="support-agent"):
            run_agent()
"""


def test_an_agent_that_opens_its_own_run_is_recorded_whole(project: pytest.Pytester) -> None:
    # An agent in `otel_replay.run()`, as the README has it: its steps are that run's, not
    # the test's process run, which the bundle was written from: "recorded (0 steps)", and
    # `replay_result` saw nothing while recording.
    project.makepyfile(test_golden=IN_A_RUN)
    recorded = run(project, "--otel-replay-record=new")
    recorded.assert_outcomes(passed=2, errors=1)  # test_two_runs: recording it fails
    golden = project.path / "golden"
    recorded.stdout.fnmatch_lines(
        [
            f"test_golden.py::test_in_a_run: recorded {golden / 'in-a-run'} (5 steps)",
            "*otel-replay: cannot record */golden/two-runs: the test made steps in 2 runs (*)"
            ", each an otel_replay.run() block: a bundle holds one run*",
        ]
    )
    assert not (golden / "two-runs").exists()
    run(project, "-k", "test_in_a_run").assert_outcomes(passed=1, deselected=1)


CORPUS = """
from pathlib import Path

import pytest
from agent import run_agent


@pytest.mark.otel_replay("corpus")
def test_each_run(replay_result, otel_replay_source):
    run_agent(f"Where is my order {Path(otel_replay_source).name}?")
    assert replay_result.identical, replay_result.first_divergence
"""
ORDERS = ("A-1234", "B-9876", "C-5555", "D-4242")


def _corpus(project: pytest.Pytester) -> None:
    """Bundles recorded from live runs, one per order, in ``corpus/``; the last one's
    recording altered (another question), so its replay diverges."""
    record = "\n".join(
        [
            "import pytest",
            "from agent import run_agent",
            "@pytest.mark.parametrize('order', [",
            *(
                f"    pytest.param({o!r}, marks=pytest.mark.otel_replay('corpus/{o}')),"
                for o in ORDERS
            ),
            "])",
            "def test_record(replay_result, order):",
            "    run_agent(f'Where is my order {order}?')",
        ]
    )
    project.makepyfile(test_record=record)
    run(project, "--otel-replay-record=new", "test_record.py").assert_outcomes(passed=4)
    (project.path / "test_record.py").unlink()
    last = project.path / "corpus" / ORDERS[-1]
    recorded = load_run(str(last))
    shutil.rmtree(last)
    moved = project.path / "corpus" / "Z-0000"
    write_bundle(Run(recorded.run_id, "", recorded.steps), moved, Redactor())
    project.makepyfile(test_corpus=CORPUS)


def test_a_marker_over_a_directory_of_bundles_is_one_test_per_bundle(
    project: pytest.Pytester,
) -> None:
    _corpus(project)
    result = run(project, "-v", "test_corpus.py")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "test_corpus.py::test_each_run[[]A-1234[]] PASSED*",
            "test_corpus.py::test_each_run[[]B-9876[]] PASSED*",
            "test_corpus.py::test_each_run[[]C-5555[]] PASSED*",
            "test_corpus.py::test_each_run[[]Z-0000[]] FAILED*",
        ]
    )
    result.stdout.fnmatch_lines(
        ["FAILED test_corpus.py::test_each_run[[]Z-0000[]] - AssertionError: <Divergence: step 0*"]
    )


@pytest.mark.subprocess
def test_xdist_workers_record_and_replay_their_own_tests_with_the_same_results(
    project: pytest.Pytester,
) -> None:
    _corpus(project)
    flags = ("-p", "no:cacheprovider", "-rA", "-v", "-n", "2")
    # Each worker records its own tests, into stores of its own.
    recorded = project.runpytest_subprocess(*flags, "--otel-replay-record=new", "test_golden.py")
    recorded.assert_outcomes(passed=3)
    for name in ("sync", "asyncio", "anyio"):
        recorded.stdout.fnmatch_lines([f"*test_{name}*: recorded */golden/{name} (5 steps)"])
    # What a session in one process finds (the tests above), spread over two workers.
    spread = project.runpytest_subprocess(*flags)
    spread.assert_outcomes(passed=6, failed=1)
    spread.stdout.fnmatch_lines(
        ["FAILED test_corpus.py::test_each_run[[]Z-0000[]] - AssertionError: <Divergence: step 0*"]
    )
    spread.stdout.fnmatch_lines(["*[[]gw0[]]*PASSED*", "*[[]gw1[]]*PASSED*"], consecutive=False)


def _one_call(run_id: str, answer: bytes) -> Run:
    """A run of one HTTP call answered with ``answer``."""
    step = recorded_step(
        index=0,
        kind="http",
        endpoint="POST /x",
        method="POST",
        url="http://tools.test/x",
        request_body=b"{}",
        response_body=answer,
    )
    return Run(run_id, "", (step,))


def test_a_replaced_bundle_reads_whole_at_every_moment(tmp_path: Path) -> None:
    """A reader that loads the bundle while it is replaced again and again reads one whole
    bundle or the other, never a mix or nothing."""
    bundle = tmp_path / "bundle"
    runs = [_one_call(f"r_{n}", b"{}") for n in ("a", "b")]
    write_bundle(runs[0], bundle, Redactor())
    seen: set[str] = set()
    errors: list[Exception] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            try:
                seen.add(load_run(str(bundle)).run_id)
            except Exception as exc:  # each one is the failure
                errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for n in range(60):
            write_bundle(runs[n % 2], bundle, Redactor(), replace=True)
    finally:
        done.set()
        reader.join()
    assert errors == []
    assert seen <= {"r_a", "r_b"} and seen
    assert [p.name for p in tmp_path.iterdir()] == ["bundle"]


def test_diff_compares_two_bundles_step_by_step(tmp_path: Path) -> None:
    """``otel-replay diff A B`` of two bundles reads their steps (a bundle has no spans, so
    importing it into a store, as other sources are, kept none: "identical: 0 steps")."""
    from click.testing import CliRunner

    from otel_replay.cli.main import cli

    for name, answer in (("a", b'{"total": 1}'), ("b", b'{"total": 2}')):
        write_bundle(_one_call(f"r_{name}", answer), tmp_path / name, Redactor())
    result = CliRunner().invoke(cli, ["diff", str(tmp_path / "a"), str(tmp_path / "b")])
    assert result.exit_code == 1, result.output
    assert "A: run r_a  ok  record" in result.output
    assert "first divergence: step 0 (POST /x): response" in result.output
    assert "response $.total: 1 → 2" in result.output
