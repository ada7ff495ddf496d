"""Remote stores: the packs gc found unreferenced, and since when (the ``condemned`` file),
so gc deletes in two passes where there is no lock."""

from __future__ import annotations

import json

from otel_replay.store._fs import Backend

__all__ = ["CONDEMNED_FILE", "read_condemned", "write_condemned"]

CONDEMNED_FILE = "condemned"


def read_condemned(backend: Backend) -> dict[str, float] | None:
    """Each condemned pack's name and the Unix time it was condemned; None when the file
    cannot be read (a writer then trusts no pack but its own)."""
    try:
        value = json.loads(backend.read(CONDEMNED_FILE))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return None
    packs = value.get("packs") if isinstance(value, dict) else None
    if not isinstance(packs, dict):
        return None
    return {str(name): float(when) for name, when in packs.items() if isinstance(when, int | float)}


def write_condemned(backend: Backend, packs: dict[str, float]) -> None:
    """Replace the list with ``packs`` (name: Unix time condemned)."""
    data = json.dumps({"packs": dict(sorted(packs.items()))}, indent=0).encode() + b"\n"
    backend.publish(CONDEMNED_FILE, data, replace=True)
