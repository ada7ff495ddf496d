"""A module no test imports: recordings naming its classes must not bring it in."""

from __future__ import annotations

import dataclasses


class Boom(Exception):
    """An exception a hostile recording names as a step's error type."""


@dataclasses.dataclass
class Thing:
    """A value type a hostile recording names as a result's shape."""

    name: str
