"""A recording process for concurrency and crash tests.

    python -m tests.store._writer STORE RUN_ID STEPS

Records ``STEPS`` steps of a chat (bodies from ``chat_bodies(STEPS, seed)``, seed derived
from the run id), flushing after each and printing ``flushed <index>`` once the flush returned.
"""

from __future__ import annotations

import argparse
import sys
import zlib

from otel_replay.store import Store
from tests.store._data import chat_bodies, fixture, iter_chat, span


def bodies(run_id: str, steps: int) -> list[tuple[bytes, bytes]]:
    """The first ``steps`` bodies the writer records for ``run_id``."""
    return chat_bodies(steps, seed=zlib.crc32(run_id.encode()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("run_id")
    parser.add_argument("steps", type=int)
    args = parser.parse_args()
    store = Store.open(args.store)
    chat = iter_chat(zlib.crc32(args.run_id.encode()))
    for index, (request, response) in zip(range(args.steps), chat, strict=False):
        store.put([fixture(args.run_id, index, request, response)], [span(args.run_id, index)])
        store.flush()
        print(f"flushed {index}", flush=True)
    store.close()
    sys.stdout.write("closed\n")


if __name__ == "__main__":
    main()
