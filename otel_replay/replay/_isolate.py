"""Kernel-enforced hermetic replay: the replayed command runs in a network namespace of its own.

``otel-replay replay`` starts CMD through this file run as a script (:func:`launcher` builds the
command line: ``python -I -S _isolate.py -- CMD…``). The script calls ``unshare(2)``, brings up
the new namespace's loopback, appends one ``isolation`` event to the replay report (the file
``OTEL_REPLAY_REPORT`` names) and execs CMD, which keeps its pid, stdio and environment. In the
namespace the only interface is a loopback of its own: whatever CMD and every process it starts
do (``_socket``, native code, gRPC's C core, ``curl``, ``python -I -S``), the kernel finds no
route to the host's network or to its loopback services (``ENETUNREACH``; ``ECONNREFUSED`` on
the private loopback). Unix-domain sockets, pipes and files work as before, so the report file
and the store reach the parent unchanged.

The private loopback is up so that processes of the replay can still talk to each other over
TCP (a local MCP server, a kernel's ZeroMQ ports): nothing outside the replay listens on it.

Which namespaces:

* not root: a user namespace and a network namespace. The user's uid and gid map to themselves
  (files are read and written as before, ``getuid()`` is unchanged); nothing is gained outside.
* root: the network namespace alone, so root keeps its file access. Root could leave it on
  purpose (``setns(2)`` into pid 1's namespace); accidental escapes cannot. Where root may not
  (a container without ``CAP_SYS_ADMIN``), a user namespace too, mapping root to itself.

Where no namespace can be made (not Linux, a seccomp profile or sysctl forbidding ``unshare``),
the script writes one line on stderr (:func:`notice`), says why in the event and runs CMD
unisolated: the in-process guards still apply to Python code. A failure after ``unshare`` (the
process can no longer run as before) or a CMD that cannot be started is an event of its own
(``launch-failed``) and exit status 127; the parent turns it into its one-line error.

Standard library only, and nothing from this package: the script runs with ``-I -S``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import socket
import struct
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

__all__ = ["LAUNCH_FAILED", "isolate", "launcher", "main", "map_ids", "notice", "unavailable"]

LAUNCH_FAILED = 127
"""The launcher's exit status when it wrote a ``launch-failed`` event."""

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
# struct ifreq: the interface name, then a union whose largest member makes it 40 bytes on
# 64-bit systems (32 on 32-bit ones; the kernel ignores the rest).
_IFREQ = struct.Struct("16sH22x")


def unavailable() -> str | None:
    """Why this system cannot run the launcher at all (None where it can try)."""
    if not sys.platform.startswith("linux"):
        return "network namespaces need Linux"
    if not sys.executable:
        return "no Python executable to start the launcher with"
    return None


def launcher(command: Sequence[str]) -> list[str]:
    """The command line that runs ``command`` in a network namespace of its own."""
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), "--", *command]


def notice(reason: str) -> str:
    """The one line printed when a strict replay cannot be isolated."""
    return (
        f"otel-replay: replay not isolated ({reason}): only in-process guards apply; "
        "subprocesses and native code could reach the network"
    )


def _unshare(flags: int) -> None:
    call = getattr(os, "unshare", None)  # Python 3.12+
    if call is not None:
        call(flags)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(ctypes.c_int(flags)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def _write(path: str, text: str) -> None:
    # The kernel wants each map in a single write(2).
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def map_ids(uid: int, gid: int, proc: str = "/proc/self") -> None:
    """Map ``uid``/``gid`` (the caller's in the parent namespace) to themselves in the user
    namespace just entered; ``setgroups`` is denied first, as the kernel requires of an
    unprivileged writer of ``gid_map``."""
    with contextlib.suppress(FileNotFoundError):  # kernels before 3.19 have no such file
        _write(f"{proc}/setgroups", "deny")
    _write(f"{proc}/uid_map", f"{uid} {uid} 1\n")
    _write(f"{proc}/gid_map", f"{gid} {gid} 1\n")


def _loopback_up() -> bool:
    """Bring up ``lo`` in the current network namespace; False when it stays down."""
    import fcntl  # noqa: PLC0415 - POSIX only; the parent imports this module anywhere

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            current = fcntl.ioctl(probe, _SIOCGIFFLAGS, _IFREQ.pack(b"lo", 0))
            flags = _IFREQ.unpack(current)[1]
            fcntl.ioctl(probe, _SIOCSIFFLAGS, _IFREQ.pack(b"lo", flags | _IFF_UP))
    except OSError:
        return False
    return True


_HINTS = {
    errno.EPERM: "not permitted here",
    errno.ENOSPC: "a namespace limit is 0 or reached",
    errno.EINVAL: "not supported by this kernel",
    errno.ENOSYS: "not supported by this kernel",
}


def _why(exc: OSError) -> str:
    """``unshare: <error> (<what it usually means>)``."""
    text = f"unshare: {exc.strerror or exc}"
    hint = _HINTS.get(exc.errno or 0)
    return f"{text}, {hint}" if hint else text


def isolate() -> dict[str, Any]:
    """Move this process into new namespaces; returns the ``isolation`` event.

    Raises OSError when a namespace was made but the process could not be set up in it.
    """
    uid, gid = os.geteuid(), os.getegid()
    both = CLONE_NEWUSER | CLONE_NEWNET
    attempts = [CLONE_NEWNET, both] if uid == 0 else [both]
    reason = ""
    for flags in attempts:
        try:
            _unshare(flags)
        except OSError as exc:
            reason = _why(exc)
            continue
        if flags & CLONE_NEWUSER:
            map_ids(uid, gid)
        how = "user and network namespaces" if flags & CLONE_NEWUSER else "network namespace"
        return {"type": "isolation", "isolated": True, "how": how, "loopback": _loopback_up()}
    return {"type": "isolation", "isolated": False, "reason": reason}


def _event(report: str | None, event: dict[str, Any]) -> None:
    if report:
        with open(report, "a", encoding="utf-8") as out:
            out.write(json.dumps(event) + "\n")


def _fail(report: str | None, message: str) -> NoReturn:
    # The parent prints the event as its one-line error; without a report, say it here.
    if report:
        _event(report, {"type": "launch-failed", "error": message})
    else:
        sys.stderr.write(f"otel-replay: {message}\n")
        sys.stderr.flush()
    os._exit(LAUNCH_FAILED)


def main(argv: Sequence[str]) -> NoReturn:
    """``_isolate.py -- CMD…``: isolate this process, record how in the report, exec CMD."""
    command = list(argv[1:] if argv and argv[0] == "--" else argv)
    report = os.environ.get("OTEL_REPLAY_REPORT")
    if not command:
        _fail(report, "the launcher needs a command")
    try:
        event = isolate()
    except OSError as exc:
        _fail(report, f"cannot isolate the replay ({exc}); --no-isolate runs it without")
    _event(report, event)
    if not event["isolated"]:
        sys.stderr.write(notice(event["reason"]) + "\n")
        sys.stderr.flush()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        _fail(report, f"cannot run {command[0]!r}: {exc.strerror or exc}")


if __name__ == "__main__":
    main(sys.argv[1:])
