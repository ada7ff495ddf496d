"""A replay that is not strict lets the program reach the network; this counts every try."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry import context
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY

from otel_replay.replay._audit import AuditListeners
from otel_replay.replay._guard import describe, is_network, is_numeric

__all__ = ["NetworkObserver"]


class NetworkObserver:
    """Tells ``on_attempt(what)`` of each network operation while installed, refusing none.

    ``install``/``uninstall`` nest; the process's hook idles once none is installed.
    """

    def __init__(self, on_attempt: Callable[[str], None]) -> None:
        self.on_attempt = on_attempt

    def install(self) -> None:
        """Start counting."""
        _LISTENERS.add(self)

    def uninstall(self) -> None:
        """Stop counting (this observer)."""
        _LISTENERS.remove(self)


def _tell(what: str) -> None:
    if context.get_value(_SUPPRESS_INSTRUMENTATION_KEY):
        return  # an OpenTelemetry exporter sending: not the program's traffic
    for observer in _LISTENERS.active:
        observer.on_attempt(what)


def _socket_event(operation: str) -> Callable[[tuple[Any, ...]], None]:
    def seen(args: tuple[Any, ...]) -> None:
        sock, address = args[0], args[1]
        if address is not None and is_network(getattr(sock, "family", -1)):
            _tell(describe(address, operation))

    return seen


def _lookup(args: tuple[Any, ...]) -> None:
    host = args[0]
    if host is not None and not is_numeric(host):
        name = host.decode(errors="replace") if isinstance(host, bytes) else str(host)
        _tell(f"name lookup {describe((name, args[1])) if len(args) > 1 else name}")


_EVENTS: dict[str, Callable[[tuple[Any, ...]], None]] = {
    "socket.connect": _socket_event("connect"),
    "socket.sendto": _socket_event("sendto"),
    "socket.sendmsg": _socket_event("sendmsg"),
    "socket.getaddrinfo": _lookup,
    "socket.gethostbyname": _lookup,
}


def _hook(event: str, args: tuple[Any, ...]) -> None:
    # Runs for every audit event of the process: the idle path is one attribute read.
    if not _LISTENERS.active:
        return
    seen = _EVENTS.get(event)
    if seen is not None:
        seen(args)


_LISTENERS: AuditListeners[NetworkObserver] = AuditListeners(_hook)
