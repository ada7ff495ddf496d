"""A recorded process that changes its directory, run under ``opentelemetry-instrument``.

    python tests/export/_chdir_agent.py TOOLS_URL WORKDIR (first|after-a-write)

``first``: it moves into WORKDIR, then fetches one order, before anything was written.
``after-a-write``: it fetches an order, makes it durable (the provider's ``force_flush``, so the
store is open), moves into WORKDIR and fetches another.
"""

from __future__ import annotations

import os
import sys

import httpx
from opentelemetry import trace


def main() -> None:
    url, workdir, when = sys.argv[1:4]
    with httpx.Client(base_url=url) as client:
        if when == "after-a-write":
            client.get("/orders/A-1000").raise_for_status()
            assert trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
        os.chdir(workdir)
        client.get("/orders/A-1001").raise_for_status()


if __name__ == "__main__":
    main()
