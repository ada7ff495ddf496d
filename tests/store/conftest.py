"""Store test fixtures: a real moto S3 server on loopback for remote stores."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """A moto S3 server on 127.0.0.1 (random port); yields its endpoint URL."""
    from moto.server import ThreadedMotoServer

    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3_bucket(s3_server: str) -> tuple[str, dict[str, Any]]:
    """A fresh bucket: ``(s3://bucket/prefix URL, storage_options)``."""
    import boto3

    name = "t-" + uuid.uuid4().hex[:16]
    boto3.client(
        "s3",
        endpoint_url=s3_server,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    ).create_bucket(Bucket=name)
    options = {
        "key": "testing",
        "secret": "testing",
        "endpoint_url": s3_server,
        "client_kwargs": {"region_name": "us-east-1"},
    }
    return f"s3://{name}/fixtures", options
