"""``otel-replay replay --all DIR -- CMD``: a corpus of golden bundles replayed several at once,
a line per run and a summary.

The corpus: two runs of ``_corpus_agent`` (2 and 4 questions) really recorded against the
stand-in and exported as bundles, one of them under a sub-directory, and a copy of one whose
``bundle.json`` is damaged. The code change (CORPUS_CHANGE=1) words the fourth question
otherwise: only the 4-question run reaches it. Each replay is a process (about a second of
CPU), so the tests run as few as show each behaviour.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

import otel_replay
from examples.standin import StandIn
from otel_replay.redact import Redactor
from otel_replay.replay.sources import load_run, write_bundle
from tests.cli import _corpus_agent
from tests.cli._checks import assert_bad_input
from tests.export._support import ROOT, Pipeline

pytestmark = pytest.mark.subprocess

CLI = Path(sys.executable).parent / "otel-replay"
AGENT = Path(_corpus_agent.__file__)
RUNS = {"a-short": 2, "nested/c-long": 4}
LINE = re.compile(
    r"(?P<verdict>identical|diverged|bad recording|agent failed|error) +"
    r"(?P<seconds>\d+\.\d\d) s  (?P<bundle>\S+) +(?P<run>\S+)(?: {2,}(?P<detail>\S.*))?"
)
ISOLATION = ("isolated: ", "filtered: ", "not isolated ", "not filtered ", "no PID namespace")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The corpus: each run recorded through the real exporter, exported as ``export``
    does; ``b-broken`` a copy of ``a-short`` whose manifest is not JSON."""
    root = tmp_path_factory.mktemp("corpus")
    store = root / "store"
    with StandIn(event_delay=0.001) as standin, Pipeline(store):
        for name, turns in RUNS.items():
            with otel_replay.run(name="corpus", run_id=f"r_{name.rsplit('/')[-1]}"):
                _corpus_agent.converse(standin.base_url, turns)
    for name, turns in RUNS.items():
        run = load_run(f"r_{name.rsplit('/')[-1]}", store=str(store))
        assert len(run.steps) == turns + 1  # the value, then one step per question
        write_bundle(run, root / "corpus" / name, Redactor())
    shutil.copytree(root / "corpus" / "a-short", root / "corpus" / "b-broken")
    (root / "corpus" / "b-broken" / "bundle.json").write_text("{not json")
    return root / "corpus"


