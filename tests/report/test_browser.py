"""The report in a real browser: Debian's chromium, headless, driven by Playwright.

One recording of ``_agent`` (a step of every kind, one made inside a tool) serves every
test, with a fork of it (step 2's result overridden) and a replay of it with another system
prompt (``replay --report``). One browser for the module; every page is checked, after its
test, for console messages and for any request but the file's own load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page, sync_playwright

from examples.standin import StandIn
from otel_replay.replay import RecordedStep, Run
from otel_replay.report import render
from otel_replay.step import Step
from tests.cli._checks import run_cli
from tests.export._support import INSTRUMENT, ROOT, subprocess_env
from tests.report._agent import MARKUP, QUESTION, SECRET
from tests.report._document import document, run, step

pytestmark = pytest.mark.subprocess

CHROMIUM = Path("/usr/bin/chromium")
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
CLI = Path(sys.executable).parent / "otel-replay"
RUN = "r_report"
AGENT = [sys.executable, "-m", "tests.report._agent"]
CHAT = "http://llm.test/v1/chat/completions"
DEAD = "http://127.0.0.1:9"  # nothing listens: a request that got out would fail


@dataclass(frozen=True)
class Runs:
    """The store, the fork's id, and what ``replay --report`` wrote and exited with."""

    store: Path
    fork: str
    replay_report: Path
    replay_status: int


