"""What the instrumentor instruments, for ``BaseInstrumentor`` and ``opentelemetry-instrument``.

Either client library is enough: the instrumentor wraps whichever of them is installed.
"""

_instruments: tuple[str, ...] = ()
_instruments_any = ("httpx >= 0.23", "httpx2 >= 2.0")
_supports_metrics = True

CLIENT_MODULES = ("httpx", "httpx2")
"""The client libraries whose dispatch is wrapped (recording) or served (replay)."""
