"""The body splitter: exact byte ranges of message and tool elements, whatever the input."""

from __future__ import annotations

import json
import random

import pytest

from otel_replay.store._segments import MIN_SEGMENT, split
from tests.store._data import chat_bodies


def _check_partition(body: bytes, ranges: list[tuple[int, int]]) -> None:
    previous = 0
    for start, end in ranges:
        assert previous <= start < end <= len(body)
        assert end - start >= MIN_SEGMENT
        previous = end


def _random_json(rng: random.Random, depth: int = 0) -> object:
    pick = rng.randrange(8 if depth < 4 else 4)
    if pick == 0:
        return rng.choice([True, False, None, 0, -1.5e-7, 12345678901234])
    if pick in (1, 2, 3):
        alphabet = 'ab "\\/\n\t\u00e9\u4e2d\U0001f600{}[],:'
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 300)))
    if pick in (4, 5):
        return [_random_json(rng, depth + 1) for _ in range(rng.randrange(0, 6))]
    return {f'k{i}"{i}': _random_json(rng, depth + 1) for i in range(rng.randrange(0, 5))}


def _bodies(count: int) -> list[bytes]:
    rng = random.Random(42)
    out = []
    for n in range(count):
        messages = [_random_json(rng) for _ in range(rng.randrange(0, 8))]
        value = {"model": "m", "messages": messages, "tools": [_random_json(rng)], "x": [1, 2]}
        text = json.dumps(value, ensure_ascii=n % 2 == 0, indent=None if n % 3 else 2)
        out.append(text.encode())
        out.append(text.encode()[: rng.randrange(len(text) + 1)])  # truncated: invalid JSON
        out.append(json.dumps(messages).encode())  # a top-level array
    out.append(bytes(range(256)) * 8)
    out.append(b"")
    out.append(b'{"messages": [' + b'"' + b'\\"' * 5000 + b'"' + b"]}")
    return out


def test_ranges_partition_every_body() -> None:
    for body in _bodies(300):
        _check_partition(body, split(body))


def test_message_elements_are_found_exactly() -> None:
    for request, _ in chat_bodies(12):
        ranges = split(request)
        value = json.loads(request)
        elements = [*value["messages"], *value["tools"]]
        found = [json.loads(request[start:end]) for start, end in ranges]
        assert found == [e for e in elements if len(json.dumps(e, separators=(",", ":"))) >= 64]


def test_pretty_printed_and_unicode_bodies_split_at_the_same_elements() -> None:
    value = {
        "input": [{"role": "user", "content": "caf\u00e9 \U0001f600 " * 20}] * 3,
        "model": "x",
    }
    for text in (json.dumps(value, indent=2), json.dumps(value, ensure_ascii=False)):
        body = text.encode()
        ranges = split(body)
        assert [json.loads(body[s:e]) for s, e in ranges] == value["input"]


@pytest.mark.parametrize(
    "body",
    [
        b"plain text " * 100,
        b"\x00\xff" * 400,
        b'{"messages": "not an array", "pad": "' + b"x" * 600 + b'"}',
        b'{"messages": [1, 2, 3], "pad": "' + b"x" * 600 + b'"}',
        b'{"messages": [{"a": "unterminated ' + b"x" * 600,
        b'{"messages": [{"a": 1}}' + b" " * 600,
    ],
)
def test_unsplittable_bodies_are_stored_whole(body: bytes) -> None:
    assert split(body) == []


def test_strings_with_escapes_do_not_end_early() -> None:
    tricky = 'he said \\"]}, {\\" and left \\\\' * 40
    body = ('{"messages":[{"content":"' + tricky + '"},{"content":"' + tricky + '"}]}').encode()
    ranges = split(body)
    assert len(ranges) == 2
    assert all(json.loads(body[s:e])["content"] == json.loads(f'"{tricky}"') for s, e in ranges)


def test_huge_body_splits_quickly_enough_to_run_in_the_suite() -> None:
    big = {"messages": [{"role": "user", "content": 'x\\y"z ' * 2000} for _ in range(200)]}
    body = json.dumps(big).encode()
    assert len(split(body)) == 200
