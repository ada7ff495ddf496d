"""RFC 8785 canonical JSON: the fast path must agree with the exact encoder everywhere."""

from __future__ import annotations

import hashlib
import json

import pytest

from otel_replay._canonical import _exact, canonical_json, parse_json, sha256_tag

# (value, RFC 8785 text): numbers follow ECMAScript Number::toString.
CASES = [
    ({"b": 1, "a": [True, None, "x"]}, '{"a":[true,null,"x"],"b":1}'),
    ([1.0, -0.0, 2.5], "[1,0,2.5]"),
    (
        [1e16, 1.5e16, 1e20, 1e21],
        "[10000000000000000,15000000000000000,100000000000000000000,1e+21]",
    ),
    ([1e-6, 1.5e-6, 1e-7, 1e-5], "[0.000001,0.0000015,1e-7,0.00001]"),
    ([5e-324, 1.7976931348623157e308], "[5e-324,1.7976931348623157e+308]"),
    ([2**53, 2**60, -(2**63)], "[9007199254740992,1152921504606847000,-9223372036854776000]"),
    ({"\U0001f600": 1, "\ue000": 2, "a": 3}, '{"a":3,"\U0001f600":1,"\ue000":2}'),
    (['é\n"\\\u2028'], '["é\\n\\"\\\\\u2028"]'),
    ({"content": "version 2.0, see e+16 and e-6"}, '{"content":"version 2.0, see e+16 and e-6"}'),
]


@pytest.mark.parametrize(("value", "expected"), CASES)
def test_canonical_matches_rfc8785(value: object, expected: str) -> None:
    assert canonical_json(value) == expected.encode()
    assert _exact(value) == expected


def test_fast_path_equals_exact_on_realistic_messages() -> None:
    messages = [
        {"role": "user", "parts": [{"type": "text", "content": f"turn {i}: ok? 😀"}]}
        for i in range(20)
    ]
    messages.append(
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "c1", "name": "f", "arguments": {"x": 0.25, "n": 3}}
            ],
        }
    )
    assert canonical_json(messages) == _exact(messages).encode()
    assert json.loads(canonical_json(messages)) == messages


def test_sha256_tag() -> None:
    assert sha256_tag(b"abc") == "sha256:" + hashlib.sha256(b"abc").hexdigest()


@pytest.mark.parametrize("size", [0, 1, 2047, 2048, 4095, 8000, 256 * 1024, 256 * 1024 + 1])
def test_sha256_tag_of_every_size_and_split_is_the_plain_digest(size: int) -> None:
    # Bodies up to 256 KB are hashed in slices (so the GIL is kept): the digest is unchanged,
    # whole or given in parts.
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    expected = "sha256:" + hashlib.sha256(data).hexdigest()
    assert sha256_tag(data) == expected
    assert sha256_tag(data[: size // 3], data[size // 3 :]) == expected
    assert sha256_tag(bytearray(data)) == expected


def test_a_lone_surrogate_is_written_as_its_escape() -> None:
    value = {"\udc00 key": ["half \ud83d", "whole \U0001f600", "\n"], "a": 1}
    out = canonical_json(value)
    assert out == b'{"a":1,"\\udc00 key":["half \\ud83d","whole \xf0\x9f\x98\x80","\\n"]}'
    assert json.loads(out) == value
    assert parse_json(out) == value
