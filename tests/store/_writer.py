"""A recording process for concurrency and crash tests.

    python -m tests.store._writer STORE RUN_ID STEPS [--shared] [--pid] [--go FILE] [--pause S]

Records ``STEPS`` steps of a chat (bodies from :func:`bodies`; the steps happen now),
flushing after each and printing ``flushed <index>`` once the flush returned, then closes the
store and prints ``closed``. ``--shared``: the chat sends the shared system prompt and tools
of ``_data.shared_system``. ``--pid``: every request names this process (``"pid": <pid>``),
so a test can tell which process recorded a step. ``--go FILE``: print ``ready`` once the
store is open, then wait for FILE to exist, so several processes start at once. ``--pause
S``: sleep S seconds after each step.
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

from otel_replay.store import Store
from tests.store._data import iter_chat, make_step, span


def iter_bodies(
    run_id: str, *, shared: bool = False, pid: int | None = None
) -> Iterator[tuple[bytes, bytes]]:
    """The bodies the writer records for ``run_id``, in order (endless)."""
    extra = None if pid is None else {"pid": pid}
    return iter_chat(zlib.crc32(run_id.encode()), shared=shared, extra=extra)


def bodies(
    run_id: str, steps: int, *, shared: bool = False, pid: int | None = None
) -> list[tuple[bytes, bytes]]:
    """The first ``steps`` bodies the writer records for ``run_id``."""
    return list(itertools.islice(iter_bodies(run_id, shared=shared, pid=pid), steps))


ROOT = Path(__file__).resolve().parents[2]


def spawn(store: Path, run_id: str, steps: int, *flags: str) -> subprocess.Popen[str]:
    """Start a writer process (text pipes for its stdout and stderr)."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.store._writer", str(store), run_id, str(steps), *flags],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("run_id")
    parser.add_argument("steps", type=int)
    parser.add_argument("--shared", action="store_true")
    parser.add_argument("--pid", action="store_true")
    parser.add_argument("--go", help="wait for this file to exist before the first step")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between steps")
    args = parser.parse_args()
    store = Store.open(args.store)
    if args.go:
        print("ready", flush=True)
        while not os.path.exists(args.go):
            time.sleep(0.001)
    pid = os.getpid() if args.pid else None
    pairs = iter_bodies(args.run_id, shared=args.shared, pid=pid)
    for index, (request, response) in zip(range(args.steps), pairs, strict=False):
        now = time.time_ns() - index * 10**9  # make_step adds a second a step
        step = make_step(args.run_id, index, request, response, start_ns=now)
        store.put([step], [span(args.run_id, index)])
        store.flush()
        print(f"flushed {index}", flush=True)
        time.sleep(args.pause)
    store.close()
    sys.stdout.write("closed\n")


if __name__ == "__main__":
    main()
