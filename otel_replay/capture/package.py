"""What the instrumentor instruments, for ``BaseInstrumentor`` and ``opentelemetry-instrument``.

Any one client library is enough: the instrumentor wraps whichever of them is installed
(urllib3 also carries requests and botocore).
"""

_instruments: tuple[str, ...] = ()
_instruments_any = ("httpx >= 0.23", "httpx2 >= 2.0", "urllib3 >= 2.0", "aiohttp >= 3.12")
_supports_metrics = True

CLIENT_MODULES = ("httpx", "httpx2")
"""The client libraries whose dispatch is wrapped (recording) or served (replay)."""
