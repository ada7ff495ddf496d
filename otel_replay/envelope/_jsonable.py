"""Python values to JSON and back for tool and value steps: canonical arguments, exact results
and the *shape* that rebuilds a result's Python types."""

from __future__ import annotations

import base64
import contextlib
import contextvars
import dataclasses
import datetime as dt
import decimal
import enum
import functools
import inspect
import itertools
import json
import math
import pathlib
import re
import sys
import typing
import uuid
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import orjson

from otel_replay._canonical import canonical_json, parse_json, surrogate_safe_json

__all__ = [
    "SHAPE_PARAMETER",
    "Unfit",
    "content_type_shape",
    "encode",
    "encode_exact",
    "first_line",
    "json_kind",
    "loaded_class",
    "loaded_dotted_class",
    "module_class",
    "parse_exact",
    "restore",
    "restore_body",
    "restorer",
    "restoring",
    "return_hint",
    "shape_content_type",
    "take_shape",
]

# repr() of an object without a JSON form often holds its address, which changes every run.
_ADDRESS = re.compile(r"\s+at 0x[0-9a-fA-F]+")


def encode(value: Any) -> bytes:
    """``value`` as canonical JSON bytes. A value with no JSON form (a client, a lock) is
    recorded as its ``repr()`` without memory addresses: stable across runs, but replay gives
    back that text, not the object."""
    return canonical_json(_jsonable(value))


SHAPE_PARAMETER = "otel-replay-shape"
"""The content-type parameter a step's exact result carries its shape in."""
_SHAPE_PREFIX = f"application/json; {SHAPE_PARAMETER}="
_MAX_SHAPE = 64 * 1024  # a bigger shape is not kept: the annotation decides on replay
_MAX_NODES = 100_000  # values walked for a shape; past that, none

# The shape of the body encode_exact wrote last in this context, and, under replay, of the
# recorded body being restored: (body, shape), matched by identity, so the steps in between
# (a contract check, a framework's own encoding) pass plain bytes and a body something made
# over never takes another's shape.
_written: contextvars.ContextVar[tuple[bytes, str] | None] = contextvars.ContextVar(
    "otel_replay_written_shape", default=None
)
_restoring: contextvars.ContextVar[tuple[bytes, str] | None] = contextvars.ContextVar(
    "otel_replay_restoring_shape", default=None
)


def encode_exact(value: Any) -> bytes:
    """``value`` as JSON bytes in its own key order, floats kept floats, non-finite ones as
    text (see :func:`encode` for values with no JSON form). When a JSON parse would not give
    the value back, its shape is kept for :func:`take_shape`."""
    from pydantic_core import to_json  # noqa: PLC0415 - first use only

    _written.set(None)

    bytes_mode = "utf8"
    try:
        body = to_json(value, fallback=_text, inf_nan_mode="strings")
    except Exception:  # bytes that are not UTF-8, or a failing serialiser
        bytes_mode = "base64"
        try:
            body = to_json(value, fallback=_text, inf_nan_mode="strings", bytes_mode="base64")
        except Exception:  # a lone surrogate, nested too deep, circular, or a serialiser
            try:
                body = surrogate_safe_json(_jsonable(value)).encode()
            except Exception:  # nothing but its text is left
                return orjson.dumps(_text(value))
    try:
        shape = _Shaper(bytes_mode).of(value)
    except (_TooBig, RecursionError):
        return body
    if shape is not None:
        text = orjson.dumps(shape).decode()
        if len(text) <= _MAX_SHAPE:
            _written.set((body, text))
    return body


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


def take_shape(body: bytes) -> str | None:
    """The shape of ``body`` if :func:`encode_exact` wrote it last in this context (once)."""
    written = _written.get()
    if written is None or written[0] is not body:
        return None
    _written.set(None)
    return written[1]


def shape_content_type(shape: str) -> str:
    """The content type of an exact result with ``shape``."""
    return _SHAPE_PREFIX + shape


def content_type_shape(content_type: str | None) -> str | None:
    """The shape a content type from :func:`shape_content_type` carries, or None."""
    if content_type is None or not content_type.startswith(_SHAPE_PREFIX):
        return None
    return content_type[len(_SHAPE_PREFIX) :]


@contextlib.contextmanager
def restoring(body: bytes, shape: str | None) -> Iterator[None]:
    """While a recorded ``body`` is turned back into a value: :func:`restore_body` of that
    very object rebuilds it with ``shape``."""
    if shape is None:
        yield
        return
    token = _restoring.set((body, shape))
    try:
        yield
    finally:
        _restoring.reset(token)


