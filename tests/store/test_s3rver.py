"""A store in s3rver: a real S3 server (from npm) that keeps each object as a file on disk.

``make setup`` installs node (Debian's packages, when missing) and the s3rver pinned in
``tests/store/s3rver/package-lock.json`` into ``.venv/node``. These tests start it on
loopback with a random port and a temporary data directory, through s3rver's own command
line.
"""

from __future__ import annotations

import json
import os
import random
import selectors
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import fsspec
import pytest

from otel_replay.errors import CorruptBlobError
from otel_replay.store import Store
from otel_replay.store._format import run_dir
from tests.store._data import chat_bodies, make_step, span

HERE = Path(__file__).resolve().parent
MODULES = HERE.parents[1] / ".venv" / "node" / "node_modules"
SERVE = MODULES / "s3rver" / "bin" / "s3rver.js"
BUCKET = "fixtures"
URL = f"s3://{BUCKET}/store"
OBJECT_SUFFIX = "._S3rver_object"  # how s3rver names an object's file on disk
# Incompressible and larger than the 64 KiB the store reads from a pack's end: its pack's
# footer is read with a range that does not start at 0 (s3rver 3.7.1 misreads suffix ranges,
# ``bytes=-N``, as the first N bytes; the store asks for explicit bounds instead).
BIG = random.Random(7).randbytes(100_000)


def _node() -> str:
    """The node binary, once s3rver is installed as pinned; fails (never skips) otherwise."""
    node = shutil.which("node")
    pinned = json.loads((HERE / "s3rver" / "package.json").read_text())["dependencies"]["s3rver"]
    installed = MODULES / "s3rver" / "package.json"
    if node is None:
        problem = "node is not on PATH"
    elif not installed.exists():
        problem = f"{installed.parent} is missing"
    elif (version := json.loads(installed.read_text())["version"]) != pinned:
        problem = f"s3rver {version} is installed, {pinned} is pinned"
    else:
        return node
    pytest.fail(f"s3rver is not installed ({problem}): run `make setup`", pytrace=False)


class S3rver:
    """An s3rver process serving ``directory`` on 127.0.0.1."""

    def __init__(self, directory: Path, log: Path) -> None:
        self.directory = directory
        self.log = log
        self.endpoint = ""
        self.process: subprocess.Popen[bytes] | None = None
        self.started: list[subprocess.Popen[bytes]] = []
        self._log: IO[bytes] | None = None

    @property
    def options(self) -> dict[str, Any]:
        """fsspec storage options for the running server (s3rver's fixed credentials)."""
        return {
            "key": "S3RVER",
            "secret": "S3RVER",
            "endpoint_url": self.endpoint,
            "client_kwargs": {"region_name": "us-east-1"},
        }

    def start(self) -> None:
        """Start on a free port (the OS picks it) and wait until it listens."""
        node = _node()
        self._log = self.log.open("ab")
        command = [node, str(SERVE), "--directory", str(self.directory), "--silent"]
        command += ["--address", "127.0.0.1", "--port", "0", "--configure-bucket", BUCKET]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env={**os.environ, "NODE_PATH": str(MODULES)},
        )
        self.started.append(self.process)
        assert self.process.stdout is not None
        output = b""
        deadline = time.monotonic() + 15
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            while b"S3rver listening on " not in output or not output.endswith(b"\n"):
                left = deadline - time.monotonic()
                chunk = (
                    os.read(self.process.stdout.fileno(), 4096) if selector.select(left) else b""
                )
                if not chunk:
                    self.stop()
                    pytest.fail(f"s3rver did not start: {output!r} {self.log.read_text()}")
                output += chunk
        address = output.split(b"S3rver listening on ", 1)[1].split()[0].decode()
        self.endpoint = f"http://{address}"

    def stop(self) -> None:
        """Terminate the process and reap it."""
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            assert self.process.stdout is not None
            self.process.stdout.close()
            self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None


