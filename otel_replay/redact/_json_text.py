"""Redaction inside JSON text, rewriting only the string tokens it redacts."""

from __future__ import annotations

import re
from collections.abc import Callable

import orjson

__all__ = [
    "ANY_ESCAPE",
    "CREDENTIAL_KEY",
    "HIDING_ESCAPE",
    "credential_values",
    "is_credential_key",
    "may_name_credentials",
    "rewrite_escaped_strings",
]

REDACTED_TOKEN = b'"REDACTED"'

ANY_ESCAPE = re.compile(rb"\\")
"""Any escape: decoded text may differ from the raw bytes (``\\"``, ``\\n``, ``\\u…``)."""

HIDING_ESCAPE = re.compile(rb"\\[u/]")
"""The escapes that can hide a secret's characters (``\\u0043``, ``\\/``)."""

CREDENTIAL_KEY = (
    r"(?i)(api[-_.]?key|secret|secret[-_.]?key|password|passwd|pwd|passphrase"
    r"|(access|refresh|auth|bearer|session|security|id|api)[-_.]?token|authorization|auth"
    r"|bearer|credentials?|private[-_.]?key|secret[-_.]?access[-_.]?key)$"
)
"""A key that names a credential (``api_key``, ``clientSecret``, ``aws.secret_access_key``):
JSON keys here, span attribute keys in the Collector's ``redaction`` processor
(``collector-config/otelcol.yaml``), so it is written in the syntax Python's ``re`` and Go's
RE2 share. Not "token" alone: it names the tokens of log-probabilities in model responses
(see :data:`TOKEN_VALUE`). Not a session id either: agent frameworks name their conversations
so (``session_id``), and the replayed program must get its own back."""

_CREDENTIAL_KEY = re.compile(CREDENTIAL_KEY)

_TOKEN_KEY = re.compile(r"(?i)token$")
TOKEN_VALUE = re.compile(rb'"[^"\s\\]{16,}"')
"""The value a key ending in "token" (``token``, ``github_token``) holds when it is taken for
a credential: 16 characters or more with no space. A log-probability's token (``"token":
"Hello"``) is a few characters, a credential far more."""

_KEY_ENDINGS = (
    "key",
    "secret",
    "password",
    "passwd",
    "pwd",
    "passphrase",
    "token",
    "authorization",
    "auth",
    "bearer",
    "credential",
    "credentials",
)
"""How every key :data:`CREDENTIAL_KEY` matches ends (``token`` also ends the keys whose long
values :data:`TOKEN_VALUE` takes for credentials)."""


_QUOTE, _ESCAPED_QUOTE = '"', '\\\\"'


def _key_end(quote: str) -> str:
    """Lookbehinds, at a colon, for a credential key's ending and then ``quote``: first one
    for the endings' last two letters, which turns most keys away, then one per ending."""
    last_two = "".join(
        "["
        + "".join(sorted({e[i] for e in _KEY_ENDINGS} | {e[i].upper() for e in _KEY_ENDINGS}))
        + "]"
        for i in (-2, -1)
    )
    endings = "|".join(f"(?<=(?i:{ending}){quote}:)" for ending in _KEY_ENDINGS)
    return f"(?<={last_two}{quote}:)(?:{endings})"


# A colon just after a credential key's ending and its closing quote (escaped when the JSON
# is itself in a string), or after whitespace (a key may be spaced from its colon: the exact
# pass decides). The colon leads, so the regex engine skips from one to the next and looks
# behind only there, on the text itself (no reversed copy).
_KEY_END = re.compile(f":(?:(?<=\\s:)|{_key_end(_QUOTE)}|{_key_end(_ESCAPED_QUOTE)})".encode())

_STRING_VALUE = re.compile(rb'"\s*:\s*"')


def is_credential_key(key: str) -> bool:
    """True when a JSON key names a credential (``api_key``, ``apiKey``, ``client_secret``…)."""
    folded = key.lower().replace("_", "").replace("-", "").replace(".", "").replace(" ", "")
    return _CREDENTIAL_KEY.search(folded) is not None


def may_name_credentials(data: bytes) -> bool:
    """False when ``data`` certainly has no credential key (most bodies); a fast test."""
    return _KEY_END.search(data) is not None


def credential_values(data: bytes, found: Callable[[list[str]], None] | None = None) -> bytes:
    """``data`` with the string value of every credential key replaced by ``"REDACTED"``;
    ``found`` is given the values replaced, decoded (a value that is not a JSON string is
    left out)."""
    out: list[bytes] = []
    replaced: list[bytes] = []
    last = 0
    for match in _STRING_VALUE.finditer(data):
        key_end = match.start()
        if key_end < last or _escaped(data, key_end):
            continue
        key_start = _open_quote(data, key_end)
        value_end = _close_quote(data, match.end())
        if key_start < 0 or value_end < 0:
            continue
        key = data[key_start + 1 : key_end].decode("utf-8", "replace")
        value_start = match.end() - 1
        value = data[value_start : value_end + 1]
        if value != REDACTED_TOKEN and (
            is_credential_key(key)
            or (_TOKEN_KEY.search(key) is not None and TOKEN_VALUE.fullmatch(value) is not None)
        ):
            out += (data[last:value_start], REDACTED_TOKEN)
            last = value_end + 1
            if found is not None:
                replaced.append(value)
    if not out:
        return data
    if found is not None:
        found([text for text in map(_decoded, replaced) if text is not None])
    out.append(data[last:])
    return b"".join(out)


def _decoded(token: bytes) -> str | None:
    """The text of a JSON string token, or None when it is not one."""
    try:
        text = orjson.loads(token)
    except orjson.JSONDecodeError:
        return None
    return text if isinstance(text, str) else None


def rewrite_escaped_strings(
    data: bytes, escape: re.Pattern[bytes], redact: Callable[[bytes], bytes]
) -> bytes:
    """``data`` with each JSON string token holding an ``escape`` decoded, passed (as UTF-8)
    to ``redact``, and re-encoded when ``redact`` changed it. Tokens it leaves alone keep
    their exact bytes."""
    out: list[bytes] = []
    last = pos = 0
    while (found := escape.search(data, pos)) is not None:
        start = _open_quote(data, found.start())
        end = _close_quote(data, found.end())
        if start < 0 or end < 0:
            pos = found.end()
            continue
        pos = end + 1
        try:
            text = orjson.loads(data[start:pos])
        except orjson.JSONDecodeError:
            continue
        if not isinstance(text, str):
            continue
        raw = text.encode("utf-8", "surrogatepass")
        redacted = redact(raw)
        if redacted != raw:
            out += (data[last:start], orjson.dumps(redacted.decode("utf-8", "replace")))
            last = pos
    if not out:
        return data
    out.append(data[last:])
    return b"".join(out)


def _escaped(data: bytes, index: int) -> bool:
    """True when the byte at ``index`` follows an odd run of backslashes."""
    run = 0
    while index - run - 1 >= 0 and data[index - run - 1] == 0x5C:
        run += 1
    return run % 2 == 1


def _open_quote(data: bytes, before: int) -> int:
    """The last unescaped quote before ``before``, or -1."""
    at = data.rfind(b'"', 0, before)
    while at > 0 and _escaped(data, at):
        at = data.rfind(b'"', 0, at)
    return at


def _close_quote(data: bytes, start: int) -> int:
    """The first unescaped quote at or after ``start``, or -1."""
    at = data.find(b'"', start)
    while at >= 0 and _escaped(data, at):
        at = data.find(b'"', at + 1)
    return at