def _replay(store: Path, *args: str, cwd: Path, **env: str) -> subprocess.Popen[str]:
    """``otel-replay replay RUN ARGS -- AGENT``, started (the stand-in is gone)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "STANDIN_"))}
    return subprocess.Popen(
        [str(CLI), "replay", RUN, "--store", str(store), *args, "--", *AGENT],
        env=clean | {"STANDIN_URL": DEAD, "PYTHONPATH": str(ROOT), **env},
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    root = tmp_path_factory.mktemp("report-browser")
    store = root / "store"
    with StandIn(event_delay=0.001) as standin:
        done = subprocess.run(
            [str(INSTRUMENT), *AGENT],
            env=subprocess_env(
                store,
                OTEL_REPLAY_RUN_ID=RUN,
                OTEL_REPLAY_REDACT="tok_live_[0-9a-f]+",
                STANDIN_URL=standin.base_url,
            ),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    (root / "lost.json").write_text('{"order_id": "A-1234", "status": "lost"}')
    report = root / "replay.html"
    forking = _replay(store, "--override", "2=@lost.json", "--json", cwd=root)
    replaying = _replay(
        store, "--report", str(report), cwd=root, REPORT_AGENT_PROMPT="You are Bob."
    )
    forked, fork_errors = forking.communicate(timeout=120)
    _, replay_errors = replaying.communicate(timeout=120)
    assert forking.returncode == 1, fork_errors  # the next model call carries the result
    assert f"report written to {report}" in replay_errors
    return Runs(store, json.loads(forked)["replay_run_id"], report, replaying.returncode)


def write(runs: Runs, path: Path, *args: str) -> Path:
    """``otel-replay report ARGS -o PATH`` on the recorded store."""
    done = run_cli("report", *args, "-o", str(path), "--store", str(runs.store))
    assert done.exit_code == 0, done.output
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: `make setup` installs Debian's chromium"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield launched
        launched.close()


@dataclass
class _Seen:
    page: Page
    url: str
    console: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


@pytest.fixture
def view(browser: Browser) -> Iterator[Callable[[Path], Page]]:
    """``view(path)``: a new page on the report at ``path``, checked after the test for
    console messages (none) and requests (only its own load)."""
    seen: list[_Seen] = []

    def opened(path: Path) -> Page:
        page = browser.new_page(viewport={"width": 1500, "height": 900})
        watch = _Seen(page, path.as_uri())
        page.on("console", lambda m: watch.console.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: watch.console.append(f"page error: {e}"))
        page.on("request", lambda r: watch.requests.append(r.url))
        seen.append(watch)
        page.goto(watch.url)
        return page

    yield opened
    for watch in seen:
        watch.page.close()
        assert watch.console == []
        assert watch.requests == [watch.url]


def selected(page: Page) -> str:
    """The index cell of the selected timeline row (``3``; ``2 2`` in a diff)."""
    return page.locator(".row.selected .index").inner_text()


def test_the_timeline_shows_every_step_and_keys_move_the_selection(
    runs: Runs, view: Callable[[Path], Page], tmp_path: Path
) -> None:
    page = view(write(runs, tmp_path / "run.html", RUN))
    rows = page.locator(".row")
    assert rows.count() == 7
    assert page.locator("#count").inner_text() == "7 steps"
    kinds = [rows.nth(i).locator(".kind").inner_text().lower() for i in range(7)]
    assert kinds == ["value", "llm", "tool", "http", "llm", "checkpoint", "llm"]
    assert rows.nth(3).locator(".nest").count() == 1  # the HTTP call made inside the tool
    assert rows.nth(2).locator(".badge").inner_text() == "read"
    assert {rows.nth(i).locator(".fidelity").inner_text() for i in range(7)} == {"exact"}
    assert "fidelity: 7 exact, 0 semantic" in page.locator("header").inner_text()
    assert selected(page) == "0"
    for key, index in (("j", "1"), ("ArrowDown", "2"), ("j", "3"), ("k", "2"), ("ArrowUp", "1")):
        page.keyboard.press(key)
        assert selected(page) == index, key
    assert "gpt-4o-mini" in page.locator("#pane h2").inner_text()
    for _ in range(3):
        page.keyboard.press("k")  # past the first step: stays there
    assert selected(page) == "0"
    page.keyboard.press("End")
    assert selected(page) == "6"
    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")


def test_slash_focuses_the_filter_and_the_filter_keeps_matching_steps(
    runs: Runs, view: Callable[[Path], Page], tmp_path: Path
) -> None:
    page = view(write(runs, tmp_path / "run.html", RUN))
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "filter"
    page.keyboard.type("lookup_order")
    assert page.locator(".row").count() == 1
    assert page.locator("#count").inner_text() == "1 of 7 steps"
    assert "lookup_order" in page.locator("#pane h2").inner_text()
    page.keyboard.press("Escape")
    assert page.evaluate("document.activeElement.id") == "timeline"
    page.keyboard.press("/")
    page.keyboard.press("Control+a")
    page.keyboard.press("Backspace")
    page.keyboard.type("llm")
    assert page.locator("#count").inner_text() == "3 of 7 steps"
    page.keyboard.press("Enter")
    page.keyboard.press("j")
    assert selected(page) == "4"  # the second model call of the three


def test_the_pane_shows_the_prompt_the_answer_the_tool_call_and_its_result(
    runs: Runs, view: Callable[[Path], Page], tmp_path: Path
) -> None:
    page = view(write(runs, tmp_path / "run.html", RUN))
    for _ in range(4):
        page.keyboard.press("j")
    pane = page.locator("#pane")
    assert selected(page) == "4"

    # Instructions and tool definitions collapsed; the conversation open.
    def section(title: str) -> Locator:
        return pane.locator(f"details:has(> summary:text-is('{title}'))")

    system, tools = section("system instructions"), section("tool definitions (1)")
    assert system.get_attribute("open") is None and tools.get_attribute("open") is None
    prompt = section("prompt: 4 messages")
    assert prompt.get_attribute("open") is not None
    assert QUESTION in prompt.inner_text()
    assert "→ lookup_order" in prompt.locator(".tool-call").inner_text()
    assert '"order_id": "A-1234"' in prompt.locator(".tool-call").inner_text()
    assert '"status": "' in prompt.locator(".message.role-tool").inner_text()  # the result
    answer = section("response").inner_text()
    assert "A-1234" in answer and answer.count("finish: stop") == 1
    page.keyboard.press("k")  # the tool's own HTTP call: status and body
    text = pane.inner_text()
    assert "GET /tools/orders/A-1234" in text and "made inside step 2" in text
    assert "status\n200" in text and '"order_id": "A-1234"' in text
    assert "url\nhttp://" in text
    page.keyboard.press("k")  # the tool: its endpoint, once
    facts = pane.locator(".facts dt").all_inner_texts()
    assert "endpoint" in facts and "url" not in facts
    assert pane.inner_text().count("tool:lookup_order") == 1


def test_content_is_redacted_and_markup_is_text(
    runs: Runs, view: Callable[[Path], Page], tmp_path: Path
) -> None:
    path = write(runs, tmp_path / "run.html", RUN)
    assert SECRET not in path.read_text() and "sk-report-not-a-secret" not in path.read_text()
    page = view(path)
    page.keyboard.press("End")
    text = page.locator("#pane").inner_text()
    assert f"My loyalty token is REDACTED. {MARKUP}" in text
    assert page.locator("#pane img").count() == 0  # and the view fixture: it loaded nothing


def test_the_diff_opens_at_the_first_divergence_with_changes_marked(
    runs: Runs, view: Callable[[Path], Page], tmp_path: Path
) -> None:
    page = view(write(runs, tmp_path / "diff.html", RUN, "--diff", runs.fork))
    assert page.locator("#count").inner_text() == "7 aligned steps"
    assert "first divergence: step 2 of A" in page.locator("#verdict").inner_text()
    assert selected(page) == "2 2"
    row = page.locator(".row.selected")
    assert row.locator(".badge.fork").inner_text() == "override @lost.json"
    assert row.locator(".diff").inner_text() == "changed: response"
    pane = page.locator("#pane")
    assert "first divergence" in pane.locator(".pair-head").inner_text()
    status = pane.locator(".change", has_text="response $.status")
    assert status.locator(".before mark").inner_text() == "in transit"
    assert status.locator(".after mark").inner_text() == "lost"
    assert pane.locator(".columns.two .step").count() == 2
    page.keyboard.press("j")  # the HTTP call the fork did not make: its tool was served
    assert page.locator(".row.selected .diff").inner_text() == "inside a served step"
    page.keyboard.press("j")
    assert page.locator(".row.selected .diff").inner_text().startswith("changed: ")
    differs = pane.locator(".message.differs")  # the tool result it carried, in A and in B
    assert differs.count() == 2 and "lost" in differs.nth(1).inner_text()


def test_a_fork_marks_the_step_it_changed(
    runs: Runs, view: Callable[[Path], Page], tmp_path: Path
) -> None:
    page = view(write(runs, tmp_path / "fork.html", runs.fork))
    assert f"fork of {RUN}" in page.locator("header").inner_text()
    marked = page.locator(".row .badge.fork")
    assert marked.count() == 1 and marked.inner_text() == "override @lost.json"
    assert page.locator(".row").count() == 6  # the tool's HTTP call was not made again
    page.keyboard.press("j")
    page.keyboard.press("j")
    assert "override @lost.json" in page.locator("#pane").inner_text()


def test_replay_report_is_written_whatever_the_outcome(
    runs: Runs, view: Callable[[Path], Page]
) -> None:
    assert runs.replay_status == 1  # diverged: the system prompt changed
    page = view(runs.replay_report)
    header = page.locator("header").inner_text()
    assert f"replay of run {RUN}" in header and "diverged — step 1 differs" in header
    assert "B: the re-execution, recorded as run r_" in header
    assert selected(page) == "1 1"
    change = page.locator("#pane .change", has_text="system")
    assert change.locator(".before mark").inner_text().startswith("Ada")
    assert change.locator(".after mark").inner_text() == "Bob"


def test_a_pair_that_differs_in_status_shows_both(
    view: Callable[[Path], Page], tmp_path: Path
) -> None:
    url = "http://tools.test/orders/A-1"
    ok, limited = step(0, url, b"", b'{"ok": true}'), step(0, url, b"", b"{}", status=429)
    path = tmp_path / "pair.html"
    path.write_text(render(run(ok), other=run(limited, run_id="r_other")), encoding="utf-8")
    page = view(path)
    row = page.locator(".row.selected")
    assert row.locator(".status").inner_text() == "200 | 429"
    assert row.locator(".status").get_attribute("title") == "200 | 429"
    assert "failed" in (row.get_attribute("class") or "")


def test_json_bodies_are_laid_out_with_their_numbers_as_recorded(
    view: Callable[[Path], Page], tmp_path: Path
) -> None:
    # An MCP tool's JSON text (an id past 2**53, a price written 148.0), as the HTTP
    # answer of a tool and as the tool result in the next prompt.
    said = '{"big_id": 12345678901234567890, "price": 148.0, "2": "b", "1": "a", "none": {}}'
    path = tmp_path / "numbers.html"
    steps = (
        step(0, "http://tools.test/stock/A-1234", b"", said.encode()),
        _answered_tool_call(1, said),
    )
    path.write_text(render(run(*steps)), encoding="utf-8")
    page = view(path)
    laid_out = (
        '{\n  "big_id": 12345678901234567890,\n  "price": 148.0,\n  "2": "b",\n  "1": "a",\n'
        '  "none": {}\n}'
    )
    assert page.locator("#pane pre.body").first.inner_text() == laid_out
    page.keyboard.press("j")
    assert page.locator("#pane .tool-result pre.body").inner_text() == laid_out


def test_a_string_holding_json_is_laid_out_and_on_demand_as_recorded(
    view: Callable[[Path], Page], tmp_path: Path
) -> None:
    # An MCP tool's result on the wire (its text content a JSON document, an id past 2**53,
    # a price written 129.0), then the tool result in the next prompt as LangChain's
    # content-and-artifact tool sends it: a list of text blocks.
    held = '{\n  "order_id": "A-1234",\n  "id": 12345678901234567890,\n  "total": 129.0\n}'
    result = {"content": [{"type": "text", "text": held}], "isError": False}
    blocks = [{"type": "text", "text": '{"order_id": "B-2041", "status": "lost in transit"}'}]
    path = tmp_path / "held.html"
    steps = (
        step(0, "tool:lookup_order", b"{}", json.dumps(result).encode(), kind="tool"),
        _answered_tool_call(1, blocks),
    )
    path.write_text(render(run(*steps)), encoding="utf-8")
    page = view(path)
    section = page.locator("#pane details:has(> summary:text-is('response'))")
    response = section.locator("pre.body")
    laid_out = (
        '{\n  "content": [\n    {\n      "type": "text",\n      "text": {\n'
        '        "order_id": "A-1234",\n        "id": 12345678901234567890,\n'
        '        "total": 129.0\n      }\n    }\n  ],\n  "isError": false\n}'
    )
    assert response.inner_text() == laid_out
    marked = response.locator(".json-string")
    assert marked.inner_text().startswith('{\n        "order_id"')
    assert marked.get_attribute("title") == "a string holding JSON, laid out"
    # The recorded text, one string as the tool sent it, a click away and back.
    toggle = section.locator("button.strings")
    toggle.click()
    assert f'"text": {json.dumps(held)}' in response.inner_text()
    assert response.locator(".json-string").count() == 0
    toggle.click()
    assert response.inner_text() == laid_out

    page.keyboard.press("j")
    content = page.locator("#pane .tool-result pre.body").inner_text()
    assert '"content": {\n      "order_id": "B-2041",\n      "status": "lost in transit"' in content


# Whether an element is as wide as it would be if nothing in its row squeezed it.
WHOLE = """e => {
  const shown = e.getBoundingClientRect().width;
  e.style.flex = "none"; e.style.maxWidth = "none";
  const whole = e.getBoundingClientRect().width;
  e.style.flex = ""; e.style.maxWidth = "";
  return shown >= whole - 0.01;
}"""


def test_a_long_fork_badge_is_cut_before_the_tool_name(
    view: Callable[[Path], Page], tmp_path: Path
) -> None:
    given = "override @/tmp/forks/of/the/refund/case/a-result-file-with-a-long-name.json"
    served = step(0, "tool:lookup_order", b"{}", b'{"status": "lost"}', kind="tool")
    forked = RecordedStep(
        served,
        "tool:lookup_order",
        "exact",
        attributes={"replay.fork.change": given, "replay.mode": "fork"},
    )
    path = tmp_path / "badge.html"
    path.write_text(render(Run("r_fork", "test", (forked,))), encoding="utf-8")
    page = view(path)
    page.set_viewport_size({"width": 1000, "height": 700})
    row = page.locator(".row.selected")
    label, badge = row.locator(".label"), row.locator(".badge.fork")
    assert badge.get_attribute("title") == given  # the whole on hover
    assert badge.inner_text() == "override @…/a-result-file-with-a-long-name.json"
    # The name whole (as wide as it is when nothing squeezes it), the badge cut short, both
    # inside the name's cell.
    assert label.evaluate(WHOLE), label.inner_text()
    assert not badge.evaluate(WHOLE)
    name, box = row.locator(".name").bounding_box(), badge.bounding_box()
    assert name is not None and box is not None
    assert box["x"] + box["width"] <= name["x"] + name["width"] + 0.5


def _answered_tool_call(index: int, content: Any) -> Step:
    """Step ``index``: a model call whose prompt holds a call of ``lookup_order`` and its
    result, ``content`` (a tool message's content: text, or a list of blocks)."""
    asked = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "user", "content": "Where is my order?"},
            {"role": "assistant", "tool_calls": [_call("call_1", "lookup_order", "{}")]},
            {"role": "tool", "tool_call_id": "call_1", "content": content},
        ],
    }
    answer = {"choices": [{"message": {"role": "assistant", "content": "Here it is."}}]}
    return step(index, CHAT, json.dumps(asked).encode(), json.dumps(answer).encode(), kind="llm")


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_a_long_difference_is_cut_in_the_list_of_changes(
    view: Callable[[Path], Page], tmp_path: Path
) -> None:
    # A fork's stream cut after 200 bytes: all the rest of A's answer differs.
    answer = b"".join(b'data: {"delta": "word %d"}\n\n' % i for i in range(400))
    whole, cut = (step(0, "http://tools.test/feed", b"", body) for body in (answer, answer[:200]))
    path = tmp_path / "cut.html"
    path.write_text(render(run(whole), other=run(cut, run_id="r_cut")), encoding="utf-8")
    page = view(path)
    before = page.locator(".change .before mark").inner_text()
    assert before.endswith("…") and len(before) == 321 and '"word 8"' in before
    assert page.locator(".change .after").inner_text().endswith('data: {"del')  # B's end
    assert '"word 399"' in page.locator(".columns pre.body").first.inner_text()  # A whole


