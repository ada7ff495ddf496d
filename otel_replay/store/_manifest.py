"""Manifests: a large body as literal bytes and references to chunks. Reading one needs
only this module: a reader of the store does not load what splits and stores bodies
(``_objects``).

A manifest is a sequence of parts, each a tag byte then its content: :data:`LITERAL`, a
varint length and that many bytes; or :data:`REF`, a chunk's 32-byte sha256 digest."""

from __future__ import annotations

__all__ = ["LITERAL", "REF", "ManifestError", "decode_manifest", "manifest_refs"]

LITERAL = 0
REF = 1


class ManifestError(ValueError):
    """A manifest's bytes do not have the manifest layout."""


def decode_manifest(data: bytes) -> list[bytes | tuple[bytes]]:
    """The parts of a manifest (the layout is in the module docstring): literal bytes, or
    1-tuples holding a chunk's digest; ManifestError when malformed."""
    parts: list[bytes | tuple[bytes]] = []
    pos = 0
    size = len(data)
    while pos < size:
        tag = data[pos]
        pos += 1
        if tag == REF:
            if pos + 32 > size:
                raise ManifestError("a reference is cut short")
            parts.append((data[pos : pos + 32],))
            pos += 32
        elif tag == LITERAL:
            length = shift = 0
            while True:
                if pos >= size or shift > 35:
                    raise ManifestError("a literal's length is cut short")
                byte = data[pos]
                pos += 1
                length |= (byte & 0x7F) << shift
                shift += 7
                if not byte & 0x80:
                    break
            if pos + length > size:
                raise ManifestError("a literal is cut short")
            parts.append(data[pos : pos + length])
            pos += length
        else:
            raise ManifestError(f"unknown part tag {tag}")
    return parts


def manifest_refs(data: bytes) -> list[bytes]:
    """The chunk digests a manifest references."""
    return [part[0] for part in decode_manifest(data) if isinstance(part, tuple)]
