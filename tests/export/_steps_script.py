"""A recorded process for the exporter's process tests, run under ``opentelemetry-instrument``.

    python tests/export/_steps_script.py TOOLS_URL COUNT [--app-handler]

Inside ``otel_replay.run("steps")`` it fetches ``TOOLS_URL/orders/A-1000``, ``A-1001``, ...
with httpx, printing ``step N`` once step N's response was read (its span has ended). A
negative COUNT loops until the process is stopped. ``--app-handler`` installs the
application's own SIGTERM handler (exit status 3) after start-up, as servers do.
"""

from __future__ import annotations

import signal
import sys

import httpx

import otel_replay


def main() -> None:
    url, count = sys.argv[1], int(sys.argv[2])
    if "--app-handler" in sys.argv:
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(3))
    with otel_replay.run("steps"), httpx.Client(base_url=url) as client:
        step = 0
        while count < 0 or step < count:
            client.get(f"/orders/A-{1000 + step}").raise_for_status()
            print(f"step {step}", flush=True)
            step += 1


if __name__ == "__main__":
    main()
