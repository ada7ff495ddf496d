"""A process that forks while recording (as pre-forking servers do), for the process tests.

    python tests/export/_fork_script.py STORE

The parent records one step, forks, and records two more; the child records three steps in a
run of its own (``r_child``); each shuts its pipeline down before exiting.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from otel_replay.runs._run import start_process_run
from tests.export._support import CHAT_URL, Pipeline, chat_request, echo_client


def post(count: int) -> None:
    with echo_client() as client:
        for i in range(count):
            client.post(CHAT_URL, content=chat_request(f"q{i}"))


def main() -> None:
    with Pipeline(Path(sys.argv[1])) as pipe:
        start_process_run("r_parent")
        post(1)
        pid = os.fork()
        if pid == 0:
            start_process_run("r_child")
            post(3)
            pipe.stop()
            os._exit(0 if pipe.exporter.stats().steps == 3 else 1)
        _, status = os.waitpid(pid, 0)
        post(2)
    sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
