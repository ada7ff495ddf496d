"""Hostile trace sources: gzip bombs, endless and trickling URLs, /dev/zero, huge lines.

Each is met through the real ``otel-replay`` program: exit 2, one line naming the source and
the bound (and the setting that raises the byte bound), quickly, with memory bounded by the
byte bound (measured as the child's peak resident size). The line and time bounds are
constants: their tests run the CLI in-process with the constant made small. URL sources are
read in the parent, so their errors and the report name the URL, and an interrupted replay
leaves no scratch directory behind.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from otel_replay.replay.sources import _limits
from tests.cli._checks import run_cli
from tests.replay.conftest import CLAUDE, SUPPORT, Recorded, collector_json, run_spans

pytestmark = pytest.mark.subprocess

CLI = Path(sys.executable).parent / "otel-replay"
MiB = 1 << 20
# Runs CMD and prints, last on stderr, the peak resident size of CMD in KiB.
PEAK = (
    "import resource, subprocess, sys; code = subprocess.call(sys.argv[1:]); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
    "sys.exit(code)"
)


def cli(
    *args: str, timeout: float = 60, **env: str
) -> tuple[subprocess.CompletedProcess[str], int]:
    """``otel-replay ARGS`` in a clean environment; the result and its peak RSS in MiB."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", PEAK, str(CLI), *args],
        env=base | env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    *lines, peak = done.stderr.rstrip("\n").split("\n")
    done.stderr = "\n".join(lines)
    return done, int(peak) // 1024


