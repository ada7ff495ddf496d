"""The JSON document a report page carries, read back from the HTML."""

from __future__ import annotations

import json
import re
from typing import Any


def document(html: str) -> dict[str, Any]:
    """The JSON document the page's script reads."""
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html)
    assert found is not None
    parsed: dict[str, Any] = json.loads(found.group(1))
    return parsed
