"""The kernel's filter on a strict replay's sockets: a seccomp program and its supervisor.

Needs Linux 5.6 on x86-64 or arm64 (:func:`unavailable` says why not); standard library only,
as the launcher runs with ``-I -S``."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import queue
import socket
import stat
import struct
import threading
from collections.abc import Callable, Iterator

__all__ = ["Supervisor", "diagnostics", "install", "libc", "unavailable"]


class _Arch:
    """An architecture's audit id and the numbers of the system calls the filter names.

    (Plain classes here, not dataclasses: the launcher starts every replay, and importing
    ``dataclasses`` costs more than the rest of it.)
    """

    __slots__ = (
        "audit",
        "connect",
        "seccomp",
        "sendmmsg",
        "sendmsg",
        "sendto",
        "socket",
        "socketpair",
    )

    def __init__(self, audit: int, *numbers: int) -> None:
        self.audit = audit
        (
            self.socket,
            self.socketpair,
            self.connect,
            self.sendto,
            self.sendmsg,
            self.sendmmsg,
            self.seccomp,
        ) = numbers


_ARCHES = {
    "x86_64": _Arch(0xC000003E, 41, 53, 42, 44, 46, 307, 317),
    "aarch64": _Arch(0xC00000B7, 198, 199, 203, 206, 211, 269, 277),
}
# Numbered alike on every architecture (added after the tables were unified).
_IO_URING_SETUP = 425
_OPENAT2 = 437
_PIDFD_GETFD = 438
_X32_BIT = 0x40000000  # x86-64's x32 calls: another ABI, refused like another architecture

_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_GET_ACTION_AVAIL = 2
_SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3
_PR_SET_NO_NEW_PRIVS = 38
_RET_ALLOW = 0x7FFF0000
_RET_USER_NOTIF = 0x7FC00000
_RET_ERRNO = 0x00050000
# ioctl numbers: _IOWR('!', 0, struct seccomp_notif) and so on (the same on both arches).
_NOTIF_RECV = 0xC0502100
_NOTIF_SEND = 0xC0182101
_NOTIF_ID_VALID = 0x40082102
_NOTIF = struct.Struct("=QIIiIQ6Q")  # id, pid, flags, then seccomp_data: nr, arch, ip, args
_RESPONSE = struct.Struct("=QqiI")  # id, val, error, flags

_MSG_FASTOPEN = 0x20000000
_NETLINK_ROUTE, _NETLINK_SOCK_DIAG = 0, 4
_SOCKADDR_MAX = 128  # sizeof(struct sockaddr_storage): the kernel refuses longer addresses
_SUN_PATH = 2  # offset of sun_path in struct sockaddr_un
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_IN_ROOT = 0x10
_PIDFD_THREAD = os.O_EXCL  # Linux 6.9: a pidfd for a thread, not only a process


@functools.cache
def libc() -> ctypes.CDLL:
    """The C library (loaded on first use: the parent imports these modules anywhere)."""
    return ctypes.CDLL(None, use_errno=True)


class _Iovec(ctypes.Structure):
    _fields_ = (("base", ctypes.c_void_p), ("length", ctypes.c_size_t))


def _check(result: int) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def _syscall(number: int, *args: int | ctypes.c_void_p | ctypes.Array[ctypes.c_char]) -> int:
    values = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    return _check(libc().syscall(ctypes.c_long(number), *values))


def _arch() -> _Arch | None:
    return _ARCHES.get(os.uname().machine.replace("arm64", "aarch64"))


def unavailable() -> str | None:
    """Why the filter cannot be installed and served here (None where it can, as far as can
    be told without installing it: an outer filter may still refuse)."""
    arch = _arch()
    if arch is None:
        return f"seccomp filter written for x86-64 and arm64, not {os.uname().machine}"
    action = ctypes.c_uint32(_RET_USER_NOTIF)
    try:
        _syscall(
            arch.seccomp, _SECCOMP_GET_ACTION_AVAIL, 0, ctypes.c_void_p(ctypes.addressof(action))
        )
        _syscall(_OPENAT2, -1, 0, 0, 0)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.ENOSYS):
            return "seccomp user notification or openat2 missing (needs Linux 5.6)"
        if exc.errno == errno.EPERM:
            return f"seccomp: {exc.strerror}"
    try:
        _take_fd_of_child()
    except OSError as exc:
        return f"pidfd_getfd: {exc.strerror}"
    try:
        _unix_sockets()  # which unix sockets are the replay's own
    except OSError as exc:
        return f"unix socket diagnostics: {exc.strerror}"
    return None


def _take_fd_of_child() -> None:
    """Take a file descriptor of a child, as the supervisor does of the replay's processes
    (``kernel.yama.ptrace_scope`` 3 forbids it; before Linux 5.6 there is no way)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(write)
        os.read(read, 1)
        os._exit(0)
    try:
        pidfd = os.pidfd_open(pid)
        try:
            os.close(_syscall(_PIDFD_GETFD, pidfd, read, 0))
        finally:
            os.close(pidfd)
    finally:
        os.close(write)
        os.close(read)
        os.waitpid(pid, 0)