def test_a_run_without_steps_says_so(view: Callable[[Path], Page], tmp_path: Path) -> None:
    path = tmp_path / "empty.html"
    path.write_text(render(run()), encoding="utf-8")
    page = view(path)
    assert page.locator(".row").count() == 0
    assert page.locator("#count").inner_text() == "0 steps"
    assert page.locator("#pane").inner_text() == "the run has no steps"


def test_a_thousand_steps_draw_only_the_rows_in_view(
    view: Callable[[Path], Page], tmp_path: Path
) -> None:
    steps = [step(i, f"http://tools.test/orders/{i}", b"", b'{"n": %d}' % i) for i in range(1000)]
    path = tmp_path / "large.html"
    path.write_text(render(run(*steps)), encoding="utf-8")
    page = view(path)
    assert page.locator("#count").inner_text() == "1000 steps"
    assert 0 < page.locator(".row").count() < 100
    page.keyboard.press("End")
    assert selected(page) == "999" and page.locator(".row.selected").is_visible()
    assert page.locator("#pane .step").count() == 1 and '"n": 999' in page.inner_text("#pane")
    page.keyboard.press("/")
    page.keyboard.type("99")  # 99, 199 ... 899 and 990 ... 999
    assert page.locator("#count").inner_text() == "19 of 1000 steps"
    assert page.locator(".row").count() == 19


