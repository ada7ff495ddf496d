"""The CLI on a store in S3 (the moto server of the store tests), configured the way a user
does it: ``--store s3://...`` and fsspec's own ``FSSPEC_S3_*`` settings, in a fresh process
whose index cache starts empty."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import fsspec

from otel_replay.store import Store
from otel_replay.store._lock import GcLease
from tests.store._data import chat_bodies, make_step, span
from tests.store.conftest import s3_bucket, s3_server  # noqa: F401 (fixtures)

Bucket = tuple[str, dict[str, Any]]
RUN = "remote-cli"


def _record(bucket: Bucket, cache: Path) -> list[tuple[bytes, bytes]]:
    url, options = bucket
    pairs = chat_bodies(3)
    with Store.open(url, storage_options=options, cache_dir=cache) as store:
        for index, (request, response) in enumerate(pairs):
            store.put(
                [replace(make_step(RUN, index, request, response), model="gpt-test")],
                [span(RUN, index, **{"gen_ai.request.model": "gpt-test"})],
            )
            store.flush()
    return pairs


def _cli(
    bucket: Bucket, cache: Path, *args: str, then: tuple[str, ...] = (), timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``otel-replay ARGS --store URL THEN`` in a new process, as a user would run it."""
    url, options = bucket
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "FSSPEC_"))}
    env.update(
        FSSPEC_S3_ENDPOINT_URL=options["endpoint_url"],
        FSSPEC_S3_KEY=options["key"],
        FSSPEC_S3_SECRET=options["secret"],
        AWS_DEFAULT_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
        OTEL_REPLAY_CACHE_DIR=str(cache),
        COLUMNS="200",
    )
    program = Path(sys.executable).with_name("otel-replay")
    return subprocess.run(
        [str(program), *args, "--store", url, *then],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_runs_show_and_verify_read_a_bucket(s3_bucket: Bucket, tmp_path: Path) -> None:  # noqa: F811
    _record(s3_bucket, tmp_path / "writer")
    machine = tmp_path / "reader"  # another machine: its index is rebuilt from the bucket

    runs = _cli(s3_bucket, machine, "runs", "--json")
    assert runs.returncode == 0, runs.stderr
    (listed,) = json.loads(runs.stdout)
    assert (listed["run_id"], listed["step_count"], listed["models"]) == (RUN, 3, ["gpt-test"])

    show = _cli(s3_bucket, machine, "show", RUN, "--json")
    assert show.returncode == 0, show.stderr
    document = json.loads(show.stdout)
    assert document["run"] == listed
    assert [step["index"] for step in document["steps"]] == [0, 1, 2]

    verify = _cli(s3_bucket, machine, "verify")
    assert verify.returncode == 0, verify.stderr
    assert f"The store at {s3_bucket[0]} is intact: 1 run, 3 steps" in verify.stdout


def test_verify_names_a_damaged_pack_in_a_bucket(s3_bucket: Bucket, tmp_path: Path) -> None:  # noqa: F811
    _record(s3_bucket, tmp_path / "writer")
    url, options = s3_bucket
    fs = fsspec.filesystem("s3", **options)
    (pack,) = [key for key in fs.find(url.removeprefix("s3://")) if key.endswith(".pack")]
    data = bytearray(fs.cat_file(pack))
    data[30] ^= 0xFF
    fs.pipe_file(pack, bytes(data))

    for machine, extra in ((tmp_path / "reader", ()), (tmp_path / "writer", ("--rebuild-index",))):
        verify = _cli(s3_bucket, machine, "verify", *extra)
        assert verify.returncode == 1, (verify.stdout, verify.stderr)
        assert f"damaged pack: s3://{pack}: " in verify.stdout
    assert list((tmp_path / "writer").rglob("index.sqlite.broken-*"))  # the cache, set aside


def test_gc_steps_back_while_another_gc_works(s3_bucket: Bucket, tmp_path: Path) -> None:  # noqa: F811

    _record(s3_bucket, tmp_path / "writer")
    url, options = s3_bucket
    with Store.open(url, storage_options=options, cache_dir=tmp_path / "other") as other:
        lease = GcLease(other._backend)  # type: ignore[attr-defined]
        lease.acquire()
    try:
        done = _cli(s3_bucket, tmp_path / "cli", "gc")
    finally:
        lease.release()
    assert done.returncode == 0, done.stderr
    assert "Nothing was swept: another gc is at work on" in done.stdout
    assert lease.rel in done.stdout


# Sends the recorded requests again, as the agent that made them would.
_AGAIN = """
import json, sys, httpx
for body in json.load(open(sys.argv[1])):
    httpx.post("https://api.example.test/v1/chat/completions", content=body.encode(),
               headers={"content-type": "application/json"})
"""


def test_a_run_in_a_bucket_replays_and_its_replay_is_kept_there(
    s3_bucket: Bucket,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The replayed program runs without the network (strict mode's namespaces): it once
    opened the bucket itself to read the run, failed ("cannot open store s3://..."), and the
    replay ended before the first request. The CLI reads the run and hands it over; what the
    program records is carried to the bucket afterwards, listed under the run it replayed."""
    pairs = _record(s3_bucket, tmp_path / "writer")
    requests = tmp_path / "requests.json"
    requests.write_text(json.dumps([request.decode() for request, _ in pairs]))
    replayed = _cli(
        s3_bucket,
        tmp_path / "replayer",
        *("replay", RUN),
        then=("--json", "--", sys.executable, "-c", _AGAIN, str(requests)),
        timeout=300,
    )
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout)["outcome"] == "identical"

    runs = _cli(s3_bucket, tmp_path / "reader", "runs", "--json", "--mode", "replay")
    (replay,) = json.loads(runs.stdout)
    assert (replay["parent_run_id"], replay["step_count"]) == (RUN, 3)
