"""A recorded process that flushes its tracer provider, then dies by SIGKILL.

    python tests/export/_flush_kill_script.py COUNT [values]

Under ``opentelemetry-instrument`` (the SDK's batch processor in front of the ``replay``
exporter) it fetches COUNT orders from an in-process transport, faster than the exporter
writes them (so its queue is deep when the batch processor exports), prints what
``TracerProvider.force_flush()`` answered, and kills itself: no exit handler runs, so only
what that True promised can be in the store. With ``values``, the steps are a tool call, a
``uuid4()`` and a ``now()`` in turn instead, their values printed first.
"""

from __future__ import annotations

import os
import signal
import sys

import httpx
from opentelemetry import trace

import otel_replay


@otel_replay.tool
def lookup(order_id: str) -> dict[str, str]:
    return {"order": order_id, "status": "shipped"}


def _values(count: int) -> None:
    makers = (
        lambda n: lookup(f"A-{n}")["order"],
        lambda n: str(otel_replay.uuid4()),
        lambda n: otel_replay.now().isoformat(),
    )
    print(" ".join(makers[n % 3](n) for n in range(count)), flush=True)


def main() -> None:
    count = int(sys.argv[1])
    if sys.argv[2:] == ["values"]:
        _values(count)
    else:
        body = b'{"order": "A-1000", "status": "shipped", "note": "' + b"x" * 20_000 + b'"}'
        transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
        with httpx.Client(base_url="http://tools.test", transport=transport) as client:
            for step in range(count):
                client.get(f"/orders/A-{1000 + step}").raise_for_status()
    flushed = trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
    print(f"flushed {flushed}", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main()
