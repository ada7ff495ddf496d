"""Remote stores: the packs gc found unreferenced, and since when (the ``condemned`` file),
so gc deletes in two passes where there is no lock.

Times are the server's: a pack gc condemns is written with no time (``null``), meaning
"since this file was written", and the next gc reads the file's ``LastModified`` for it.
Each write holds a new random ``written`` tag, so two reads of the same bytes mean that no
gc wrote the list in between."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass

from otel_replay.store._fs import Backend

__all__ = ["CONDEMNED_FILE", "Condemned", "read_condemned", "write_condemned"]

CONDEMNED_FILE = "condemned"


@dataclass(frozen=True, slots=True)
class Condemned:
    """The list as read: each pack's name and when it was condemned (Unix seconds, the
    server's clock; 0 for those the file's last write condemned, unless read ``stamped``),
    and the file's bytes (``b""`` when there is none)."""

    packs: dict[str, float]
    version: bytes


def read_condemned(backend: Backend, *, stamped: bool = False) -> Condemned | None:
    """The list; None when the file cannot be read (a writer then trusts no pack)."""
    try:
        data = backend.read(CONDEMNED_FILE)
        value = json.loads(data)
        written = backend.stamp(CONDEMNED_FILE) if stamped else 0.0
    except FileNotFoundError:
        return Condemned({}, b"")
    except (OSError, ValueError):
        return None
    packs = value.get("packs") if isinstance(value, dict) else None
    if not isinstance(packs, dict):
        return None
    when = {
        str(name): written if since is None else float(since)
        for name, since in packs.items()
        if since is None or isinstance(since, int | float)
    }
    return Condemned(when, data)


def write_condemned(backend: Backend, packs: dict[str, float | None]) -> None:
    """Replace the list with ``packs`` (name: when condemned; None: by this write)."""
    value = {"packs": dict(sorted(packs.items())), "written": secrets.token_hex(16)}
    backend.publish(CONDEMNED_FILE, json.dumps(value, indent=0).encode() + b"\n", replace=True)
