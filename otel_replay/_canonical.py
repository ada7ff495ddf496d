"""Canonical JSON (RFC 8785, JCS) and the ``sha256:<hex>`` digests built on it."""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

import orjson

__all__ = ["canonical_json", "parse_json", "sha256_tag", "surrogate_safe_json"]

# Where orjson's output can differ from RFC 8785, each with the byte every match holds at
# offset 1 (the anchor searched with memchr).
_DIVERGENT = (
    (48, re.compile(rb"\.0(?:[,\]}]|$)")),  # "0": integral float: orjson 1.0, JCS 1
    (43, re.compile(rb"e\+(?:1[6-9]|20)(?:[,\]}]|$)")),  # "+": 1e16 <= x < 1e21: JCS digits
    (45, re.compile(rb"e-6(?:[,\]}]|$)")),  # "-": 1e-7 < x < 1e-6: JCS writes 0.000001...
)
_MAX_ANCHORS = 8  # anchors tried one by one before handing the rest to re.search
_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER
_dumps = orjson.dumps
_sha256 = hashlib.sha256
# Lead bytes of the 4-byte UTF-8 sequences, i.e. of the characters outside the BMP.
_NON_BMP_LEADS = (b"\xf0", b"\xf1", b"\xf2", b"\xf3", b"\xf4")
_SCALARS = frozenset({str, int, float, bool, type(None)})
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def sha256_tag(data: bytes, *more: bytes) -> str:
    """``sha256:<hex>`` of ``data`` (followed by ``more``, hashed as if concatenated, without
    the copy), the form every ``replay.*.hash`` attribute uses."""
    digest = _sha256()
    _feed(digest, data)
    for part in more:
        _feed(digest, part)
    return "sha256:" + digest.hexdigest()


_GIL_SLICE = 2047
"""hashlib releases the GIL for an update of 2,048 bytes or more."""
_HOLD_GIL_UP_TO = 256 * 1024


def _feed(digest: Any, data: bytes) -> None:
    # Hashed on the application's thread for every step. Releasing the GIL for a small body
    # hands it to the exporter's writer thread, and getting it back costs the application
    # more than the hash (bench/capture_peers.py shows it). So bodies up to _HOLD_GIL_UP_TO
    # are fed in slices that keep the GIL; past that the hash itself dominates and other
    # threads may run.
    size = len(data)
    if size <= _GIL_SLICE or size > _HOLD_GIL_UP_TO:
        digest.update(data)
        return
    view = memoryview(data)
    update = digest.update
    for start in range(0, size, _GIL_SLICE):
        update(view[start : start + _GIL_SLICE])


def canonical_json(value: Any) -> bytes:
    """Serialise a JSON-ready value (dict/list/str/int/float/bool/None) per RFC 8785.

    Values are expected to come from parsed JSON, which holds no NaN or infinities.
    """
    try:
        out = _dumps(value, option=_OPTIONS)
    except orjson.JSONEncodeError:
        return _exact(value).encode()  # integers past 2**53 are doubles in JCS
    if (
        not out.isascii()
        and any(lead in out for lead in _NON_BMP_LEADS)
        and _keys_outside_bmp(value)
    ):
        return _exact(value).encode()
    if _number_diverges(out):
        return _exact(value).encode()
    return out


def parse_json(data: bytes | str) -> Any:
    """The value of JSON text ``data``, fast; JSON that escapes a lone surrogate (which
    :func:`canonical_json` writes for such a string) too. Raises ValueError when it is not
    JSON."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "surrogate" not in str(exc):
            raise
        return json.loads(data)  # slower, and it takes lone surrogates


def _number_diverges(out: bytes) -> bool:
    """True when some ``_DIVERGENT`` pattern matches ``out`` (same answer as ``search``)."""
    find = out.find
    for anchor, pattern in _DIVERGENT:
        at = find(anchor, 1)
        tried = 0
        while at != -1:
            if tried == _MAX_ANCHORS:
                if pattern.search(out, at - 1) is not None:
                    return True
                break
            if pattern.match(out, at - 1) is not None:
                return True
            tried += 1
            at = find(anchor, at + 1)
    return False


def _keys_outside_bmp(value: Any) -> bool:
    """True when an object key holds a character outside the BMP: the only place where
    orjson's key order (code points) and JCS's (UTF-16 code units) can differ. Such characters
    in string values (emoji in message text) are written identically by both."""
    stack = [value]
    pop, push = stack.pop, stack.append
    while stack:
        item = pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if key.__class__ is not str or (not key.isascii() and max(key) > "\uffff"):
                    return True
                if child.__class__ not in _SCALARS:
                    push(child)
        elif isinstance(item, list | tuple):
            for child in item:
                if child.__class__ not in _SCALARS:
                    push(child)
    return False


def surrogate_safe_json(value: Any) -> str:
    """JSON text of ``value`` (parsed-JSON types) in its own key order, compact, with each
    lone surrogate written as its escape: JSON text may escape one (a model's tool arguments
    can hold one), but I-JSON, and so JCS and orjson, exclude it."""
    written = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", written)


def _string(text: str) -> str:
    try:
        return orjson.dumps(text).decode()
    except orjson.JSONEncodeError:
        return surrogate_safe_json(text)


def _exact(value: Any) -> str:
    if isinstance(value, str):
        return _string(value)
    if value is None or isinstance(value, bool):
        return "null" if value is None else ("true" if value else "false")
    if isinstance(value, int):
        return _number(float(value)) if abs(value) > 2**53 else str(value)
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: str(k).encode("utf-16-be", "surrogatepass"))
        items = (f"{_string(str(k))}:{_exact(value[k])}" for k in keys)
        return "{" + ",".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_exact(v) for v in value) + "]"
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def _number(x: float) -> str:
    """ECMAScript Number::toString, which RFC 8785 prescribes for every number."""
    if not math.isfinite(x):
        raise ValueError("NaN and infinities have no JSON form")
    if x == 0:
        return "0"
    mantissa, _, exp_text = repr(x).partition("e")
    exponent = int(exp_text) if exp_text else 0
    sign = "-" if mantissa.startswith("-") else ""
    int_part, _, frac_part = mantissa.lstrip("-").partition(".")
    digits = (int_part + frac_part).lstrip("0") or "0"
    # Position of the decimal point relative to the first significant digit.
    point = (
        len(int_part.lstrip("0")) + exponent
        if int_part != "0"
        else exponent - (len(frac_part) - len(frac_part.lstrip("0")))
    )
    digits = digits.rstrip("0") or "0"
    if 0 < point <= 21:
        if len(digits) <= point:
            return sign + digits + "0" * (point - len(digits))
        return sign + digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return sign + "0." + "0" * (-point) + digits
    exp = point - 1
    body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{body}e{'+' if exp > 0 else '-'}{abs(exp)}"
