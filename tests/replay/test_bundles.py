"""``otel-replay export RUN DIR``: a run as a golden bundle (a directory to check in) that
``replay`` takes as a source, holding the recorded bytes and nothing the redaction rules name;
and a bundle as hostile input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest

import otel_replay
from examples.support_agent import CONVERSATION, SupportAgent
from otel_replay._canonical import sha256_tag
from otel_replay.errors import SourceError
from otel_replay.redact import Redactor
from otel_replay.replay import RecordedStep, Run
from otel_replay.replay.sources import Limits, load_run
from otel_replay.replay.sources._bundle import read_bundle, write_bundle
from tests.replay._recorded import recorded_step
from tests.replay.conftest import CLAUDE, ERRORS, SUPPORT, Recorded, assert_matches_wire

CLI = Path(sys.executable).parent / "otel-replay"
DEAD = "http://127.0.0.1:9"  # nothing listens: a request the bundle does not answer fails


def _export(store: Path, run: str, target: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLI), "export", "--store", str(store), run, str(target)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **env},
    )


@pytest.fixture(scope="module")
def bundles(recorded: Recorded, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """SUPPORT (tool calls, a streamed answer), CLAUDE (Anthropic, streamed) and ERRORS (a
    429, a stream cut short, a refused connection), each exported once."""
    root = tmp_path_factory.mktemp("bundles")
    out = {}
    for run in (SUPPORT, CLAUDE, ERRORS):
        done = _export(recorded.store, run, root / run)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"exported run {run} (")
        out[run] = root / run
    return out


@pytest.mark.subprocess
def test_a_bundle_holds_the_recorded_bytes_and_reads_as_its_run(
    recorded: Recorded, bundles: dict[str, Path]
) -> None:
    for run_id, path in bundles.items():
        stored, bundled = load_run(run_id, store=str(recorded.store)), load_run(str(path))
        assert (bundled.run_id, bundled.seed, bundled.start_ns) == (
            run_id,
            stored.seed,
            stored.start_ns,
        )
        facts = [_facts(step) for step in bundled.steps]
        assert facts == [_facts(step) for step in stored.steps]
        assert facts
    assert_matches_wire(load_run(str(bundles[SUPPORT])), recorded)
    # Reviewable: an indented manifest, and each body a file of its own named for its kind.
    manifest = (bundles[SUPPORT] / "bundle.json").read_text()
    assert manifest.startswith('{\n  "format": "otel-replay bundle",\n  "version": 1,')
    files = sorted(p.name for p in (bundles[SUPPORT] / "steps").iterdir())
    assert "0.request.json" in files and "0.response.json" in files
    assert any(name.endswith(".response.sse") for name in files)  # the streamed answer


def _facts(recorded: RecordedStep) -> tuple[object, ...]:
    return (
        recorded.step.index,
        recorded.request_body,
        recorded.step.request_hash,
        recorded.step.status_code,
        recorded.step.response_headers,
        recorded.step.response_body,
        recorded.step.chunks,
        recorded.step.complete,
        recorded.step.error_type,
        recorded.duration_ns,
        recorded.step.start_ns,
    )


def _replay_support(bundle: Path) -> None:
    with (
        otel_replay.replaying(str(bundle)) as result,
        otel_replay.run(name="support-agent", seed=7, run_id=SUPPORT),
        openai.OpenAI(base_url=f"{DEAD}/v1", api_key="sk-bundle", max_retries=0) as client,
        httpx.Client(base_url=f"{DEAD}/tools") as tools,
    ):
        agent = SupportAgent(client, tools, "gpt-4o-mini")
        for number, question in enumerate(CONVERSATION, start=1):
            agent.ask(question, stream=number == len(CONVERSATION))
    assert result.identical, result.first_divergence
    assert result.matched()["hash"] == len(result.run.steps)


@pytest.mark.subprocess
def test_the_agent_replays_from_its_bundle_with_the_provider_gone(
    bundles: dict[str, Path],
) -> None:
    _replay_support(bundles[SUPPORT])


@pytest.mark.subprocess
def test_export_applies_the_redaction_rules_as_they_are_now(
    recorded: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pattern added after the recording: nothing it names is left in the bundle's bytes.
    target = tmp_path / "redacted"
    done = _export(recorded.store, SUPPORT, target, OTEL_REPLAY_REDACT="A-1234")
    assert done.returncode == 0, done.stderr
    every_byte = b"".join(p.read_bytes() for p in target.rglob("*") if p.is_file())
    assert b"A-1234" in b"".join(
        step.request_body or b"" for step in load_run(SUPPORT, store=str(recorded.store)).steps
    )
    assert b"A-1234" not in every_byte and b"REDACTED" in every_byte
    # Replayed under the same rules, today's requests are redacted as the bundle's were.
    monkeypatch.setenv("OTEL_REPLAY_REDACT", "A-1234")
    _replay_support(target)


@pytest.mark.subprocess
def test_export_never_overwrites(recorded: Recorded, tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    done = _export(recorded.store, SUPPORT, target)
    assert done.returncode == 2
    assert done.stderr.strip() == f"Error: {target} already exists and is not an empty directory"
    assert [p.name for p in target.iterdir()] == ["notes.txt"]
    missing = _export(recorded.store, "r_nope", tmp_path / "other")
    assert missing.returncode == 2 and "no run 'r_nope'" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1


def _copy(bundle: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(bundle, tmp_path / "copy", symlinks=True))


def _edit_manifest(path: Path, edit: object) -> None:
    document = json.loads((path / "bundle.json").read_text())
    edit(document)  # type: ignore[operator]
    (path / "bundle.json").write_text(json.dumps(document))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda p: (p / "bundle.json").write_text("{not json"), "bundle.json is not JSON"),
        (
            lambda p: _edit_manifest(p, lambda d: d.update(version=2)),
            "a bundle of format version 2; this otel-replay reads version 1",
        ),
        (
            lambda p: _edit_manifest(p, lambda d: d["steps"][0].update(response="../../x")),
            "'../../x' is not a body file a bundle may name",
        ),
        (
            lambda p: _edit_manifest(p, lambda d: d["steps"][0].update(index="zero")),
            "bundle.json is not a bundle manifest (at steps/0/index: 'zero' is not of type",
        ),
        (
            lambda p: (p / "steps" / "0.request.json").write_bytes(b'{"model":"other"}'),
            "steps/0.request.json does not have the hash step 0 recorded",
        ),
        (lambda p: (p / "steps" / "0.response.json").unlink(), "cannot read 0.response.json"),
        (
            lambda p: (
                (p / "steps" / "0.response.json").unlink(),
                (p / "steps" / "0.response.json").symlink_to("/etc/hostname"),
            ),
            "0.response.json is not a plain file",
        ),
    ],
    ids=["not-json", "version", "traversal", "schema", "edited-request", "missing", "symlink"],
)
@pytest.mark.subprocess
def test_a_damaged_bundle_is_refused_naming_what_is_wrong(
    bundles: dict[str, Path], tmp_path: Path, damage: object, message: str
) -> None:
    copy = _copy(bundles[SUPPORT], tmp_path)
    damage(copy)  # type: ignore[operator]
    with pytest.raises(SourceError) as caught:
        load_run(str(copy))
    assert str(caught.value).startswith(f"{copy}: ")
    assert message in str(caught.value)


@pytest.mark.subprocess
def test_the_replay_verb_refuses_a_damaged_bundle_in_one_line(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    copy = _copy(bundles[ERRORS], tmp_path)
    _edit_manifest(copy, lambda d: d.update(format="something else"))
    done = subprocess.run(
        [str(CLI), "replay", str(copy), "--", sys.executable, "-c", "pass"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"Error: {copy}: bundle.json is not a bundle manifest (at format: 'otel-replay "
        "bundle' was expected)"
    ]


def test_odd_bodies_and_headers_export_and_read_back(tmp_path: Path) -> None:
    # A body nested past what json reads, and a header value outside Latin-1 (an OTLP source
    # can hold anything): exported as they are, not a traceback.
    deep = b"[" * 100_000 + b"]" * 100_000
    step = recorded_step(
        index=0,
        kind="http",
        endpoint="POST /deep",
        method="POST",
        url="http://x.test/deep",
        request_body=deep,
        request_hash=sha256_tag(deep),
        status_code=200,
        response_headers=(("content-type", "application/json"), ("x-note", "café ☕")),
        response_body=b"{}",
        fidelity="exact",
    )
    value = recorded_step(  # a value's answer: JSON with no content type
        index=1,
        kind="value",
        endpoint="value:uuid4",
        method="VALUE",
        url="value:uuid4",
        request_body=b"{}",
        request_hash=sha256_tag(b"{}"),
        status_code=None,
        response_headers=(),
        response_body=b'"42597804-4a0c-4417-a16d-fd744c1fd3e8"',
        fidelity="exact",
    )
    write_bundle(Run("r_odd", "test", (step, value)), tmp_path / "odd", Redactor())
    assert (tmp_path / "odd" / "steps" / "1.response.json").exists()
    back = read_bundle(tmp_path / "odd", Limits.from_env())
    assert back.steps[0].request_body == deep
    assert back.steps[0].step.response_headers == [
        ("content-type", "application/json"),
        ("x-note", "café ?"),
    ]


LOADED = """
import sys, httpx, otel_replay
with otel_replay.replaying(sys.argv[1]):
    try:
        httpx.get("http://127.0.0.1:9/nothing-recorded")
    except otel_replay.UnmatchedRequestError:
        print("served by the replay")
print(sorted(m for m in ("jsonschema", "httpx2", "otel_replay.store") if m in sys.modules))
"""


@pytest.mark.subprocess
def test_a_replay_of_a_bundle_loads_no_checker_nor_client_it_does_not_use(
    bundles: dict[str, Path],
) -> None:
    # Each xdist worker pays for what its first marked test imports: jsonschema only says
    # why a manifest is refused, a bundle needs no store, an agent of httpx no httpx2.
    done = subprocess.run(
        [sys.executable, "-c", LOADED, str(bundles[SUPPORT])],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    assert done.stdout.splitlines() == ["served by the replay", "[]"], done.stderr