def test_a_model_call_no_codec_reads_shows_its_bodies(
    view: Callable[[Path], Page], tmp_path: Path
) -> None:
    unread = step(0, "http://llm.test/v1/chat/completions", b"prompt=hi", b"busy", kind="llm")
    path = tmp_path / "unread.html"
    path.write_text(render(run(unread)), encoding="utf-8")
    text = view(path).locator("#pane").inner_text()
    assert "request body\nprompt=hi" in text and "response body\nbusy" in text


def test_the_diff_scrolls_the_timeline_to_a_late_first_divergence(
    view: Callable[[Path], Page], tmp_path: Path
) -> None:
    def steps(diverging: int | None) -> list[Step]:
        return [
            step(i, f"http://tools.test/orders/{i}", b"", b'{"n": %d}' % (i * (i != diverging)))
            for i in range(60)
        ]

    path = tmp_path / "long.html"
    path.write_text(render(run(*steps(None)), other=run(*steps(50), run_id="r_b")))
    page = view(path)
    assert selected(page) == "50 50"
    assert page.evaluate("document.getElementById('timeline').scrollTop") > 0
    row = page.locator(".row.selected").bounding_box()
    timeline = page.locator("#timeline").bounding_box()
    assert row is not None and timeline is not None
    assert (
        timeline["y"] <= row["y"] and row["y"] + row["height"] <= timeline["y"] + timeline["height"]
    )