def _replay_all(
    tmp_path: Path, *args: str, timeout: float = 120, **env: str
) -> subprocess.CompletedProcess[str]:
    """``otel-replay replay --store STORE ARGS -- python _corpus_agent.py`` from the repo."""
    argv = [str(CLI), "replay", "--store", str(tmp_path / "store"), *args]
    return subprocess.run(
        [*argv, "--", sys.executable, str(AGENT)],
        env={k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _runs(lines: list[str]) -> dict[str, dict[str, str]]:
    """The run lines by bundle (they come in the order the runs ended)."""
    out = {}
    for line in lines:
        match = LINE.fullmatch(line)
        assert match is not None, line
        out[match["bundle"]] = match.groupdict()
    return out


def test_each_bundle_is_one_line_and_a_code_change_diverges_the_run_it_reaches(
    corpus: Path, tmp_path: Path
) -> None:
    done = _replay_all(tmp_path, "--all", str(corpus), "-j", "2", CORPUS_CHANGE="1")
    assert done.returncode == 1, done.stdout + done.stderr  # a divergence before a bad bundle
    assert done.stderr == ""
    header, *lines = done.stdout.splitlines()
    assert header == f"replaying 3 bundles under {corpus}, 2 at a time"
    runs = _runs(lines[:3])
    assert {name: (run["verdict"], run["run"]) for name, run in runs.items()} == {
        f"{corpus}/a-short": ("identical", "r_a-short"),
        f"{corpus}/b-broken": ("bad recording", "-"),
        f"{corpus}/nested/c-long": ("diverged", "r_c-long"),
    }
    assert runs[f"{corpus}/a-short"]["detail"] is None
    assert runs[f"{corpus}/b-broken"]["detail"].startswith("bundle.json is not JSON (")
    divergence = runs[f"{corpus}/nested/c-long"]["detail"]
    assert divergence.startswith("step 4 (openai.chat_completions): message ")
    assert "refund it today" in divergence
    *isolation, summary, rerun = lines[3:]
    assert isolation and all(line.startswith(ISOLATION) for line in isolation)
    assert re.fullmatch(
        r"3 runs in \d+\.\d s: 1 identical, 1 diverged, 1 bad recording", summary
    ), summary
    assert rerun == (
        f"one run's whole report: otel-replay replay {corpus}/nested/c-long [OPTIONS] -- "
        f"{sys.executable} {AGENT}"
    )


def test_a_shard_replays_its_part_and_json_is_one_document(corpus: Path, tmp_path: Path) -> None:
    """In path order the corpus is a-short, b-broken, nested/c-long: shard 3/3 is c-long,
    which today's code (unchanged) replays identically: exit 0."""
    done = _replay_all(tmp_path, "--all", str(corpus), "--shard", "3/3", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    (run,) = document.pop("runs")
    assert document.pop("elapsed_s") >= run.pop("elapsed_s") > 0  # both rounded to 1 ms
    replay_run_id = run.pop("replay_run_id")
    assert document == {
        "directory": str(corpus),
        "shard": "3/3",
        "jobs": 1,
        "counts": {"identical": 1},
        "stopped_by": None,
        "exit_code": 0,
    }
    assert run == {
        "bundle": f"{corpus}/nested/c-long",
        "run_id": "r_c-long",
        "verdict": "identical",
        "exit_code": 0,
        "detail": None,
    }
    # The re-execution is a run of the store, as after `replay BUNDLE`.
    assert len(load_run(replay_run_id, store=str(tmp_path / "store")).steps) == 5


def test_a_bad_bundle_is_a_failed_line_not_a_traceback(
    corpus: Path, invoke: Callable[..., Result], tmp_path: Path
) -> None:
    broken = corpus / "b-broken"
    result = invoke("replay", "--store", str(tmp_path), "--all", str(broken), "--", "python")
    assert result.exit_code == 2, result.output
    assert result.stderr == ""
    header, line, summary, rerun = result.stdout.splitlines()
    assert header == f"replaying 1 bundle under {broken}, 1 at a time"
    run = _runs([line])[str(broken)]
    assert (run["verdict"], run["run"]) == ("bad recording", "-")
    assert run["detail"].startswith("bundle.json is not JSON (Expecting property name")
    assert re.fullmatch(r"1 run in \d+\.\d s: 1 bad recording", summary)
    assert rerun == f"one run's whole report: otel-replay replay {broken} [OPTIONS] -- python"


def test_a_shard_with_no_bundle_replays_nothing_and_passes(
    corpus: Path, invoke: Callable[..., Result]
) -> None:
    """More CI jobs than bundles: the jobs left over pass."""
    result = invoke("replay", "--all", str(corpus), "--shard", "4/4", "--", "python")
    assert result.exit_code == 0, result.output
    header, summary = result.stdout.splitlines()
    assert header == f"replaying shard 4/4 of the 3 bundles under {corpus}: 0 of them, 1 at a time"
    assert re.fullmatch(r"0 runs in \d+\.\d s: none", summary)


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--override", "1=text:hi"], ["--all replays every run as it was recorded: --override"]),
        (
            ["--live-from", "2", "--report", "r.html"],
            ["--live-from and --report are for one run (give RUN instead of --all)"],
        ),
        (["r_abc", "--"], ["'r_abc' comes before --, where no RUN goes"]),
        (["--shard", "3/2"], ["Invalid value for '--shard': '3/2': K must be from 1 to N"]),
        (["--shard", "x"], ["'x' is not K/N (say 2/4)"]),
        (["-j", "0"], ["Invalid value for '-j' / '--jobs'"]),
    ],
    ids=["override", "live-from-report", "run-too", "shard-range", "shard-form", "jobs"],
)
def test_what_makes_no_sense_across_runs_is_refused_with_one_line(
    corpus: Path, invoke: Callable[..., Result], args: list[str], names: list[str]
) -> None:
    assert_bad_input(invoke("replay", "--all", str(corpus), *args, "--", "python"), *names)


def test_a_corpus_with_nothing_to_replay_is_bad_input(
    corpus: Path, invoke: Callable[..., Result], tmp_path: Path
) -> None:
    (tmp_path / "empty" / ".hidden.partial").mkdir(parents=True)
    (tmp_path / "empty" / ".hidden.partial" / "bundle.json").write_text("{}")
    assert_bad_input(
        invoke("replay", "--all", str(tmp_path / "empty"), "--", "python"),
        f"no bundle under {tmp_path / 'empty'} (a bundle is a directory holding bundle.json",
    )
    assert_bad_input(
        invoke("replay", "--all", str(corpus), "--", "no-such-program-here"),
        "cannot run 'no-such-program-here': no such program",
    )
    assert_bad_input(invoke("replay", "-j", "2", "r_abc", "--", "python"), "go with --all DIR")
    assert_bad_input(invoke("replay", "--all", str(corpus)), "Missing argument 'CMD...'")


@pytest.mark.parametrize(
    ("signum", "jobs"), [(signal.SIGINT, 2), (signal.SIGTERM, 1)], ids=["ctrl-c", "sigterm"]
)
def test_a_stop_ends_every_program_and_leaves_no_scratch(
    corpus: Path, tmp_path: Path, signum: int, jobs: int
) -> None:
    """Stopped while its programs hang, ``replay --all`` ends them all (Ctrl-C kills them;
    SIGTERM is passed on to them first), removes each run's scratch directory, prints the
    runs done and exits 128+N, with no traceback."""
    hung, scratch = tmp_path / "hung", tmp_path / "tmp"
    hung.mkdir()
    scratch.mkdir()
    marker = f"corpus-stop-{os.getpid()}-{signum}"
    argv = [str(CLI), "replay", "--store", str(tmp_path / "store"), "--all", str(corpus)]
    command = [*argv, "-j", str(jobs), "--", sys.executable, str(AGENT), marker]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    child = subprocess.Popen(
        command,
        env=env | {"CORPUS_HANG": str(hung), "TMPDIR": str(scratch)},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while len(list(hung.iterdir())) < jobs and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(list(hung.iterdir())) == jobs, "the programs did not start"
        child.send_signal(signum)
        stdout, stderr = child.communicate(timeout=30)
    finally:
        child.kill()
        child.communicate()  # reaped and its pipes closed, whatever happened above
    assert child.returncode == 128 + signum, stdout + stderr
    assert stderr == ""
    header, *lines = stdout.splitlines()
    assert header == f"replaying 3 bundles under {corpus}, {jobs} at a time"
    name = signal.Signals(signum).name
    if jobs == 2:  # a-short (which hangs), b-broken (which fails at once), then nested/c-long
        line, summary, rerun = lines
        assert _runs([line])[f"{corpus}/b-broken"]["verdict"] == "bad recording"
        tally = rf"1 run in \d+\.\d s: 1 bad recording; stopped by {name} with 2 not replayed"
        assert rerun.startswith(f"one run's whole report: otel-replay replay {corpus}/b-broken ")
    else:  # a-short, which hangs
        (summary,) = lines
        tally = rf"0 runs in \d+\.\d s: none; stopped by {name} with 3 not replayed"
    assert re.fullmatch(tally, summary), summary
    assert list(scratch.iterdir()) == []
    assert not _processes_naming(marker)


def _processes_naming(marker: str) -> list[str]:
    """Command lines of the live processes that hold ``marker``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return found
