"""The application's own ``uuid.uuid4()`` and ``uuid.uuid1()`` as value steps, with no code
change (:func:`hold_uuids`); a package's draws stay real."""

from __future__ import annotations

import functools
import os
import re
import site
import sys
import sysconfig
import threading
import uuid as uuid_module
from collections.abc import Callable
from types import FrameType
from typing import Any

from otel_replay._canonical import canonical_json, parse_json
from otel_replay.envelope._jsonable import Unfit, encode_exact, json_kind
from otel_replay.envelope._steps import named_call, perform, recorded_at

__all__ = [
    "REAL_UUID4",
    "application_file",
    "application_frame",
    "application_module",
    "draw",
    "hold_uuids",
    "release_uuids",
]

REAL_UUID4 = uuid_module.uuid4
REAL_UUID1 = uuid_module.uuid1
_NO_ARGUMENTS = b"{}"

_lock = threading.Lock()
_holders = 0
# Where a real function was replaced by ours: (a module's names, the name, the real one).
_replaced: list[tuple[dict[str, Any], str, Any]] = []
# The loaded modules at the last hold, and the application's namespaces among them.
_walked: list[Any] = []
_found: list[dict[str, Any]] = []


def draw(
    name: str, live: Callable[[], uuid_module.UUID], arguments: bytes = _NO_ARGUMENTS
) -> uuid_module.UUID:
    """The value step ``name``: ``live()`` recorded, or the recorded uuid under replay."""
    return perform(
        named_call("value", name, arguments, instant=True),
        live,
        lambda value: encode_exact(str(value)),
        _recorded_uuid,
    )


# uuid.uuid4 and uuid.uuid1 while held (their names, signatures and docstrings are the real
# ones'). The caller is judged on every call: keep the way to the real function short.
def uuid4() -> uuid_module.UUID:
    if _holders and _from_application() and recorded_at("value", "uuid.uuid4"):
        return draw("uuid.uuid4", REAL_UUID4)
    return REAL_UUID4()


def uuid1(node: int | None = None, clock_seq: int | None = None) -> uuid_module.UUID:
    if _holders and _from_application() and recorded_at("value", "uuid.uuid1"):
        given = {"node": node, "clock_seq": clock_seq}
        arguments = canonical_json({k: v for k, v in given.items() if v is not None})
        return draw("uuid.uuid1", lambda: REAL_UUID1(node, clock_seq), arguments)
    return REAL_UUID1(node, clock_seq)


def _from_application() -> bool:
    """Whether the code that called ``uuid4``/``uuid1`` is the application's."""
    try:
        caller = sys._getframe(2)
    except ValueError:  # called from C with no Python code below (an atexit callback)
        return False
    return application_frame(caller)


functools.update_wrapper(uuid4, REAL_UUID4)
functools.update_wrapper(uuid1, REAL_UUID1)
_OURS: dict[Callable[..., uuid_module.UUID], Callable[..., uuid_module.UUID]] = {
    REAL_UUID4: uuid4,
    REAL_UUID1: uuid1,
}


def hold_uuids() -> None:
    """Make the application's uuid draws steps, until as many :func:`release_uuids` calls."""
    global _holders  # noqa: PLW0603 - one set of replacements per process
    with _lock:
        _holders += 1
        if _holders > 1:
            return
        _replace(vars(uuid_module))
        for names in _application_namespaces():
            _replace(names)


def release_uuids() -> None:
    """Let go; the last holder to let go gives the real functions back where ours replaced
    them."""
    global _holders  # noqa: PLW0603 - one set of replacements per process
    with _lock:
        _holders = max(0, _holders - 1)
        if _holders:
            return
        for names, name, real in reversed(_replaced):
            if names.get(name) is _OURS[real]:
                names[name] = real
        _replaced.clear()


def _application_namespaces() -> list[dict[str, Any]]:
    """The namespaces of the application's loaded modules. Judging every loaded module is
    the costly part of a hold (thousands of them under a framework), so it is remembered:
    when no module was loaded or replaced since the last hold (compared in C), the last
    hold's answer stands."""
    global _walked, _found  # remembered for the next hold
    modules = list(sys.modules.values())
    try:
        unchanged = modules == _walked
    except Exception:  # an object standing in for a module compares as it likes
        unchanged = False
    if not unchanged:
        found = []
        for module in modules:
            try:
                names = vars(module)
            except TypeError:  # a stand-in object with no namespace: left alone
                continue
            if names is not vars(uuid_module) and application_module(names):
                found.append(names)
        _walked, _found = modules, found
    return _found


