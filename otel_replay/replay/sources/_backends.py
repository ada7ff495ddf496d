"""Remote sources: http(s) URLs answering OTLP JSON, and the trace backends named by scheme,
``phoenix://HOST:PORT[/PROJECT]``, ``jaeger://HOST:PORT/TRACE_ID`` and
``tempo://HOST:PORT/TRACE_ID`` (several trace ids: comma-separated).

Each is downloaded into OTLP JSON bytes (:func:`download`) that the loader reads like a file.
A reference is hostile input: its host, port, trace ids and project are checked before any
request is made, requests go to that host and port only (a redirect elsewhere is refused),
and every download is bounded by the source limits.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from urllib.parse import unquote

from otel_replay.errors import SourceError
from otel_replay.replay.sources._fetch import fetch, is_url, shown
from otel_replay.replay.sources._limits import Limits
from otel_replay.replay.sources._phoenix import phoenix_spans

__all__ = ["BackendRef", "download", "is_remote", "source_name"]

DEFAULT_PORTS = {"phoenix": 6006, "jaeger": 16686, "tempo": 3200}
"""Each backend's port for its HTTP API when the reference gives none."""

_TRACE_PATHS = {"jaeger": "/api/v3/traces/", "tempo": "/api/v2/traces/"}
_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9-]{1,63})*\.?")
_IPV6 = re.compile(r"\[[0-9A-Fa-f:.]{2,45}\]")
_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_MAX_TRACES = 100
"""Most trace ids one reference may name: each is a request to the server."""
_MAX_PROJECT = 256


@dataclass(frozen=True, slots=True)
class BackendRef:
    """A checked backend reference: the project (Phoenix) or trace ids (Jaeger, Tempo)."""

    scheme: str
    host: str
    port: int
    project: str = ""
    trace_ids: tuple[str, ...] = ()

    @property
    def base_url(self) -> str:
        """The server's HTTP address: https on port 443, http otherwise."""
        return f"{'https' if self.port == 443 else 'http'}://{self.host}:{self.port}"

    def __str__(self) -> str:
        path = self.project if self.scheme == "phoenix" else ",".join(self.trace_ids)
        return f"{self.scheme}://{self.host}:{self.port}/{path}"


def is_remote(ref: str) -> bool:
    """True when ``ref`` is an http(s) URL or names a trace backend (``phoenix://`` …)."""
    scheme, sep, _ = ref.partition("://")
    return is_url(ref) or (bool(sep) and scheme.lower() in DEFAULT_PORTS)


def source_name(ref: str) -> str:
    """How messages and reports name the remote source ``ref`` (no ``#RUN_ID``): a URL with
    its credentials redacted, a backend reference as checked (SourceError when it is bad)."""
    return shown(ref) if is_url(ref) else str(parse(ref))


def download(ref: str, limits: Limits, selector: str | None = None) -> bytes:
    """The OTLP JSON the remote source ``ref`` (no ``#RUN_ID``) answers; from Phoenix, only
    the spans of ``selector``'s run when it names one (a run id or a trace id).

    Raises SourceError naming the source when the reference is bad, the server cannot be
    reached, answers an error (an unknown trace or project: one line naming it) or answers
    past the limits.
    """
    if is_url(ref):
        return fetch(ref, limits)
    backend = parse(ref)
    if backend.scheme == "phoenix":
        return phoenix_spans(backend.base_url, backend.project, str(backend), limits, selector)
    return _traces(backend, limits)


def parse(ref: str) -> BackendRef:
    """The backend ``ref`` names; SourceError saying what is wrong with it."""
    scheme, _, rest = ref.partition("://")
    scheme = scheme.lower()
    named = _printable(ref)
    if scheme not in DEFAULT_PORTS:
        raise SourceError(f"{named}: not a trace backend (phoenix://, jaeger://, tempo://)")
    if "?" in rest:
        raise SourceError(f"{named}: a backend reference takes no query string")
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        raise SourceError(f"{named}: a backend reference takes no user name or password")
    host, port = _authority(authority, DEFAULT_PORTS[scheme], named)
    try:
        path = unquote(path, errors="strict") if slash else ""
    except UnicodeDecodeError:
        raise SourceError(f"{named}: the path is not percent-encoded UTF-8") from None
    if scheme == "phoenix":
        return BackendRef(scheme, host, port, project=_project(path, named))
    return BackendRef(scheme, host, port, trace_ids=_trace_ids(path, named))


def _authority(authority: str, default_port: int, named: str) -> tuple[str, int]:
    if authority.startswith("["):
        close = authority.find("]")
        host, after = authority[: close + 1], authority[close + 1 :]
        if close < 0 or not _IPV6.fullmatch(host) or after[:1] not in ("", ":"):
            raise SourceError(f"{named}: the host is not an IPv6 address in brackets")
        colon, port_text = after[:1], after[1:]
    else:
        host, colon, port_text = authority.partition(":")
        if not host:
            raise SourceError(f"{named}: the host is missing")
        if len(host) > 253 or not _HOST.fullmatch(host):
            raise SourceError(f"{named}: the host is not a host name or an IP address")
    if not colon:
        return host, default_port
    if not (port_text.isascii() and port_text.isdigit() and 0 < int(port_text) < 65536):
        raise SourceError(f"{named}: the port is not a number from 1 to 65535")
    return host, int(port_text)


def _project(path: str, named: str) -> str:
    project = path or "default"
    # Phoenix takes a project name in its URL path, without these characters.
    if any(c in project for c in "/?#") or project in (".", ".."):
        raise SourceError(f"{named}: a Phoenix project name holds no '/', '?' or '#'")
    if len(project) > _MAX_PROJECT or not project.isprintable():
        raise SourceError(
            f"{named}: the project name is not printable or longer than {_MAX_PROJECT} characters"
        )
    return project


def _trace_ids(path: str, named: str) -> tuple[str, ...]:
    if not path:
        raise SourceError(f"{named}: the trace id is missing (…/TRACE_ID)")
    ids = tuple(part.strip().lower() for part in path.split(","))
    if len(ids) > _MAX_TRACES:
        raise SourceError(f"{named}: more than {_MAX_TRACES} trace ids")
    for trace_id in ids:
        if not _TRACE_ID.fullmatch(trace_id):
            raise SourceError(
                f"{named}: {_printable(trace_id)!r} is not a trace id (32 hex digits)"
            )
    return tuple(dict.fromkeys(ids))


def _traces(backend: BackendRef, limits: Limits) -> bytes:
    """Each trace of ``backend`` from its trace API, as one JSON document (a list of the
    answers when there are several), within the limits counted over all of them."""
    deadline = time.monotonic() + limits.timeout_s
    bodies: list[bytes] = []
    total = 0
    for trace_id in backend.trace_ids:
        one = BackendRef(backend.scheme, backend.host, backend.port, trace_ids=(trace_id,))
        body = fetch(
            backend.base_url + _TRACE_PATHS[backend.scheme] + trace_id,
            limits,
            named=str(one),
            same_host=True,
            statuses={404: f"no trace {trace_id} on the server"},
            until=deadline,
        )
        total += len(body)
        if total > limits.max_bytes:
            raise limits.too_large(str(backend), "answers")
        bodies.append(body)
    return bodies[0] if len(bodies) == 1 else b"[" + b",".join(bodies) + b"]"


def _printable(text: str) -> str:
    """``text`` as one printable line, cut to 200 characters (a reference is hostile)."""
    line = text if text.isprintable() else repr(text)[1:-1]
    return line if len(line) <= 200 else line[:199] + "…"
