"""Whether a call comes from the application's own code or from an installed package.

A uuid the application puts in a prompt is a step of its run; the same call made by a
framework for its own telemetry (a run id, an SDK's idempotency key) is not, or the run
would have steps that differ from one execution to the next. Code is the application's unless
its file lies in the standard library, in an installed package (under any ``site-packages``
or ``dist-packages`` directory, the interpreter's purelib and platlib, the user site, or any
directory that pip installed it into, ``pip install --target``: a ``*.dist-info`` beside it
whose ``RECORD`` lists it), or in otel-replay itself. So a script, ``python -m`` of a
package in the working tree, a package installed in editable mode (its files stay in the
tree), tests and notebook cells (ipykernel gives each a file of its own) are the
application's; a package installed normally is not, even the application's own.

Code with no file of its own (``python -c``, the REPL, ``exec``: ``<string>``) is judged by
the module it runs in (its globals' ``__file__``; ``__main__`` without one is the
application's), else by its caller; ``<frozen …>`` code is the standard library's. Verdicts
are kept per file, so judging a frame costs a dict lookup after a file's first time.
"""

from __future__ import annotations

import os
import re
import site
import sysconfig
from types import FrameType
from typing import Any

__all__ = ["application_file", "application_frame", "application_module"]

_INSTALLED = re.compile(r"[\\/](?:site|dist)-packages(?:[\\/]|$)")
_verdicts: dict[str, bool] = {}
_roots: tuple[str, ...] | None = None


def application_frame(frame: FrameType) -> bool:
    """Whether ``frame`` runs the application's code (see the module's docstring)."""
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