@pytest.fixture
def s3rver(tmp_path: Path) -> Iterator[S3rver]:
    """A running s3rver with bucket ``fixtures``, its data in ``tmp_path/s3rver``."""
    server = S3rver(tmp_path / "s3rver", tmp_path / "s3rver.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()
        assert all(process.returncode is not None for process in server.started)


def _open(server: S3rver, machine: Path) -> Store:
    return Store.open(URL, storage_options=server.options, cache_dir=machine)


def _record(store: Store, run_id: str, turns: int) -> list[tuple[bytes, bytes]]:
    """Record ``turns`` chat steps and then one with a big response; one flush per step."""
    pairs = [*chat_bodies(turns, seed=len(run_id)), (b'{"big": true}', BIG)]
    for index, (request, response) in enumerate(pairs):
        store.put(
            [make_step(run_id, index, request, response)],
            [span(run_id, index, **{"gen_ai.request.model": "m1"})],
        )
        store.flush()
    return pairs


def _check(store: Store, run_id: str, pairs: list[tuple[bytes, bytes]]) -> None:
    steps = store.steps(run_id)
    assert [store.request_body(s) for s in steps] == [q for q, _ in pairs]
    assert [store.response_body(s) for s in steps] == [r for _, r in pairs]


def _files(server: S3rver) -> dict[str, Path]:
    """The objects of the store as s3rver keeps them on disk: key under the store -> file."""
    root = server.directory / BUCKET / "store"
    return {
        path.relative_to(root).as_posix().removesuffix(OBJECT_SUFFIX): path
        for path in root.rglob(f"*{OBJECT_SUFFIX}")
    }


def test_another_machine_rebuilds_everything_from_s3rver(s3rver: S3rver, tmp_path: Path) -> None:
    with _open(s3rver, tmp_path / "a") as store:
        pairs = _record(store, "disk-1", 5)
        spans = store.spans("disk-1")
    with _open(s3rver, tmp_path / "a") as store:
        runs = store.runs()
    with _open(s3rver, tmp_path / "b") as other:
        assert other.runs() == runs and runs[0].step_count == len(pairs)
        _check(other, "disk-1", pairs)
        assert other.spans("disk-1") == spans
        assert other.verify() == []
    files = _files(s3rver)
    packs = [key for key in files if key.startswith("objects/") and key.endswith(".pack")]
    assert "FORMAT" in files and packs and "index.sqlite" not in files
    assert sum(files[key].stat().st_size for key in packs) > len(BIG)
    fs, root = fsspec.core.url_to_fs(URL, **s3rver.options)
    assert sorted(files) == sorted(p[len(root) + 1 :] for p in fs.find(root))
    for key, path in files.items():
        assert path.read_bytes() == fs.cat_file(f"{root}/{key}")


def _corrupt_the_pack(server: S3rver) -> str:
    """Flip a byte of the store's only pack in s3rver's file on disk; the pack's key."""
    (pack,) = [key for key in _files(server) if key.endswith(".pack")]
    path = _files(server)[pack]
    data = bytearray(path.read_bytes())
    data[30] ^= 0xFF
    path.write_bytes(bytes(data))
    return pack


def test_a_corrupt_file_on_disk_is_named(s3rver: S3rver, tmp_path: Path) -> None:
    with _open(s3rver, tmp_path / "a") as store:
        _record(store, "disk-2", 3)
    pack = _corrupt_the_pack(s3rver)
    with _open(s3rver, tmp_path / "a") as store:
        problems = store.verify()
        assert any(p.kind == "pack" and p.path == pack for p in problems)
        body_problem = next(p for p in problems if p.kind == "body")
        step = store.step("disk-2", body_problem.step_index or 0)
        read = store.request_body if body_problem.blob == step.request_hash else store.response_body
        with pytest.raises(CorruptBlobError, match=URL):
            read(step)


def test_a_corrupt_file_on_disk_is_named_by_a_fresh_machine(s3rver: S3rver, tmp_path: Path) -> None:
    with _open(s3rver, tmp_path / "a") as store:
        _record(store, "disk-3", 3)
    pack = _corrupt_the_pack(s3rver)
    with _open(s3rver, tmp_path / "b") as store:
        assert any(p.kind == "pack" and p.path == pack for p in store.verify())


def test_the_data_outlives_a_restart_of_s3rver(s3rver: S3rver, tmp_path: Path) -> None:
    with _open(s3rver, tmp_path / "a") as store:
        first = _record(store, "before", 3)
    before = {key: path.read_bytes() for key, path in _files(s3rver).items()}
    s3rver.stop()
    s3rver.start()  # the same directory, a new port
    with _open(s3rver, tmp_path / "a") as store:
        _check(store, "before", first)
        second = _record(store, "after", 2)
    with _open(s3rver, tmp_path / "b") as other:
        assert {r.run_id for r in other.runs()} == {"before", "after"}
        _check(other, "before", first)
        _check(other, "after", second)
        assert other.verify() == []
    after = _files(s3rver)
    assert {key: after[key].read_bytes() for key in before} == before
    assert any(key.startswith(run_dir("after") + "/") for key in after)
