"""The order desk of ``_mcp_server.py`` (the same ``MCPServer`` and tools) served over HTTP:
streamable HTTP at ``/mcp`` or SSE at ``/sse``, on 127.0.0.1.

    python _mcp_http_server.py orders.sqlite PORT streamable-http|sse
"""

from __future__ import annotations

import sys

from tests.frameworks._mcp_server import server

if __name__ == "__main__":
    transport = sys.argv[3]
    if transport == "sse":
        server.run("sse", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