def in_process(monkeypatch: pytest.MonkeyPatch, *args: str) -> subprocess.CompletedProcess[str]:
    """``otel-replay ARGS`` run in-process (so a test may patch a constant), from a clean
    ``OTEL_*`` environment."""
    for name in [k for k in os.environ if k.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    result = run_cli(*args)
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def one_error_line(done: subprocess.CompletedProcess[str], *names: str) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("Error: ")
    for name in names:
        assert name in line, (name, line)
    return line


def bomb(size: int, piece: bytes = b"\0") -> bytes:
    """Gzip data that decompresses to ``size`` bytes: 64 MiB members, repeated."""
    member = gzip.compress(piece * (64 * MiB // len(piece)), 9)
    return member * (size // (64 * MiB))


Behaviour = Callable[[socket.socket, threading.Event], None]


class Server:
    """A loopback HTTP server whose every connection gets ``behaviour``."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.stop = threading.Event()
        owner = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                self.request.recv(65536)  # the request; one recv holds a GET
                with contextlib.suppress(OSError):  # the client went away
                    behaviour(self.request, owner.stop)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/api/v3/traces/abc"

    def __enter__(self) -> Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


def answer(body: bytes, content_type: str = "application/json") -> Behaviour:
    def behaviour(sock: socket.socket, _stop: threading.Event) -> None:
        head = f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n"
        head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        sock.sendall(head.encode() + body)

    return behaviour


def endless(sock: socket.socket, stop: threading.Event) -> None:
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n[")
    block = b'{"resourceSpans": []},' * 4096
    while not stop.is_set():
        sock.sendall(block)


def trickle(head: bytes, body: bytes) -> Behaviour:
    """Send ``head`` at once, then ``body`` a byte every 0.2 s."""

    def behaviour(sock: socket.socket, stop: threading.Event) -> None:
        sock.sendall(head)
        for byte in body:
            if stop.wait(0.2):
                return
            sock.sendall(bytes([byte]))

    return behaviour


@pytest.fixture
def serve() -> Iterator[Callable[[Behaviour], str]]:
    servers: list[Server] = []

    def start(behaviour: Behaviour) -> str:
        server = Server(behaviour).__enter__()
        servers.append(server)
        return server.url

    yield start
    for server in servers:
        server.__exit__()


def document(recorded: Recorded, *run_ids: str) -> bytes:
    return json.dumps(collector_json(run_spans(recorded, *run_ids))).encode()


# Files.


def test_a_gzip_bomb_file_stops_at_the_bound_in_bounded_memory(tmp_path: Path) -> None:
    source = tmp_path / "trace.json.gz"
    source.write_bytes(bomb(1024 * MiB))  # 1 MiB on disk, 1 GiB inside
    started = time.monotonic()
    done, peak = cli("import", str(source), "--store", str(tmp_path / "store"))
    line = one_error_line(done, str(source), "decompresses to more than", "SOURCE_MAX_BYTES")
    assert f"more than {256 * MiB} bytes" in line  # the documented default
    assert peak < 256 + 200, f"peak RSS {peak} MiB for a bound of 256 MiB"
    assert time.monotonic() - started < 30
    assert not (tmp_path / "store").exists()  # nothing was half-imported


def test_a_smaller_bound_is_a_smaller_cost(tmp_path: Path) -> None:
    source = tmp_path / "trace.jsonl.gz"
    source.write_bytes(bomb(256 * MiB, b'{"resourceSpans": []}\n'))
    done, peak = cli(
        "import", str(source), "--store", str(tmp_path / "s"),
        OTEL_REPLAY_SOURCE_MAX_BYTES=str(8 * MiB),
    )  # fmt: skip
    one_error_line(done, str(source), f"decompresses to more than {8 * MiB} bytes")
    assert peak < 8 + 150


def test_dev_zero_is_refused_at_the_bound(tmp_path: Path) -> None:
    done, peak = cli(
        "import", "/dev/zero", "--store", str(tmp_path / "s"),
        OTEL_REPLAY_SOURCE_MAX_BYTES=str(16 * MiB),
    )  # fmt: skip
    one_error_line(done, "/dev/zero", f"holds more than {16 * MiB} bytes", "SOURCE_MAX_BYTES")
    assert peak < 16 + 150


def test_a_line_past_the_line_bound_is_named(
    tmp_path: Path, recorded: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "trace.jsonl"
    line = document(recorded, CLAUDE)
    huge = b'{"resourceSpans": [], "padding": "' + b"x" * (2 * MiB) + b'"}'
    source.write_bytes(line + b"\n" + line + b"\n" + huge + b"\n")
    monkeypatch.setattr(_limits, "MAX_LINE_BYTES", MiB)
    done = in_process(monkeypatch, "import", str(source), "--store", str(tmp_path / "s"))
    one_error_line(done, f"{source}:3: the line is longer than {MiB} bytes", "OTLP export")
    # Within the bound (the real one) the same file imports.
    done, _ = cli("import", str(source), "--store", str(tmp_path / "s"))
    assert done.returncode == 0, done.stderr
    assert f"{CLAUDE}: imported" in done.stdout


def test_an_unreadable_span_with_a_huge_name_is_named_on_a_short_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The span's name went into the message whole: one "line" of 10 MB on the terminal.
    source = tmp_path / "trace.json"
    span = {"name": "chat " + "x" * (10 * MiB), "spanId": "00f067aa0ba902b7"}  # no traceId
    source.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}))
    done = in_process(monkeypatch, "show", str(source), "--store", str(tmp_path / "s"))
    line = one_error_line(done, str(source), "span 'chat xxx", "cannot be read: traceId")
    assert len(line) < 500


# URLs.


def test_a_gzip_bomb_url_stops_at_the_bound(tmp_path: Path, serve: Any) -> None:
    url = serve(answer(bomb(1024 * MiB), "application/gzip"))
    done, peak = cli("replay", url, "--store", str(tmp_path / "s"), "--", "true")
    one_error_line(done, url, "decompresses to more than", "SOURCE_MAX_BYTES")
    assert peak < 256 + 200


def test_an_endless_url_stops_at_the_bound(tmp_path: Path, serve: Any) -> None:
    url = serve(endless)
    done, peak = cli(
        "import", url, "--store", str(tmp_path / "s"), OTEL_REPLAY_SOURCE_MAX_BYTES=str(32 * MiB)
    )
    one_error_line(done, url, f"answers more than {32 * MiB} bytes", "SOURCE_MAX_BYTES")
    assert peak < 32 + 150


@pytest.mark.parametrize("where", ["body", "headers"])
def test_a_trickling_url_stops_at_the_time_bound(
    tmp_path: Path, serve: Any, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"
    url = serve(trickle(head, b"{" * 100000) if where == "body" else trickle(b"", head))
    monkeypatch.setattr(_limits, "TIMEOUT_S", 1.5)
    started = time.monotonic()
    done = in_process(monkeypatch, "replay", url, "--store", str(tmp_path / "s"), "--", "true")
    elapsed = time.monotonic() - started
    one_error_line(done, url, "took longer than 1.5 s", "download it, then give the file")
    assert 1.5 <= elapsed < 10


def test_url_errors_and_reports_name_the_url(
    tmp_path: Path, serve: Any, recorded: Recorded
) -> None:
    store = str(tmp_path / "s")
    env = {"TMPDIR": str(tmp_path)}
    both = serve(answer(document(recorded, SUPPORT, CLAUDE)))
    done, _ = cli("replay", both, "--store", store, "--", "echo", "never runs", **env)
    line = one_error_line(done, f"{both} holds 2 runs", f"{both}#RUN_ID", SUPPORT, CLAUDE)
    assert "never runs" not in done.stdout and str(tmp_path) not in line

    cut = serve(answer(document(recorded, CLAUDE)[:-40]))
    done, _ = cli("replay", cut, "--store", store, "--", "echo", "never runs", **env)
    line = one_error_line(done, cut, "invalid or truncated JSON")
    assert str(tmp_path) not in line

    whole = serve(answer(document(recorded, CLAUDE)))
    done, _ = cli("replay", f"{whole}#{CLAUDE}", "--store", store, "--", "true", **env)
    assert done.returncode == 1, done.stderr  # the program made none of the recorded calls
    assert f"replay of run {CLAUDE} ({whole}): diverged" in done.stdout
    assert str(tmp_path) not in done.stdout
    assert not list(tmp_path.glob("otel-replay-*"))


def test_sigterm_during_a_url_replay_stops_the_program_and_cleans_up(
    tmp_path: Path, serve: Any, recorded: Recorded
) -> None:
    url = serve(answer(document(recorded, CLAUDE)))
    # Found by its command line: its pid is its PID namespace's, not the host's.
    marker = f"otel-replay-sigterm-{os.getpid()}"
    program = f"import time; print('started', flush=True); time.sleep(60)  # {marker}"
    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    with subprocess.Popen(
        [str(CLI), "replay", url, "--store", str(tmp_path / "s"), "--",
         sys.executable, "-c", program],
        env=base | {"TMPDIR": str(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as replaying:  # fmt: skip
        assert replaying.stdout is not None
        assert replaying.stdout.readline() == "started\n"
        assert _running(marker)
        assert len(list(tmp_path.glob("otel-replay-*"))) == 1  # the download, while it runs
        replaying.send_signal(signal.SIGTERM)
        _, errors = replaying.communicate(timeout=30)
    assert replaying.returncode == 128 + signal.SIGTERM, errors
    assert not list(tmp_path.glob("otel-replay-*"))
    assert not _running(marker)  # the program was stopped too


def _running(marker: str) -> bool:
    """Whether a process whose command line holds ``marker`` runs (or is yet to be reaped)."""
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            if entry.isdigit() and marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                return True
    return False