def _replace(names: dict[str, Any]) -> None:
    for name, value in list(names.items()):
        if value is REAL_UUID4 or value is REAL_UUID1:
            names[name] = _OURS[value]
            _replaced.append((names, name, value))


def _recorded_uuid(body: bytes) -> uuid_module.UUID:
    text = parse_json(body)
    try:
        return uuid_module.UUID(text)
    except (AttributeError, TypeError, ValueError):
        what = "a string that is not one" if isinstance(text, str) else json_kind(text)
        raise Unfit(f"the recorded uuid is not a UUID's text: {what}") from None


_INSTALLED = re.compile(r"[\\/](?:site|dist)-packages(?:[\\/]|$)")
_verdicts: dict[str, bool] = {}
_roots: tuple[str, ...] | None = None


def application_frame(frame: FrameType) -> bool:
    """Whether ``frame`` runs the application's code, not an installed package's or the
    standard library's (whose draws are real, never steps)."""
    while True:
        filename = frame.f_code.co_filename
        verdict = _verdicts.get(filename)
        if verdict is not None:
            return verdict
        if not filename.startswith("<"):
            return application_file(filename)
        if filename.startswith("<frozen "):
            return False
        module_file = frame.f_globals.get("__file__")
        if isinstance(module_file, str):
            return application_file(module_file)
        if frame.f_globals.get("__name__") == "__main__":
            return True  # python -c, the REPL, stdin
        caller = frame.f_back
        if caller is None:
            return True
        frame = caller


def application_module(names: dict[str, Any]) -> bool:
    """Whether the module whose namespace is ``names`` is the application's code
    (``__main__`` with no file included). Read from its namespace: a module's attribute
    lookup may be a lazy loader's, which imports."""
    filename = names.get("__file__")
    if isinstance(filename, str):
        return application_file(filename)
    return names.get("__name__") == "__main__"


def application_file(filename: str) -> bool:
    """Whether the source file ``filename`` is the application's code."""
    verdict = _verdicts.get(filename)
    if verdict is None:
        verdict = _verdicts[filename] = _judge(filename)
    return verdict


def _judge(filename: str) -> bool:
    # Most files are an installed package's, told by their path alone; the others are
    # resolved once (a venv reached through a symbolic link, a relative path).
    roots = _library_roots()
    if _INSTALLED.search(filename) or filename.startswith(roots):
        return False
    path = os.path.realpath(filename)
    return not (_INSTALLED.search(path) or path.startswith(roots) or _pip_installed(path))


def _pip_installed(path: str) -> bool:
    """Whether a directory above ``path`` holds a ``*.dist-info`` whose ``RECORD`` lists the
    top-level package (or module) ``path`` belongs to."""
    parts = path.split(os.sep)
    return any(
        parts[depth + 1] in _installed_tops(os.sep.join(parts[: depth + 1]) or os.sep)
        for depth in range(len(parts) - 1)
    )


_tops: dict[str, frozenset[str]] = {}


def _installed_tops(directory: str) -> frozenset[str]:
    """The first path parts of what the distributions installed into ``directory`` hold
    (``openai``, ``six.py``), read once from their ``RECORD``."""
    tops = _tops.get(directory)
    if tops is None:
        found: set[str] = set()
        try:
            with os.scandir(directory) as entries:
                infos = [e.path for e in entries if e.name.endswith(".dist-info")]
            for info in infos:
                with open(os.path.join(info, "RECORD"), encoding="utf-8") as record:
                    found.update(line.split("/", 1)[0].split(",", 1)[0] for line in record)
        except (OSError, UnicodeDecodeError):
            pass  # unreadable: nothing known installed here
        tops = _tops[directory] = frozenset(found)
    return tops


def _library_roots() -> tuple[str, ...]:
    """The directories whose files are not the application's, each ending in a separator,
    as given and resolved."""
    global _roots  # noqa: PLW0603 - computed once per process
    if _roots is None:
        paths = sysconfig.get_paths()
        dirs = {paths.get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")}
        dirs.add(os.path.dirname(os.__file__))
        dirs.update(site.getsitepackages() if hasattr(site, "getsitepackages") else ())
        dirs.add(site.getusersitepackages())
        dirs.add(os.path.dirname(os.path.dirname(__file__)))  # otel_replay
        found = {d for d in dirs if d} | {os.path.realpath(d) for d in dirs if d}
        _roots = tuple(os.path.join(d, "") for d in found)
    return _roots
