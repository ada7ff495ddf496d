"""Remote sources: http(s) URLs answering OTLP JSON, and the trace backends named by scheme,
``phoenix://HOST:PORT[/PROJECT]``, ``jaeger://HOST:PORT/TRACE_ID`` and
``tempo://HOST:PORT/TRACE_ID`` (several trace ids: comma-separated), or
``jaeger://HOST:PORT#RUN_ID`` and ``tempo://HOST:PORT#RUN_ID`` (found by search:
:mod:`._search`).

Each is downloaded into OTLP JSON bytes (:func:`download`) that the loader reads like a file.
A reference is hostile input: its host, port, trace ids, project and run id are checked
before any request is made, requests go to that host and port only (a redirect elsewhere is
refused), and every download is bounded by the source limits.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote

from otel_replay.errors import SourceError
from otel_replay.replay.sources._fetch import Downloads, fetch, is_url, shown
from otel_replay.replay.sources._limits import Limits
from otel_replay.replay.sources._phoenix import phoenix_spans
from otel_replay.replay.sources._search import (
    Window,
    jaeger_traces,
    run_ids,
    tempo_trace_ids,
)

__all__ = ["BackendRef", "download", "is_remote", "source_name"]

DEFAULT_PORTS = {"phoenix": 6006, "jaeger": 16686, "tempo": 3200}
"""Each backend's port for its HTTP API when the reference gives none."""

_TRACE_PATHS = {"jaeger": "/api/v3/traces/", "tempo": "/api/v2/traces/"}
_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9-]{1,63})*\.?")
_IPV6 = re.compile(r"\[[0-9A-Fa-f:.]{2,45}\]")
_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_MAX_TRACES = 100
"""Most trace ids one reference may name: each is a request to the server."""
_MAX_NAME = 256
"""Longest project name or run id a reference may give."""
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


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
        return f"{self.scheme}://{self.host}:{self.port}{'/' * bool(path)}{path}"


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
    the spans of ``selector``'s run when it names one (a run id or a trace id); from Jaeger
    and Tempo given no trace id, the traces of ``selector``'s run, found by search.

    Raises SourceError naming the source when the reference is bad, the server cannot be
    reached, answers an error (an unknown trace or project, no run ``selector``: one line
    naming it) or answers past the limits.
    """
    if is_url(ref):
        return fetch(ref, limits)
    backend = parse(ref)
    if selector is not None:
        _check_name(selector, "run id", str(backend))
    if backend.scheme == "phoenix":
        return phoenix_spans(backend.base_url, backend.project, str(backend), limits, selector)
    get = Downloads(limits, str(backend))
    if backend.trace_ids:
        answers = _traces(get, backend, backend.trace_ids)
    elif selector is not None:
        answers = _run_traces(get, backend, selector)
    else:
        raise SourceError(
            f"{backend}: give a trace id (…/TRACE_ID) or a run to search for (…#RUN_ID)"
        )
    return answers[0] if len(answers) == 1 else b"[" + b",".join(answers) + b"]"


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
    if "%" in authority or "\\" in authority:
        # A host is given as it is: an escape or a backslash in it hides another host.
        raise SourceError(f"{named}: the host and port hold a '%' or '\\'; give them plain")
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
    """The project name ``path`` gives (decoded): the one segment of a request's path."""
    project = path or "default"
    _check_name(project, "project name", named)
    quoted = _quoted(project)
    # A server, or a proxy before it, resolves these; some fold look-alikes (NFKC) first.
    folded = unicodedata.normalize("NFKC", project)
    if folded in (".", ".."):
        raise SourceError(
            f"{named}: the project name {quoted} is a path step ({folded!r}), which a "
            "server resolves instead of sending it to Phoenix"
        )
    for char in project:
        if char in "/\\":
            raise SourceError(f"{named}: the project name {quoted} holds a path separator")
        if _slash_like(char):
            raise SourceError(
                f"{named}: the project name {quoted} holds a look-alike of a path separator "
                f"(U+{ord(char):04X} {unicodedata.name(char)})"
            )
    if any(c in project for c in "?#"):
        raise SourceError(f"{named}: a project name holding '?' or '#' is not supported")
    if _ESCAPE.search(project):
        raise SourceError(
            f"{named}: the project name {quoted} is percent-encoded twice (it decodes to "
            "another escape)"
        )
    return project