def test_status_says_incomplete_and_an_error_once(
    view: Callable[[Path], Page], tmp_path: Path
) -> None:
    url = "http://tools.test/orders/"
    cut = replace(
        step(0, url + "1", b"", b"{"), complete=False, error_type="httpx.RemoteProtocolError"
    )
    # Capture records an error response as not complete, with its code as its error type.
    missing = replace(step(1, url + "2", b"", b"{}", status=404), complete=False, error_type="404")
    path = tmp_path / "status.html"
    path.write_text(render(run(cut, missing)))
    page = view(path)
    statuses = page.locator(".row .status")
    assert statuses.nth(0).inner_text() == "200 incomplete httpx.RemoteProtocolError"
    assert statuses.nth(1).inner_text() == "404"
    assert "status\n200 incomplete httpx.RemoteProtocolError" in page.inner_text("#pane")
    page.keyboard.press("/")
    page.keyboard.type("incomplete")
    assert page.locator("#count").inner_text() == "1 of 2 steps"


def test_every_step_of_a_fork_starts_on_one_clock(runs: Runs, tmp_path: Path) -> None:
    """A fork's steps, HTTP and envelope alike, are timed by the wall clock (the application's
    reads the recorded run's): the offsets are the ones ``show --json`` gives."""
    shown = run_cli("show", runs.fork, "--json", "--store", str(runs.store))
    assert shown.exit_code == 0, shown.output
    starts = {s["index"]: s["start_ns"] for s in json.loads(shown.output)["steps"]}
    first = min(starts.values())
    page = document(write(runs, tmp_path / "fork.html", runs.fork).read_text())
    offsets = {s["index"]: s["offset_ms"] for s in page["steps"]}
    kinds = {s["kind"] for s in page["steps"]}
    assert {"llm", "tool", "value"} <= kinds
    assert offsets == pytest.approx({i: (t - first) / 1e6 for i, t in starts.items()})


