"""Spans in records: long strings and hashes taken out of them, and put back on reading.

A span is stored as given, except for two kinds of string, each replaced by ``null`` and an
entry of its record (see ``_records``):

* A string of :data:`EXTERNAL_MIN` characters or more becomes an object of the stream (an
  ``ext`` entry: its span, its path, its object number). Those strings are the expensive part
  of a span: the inline request and response bodies (the very objects the step's bodies are,
  so they cost nothing) and ``gen_ai.input.messages``, which re-sends the whole history on
  every step and is split like a body.
* A ``sha256:<hex>`` string that is the hash of an object of the stream (the span's
  ``replay.request.hash``, ``replay.response.hash``, or the hash of a stored string such as
  ``gen_ai.tool.definitions``) becomes a reference to that object (a ``tags`` entry), and is
  recomputed from it on reading: the hash is kept once, in the index. A hash of nothing
  stored (``replay.prompt.hash``) is kept as it is in its ``tags`` entry.

``Store.put`` turns a span into its record form at once (:func:`prepare_span`: JSON bytes and
the strings taken out), which checks it and keeps nothing the caller can still change.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

__all__ = [
    "EXTERNAL_MIN",
    "PreparedSpan",
    "Stripped",
    "ext_entries",
    "is_tag",
    "prepare_span",
    "restore",
    "stays_inline",
    "strip_strings",
    "tag_entries",
]

EXTERNAL_MIN = 512
"""Span strings at least this long are stored as objects (deduplicated) instead of inline."""

TAG_PREFIX = "sha256:"
TAG_LEN = len(TAG_PREFIX) + 64
_HEX_DIGITS = "0123456789abcdef"

Path = list[str | int]


def is_tag(value: str) -> bool:
    """Whether ``value`` is a ``sha256:<64 lowercase hex digits>`` string."""
    return (
        len(value) == TAG_LEN
        and value.startswith(TAG_PREFIX)
        and not value[len(TAG_PREFIX) :].strip(_HEX_DIGITS)
    )


def stays_inline(value: str) -> bool:
    """Whether a record keeps the span string ``value`` where it is (see the docstring)."""
    return len(value) < EXTERNAL_MIN and not is_tag(value)


Stripped = tuple[Any, list[tuple[Path, str]], list[tuple[Path, str]]]
"""A span with its long strings and hashes replaced by None, those strings with their paths,
and those hashes with theirs."""


def strip_strings(span: Mapping[str, Any]) -> Stripped:
    """``span`` with its long strings (:data:`EXTERNAL_MIN` characters or more) and its
    ``sha256:<hex>`` strings replaced by None, plus those strings and their paths (in walk
    order).

    Only the containers on the way to such a string are copied; the others are the caller's
    own, so serialise the result before the caller can change them (as :func:`prepare_span`
    does). A long string that cannot be encoded as UTF-8 (lone surrogates) is left inline,
    where the JSON encoder refuses it. (An ASCII string is known to be fine without looking
    at it.)
    """
    found: Stripped = (None, [], [])
    return _walk(span, [], found), found[1], found[2]


def _taken(value: str, path: Path, found: Stripped) -> bool:
    """Whether ``value`` (at ``path``) is taken out, noting it in ``found`` if so."""
    if len(value) >= EXTERNAL_MIN:
        if not value.isascii():
            try:
                value.encode()
            except UnicodeEncodeError:
                return False
        found[1].append((path, str(value)))
        return True
    if is_tag(value):
        found[2].append((path, str(value)))
        return True
    return False


def _walk(value: Any, path: Path, found: Stripped) -> Any:
    """``value`` (a container at ``path``) itself, or a copy when something is taken out of
    it. (Plain recursion, no closure: a recursive closure is a reference cycle, which only
    the garbage collector frees, and a burst of spans would keep it busy.)"""
    kind = type(value)
    pairs: Iterable[tuple[Any, Any]]
    if kind is dict or (kind is not list and isinstance(value, Mapping)):
        pairs = value.items()
    elif kind is list or isinstance(value, list | tuple):
        pairs = enumerate(value)
    else:
        return value
    changed: list[tuple[Any, Any]] | None = None
    for key, item in pairs:
        kind = type(item)
        if kind is str:
            size = len(item)
            if (size < EXTERNAL_MIN and size != TAG_LEN) or not _taken(item, [*path, key], found):
                continue
            new = None
        elif kind is int or kind is float or kind is bool or item is None:
            continue
        elif isinstance(item, str):
            if not _taken(item, [*path, key], found):
                continue
            new = None
        else:
            new = _walk(item, [*path, key], found)
            if new is item:
                continue
        if changed is None:
            changed = []
        changed.append((key, new))
    if changed is None:
        return value
    copy: Any = dict(value) if isinstance(value, Mapping) else list(value)
    for key, new in changed:
        copy[key] = new
    return copy


PreparedSpan = tuple[bytes, tuple[bytes | str, ...], tuple[bytes | str, ...]]
"""A span ready for its record: its JSON with the long strings and hashes taken out (see
:func:`strip_strings`), then the long strings and the hashes, each after its path (JSON), in
two flat tuples."""


def prepare_span(span: Mapping[str, Any]) -> PreparedSpan:
    """A span as its record will hold it, checked: TypeError when it is not JSON-ready.

    Only bytes and strings are kept (no containers, which would live until the flush and
    weigh on the garbage collector).
    """
    skeleton, longs, tags = strip_strings(span)
    return orjson.dumps(skeleton), _flat(longs), _flat(tags)


def _flat(found: list[tuple[Path, str]]) -> tuple[bytes | str, ...]:
    flat: list[bytes | str] = []
    for path, value in found:
        flat.append(orjson.dumps(path))
        flat.append(value)
    return tuple(flat)


def ext_entries(
    position: int,
    strings: tuple[bytes | str, ...],
    put: Callable[..., int],
    *,
    segment: bool = True,
) -> list[tuple[Any, ...]]:
    """Store the long strings :func:`prepare_span` took out of span ``position`` with
    ``put(data, segment=segment)``, which returns their object number; their ``ext``
    entries ``[position, path, object number]``."""
    entries: list[tuple[Any, ...]] = []
    for at in range(0, len(strings), 2):
        path, value = strings[at], strings[at + 1]
        assert isinstance(path, bytes) and isinstance(value, str)
        oid = put(value.encode(), segment=segment)
        entries.append((position, orjson.Fragment(path), oid))
    return entries


def tag_entries(
    position: int, tags: tuple[bytes | str, ...], lookup: Callable[[bytes], int | None]
) -> list[tuple[Any, ...]]:
    """The ``tags`` entries of the hashes :func:`prepare_span` took out of span ``position``:
    ``[position, path, object number]`` for the hash of an object (``lookup(digest)`` finds
    it), ``[position, path, the hash]`` for any other."""
    entries: list[tuple[Any, ...]] = []
    for at in range(0, len(tags), 2):
        path, value = tags[at], tags[at + 1]
        assert isinstance(path, bytes) and isinstance(value, str)
        oid = lookup(bytes.fromhex(value[len(TAG_PREFIX) :]))
        entries.append((position, orjson.Fragment(path), value if oid is None else oid))
    return entries


def _put_back(spans: list[dict[str, Any]], position: Any, path: Any, value: str) -> None:
    target: Any = spans[position]
    for key in path[:-1]:
        target = target[key]
    if target[path[-1]] is not None:
        raise ValueError(f"span {position} has a value where {path!r} was taken out")
    target[path[-1]] = value


def restore(
    spans: list[dict[str, Any]],
    ext: Iterable[list[Any]],
    tags: Iterable[list[Any]],
    get: Callable[[int], bytes],
) -> list[dict[str, Any]]:
    """Put the strings and hashes taken out back into ``spans`` (in place; also returned);
    ``get(object number)`` reads an object.

    Raises ValueError (or LookupError, TypeError) when an entry does not fit its span.
    """
    for position, path, oid in ext:
        _put_back(spans, position, path, get(oid).decode())
    for position, path, source in tags:
        if isinstance(source, str):
            if not is_tag(source):
                raise ValueError(f"span {position}: {source!r} at {path!r} is not a hash")
            _put_back(spans, position, path, source)
        else:
            digest = hashlib.sha256(get(source)).hexdigest()
            _put_back(spans, position, path, TAG_PREFIX + digest)
    return spans
