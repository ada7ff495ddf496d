"""The step-through report: one self-contained HTML file for a run, or for two runs aligned.

:func:`render` takes Runs (any source ``replay`` reads) and returns the page: inline CSS and
script, the steps as one JSON document (:mod:`otel_replay.report._page`), no request to
anywhere (its Content-Security-Policy allows none). The script draws the timeline and only
the selected step's pane.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence
from functools import cache
from importlib.resources import files
from typing import Any

import jinja2
from markupsafe import Markup

from otel_replay.replay import Run, diff_runs
from otel_replay.report._page import page

__all__ = ["render"]


def render(
    run: Run, *, other: Run | None = None, content: bool = True, notes: Sequence[str] = ()
) -> str:
    """The report of ``run``; with ``other``, of the two aligned as ``otel-replay diff`` aligns
    them (``run`` is A, ``other`` B), opened at their first divergence.

    ``content`` False keeps only metadata: no body, message, header or changed value is in
    the page. ``notes`` are lines shown under the title (what the report is of, say).
    """
    diff = None if other is None else diff_runs(run, other)
    document = page(run, diff, content=content, notes=notes)
    title = f"run {run.run_id}" if other is None else f"run {run.run_id} vs {other.run_id}"
    template = _environment().get_template("report.html.j2")
    script = _asset("report.js")
    return template.render(
        title=title,
        document=document,
        css=Markup(_asset("report.css")),
        script=Markup(script),
        script_hash=_csp_hash(script),
    )


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("otel_replay.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.policies["json.dumps_function"] = _dumps
    env.policies["json.dumps_kwargs"] = {}
    return env


def _dumps(value: Any) -> str:
    """Compact JSON, non-ASCII text kept as it is (a tenth of the size of ``\\uXXXX``), but for
    a string that holds a lone surrogate (a JSON body may escape one), which only ASCII
    escapes can carry into a UTF-8 file."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode()
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":"))
    return text


@cache
def _asset(name: str) -> str:
    """A file of ``templates/`` inlined into the page as it is. Neither closes its element:
    a literal ``</`` there would end the page's ``<style>`` or ``<script>`` early."""
    template = files("otel_replay.report").joinpath("templates").joinpath(name)
    text = template.read_text(encoding="utf-8")
    assert "</" not in text, f"{name} holds '</'"
    return text


def _csp_hash(script: str) -> str:
    """The Content-Security-Policy source that lets this inline script, and no other, run."""
    digest = hashlib.sha256(script.encode()).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"
