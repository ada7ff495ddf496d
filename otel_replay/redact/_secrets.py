"""Secret values learned from the credentials the application sends, scrubbed wherever they
recur."""

from __future__ import annotations

import base64
import binascii
import re
import threading
from collections.abc import Iterable

__all__ = ["MIN_SECRET_LENGTH", "Secrets"]

MIN_SECRET_LENGTH = 8
"""Shorter values are not learned: scrubbing ``"test"`` or ``"1"`` everywhere would redact
ordinary text, and a value that short guards nothing."""

_MAX_SECRETS = 256
"""Distinct values kept; a process that rotates more keys than this keeps its first ones."""

_SCHEME_AND_REST = re.compile(rb"\s*([!#$%&'*+.^_`|~0-9A-Za-z-]+)\s+(\S.*)", re.DOTALL)
"""An auth scheme (an RFC 7235 token: ``Bearer``, ``SSWS``, ``GenieKey``,
``Klaviyo-API-Key``…), blanks, and the credential after it."""


class Secrets:
    """The learned values, shared by every thread of the instrumentation.

    Reads take no lock: :attr:`values` is a tuple replaced whole when a value is learned.
    """

    __slots__ = ("_cores", "_lock", "values")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.values: tuple[bytes, ...] = ()
        """Learned values, longest first (so a value containing another is replaced whole)."""
        self._cores: tuple[tuple[bytes, ...], tuple[bytes, ...]] = ((), ())
        """Some ``values`` and those of them that contain no other (``Bearer sk-…`` contains
        ``sk-…``): text that holds none of those holds none of the values."""

    def learn(self, values: Iterable[str | bytes]) -> None:
        """Remember each value of at least :data:`MIN_SECRET_LENGTH` bytes."""
        new = []
        known = self.values
        for value in values:
            data = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value
            data = data.strip()
            if len(data) >= MIN_SECRET_LENGTH and data not in known and data not in new:
                new.append(data)
        if not new:
            return
        with self._lock:
            merged = set(self.values)
            merged.update(new[: max(0, _MAX_SECRETS - len(merged))])
            self.values = tuple(sorted(merged, key=len, reverse=True))

    def learn_header(self, value: bytes) -> None:
        """Learn a credential header's value: whole, without its auth scheme (whichever it
        is), each cookie's value, and the password of HTTP Basic credentials."""
        parts = [value]
        found = _SCHEME_AND_REST.fullmatch(value)
        if found is not None:  # any scheme: a provider's own (Okta's SSWS) as well
            scheme, rest = found.group(1).lower(), found.group(2).strip()
            parts.append(rest)
            if scheme == b"basic":
                parts.extend(_basic_parts(rest))
        for cookie in value.split(b";"):
            _, eq, cookie_value = cookie.partition(b"=")
            if eq:
                parts.append(cookie_value.strip().strip(b'"'))
        for part in value.split(b","):  # AWS SigV4: Credential=..., Signature=...
            _, eq, item = part.partition(b"=")
            if eq:
                parts.append(item.strip())
        self.learn(parts)

    def scrub(self, data: bytes, replacement: bytes) -> bytes:
        """``data`` with every learned value replaced; the same object when none occurs."""
        values = self.values
        of, cores = self._cores
        if of is not values:
            cores = tuple(v for v in values if not any(o in v for o in values if o != v))
            self._cores = (values, cores)
        # Most text holds no secret: a search for each core answers that in fewer scans
        # than one per value.
        for core in cores:
            if core in data:
                break
        else:
            return data
        for secret in values:
            if secret in data:
                data = data.replace(secret, replacement)
        return data

    def scrub_text(self, text: str, replacement: str) -> str:
        """:meth:`scrub` on text."""
        if not self.values:
            return text
        data = text.encode("utf-8", "surrogateescape")
        scrubbed = self.scrub(data, replacement.encode())
        return text if scrubbed is data else scrubbed.decode("utf-8", "surrogateescape")


def _basic_parts(token: bytes) -> list[bytes]:
    try:
        decoded = base64.b64decode(token, validate=True)
    except (binascii.Error, ValueError):
        return []
    _, colon, password = decoded.partition(b":")
    return [decoded, password] if colon else [decoded]
