"""A program that reaches for the host's unix sockets and ``/proc``, for ``test_hermetic``.

``python _unix_agent.py URL TCP_PORT PATH NAME DGRAM WAY…``: makes the recorded call to URL
first (``-``: none; standard library only then, so it runs under ``python -I -S``), then tries
each WAY against the host's listeners (a path socket PATH, an abstract socket NAME, a datagram
socket DGRAM, a TCP port) and prints one line per attempt: ``WAY TARGET ESCAPED`` or
``WAY TARGET blocked ERRNO``. The ``own`` and ``race`` ways use sockets the program makes
itself, which must keep working.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable

SYS_CONNECT = {"x86_64": 42, "aarch64": 203}.get(os.uname().machine, -1)
LIBC = ctypes.CDLL(None, use_errno=True)
# The same attempt from a process of its own, which no in-process guard watches.
CONNECT = (
    "import socket, sys\n"
    "s = socket.socket(socket.AF_UNIX)\n"
    "try:\n"
    "    s.connect(sys.argv[1].replace('@', '\\0', 1)); s.sendall(b'leak'); print('connected')\n"
    "except OSError as exc:\n"
    "    print('blocked', exc.errno)\n"
)


def attempt(way: str, target: str, action: Callable[[], object]) -> None:
    try:
        action()
    except OSError as exc:
        print(way, target, "blocked", exc.errno, flush=True)
    else:
        print(way, target, "ESCAPED", flush=True)


def sockaddr_un(address: str) -> bytes:
    raw = address.encode()
    return struct.pack("=H", socket.AF_UNIX) + raw + (b"" if raw[:1] == b"\0" else b"\0")


def raw_connect(fd: int, address: bytes) -> None:
    """``syscall(SYS_connect)``: no libc symbol looked up, no audit event."""
    buffer = ctypes.create_string_buffer(address, len(address))
    if LIBC.syscall(SYS_CONNECT, fd, buffer, len(address)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def unix_send(address: str) -> None:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(address)
        sock.sendall(b"leak")


def ctypes_send(address: str) -> None:
    with socket.socket(socket.AF_UNIX) as sock:
        raw_connect(sock.fileno(), sockaddr_un(address))
        sock.sendall(b"leak")


def subprocess_send(address: str) -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", CONNECT, address.replace("\0", "@", 1)],
        capture_output=True,
        text=True,
        check=True,
    )
    words = done.stdout.split()
    if words[0] == "blocked":
        raise OSError(int(words[1]), "in a subprocess")


def curl_send(address: str) -> None:
    option = "--abstract-unix-socket" if address.startswith("\0") else "--unix-socket"
    done = subprocess.run(
        ["curl", "-sS", "-m", "2", option, address.lstrip("\0"), "-d", "leak", "http://host/"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise OSError(errno.EACCES if "ermission" in done.stderr else errno.EIO, done.stderr)


def datagram(path: str) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"leak", path)


def names(path: str) -> None:
    """The host's socket under other names: relative, through a symbolic link, a hard link."""
    scratch = tempfile.mkdtemp()
    symbolic, hard = os.path.join(scratch, "symbolic.sock"), os.path.join(scratch, "hard.sock")
    os.symlink(path, symbolic)
    os.link(path, hard)
    os.chdir(os.path.dirname(path))
    for name in (os.path.basename(path), symbolic, hard):
        attempt("names", name, lambda name=name: unix_send(name))  # type: ignore[misc]


def families() -> None:
    """A socket of a family that reaches past the namespace (``AF_VSOCK``: the hypervisor),
    and an io_uring (whose requests no seccomp filter sees)."""
    attempt("families", "vsock", lambda: socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM))
    params = ctypes.create_string_buffer(120)  # struct io_uring_params
    if LIBC.syscall(425, 4, params) < 0:
        print("families io_uring blocked", ctypes.get_errno(), flush=True)
    else:
        print("families io_uring ESCAPED", flush=True)


def tamper(path: str) -> None:
    """Reach for the host's socket, then erase the report and forge how the replay ran."""
    attempt("tamper", path, lambda: unix_send(path))
    forged = {"type": "isolation", "isolated": True, "how": "forged", "seccomp": True}
    with open(os.environ["OTEL_REPLAY_REPORT"], "w", encoding="utf-8") as report:
        report.write(json.dumps(forged) + "\n")


def proc(port: int, path: str) -> None:
    """How many of ``/proc``'s socket tables show the host's listeners, and which pids
    ``/proc`` lists."""
    port_hex = f":{port:04X} "
    pids = sorted(int(entry) for entry in os.listdir("/proc") if entry.isdigit())
    tables = [f"/proc/net/{t}" for t in ("unix", "tcp", "tcp6")]
    tables += [f"/proc/{pid}/net/{t}" for pid in pids for t in ("unix", "tcp")]
    shown = 0
    for table in tables:
        try:
            with open(table, encoding="utf-8", errors="replace") as text:
                content = text.read()
        except OSError:
            continue
        shown += content.count(path) + content.count(port_hex)
    print("proc tables showing the host's listeners:", shown, flush=True)
    print("proc pids:", pids, flush=True)
    with open("/proc/1/cmdline", "rb") as cmdline:
        print("proc pid 1:", cmdline.read().split(b"\0")[3].decode(), flush=True)


def serve_echo(listener: socket.socket) -> None:
    def run() -> None:
        while True:
            conn, _ = listener.accept()
            # A peer may hang up before the echo (the subprocess that only sends): its
            # broken pipe must not print a traceback into the lines the test reads.
            with conn, contextlib.suppress(OSError):
                conn.sendall(conn.recv(64))

    threading.Thread(target=run, daemon=True).start()