class _Asm:
    """A classic BPF program with named jump targets."""

    def __init__(self) -> None:
        self._code: list[tuple[int, int, str | None, str | None]] = []
        self._labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self._labels[name] = len(self._code)

    def load(self, offset: int) -> None:
        self._code.append((0x20, offset, None, None))  # BPF_LD | BPF_W | BPF_ABS

    def mask(self, value: int) -> None:
        self._code.append((0x54, value, None, None))  # BPF_ALU | BPF_AND | BPF_K

    def jump(self, op: int, value: int, yes: str | None, no: str | None = None) -> None:
        self._code.append((op, value, yes, no))

    def ret(self, value: int) -> None:
        self._code.append((0x06, value, None, None))  # BPF_RET | BPF_K

    def assemble(self) -> bytes:
        out = bytearray()
        for index, (code, value, yes, no) in enumerate(self._code):
            jt, jf = (0 if t is None else self._labels[t] - index - 1 for t in (yes, no))
            out += struct.pack("=HBBI", code, jt, jf, value)
        return bytes(out)


_JEQ, _JGE, _JSET = 0x15, 0x35, 0x45
_NR, _ARCH_AT = 0, 4


def _arg(index: int) -> int:
    return 16 + 8 * index  # the low half of args[index] (little-endian)


def _program(arch: _Arch, *, netns: bool) -> bytes:
    """The filter (see the module's docstring); ``netns``: the process runs in a network
    namespace of its own, so IP sockets reach nothing outside and need no judging."""
    asm = _Asm()
    asm.load(_ARCH_AT)
    asm.jump(_JEQ, arch.audit, None, "refuse")
    asm.load(_NR)
    asm.jump(_JGE, _X32_BIT, "refuse")
    asm.jump(_JEQ, arch.connect, "notify")
    asm.jump(_JEQ, arch.socket, "socket")
    asm.jump(_JEQ, arch.socketpair, "socketpair")
    asm.jump(_JEQ, _IO_URING_SETUP, "refuse")
    if not netns:
        asm.jump(_JEQ, arch.sendto, "flags-3")
        asm.jump(_JEQ, arch.sendmmsg, "flags-3")
        asm.jump(_JEQ, arch.sendmsg, "flags-2")
    asm.ret(_RET_ALLOW)
    if not netns:
        for index in (3, 2):
            asm.label(f"flags-{index}")
            asm.load(_arg(index))
            asm.jump(_JSET, _MSG_FASTOPEN, "notify")
            asm.ret(_RET_ALLOW)
    asm.label("socket")
    asm.load(_arg(0))
    asm.jump(_JEQ, socket.AF_UNIX, "unix-kind")
    asm.jump(_JEQ, socket.AF_NETLINK, "allow" if netns else "netlink")
    asm.jump(_JEQ, socket.AF_INET, "allow" if netns else "ip-kind")
    asm.jump(_JEQ, socket.AF_INET6, "allow" if netns else "ip-kind")
    asm.ret(_RET_USER_NOTIF)
    asm.label("socketpair")
    asm.load(_arg(0))
    asm.jump(_JEQ, socket.AF_UNIX, "unix-kind")
    asm.ret(_RET_USER_NOTIF)
    asm.label("unix-kind")
    asm.load(_arg(1))
    asm.mask(0xF)  # without SOCK_NONBLOCK, SOCK_CLOEXEC
    for kind in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET):
        asm.jump(_JEQ, kind, "allow")
    asm.ret(_RET_USER_NOTIF)
    if not netns:
        _netlink(asm)
        asm.label("ip-kind")
        asm.load(_arg(1))
        asm.mask(0xF)
        asm.jump(_JEQ, socket.SOCK_STREAM, None, "notify")
        asm.load(_arg(2))
        for protocol in (0, socket.IPPROTO_TCP):
            asm.jump(_JEQ, protocol, "allow")
    asm.label("notify")
    asm.ret(_RET_USER_NOTIF)
    asm.label("refuse")
    asm.ret(_RET_ERRNO | errno.ENOSYS)
    asm.label("allow")
    asm.ret(_RET_ALLOW)
    return asm.assemble()


