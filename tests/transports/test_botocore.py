"""boto3 through botocore's urllib3 pools: a Bedrock model call and S3 reads and writes, against
a real moto server, recorded (credentials kept out of the store) and replayed with the server
stopped and no connection made."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

import otel_replay
from otel_replay.replay.sources import load_run
from tests.export._support import Pipeline, stored_bytes

ACCESS_KEY = "AKIAOTELREPLAYTEST01"
SECRET_KEY = "otel-replay-test-secret-key-do-not-store"
SESSION_TOKEN = "otel-replay-test-session-token-do-not-store"
MODEL = "anthropic.claude-3-haiku-20240307-v1:0"


@contextmanager
def moto_server() -> Iterator[str]:
    """A moto server on loopback, stopped when the block ends; yields its endpoint."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def _client(service: str, endpoint: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        aws_session_token=SESSION_TOKEN,
        config=Config(retries={"max_attempts": 1}),
    )


def agent(endpoint: str) -> dict[str, Any]:
    """What a Bedrock agent with an S3 notes tool does."""
    bedrock = _client("bedrock-runtime", endpoint)
    answer = bedrock.invoke_model(
        modelId=MODEL,
        body=json.dumps(
            {
                "anthropic_version": "bedrock-2023-05-31",
                "max_tokens": 64,
                "messages": [{"role": "user", "content": "Where is my order A-1234?"}],
            }
        ),
    )
    s3 = _client("s3", endpoint)
    s3.create_bucket(Bucket="notes")
    s3.put_object(Bucket="notes", Key="A-1234.txt", Body=b"customer asked for a status")
    note = s3.get_object(Bucket="notes", Key="A-1234.txt")["Body"].read()
    return {
        "answer": json.loads(answer["body"].read()),
        "content_type": answer["contentType"],
        "note": note,
        "keys": [o["Key"] for o in s3.list_objects_v2(Bucket="notes")["Contents"]],
    }


def test_boto3_calls_are_recorded_and_replayed_without_aws(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, connects: list[str]
) -> None:
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    store = tmp_path / "store"
    with moto_server() as endpoint, Pipeline(store) as pipe:
        seen = agent(endpoint)
        run_id = pipe.run.run_id
    assert seen["note"] == b"customer asked for a status" and seen["keys"] == ["A-1234.txt"]

    run = load_run(run_id, store=str(store))
    assert [s.step.method for s in run.steps] == ["POST", "PUT", "PUT", "GET", "GET"]
    assert {s.step.kind for s in run.steps} == {"http"}
    assert run.steps[0].step.url.endswith("/model/anthropic.claude-3-haiku-20240307-v1%3A0/invoke")
    assert all(s.fidelity == "exact" and s.step.complete for s in run.steps)
    on_disk = stored_bytes(store)
    for secret in (ACCESS_KEY, SECRET_KEY, SESSION_TOKEN):
        assert secret.encode() not in on_disk, secret

    connects.clear()
    with otel_replay.replaying(run_id, store=str(store)) as result:
        again = agent(endpoint)  # the server is gone: only the recording answers
    assert again == seen
    assert connects == []
    assert result.identical, result.first_divergence
