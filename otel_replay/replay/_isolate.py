"""Kernel-enforced hermetic replay: the replayed command runs in namespaces of its own, under a
seccomp filter.

``otel-replay replay`` starts CMD through this file run as a script (:func:`launcher` builds the
command line: ``python -I -S _isolate.py [--no-namespaces] -- CMD…``). The script (the
*launcher*) makes the namespaces, starts CMD under the filter, appends one ``isolation`` event to
the replay report (the file ``OTEL_REPLAY_REPORT`` names) and stays, as the filter's supervisor
(:mod:`otel_replay.replay._seccomp`), until CMD ends; then it ends as CMD did (its exit status,
or the same signal). Signals it is sent (``SIGTERM``, ``SIGHUP``…) are passed on to CMD.

* A network namespace: the only interface is a loopback of its own, so whatever CMD and every
  process it starts do (``_socket``, native code, gRPC's C core, ``curl``, ``python -I -S``),
  the kernel finds no route to the host's network or its loopback services (``ENETUNREACH``;
  ``ECONNREFUSED`` on the private loopback). The loopback is up so that the replay's own
  processes can talk over TCP (a local MCP server, a kernel's ZeroMQ ports).
* A PID namespace and a mount namespace with a ``/proc`` of its own, so ``/proc`` lists the
  replay's processes only: ``/proc/1/net/unix`` of the host's init would list every socket of
  the host. CMD runs as pid 2 under a small init (pid 1) that reaps orphans and passes signals
  on; when CMD ends, what it left running ends too.
* The seccomp filter: unix-domain sockets are files, not network, and a network namespace does
  not stop a ``connect(2)`` to ``/run/docker.sock``; the filter refuses every unix socket the
  replay did not make itself (see :mod:`otel_replay.replay._seccomp`) and reports each refusal.

Which namespaces: not root: a user namespace too, mapping the user's uid and gid to themselves
(files are read and written as before). Root: no user namespace, so root keeps its file
access; root could leave on purpose (``umount /proc``, ``setns(2)``), not by accident. Where
root may not (a container without ``CAP_SYS_ADMIN``), a user namespace mapping root to itself.
Where ``/proc`` cannot be mounted (a container that masks parts of it), no PID namespace.

``--no-namespaces`` (``replay --no-isolate``), or a system that refuses namespaces: the filter
alone, which then refuses every IP connection (loopback included) and every socket but TCP,
in every process. Where neither is available, one line on stderr (:func:`notice`) says what
is left: the in-process guards, which see Python code only. A failure once the process can no
longer run as before, or a CMD that cannot be started, is an event of its own
(``launch-failed``) and exit status 127; the parent turns it into its one-line error.

Standard library only, and nothing from this package but its sibling ``_seccomp``: the script
runs with ``-I -S``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import select
import signal
import socket
import struct
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

if __package__:
    from otel_replay.replay import _seccomp
else:  # the launcher: run as a script, its directory is not on the path (-I)
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))
    import _seccomp  # type: ignore[import-not-found,no-redef]

__all__ = [
    "LAUNCH_FAILED",
    "isolate",
    "isolated_launcher",
    "isolation_notice",
    "isolation_unavailable",
    "main",
    "map_ids",
]

LAUNCH_FAILED = 127
"""The launcher's exit status when it wrote a ``launch-failed`` event."""

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
# struct ifreq: the interface name, then a union whose largest member makes it 40 bytes on
# 64-bit systems (32 on 32-bit ones; the kernel ignores the rest).
_IFREQ = struct.Struct("16sH22x")
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_SLAVE = 0x2, 0x4, 0x8, 0x4000, 0x80000
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
# Passed on to CMD (looked up by name: the parent imports this module anywhere).
_FORWARDED = tuple(
    getattr(signal, name)
    for name in ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name)
)
_STATUS = struct.Struct("=i")
_GO = b"go"


def isolation_unavailable() -> str | None:
    """Why this system cannot run the launcher at all (None where it can try)."""
    if not sys.platform.startswith("linux"):
        return "network namespaces need Linux"
    if not sys.executable:
        return "no Python executable to start the launcher with"
    return None


def isolated_launcher(
    command: Sequence[str], *, namespaces: bool = True, events_fd: int | None = None
) -> list[str]:
    """The command line that runs ``command`` isolated (``namespaces`` False: under the
    seccomp filter alone). ``events_fd``: a file descriptor, passed to the launcher alone,
    that takes its events instead of the report file."""
    flags = [] if namespaces else ["--no-namespaces"]
    if events_fd is not None:
        flags += ["--events-fd", str(events_fd)]
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), *flags, "--", *command]


