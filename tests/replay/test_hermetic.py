"""Hermetic strict replay: every known way out, tried against listeners on the host that count
what they receive.

A small run (one HTTP tool call to the stand-in) is recorded; the stand-in is then gone. Each
escape script first makes the recorded call (served from the recording), then tries its way
out to a TCP and a UDP port of the test's :class:`Listener` on the host's loopback, or to the
unix sockets (a path, an abstract name, a datagram path) of its :class:`UnixListener`, under
the real ``otel-replay replay RUN -- python script.py``. Whatever the script does, the
listeners must receive nothing: Python-level attempts are refused in-process (socket guard,
audit hooks) and listed; native code and subprocesses meet the kernel: the child's own network
namespace, and the seccomp filter that refuses (and lists) every unix socket the replay did not
make itself. The in-process API (``otel_replay.replaying``) is tried against the same listener,
and so are the fallback without namespaces (made real with ``unshare(1)``: a user namespace
whose namespace limits are 0), the fallback without seccomp (a filter that forbids seccomp
itself), ``--no-isolate`` (the filter alone) and the user-namespace path (the launcher run as
an unprivileged user). The replay's own sockets, processes and loopback keep working.
"""

from __future__ import annotations

import _socket
import contextlib
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

pytestmark = pytest.mark.subprocess

CLI = Path(sys.executable).parent / "otel-replay"
UNIX_AGENT = str(Path(__file__).with_name("_unix_agent.py"))
RUN = "r_hermetic"
# Root keeps its file access: no user namespace for it.
NAMESPACES = ("" if os.geteuid() == 0 else "user, ") + "network, PID and mount namespaces"
ISOLATED = f"isolated: the program and every process it started ran in {NAMESPACES} of their own"
FILTERED = (
    "filtered: a seccomp filter refused, in every process, the unix sockets the replay did not "
    "make itself"
)
ISOLATION = {
    "isolated": True,
    "how": NAMESPACES,
    "loopback": True,
    "reason": None,
    "private_proc": True,
    "seccomp": True,
    "seccomp_reason": None,
}
SYS_CONNECT = {"x86_64": 42, "aarch64": 203}.get(platform.machine())


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


class UnixListener:
    """The host's unix sockets, as a daemon's (Docker's, ssh-agent's, a database's) would be:
    a stream socket at a path, one with an abstract name, a datagram socket at a path. Anyone
    may connect (mode 0777), so only the replay's own refusal keeps an unprivileged replay
    out. :meth:`drain` counts what reached them, as :class:`Listener`'s does.
    """

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="otel-replay-host-"))
        self.directory.chmod(0o777)
        self.path = str(self.directory / "daemon.sock")
        self.dgram = str(self.directory / "log.sock")
        self.name = f"otel-replay-host-{os.getpid()}-{id(self)}"
        self.stream = socket.socket(socket.AF_UNIX)
        self.stream.bind(self.path)
        self.abstract = socket.socket(socket.AF_UNIX)
        self.abstract.bind("\0" + self.name)
        self.datagrams = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.datagrams.bind(self.dgram)
        for sock in (self.stream, self.abstract):
            sock.listen(64)
        for sock in (self.stream, self.abstract, self.datagrams):
            sock.setblocking(False)
        for path in (self.path, self.dgram):
            os.chmod(path, 0o777)
        self.connections = 0
        self.received = 0

    def args(self, port: int = 0) -> list[str]:
        """The listeners, as ``_unix_agent.py`` takes them after its URL."""
        return [str(port), self.path, self.name, self.dgram]

    def drain(self) -> tuple[int, int]:
        """Every connection and byte received so far: ``(connections, bytes)``."""
        for sock in (self.stream, self.abstract):
            while True:
                try:
                    conn, _ = sock.accept()
                except BlockingIOError:
                    break
                self.connections += 1
                with conn:
                    conn.settimeout(0.5)
                    with contextlib.suppress(OSError):
                        while data := conn.recv(65536):
                            self.received += len(data)
        while True:
            try:
                self.received += len(self.datagrams.recv(65536))
            except BlockingIOError:
                break
        return self.connections, self.received

    def close(self) -> None:
        for sock in (self.stream, self.abstract, self.datagrams):
            sock.close()
        shutil.rmtree(self.directory, ignore_errors=True)


