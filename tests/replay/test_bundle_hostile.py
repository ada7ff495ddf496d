"""A bundle as hostile input and export as an operation that can fail half-way: a manifest
that would read one way to a reviewer and another to the replay, numbers past what a run can
hold, a ``steps/`` that leads elsewhere; an export that cannot finish leaves nothing behind."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from otel_replay._canonical import sha256_tag
from otel_replay.errors import SourceError
from otel_replay.redact import Redactor
from otel_replay.replay import RecordedStep, Run
from otel_replay.replay.sources import load_run
from otel_replay.replay.sources._bundle import _manifest_check, write_bundle
from otel_replay.replay.sources._bundle_schema import SCHEMA
from tests.cli._checks import assert_bad_input, run_cli
from tests.replay._recorded import recorded_step
from tests.replay.conftest import KEY, SUPPORT, Recorded

CLI = Path(sys.executable).parent / "otel-replay"
REQUEST = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'


def _step(index: int, response: bytes) -> RecordedStep:
    return recorded_step(
        index=index,
        kind="http",
        endpoint="POST /orders",
        method="POST",
        url="http://tools.test/orders",
        request_body=REQUEST,
        request_hash=sha256_tag(REQUEST),
        status_code=200,
        response_headers=(("content-type", "application/json"),),
        response_body=response,
        fidelity="exact",
    )


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bundle of two steps, the second with a 64 KB response."""
    path = tmp_path_factory.mktemp("source") / "bundle"
    large = json.dumps({"text": "x" * 65536}).encode()
    write_bundle(Run("r_base", "test", (_step(0, b"{}"), _step(1, large))), path, Redactor())
    return path


def _no_large_files() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))


@pytest.mark.subprocess
def test_an_export_that_cannot_finish_leaves_nothing_behind(bundle: Path, tmp_path: Path) -> None:
    # A file past the size limit fails the export half-way (EFBIG; Python ignores SIGXFSZ).
    parent = tmp_path / "golden"
    parent.mkdir()
    target = parent / "refund-loop"
    done = subprocess.run(
        [str(CLI), "export", str(bundle), str(target)],
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=_no_large_files,
        # Under the limit, a module compiled afresh would leave its .pyc cut at 16 KiB
        # (importlib does not check the write), and every later import of it would fail.
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"Error: cannot write {target}: File too large"]
    assert list(parent.iterdir()) == []  # no half bundle, no staging directory
    # The place is still free; through a link to an empty directory the bundle lands there.
    (tmp_path / "elsewhere").mkdir()
    target.symlink_to(tmp_path / "elsewhere")
    again = subprocess.run(
        [str(CLI), "export", str(bundle), str(target)], capture_output=True, text=True, check=False
    )
    assert again.returncode == 0, again.stderr
    assert target.is_symlink() and (tmp_path / "elsewhere" / "bundle.json").is_file()
    assert [s.step.response_body for s in load_run(str(target)).steps] == [
        s.step.response_body for s in load_run(str(bundle)).steps
    ]


def _manifest(edit: Callable[[dict[str, object]], None]) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        document = json.loads((path / "bundle.json").read_text())
        edit(document)
        (path / "bundle.json").write_text(json.dumps(document))

    return damage


def _steps_elsewhere(path: Path) -> None:
    outside = path.parent / "outside"
    shutil.move(path / "steps", outside)
    (path / "steps").symlink_to(outside)


def _version_twice(path: Path) -> None:
    text = (path / "bundle.json").read_text()
    (path / "bundle.json").write_text(text.replace('"version": 1,', '"version": 7, "version": 1,'))


def _step_0(**facts: object) -> Callable[[Path], None]:
    return _manifest(lambda d: d["steps"][0].update(facts))  # type: ignore[index]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (_steps_elsewhere, "steps/ is not a directory of the bundle (a link?)"),
        (_version_twice, "bundle.json has the key 'version' twice in one object"),
        (_step_0(index=10**30), "at steps/0/index: 10000000000"),
        (_step_0(start_ns=-1), "at steps/0/start_ns: -1 is less than the minimum of 0"),
        (_step_0(duration_ns=2**63), "at steps/0/duration_ns: 9223372036854775808 is greater"),
        (_step_0(status_code=10**30), "at steps/0/status_code: 10000000000"),
        (_step_0(within=10**30), "at steps/0/within: 10000000000"),
        (_manifest(lambda d: d["run"].update(start_ns=10**30)), "at run/start_ns: 10000000"),  # type: ignore[attr-defined]
    ],
    ids=["steps-link", "duplicate-key", "index", "start", "duration", "status", "within", "run"],
)
def test_a_hostile_manifest_is_refused(
    bundle: Path, tmp_path: Path, damage: Callable[[Path], None], message: str
) -> None:
    copy = Path(shutil.copytree(bundle, tmp_path / "copy", symlinks=True))
    damage(copy)
    with pytest.raises(SourceError) as caught:
        load_run(str(copy))
    assert str(caught.value).startswith(f"{copy}: ")
    assert message in str(caught.value)


