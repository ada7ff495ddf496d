"""Hermetic strict replay: every known way out, tried against a loopback listener that counts
what it receives.

A small run (one HTTP tool call to the stand-in) is recorded; the stand-in is then gone. Each
escape script first makes the recorded call (served from the recording), then tries its way
out to a TCP and a UDP port of the test's :class:`Listener` on the host's loopback, under the
real ``otel-replay replay RUN -- python script.py``. Whatever the script does, the listener
must receive nothing: Python-level attempts are refused in-process (socket guard, audit hooks)
and listed; native code and subprocesses meet the kernel, in the child's own network namespace,
and the report says the run was isolated. The in-process API (``otel_replay.replaying``) is
tried against the same listener, and so are the fallback without namespaces (made real with
``unshare(1)``: a user namespace whose namespace limits are 0) and the user-namespace path
(the launcher run as an unprivileged user).
"""

from __future__ import annotations

import _socket
import ctypes
import errno
import json
import os
import platform
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

import otel_replay
import otel_replay.replay._isolate as isolate_module
from examples.standin import StandIn
from otel_replay.errors import NetworkBlockedError
from tests.export._support import ROOT, Pipeline, subprocess_env

CLI = Path(sys.executable).parent / "otel-replay"
RUN = "r_hermetic"
ISOLATED = (
    "isolated: the program and every process it started ran in a network namespace of their own"
)


class Listener:
    """A TCP and a UDP socket on the host's loopback that count what reaches them.

    Nothing is accepted in the background: :meth:`drain` takes every pending connection and
    datagram once the program under test has exited, so the counts are final when read.
    """

    def __init__(self) -> None:
        self.tcp = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.tcp.setblocking(False)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.setblocking(False)
        self.port = self.tcp.getsockname()[1]
        self.udp_port = self.udp.getsockname()[1]
        self.connections = 0
        self.received = 0

    def drain(self) -> tuple[int, int]:
        """Every connection and byte received so far: ``(connections, bytes)``."""
        while True:
            try:
                conn, _ = self.tcp.accept()
            except BlockingIOError:
                break
            self.connections += 1
            with conn, selectors.DefaultSelector() as selector:
                selector.register(conn, selectors.EVENT_READ)
                while selector.select(timeout=0.5):
                    try:
                        data = conn.recv(65536)
                    except OSError:
                        break
                    if not data:
                        break
                    self.received += len(data)
        while True:
            try:
                self.received += len(self.udp.recv(65536))
            except BlockingIOError:
                break
        return self.connections, self.received

    def close(self) -> None:
        self.tcp.close()
        self.udp.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    opened = Listener()
    try:
        yield opened
    finally:
        opened.close()


@dataclass(frozen=True)
class Recording:
    store: Path
    url: str


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    """One recorded GET to the stand-in's tools (the stand-in is stopped afterwards)."""
    store = tmp_path_factory.mktemp("hermetic") / "store"
    with StandIn(event_delay=0.001) as standin:
        url = f"{standin.tools_url}/orders/A-1234"
        with (
            Pipeline(store),
            otel_replay.run(name="hermetic", seed=1, run_id=RUN),
            httpx.Client() as client,
        ):
            assert client.get(url).status_code == 200
    return Recording(store, url)


def _env(store: Path) -> dict[str, str]:
    return {k: v for k, v in subprocess_env(store).items() if not k.startswith("OTEL_")}


