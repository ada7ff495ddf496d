"""Python values to JSON and back, for the steps the HTTP layer cannot see (tools, values).

Arguments are recorded as canonical JSON (RFC 8785), so equal arguments hash equal; results
(a tool's, a side effect's value, a checkpoint's state) as exact JSON, keeping key order and
``129.0`` apart from ``129``, so what replay hands back prints as it did.

pydantic's serialiser turns what agents pass around into JSON (datetimes, uuids, decimals,
enums, dataclasses, pydantic models, sets, tuples); its validator turns the JSON back into
the annotated type on replay, so a tool annotated ``-> Order`` returns an ``Order`` again,
not a dict.
"""

from __future__ import annotations

import functools
import inspect
import re
import typing
from collections.abc import Callable
from typing import Any

import orjson

from otel_replay._canonical import canonical_json

__all__ = ["encode", "encode_exact", "restore", "restorer", "return_hint"]

# repr() of an object without a JSON form often holds its address, which changes every run.
_ADDRESS = re.compile(r"\s+at 0x[0-9a-fA-F]+")


def encode(value: Any) -> bytes:
    """``value`` as canonical JSON bytes. A value with no JSON form (a client, a lock) is
    recorded as its ``repr()`` without memory addresses: stable across runs, but replay gives
    back that text, not the object."""
    return canonical_json(_jsonable(value))


def encode_exact(value: Any) -> bytes:
    """``value`` as JSON bytes in its own key order, floats kept floats (see :func:`encode`
    for values with no JSON form)."""
    try:
        return orjson.dumps(_jsonable(value), option=orjson.OPT_NON_STR_KEYS)
    except TypeError:  # nested deeper than JSON is written here (orjson's 254 levels)
        return orjson.dumps(_text(value))


def _jsonable(value: Any) -> Any:
    from pydantic_core import to_jsonable_python  # noqa: PLC0415 - first use only

    try:
        jsonable = to_jsonable_python(value, fallback=_text, inf_nan_mode="null")
    except Exception:  # bytes that are not UTF-8, or a failing serialiser
        try:
            jsonable = to_jsonable_python(
                value, fallback=_text, inf_nan_mode="null", bytes_mode="base64"
            )
        except Exception:  # nothing but its text is left
            jsonable = _text(value)
    return jsonable


def _text(value: Any) -> str:
    """``repr(value)`` without addresses; when even that fails (a ``__repr__`` that raises, a
    structure too deep to print), the value's type: recording never raises into the
    application over a value it cannot write down."""
    try:
        return _ADDRESS.sub("", repr(value))
    except Exception:
        kind = type(value)
        return f"<{kind.__module__}.{kind.__qualname__} object>"


def restore(value: Any, annotation: Any) -> Any:
    """The JSON ``value`` as an instance of ``annotation`` (a type hint) where it validates as
    one; ``value`` itself when there is no annotation or it does not fit."""
    if annotation is None or annotation is Any:
        return value
    adapter = _adapter(annotation)
    if adapter is None:
        return value
    try:
        return adapter.validate_python(value)
    except Exception:  # a value that does not fit is served as recorded
        return value


def return_hint(function: Any) -> Any:
    """The return annotation of ``function`` (through its wrappers), or None when it has
    none, its hints do not resolve or it is no function: its results are then served as
    JSON."""
    if function is None:
        return None
    try:
        return typing.get_type_hints(inspect.unwrap(function)).get("return")
    except Exception:
        return None


def restorer(function: Any) -> Callable[[bytes], Any]:
    """What turns a recorded result of ``function`` (JSON bytes) back into its return type."""
    returns = return_hint(function)

    def restored(body: bytes) -> Any:
        return restore(orjson.loads(body), returns)

    return restored


def _adapter(annotation: Any) -> Any:
    try:
        return _cached_adapter(annotation)
    except TypeError:  # unhashable annotation
        return _make_adapter(annotation)


@functools.lru_cache(maxsize=512)
def _cached_adapter(annotation: Any) -> Any:
    return _make_adapter(annotation)


def _make_adapter(annotation: Any) -> Any:
    from pydantic import ConfigDict, TypeAdapter  # noqa: PLC0415 - first use only

    try:
        return TypeAdapter(annotation, config=ConfigDict(arbitrary_types_allowed=True))
    except Exception:  # pydantic cannot build this type with the config
        try:
            return TypeAdapter(annotation)
        except Exception:  # nor without: the JSON is served as it is
            return None