def echo(address: str | bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(address)
        sock.sendall(b"ping")
        return sock.recv(64)


def square(n: int) -> int:
    return n * n


def begin(step: str) -> None:
    """Say which step of ``own`` starts (on stderr, apart from the results the test reads):
    a replay that never ends names the step it hung in."""
    print("begin", step, file=sys.stderr, flush=True)


def own(tcp: bool) -> None:
    """The program's own sockets, processes and (in a namespace) loopback: all must work."""
    import faulthandler
    import multiprocessing

    # Every thread's stack, should a step take far longer than it ever does (the test gives
    # the replay 120 s): where a hang is, not only which step.
    faulthandler.dump_traceback_later(90)
    scratch = tempfile.mkdtemp()
    path = os.path.join(scratch, "own.sock")
    begin("path")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen()
    serve_echo(listener)
    print("own path", echo(path), flush=True)
    begin("abstract")
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(f"\0otel-replay-own-{os.getpid()}")
    abstract.listen()
    serve_echo(abstract)
    print("own abstract", echo(abstract.getsockname()), flush=True)
    begin("stale")
    stale = os.path.join(scratch, "stale.sock")
    with socket.socket(socket.AF_UNIX) as gone:
        gone.bind(stale)  # closed: the file stays, nothing listens
    attempt("own", "stale", lambda: echo(stale))
    begin("socketpair")
    one, two = socket.socketpair()
    one.sendall(b"pair")
    print("own socketpair", two.recv(4), flush=True)
    begin("from a subprocess")
    child = subprocess.run(
        [sys.executable, "-I", "-S", "-c", CONNECT, path],
        capture_output=True,
        text=True,
        check=False,
    )
    print("own from a subprocess", child.stdout.strip(), flush=True)

    async def unix_stream() -> bytes:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(await reader.read(4))
            await writer.drain()
            writer.close()

        server = await asyncio.start_unix_server(handle, os.path.join(scratch, "async.sock"))
        async with server:
            reader, writer = await asyncio.open_unix_connection(os.path.join(scratch, "async.sock"))
            writer.write(b"aio!")
            answer = await reader.read(4)
            writer.close()
            return answer

    begin("asyncio")
    print("own asyncio", asyncio.run(unix_stream()), flush=True)
    begin("forkserver")
    with multiprocessing.get_context("forkserver").Pool(2) as pool:
        print("own forkserver", pool.map(square, [1, 2, 3]), flush=True)
    if tcp:  # a process of the replay that no in-process guard watches: its own loopback
        begin("loopback")
        program = (
            "import socket; s = socket.create_server(('127.0.0.1', 0)); "
            "c = socket.create_connection(s.getsockname()); c.sendall(b'tcp'); "
            "print(s.accept()[0].recv(3))"
        )
        looped = subprocess.run(
            [sys.executable, "-I", "-S", "-c", program], capture_output=True, check=False
        )
        print("own loopback", looped.stdout.decode().strip(), flush=True)
    faulthandler.cancel_dump_traceback_later()


def race(path: str, rounds: int = 400) -> None:
    """One thread connects over and over with ``syscall(SYS_connect)`` while another rewrites
    the address under it between a socket of the program's own and the host's ``path``."""
    scratch = tempfile.mkdtemp()
    own_path = os.path.join(scratch, "o.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(own_path)
    listener.listen(64)
    serve_echo(listener)
    size = max(len(own_path), len(path)) + 3
    mine, theirs = (sockaddr_un(p).ljust(size, b"\0") for p in (own_path, path))
    address = ctypes.create_string_buffer(mine, size)
    stop = threading.Event()

    def flip() -> None:
        while not stop.is_set():
            for content in (theirs, mine):
                ctypes.memmove(address, content, size)

    flipper = threading.Thread(target=flip)
    flipper.start()
    counts = {"own": 0, "refused": 0, "other": 0}
    try:
        for _ in range(rounds):
            with socket.socket(socket.AF_UNIX) as sock:
                if LIBC.syscall(SYS_CONNECT, sock.fileno(), address, size) == 0:
                    sock.sendall(b"ping")
                    counts["own" if sock.recv(4) == b"ping" else "other"] += 1
                elif ctypes.get_errno() == errno.EACCES:
                    counts["refused"] += 1
                else:
                    counts["other"] += 1
    finally:
        stop.set()
        flipper.join()
    print("race", counts["own"] > 0, counts["refused"] > 0, counts["other"], flush=True)


def main(argv: list[str]) -> None:
    url, port, path, name, dgram, *ways = argv
    if url != "-":
        import httpx

        httpx.get(url).raise_for_status()
    abstract = "\0" + name
    senders = {"python": unix_send, "ctypes": ctypes_send, "subprocess": subprocess_send}
    senders["curl"] = curl_send
    for way in ways:
        send = senders.get(way)
        if send is not None:
            for address in (path, abstract):
                shown = address.replace("\0", "@")
                attempt(way, shown, lambda s=send, a=address: s(a))  # type: ignore[misc]
        elif way == "datagram":
            attempt(way, dgram, lambda: datagram(dgram))
        elif way == "names":
            names(path)
        elif way == "families":
            families()
        elif way == "tamper":
            tamper(path)
        elif way == "proc":
            proc(int(port), path)
        elif way in ("own", "own-tcp"):
            own(tcp=way == "own-tcp")
        elif way == "race":
            race(path)


if __name__ == "__main__":
    main(sys.argv[1:])
