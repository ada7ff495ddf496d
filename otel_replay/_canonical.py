"""Canonical JSON (RFC 8785, JCS) and the ``sha256:<hex>`` digests built on it.

The hot path serialises with orjson (sorted keys, compact) and checks the output for the few
things where orjson and RFC 8785 disagree: integral floats (``1.0`` must be ``1``), exponent
forms, integers past 2**53 (JCS numbers are IEEE doubles) and characters outside the BMP (JCS
orders keys by UTF-16 code units). Only then does the exact, slower encoder run.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

import orjson

__all__ = ["canonical_json", "sha256_tag"]

# Where orjson's output can differ from RFC 8785. Each pattern starts with a literal, which
# keeps the scan a fast substring search instead of a per-byte regex walk.
_DIVERGENT = (
    re.compile(rb"\.0(?:[,\]}]|$)"),  # integral float: orjson 1.0, JCS 1
    re.compile(rb"e\+(?:1[6-9]|20)(?:[,\]}]|$)"),  # 1e16 <= x < 1e21: JCS writes digits
    re.compile(rb"e-6(?:[,\]}]|$)"),  # 1e-7 < x < 1e-6: JCS writes 0.000001...
)
_NON_BMP = re.compile(rb"[\xf0-\xf4]")  # JCS orders keys by UTF-16 code units


def sha256_tag(data: bytes) -> str:
    """``sha256:<hex>`` of ``data``, the form every ``replay.*.hash`` attribute uses."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical_json(value: Any) -> bytes:
    """Serialise a JSON-ready value (dict/list/str/int/float/bool/None) per RFC 8785.

    Values are expected to come from parsed JSON, which holds no NaN or infinities.
    """
    try:
        out = orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER)
    except orjson.JSONEncodeError:
        return _exact(value).encode()  # integers past 2**53 are doubles in JCS
    if not out.isascii() and _NON_BMP.search(out) is not None:
        return _exact(value).encode()
    for pattern in _DIVERGENT:
        if pattern.search(out) is not None:
            return _exact(value).encode()
    return out


def _exact(value: Any) -> str:
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    if value is None or isinstance(value, bool):
        return "null" if value is None else ("true" if value else "false")
    if isinstance(value, int):
        return _number(float(value)) if abs(value) > 2**53 else str(value)
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: str(k).encode("utf-16-be"))
        items = (f"{orjson.dumps(str(k)).decode()}:{_exact(value[k])}" for k in keys)
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