class _TooBig(Exception):
    """The value has more than :data:`_MAX_NODES` nodes: it gets no shape."""


_AS_IS = frozenset({str, int, bool, type(None)})
_PLAIN = _AS_IS | {float}
_TREE = _PLAIN | {dict, list}
_DICT, _LIST, _STR = frozenset({dict}), frozenset({list}), frozenset({str})
_VALUE_TYPES: frozenset[type] = frozenset(
    {
        dt.datetime,
        dt.date,
        dt.time,
        dt.timedelta,
        uuid.UUID,
        decimal.Decimal,
        pathlib.PurePath,
        pathlib.PurePosixPath,
        pathlib.PureWindowsPath,
        pathlib.Path,
        pathlib.PosixPath,
        pathlib.WindowsPath,
    }
)
_CONTAINERS: dict[type, str] = {tuple: "tuple", set: "set", frozenset: "frozenset", list: "list"}


class _Shaper:
    """Walks a value for its shape, as pydantic's serialiser wrote it (``bytes_mode``).

    A shape is JSON: ``null`` (the JSON as it is), a leaf name (``"float"``: ``"NaN"``,
    ``"Infinity"`` or ``"-Infinity"`` text; ``"bytes"``: UTF-8 text; ``"bytes64"``: base64 text;
    ``"module:Qualified"``: a class, rebuilt by validating the JSON as it), or ``[container,
    items]`` for list, tuple, set, frozenset and dict, ``items`` being ``{"*": shape}`` (every
    element) or ``[[position, shape], ...]`` (dict values in key order); a dict's non-string keys
    follow as a third item, in the same form. Positions, never keys: a shape holds no data.
    """

    def __init__(self, bytes_mode: str) -> None:
        self._bytes = "bytes64" if bytes_mode == "base64" else "bytes"
        self._nodes = 0

    def of(self, value: Any) -> Any:
        """``value``'s shape; None when a JSON parse gives it back as it is."""
        if type(value) in (dict, list) and _plain_tree(value):
            return None  # most results: told apart in C, a level at a time
        return self.shape(value)

    def shape(self, value: Any) -> Any:
        self._count(1)
        kind = type(value)
        if kind in _AS_IS:
            return None
        if kind is float:
            return None if math.isfinite(value) else "float"
        if kind is dict:
            return self._dict(value)
        if kind is list:
            items = self._items(value)
            return ["list", items] if items else None
        if kind is bytes:
            return self._bytes
        if _rebuildable(kind):
            return f"{kind.__module__}:{kind.__qualname__}"
        if isinstance(value, dict):
            return self._dict(value)
        for cls, container in _CONTAINERS.items():
            if isinstance(value, cls):
                return [container, self._items(value)]
        return None  # written as pydantic writes it (or as its text): served as JSON

    def _items(self, values: Any) -> Any:
        values = values if type(values) is list else list(values)
        kinds = set(map(type, values))
        if kinds <= _PLAIN:  # most containers: one pass in C, nothing to walk
            self._count(len(values))
            if float not in kinds or _finite(values):
                return []
            shapes = [None if type(v) is not float or math.isfinite(v) else "float" for v in values]
        else:
            shapes = [None if type(v) in _AS_IS else self.shape(v) for v in values]
        if not shapes:
            return []
        first = shapes[0]
        if first is not None and len(shapes) > 1 and all(s == first for s in shapes):
            return {"*": first}
        return [[at, s] for at, s in enumerate(shapes) if s is not None]

    def _count(self, nodes: int) -> None:
        self._nodes += nodes
        if self._nodes > _MAX_NODES:
            raise _TooBig

    def _dict(self, value: dict[Any, Any]) -> Any:
        items = self._items(value.values())
        keys = []
        if set(map(type, value)) != {str}:
            keys = [[at, _key_shape(key)] for at, key in enumerate(value) if type(key) is not str]
            keys = [pair for pair in keys if pair[1] is not None]
        if keys:
            return ["dict", items, keys]
        return ["dict", items] if items else None


def _plain_tree(value: dict[Any, Any] | list[Any]) -> bool:
    """True when ``value`` holds nothing but dicts with string keys, lists and plain scalars
    (finite floats): its JSON gives it back as it is. Raises _TooBig past the node budget."""
    level: list[Any] = [value]
    nodes = 0
    while True:
        nodes += len(level)
        if nodes > _MAX_NODES:
            raise _TooBig
        kinds = set(map(type, level))
        if kinds <= _PLAIN:
            return float not in kinds or _finite(level)
        if not kinds <= _TREE or (float in kinds and not _finite(level)):
            return False
        if kinds == _DICT:
            dicts, lists = level, []
        elif kinds == _LIST:
            dicts, lists = [], level
        else:
            dicts, lists = list(_only(level, dict)), list(_only(level, list))
        if dicts and not set(map(type, itertools.chain.from_iterable(dicts))) <= _STR:
            return False
        level = [
            *itertools.chain.from_iterable(map(dict.values, dicts)),
            *itertools.chain.from_iterable(lists),
        ]