def _netlink(asm: _Asm) -> None:
    """Label ``netlink``: a netlink socket in the host's network namespace, which reaches the
    host (a process listening on ``NETLINK_USERSOCK`` takes anyone's messages): only the
    kernel's routing and socket tables, which the C library (``getifaddrs``) and ``ss`` ask."""
    asm.label("netlink")
    asm.load(_arg(2))
    for protocol in (_NETLINK_ROUTE, _NETLINK_SOCK_DIAG):
        asm.jump(_JEQ, protocol, "allow")
    asm.ret(_RET_USER_NOTIF)


def install(*, netns: bool) -> int:
    """Install the filter on this process (and so on all it execs and starts); returns the
    supervisor's end, a file descriptor (close-on-exec) for :class:`Supervisor`."""
    arch = _arch()
    if arch is None:
        raise OSError(errno.ENOSYS, "no seccomp filter for this architecture")
    code = _program(arch, netns=netns)
    filters = ctypes.create_string_buffer(code, len(code))
    fprog = struct.pack("=HxxxxxxQ", len(code) // 8, ctypes.addressof(filters))
    fprog_buffer = ctypes.create_string_buffer(fprog, len(fprog))
    _check(libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
    return _syscall(
        arch.seccomp,
        _SECCOMP_SET_MODE_FILTER,
        _SECCOMP_FILTER_FLAG_NEW_LISTENER,
        ctypes.c_void_p(ctypes.addressof(fprog_buffer)),
    )


class _Call:
    """One notified system call: its id, the calling thread, the call's number and args."""

    __slots__ = ("args", "id", "nr", "tid")

    def __init__(self, call_id: int, tid: int, nr: int, args: tuple[int, ...]) -> None:
        self.id, self.tid, self.nr, self.args = call_id, tid, nr, args


class _Refused(Exception):
    """The call is refused with ``EACCES`` and reported as ``what``."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class Supervisor:
    """The filter's other end: judges each notified call (:meth:`handle`, when ``listener``
    is readable) and answers it, telling ``report`` of each refusal (a ``network`` event).

    ``netns``: the filtered processes run in this process's network namespace, made for
    them, and ``outside`` (from :func:`diagnostics`, made before) sees the host's sockets;
    otherwise ``root`` is the process whose descendants are the replay's.
    """

    def __init__(
        self,
        listener: int,
        *,
        netns: bool,
        report: Callable[[dict[str, str]], None],
        root: int,
        outside: socket.socket | None,
    ) -> None:
        self._listener = listener
        self._netns = netns
        self._outside = outside
        self._report = report
        self._root = root
        self._arch = _arch()
        self._connects: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        self._idle = 0  # connect workers waiting for one (guarded by _idle_lock)
        self._idle_lock = threading.Lock()
        self._report_lock = threading.Lock()
        self._outside_lock = threading.Lock()  # one dump at a time on the one socket

    def handle(self) -> None:
        """Receive one notification and answer it. Connects are answered by worker threads:
        one may block (a listener's backlog full), as it would have in the process, and must
        not hold up the others; a worker is started only when none is idle."""
        call = self._receive()
        if call is None or self._arch is None:
            return
        if call.nr != self._arch.connect:
            self._answer(call, self._refuse)
            return
        with self._idle_lock:
            start = self._idle == 0
            self._idle -= 0 if start else 1
        if start:
            threading.Thread(target=self._connect_worker, daemon=True).start()
        self._connects.put(call)

    def _connect_worker(self) -> None:
        while True:
            self._answer(self._connects.get(), self._connect)
            with self._idle_lock:
                self._idle += 1

    def _receive(self) -> _Call | None:
        buffer = ctypes.create_string_buffer(_NOTIF.size)  # the kernel wants it zeroed
        if libc().ioctl(self._listener, ctypes.c_ulong(_NOTIF_RECV), buffer) < 0:
            return None  # the caller went away (ENOENT) or was interrupted
        call_id, tid, _flags, nr, _arch, _ip, *args = _NOTIF.unpack(buffer.raw)
        return _Call(call_id, tid, nr, tuple(args))

    def _answer(self, call: _Call, judge: Callable[[_Call], int]) -> None:
        try:
            result = judge(call)
        except _Refused as refused:
            self._event(refused.what)
            result = -errno.EACCES
        except OSError as exc:
            result = -(exc.errno or errno.EIO)
        except Exception as exc:  # a bug of ours: refuse, never leave the caller waiting
            self._event(f"a call the sandbox could not judge ({type(exc).__name__})")
            result = -errno.EACCES
        response = _RESPONSE.pack(call.id, max(result, 0), min(result, 0), 0)
        buffer = ctypes.create_string_buffer(response, len(response))
        libc().ioctl(self._listener, ctypes.c_ulong(_NOTIF_SEND), buffer)

    def _valid(self, call: _Call) -> bool:
        """Whether ``call`` is still waiting: its thread id still names its thread, so what
        was read through the id belongs to the caller."""
        value = ctypes.c_uint64(call.id)
        answer = libc().ioctl(self._listener, ctypes.c_ulong(_NOTIF_ID_VALID), ctypes.byref(value))
        return bool(answer == 0)

    def _event(self, what: str) -> None:
        with self._report_lock:
            self._report({"type": "network", "address": what, "by": "seccomp"})

    # Refused outright: the arguments the filter saw decide; nothing is read or done.

    def _refuse(self, call: _Call) -> int:
        assert self._arch is not None
        if call.nr in (self._arch.socket, self._arch.socketpair):
            name = "socket" if call.nr == self._arch.socket else "socketpair"
            family, kind, protocol = (a & 0xFFFFFFFF for a in call.args[:3])
            shown = f"{_family(family)}, {_kind(kind)}" + (f", {protocol}" if protocol else "")
            raise _Refused(f"{name}({shown})")
        if call.nr in (self._arch.sendto, self._arch.sendmsg, self._arch.sendmmsg):
            raise _Refused("TCP fast open (a connect with its first data)")
        return -errno.ENOSYS

    # connect(2), performed here on the process's socket or refused.

    def _connect(self, call: _Call) -> int:
        fd, pointer = call.args[0] & 0xFFFFFFFF, call.args[1]
        length = ctypes.c_int32(call.args[2] & 0xFFFFFFFF).value
        if not 0 <= length <= _SOCKADDR_MAX:
            return -errno.EINVAL
        address = self._read(call.tid, pointer, length)
        with self._socket_of(call.tid, fd) as sock:
            if not self._valid(call):
                return -errno.EINTR  # the caller is gone: the answer goes nowhere
            with self._target(call.tid, sock, address) as raw:
                buffer = ctypes.create_string_buffer(raw, len(raw))
                return _check(libc().connect(sock.fileno(), buffer, len(raw)))

    def _read(self, tid: int, pointer: int, length: int) -> bytes:
        """``length`` bytes of the thread's memory at ``pointer``."""
        if length == 0:
            return b""
        buffer = ctypes.create_string_buffer(length)
        local = _Iovec(ctypes.addressof(buffer), length)
        remote = _Iovec(pointer, length)
        done = libc().process_vm_readv(
            tid,
            ctypes.byref(local),
            ctypes.c_ulong(1),
            ctypes.byref(remote),
            ctypes.c_ulong(1),
            ctypes.c_ulong(0),
        )
        if done != length:
            raise OSError(errno.EFAULT, os.strerror(errno.EFAULT))
        return buffer.raw

    @contextlib.contextmanager
    def _socket_of(self, tid: int, fd: int) -> Iterator[socket.socket]:
        """The thread's file descriptor ``fd``: the same socket (a duplicate of its file
        descriptor), so whatever is done here is done to the process's socket."""
        try:
            pidfd = os.pidfd_open(tid, _PIDFD_THREAD)
        except OSError:  # before Linux 6.9: the thread's process
            pidfd = os.pidfd_open(_tgid(tid))
        try:
            own = _syscall(_PIDFD_GETFD, pidfd, fd, 0)
        finally:
            os.close(pidfd)
        try:
            sock = socket.socket(fileno=own)
        except OSError:
            os.close(own)
            raise
        with sock:
            yield sock

    @contextlib.contextmanager
    def _target(self, tid: int, sock: socket.socket, raw: bytes) -> Iterator[bytes]:
        """The address to connect ``sock`` to in place of ``raw`` (a path socket is pinned
        while the context lasts, so the socket judged is the socket reached); raises
        :class:`_Refused` when the replay may not, OSError for what the kernel would say."""
        given = struct.unpack_from("=H", raw)[0] if len(raw) >= 2 else None
        if sock.family == socket.AF_UNIX and given == socket.AF_UNIX and len(raw) > _SUN_PATH:
            name = raw[_SUN_PATH:]
            if name[:1] == b"\0":
                self._judge(lambda e: e.name == name, "unix:@" + _shown(name[1:]))
                yield raw
                return
            path = name.split(b"\0", 1)[0]
            pin = self._resolve(tid, path)
            try:
                info = os.fstat(pin)
                if not stat.S_ISSOCK(info.st_mode):
                    raise OSError(errno.ECONNREFUSED, os.strerror(errno.ECONNREFUSED))
                bound = (info.st_ino & 0xFFFFFFFF, _kernel_device(info.st_dev))
                self._judge(lambda e: e.vfs == bound, "unix:" + _shown(path))
                yield _sockaddr_un(f"/proc/self/fd/{pin}".encode())
            finally:
                os.close(pin)
            return
        ip = sock.family in (socket.AF_INET, socket.AF_INET6)
        if ip and not self._netns and given != socket.AF_UNSPEC:  # AF_UNSPEC disconnects
            raise _Refused(_ip_address(raw))
        yield raw

    def _judge(self, names: Callable[[_UnixSocket], bool], what: str) -> None:
        """Let a unix socket that ``names`` picks out of the kernel's list be connected to
        if the replay made it; refuse (reported) one of the host's; say ``ECONNREFUSED``,
        as the kernel would, when no socket is bound there (a file left behind)."""
        ours = {e.inode for e in _unix_sockets() if names(e)}
        if ours and (self._netns or self._held(ours)):
            return
        if self._outside is None:
            theirs = bool(ours)
        else:
            with self._outside_lock:
                theirs = any(names(e) for e in _unix_sockets(self._outside))
        if theirs:
            raise _Refused(what)
        raise OSError(errno.ECONNREFUSED, os.strerror(errno.ECONNREFUSED))

    def _resolve(self, tid: int, path: bytes) -> int:
        """An ``O_PATH`` descriptor of ``path`` as the thread sees it (its root and working
        directory; symbolic links resolved inside its root)."""
        if not path.startswith(b"/"):
            cwd = os.readlink(f"/proc/{tid}/cwd".encode())
            if not cwd.startswith(b"/"):  # not reachable from its root
                raise OSError(errno.ENOENT, os.strerror(errno.ENOENT))
            path = cwd.rstrip(b"/") + b"/" + path
        root = os.open(f"/proc/{tid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            how = struct.pack(
                "=QQQ", os.O_PATH | os.O_CLOEXEC, 0, _RESOLVE_IN_ROOT | _RESOLVE_NO_MAGICLINKS
            )
            name = ctypes.create_string_buffer(path)
            how_buffer = ctypes.create_string_buffer(how, len(how))
            return _syscall(_OPENAT2, root, name, how_buffer, len(how))
        finally:
            os.close(root)

    def _held(self, inodes: set[int]) -> bool:
        """Whether a process of the replay (a descendant of ``root``) holds one of the
        sockets ``inodes``: without a network namespace, that is what makes one the replay's.
        """
        wanted = {f"socket:[{inode}]" for inode in inodes}
        for pid in _descendants(self._root):
            with contextlib.suppress(OSError):
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    with contextlib.suppress(OSError):
                        if os.readlink(f"/proc/{pid}/fd/{fd}") in wanted:
                            return True
        return False


class _UnixSocket:
    """A unix-domain socket as the kernel's socket diagnostics list it: its inode, its name
    (``sun_path``, abstract or not) and ``vfs``, the inode and device of its bound file."""

    __slots__ = ("inode", "name", "vfs")

    def __init__(self, inode: int, name: bytes | None, vfs: tuple[int, int] | None) -> None:
        self.inode, self.name, self.vfs = inode, name, vfs


def diagnostics() -> socket.socket:
    """A socket that asks the kernel about the sockets of the current network namespace
    (``sock_diag(7)``), whichever namespace its holder moves to later."""
    return socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, 4)


def _unix_sockets(diag: socket.socket | None = None) -> list[_UnixSocket]:
    """Every unix-domain socket of this process's network namespace, or of ``diag``'s."""
    if diag is None:
        with diagnostics() as fresh:
            return _unix_sockets(fresh)
    request = struct.pack("=BBHIII8x", socket.AF_UNIX, 0, 0, 0xFFFFFFFF, 0, 1 | 2)
    header = struct.pack("=IHHII", 16 + len(request), 20, 0x301, 1, 0)  # SOCK_DIAG_BY_FAMILY
    found: list[_UnixSocket] = []
    diag.send(header + request)
    while True:
        data = diag.recv(1 << 16)
        if not data:
            return found
        offset = 0
        while offset + 16 <= len(data):
            length, kind = struct.unpack_from("=IH", data, offset)
            if kind == 3:  # NLMSG_DONE
                return found
            if kind == 2:  # NLMSG_ERROR
                code = -struct.unpack_from("=i", data, offset + 16)[0]
                raise OSError(code, f"socket diagnostics: {os.strerror(code)}")
            found.append(_parse_unix(data[offset + 16 : offset + length]))
            offset += (length + 3) & ~3


def _parse_unix(message: bytes) -> _UnixSocket:
    inode = struct.unpack_from("=I", message, 4)[0]
    name: bytes | None = None
    vfs: tuple[int, int] | None = None
    at = 16
    while at + 4 <= len(message):
        size, kind = struct.unpack_from("=HH", message, at)
        if size < 4:
            break
        payload = message[at + 4 : at + size]
        if kind == 0:  # UNIX_DIAG_NAME
            name = payload
        elif kind == 1 and len(payload) >= 8:  # UNIX_DIAG_VFS
            vfs = struct.unpack_from("=II", payload)
        at += (size + 3) & ~3
    return _UnixSocket(inode, name, vfs)


def _descendants(root: int) -> set[int]:
    """``root``'s descendants now (from ``/proc``)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/{entry}/stat", "rb") as status:
                text = status.read()
            parent = int(text[text.rindex(b")") + 2 :].split()[1])
            children.setdefault(parent, []).append(int(entry))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _tgid(tid: int) -> int:
    with open(f"/proc/{tid}/status", encoding="ascii", errors="replace") as status:
        for line in status:
            if line.startswith("Tgid:"):
                return int(line.split()[1])
    return tid


def _kernel_device(device: int) -> int:
    """``st_dev`` as the kernel's socket diagnostics give it (its internal ``dev_t``)."""
    return (os.major(device) << 20) | os.minor(device)


def _sockaddr_un(path: bytes) -> bytes:
    return struct.pack("=H", socket.AF_UNIX) + path + b"\0"


def _shown(name: bytes) -> str:
    return name.decode("utf-8", "backslashreplace")


def _ip_address(raw: bytes) -> str:
    """``host:port`` (``[v6]:port``) of a ``sockaddr_in``/``sockaddr_in6``, as the in-process
    guards list theirs."""
    family = struct.unpack_from("=H", raw)[0] if len(raw) >= 2 else None
    port = struct.unpack_from("!H", raw, 2)[0] if len(raw) >= 4 else 0
    if family == socket.AF_INET and len(raw) >= 8:
        return f"{socket.inet_ntop(socket.AF_INET, raw[4:8])}:{port}"
    if family == socket.AF_INET6 and len(raw) >= 24:
        return f"[{socket.inet_ntop(socket.AF_INET6, raw[8:24])}]:{port}"
    return f"an address of family {family}"


def _family(number: int) -> str:
    try:
        return socket.AddressFamily(number).name
    except ValueError:
        return f"family {number}"


def _kind(number: int) -> str:
    try:
        return socket.SocketKind(number & 0xF).name
    except ValueError:
        return f"type {number}"
