"""What the instrumentor instruments: any one of the client libraries is enough."""

_instruments: tuple[str, ...] = ()
_instruments_any = ("httpx >= 0.23", "httpx2 >= 2.0", "urllib3 >= 2.0", "aiohttp >= 3.12")
_supports_metrics = True

CLIENT_MODULES = ("httpx", "httpx2")
"""The client libraries whose dispatch is wrapped (recording) or served (replay)."""
