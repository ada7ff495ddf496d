"""Remote stores: the packs gc found unreferenced, and since when (the ``condemned`` file).

A remote store has no lock that a flush and gc could share, so gc deletes in two passes. A
pack that no live run references (and that is older than gc's grace period) is *condemned*:
listed in ``condemned`` with the time. A later gc deletes it once it has been condemned for
the grace period and, marking again right before, still finds nothing referencing it; a pack
referenced again meanwhile leaves the list.

A machine that records never reuses an object whose pack is condemned or gone: its flush
stores the object again (``_write``). So an object is reused only from a pack that was not
condemned when the flush looked, and that flush publishes its record long before the grace
period ends: the gc that could delete the pack sees the record first and keeps it.
"""

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
