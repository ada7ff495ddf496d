"""A forecaster whose weather service refuses every call: its tool goes past its retry budget
(``tests/replay/test_retries.py``). ``RETRY_BACKOFF`` sets the first back-off (default 30 s)."""

from __future__ import annotations

import os

import otel_replay
from otel_replay import Budget

BACKOFF = float(os.environ.get("RETRY_BACKOFF", "30"))


@otel_replay.tool(effect="read", retries=Budget(backoff=BACKOFF, max_backoff=max(BACKOFF, 60)))
def fetch_forecast(city: str) -> dict[str, str]:
    raise ConnectionError(f"weather service refused the forecast for {city}")


if __name__ == "__main__":
    with otel_replay.run("forecaster"):
        print(fetch_forecast("Oslo"))