def isolation_notice(reason: str, *, filtered: bool = False) -> str:
    """The one line printed when a strict replay gets no network namespace (``filtered``:
    the seccomp filter applies all the same)."""
    if filtered:
        return (
            f"otel-replay: replay not isolated ({reason}): a seccomp filter refuses its "
            "network connections instead, loopback included"
        )
    return (
        f"otel-replay: replay not isolated ({reason}): only in-process guards apply; "
        "subprocesses and native code could reach the network"
    )


def _unfiltered_notice(reason: str, *, isolated: bool) -> str:
    if isolated:
        return (
            f"otel-replay: no seccomp filter ({reason}): the replay could reach the host's "
            "unix sockets (Docker, ssh-agent, databases)"
        )
    return (
        f"otel-replay: no seccomp filter ({reason}): only in-process guards apply; "
        "subprocesses and native code could reach the network"
    )


def _checked(result: int) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def _unshare(flags: int) -> None:
    call = getattr(os, "unshare", None)  # Python 3.12+
    if call is not None:
        call(flags)
        return
    _checked(_seccomp.libc().unshare(ctypes.c_int(flags)))


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


def _how(names: Sequence[str]) -> str:
    """``network namespace``, ``user and network namespaces``, ``user, network, PID and
    mount namespaces``."""
    if len(names) == 1:
        return f"{names[0]} namespace"
    return f"{', '.join(names[:-1])} and {names[-1]} namespaces"


