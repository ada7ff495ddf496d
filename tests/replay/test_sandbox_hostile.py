"""Strict replay against programs that try their way out in ways ``test_hermetic`` does not:
each is refused and listed once, or reaches nothing, and the report says what ran and
holds no secret the program sent."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
from pathlib import Path

import pytest

from tests.replay.test_hermetic import (
    SYS_CONNECT,
    Listener,
    Recording,
    _document,
    escape_script,
    listener,  # noqa: F401 - fixtures
    recording,  # noqa: F401
    replay,
)

pytestmark = pytest.mark.subprocess


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_a_forked_child_that_execs_curl_is_listed_once(
    recording: Recording,  # noqa: F811
    listener: Listener,  # noqa: F811
    tmp_path: Path,
) -> None:
    """``os.execvp`` tries each directory of ``PATH`` in turn, an audit event each: the one
    curl that ran was listed once per directory tried (nine times on this machine)."""
    path = os.pathsep.join([str(tmp_path / "none"), "/nonexistent", os.environ["PATH"]])
    body = f"""
    import os
    os.environ['PATH'] = {path!r}
    pid = os.fork()
    if pid == 0:
        os.execvp('curl', ['curl', '-sS', '-m', '2', '-d', 'leak', f'http://127.0.0.1:{{PORT}}/'])
    print('blocked: curl status', os.waitpid(pid, 0)[1])
    """
    done = replay(recording, escape_script(tmp_path, body), str(listener.port), "0")
    assert listener.drain() == (0, 0), done.stderr
    assert "Failed to connect to 127.0.0.1" in done.stderr  # no route in the namespace
    document = _document(done)
    command = f"curl -sS -m 2 -d leak http://127.0.0.1:{listener.port}/"
    assert document["subprocesses"] == [command]
    assert document["network_attempts"] == []


def test_an_exec_that_finds_no_program_lists_nothing(
    recording: Recording,  # noqa: F811
    tmp_path: Path,
) -> None:
    body = """
    import os
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp('no-such-program-here', ['no-such-program-here'])
        except OSError:
            os._exit(9)
    print('blocked: status', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    """
    done = replay(recording, escape_script(tmp_path, body), "0", "0")
    assert "blocked: status 9" in done.stderr
    assert _document(done)["subprocesses"] == []


_NETLINK_USERSOCK = 2


@pytest.mark.skipif(SYS_CONNECT is None, reason="seccomp filter for x86-64 and arm64 only")
def test_without_a_network_namespace_no_netlink_message_reaches_the_host(
    recording: Recording,  # noqa: F811
    tmp_path: Path,
) -> None:
    """With ``--no-isolate`` a netlink socket lives in the host's network namespace, where a
    process listening on ``NETLINK_USERSOCK`` took the replay's message. Refused and listed;
    the kernel's routing table (``getifaddrs``) is still asked."""
    host = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_USERSOCK)
    with host:
        host.bind((0, 0))
        host.setblocking(False)
        body = f"""
        import socket, struct
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()
        print('route socket made')
        s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, {_NETLINK_USERSOCK})
        s.sendto(struct.pack('=IHHII', 20, 16, 0, 1, 0) + b'leak', ({host.getsockname()[0]}, 0))
        print('ESCAPED')
        """
        done = replay(
            recording,
            escape_script(tmp_path, body),
            "0",
            "0",
            flags=("--json", "--no-isolate"),
        )
        with contextlib.suppress(BlockingIOError):
            pytest.fail(f"the host got {host.recv(100)!r}")
    assert "route socket made" in done.stderr
    assert "blocked: PermissionError 13" in done.stderr
    assert "ESCAPED" not in done.stderr
    document = _document(done)
    assert document["isolation"]["seccomp"] is True
    assert document["network_attempts"] == [f"socket(AF_NETLINK, SOCK_RAW, {_NETLINK_USERSOCK})"]
    assert done.returncode == 1


def test_the_agents_uncaught_error_is_reported_without_the_key_it_sent(
    recording: Recording,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The key a program sent (learned from its Authorization header) and then quoted in
    the exception that ended it went whole into the replay's report, its --json and its
    HTML page."""
    key = "sk-proj-TOPSECRET0123456789abcdef"
    script = tmp_path / "agent.py"
    script.write_text(
        "import sys, httpx\n"
        f"httpx.get(sys.argv[1], headers={{'Authorization': 'Bearer {key}'}}).raise_for_status()\n"
        f"raise RuntimeError('the provider refused key {key}')\n"
    )
    page = tmp_path / "replay.html"
    done = replay(recording, script, "0", "0", flags=("--report", str(page)))
    assert done.returncode == 3, done.stdout + done.stderr
    said = "the agent raised RuntimeError: the provider refused key REDACTED and exited"
    assert said in done.stdout
    assert key not in done.stdout and key not in page.read_text(encoding="utf-8")
    document = _document(replay(recording, script, "0", "0"))
    assert document["agent"]["error"] == "RuntimeError: the provider refused key REDACTED"
