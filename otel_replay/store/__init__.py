"""Store: content-addressed, compressed, deduplicated fixtures with an SQLite index.

Open one with :meth:`Store.open` (a path or an fsspec URL such as ``s3://bucket/prefix``)::

    with Store.open("./.otel-replay") as store:
        store.put(fixtures, spans)
        store.flush()                      # durable on return
        for run in store.runs():
            for step in store.steps(run.run_id):
                body = store.request_body(step)   # exact bytes, sha256-checked

The layout and format version are described in ``_format``; content addressing, chunks and
manifests in ``_objects`` and ``_segments``; packs in ``_pack``; records in ``_records``; a
flush and its crash safety in ``_write``; the index in ``_index`` and ``_rows``; bringing the
index up to date from the files in ``_sync``; retention and gc in ``_gc`` (remote stores:
``_condemned``), repacking in ``_repack``; ``verify`` in ``_verify``.

Remote stores (any fsspec URL, e.g. ``s3://bucket/prefix``): the bucket holds the same files
as a local store, and no index. Each machine keeps its own index in a cache directory
(``OTEL_REPLAY_CACHE_DIR``, default ``~/.cache/otel-replay``, one directory per store URL) and
brings it up to date from the bucket when the store is opened and on ``Store.refresh()``.
Several machines can record into one bucket at once.
"""

from otel_replay.store._format import new_recording_id
from otel_replay.store._fs import is_url
from otel_replay.store._gc import Retention
from otel_replay.store._migrate import migrate
from otel_replay.store._types import (
    Buffered,
    GcReport,
    Progress,
    RunInfo,
    RunStatus,
    StepInfo,
    VerifyProblem,
)
from otel_replay.store.store import Store

__all__ = [
    "Buffered",
    "GcReport",
    "Progress",
    "Retention",
    "RunInfo",
    "RunStatus",
    "StepInfo",
    "Store",
    "VerifyProblem",
    "is_url",
    "migrate",
    "new_recording_id",
]