def isolate() -> dict[str, Any]:
    """Move this process into new user (not for root) and network namespaces; returns the
    ``isolation`` event.

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
        names = ["user", "network"] if flags & CLONE_NEWUSER else ["network"]
        return {
            "type": "isolation",
            "isolated": True,
            "how": _how(names),
            "loopback": _loopback_up(),
        }
    return {"type": "isolation", "isolated": False, "reason": reason}


def _mount_proc() -> None:
    """In a new mount namespace of a process of a new PID namespace: a ``/proc`` of that
    PID namespace (and so of this network namespace) over the host's."""
    libc = _seccomp.libc()
    # Slave first: a mount made here must not propagate to the host's (shared) root.
    _checked(libc.mount(None, b"/", None, ctypes.c_ulong(_MS_REC | _MS_SLAVE), None))
    flags = ctypes.c_ulong(_MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    _checked(libc.mount(b"proc", b"/proc", b"proc", flags, None))


def _private_proc() -> bool:
    """Whether a PID namespace with a ``/proc`` of its own can be made here: tried in a
    child that throws both away (a container may refuse the mount only)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _unshare(CLONE_NEWPID | CLONE_NEWNS)
            inner = os.fork()
            if inner == 0:
                try:
                    _mount_proc()
                except BaseException:  # a forked child must not return
                    os._exit(1)
                os._exit(0)
            code = os.waitstatus_to_exitcode(os.waitpid(inner, 0)[1])
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def _forward_to(pid: list[int]) -> None:
    """Pass the signals a parent is sent for its child on to ``pid[0]`` (once it is set)."""

    def forward(signum: int, _frame: object) -> None:
        if pid[0] > 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid[0], signum)

    for number in _FORWARDED:
        signal.signal(number, forward)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal sends it to CMD itself


class _Events:
    """Where the launcher's events go: a file descriptor the parent opened for it alone
    (``--events-fd``; CMD cannot reach it, so it can neither erase nor forge them) or, without
    one, the report file ``OTEL_REPLAY_REPORT`` names (or nowhere)."""

    def __init__(self, fd: int | None, path: str | None) -> None:
        self._fd = fd
        self._path = path

    def __bool__(self) -> bool:
        return self._fd is not None or bool(self._path)

    def write(self, event: dict[str, Any]) -> None:
        """Append ``event``, one line in one write."""
        line = (json.dumps(event) + "\n").encode("utf-8", "backslashreplace")
        if self._fd is not None:
            os.write(self._fd, line)
        elif self._path:
            with open(self._path, "ab") as out:
                out.write(line)


def _fail(report: _Events, message: str) -> NoReturn:
    # The parent prints the event as its one-line error; without a report, say it here.
    if report:
        report.write({"type": "launch-failed", "error": message})
    else:
        sys.stderr.write(f"otel-replay: {message}\n")
        sys.stderr.flush()
    os._exit(LAUNCH_FAILED)


def _die_with_parent() -> None:
    _seccomp.libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _command(
    command: list[str], report: _Events, channel: socket.socket, *, netns: bool, filtered: bool
) -> NoReturn:
    """Become CMD: install the filter, hand its other end to the launcher, wait for the
    launcher to be ready, exec."""
    try:
        _die_with_parent()
        listener: list[int] = []
        reason = None
        if filtered:
            try:
                listener.append(_seccomp.install(netns=netns))
            except OSError as exc:
                reason = f"seccomp: {exc.strerror or exc}"
        socket.send_fds(channel, [json.dumps({"reason": reason}).encode()], listener)
        for fd in listener:
            os.close(fd)  # CMD must not hold it: whoever does answers for the filter
        if channel.recv(len(_GO)) != _GO:
            os._exit(LAUNCH_FAILED)
        channel.close()
        # Python ignores these at start; an ignored signal stays ignored across exec.
        for number in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, *_FORWARDED):
            signal.signal(number, signal.SIG_DFL)
    except BaseException as exc:  # a forked child must not return
        _fail(report, f"cannot start the replay ({exc})")
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        _fail(report, f"cannot run {command[0]!r}: {exc.strerror or exc}")


def _init(
    command: list[str], report: _Events, channel: socket.socket, *, netns: bool, filtered: bool
) -> NoReturn:
    """Pid 1 of the replay's PID namespace: mount its ``/proc``, start CMD, pass signals on
    to it, reap orphans, and hand CMD's wait status to the launcher when it ends."""
    try:
        _die_with_parent()
        _unshare(CLONE_NEWNS)
        _mount_proc()
    except OSError as exc:
        _fail(
            report,
            f"cannot give the replay a /proc of its own ({exc}); --no-isolate runs it without",
        )
    child = [0]
    _forward_to(child)  # before the fork: a signal pid 1 has no handler for is dropped
    child[0] = os.fork()
    if child[0] == 0:
        _command(command, report, channel, netns=netns, filtered=filtered)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(LAUNCH_FAILED)
        if pid == child[0]:
            channel.send(_STATUS.pack(status))
            os._exit(0)  # the kernel ends whatever CMD left running


def _pid_namespace(
    command: list[str], report: _Events, channel: socket.socket, *, netns: bool, filtered: bool
) -> NoReturn:
    """Make the PID namespace and start its init; pass signals on to it until it ends.

    A process of its own: once a process has unshared a PID namespace the kernel lets it make
    no thread, and the supervisor needs them.
    """
    try:
        _die_with_parent()
        _unshare(CLONE_NEWPID)
    except OSError as exc:
        _fail(report, f"cannot isolate the replay ({exc}); --no-isolate runs it without")
    init = [0]
    _forward_to(init)
    init[0] = os.fork()
    if init[0] == 0:
        _init(command, report, channel, netns=netns, filtered=filtered)
    channel.close()
    # The init sends CMD's status itself; this one counts only if the init could not.
    code = os.waitstatus_to_exitcode(os.waitpid(init[0], 0)[1])
    os._exit(code if code >= 0 else 128 - code)


def _supervise(
    child: int, channel: socket.socket, supervisor: _seccomp.Supervisor | None, listener: int
) -> int:
    """Serve the filter until CMD ends; its wait status (sent by the init, or the child's)."""
    wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)
    signal.set_wakeup_fd(wake_write)
    poller = select.poll()
    poller.register(wake_read, select.POLLIN)
    poller.register(channel, select.POLLIN)
    if supervisor is not None:
        poller.register(listener, select.POLLIN)
    sent: int | None = None
    while True:
        for fd, events in poller.poll():
            if supervisor is not None and fd == listener:
                if events & select.POLLIN:
                    supervisor.handle()
                else:  # no filtered process is left
                    poller.unregister(listener)
            elif fd == channel.fileno():
                data = channel.recv(_STATUS.size)
                if len(data) == _STATUS.size:
                    sent = _STATUS.unpack(data)[0]
                else:
                    poller.unregister(channel)
            elif fd == wake_read:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_read, 512)
        while True:  # reap every exited child: orphans of CMD's come to us too
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid == child:
                if sent is None:
                    with contextlib.suppress(BlockingIOError):
                        data = channel.recv(_STATUS.size, socket.MSG_DONTWAIT)
                        if len(data) == _STATUS.size:
                            sent = _STATUS.unpack(data)[0]
                return status if sent is None else sent


