"""Run the stand-in in the foreground: `python -m examples.standin --port 8765`.

With `--port 0` the OS picks a free port; `--port-file PATH` receives the chosen port (written
atomically, so a reader never sees a partial file). SIGTERM or SIGINT stops it cleanly.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType

from .server import StandIn


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.standin", description="Local stand-in model provider."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    parser.add_argument("--port-file", type=Path, help="write the chosen port to this file")
    parser.add_argument(
        "--event-delay", type=float, default=0.005, help="seconds between SSE events"
    )
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    args = parser.parse_args(argv)

    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        standin = StandIn(args.host, args.port, args.event_delay, verbose=args.verbose).start()
    except OSError as err:
        print(f"standin: cannot listen on {args.host}:{args.port}: {err}", file=sys.stderr)
        return 2
    try:
        if args.port_file is not None:
            _write_atomically(args.port_file, f"{standin.port}\n")
        print(f"standin: listening on {standin.base_url}", flush=True)
        while not done.wait(0.5):  # a timed wait lets the signal handler run promptly
            pass
    finally:
        standin.stop()
    return 0


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


if __name__ == "__main__":
    sys.exit(main())
