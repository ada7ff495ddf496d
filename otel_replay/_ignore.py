"""Background traffic: the ``OTEL_REPLAY_IGNORE`` rules, which calls are not the agent's.

A matched call is neither recorded nor compared; a replay answers it itself
(:func:`status_for`, :data:`ANSWER_BODY`). The rule syntax is in docs/background-traffic.md."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = [
    "ANSWER_BODY",
    "ANSWER_HEADERS",
    "DEFAULTS",
    "DEFAULT_RULES",
    "DROP_DEFAULTS",
    "IgnoreRule",
    "IgnoreRules",
    "KnownEndpoint",
    "call_of",
    "parse",
    "status_for",
]

DROP_DEFAULTS = "-defaults"
"""The entry that drops :data:`DEFAULTS` from the rules."""

_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_HOST = re.compile(r"[a-z0-9*_.-]+|\[[0-9a-f:.*]+\]")
_READS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True, slots=True)
class KnownEndpoint:
    """A default rule: its glob and whose background traffic it is."""

    glob: str
    source: str


DEFAULTS: tuple[KnownEndpoint, ...] = (
    KnownEndpoint("*/v1/traces/ingest", "OpenAI Agents SDK trace upload (any base URL)"),
    KnownEndpoint("*.smith.langchain.com/info", "LangSmith client configuration"),
    KnownEndpoint("*.smith.langchain.com/runs", "LangSmith run upload"),
    KnownEndpoint("*.smith.langchain.com/runs/*", "LangSmith run upload (batch, multipart)"),
    KnownEndpoint("*/runs/multipart", "LangSmith run upload (self-hosted)"),
    KnownEndpoint("*/runs/batch", "LangSmith run upload (self-hosted)"),
    KnownEndpoint(
        "raw.githubusercontent.com/BerriAI/litellm/*/model_prices_and_context_window.json",
        "LiteLLM model price list, fetched at import",
    ),
    KnownEndpoint("*/api/public/ingestion", "Langfuse event upload"),
    KnownEndpoint("*/api/public/otel/*", "Langfuse OTLP upload"),
    KnownEndpoint("trace.wandb.ai", "Weights & Biases Weave traces"),
    KnownEndpoint("*/v1/traces", "OTLP/HTTP exporters (collectors, Phoenix, Logfire...)"),
    KnownEndpoint("*/v1/metrics", "OTLP/HTTP exporters"),
    KnownEndpoint("*/v1/logs", "OTLP/HTTP exporters"),
    KnownEndpoint("api.traceloop.com", "Traceloop (OpenLLMetry) upload"),
    KnownEndpoint("*.ingest.sentry.io", "Sentry events"),
    KnownEndpoint("*.ingest.*.sentry.io", "Sentry events (regional)"),
    KnownEndpoint("*/api/*/envelope/", "Sentry events (self-hosted)"),
    KnownEndpoint("us.i.posthog.com", "PostHog (telemetry of chromadb, mem0 and others)"),
    KnownEndpoint("eu.i.posthog.com", "PostHog"),
    KnownEndpoint("app.posthog.com", "PostHog"),
    KnownEndpoint("telemetry.crewai.com", "CrewAI telemetry"),
    KnownEndpoint("huggingface.co/api/telemetry/*", "Hugging Face hub telemetry"),
)
"""The known telemetry endpoints, ignored unless ``-defaults`` drops them. Only background
traffic belongs here: a proxy for model calls (Helicone, a gateway) carries the agent's own
calls, and LangSmith's prompt hub or Langfuse's prompt API feed the agent, so those stay
steps."""

ANSWER_BODY = (
    b'{"otel_replay":"ignored","detail":"background traffic (OTEL_REPLAY_IGNORE or an '
    b'OpenTelemetry export): not recorded, answered by otel-replay during a replay"}'
)
"""The JSON body of the answer a replay gives an ignored call (none for ``HEAD``)."""

ANSWER_HEADERS: tuple[tuple[str, str], ...] = (
    ("content-type", "application/json"),
    ("x-otel-replay", "ignored"),
)
"""The headers of that answer."""


def status_for(method: str) -> int:
    """The status a replay answers an ignored call with: ``404`` for a read (``GET``,
    ``HEAD``, ``OPTIONS``), so a client falls back to what it ships (LiteLLM's bundled price
    list) and no client retries; ``200`` for anything that sends (an upload), so an uploader
    counts its batch delivered and drops it without retrying or logging an error."""
    return 404 if method.upper() in _READS else 200


@dataclass(frozen=True, slots=True)
class IgnoreRule:
    """One parsed rule: ``glob`` as written (scheme dropped), its lower-case ``host`` glob,
    its ``port`` (None: any) and its ``path`` glob (None: any path)."""

    glob: str
    host: str
    port: int | None
    path: str | None


def _globbed(glob: str, text: str) -> bool:
    """True when ``text`` matches ``glob`` whole, ``*`` matching any run of characters.

    In time linear in ``text`` whatever the glob: the pieces between stars are found
    leftmost, one after the other (the first must start ``text`` and the last end it), which
    finds a match whenever there is one. A regular expression backtracks instead: a hostile
    rule (``*a*a*a*…*c``) took it exponential time per call."""
    if "*" not in glob:
        return text == glob
    first, *middle, last = glob.split("*")
    end = len(text) - len(last)
    if end < len(first) or not text.startswith(first) or not text.endswith(last):
        return False
    at = len(first)
    for piece in middle:
        at = text.find(piece, at, end)
        if at < 0:
            return False
        at += len(piece)
    return True


def _shown(entry: str) -> str:
    """``entry`` as an error names it: quoted, a long one cut (the message stays a line)."""
    return repr(entry) if len(entry) <= 80 else repr(entry[:77]) + "…"


def _parse_entry(entry: str) -> IgnoreRule:
    """One rule from its text; ValueError naming the entry when it is not one."""
    text = entry
    for scheme in ("http://", "https://"):
        if text.lower().startswith(scheme):
            text = text[len(scheme) :]
    if any(c.isspace() for c in text) or "?" in text or "#" in text:
        raise ValueError(f"entry {_shown(entry)}: expected HOST[:PORT][/PATH], no spaces, no query")
    slash = text.find("/")
    hostport, path = (text, None) if slash < 0 else (text[:slash], text[slash:])
    host, port = hostport.lower(), None
    if host.startswith("["):
        close = host.find("]")
        rest = host[close + 1 :] if close > 0 else ""
        host = host[: close + 1] if close > 0 else host
    else:
        host, sep, rest = host.partition(":")
        rest = sep + rest
    if rest:
        digits = rest[1:]
        if not (rest.startswith(":") and digits.isdigit() and 0 < int(digits) < 65536):
            raise ValueError(f"entry {_shown(entry)}: the port must be a number from 1 to 65535")
        port = int(digits)
    if not host:
        raise ValueError(f"entry {_shown(entry)}: a host is needed (write */PATH for any host)")
    if not _HOST.fullmatch(host):
        raise ValueError(f"entry {_shown(entry)}: {_shown(host)} is not a host name glob")
    if host == "*" and port is None and path is None:
        raise ValueError(f"entry {_shown(entry)} would ignore every call: name a host or a path")
    return IgnoreRule(text, host.strip("[]"), port, path)


class _Host:
    """The rules of one host glob: literal paths by lookup, the others in one expression."""

    __slots__ = ("_others", "_paths", "_prefixes")

    def __init__(self, rules: Iterable[IgnoreRule]) -> None:
        self._paths: dict[str, list[IgnoreRule]] = {}
        others: list[IgnoreRule] = []
        for rule in rules:
            if rule.path is not None and "*" not in rule.path:
                self._paths.setdefault(rule.path, []).append(rule)
            else:
                others.append(rule)
        self._others = tuple(others)
        # What each such path glob starts with, to skip the globs for other paths.
        self._prefixes = tuple("" if r.path is None else r.path.split("*", 1)[0] for r in others)

    def match(self, port: int | None, path: str | None) -> IgnoreRule | None:
        if path is not None:
            for rule in self._paths.get(path, ()):
                if rule.port is None or rule.port == port:
                    return rule
        if not self._prefixes or not (path or "").startswith(self._prefixes):
            return None
        return _first(self._others, port, path)


def _first(
    rules: Sequence[IgnoreRule], port: int | None, path: str | None, host: str | None = None
) -> IgnoreRule | None:
    """The first of ``rules`` whose port, path glob (and host glob, given ``host``) match."""
    for rule in rules:
        if rule.port is not None and rule.port != port:
            continue
        if host is not None and not _globbed(rule.host, host):
            continue
        if rule.path is None or _globbed(rule.path, path or ""):
            return rule
    return None


_URLS_MAX = 1024


class IgnoreRules:
    """The rules in force, precompiled: :meth:`match` runs on every call the capture or a
    replay sees, so it costs a dictionary lookup per host kind (named hosts, any host) and
    glob comparisons only where a rule has a star (host names ending like a wildcard rule's,
    paths starting like a path glob)."""

    __slots__ = ("_any", "_hosts", "_suffixes", "_urls", "_wild", "rules")

    def __init__(self, rules: Iterable[IgnoreRule]) -> None:
        self.rules: tuple[IgnoreRule, ...] = tuple(dict.fromkeys(rules))
        self._urls: dict[str, IgnoreRule | None] = {}
        """What :meth:`match_url` found for recent URLs (an application calls a few)."""
        named: dict[str, list[IgnoreRule]] = {}
        anywhere: list[IgnoreRule] = []
        wild: list[IgnoreRule] = []
        for rule in self.rules:
            if rule.host == "*":
                anywhere.append(rule)
            elif "*" in rule.host:
                wild.append(rule)
            else:
                named.setdefault(rule.host, []).append(rule)
        self._hosts = {host: _Host(group) for host, group in named.items()}
        self._any = _Host(anywhere) if anywhere else None
        self._wild = tuple(wild)
        # What each wildcard host glob ends with, to skip its glob for other hosts.
        self._suffixes = tuple(rule.host.rsplit("*", 1)[1] for rule in wild)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def __repr__(self) -> str:
        return f"IgnoreRules({[rule.glob for rule in self.rules]!r})"

    def match(self, host: str, port: int | None, path: str | None) -> IgnoreRule | None:
        """A rule that matches a call to ``host`` (a name or an address, brackets optional)
        on ``port`` (None: not known) for ``path`` (None: not known, as at a socket, where only
        rules without a path can match), or None."""
        host = host.lower().strip("[]").rstrip(".")
        named = self._hosts.get(host)
        if named is not None:
            found = named.match(port, path)
            if found is not None:
                return found
        if self._any is not None:
            found = self._any.match(port, path)
            if found is not None:
                return found
        if self._suffixes and host.endswith(self._suffixes):
            return _first(self._wild, port, path, host)
        return None

    def match_url(self, url: str) -> IgnoreRule | None:
        """:meth:`match` for a full URL (``scheme://host[:port]/path?query``)."""
        if not self.rules:
            return None
        urls = self._urls
        if url in urls:
            return urls[url]
        parts = urlsplit(url)
        try:
            port = parts.port or _PORTS.get(parts.scheme)
        except ValueError:
            port = None
        found = self.match(parts.hostname or "", port, parts.path or "/")
        if len(urls) >= _URLS_MAX:
            urls.clear()
        urls[url] = found
        return found


def call_of(url: str) -> str:
    """How a call is listed in a replay's report: ``host[:port]/path``, without the scheme,
    the user-info and the query string (the port only when it is not the scheme's)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None and port != _PORTS.get(parts.scheme):
        host = f"{host}:{port}"
    return host + (parts.path or "/")


def _rules(entries: Sequence[str]) -> IgnoreRules:
    keep_defaults = DROP_DEFAULTS not in entries
    rules = [_parse_entry(known.glob) for known in DEFAULTS] if keep_defaults else []
    rules += [_parse_entry(entry) for entry in entries if entry != DROP_DEFAULTS]
    return IgnoreRules(rules)


@functools.lru_cache(maxsize=16)
def parse(raw: str) -> IgnoreRules:
    """The rules an ``OTEL_REPLAY_IGNORE`` value asks for: :data:`DEFAULTS` plus its entries
    (or its entries alone with ``-defaults``). Raises ValueError naming a bad entry.

    One value gives one (shared) rules object: settings are read at every replay's start,
    and the rules' memo of the URLs they matched then outlives the replay."""
    return _rules([entry.strip() for entry in raw.split(",") if entry.strip()])


DEFAULT_RULES = parse("")
"""The rules when ``OTEL_REPLAY_IGNORE`` is not set: :data:`DEFAULTS`."""