def replay(
    recording: Recording,
    script: Path,
    *args: str,
    flags: tuple[str, ...] = ("--json",),
    prefix: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """``PREFIX otel-replay replay RUN --store STORE FLAGS -- python SCRIPT URL ARGS``."""
    return subprocess.run(
        [
            *prefix,
            str(CLI),
            "replay",
            RUN,
            "--store",
            str(recording.store),
            *flags,
            "--",
            sys.executable,
            str(script),
            recording.url,
            *args,
        ],
        env=_env(recording.store),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def escape_script(directory: Path, body: str) -> Path:
    """A program that makes the recorded call, then runs ``body`` (with ``PORT``, ``UDP_PORT``
    set), printing ``ESCAPED`` if it believes it got through and ``blocked: ...`` otherwise."""
    script = directory / "escape.py"
    script.write_text(
        "import sys, httpx\n"
        "URL, PORT, UDP_PORT = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])\n"
        "httpx.get(URL).raise_for_status()\n"
        "try:\n"
        f"{textwrap.indent(textwrap.dedent(body), '    ')}\n"
        "except Exception as exc:\n"
        "    print('blocked:', type(exc).__name__, getattr(exc, 'errno', None), exc)\n"
    )
    return script


# A Python program that connects and sends, run outside our reach (-I -S: no sitecustomize).
_CONNECT = (
    "import socket, sys; s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), 2); "
    "s.sendall(b'leak'); print('ESCAPED')"
)

_SOCKADDR = """
import ctypes, socket
class sockaddr_in(ctypes.Structure):
    _fields_ = [("family", ctypes.c_ushort), ("port", ctypes.c_uint16),
                ("addr", ctypes.c_ubyte * 4), ("zero", ctypes.c_ubyte * 8)]
address = sockaddr_in(socket.AF_INET, socket.htons(PORT), (127, 0, 0, 1))
fd = socket.socket().detach()
libc = ctypes.CDLL(None, use_errno=True)
"""


@dataclass(frozen=True)
class Escape:
    """One way out: its code, and what stops it (``refused``: the in-process guards, listed
    as ``attempt``; ``kernel``: the namespace, the started process listed as ``process``)."""

    body: str
    evidence: str
    refused: str | None = None
    process: str | None = None
    needs: str | None = None


ESCAPES: dict[str, Escape] = {
    "_socket": Escape(
        "import _socket\ns = _socket.socket()\ns.connect(('127.0.0.1', PORT))\n"
        "s.send(b'leak')\nprint('ESCAPED')",
        "blocked: NetworkBlockedError",
        refused="127.0.0.1:{port}",
    ),
    "sendmsg-with-address": Escape(
        "import socket\nu = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "u.sendmsg([b'leak'], [], 0, ('127.0.0.1', UDP_PORT))\nprint('ESCAPED')",
        "blocked: NetworkBlockedError",
        refused="127.0.0.1:{udp} (sendmsg)",
    ),
    "sendto-udp": Escape(
        "import socket\nu = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "u.sendto(b'leak', ('127.0.0.1', UDP_PORT))\nprint('ESCAPED')",
        "blocked: NetworkBlockedError",
        refused="127.0.0.1:{udp} (sendto)",
    ),
    "_socket-name-lookup": Escape(
        "import _socket\n_socket.getaddrinfo('example.invalid', 80)\nprint('ESCAPED')",
        "blocked: NetworkBlockedError",
        refused="name lookup example.invalid:80",
    ),
    "ctypes-connect": Escape(
        _SOCKADDR + "if libc.connect(fd, ctypes.byref(address), 16) == 0:\n    print('ESCAPED')",
        "blocked: NetworkBlockedError",
        refused="native connect() (ctypes lookup)",
    ),
    "ctypes-syscall-connect": Escape(
        _SOCKADDR + "if libc.syscall(42, fd, ctypes.byref(address), 16) == 0:\n"
        "    print('ESCAPED')\nelse:\n    print('blocked: errno', ctypes.get_errno())",
        f"blocked: errno {errno.ECONNREFUSED}",
        needs="x86_64",
    ),
    "urllib": Escape(
        "import urllib.request\n"
        "urllib.request.urlopen(f'http://127.0.0.1:{PORT}/', data=b'leak', timeout=2)\n"
        "print('ESCAPED')",
        "blocked: URLError",
        refused="127.0.0.1:{port}",
    ),
    # requests, urllib3 and aiohttp are served by the replay (tests/transports); http.client
    # under them is not.
    "http.client": Escape(
        "import http.client\nc = http.client.HTTPConnection('127.0.0.1', PORT, timeout=2)\n"
        "c.request('POST', '/', body=b'leak')\nprint('ESCAPED')",
        "blocked: NetworkBlockedError",
        refused="127.0.0.1:{port}",
    ),
    "grpc-c-core": Escape(
        "import grpc\nchannel = grpc.insecure_channel(f'127.0.0.1:{PORT}')\n"
        "grpc.channel_ready_future(channel).result(timeout=1)\nprint('ESCAPED')",
        "blocked: FutureTimeoutError",
        needs="grpc",
    ),
    "os.system-curl": Escape(
        "import os\n"
        "status = os.system(f'curl -sS -m 2 -d leak http://127.0.0.1:{PORT}/ && echo ESCAPED')\n"
        "print('blocked: curl status', status)",
        "Failed to connect to 127.0.0.1",
        process="curl -sS -m 2 -d leak http://127.0.0.1:{port}/ && echo ESCAPED",
        needs="curl",
    ),
    "subprocess-python-I-S": Escape(
        f"import subprocess, sys\nsubprocess.run([sys.executable, '-I', '-S', '-c', {_CONNECT!r},"
        " str(PORT)])",
        "ConnectionRefusedError",
        process="{python} -I -S -c",
    ),
    "posix_spawn-python-I-S": Escape(
        "import os, sys\n"
        f"pid = os.posix_spawn(sys.executable, [sys.executable, '-I', '-S', '-c', {_CONNECT!r},"
        " str(PORT)], dict(os.environ))\nos.waitpid(pid, 0)",
        "ConnectionRefusedError",
        process="{python} -I -S -c",
    ),
}


def _available(needs: str | None) -> bool:
    if needs is None:
        return True
    if needs == "x86_64":
        return platform.machine() == "x86_64"
    if needs == "curl":
        return shutil.which("curl") is not None
    try:
        __import__(needs)
    except ImportError:
        return False
    return True


def _document(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.stdout.strip(), done.stderr
    return dict(json.loads(done.stdout))


@pytest.mark.parametrize("name", list(ESCAPES))
def test_no_escape_reaches_the_listener(
    name: str, recording: Recording, listener: Listener, tmp_path: Path
) -> None:
    escape = ESCAPES[name]
    if not _available(escape.needs):
        pytest.skip(f"needs {escape.needs}")
    script = escape_script(tmp_path, escape.body)
    done = replay(recording, script, str(listener.port), str(listener.udp_port))

    assert listener.drain() == (0, 0), done.stderr
    assert "ESCAPED" not in done.stderr  # --json: the program's own output went to stderr
    assert escape.evidence in done.stderr
    document = _document(done)
    assert document["isolation"] == {
        "isolated": True,
        "how": "network namespace" if os.geteuid() == 0 else "user and network namespaces",
        "loopback": True,
        "reason": None,
    }
    served = [step["recorded"] for step in document["steps"]]
    assert served == [0]
    if escape.refused is not None:
        attempt = escape.refused.format(port=listener.port, udp=listener.udp_port)
        assert document["network_attempts"] == [attempt]
        assert document["identical"] is False
        assert done.returncode == 1, done.stderr
        assert "otel-replay strict replay refused network access to" in done.stderr
    else:
        # Native code and other processes: nothing in-process saw a socket; the kernel had
        # no route for them (the namespace's own loopback has nothing listening).
        assert document["network_attempts"] == []
        assert document["identical"] is True
        assert done.returncode == 0, done.stderr
    if escape.process is not None:
        expected = escape.process.format(port=listener.port, python=sys.executable)
        (started,) = document["subprocesses"]
        assert started.startswith(expected)
    else:
        assert document["subprocesses"] == []


def test_the_report_says_isolated_and_lists_each_escape(
    recording: Recording, listener: Listener, tmp_path: Path
) -> None:
    body = """
    import _socket, subprocess, sys
    for _ in range(2):
        try:
            _socket.socket().connect(('127.0.0.1', PORT))
        except OSError:
            pass
    subprocess.run([sys.executable, '-I', '-S', '-c', CONNECT, str(PORT)])
    """.replace("CONNECT", repr(_CONNECT))
    done = replay(recording, escape_script(tmp_path, body), str(listener.port), "0", flags=())
    assert listener.drain() == (0, 0)
    assert done.returncode == 1, done.stdout + done.stderr
    report = done.stdout
    assert f"refused network access: 127.0.0.1:{listener.port} (2 times)" in report
    assert f"subprocess (no network: isolated): {sys.executable} -I -S -c" in report
    assert ISOLATED in report
    assert "network attempts: 2; subprocesses: 1; recorded as run " in report
    assert "not isolated" not in done.stderr


def test_no_list_is_cut_silently(recording: Recording, tmp_path: Path) -> None:
    body = """
    import socket, subprocess
    for port in range(1, 26):
        try:
            socket.create_connection(('127.0.0.1', port), timeout=1)
        except OSError:
            pass
    for _ in range(3):
        try:
            socket.create_connection(('127.0.0.1', 25), timeout=1)
        except OSError:
            pass
    for n in range(22):
        subprocess.run(['true', str(n)])
    """
    script = escape_script(tmp_path, body)
    text = replay(recording, script, "0", "0", flags=())
    assert text.returncode == 1, text.stderr
    lines = text.stdout.splitlines()
    refused = [line for line in lines if line.startswith("refused network access: ")]
    assert refused == [f"refused network access: 127.0.0.1:{port}" for port in range(1, 21)]
    assert "… 8 more refused attempts not shown (5 distinct); --json lists all" in lines
    started = [line for line in lines if line.startswith("subprocess (")]
    assert started == [f"subprocess (no network: isolated): true {n}" for n in range(20)]
    assert "… 2 more subprocesses not shown (2 distinct); --json lists all" in lines
    assert any("network attempts: 28; subprocesses: 22;" in line for line in lines)

    document = _document(replay(recording, script, "0", "0"))
    assert document["network_attempts"] == [
        f"127.0.0.1:{port}" for port in [*range(1, 26), 25, 25, 25]
    ]
    assert document["subprocesses"] == [f"true {n}" for n in range(22)]


def test_no_isolate_runs_with_the_in_process_guards_alone(
    recording: Recording, listener: Listener, tmp_path: Path
) -> None:
    body = """
    import _socket, subprocess
    subprocess.run(['true'])
    _socket.socket().connect(('127.0.0.1', PORT))
    """
    script = escape_script(tmp_path, body)
    done = replay(recording, script, str(listener.port), "0", flags=("--json", "--no-isolate"))
    assert listener.drain() == (0, 0)
    document = _document(done)
    assert document["isolation"]["isolated"] is False
    assert document["isolation"]["reason"] == "--no-isolate"
    assert document["network_attempts"] == [f"127.0.0.1:{listener.port}"]
    assert document["subprocesses"] == ["true"]
    assert "not isolated" not in done.stderr  # asked for: no notice


def _without_namespaces() -> list[str] | None:
    """A command prefix under which no namespace can be made: a user namespace (of
    ``unshare(1)``) whose limits on user and network namespaces are 0. None if unavailable."""
    unshare = shutil.which("unshare")
    if unshare is None or not sys.platform.startswith("linux"):
        return None
    limits = (
        "echo 0 > /proc/sys/user/max_net_namespaces && "
        "echo 0 > /proc/sys/user/max_user_namespaces && "
    )
    probe = subprocess.run(
        [unshare, "--user", "--map-root-user", "sh", "-c", limits + "exec true"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    if probe.returncode != 0:
        return None
    return [unshare, "--user", "--map-root-user", "sh", "-c", limits + 'exec "$@"', "sh"]


def test_where_namespaces_are_unavailable_one_line_says_so(
    recording: Recording, listener: Listener, tmp_path: Path
) -> None:
    prefix = _without_namespaces()
    if prefix is None:
        pytest.skip("cannot make a place without namespaces here (unshare(1) and user namespaces)")
    body = """
    import _socket, subprocess
    subprocess.run(['true'])
    _socket.socket().connect(('127.0.0.1', PORT))
    """
    script = escape_script(tmp_path, body)
    done = replay(recording, script, str(listener.port), "0", flags=(), prefix=prefix)
    assert listener.drain() == (0, 0)  # the in-process guards still refuse
    assert done.returncode == 1, done.stdout + done.stderr
    notices = [line for line in done.stderr.splitlines() if "not isolated" in line]
    assert notices == [
        "otel-replay: replay not isolated (unshare: No space left on device, a namespace limit"
        " is 0 or reached): only in-process guards apply; subprocesses and native code could"
        " reach the network"
    ]
    report = done.stdout
    assert f"refused network access: 127.0.0.1:{listener.port}" in report
    assert "subprocess (possible escape): true" in report
    assert (
        "not isolated (unshare: No space left on device, a namespace limit is 0 or reached): "
        "only in-process guards applied; the 1 subprocess(es) listed could have reached the "
        "network"
    ) in report


def _python_for(uid: int) -> str | None:
    """A Python that ``uid`` may run as the launcher and, inside the namespaces, as its child
    (ours may live in a home that the unprivileged user cannot enter), or None."""
    as_uid = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    for candidate in (sys.executable, "/usr/bin/python3"):
        launch = [candidate, "-I", "-S", isolate_module.__file__, "--"]
        probe = subprocess.run(
            [*as_uid, *launch, candidate, "-I", "-S", "-c", "pass"],
            capture_output=True,
            timeout=30,
            check=False,
        )
        if probe.returncode == 0:
            return candidate
    return None


def test_an_unprivileged_user_gets_user_and_network_namespaces(listener: Listener) -> None:
    """The launcher as a user without privileges: its uid and gid map to themselves, files it
    writes are its own, and nothing reaches the host's loopback."""
    nobody = 65534
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("needs setpriv(1) to run as an unprivileged user")
        python = _python_for(nobody)
        if python is None:
            pytest.skip("no Python this machine's unprivileged user may run")
        prefix = ["setpriv", f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups"]
        uid = nobody
    else:
        python, prefix, uid = sys.executable, [], os.geteuid()
    program = textwrap.dedent(
        """
        import os, socket, sys
        print('uid', os.getuid(), os.getgid())
        print(open('/proc/self/uid_map').read().split())
        open(os.path.join(sys.argv[2], 'written'), 'w').close()
        try:
            socket.create_connection(('127.0.0.1', int(sys.argv[1])), 2).sendall(b'leak')
            print('ESCAPED')
        except OSError as exc:
            print('blocked', exc.errno)
        """
    )
    with tempfile.TemporaryDirectory() as scratch:
        os.chmod(scratch, 0o777)  # the unprivileged user writes here
        report = Path(scratch) / "events.jsonl"
        done = subprocess.run(
            [
                *prefix,
                python,
                "-I",
                "-S",
                isolate_module.__file__,
                "--",
                python,
                "-I",
                "-S",
                "-c",
                program,
                str(listener.port),
                scratch,
            ],
            env={"PATH": os.environ.get("PATH", ""), "OTEL_REPLAY_REPORT": str(report)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        written = (Path(scratch) / "written").stat()
        events = [json.loads(line) for line in report.read_text().splitlines()]
    assert done.returncode == 0, done.stderr
    assert listener.drain() == (0, 0)
    assert events == [
        {
            "type": "isolation",
            "isolated": True,
            "how": "user and network namespaces",
            "loopback": True,
        }
    ]
    lines = done.stdout.splitlines()
    gid = uid if prefix else os.getegid()
    assert lines[0] == f"uid {uid} {gid}"
    assert lines[1] == str([str(uid), str(uid), "1"])
    assert lines[2] == f"blocked {errno.ECONNREFUSED}"
    assert (written.st_uid, written.st_gid) == (uid, gid)


def test_replaying_in_process_refuses_below_the_socket_module(
    recording: Recording, listener: Listener
) -> None:
    with otel_replay.replaying(RUN, store=str(recording.store)) as result:
        assert httpx.get(recording.url).status_code == 200
        raw = _socket.socket()
        try:
            with pytest.raises(NetworkBlockedError):
                raw.connect(("127.0.0.1", listener.port))
        finally:
            raw.close()
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        with udp, pytest.raises(NetworkBlockedError):
            udp.sendmsg([b"leak"], [], 0, ("127.0.0.1", listener.udp_port))
        with pytest.raises(NetworkBlockedError):
            _socket.getaddrinfo("example.invalid", 80)
        with pytest.raises(NetworkBlockedError):
            _ = ctypes.CDLL(None).sendto
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # not the network
        with unix, pytest.raises(FileNotFoundError):
            unix.connect("/nonexistent/otel-replay.sock")
        subprocess.run(["true", "in-process"], check=True)
    assert listener.drain() == (0, 0)
    assert result.network_attempts == [
        f"127.0.0.1:{listener.port}",
        f"127.0.0.1:{listener.udp_port} (sendmsg)",
        "name lookup example.invalid:80",
        "native sendto() (ctypes lookup)",
    ]
    assert result.subprocesses == ["true in-process"]
    assert result.isolation is None
    assert not result.identical
    # The hook stays in the process but does nothing once the replay is over.
    after = _socket.socket()
    try:
        after.connect(("127.0.0.1", listener.port))
        after.send(b"ok")
    finally:
        after.close()
    assert listener.drain() == (1, 2)


def test_processes_otel_replay_starts_itself_are_not_reported(recording: Recording) -> None:
    from otel_replay.capture._vcs import _git

    with otel_replay.replaying(RUN, store=str(recording.store)) as result:
        _git(ROOT, "rev-parse", "HEAD")
        platform._uname_cache = None  # type: ignore[attr-defined]  # ask uname again
        platform.processor()  # runs uname -p on Linux
    assert result.subprocesses == []
