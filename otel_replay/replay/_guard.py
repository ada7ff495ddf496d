"""Strict replay opens no socket: enforced at the socket layer, not only in our transport.

Installing the guard patches ``socket.socket.connect``/``connect_ex``/``sendto`` and the name
lookups of the :mod:`socket` module, so any library in the process (``requests``,
``urllib``, gRPC's Python paths, a stray exporter) is refused with
:class:`~otel_replay.errors.NetworkBlockedError`, and every refusal is reported. Unix-domain
sockets and socket pairs stay allowed: they are not the network.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable
from typing import Any, ClassVar

from otel_replay.errors import NetworkBlockedError

__all__ = ["SocketGuard"]

_INET = (socket.AF_INET, socket.AF_INET6)


def _numeric(host: Any) -> bool:
    try:
        ipaddress.ip_address(host.decode() if isinstance(host, bytes) else str(host))
    except ValueError:
        return False
    return True


def _address(address: Any) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        host, port = address[0], address[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(address)


class SocketGuard:
    """Refuses network operations while installed; ``on_attempt(address)`` hears of each.

    ``install``/``uninstall`` nest: the patches come off when the last holder uninstalls.
    """

    _lock: ClassVar[threading.Lock] = threading.Lock()
    _depth: ClassVar[int] = 0
    _saved: ClassVar[dict[str, Any]] = {}
    _listeners: ClassVar[list[Callable[[str], None]]] = []

    def __init__(self, on_attempt: Callable[[str], None]) -> None:
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
    def _refuse(cls, what: str) -> NetworkBlockedError:
        for listener in list(cls._listeners):
            listener(what)
        return NetworkBlockedError(f"otel-replay strict replay refused network access to {what}")

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
            if sock.family in _INET:
                raise cls._refuse(_address(address))
            saved["connect"](sock, address)

        def connect_ex(sock: socket.socket, address: Any) -> int:
            if sock.family in _INET:
                raise cls._refuse(_address(address))
            return int(saved["connect_ex"](sock, address))

        def sendto(sock: socket.socket, data: Any, *args: Any) -> int:
            if sock.family in _INET:
                raise cls._refuse(_address(args[-1]))
            return int(saved["sendto"](sock, data, *args))

        def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            # A numeric address resolves without asking anyone; the connect is refused later.
            if host is not None and not _numeric(host):
                raise cls._refuse(f"name lookup {_address((host, port))}")
            return saved["getaddrinfo"](host, port, *args, **kwargs)

        def gethostbyname(host: str) -> str:
            raise cls._refuse(f"name lookup {host}")

        def gethostbyname_ex(host: str) -> Any:
            raise cls._refuse(f"name lookup {host}")

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
