"""``json.loads`` for whole bodies, answered by orjson whenever that gives the same value."""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["loads"]

_BIG = float(2**63)  # orjson turns integers outside [-2**63, 2**64) into floats this large
_orjson_loads = orjson.loads


def loads(data: bytes) -> Any:
    """``json.loads(data)``: the same value, or the same exception."""
    try:
        value = _orjson_loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)
    return json.loads(data) if _holds_big_float(value) else value


def _holds_big_float(value: Any) -> bool:
    stack = [value]
    pop, push = stack.pop, stack.append
    while stack:
        item = pop()
        cls = item.__class__
        if cls is dict:
            item = item.values()
        elif cls is not list:
            if cls is float and (item >= _BIG or item <= -_BIG):
                return True
            continue
        for child in item:
            cls = child.__class__
            if cls is dict or cls is list:
                push(child)
            elif cls is float and (child >= _BIG or child <= -_BIG):
                return True
    return False
