"""Putting a replay session in charge of a process's HTTP and, in strict mode, its sockets."""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

from otel_replay import settings
from otel_replay._workers import add_part, remove_part
from otel_replay.capture.package import CLIENT_MODULES
from otel_replay.capture.transports import wrap_on_import
from otel_replay.envelope import hold_uuids, release_uuids, use_server, use_tool_lists
from otel_replay.envelope.frameworks import attach, detach
from otel_replay.replay._audit import AuditGuard
from otel_replay.replay._guard import SocketGuard
from otel_replay.replay._live_from import LiveGuard
from otel_replay.replay._observe import NetworkObserver
from otel_replay.replay._session import ReplaySession
from otel_replay.replay.transports import install as install_transports
from otel_replay.replay.transports._httpx import transport_classes

__all__ = ["install"]

PART = "replay"
"""The replay's part of a worker's ticket."""


def install(session: ReplaySession) -> Callable[[], None]:
    """Route every httpx/httpx2, urllib3 and aiohttp request through ``session``; returns
    the undo function."""
    # A client library the application has not imported is served once it does: importing
    # it here would cost every replay (every marked test) what it does not use.
    clients = [
        undo
        for undo in (
            wrap_on_import(name, functools.partial(_serve_clients, session))
            for name in CLIENT_MODULES
        )
        if undo is not None
    ]
    undo_transports = install_transports(session)  # urllib3 (requests, botocore), aiohttp
    guards: list[SocketGuard | AuditGuard | NetworkObserver | LiveGuard] = []
    if session.live_from is not None:  # strict until the fork goes live
        guards.append(
            LiveGuard(
                session.live_from,
                session.network_attempt,
                session.subprocess_started,
                session.network_live,
            )
        )
    elif session.strict:
        guards.append(SocketGuard(session.network_attempt))
        guards.append(AuditGuard(session.network_attempt, session.subprocess_started))
    else:
        guards.append(NetworkObserver(session.network_live))
    for guard in guards:
        guard.install()
    use_server(session)
    use_tool_lists(
        settings.read("OTEL_REPLAY_WRITE_TOOLS"), settings.read("OTEL_REPLAY_READ_TOOLS")
    )
    attach()  # framework tools served as steps
    hold_uuids()  # and the application's own uuid draws
    # Workers multiprocessing starts fresh serve from this session's account (``_ledger``).
    add_part(PART, session.matcher.ledger.ticket, session.join)

    def undo() -> None:
        remove_part(PART)
        release_uuids()
        detach()
        use_server(None)
        for undo_clients in reversed(clients):
            undo_clients()
        clients.clear()
        undo_transports()
        for guard in reversed(guards):
            guard.uninstall()
        guards.clear()

    return undo


def _serve_clients(session: ReplaySession, module: ModuleType) -> Callable[[], None]:
    """Make the clients of ``module`` (httpx or httpx2) send through the replay transport;
    the undo function."""
    sync_cls, async_cls = transport_classes(module)
    wrapped: list[tuple[type[Any], Any]] = []
    for client, cls in ((module.Client, sync_cls), (module.AsyncClient, async_cls)):
        choose = client._transport_for_url
        client._transport_for_url = _chooser(session, cls, choose)
        wrapped.append((client, choose))

    def undo() -> None:
        for client, choose in reversed(wrapped):
            client._transport_for_url = choose

    return undo


def _chooser(
    session: ReplaySession, cls: type[Any], choose: Callable[[Any, Any], Any]
) -> Callable[[Any, Any], Any]:
    """A client's ``_transport_for_url`` that gives the replay transport in place of the
    transport ``choose`` picks (one replay transport per original, made on first use). A plain
    function, not a wrapper object: it runs on every request."""
    # Each replacement holds its original (its fallback), so the keys could not be weak.
    replacements: dict[Any, Any] = {}

    def _transport_for_url(client: Any, url: Any) -> Any:
        original = choose(client, url)
        replacement = replacements.get(original)
        if replacement is None:
            replacement = replacements[original] = cls(session, original)
        return replacement

    return _transport_for_url