def _finite(values: list[Any]) -> bool:
    """True when every float among ``values`` is finite (False may be wrong: then walk)."""
    try:
        return math.isfinite(math.fsum(_only(values, float)))
    except (OverflowError, ValueError):  # inf and -inf, or finite floats whose sum is not
        return False


def _only(values: list[Any], kind: type) -> Iterator[Any]:
    """The members of ``values`` of type ``kind`` (one of :data:`_TREE`), selected in C."""
    return itertools.compress(values, map(isinstance, values, itertools.repeat(kind)))


def _key_shape(key: Any) -> str | None:
    kind = type(key)
    if kind is int or kind is float:
        return kind.__name__
    return f"{kind.__module__}:{kind.__qualname__}" if _rebuildable(kind) else None


def _rebuildable(cls: type) -> bool:
    """A value type replay may rebuild from its JSON: the standard library's (datetime, uuid,
    decimal, pathlib), pydantic models, dataclasses, enums and named tuples."""
    if cls in _VALUE_TYPES or issubclass(cls, enum.Enum):
        return True
    if dataclasses.is_dataclass(cls):
        return True
    if issubclass(cls, tuple) and inspect.getattr_static(cls, "_fields", None) is not None:
        return True
    pydantic = sys.modules.get("pydantic")
    if pydantic is None or not issubclass(cls, pydantic.BaseModel):
        return False
    # Settings models fill their fields from the environment and files when built.
    settings = sys.modules.get("pydantic_settings")
    return settings is None or not issubclass(cls, settings.BaseSettings)


class _Unshapeable(Exception):
    """The JSON does not fit its shape, or a class in it is not to be found."""


def _shaped(value: Any, shape: Any) -> Any:
    if shape is None:
        return value
    if isinstance(shape, str):
        return _leaf(value, shape)
    if not isinstance(shape, list) or len(shape) not in (2, 3):
        raise _Unshapeable
    kind, items = shape[0], shape[1]
    if kind == "dict":
        if not isinstance(value, dict):
            raise _Unshapeable
        keys = list(value)
        values = _each(list(value.values()), items)
        if len(shape) == 3:
            keys = _each(keys, shape[2])
        return dict(zip(keys, values, strict=True))
    if not isinstance(value, list):
        raise _Unshapeable
    made = _each(value, items)
    if kind == "list":
        return made
    if kind == "tuple":
        return tuple(made)
    if kind == "set":
        return set(made)
    if kind == "frozenset":
        return frozenset(made)
    raise _Unshapeable


def _each(values: list[Any], items: Any) -> list[Any]:
    if isinstance(items, dict):
        every = items.get("*")
        return [_shaped(item, every) for item in values]
    if not isinstance(items, list):
        raise _Unshapeable
    values = list(values)
    last = -1
    for pair in items:
        if not isinstance(pair, list) or len(pair) != 2 or type(pair[0]) is not int:
            raise _Unshapeable
        at, shape = pair
        # Rising positions, as written: a shape naming one position again and again would
        # rebuild it as often, a recording whose replay never ends.
        if not last < at < len(values):
            raise _Unshapeable
        last = at
        values[at] = _shaped(values[at], shape)
    return values


_SCALARS: dict[str, Callable[[Any], Any]] = {
    "float": float,  # "NaN", "Infinity", "-Infinity" (and a number, left as it is)
    "int": int,  # a dict key
    "bytes": lambda text: text.encode(),
    "bytes64": lambda text: base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)),
}


def _leaf(value: Any, name: str) -> Any:
    scalar = _SCALARS.get(name)
    if scalar is not None:
        try:
            return scalar(value)
        except Exception as exc:
            raise _Unshapeable from exc
    cls = _loaded_class(name)
    adapter = _adapter(cls)
    if adapter is None:
        raise _Unshapeable
    try:
        return adapter.validate_python(value, by_alias=True, by_name=True)
    except TypeError:  # a pydantic without by_name
        pass
    except Exception as exc:
        raise _Unshapeable from exc
    try:
        return adapter.validate_python(value)
    except Exception as exc:
        raise _Unshapeable from exc


