"""The class a recording names, found among what the process already loaded.

A recording (a store, an OTLP file) is input like any other: the class names in it (a
result's shape, a step's ``error.type``) never import a module, never reach a module's lazy
``__getattr__`` and never run a descriptor or metaclass hook on the way. Only a class whose
own ``__module__`` and ``__qualname__`` are the name it was found by is returned, so an alias
or an attribute path through other objects names nothing.
"""

from __future__ import annotations

import inspect
import sys
from types import ModuleType

__all__ = ["loaded_class", "loaded_dotted_class", "module_class"]

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
