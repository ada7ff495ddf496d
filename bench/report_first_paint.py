"""Report size and first paint: a synthetic 1,000-step run with ~10 MB of bodies.

The run is 100 episodes of one support agent (a shared ~2 KB system prompt and tool list):
each episode is a conversation of four Chat Completions calls that re-send its history, three
tool steps and three HTTP calls (JSON bodies of about 20 KB), the last made inside its tool.
The report is rendered in-process (``otel_replay.report.render``), then opened from disk in
headless Debian chromium:

* size: the file against the bodies' bytes and against the unique content it holds (each
  distinct message and body once); the target is a file linear in unique content;
* first paint: the browser's first-contentful-paint, and the wall time from navigation until
  the timeline and the first step's pane are drawn (target: 1 s);
* responsiveness: one key press that selects the last step, and a filter over every row,
  measured in the page.

    python bench/report_first_paint.py [--steps 1000] [--body-mb 10] [--passes 3]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _chat import MODEL, URL, shared_prompt, text

from otel_replay._canonical import sha256_tag
from otel_replay.replay import RecordedStep, Run
from otel_replay.report import render
from otel_replay.step import Step

TARGET_S = 1.0
RUN_ID = "r_20261129T080000_bench001"
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _step(index: int, kind: str, url: str, request: bytes, response: bytes, **more: object) -> Step:
    start = 1_795_000_000 * 10**9 + index * 40_000_000
    return Step(
        run_id=RUN_ID,
        index=index,
        trace_id=1,
        span_id=index + 1,
        kind=kind,
        method="POST" if kind == "llm" else "GET",
        url=url,
        request_headers=[("content-type", "application/json"), ("authorization", "REDACTED")],
        request_body=request,
        request_hash=sha256_tag(request),
        status_code=200,
        response_headers=[("content-type", "application/json")],
        response_body=response,
        response_hash=sha256_tag(response),
        complete=True,
        start_ns=start,
        end_ns=start + 5_000_000 + index % 17 * 3_000_000,
        **more,
    )


def synthetic_run(steps: int, body_bytes: int, seed: int = 7) -> Run:
    """``steps`` steps in episodes of ten, HTTP bodies sized so that all bodies come to about
    ``body_bytes``."""
    rng = random.Random(seed)
    system, tools = shared_prompt(seed)
    episodes = steps // 10
    # Model calls re-send ~3-12 KB of history each; the HTTP bodies make up the rest.
    http_size = max(1000, (body_bytes - episodes * 4 * 9000) // (episodes * 3))
    out: list[RecordedStep] = []

    def add(
        kind: str, url: str, endpoint: str, request: bytes, response: bytes, **more: object
    ) -> None:
        step = _step(len(out), kind, url, request, response, **more)
        out.append(RecordedStep(step, endpoint, "exact"))

    for episode in range(episodes):
        history: list[dict[str, object]] = [{"role": "system", "content": system}]
        for turn in range(4):
            history.append({"role": "user", "content": text(rng, rng.randint(200, 800))})
            body = {"model": MODEL, "messages": history, "tools": tools}
            answer = text(rng, rng.randint(200, 800))
            reply = {
                "id": f"chatcmpl-{episode}-{turn}",
                "object": "chat.completion",
                "model": MODEL,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": answer},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 900, "completion_tokens": 120, "total_tokens": 1020},
            }
            add(
                "llm",
                URL,
                "openai.chat_completions",
                json.dumps(body).encode(),
                json.dumps(reply).encode(),
                provider="openai",
                model=MODEL,
                tokens_in=900,
                tokens_out=120,
            )
            history.append({"role": "assistant", "content": answer})
            if turn < 3:
                arguments = json.dumps({"order_id": f"A-{episode:04d}", "turn": turn}).encode()
                result = json.dumps({"status": "shipped", "note": text(rng, 300)}).encode()
                tool = len(out)
                add("tool", "tool:lookup_order", "tool:lookup_order", arguments, result)
                size = rng.randint(http_size // 2, http_size * 3 // 2)
                page = json.dumps({"items": text(rng, size)}).encode()
                url = f"http://127.0.0.1:8080/tools/orders/{episode}?page={turn}"
                # The last one is made inside its tool (nested under it in the timeline).
                within = tool if turn == 2 else None
                add("http", url, f"GET /tools/orders/{episode}", b"", page, within=within)
    return Run(RUN_ID, "bench (synthetic)", tuple(out[:steps]))


def _unique_content(html: str) -> int:
    """Bytes of the page's contents table: each distinct message and body once, as JSON."""
    start = html.index('id="report-data">') + len('id="report-data">')
    document = json.loads(html[start : html.index("</script>", start)])
    return len(json.dumps(document["contents"], ensure_ascii=False).encode())


def _measure(path: Path, passes: int) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    paint, drawn, last, filtered = [], [], [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for _ in range(passes):
            page = browser.new_page(viewport={"width": 1500, "height": 900})
            started = time.perf_counter()
            page.goto(path.as_uri(), wait_until="commit")
            page.wait_for_selector("#pane h2")
            drawn.append(time.perf_counter() - started)
            paint.append(
                page.evaluate("performance.getEntriesByName('first-contentful-paint')[0].startTime")
                / 1000
            )
            last.append(
                page.evaluate(
                    "() => { const t = performance.now();"
                    " document.dispatchEvent(new KeyboardEvent('keydown', {key: 'End'}));"
                    " return performance.now() - t; }"
                )
                / 1000
            )
            filtered.append(
                page.evaluate(
                    "() => { const box = document.getElementById('filter');"
                    " const t = performance.now(); box.value = 'lookup';"
                    " box.dispatchEvent(new Event('input'));"
                    " return performance.now() - t; }"
                )
                / 1000
            )
            shown = page.locator("#count").inner_text()
            page.close()
        browser.close()
    print(f"  filter 'lookup' leaves: {shown}")
    return {
        "first contentful paint": statistics.median(paint),
        "timeline and pane drawn (wall)": statistics.median(drawn),
        "End key: last step selected": statistics.median(last),
        "filter over every row": statistics.median(filtered),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--body-mb", type=float, default=10.0)
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    run = synthetic_run(args.steps, int(args.body_mb * 1e6))
    bodies = sum(len(s.step.request_body) + len(s.step.response_body) for s in run.steps)
    started = time.perf_counter()
    html = render(run)
    rendered = time.perf_counter() - started
    unique = _unique_content(html)
    size = len(html.encode())
    print(f"run: {len(run.steps)} steps, {bodies / 1e6:.1f} MB of bodies")
    print(f"render (Python): {rendered:.2f} s")
    print(f"file: {size / 1e6:.2f} MB = {size / bodies:.2f}x the bodies' bytes")
    print(f"unique content: {unique / 1e6:.2f} MB; file / unique content = {size / unique:.2f}x")
    with tempfile.TemporaryDirectory(prefix="report-bench-") as scratch:
        path = Path(scratch) / "report.html"
        path.write_text(html, encoding="utf-8")
        figures = _measure(path, args.passes)
    for name, seconds in figures.items():
        print(f"{name}: {seconds * 1000:.0f} ms")
    first = figures["timeline and pane drawn (wall)"]
    verdict = "within" if first <= TARGET_S else "over"
    print(f"first paint {first:.2f} s: {verdict} the {TARGET_S:.0f} s target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
