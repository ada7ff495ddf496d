"""What the remote-store tests share: a bucket (URL and s3fs options) opened as one machine
(its own index cache), and the check that a store holds one run's bodies and nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from otel_replay.store import Store

Bucket = tuple[str, dict[str, Any]]


def open_machine(bucket: Bucket, machine: Path) -> Store:
    """The store in ``bucket`` as a machine whose index cache is ``machine`` sees it."""
    url, options = bucket
    return Store.open(url, storage_options=options, cache_dir=machine)


def assert_holds_only(store: Store, run_id: str, sent: list[tuple[bytes, bytes]]) -> None:
    """``store`` lists ``run_id`` alone, with exactly the bodies ``sent``, and verifies clean."""
    assert [r.run_id for r in store.runs()] == [run_id]
    steps = store.steps(run_id)
    assert [store.request_body(s) for s in steps] == [q for q, _ in sent]
    assert [store.response_body(s) for s in steps] == [r for _, r in sent]
    assert store.verify() == []