def _loaded_class(name: str) -> type:
    """The class ``module:Qualified`` names, from a module already imported (never one a
    recording names into being, see ``loaded_class``), when it is one replay may rebuild."""
    module_name, _, qualname = name.partition(":")
    owner = loaded_class(module_name, qualname)
    if owner is None or not _rebuildable(owner):
        raise _Unshapeable
    return owner


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


def restore_body(body: bytes, annotation: Any = None) -> Any:
    """The value an exact result ``body`` was written from: rebuilt from its shape when it
    is being restored with one (:func:`restoring`) that fits, else the parsed JSON restored
    to ``annotation`` as :func:`restore` does. Raises ``json.JSONDecodeError`` when ``body`` is
    not JSON (see :func:`parse_exact`)."""
    value = parse_exact(body)
    served = _restoring.get()
    if served is not None and served[0] is body and len(served[1]) <= _MAX_SHAPE:
        try:
            return _shaped(value, parse_json(served[1]))
        except (_Unshapeable, ValueError, TypeError, RecursionError):
            # A shape that does not fit (set members or keys that cannot be hashed too):
            # what fits the annotation, as a recording without a shape.
            pass
    return restore(value, annotation)


# A number of 20 digits or more outside a string (a false match inside one costs only time).
_BIG_INT = re.compile(rb"(?:^|[\[:,\s-])\d{20,}(?=$|[\]},\s])")


def parse_exact(body: bytes) -> Any:
    """The JSON ``body`` parsed with its integers exact: orjson reads one beyond 64 bits as a
    float (``2**70 + 1`` came back as ``2**70``, a float), so a body holding such a number is
    read by the standard library, whose limit on digits (4,300) keeps a huge one from costing
    quadratic time. Raises ``json.JSONDecodeError`` (orjson's is one) when ``body`` is not
    JSON, is nested too deeply (past 1,024 levels) or holds a number that huge."""
    if _BIG_INT.search(body) is None:
        return parse_json(body)
    try:
        return json.loads(body)
    except json.JSONDecodeError:
        raise
    except (ValueError, RecursionError) as exc:  # too many digits, too deep, not UTF-8
        raise json.JSONDecodeError(str(exc)[:200] or type(exc).__name__, "", 0) from None


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
        return restore_body(body, returns)

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


_MAX_LINE = 200


class Unfit(ValueError):
    """Raised by a step's ``restore``: the recorded value is not what the call must give back;
    the message says what is wrong with it (``the recorded session items are not a list``)."""


def json_kind(value: Any) -> str:
    """What a parsed JSON value is, for an :class:`Unfit` message (``an array``), never the
    value itself: it may be huge."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (its type's name when it has none), cut to 200
    characters: it may quote the recorded value."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= _MAX_LINE else text[: _MAX_LINE - 1] + "…"


_MISSING = object()
_MAX_NAME = 1024


def loaded_class(module_name: str, qualname: str) -> type | None:
    """The class ``module_name``:``qualname`` when that module is already imported and the
    class is defined there under that name; None otherwise."""
    owner: object = sys.modules.get(module_name, _MISSING)
    if owner is _MISSING or not qualname:
        return None
    for part in qualname.split("."):
        owner = inspect.getattr_static(owner, part, _MISSING)
        if owner is _MISSING:
            return None
    if not isinstance(owner, type):
        return None
    if owner.__module__ != module_name or owner.__qualname__ != qualname:
        return None
    return owner


def loaded_dotted_class(name: str) -> type | None:
    """The class a dotted ``module.Qualified`` name gives (a builtin's bare name means
    ``builtins``), trying the longest module prefix first; None as :func:`loaded_class`."""
    if len(name) > _MAX_NAME:  # no class is named so: spare the prefixes' quadratic search
        return None
    parts = name.split(".")
    if len(parts) == 1:
        return loaded_class("builtins", name)
    for cut in range(len(parts) - 1, 0, -1):
        found = loaded_class(".".join(parts[:cut]), ".".join(parts[cut:]))
        if found is not None:
            return found
    return None


def module_class(module: ModuleType, name: str, base: type) -> type | None:
    """The subclass of ``base`` that ``module`` holds as ``name`` (a transport error a
    recording names, say ``ReadError`` of httpx); None otherwise. Looked up statically: a
    module's lazy ``__getattr__`` (httpx2's ``main``, aiohttp's gunicorn workers) imports."""
    found = inspect.getattr_static(module, name, None) if name else None
    return found if isinstance(found, type) and issubclass(found, base) else None
