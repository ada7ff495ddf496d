"""Strict replay's view from below the socket patches: a CPython audit hook that refuses
network calls and reports processes started."""

from __future__ import annotations

import contextlib
import os
import platform
import shlex
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any, Generic, TypeVar

from otel_replay.replay._guard import Listener, describe, is_network, is_numeric, port_of, refusal

__all__ = ["AuditGuard", "AuditListeners", "command_line"]

_NATIVE_SENDERS = frozenset({"connect", "sendto", "sendmsg", "sendmmsg", "__connect"})
_COMMAND_LIMIT = 500
# Frames in these files only pass a subprocess request on; the caller is the frame above them.
_SUBPROCESS = os.path.normcase(os.path.abspath(subprocess.__file__))
_RELAY_FILES = frozenset({_SUBPROCESS, os.path.normcase(os.path.abspath(os.__file__))})
_HERE = os.path.normcase(os.path.abspath(__file__))
_PACKAGE = os.path.dirname(os.path.dirname(_HERE)) + os.sep
_PLATFORM = os.path.normcase(os.path.abspath(platform.__file__))


T = TypeVar("T")


class AuditListeners(Generic[T]):
    """Listeners of ``hook``, which reads :attr:`active`: replaced, never mutated, so the hook
    reads it without the lock. ``add``/``remove`` nest (a listener may be added twice)."""

    def __init__(self, hook: Callable[[str, tuple[Any, ...]], None]) -> None:
        self._hook = hook
        self._lock = threading.Lock()
        self._hooked = False
        self.active: tuple[T, ...] = ()

    def add(self, listener: T) -> None:
        """Start telling ``listener`` (installing the hook the first time)."""
        with self._lock:
            if not self._hooked:
                sys.addaudithook(self._hook)
                self._hooked = True
            self.active = (*self.active, listener)

    def remove(self, listener: T) -> None:
        """Stop telling ``listener`` (once, if it was added)."""
        with self._lock:
            if listener in self.active:
                active = list(self.active)
                active.remove(listener)
                self.active = tuple(active)


def command_line(args: Any) -> str:
    """A process's command as one shell-quoted line (``args`` a string, bytes, a path or a
    sequence of them), cut at 500 characters."""
    if isinstance(args, (str, bytes, os.PathLike)):
        text = os.fsdecode(args)
    elif isinstance(args, Sequence):
        text = shlex.join(
            os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in args
        )
    else:
        text = str(args)
    return text if len(text) <= _COMMAND_LIMIT else text[: _COMMAND_LIMIT - 1] + "…"


def _caller(*, past_relays: bool) -> str:
    """The file of the code that raised the audit event being handled: the first frame
    outside this module (and outside ``subprocess``/``os`` when ``past_relays``)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        name = os.path.normcase(frame.f_code.co_filename)
        if name != _HERE and not (past_relays and name in _RELAY_FILES):
            return name
        frame = frame.f_back
    return ""


class AuditGuard:
    """Refuses network operations and reports started processes while installed.

    ``on_attempt(what, host, port)`` hears of each refusal (as the socket guard tells it);
    ``on_process(command)`` of each process started. ``install``/``uninstall`` nest like the
    socket guard's; the hook stays in place but idle once the last guard is uninstalled.
    """

    def __init__(self, on_attempt: Listener, on_process: Callable[[str], None]) -> None:
        self.on_attempt = on_attempt
        self.on_process = on_process

    def install(self) -> None:
        """Start refusing and reporting."""
        _LISTENERS.add(self)

    def uninstall(self) -> None:
        """Stop (this guard; the hook idles once none is left)."""
        _LISTENERS.remove(self)


def _refuse(what: str, host: str | None = None, port: Any = None) -> None:
    for guard in _LISTENERS.active:
        guard.on_attempt(what, host, port_of(port))
    raise refusal(what)


def _report(args: Any) -> None:
    caller = _caller(past_relays=True)
    if caller.startswith(_PACKAGE) or caller == _PLATFORM:
        return
    command = command_line(args)
    for guard in _LISTENERS.active:
        guard.on_process(command)


def _socket_event(operation: str) -> Callable[[tuple[Any, ...]], None]:
    def check(args: tuple[Any, ...]) -> None:
        sock, address = args[0], args[1]
        if is_network(getattr(sock, "family", -1)):
            host, port = address[:2] if isinstance(address, tuple) else (None, None)
            _refuse(describe(address, operation), host if isinstance(host, str) else None, port)

    return check


def _lookup(args: tuple[Any, ...]) -> None:
    host = args[0]
    if host is not None and not is_numeric(host):
        name = host.decode(errors="replace") if isinstance(host, bytes) else str(host)
        port = args[1] if len(args) > 1 else None
        _refuse(f"name lookup {describe((name, port)) if len(args) > 1 else name}", name, port)


def _dlsym(args: tuple[Any, ...]) -> None:
    name = args[1] if len(args) > 1 else None
    if isinstance(name, str) and name in _NATIVE_SENDERS:
        _refuse(f"native {name}() (ctypes lookup)")


def _exec(args: tuple[Any, ...]) -> None:
    # os.execvp tries each directory of PATH in turn, an event each: only the program that
    # is there is started (once, not once per directory tried).
    path = args[0]
    with contextlib.suppress(OSError, TypeError, ValueError):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return
    _report(args[1])


def _posix_spawn(args: tuple[Any, ...]) -> None:
    # subprocess.Popen may spawn through os.posix_spawn: its own event has been reported.
    if _caller(past_relays=False) != _SUBPROCESS:
        _report(args[1])


_CHECKS: dict[str, Callable[[tuple[Any, ...]], None]] = {
    "socket.connect": _socket_event("connect"),
    "socket.sendto": _socket_event("sendto"),
    "socket.sendmsg": _socket_event("sendmsg"),
    "socket.getaddrinfo": _lookup,
    "socket.gethostbyname": _lookup,
    "ctypes.dlsym": _dlsym,
    "subprocess.Popen": lambda args: _report(args[1]),
    "os.system": lambda args: _report(args[0]),
    "os.posix_spawn": _posix_spawn,
    "os.exec": _exec,
    "os.spawn": lambda args: _report(args[2]),
}


def _hook(event: str, args: tuple[Any, ...]) -> None:
    # Runs for every audit event of the process (every import, every open): keep the idle
    # path to one attribute read.
    if not _LISTENERS.active:
        return
    check = _CHECKS.get(event)
    if check is not None:
        check(args)


_LISTENERS: AuditListeners[AuditGuard] = AuditListeners(_hook)