def test_a_bundle_without_its_manifest_is_named_as_such(bundle: Path, tmp_path: Path) -> None:
    """A bundle copied without ``bundle.json`` is not read as a Collector's archive (which
    would refuse ``steps/0.request.json`` as not OTLP): every verb says what it lacks."""
    copy = Path(shutil.copytree(bundle, tmp_path / "copy"))
    (copy / "bundle.json").unlink()
    expected = f"{copy}: a bundle without its bundle.json (steps/ holds its bodies)"
    with pytest.raises(SourceError) as caught:
        load_run(str(copy))
    assert str(caught.value).startswith(expected)
    imported = run_cli("import", str(copy), "--store", str(tmp_path / "store"))
    assert_bad_input(imported, expected)
    assert not (tmp_path / "store").exists()


def test_integral_numbers_are_read_as_ints(bundle: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(bundle, tmp_path / "copy"))
    _manifest(lambda d: d["run"].update(start_ns=5.0))(copy)  # type: ignore[attr-defined]
    _step_0(index=0.0, duration_ns=7.0, status_code=200.0, chunks=[[2.0, 0.0]])(copy)
    run = load_run(str(copy))
    recorded = run.steps[0]
    facts = (
        run.start_ns,
        recorded.step.index,
        recorded.duration_ns,
        recorded.step.status_code,
        recorded.step.chunks[0],
    )
    assert facts == (5, 0, 7, 200, (2, 0))
    assert all(type(value) is int for value in (*facts[:4], *facts[4]))


SECRET = "sk-proj-0123456789abcdefSECRET"


@pytest.mark.subprocess
def test_no_credential_a_run_holds_reaches_its_bundle(recorded: Recorded, tmp_path: Path) -> None:
    # A stored run: the recording sent its key as "Authorization: Bearer …" (redacted then).
    done = subprocess.run(
        [str(CLI), "export", "--store", str(recorded.store), SUPPORT, str(tmp_path / "stored")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert KEY.encode() not in _every_byte(tmp_path / "stored")
    # A run from an OTLP source another instrumentation wrote, which redacted nothing: the key
    # in a JSON body, a URL's query, the endpoint, header and URL attributes, the resource.
    body = json.dumps({"api_key": SECRET, "model": "m", "note": f"token {SECRET}"}).encode()
    step = recorded_step(
        index=0,
        kind="http",
        method="POST",
        response_body=b"{}",
        status_code=200,
        endpoint=f"POST /orders?key={SECRET}",
        url=f"http://tools.test/orders?api_key={SECRET}",
        request_body=body,
        request_hash=sha256_tag(body),
        response_headers=(("content-type", "application/json"), ("set-cookie", f"s={SECRET}")),
        attributes={
            "url.full": f"http://u:{SECRET}@tools.test/orders?api_key={SECRET}",
            "url.query": f"api_key={SECRET}",
            "http.request.header.authorization": (f"Bearer {SECRET}",),
            "gen_ai.request.api_key": SECRET,
            "note": f"sent with {SECRET}",
        },
    )
    run = Run("r_foreign", "traces.jsonl", (step,), resource={"env.OPENAI_API_KEY": SECRET})
    write_bundle(run, tmp_path / "foreign", Redactor())
    assert SECRET.encode() not in _every_byte(tmp_path / "foreign")
    back = load_run(str(tmp_path / "foreign")).steps[0]
    assert back.step.url == "http://tools.test/orders?api_key=REDACTED"
    assert back.attributes["http.request.header.authorization"] == ("REDACTED",)
    assert json.loads(back.request_body or b"")["note"] == "token REDACTED"


def _every_byte(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file())


def _at(document: dict[str, Any], path: tuple[str | int, ...], value: object) -> None:
    for key in path[:-1]:
        document = document[key]  # type: ignore[index]
    document[path[-1]] = value  # type: ignore[index]


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("steps", 0, "attributes", "x"), float("nan")),
        (("steps", 0, "attributes", "x"), float("inf")),
        (("steps", 0, "attributes", "x"), 2**100),
        (("steps", 0, "attributes", "x"), [[1]]),
        (("steps", 0, "attributes"), {"\ud800": 1}),
        (("steps", 0, "kind"), "\ud800"),
        (("steps", 0, "index"), 3.0),
        (("steps", 0, "index"), 1.5),
        (("steps", 0, "index"), True),
        (("steps", 0, "start_ns"), float("inf")),
        (("steps", 0, "start_ns"), 2**63 - 1),
        (("steps", 0, "duration_ns"), -0.0),
        (("steps", 0, "chunks"), [[1, 2, 3]]),
        (("steps", 0, "response_headers"), [["a", 1]]),
        (("run", "seed"), 2**63),
        (("run", "seed"), -(2**63)),
        (("run", "id"), "😀" * 256),
        (("run", "id"), "😀" * 257),
        (("version",), 1.0),
    ],
)
def test_the_fast_manifest_check_never_accepts_what_jsonschema_refuses(
    bundle: Path, path: tuple[str | int, ...], value: object
) -> None:
    # Manifests are checked by jsonschema-rs first, jsonschema only for the message: at the
    # edges where the two could read JSON otherwise (NaN, big ints, surrogates, 3.0) the
    # verdict must stay jsonschema's.
    document = json.loads((bundle / "bundle.json").read_text())
    _at(document, path, value)
    reference = jsonschema.Draft202012Validator(SCHEMA)
    expected = jsonschema.exceptions.best_match(reference.iter_errors(document))
    error = _manifest_check().first_error(document)
    assert (error is None) == (expected is None)
    assert getattr(error, "message", None) == getattr(expected, "message", None)
