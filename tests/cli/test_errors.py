"""Bad input: every verb prints one ``Error:`` line naming the thing and exits 2, never a
traceback. Also ``--help``, ``--version`` and what a bug looks like."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

import otel_replay
from otel_replay.cli import _tables
from otel_replay.errors import RunNotFoundError
from otel_replay.store._format import FORMAT_VERSION
from tests.cli._checks import assert_bad_input
from tests.cli._recording import SUPPORT

Invoke = Callable[..., Result]

VERBS = [
    ("runs",),
    ("runs", "--json"),
    ("show", "latest"),
    ("show", "latest", "--json"),
    ("verify",),
    ("gc",),
    ("gc", "--dry-run"),
    ("pin", "latest"),
    ("diff", "latest", "latest"),
    ("diff", "latest", "latest", "--json"),
]
VERB_IDS = [" ".join(verb) for verb in VERBS]


@pytest.mark.parametrize("verb", VERBS, ids=VERB_IDS)
def test_a_missing_store(invoke: Invoke, tmp_path: Path, verb: tuple[str, ...]) -> None:
    missing = tmp_path / "nowhere"
    line = assert_bad_input(invoke(*verb, "--store", str(missing)), str(missing))
    assert line == f"Error: no otel-replay store at {missing} (check --store)"
    assert not missing.exists()  # reading never creates a store


@pytest.mark.parametrize("verb", VERBS, ids=VERB_IDS)
def test_a_truncated_index(invoke: Invoke, store: Path, verb: tuple[str, ...]) -> None:
    index = store / "index.sqlite"
    index.write_bytes(index.read_bytes()[: index.stat().st_size // 2])
    before = index.read_bytes()
    line = assert_bad_input(invoke(*verb, "--store", str(store)), str(index))
    assert "rebuild" in line
    assert index.read_bytes() == before


@pytest.mark.parametrize("verb", VERBS, ids=VERB_IDS)
def test_an_unknown_format_version(invoke: Invoke, store: Path, verb: tuple[str, ...]) -> None:
    (store / "FORMAT").write_text(json.dumps({"format": "otel-replay-store", "version": 99}))
    line = assert_bad_input(invoke(*verb, "--store", str(store)), str(store / "FORMAT"))
    assert "version 99" in line and "Upgrade" in line


@pytest.mark.parametrize(
    "verb", [*VERBS, ("verify", "--rebuild-index")], ids=[*VERB_IDS, "verify --rebuild-index"]
)
def test_a_version_1_store(invoke: Invoke, store: Path, verb: tuple[str, ...]) -> None:
    """The layout before format version 2: refused, named, left as it is."""
    (store / "FORMAT").write_text(json.dumps({"format": "otel-replay-store", "version": 1}))
    before = sorted((p, p.read_bytes()) for p in store.rglob("*") if p.is_file())
    line = assert_bad_input(invoke(*verb, "--store", str(store)), str(store / "FORMAT"))
    assert "format version 1" in line and f"reads version {FORMAT_VERSION} only" in line
    assert sorted((p, p.read_bytes()) for p in store.rglob("*") if p.is_file()) == before


@pytest.mark.parametrize("verb", VERBS, ids=VERB_IDS)
def test_a_bad_setting(invoke: Invoke, store: Path, verb: tuple[str, ...]) -> None:
    result = invoke(*verb, "--store", str(store), env={"OTEL_REPLAY_RETAIN_OK_DAYS": "a week"})
    assert_bad_input(result, "OTEL_REPLAY_RETAIN_OK_DAYS", "'a week'")


def test_an_unwritable_store(invoke: Invoke, store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() == 0:  # root writes anywhere: make the permission check say no
        real_access = os.access

        def access(path: object, mode: int, **kwargs: object) -> bool:
            if mode & os.W_OK and Path(str(path)) == store:
                return False
            return real_access(path, mode, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "access", access)
    else:
        store.chmod(0o500)
    try:
        line = assert_bad_input(invoke("gc", "--store", str(store)), str(store))
        assert "cannot write" in line
    finally:
        store.chmod(0o755)


@pytest.mark.parametrize("verb", [("show", ""), ("pin", ""), ("diff", "", "latest")])
def test_an_empty_run_id_names_no_run(invoke: Invoke, bare: Path, verb: tuple[str, ...]) -> None:
    """Every id starts with the empty string: in a store of one run it would pick that run."""
    before = sorted((p, p.read_bytes()) for p in bare.rglob("*") if p.is_file())
    assert_bad_input(invoke(*verb, "--store", str(bare)), "an empty run id names no run")
    assert sorted((p, p.read_bytes()) for p in bare.rglob("*") if p.is_file()) == before


def test_an_unknown_run(invoke: Invoke, store: Path) -> None:
    assert_bad_input(invoke("show", "r_nope", "--store", str(store)), "'r_nope'", str(store))
    assert_bad_input(invoke("pin", "r_nope", "--store", str(store)), "'r_nope'")


def test_a_run_id_no_file_can_be_named_is_an_unknown_run_on_a_short_line(
    invoke: Invoke, store: Path
) -> None:
    # Once: "Error: [Errno 36] File name too long: 'aaaa…'" with all 5,000 characters, and
    # in-process an OSError (a ValueError for a NUL).
    long_id = "r" * 5000
    line = assert_bad_input(invoke("show", long_id, "--store", str(store)), "no run 'rrrr")
    assert len(line) < 300
    assert_bad_input(invoke("show", "r_\x00x", "--store", str(store)), "no run")
    with pytest.raises(RunNotFoundError, match=r"^no run 'r{99}…' in the store"):
        otel_replay.replaying(long_id, store=str(store)).__enter__()


def test_a_bad_trace_source_given_as_a_run_is_named(
    invoke: Invoke, store: Path, tmp_path: Path
) -> None:
    # `show` and `diff` read an OTLP file, directory or URL as `replay` does.
    traces = tmp_path / "traces.jsonl"
    traces.write_text("{}\n")
    for ref in (str(traces), f"{traces}#r_abc"):
        line = assert_bad_input(invoke("show", ref, "--store", str(store)), str(traces))
        assert line.endswith("not OTLP trace data (no resourceSpans)"), line
    line = assert_bad_input(invoke("diff", "latest", str(traces), "--store", str(store)))
    assert str(traces) in line
    for text, said in (
        ("[1, 2, 3]", "an item of its array is a JSON number"),  # once "(a JSON int)"
        ('"spans"', "a JSON string"),
        ('{"resourceSpans": "x"}', "its resourceSpans is not a list"),  # once "no resourceSpans"
    ):
        traces.write_text(text + "\n")
        line = assert_bad_input(invoke("show", str(traces), "--store", str(store)), str(traces))
        assert line.endswith(f"not OTLP trace data ({said})"), line


def test_latest_in_an_empty_store(invoke: Invoke, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    meta = {"format": "otel-replay-store", "version": FORMAT_VERSION}
    (tmp_path / "empty" / "FORMAT").write_text(json.dumps(meta))
    assert_bad_input(invoke("show", "latest", "--store", str(tmp_path / "empty")), "no runs")


def test_a_directory_that_is_not_a_store(invoke: Invoke, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    line = assert_bad_input(invoke("runs", "--store", str(tmp_path)), str(tmp_path))
    assert "not an otel-replay store" in line
    assert line.endswith("nothing was changed")  # no advice to make one: runs reads only
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]


def test_a_file_instead_of_a_store(invoke: Invoke, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    assert_bad_input(invoke("runs", "--store", str(tmp_path / "file")), str(tmp_path / "file"))


@pytest.mark.parametrize(
    "verb",
    [("runs",), ("import", "r_nope"), ("replay", "latest", "--", "true")],
    ids=["runs", "import", "replay"],
)
def test_a_url_nothing_can_open(invoke: Invoke, verb: tuple[str, ...]) -> None:
    """Every verb, those that open the store their own way (import, replay) included."""
    args = [*verb[:2], "--store", "nosuch://bucket/prefix", *verb[2:]]
    line = assert_bad_input(invoke(*args))
    assert line == "Error: cannot open store nosuch://bucket/prefix: Protocol not known: nosuch"


@pytest.mark.parametrize(
    ("url", "reason"),
    [("http://127.0.0.1:1/store", "Connect call failed"), ("zip:///nowhere", "")],
    ids=["refused", "zip-of-a-directory"],
)
def test_a_store_url_that_cannot_be_opened_is_named(
    invoke: Invoke, tmp_path: Path, url: str, reason: str
) -> None:
    line = assert_bad_input(invoke("runs", "--store", url.replace("/nowhere", str(tmp_path))))
    assert line.startswith("Error: cannot open store ") and reason in line


def test_an_s3_store_without_credentials_is_named_not_a_bug(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # botocore's NoCredentialsError is no OSError: it was exit 70, "a bug in otel-replay".
    for name in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(name)
    nowhere = str(tmp_path / "none")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", nowhere)
    monkeypatch.setenv("AWS_CONFIG_FILE", nowhere)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance to ask either
    line = assert_bad_input(invoke("runs", "--store", "s3://otel-replay-test-bucket/prefix"))
    assert line == (
        "Error: cannot open store s3://otel-replay-test-bucket/prefix: "
        "NoCredentialsError: Unable to locate credentials"
    )


def test_a_corrupt_blob_met_by_show(invoke: Invoke, store: Path) -> None:
    (pack,) = (store / "objects").rglob("*.pack")
    data = bytearray(pack.read_bytes())
    data[40] ^= 0xFF
    pack.write_bytes(bytes(data))
    assert_bad_input(invoke("show", SUPPORT, "--store", str(store)), pack.name)


def test_usage_errors_are_one_line_naming_the_help(invoke: Invoke, store: Path) -> None:
    line = assert_bad_input(invoke("show", "--store", str(store)), "Missing argument 'RUN'")
    assert line.endswith("(see 'cli show --help')")
    assert_bad_input(invoke("nope"), "No such command 'nope'", "(see 'cli --help')")
    assert_bad_input(invoke("runs", "--bogus"), "No such option '--bogus'")
    assert_bad_input(invoke("replay", "--timing", "slow", "r", "--", "x"), "'--timing'")
    assert_bad_input(invoke("runs", "-n", "0"), "'-n' / '--limit'")


def test_an_option_named_as_other_tools_name_it_suggests_ours(invoke: Invoke) -> None:
    # Click's nearest spelling of --fault is --all, which replays every bundle of a folder.
    line = assert_bad_input(invoke("replay", "r", "--fault", "3=timeout", "--", "x"))
    assert "No such option '--fault'. Did you mean '--inject'?" in line
    line = assert_bad_input(invoke("replay", "r", "--set-state", "a=1", "--", "x"))
    assert "No such option '--set-state'. Did you mean '--state'?" in line
    # A command without the option meant keeps click's own suggestions.
    assert "--inject" not in assert_bad_input(invoke("runs", "--fault"))


def test_help_and_version_still_exit_0(invoke: Invoke) -> None:
    assert invoke("--version").exit_code == 0
    shown = invoke("runs", "--help")
    assert shown.exit_code == 0 and shown.stdout.startswith("Usage: cli runs")


@pytest.mark.parametrize("verb", ["runs", "show", "verify", "gc", "pin"])
def test_every_verb_answers_help(invoke: Invoke, verb: str) -> None:
    result = invoke(verb, "--help")
    assert result.exit_code == 0 and "--store PATH|URL" in result.stdout
    assert "OTEL_REPLAY_STORE" in result.stdout


def test_help_and_version(invoke: Invoke) -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for verb in ("runs", "show", "verify", "gc", "pin"):
        assert f"  {verb} " in result.stdout
    assert invoke("--version").stdout == "otel-replay, version 0.1.0\n"


def test_a_bug_is_one_line_too_unless_asked(
    invoke: Invoke, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> None:
        raise TypeError("boom")

    monkeypatch.setattr(_tables, "runs_table", broken)
    result = invoke("runs", "--store", str(store))
    assert result.exit_code == 70 and "Traceback" not in result.output
    line = result.stderr.strip()
    head = "Error: internal error: TypeError: boom (a bug in otel-replay; traceback written to "
    assert line.startswith(head) and line.endswith(".txt)") and "\n" not in line
    written = Path(line.removeprefix(head).removesuffix(")"))
    text = written.read_text()
    written.unlink()
    assert text.startswith("otel-replay ") and "Traceback" in text
    assert 'raise TypeError("boom")' in text and "TypeError: boom" in text
    with pytest.raises(TypeError, match="boom"):
        invoke("--traceback", "runs", "--store", str(store))


def test_a_missing_store_from_the_environment(invoke: Invoke, tmp_path: Path) -> None:
    result = invoke("runs", env={"OTEL_REPLAY_STORE": str(tmp_path / "gone")})
    line = assert_bad_input(result, str(tmp_path / "gone"))
    assert line.endswith("(check OTEL_REPLAY_STORE)")


NO_HOME = "~otel-replay-no-such-user"
"""A ``~user`` that names no home directory: ``Path.expanduser`` raises RuntimeError."""


@pytest.mark.parametrize("verb", VERBS, ids=VERB_IDS)
def test_a_store_under_a_home_that_does_not_exist(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verb: tuple[str, ...]
) -> None:
    """Every verb once stopped on it with an internal error (exit 70)."""
    monkeypatch.chdir(tmp_path)
    where = f"{NO_HOME}/store"
    line = assert_bad_input(invoke(*verb, "--store", where))
    assert line == f"Error: no otel-replay store at {where} (check --store)"
    result = invoke(*verb, env={"OTEL_REPLAY_STORE": where})
    line = assert_bad_input(result, f"OTEL_REPLAY_STORE={where!r}")
    assert line.endswith(f"{NO_HOME} names no home directory")
    assert list(tmp_path.iterdir()) == []  # no directory named ~... made here


def test_a_source_under_a_home_that_does_not_exist(invoke: Invoke, store: Path) -> None:
    source = f"{NO_HOME}/traces.jsonl"
    for verb in (("show", source), ("diff", source, "latest"), ("report", source, "-o", "r")):
        assert_bad_input(invoke(*verb, "--store", str(store)), source)
