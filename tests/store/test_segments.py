"""The body splitter: exact byte ranges of message and tool elements, whatever the input, and
the same ranges and digests whether or not it remembers earlier bodies."""

from __future__ import annotations

import hashlib
import json
import random

from otel_replay.store._segments import MIN_SEGMENT, Previous, Recent, Shapes, split
from tests.store._data import chat_bodies


def _random_json(rng: random.Random, depth: int = 0) -> object:
    pick = rng.randrange(8 if depth < 4 else 4)
    if pick == 0:
        return rng.choice([True, False, None, 0, -1.5e-7, 12345678901234, 10**70])
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
    out += [bytes(range(256)) * 8, b"", b'{"messages": [' + b'"' + b'\\"' * 5000 + b'"]}']
    return out


def _digests(body: bytes, ranges: list[tuple[int, int, bytes | None]]) -> list[tuple]:
    """The ranges with every digest filled in, checked against the bytes it names."""
    out = []
    previous = 0
    for start, end, digest in ranges:
        assert previous <= start < end <= len(body) and end - start >= MIN_SEGMENT
        actual = hashlib.sha256(body[start:end]).digest()
        assert digest in (None, actual)  # a remembered digest is the digest of these bytes
        out.append((start, end, actual))
        previous = end
    return out


def _split_with_memory(
    bodies: list[bytes], stream_of: list[object]
) -> list[list[tuple[int, int, bytes]]]:
    """Each body split as the store splits them: with shapes, recent segments and each
    stream's previous body."""
    shapes, recent, previous = Shapes(), Recent(), Previous(limit=64 << 10)
    out = []
    for body, stream in zip(bodies, stream_of, strict=True):
        ranges = _digests(body, split(body, shapes, recent, previous.known(stream, body)))
        for start, end, digest in ranges:
            recent.learn(body[start:end], digest)
        previous.learn(stream, body, ranges)
        out.append(ranges)
    return out


def test_ranges_partition_every_body() -> None:
    for body in _bodies(300):
        _digests(body, split(body))


def test_message_elements_are_found_exactly() -> None:
    for request, _ in chat_bodies(12):
        value = json.loads(request)
        found = [json.loads(request[start:end]) for start, end, _ in split(request)]
        elements = [*value["messages"], *value["tools"]]
        assert found == [e for e in elements if len(json.dumps(e, separators=(",", ":"))) >= 64]


def test_memory_of_earlier_bodies_changes_nothing() -> None:
    """Two conversations interleaved, then random and truncated bodies in the same streams:
    every body gets the same ranges and digests as when split alone."""
    first = [q for q, _ in chat_bodies(15, seed=1)]
    second = [q for q, _ in chat_bodies(15, seed=2)]
    bodies: list[bytes] = []
    streams: list[object] = []
    for one, two in zip(first, second, strict=True):
        bodies += [one, two, one[: len(one) // 2]]
        streams += ["a", "b", "a"]
    hostile = _bodies(100)
    bodies += hostile
    streams += [n % 3 for n in range(len(hostile))]
    alone = [_digests(body, split(body)) for body in bodies]
    assert _split_with_memory(bodies, streams) == alone
    previous = Previous()
    previous.learn("a", first[3], alone[9])
    repeated = previous.known("a", first[4])  # request 5 repeats request 4's messages
    assert repeated is not None and len(repeated) >= 4


def test_a_prefix_that_ends_inside_a_number_is_not_trusted_past_the_bytes() -> None:
    """The previous body's element is a long number; the next body continues that number.
    The remembered range covers bytes both bodies share, so its digest still names them."""
    digits = b"1" * 80
    old = b'{"messages":[' + digits + b',{"role":"user","content":"' + b"x" * 80 + b'"}]}'
    new = b'{"messages":[' + digits + b"2" + b',{"role":"user","content":"' + b"y" * 80 + b'"}]}'
    got = _split_with_memory([old, new], ["s", "s"])
    assert got[1] == _digests(new, split(new))


def test_previous_forgets_the_oldest_stream_beyond_its_limit() -> None:
    previous = Previous(limit=3000)
    body = b'{"messages":[' + b'"' + b"a" * 1000 + b'"]}'
    ranges = _digests(body, split(body))
    for stream in range(4):
        previous.learn(stream, body, ranges)
    assert previous.known(0, body) is None
    assert previous.known(3, body) == {start: (end, d) for start, end, d in ranges}


def _parts_messages(rng: random.Random, count: int) -> list[dict[str, object]]:
    """Messages in the GenAI conventions' shape (``gen_ai.input.messages``): the text comes
    before the role, so every role shares one prefix and differs in the suffix."""
    alphabet = 'ab "\\/\n\u00e9\U0001f600}],'
    out: list[dict[str, object]] = []
    for n in range(count):
        content = "".join(rng.choice(alphabet) for _ in range(rng.randrange(60, 400)))
        message: dict[str, object] = {"parts": [{"content": content, "type": "text"}]}
        message["role"] = rng.choice(["system", "user", "assistant", "tool"])
        if n % 7 == 3:  # the same prefix, then something else after the text
            message["parts"] = [{"content": content, "type": "text", "x": [1, {"y": "}"}]}]
        if n % 11 == 5:  # the same prefix, the text in two strings
            message["parts"] = [{"content": content, "more": content[:70]}]
        out.append(message)
    return out


def test_shapes_sharing_a_prefix_find_the_same_ends() -> None:
    """Arrays of messages whose shapes share their prefix, compact, indented and cut short:
    split with shapes learned from earlier bodies, every body gets the same ranges and
    digests as when split alone."""
    rng = random.Random(7)
    bodies: list[bytes] = []
    for n in range(60):
        messages = _parts_messages(rng, rng.randrange(1, 9))
        compact = (",", ":") if n % 3 else None
        text = json.dumps(messages, ensure_ascii=n % 2 == 0, separators=compact)
        if n % 5 == 4:
            text = json.dumps(messages, indent=1)
        body = text.encode()
        bodies += [body, body[: rng.randrange(len(body) + 1)]]
    alone = [_digests(body, split(body)) for body in bodies]
    assert sum(len(ranges) for ranges in alone) > 200
    assert _split_with_memory(bodies, [n % 2 for n in range(len(bodies))]) == alone
    roles = [
        b'{"parts":[{"content":"' + b"w" * 200 + b'","type":"text"}],"role":"' + role + b'"}'
        for role in (b"system", b"user", b"assistant")
    ]
    shapes = Shapes()
    split(b"[" + b",".join(roles) + b"]", shapes)
    assert [shapes.match(element, 0) for element in roles] == [len(e) for e in roles]
