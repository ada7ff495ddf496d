"""A process that forks while recording and whose child goes on with its run, for the process
tests.

    python tests/export/_fork_run_script.py STORE

The parent records two steps of run ``r_forked``, forks, and both record five more at once
(the child without starting a run of its own); the child shuts its pipeline down and leaves
through ``os._exit``, then the parent records one more.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from otel_replay.runs._run import start_process_run
from tests.export._support import CHAT_URL, Pipeline, chat_request, echo_client


def post(count: int, who: str) -> None:
    with echo_client() as client:
        for i in range(count):
            client.post(CHAT_URL, content=chat_request(f"{who} {i}"))


def main() -> None:
    with Pipeline(Path(sys.argv[1])) as pipe:
        start_process_run("r_forked")
        post(2, "before")
        pid = os.fork()
        if pid == 0:
            post(5, "child")
            pipe.stop()
            os._exit(0 if pipe.exporter.stats().steps == 5 else 1)
        post(5, "parent")
        _, status = os.waitpid(pid, 0)
        post(1, "after")
    sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
