"""Store: content-addressed, compressed, deduplicated fixtures with an SQLite index.

Open one with :meth:`Store.open` (a path or an fsspec URL such as ``s3://bucket/prefix``)::

    with Store.open("./.otel-replay") as store:
        store.put(fixtures, spans)
        store.flush()                      # durable on return
        for run in store.runs():
            for step in store.steps(run.run_id):
                body = store.request_body(step)   # exact bytes, sha256-checked

The layout and format version are described in ``_format``, dedup and compression in
``_stream``, the flush and its crash safety in ``_flush``, the index in ``_index``, retention
and gc in ``_retention``, ``verify`` in ``_verify``.

Remote stores (any fsspec URL, e.g. ``s3://bucket/prefix``): the bucket holds ``FORMAT``,
``pins/`` and ``packs/`` exactly as a local store does, and no index. Each machine keeps its
own index in a cache directory (``OTEL_REPLAY_CACHE_DIR``, default ``~/.cache/otel-replay``,
one ``<sha256 of the URL>/index.sqlite`` per store) and brings it up to date from the records
in the packs when the store is opened and on ``Store.refresh()``: the packs are the per-run
manifests. Several machines can record into one bucket at once, each into its own streams.
"""

from otel_replay.store._gc import Retention
from otel_replay.store._types import GcReport, Progress, RunInfo, RunStatus, StepInfo, VerifyProblem
from otel_replay.store.store import Store

__all__ = [
    "GcReport",
    "Progress",
    "Retention",
    "RunInfo",
    "RunStatus",
    "StepInfo",
    "Store",
    "VerifyProblem",
]
