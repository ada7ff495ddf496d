"""The body splitter: exact byte ranges of message and tool elements, whatever the input."""

from __future__ import annotations

import json
import random

import pytest

from otel_replay.store import _segments
from otel_replay.store._segments import MIN_SEGMENT, Shapes, split, split_known
from otel_replay.store._stream import StreamWriter
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


def _conversation_bodies(turns: int) -> list[bytes]:
    """Requests of a chat that re-sends its history, pretty-printed every other time."""
    bodies = []
    for n, (request, _) in enumerate(chat_bodies(turns, seed=11)):
        value = json.loads(request)
        bodies.append(request if n % 2 else json.dumps(value, indent=1).encode())
    return bodies


def test_known_segments_are_found_by_the_probe_exactly_where_the_scanner_finds_them() -> None:
    writer = StreamWriter("probe", 1)
    found_known = 0
    for body in _conversation_bodies(16):
        expected = split(body)
        got = split_known(body, writer.probe, Shapes())
        assert [(start, end) for start, end, _ in got] == expected
        for start, end, known in got:
            if known >= 0:
                found_known += 1
                assert writer._recent[known] == body[start:end]
        writer.put(body)
    assert found_known > 50  # the history is recognised, not re-scanned


def test_shapes_find_the_ends_the_scanner_finds(monkeypatch: pytest.MonkeyPatch) -> None:
    walked = []
    walk = _segments._container_end
    monkeypatch.setattr(_segments, "_container_end", lambda b, p: walked.append(p) or walk(b, p))
    rng = random.Random(5)
    shapes = Shapes()
    elements = walks = 0
    tricky = ["plain words ", 'quote \\" and backslash \\\\ ', "}] inside {[ ", "\u00e9\u4e2d "]
    for n in range(200):
        messages = []
        for _ in range(rng.randrange(1, 6)):
            text = "".join(rng.choice(tricky) for _ in range(rng.randrange(5, 40)))
            shape = rng.randrange(4)
            if shape == 0:
                messages.append({"role": "user", "content": text})
            elif shape == 1:
                messages.append({"parts": [{"content": text, "type": "text"}], "role": "assistant"})
            elif shape == 2:
                messages.append({"role": "tool", "content": text, "extra": [1, {"k": text[:9]}]})
            else:
                messages.append(text)
        body = json.dumps(
            {"model": "m", "messages": messages},
            ensure_ascii=n % 3 == 0,
            indent=None if n % 2 else 2,
        ).encode()
        for cut in (len(body), rng.randrange(len(body))):  # whole and truncated
            expected = split(body[:cut])
            walked.clear()
            found = split_known(body[:cut], None, shapes)
            elements += len(found)
            walks += len(walked)
            assert [(s, e) for s, e, _ in found] == expected
    assert elements > 300 and walks < elements / 2  # most elements matched a shape


def test_an_element_that_only_starts_like_a_known_shape_is_walked() -> None:
    shapes = Shapes()
    first = json.dumps({"messages": [{"role": "user", "content": "x" * 100}] * 2}).encode()
    split_known(first, None, shapes)  # learns {"role": "user", "content": "..."}
    # same start, but the string is followed by more members than the shape's suffix
    odd = {"role": "user", "content": "y" * 300, "name": "n" * 80}
    body = json.dumps({"messages": [odd, odd]}).encode()
    ranges = split_known(body, None, shapes)
    assert [json.loads(body[s:e]) for s, e, _ in ranges] == [odd, odd]
