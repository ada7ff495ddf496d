"""Pack and recipe encoding: round trips, and damage always detected."""

from __future__ import annotations

import random

import pytest

from otel_replay.store._pack import (
    FOOTER,
    KIND_RAW,
    KIND_RECIPE,
    KIND_RECORD,
    KIND_SEGMENT,
    RECIPE_CHECK,
    PackError,
    compress_frames,
    decode_recipe,
    decode_varint,
    decompress_frame,
    encode_pack,
    encode_recipe,
    encode_varint,
    frame_entries,
    parse_footer,
    parse_trailer,
)


def _read(data: bytes, oid: int) -> tuple[int, bytes]:
    size, crc = parse_footer(data[-FOOTER.size :])
    index = parse_trailer(data[-FOOTER.size - size : -FOOTER.size], crc, len(data))
    where = index.locate(oid)
    frame = decompress_frame(
        data[where.frame_start : where.frame_end], index.frames[where.frame][2]
    )
    return where.kind, frame[where.offset : where.offset + where.length]


def test_varints_round_trip() -> None:
    for value in [0, 1, 127, 128, 300, 2**31, 2**63 - 1]:
        out = bytearray()
        encode_varint(value, out)
        assert decode_varint(bytes(out), 0) == (value, len(out))
    with pytest.raises(PackError):
        decode_varint(b"\x80\x80", 0)


def test_recipes_round_trip_and_cost_a_byte_per_consecutive_reference() -> None:
    rng = random.Random(1)
    for _ in range(200):
        parts: list[bytes | int] = []
        for _ in range(rng.randrange(0, 30)):
            parts.append(
                rng.randbytes(rng.randrange(0, 40)) if rng.random() < 0.4 else rng.randrange(10**6)
            )
        digest = rng.randbytes(32)
        assert decode_recipe(encode_recipe(parts, digest)) == (digest[:RECIPE_CHECK], parts)
    assert len(encode_recipe(list(range(100, 200)), bytes(32))) < 110 + RECIPE_CHECK


def test_damaged_recipes_are_refused() -> None:
    data = encode_recipe([b"abc", 5, b"de"], bytes(range(32)))
    for bad in (data[:-1], data + b"x", b"\x01\x0a", data[:3]):
        with pytest.raises(PackError):
            decode_recipe(bad)


def test_frames_close_before_the_limit() -> None:
    assert frame_entries([10, 10, 10], limit=25) == [2, 1]
    assert frame_entries([100, 1], limit=25) == [1, 1]
    assert frame_entries([]) == []


def test_pack_round_trip_across_frames() -> None:
    rng = random.Random(2)
    entries = [
        (
            rng.choice([KIND_RAW, KIND_RECIPE, KIND_RECORD, KIND_SEGMENT]),
            rng.randbytes(rng.randrange(0, 400_000)),
        )
        for _ in range(12)
    ]
    data = encode_pack(7, entries, level=1)
    for offset, entry in enumerate(entries):
        assert _read(data, 7 + offset) == entry


def test_every_flipped_byte_is_detected() -> None:
    entries = [(KIND_RAW, b"hello world " * 50), (KIND_RECORD, b'{"v":1}')]
    data = encode_pack(0, entries, level=3)
    for position in range(len(data)):
        damaged = bytearray(data)
        damaged[position] ^= 0x41
        try:
            got = [_read(bytes(damaged), oid) for oid in (0, 1)]
        except (PackError, KeyError):
            continue
        pytest.fail(f"flipping byte {position} went unnoticed: {got!r}")


def test_a_frame_stores_its_objects_grouped_by_kind() -> None:
    entries = [
        (KIND_RECORD, b"record-0;"),
        (KIND_RAW, b"response-1;"),
        (KIND_SEGMENT, b"message-2;"),
        (KIND_RECIPE, b"recipe-3;"),
        (KIND_SEGMENT, b"message-4;"),
        (KIND_RAW, b"response-5;"),
    ]
    data = encode_pack(0, entries, level=3)
    size, _ = parse_footer(data[-FOOTER.size :])
    frame = decompress_frame(data[: len(data) - FOOTER.size - size], 60)
    assert frame == b"message-2;message-4;response-1;response-5;recipe-3;record-0;"
    assert [_read(data, oid) for oid in range(len(entries))] == entries


def test_frames_compressed_in_one_call_equal_frames_compressed_one_by_one() -> None:
    rng = random.Random(3)
    frames = [rng.randbytes(rng.randrange(0, 5000)) * 3 for _ in range(6)]
    together = compress_frames(frames, 3)
    assert together == [compress_frames([frame], 3)[0] for frame in frames]
    assert [
        decompress_frame(f, len(raw)) for f, raw in zip(together, frames, strict=True)
    ] == frames
