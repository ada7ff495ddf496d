"""Streamed request bodies (generators, multipart uploads): the step records the exact bytes
the transport sent, which exist nowhere else."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator, Iterator
from types import ModuleType

import pytest

from examples.standin import StandIn
from otel_replay.testing import CaptureKit

REFUND = [b'{"order_id": "A-1234", ', b'"reason": "arrived ', b'broken"}']


def _chunks() -> Iterator[bytes]:
    yield from REFUND


async def _achunks() -> AsyncIterator[bytes]:
    for chunk in REFUND:
        yield chunk


def _assert_recorded(span: dict[str, object], sent: bytes) -> None:
    attrs = span["attributes"]
    assert isinstance(attrs, dict)
    assert attrs["replay.request.hash"] == "sha256:" + hashlib.sha256(sent).hexdigest()
    assert attrs["replay.request.size"] == len(sent)
    assert attrs["replay.request.body"] == sent.decode()
    assert attrs["replay.step.kind"] == "http"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_generator_body_is_hashed_as_sent(
    standin: StandIn, client_module: ModuleType, mode: str
) -> None:
    url = f"{standin.tools_url}/refunds"
    with CaptureKit() as kit:
        if mode == "sync":
            with client_module.Client() as client:
                response = client.post(url, content=_chunks())
        else:

            async def send() -> object:
                async with client_module.AsyncClient() as client:
                    return await client.post(url, content=_achunks())

            response = asyncio.run(send())
        (span,) = kit.spans()
    assert response.status_code == 201  # type: ignore[attr-defined]
    (received,) = standin.received
    assert received.body == b"".join(REFUND)
    assert received.header("transfer-encoding") == "chunked"
    _assert_recorded(span, received.body)
    assert span["attributes"]["http.response.status_code"] == 201


def test_multipart_upload_is_hashed_as_sent(standin: StandIn, client_module: ModuleType) -> None:
    audio = bytes(range(256)) * 8
    with CaptureKit() as kit, client_module.Client() as client:
        client.post(
            f"{standin.tools_url}/refunds",
            files={"photo": ("damage.bin", audio, "application/octet-stream")},
            data={"order_id": "A-1234"},
        )
        (span,) = kit.spans()
    (received,) = standin.received
    assert audio in received.body  # the multipart encoding of the upload
    attrs = span["attributes"]
    assert attrs["replay.request.hash"] == "sha256:" + hashlib.sha256(received.body).hexdigest()
    assert attrs["replay.request.size"] == len(received.body)
    # Not UTF-8, so the inline body travels as base64 of the exact bytes.
    assert attrs["replay.request.body"].startswith("base64:")


def test_a_body_sent_twice_is_recorded_once(client_module: ModuleType) -> None:
    """A transport that reads a re-iterable body twice (a rewound upload) records it once."""
    seen: list[bytes] = []

    def twice(request: object) -> object:
        for _ in range(2):
            seen.append(b"".join(request.stream))  # type: ignore[attr-defined]
        return client_module.Response(200, json={"ok": True})

    body = {"order_id": "A-1234"}
    with (
        CaptureKit() as kit,
        client_module.Client(transport=client_module.MockTransport(twice)) as client,
    ):
        client.post("http://tools.local/upload", files={"f": ("a.json", json.dumps(body))})
        (span,) = kit.spans()
    assert seen[0] == seen[1]
    assert span["attributes"]["replay.request.size"] == len(seen[0])
    assert span["attributes"]["replay.request.hash"] == (
        "sha256:" + hashlib.sha256(seen[0]).hexdigest()
    )