def _slash_like(char: str) -> bool:
    """True for a character drawn as a slash or a backslash: DIVISION SLASH, FULLWIDTH
    SOLIDUS and the like (by its Unicode name)."""
    if char.isascii():
        return False
    name = unicodedata.name(char, "")
    return "SOLIDUS" in name or "SLASH" in name


def _check_name(name: str, what: str, named: str) -> None:
    """SourceError unless ``name`` is a project name or run id a request may carry: printable
    (no NUL, no terminal escape, no direction override) and at most :data:`_MAX_NAME` long."""
    if not name.isprintable():
        raise SourceError(f"{named}: the {what} {_quoted(name)} is not printable")
    if len(name) > _MAX_NAME:
        raise SourceError(f"{named}: the {what} is longer than {_MAX_NAME} characters")


def _trace_ids(path: str, named: str) -> tuple[str, ...]:
    if not path:
        return ()
    ids = tuple(part.strip().lower() for part in path.split(","))
    if len(ids) > _MAX_TRACES:
        raise SourceError(f"{named}: more than {_MAX_TRACES} trace ids")
    for trace_id in ids:
        if not _TRACE_ID.fullmatch(trace_id):
            raise SourceError(f"{named}: {_quoted(trace_id)} is not a trace id (32 hex digits)")
    return tuple(dict.fromkeys(ids))


def _traces(get: Downloads, backend: BackendRef, trace_ids: Iterable[str]) -> list[bytes]:
    """Each of ``trace_ids`` from ``backend``'s trace API."""
    answers: list[bytes] = []
    for trace_id in trace_ids:
        answer = _trace(get, backend, trace_id)
        assert answer is not None  # no status is taken for absence
        answers.append(answer)
    return answers


def _trace(
    get: Downloads, backend: BackendRef, trace_id: str, *, absent: bool = False
) -> bytes | None:
    """Trace ``trace_id`` from ``backend``'s trace API; None when unknown and ``absent``."""
    one = BackendRef(backend.scheme, backend.host, backend.port, trace_ids=(trace_id,))
    return get.get(
        backend.base_url + _TRACE_PATHS[backend.scheme] + trace_id,
        named=str(one),
        statuses={404: f"no trace {trace_id} on the server"},
        absent=(404,) if absent else (),
    )


def _run_traces(get: Downloads, backend: BackendRef, selector: str) -> list[bytes]:
    """The traces of ``selector``'s run: a run id searched for, or the id of one of its
    traces (read, then the run id its spans carry searched for)."""
    trace_id = selector.strip().lower()
    if _TRACE_ID.fullmatch(trace_id):
        first = _trace(get, backend, trace_id, absent=True)
        if first is not None:  # else a run id that looks like a trace id
            carried = sorted(run_ids(first, get))
            if len(carried) > 1:
                raise SourceError(
                    f"{backend}: trace {trace_id} holds spans of {len(carried)} runs "
                    f"({', '.join(map(repr, carried))}); pick one with #RUN_ID"
                )
            # A trace without a run id is a run of its own.
            return [first, *(a for run_id in carried for a in _search(get, backend, run_id))]
    return _search(get, backend, selector)


def _search(get: Downloads, backend: BackendRef, run_id: str) -> list[bytes]:
    window = Window.of(run_id)
    if backend.scheme == "jaeger":
        return jaeger_traces(get, backend.base_url, run_id, window)
    return _traces(get, backend, tempo_trace_ids(get, backend.base_url, run_id, window))


def _printable(text: str) -> str:
    """``text`` as one printable line, cut to 200 characters (a reference is hostile)."""
    line = text if text.isprintable() else repr(text)[1:-1]
    return line if len(line) <= 200 else line[:199] + "…"


def _quoted(text: str) -> str:
    """``text`` quoted, cut to 200 characters, all but printable ASCII escaped: a look-alike
    shows as its code point."""
    return ascii(text if len(text) <= 200 else text[:199] + "…")
