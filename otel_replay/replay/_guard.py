"""Strict replay's socket guard: the :mod:`socket` module patched so no Python code reaches the
network."""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable
from typing import Any, ClassVar

from otel_replay.errors import NetworkBlockedError

__all__ = [
    "Listener",
    "SocketGuard",
    "describe",
    "is_network",
    "is_numeric",
    "port_of",
    "refusal",
]

Listener = Callable[[str, str | None, int | None], None]
"""Hears of a refusal: what was refused (as :func:`describe` lists it), then the host and
port it was for (None when not known)."""

# Families that cannot leave the machine: Unix-domain sockets and the kernel's netlink.
_LOCAL_FAMILIES = frozenset(
    family
    for family in (getattr(socket, "AF_UNIX", None), getattr(socket, "AF_NETLINK", None))
    if family is not None
)


def is_network(family: int) -> bool:
    """Whether a socket of ``family`` can reach the network (every family but Unix-domain and
    netlink sockets)."""
    return family not in _LOCAL_FAMILIES


def is_numeric(host: Any) -> bool:
    """Whether ``host`` (str or bytes) is an IP address, which resolves without asking anyone."""
    try:
        ipaddress.ip_address(host.decode() if isinstance(host, bytes) else str(host))
    except ValueError:
        return False
    return True


def describe(address: Any, operation: str = "connect") -> str:
    """How a refused attempt is listed: ``host:port`` (``[v6]:port``) for a connect, with the
    operation after it otherwise (``127.0.0.1:53 (sendto)``)."""
    if isinstance(address, tuple) and len(address) >= 2:
        host, port = address[0], address[1]
        text = f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    else:
        text = str(address)
    return text if operation == "connect" else f"{text} ({operation})"


def port_of(port: Any) -> int | None:
    """A port as a number (a lookup may name it by service, or as text or bytes), or None."""
    if isinstance(port, int):
        return port
    if isinstance(port, (str, bytes)) and port.isdigit():
        return int(port)
    return None


def _host_of(host: Any) -> str | None:
    if isinstance(host, bytes):
        return host.decode(errors="replace")
    return host if isinstance(host, str) else None


def refusal(what: str) -> NetworkBlockedError:
    """The error a refused attempt raises (``what`` as :func:`describe` lists it)."""
    return NetworkBlockedError(f"otel-replay strict replay refused network access to {what}")


class SocketGuard:
    """Refuses network operations while installed; ``on_attempt(what, host, port)`` hears of
    each (see :data:`Listener`).

    ``install``/``uninstall`` nest: the patches come off when the last holder uninstalls.
    """

    _lock: ClassVar[threading.Lock] = threading.Lock()
    _depth: ClassVar[int] = 0
    _saved: ClassVar[dict[str, Any]] = {}
    _listeners: ClassVar[list[Listener]] = []

    def __init__(self, on_attempt: Listener) -> None:
        self._on_attempt = on_attempt

    def install(self) -> None:
        """Start refusing."""
        cls = SocketGuard
        with cls._lock:
            cls._listeners.append(self._on_attempt)
            cls._depth += 1
            if cls._depth == 1:
                cls._patch()

    def uninstall(self) -> None:
        """Stop refusing (once every holder has uninstalled)."""
        cls = SocketGuard
        with cls._lock:
            if self._on_attempt in cls._listeners:
                cls._listeners.remove(self._on_attempt)
            cls._depth = max(0, cls._depth - 1)
            if cls._depth == 0:
                cls._unpatch()

    @classmethod
    def _refuse(cls, what: str, host: Any = None, port: Any = None) -> NetworkBlockedError:
        for listener in list(cls._listeners):
            listener(what, _host_of(host), port_of(port))
        return refusal(what)

    @classmethod
    def _refuse_address(cls, address: Any, operation: str = "connect") -> NetworkBlockedError:
        pair = isinstance(address, tuple) and len(address) >= 2
        host, port = (address[0], address[1]) if pair else (None, None)
        return cls._refuse(describe(address, operation), host, port)

    @classmethod
    def _patch(cls) -> None:
        saved = cls._saved
        saved["connect"] = socket.socket.connect
        saved["connect_ex"] = socket.socket.connect_ex
        saved["sendto"] = socket.socket.sendto
        saved["getaddrinfo"] = socket.getaddrinfo
        saved["gethostbyname"] = socket.gethostbyname
        saved["gethostbyname_ex"] = socket.gethostbyname_ex

        def connect(sock: socket.socket, address: Any) -> None:
            if is_network(sock.family):
                raise cls._refuse_address(address)
            saved["connect"](sock, address)

        def connect_ex(sock: socket.socket, address: Any) -> int:
            if is_network(sock.family):
                raise cls._refuse_address(address)
            return int(saved["connect_ex"](sock, address))

        def sendto(sock: socket.socket, data: Any, *args: Any) -> int:
            if is_network(sock.family):
                raise cls._refuse_address(args[-1], "sendto")
            return int(saved["sendto"](sock, data, *args))

        def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            # A numeric address resolves without asking anyone; the connect is refused later.
            if host is not None and not is_numeric(host):
                raise cls._refuse(f"name lookup {describe((host, port))}", host, port)
            return saved["getaddrinfo"](host, port, *args, **kwargs)

        def gethostbyname(host: str) -> str:
            raise cls._refuse(f"name lookup {host}", host)

        def gethostbyname_ex(host: str) -> Any:
            raise cls._refuse(f"name lookup {host}", host)

        socket.socket.connect = connect  # type: ignore[method-assign,assignment]
        socket.socket.connect_ex = connect_ex  # type: ignore[method-assign,assignment]
        socket.socket.sendto = sendto  # type: ignore[method-assign,assignment]
        socket.getaddrinfo = getaddrinfo
        socket.gethostbyname = gethostbyname
        socket.gethostbyname_ex = gethostbyname_ex

    @classmethod
    def _unpatch(cls) -> None:
        saved = cls._saved
        if not saved:
            return
        socket.socket.connect = saved.pop("connect")  # type: ignore[method-assign]
        socket.socket.connect_ex = saved.pop("connect_ex")  # type: ignore[method-assign]
        socket.socket.sendto = saved.pop("sendto")  # type: ignore[method-assign]
        socket.getaddrinfo = saved.pop("getaddrinfo")
        socket.gethostbyname = saved.pop("gethostbyname")
        socket.gethostbyname_ex = saved.pop("gethostbyname_ex")
