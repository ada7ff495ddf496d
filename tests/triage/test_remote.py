"""Labels in a store in S3 (the moto server of the store tests): written by one machine, read
by another whose index cache starts empty, as if rebuilt; gone with their run."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import otel_replay
from otel_replay.store import Store
from otel_replay.triage import Triage
from tests.export._support import Pipeline
from tests.store.conftest import s3_bucket, s3_server  # noqa: F401 (fixtures)
from tests.triage._recorded import BROKEN_CONTRACT, count_orders


def test_labels_written_by_one_machine_are_read_by_another(
    s3_bucket: tuple[str, dict[str, Any]],  # noqa: F811
    tmp_path: Path,
) -> None:
    url, options = s3_bucket
    with Store.open(url, storage_options=options, cache_dir=tmp_path / "a") as store:
        with (
            Pipeline(tmp_path, store=store),
            contextlib.suppress(otel_replay.ToolContractError),
            otel_replay.run("orders", seed=6, run_id=BROKEN_CONTRACT),
        ):
            count_orders("C-42")
        session = Triage(store)
        verdict = session.stored(store.run(BROKEN_CONTRACT))
        assert session.keep() == 1
        assert [(x.step, x.category) for x in verdict.labels] == [
            (None, "contract_violation"),
            (0, "contract_violation"),
        ]
    with Store.open(url, storage_options=options, cache_dir=tmp_path / "b") as other:
        assert other.labels() == {BROKEN_CONTRACT: list(verdict.labels)}
        other.discard(BROKEN_CONTRACT)
    with Store.open(url, storage_options=options, cache_dir=tmp_path / "c") as third:
        assert third.labels() == {}