@pytest.fixture
def unix_listener() -> Iterator[UnixListener]:
    opened = UnixListener()
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
    """``PREFIX otel-replay replay RUN --store STORE FLAGS -- python SCRIPT URL ARGS``; one
    that does not end in time fails the test with all it printed (where it stopped)."""
    command = [*prefix, str(CLI), "replay", RUN, "--store", str(recording.store), *flags]
    try:
        return subprocess.run(
            [*command, "--", sys.executable, str(script), recording.url, *args],
            env=_env(recording.store),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        out, err = (
            part.decode(errors="replace") if isinstance(part, bytes) else part or ""
            for part in (exc.stdout, exc.stderr)
        )
        pytest.fail(f"{exc}\nstdout:\n{out}\nstderr:\n{err}", pytrace=False)


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
    # A line of its own: a traceback (Python 3.13's shows -c code) may quote the print.
    assert "ESCAPED" not in done.stderr.splitlines()  # --json: the program's output is here
    assert escape.evidence in done.stderr
    document = _document(done)
    assert document["isolation"] == ISOLATION
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
    assert FILTERED in report
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


@pytest.mark.skipif(SYS_CONNECT is None, reason="syscall numbers for x86-64 and arm64 only")
def test_no_isolate_runs_under_the_seccomp_filter_alone(
    recording: Recording, listener: Listener, tmp_path: Path
) -> None:
    """Without namespaces the kernel still refuses what the in-process guards cannot see: a
    raw ``syscall(SYS_connect)`` and a subprocess's connect, each listed."""
    body = (
        _SOCKADDR
        + f"""
import _socket, subprocess, sys
subprocess.run(['true'])
subprocess.run([sys.executable, '-I', '-S', '-c', {_CONNECT!r}, str(PORT)])
print('syscall', libc.syscall({SYS_CONNECT}, fd, ctypes.byref(address), 16), ctypes.get_errno())
_socket.socket().connect(('127.0.0.1', PORT))
"""
    )
    script = escape_script(tmp_path, body)
    done = replay(recording, script, str(listener.port), "0", flags=("--json", "--no-isolate"))
    assert listener.drain() == (0, 0)
    assert f"syscall -1 {errno.EACCES}" in done.stderr
    assert "PermissionError" in done.stderr  # the subprocess's connect
    document = _document(done)
    assert document["isolation"] == {
        "isolated": False,
        "how": None,
        "loopback": False,
        "reason": "--no-isolate",
        "private_proc": False,
        "seccomp": True,
        "seccomp_reason": None,
    }
    assert document["network_attempts"] == [f"127.0.0.1:{listener.port}"] * 3
    assert document["subprocesses"][0] == "true"
    assert document["subprocesses"][1].startswith(f"{sys.executable} -I -S -c")
    assert "not isolated" not in done.stderr  # asked for: no notice
    assert done.returncode == 1

    text = replay(recording, script, str(listener.port), "0", flags=("--no-isolate",))
    assert listener.drain() == (0, 0)
    assert (
        "not isolated (--no-isolate): a seccomp filter refused every connection, loopback "
        "included, but to the replay's own unix sockets"
    ) in text.stdout
    assert "subprocess (no network: filtered): true" in text.stdout


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
    body = f"""
    import _socket, subprocess, sys
    subprocess.run([sys.executable, '-I', '-S', '-c', {_CONNECT!r}, str(PORT)])
    _socket.socket().connect(('127.0.0.1', PORT))
    """
    script = escape_script(tmp_path, body)
    done = replay(recording, script, str(listener.port), "0", flags=(), prefix=prefix)
    assert listener.drain() == (0, 0)  # the in-process guards and the filter refuse
    assert done.returncode == 1, done.stdout + done.stderr
    notices = [line for line in done.stderr.splitlines() if "not isolated" in line]
    assert notices == [
        "otel-replay: replay not isolated (unshare: No space left on device, a namespace limit"
        " is 0 or reached): a seccomp filter refuses its network connections instead, loopback"
        " included"
    ]
    report = done.stdout
    assert f"refused network access: 127.0.0.1:{listener.port} (2 times)" in report
    assert f"subprocess (no network: filtered): {sys.executable} -I -S -c" in report
    assert (
        "not isolated (unshare: No space left on device, a namespace limit is 0 or reached): a "
        "seccomp filter refused every connection, loopback included, but to the replay's own unix "
        "sockets"
    ) in report


# Runs CMD under a seccomp filter that makes seccomp(2) fail with EPERM, as in a container whose
# profile forbids it (no other way to be without seccomp on this kernel).
_NO_SECCOMP = """
import ctypes, os, struct, sys
seccomp = {"x86_64": 317, "aarch64": 277}[os.uname().machine]
code = [(0x20, 0, 0, 0), (0x15, 1, 0, seccomp), (0x06, 0, 0, 0x7FFF0000),
        (0x06, 0, 0, 0x00050000 | 1)]
filters = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *op) for op in code))
fprog = struct.pack("=HxxxxxxQ", len(code), ctypes.addressof(filters))
program = ctypes.create_string_buffer(fprog)
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0  # no new privileges
assert libc.prctl(22, 2, program, 0, 0) == 0, ctypes.get_errno()  # PR_SET_SECCOMP, filter
os.execv(sys.argv[1], sys.argv[1:])
"""


@pytest.mark.skipif(SYS_CONNECT is None, reason="filter written for x86-64 and arm64 only")
@pytest.mark.parametrize("isolate", [True, False])
def test_where_seccomp_is_unavailable_one_line_says_what_is_left(
    recording: Recording, tmp_path: Path, isolate: bool
) -> None:
    wrapper = tmp_path / "no_seccomp.py"
    wrapper.write_text(_NO_SECCOMP)
    script = escape_script(tmp_path, "import subprocess\nsubprocess.run(['true'])")
    flags = () if isolate else ("--no-isolate",)
    done = replay(recording, script, "0", "0", flags=flags, prefix=[sys.executable, str(wrapper)])
    assert done.returncode == 0, done.stdout + done.stderr
    reason = "seccomp: Operation not permitted"
    notices = [line for line in done.stderr.splitlines() if line.startswith("otel-replay:")]
    if isolate:
        assert notices == [
            f"otel-replay: no seccomp filter ({reason}): the replay could reach the host's unix "
            "sockets (Docker, ssh-agent, databases)"
        ]
        assert ISOLATED in done.stdout
        assert (
            f"not filtered ({reason}): the program could reach the host's unix sockets (Docker, "
            "ssh-agent, databases)"
        ) in done.stdout
    else:
        assert notices == [
            f"otel-replay: no seccomp filter ({reason}): only in-process guards apply; "
            "subprocesses and native code could reach the network"
        ]
        assert "subprocess (possible escape): true" in done.stdout
        assert (
            "not isolated (--no-isolate): only in-process guards applied; the 1 subprocess(es) "
            "listed could have reached the network"
        ) in done.stdout


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


def _unprivileged() -> tuple[list[str], str, int]:
    """How to run the launcher as a user without privileges: a command prefix, a Python that
    user may run, and its uid (the test's own when it has no privileges to drop)."""
    nobody = 65534
    if os.geteuid() != 0:
        return [], sys.executable, os.geteuid()
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv(1) to run as an unprivileged user")
    python = _python_for(nobody)
    if python is None:
        pytest.skip("no Python this machine's unprivileged user may run")
    return ["setpriv", f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups"], python, nobody


def test_an_unprivileged_user_gets_user_and_network_namespaces(listener: Listener) -> None:
    """The launcher as a user without privileges: its uid and gid map to themselves, files it
    writes are its own, and nothing reaches the host's loopback."""
    prefix, python, uid = _unprivileged()
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
            "how": "user, network, PID and mount namespaces",
            "loopback": True,
            "private_proc": True,
            "seccomp": True,
            "seccomp_reason": None,
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
    from otel_replay.runs._vcs import _git

    with otel_replay.replaying(RUN, store=str(recording.store)) as result:
        _git(ROOT, "rev-parse", "HEAD")
        platform._uname_cache = None  # type: ignore[attr-defined]  # ask uname again
        platform.processor()  # runs uname -p on Linux
    assert result.subprocesses == []


# Unix-domain sockets: files, not network; no network namespace keeps a connect(2) from
# /run/docker.sock. The seccomp filter does, in every process, and lists each refusal.


@pytest.mark.parametrize("way", ["python", "ctypes", "subprocess", "curl"])
def test_no_unix_socket_of_the_host_is_reached(
    way: str, recording: Recording, unix_listener: UnixListener
) -> None:
    if way == "ctypes" and SYS_CONNECT is None:
        pytest.skip("syscall numbers for x86-64 and arm64 only")
    if way == "curl" and shutil.which("curl") is None:
        pytest.skip("needs curl")
    done = replay(recording, Path(UNIX_AGENT), *unix_listener.args(), way)

    assert unix_listener.drain() == (0, 0), done.stderr
    path, name = unix_listener.path, unix_listener.name
    assert f"{way} {path} blocked" in done.stderr
    assert f"{way} @{name} blocked" in done.stderr
    assert "ESCAPED" not in done.stderr.splitlines()
    document = _document(done)
    assert document["isolation"] == ISOLATION
    assert document["network_attempts"] == [f"unix:{path}", f"unix:@{name}"]
    assert document["identical"] is False
    assert done.returncode == 1, done.stderr


def test_a_unix_socket_of_the_host_is_refused_by_any_name(
    recording: Recording, unix_listener: UnixListener
) -> None:
    """Relative, through a symbolic or a hard link, or a datagram sent to it: refused, and
    each listed in the report."""
    done = replay(recording, Path(UNIX_AGENT), *unix_listener.args(), "names", "datagram", flags=())
    assert unix_listener.drain() == (0, 0), done.stderr
    assert "ESCAPED" not in done.stdout.splitlines()  # no --json: the program's output is on stdout
    assert f"names daemon.sock blocked {errno.EACCES}" in done.stdout
    assert f"datagram {unix_listener.dgram} blocked {errno.EACCES}" in done.stdout
    refused = [
        line.removeprefix("refused network access: ")
        for line in done.stdout.splitlines()
        if line.startswith("refused network access: ")
    ]
    assert len(refused) == 4, done.stdout
    assert refused[0] == "unix:daemon.sock"
    assert refused[1].startswith("unix:/") and refused[1].endswith("/symbolic.sock")
    assert refused[2].startswith("unix:/") and refused[2].endswith("/hard.sock")
    assert refused[3] == "socket(AF_UNIX, SOCK_DGRAM)"
    assert ISOLATED in done.stdout
    assert FILTERED in done.stdout
    assert done.returncode == 1


def test_the_program_can_neither_erase_nor_forge_what_the_launcher_reports(
    recording: Recording, unix_listener: UnixListener
) -> None:
    """The report file is the program's to write; the launcher's events (how it was isolated,
    what the filter refused) reach the parent through a file the program cannot reach."""
    done = replay(recording, Path(UNIX_AGENT), *unix_listener.args(), "tamper")
    assert unix_listener.drain() == (0, 0)
    assert f"tamper {unix_listener.path} blocked {errno.EACCES}" in done.stderr
    document = _document(done)
    assert document["isolation"] == ISOLATION
    assert document["network_attempts"] == [f"unix:{unix_listener.path}"]
    assert done.returncode == 1


def test_a_command_that_cannot_start_is_one_line(recording: Recording, tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-program")
    done = subprocess.run(
        [str(CLI), "replay", RUN, "--store", str(recording.store), "--", missing],
        env=_env(recording.store),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"Error: cannot run {missing!r}: No such file or directory"
    ], done.stderr


@pytest.mark.skipif(SYS_CONNECT is None, reason="syscall numbers for x86-64 and arm64 only")
def test_other_socket_families_and_io_uring_are_refused(recording: Recording) -> None:
    done = replay(recording, Path(UNIX_AGENT), "0", "/none", "none", "/none", "families")
    assert f"families vsock blocked {errno.EACCES}" in done.stderr
    assert f"families io_uring blocked {errno.ENOSYS}" in done.stderr
    assert _document(done)["network_attempts"] == ["socket(AF_VSOCK, SOCK_STREAM)"]
    assert done.returncode == 1


def test_proc_shows_none_of_the_hosts_sockets(
    recording: Recording, listener: Listener, unix_listener: UnixListener
) -> None:
    """``/proc/net/*`` shows the replay's network namespace; ``/proc/PID/net/*`` of the
    host's processes would show the host's: the replay's ``/proc`` lists its own only."""
    done = replay(recording, Path(UNIX_AGENT), *unix_listener.args(listener.port), "proc")
    assert "proc tables showing the host's listeners: 0" in done.stderr
    (pids,) = [line for line in done.stderr.splitlines() if line.startswith("proc pids: ")]
    assert json.loads(pids.removeprefix("proc pids: "))[:2] == [1, 2]  # its init, then CMD
    assert f"proc pid 1: {isolate_module.__file__}" in done.stderr
    document = _document(done)
    assert document["isolation"] == ISOLATION
    assert document["network_attempts"] == []
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("isolate", [True, False])
def test_the_replays_own_sockets_and_processes_keep_working(
    recording: Recording, isolate: bool
) -> None:
    """The filter refuses only what is not the replay's: its unix sockets (path, abstract,
    from another of its processes, asyncio's), socket pairs, a forkserver pool, its private
    loopback (in a network namespace) work; a socket file nobody listens on says
    ``ECONNREFUSED`` as before, and is not a network attempt."""
    way = "own-tcp" if isolate else "own"
    flags = ("--json",) if isolate else ("--json", "--no-isolate")
    done = replay(recording, Path(UNIX_AGENT), "0", "/none", "none", "/none", way, flags=flags)
    lines = [line for line in done.stderr.splitlines() if line.startswith("own ")]
    expected = [
        "own path b'ping'",
        "own abstract b'ping'",
        f"own stale blocked {errno.ECONNREFUSED}",
        "own socketpair b'pair'",
        "own from a subprocess connected",
        "own asyncio b'aio!'",
        "own forkserver [1, 4, 9]",
    ]
    assert lines == expected + (["own loopback b'tcp'"] if isolate else []), done.stderr
    document = _document(done)
    assert document["network_attempts"] == []
    assert document["isolation"]["seccomp"] is True
    assert document["identical"] is True
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(SYS_CONNECT is None, reason="syscall numbers for x86-64 and arm64 only")
def test_a_racing_thread_cannot_swap_a_host_socket_in(
    recording: Recording, unix_listener: UnixListener
) -> None:
    """The supervisor reads the address once and connects with what it read: a thread that
    rewrites the address between the replay's own socket and the host's while another
    connects never gets the host's."""
    done = replay(recording, Path(UNIX_AGENT), *unix_listener.args(), "race")
    assert unix_listener.drain() == (0, 0), done.stderr
    (race,) = [line for line in done.stderr.splitlines() if line.startswith("race ")]
    own, refused = race.split()[1:3]
    assert (own, refused) == ("True", "True"), done.stderr  # both addresses were met
    attempts = _document(done)["network_attempts"]
    assert attempts and set(attempts) == {f"unix:{unix_listener.path}"}


def test_an_unprivileged_replay_reaches_no_unix_socket_of_the_host(
    listener: Listener, unix_listener: UnixListener
) -> None:
    prefix, python, _uid = _unprivileged()
    ways = ["python", "subprocess", "datagram", "proc"]
    if SYS_CONNECT is not None:
        ways.append("ctypes")
    with tempfile.TemporaryDirectory() as scratch:
        os.chmod(scratch, 0o777)  # the unprivileged user writes here
        report = Path(scratch) / "events.jsonl"
        done = subprocess.run(
            [
                *prefix,
                *(python, "-I", "-S", isolate_module.__file__, "--"),
                *(python, "-I", "-S", UNIX_AGENT, "-", *unix_listener.args(listener.port)),
                *ways,
            ],
            env={"PATH": os.environ.get("PATH", ""), "OTEL_REPLAY_REPORT": str(report)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        events = [json.loads(line) for line in report.read_text().splitlines()]
    assert done.returncode == 0, done.stdout + done.stderr
    assert unix_listener.drain() == (0, 0), done.stdout
    assert listener.drain() == (0, 0)
    assert "ESCAPED" not in done.stdout.splitlines()
    assert "proc tables showing the host's listeners: 0" in done.stdout
    assert events[0]["how"] == "user, network, PID and mount namespaces"
    assert events[0]["seccomp"] is True
    path, name = f"unix:{unix_listener.path}", f"unix:@{unix_listener.name}"
    refused = [event["address"] for event in events[1:]]
    assert refused == [
        *(path, name),  # python
        *(path, name),  # a subprocess
        "socket(AF_UNIX, SOCK_DGRAM)",
        *((path, name) if SYS_CONNECT is not None else ()),  # ctypes
    ]


def test_no_process_of_the_replay_can_drive_the_supervisor() -> None:
    """Without a PID namespace the supervisor (unfiltered) is a same-user process the replay
    can name: it cannot be attached to, nor its memory opened."""
    prefix, python, _uid = _unprivileged()
    program = textwrap.dedent(
        """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        parent = os.getppid()
        print('attach', libc.ptrace(16, parent, 0, 0), ctypes.get_errno())  # PTRACE_ATTACH
        try:
            open(f'/proc/{parent}/mem', 'rb').close()
            print('mem opened')
        except OSError as exc:
            print('mem', exc.errno)
        """
    )
    launch = [python, "-I", "-S", isolate_module.__file__, "--no-namespaces", "--"]
    done = subprocess.run(
        [*prefix, *launch, python, "-I", "-S", "-c", program],
        env={"PATH": os.environ.get("PATH", "")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.splitlines() == [f"attach -1 {errno.EPERM}", f"mem {errno.EACCES}"], (
        done.stdout + done.stderr
    )