def test_long_statuses_badges_and_run_ids_fit_their_places(
    runs: Runs, view: Callable[[Path], Page], tmp_path: Path
) -> None:
    page = view(write(runs, tmp_path / "diff.html", RUN, "--diff", runs.fork))
    row = page.locator(".row.selected")
    name, badge, diff = (row.locator(sel).bounding_box() for sel in (".name", ".fork", ".diff"))
    assert name is not None and badge is not None and diff is not None
    assert badge["x"] + badge["width"] <= min(name["x"] + name["width"], diff["x"]) + 0.5
    assert "override @lost.json" in (row.locator(".name").get_attribute("title") or "")
    page.set_viewport_size({"width": 1000, "height": 700})
    for term in page.locator(".run dt").all():
        box = term.bounding_box()
        assert box is not None and box["height"] < 24, term.inner_text()  # one line


def test_a_refused_model_call_shows_its_body_once_and_unknown_request_bytes(
    view: Callable[[Path], Page], tmp_path: Path
) -> None:
    chat = "http://llm.test/v1/chat/completions"
    asked = b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}'
    limited = step(0, chat, asked, b'{"error": {"type": "rate_limit_error"}}', "llm", 429)
    limited = replace(limited, error_type="rate_limit_error")
    unsent = step(1, "http://tools.test/orders/A-1", b"", b'{"ok": true}')
    path = tmp_path / "refused.html"
    recorded = Run(
        "r_page",
        "test",
        (
            RecordedStep(limited, "openai.chat_completions", "exact"),
            RecordedStep(unsent, "A-1", "exact", request_known=False),
        ),
    )
    path.write_text(render(recorded))
    page = view(path)
    pane = page.locator("#pane")
    assert pane.locator("summary").all_inner_texts() == [
        "prompt: 1 message",
        "response body",
        "headers",
    ]
    assert page.locator(".row .status").nth(0).get_attribute("title") == "429 rate_limit_error"
    page.keyboard.press("j")
    text = pane.inner_text()
    assert "bytes\nrequest not known, 12 response" in text
    assert "the request's are not known" in text