def _exit_as(status: int) -> NoReturn:
    """End as CMD ended: its exit status, or killed by its signal (without a core dump)."""
    sys.stdout.flush()
    sys.stderr.flush()
    if os.WIFSIGNALED(status):
        import resource  # noqa: PLC0415 - POSIX only; the parent imports this module anywhere

        number = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        with contextlib.suppress(OSError, ValueError):  # SIGKILL's cannot be set
            signal.signal(number, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [number])
        os.kill(os.getpid(), number)
        os._exit(128 + number)
    os._exit(os.waitstatus_to_exitcode(status))


def _notices(event: dict[str, Any], reason: str) -> list[str]:
    """The lines that say, on stderr, what this replay is not kept from (``reason``: why it
    has no filter, if it has none)."""
    if event["isolated"]:
        return [] if event["seccomp"] else [_unfiltered_notice(reason, isolated=True)]
    if event["reason"] == "--no-isolate":  # asked for: said only if the filter is missing too
        return [] if event["seccomp"] else [_unfiltered_notice(reason, isolated=False)]
    return [isolation_notice(event["reason"], filtered=event["seccomp"])]


def _launch(
    command: list[str], report: _Events, event: dict[str, Any], outside: socket.socket | None
) -> NoReturn:
    """Start CMD (under the init when there is a PID namespace), record how it is isolated,
    supervise its filter until it ends, end as it did."""
    netns, pidns = bool(event["isolated"]), bool(event.get("private_proc"))
    filter_reason = _seccomp.unavailable()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    _seccomp.libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    child = os.fork()
    if child == 0:
        ours.close()
        start = _pid_namespace if pidns else _command
        start(command, report, theirs, netns=netns, filtered=filter_reason is None)
    theirs.close()
    _forward_to([child])
    # Unfiltered, it must not be driven by a process of the replay of the same user (ptrace,
    # /proc/PID/mem, pidfd_getfd), as one without a PID namespace could otherwise.
    _seccomp.libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    message, fds, _flags, _address = socket.recv_fds(ours, 4096, 1)
    if not message:  # the child failed before it could start CMD (and said why)
        _exit_as(os.waitpid(child, 0)[1])
    reason = str(json.loads(message)["reason"] or filter_reason)
    event.update(seccomp=bool(fds), seccomp_reason=None if fds else reason)
    report.write(event)
    for line in _notices(event, reason):
        sys.stderr.write(line + "\n")
    sys.stderr.flush()
    supervisor = None
    if fds:
        supervisor = _seccomp.Supervisor(
            fds[0],
            netns=netns,
            report=report.write,
            root=os.getpid(),
            outside=outside if netns else None,
        )
    ours.send(_GO)
    _exit_as(_supervise(child, ours, supervisor, fds[0] if fds else -1))


def main(argv: Sequence[str]) -> NoReturn:
    """``_isolate.py [--no-namespaces] [--events-fd N] -- CMD…``: isolate, record how, run
    CMD, end as it did."""
    args = list(argv)
    namespaces, events_fd = True, None
    while args and args[0] != "--":
        option = args.pop(0)
        if option == "--no-namespaces":
            namespaces = False
        elif option == "--events-fd" and args:
            events_fd = int(args.pop(0))
            os.set_inheritable(events_fd, False)  # CMD must not hold it
        else:
            args = [option, *args]
            break
    command = args[1:] if args[:1] == ["--"] else args
    report = _Events(events_fd, os.environ.get("OTEL_REPLAY_REPORT"))
    if not command:
        _fail(report, "the launcher needs a command")
    event: dict[str, Any] = {"type": "isolation", "isolated": False, "reason": "--no-isolate"}
    try:
        outside = _seccomp.diagnostics()  # made here: it keeps seeing the host's sockets
    except OSError:
        outside = None
    try:
        if namespaces:
            event = isolate()
        if event["isolated"]:
            event["private_proc"] = _private_proc()
            if event["private_proc"]:
                user = ["user"] if event["how"].startswith("user") else []
                event["how"] = _how([*user, "network", "PID", "mount"])
        _launch(command, report, event, outside)
    except OSError as exc:
        _fail(report, f"cannot isolate the replay ({exc}); --no-isolate runs it without")


if __name__ == "__main__":
    main(sys.argv[1:])
