"""Inline bodies: the exact bytes travel in the span, so OTLP data alone replays byte-exact."""

from __future__ import annotations

import gzip
from collections.abc import Iterator

import httpx
import pytest

from otel_replay import attributes as A
from otel_replay._inline import decode_body, encode_body, fit_chunks
from otel_replay.testing import CaptureKit
from tests.export._support import CHAT_URL, chat_request, chat_response, sha


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b'{"a":"caf\xc3\xa9 \xe2\x98\x95"}',
        b"\x89PNG\r\n\x1a\n\x00\xff",
        b"base64:looks like a prefix",
        b"data: {}\n\n",
        "\U0001f600".encode(),
    ],
)
def test_inline_values_decode_to_exactly_the_body(body: bytes) -> None:
    value = encode_body(body)
    assert decode_body(value) == body
    if body.startswith(b"base64:") or body == b"\x89PNG\r\n\x1a\n\x00\xff":
        assert value.startswith("base64:")
    else:
        assert value == body.decode()


def test_bad_base64_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="base64"):
        decode_body("base64:not*base64")


@pytest.mark.parametrize(
    ("sizes", "total", "expected"),
    [
        ([3, 3, 3], 9, [3, 3, 3]),
        ([3, 3, 3], 5, [3, 2]),
        ([3, 3, 3], 12, [3, 3, 6]),
        ([3, 0, 3], 6, [3, 3]),
        ([], 4, [4]),
        ([5], 0, [0]),
    ],
)
def test_fit_chunks_always_adds_up(sizes: list[int], total: int, expected: list[int]) -> None:
    assert fit_chunks(sizes, total) == expected
    assert sum(fit_chunks(sizes, total)) == total


def _sse_client(chunks: list[bytes], headers: dict[str, str]) -> httpx.Client:
    class Stream(httpx.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            yield from chunks

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=headers, stream=Stream())

    return httpx.Client(transport=httpx.MockTransport(handler))


def _only_step(kit: CaptureKit) -> dict[str, object]:
    (span,) = kit.raw_spans()
    return dict(span.attributes or {})


def test_small_bodies_travel_inline_with_status_and_content_type() -> None:
    request, response = chat_request("hi"), chat_response("hello")

    def handler(_: httpx.Request) -> httpx.Response:
        headers = {"content-type": "application/json; charset=utf-8"}
        return httpx.Response(201, content=response, headers=headers)

    with CaptureKit() as kit, httpx.Client(transport=httpx.MockTransport(handler)) as client:
        client.post(CHAT_URL, content=request, headers={"content-type": "application/json"})
        attrs = _only_step(kit)
    assert attrs[A.REPLAY_REQUEST_BODY] == request.decode()
    assert attrs[A.REPLAY_RESPONSE_BODY] == response.decode()
    assert attrs[A.REPLAY_RESPONSE_STATUS_CODE] == 201
    assert attrs[A.REPLAY_RESPONSE_CONTENT_TYPE] == "application/json; charset=utf-8"
    assert sha(decode_body(str(attrs[A.REPLAY_REQUEST_BODY]))) == attrs[A.REPLAY_REQUEST_HASH]
    assert A.REPLAY_RESPONSE_CHUNK_SIZES not in attrs  # one chunk: nothing to say


def test_a_stream_keeps_its_chunk_boundaries_and_timing() -> None:
    chunks = [b'data: {"n":1}\n\n', b'data: {"n":2}\n\n', b"data: [DONE]\n\n"]
    client = _sse_client(chunks, {"content-type": "text/event-stream"})
    with CaptureKit() as kit, client:
        with client.stream("GET", "http://sse.test/events") as response:
            assert b"".join(response.iter_raw()) == b"".join(chunks)
        attrs = _only_step(kit)
    assert attrs[A.REPLAY_RESPONSE_BODY] == b"".join(chunks).decode()
    assert list(attrs[A.REPLAY_RESPONSE_CHUNK_SIZES]) == [len(c) for c in chunks]  # type: ignore[call-overload]
    times = list(attrs[A.REPLAY_RESPONSE_CHUNK_TIMES])  # type: ignore[call-overload]
    assert len(times) == len(chunks) and times == sorted(times) and times[0] >= 0


def test_decoded_bodies_get_chunks_that_add_up() -> None:
    text = b'{"answer":"' + b"zip " * 400 + b'"}'
    packed = gzip.compress(text)
    chunks = [packed[:100], packed[100:]]
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    client = _sse_client(chunks, headers)
    with CaptureKit() as kit, client:
        assert client.get("http://gz.test/").content == text
        attrs = _only_step(kit)
    assert decode_body(str(attrs[A.REPLAY_RESPONSE_BODY])) == text
    assert sum(attrs[A.REPLAY_RESPONSE_CHUNK_SIZES]) == len(text)  # type: ignore[call-overload]


def test_bodies_above_the_limit_carry_only_hash_and_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_REPLAY_INLINE_LIMIT", "100")
    small, large = b"x" * 100, b"y" * 101

    def handler(_: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=large)

    with CaptureKit() as kit, httpx.Client(transport=httpx.MockTransport(handler)) as client:
        client.post("http://h.test/", content=small)
        attrs = _only_step(kit)
    assert attrs[A.REPLAY_REQUEST_BODY] == small.decode()
    assert A.REPLAY_RESPONSE_BODY not in attrs
    assert A.REPLAY_RESPONSE_STATUS_CODE not in attrs
    assert attrs[A.REPLAY_RESPONSE_HASH] == sha(large)
    assert attrs[A.REPLAY_RESPONSE_SIZE] == 101


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("OTEL_REPLAY_INLINE_LIMIT", "0"),
        ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "NO_CONTENT"),
    ],
)
def test_inline_bodies_can_be_turned_off(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)

    def handler(_: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=chat_response("ok"))

    with CaptureKit() as kit, httpx.Client(transport=httpx.MockTransport(handler)) as client:
        client.post(CHAT_URL, content=chat_request("hi"))
        attrs = _only_step(kit)
    assert not [key for key in attrs if key.endswith(".body") or ".chunk." in key]
    assert A.REPLAY_REQUEST_HASH in attrs and A.REPLAY_RESPONSE_HASH in attrs
