"""`make demo`: record the example agent through OpenTelemetry, show the run, and replay it.

1. Start the local stand-in model provider (OpenAI and Anthropic wire protocols, streaming
   included) and a local OTLP receiver standing in for Jaeger or a Collector.
2. Run the support agent, unmodified, under `opentelemetry-instrument` with
   `OTEL_TRACES_EXPORTER=otlp,replay`: the `otel_replay` instrumentor is loaded from its entry
   point, the agent's openai (httpx2) and tool (httpx) calls become spans; the OTLP exporter
   ships them over HTTP/protobuf while the `replay` exporter writes byte-exact fixtures into
   the store (`OTEL_REPLAY_STORE`, default `./.otel-replay`).
3. Check each step the backend received against the exact bytes the stand-in received, then
   show the run with `otel-replay runs`, `otel-replay show` and `otel-replay verify`.
4. Stop the stand-in and replay the run with `otel-replay replay RUN -- python
   examples/support_agent.py`: identical, no socket opened. Then replay it with another system
   prompt: the report names the first step that differs and what differs in it.
5. The world beyond HTTP: record `examples/orders_agent.py`, whose tools read and write a
   SQLite database and which asks `otel_replay.now()` and `uuid4()`; then mark the order
   delivered in the database, stop the stand-in and replay: the agent prints what it printed
   when recorded (the order still "shipped", the same ticket id and time) and the refund is
   not written again.
6. What if: fork the support agent's run with a 429 injected at its first model call
   (`--inject N=http:429`): the SDK retries, the retry is served from the recording, the
   agent answers as recorded; then `otel-replay diff` of the recording against the fork.
7. See it: `otel-replay report` writes `report.html` (the run) and `report-fork.html` (the
   fork against it, opened at the first divergence) beside the store.

No API key, no network beyond loopback.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from contextlib import closing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from examples.otlp_sink import OtlpSink  # noqa: E402
from examples.standin import StandIn  # noqa: E402

CHANGED_PROMPT = "You are Ada. Answer in one short sentence."


def _cli(*args: str, **env: str) -> int:
    command = [str(Path(sys.executable).with_name("otel-replay")), *args]
    shown = " ".join(f"{k}={v!r}" for k, v in env.items())
    print(f"\n$ {shown + ' ' if shown else ''}otel-replay {' '.join(args)}")
    return subprocess.run(command, cwd=ROOT, env=os.environ | env, check=False).returncode


def main() -> int:
    store = os.environ.get("OTEL_REPLAY_STORE", str(ROOT / ".otel-replay"))
    with StandIn() as standin, OtlpSink() as sink:
        env = {
            **os.environ,
            "STANDIN_URL": standin.base_url,
            "OTEL_SERVICE_NAME": "support-agent",
            "OTEL_TRACES_EXPORTER": "otlp,replay",
            "OTEL_REPLAY_STORE": store,
            "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_LOGS_EXPORTER": "none",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_ENDPOINT": sink.http_endpoint,
            "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "httpx,httpx2,openai,openai_v2,openai_agents",
        }
        instrument = Path(sys.executable).with_name("opentelemetry-instrument")
        print(
            f"$ opentelemetry-instrument python examples/support_agent.py   "
            f"(stand-in {standin.base_url}, OTLP -> {sink.http_endpoint})\n"
        )
        done = subprocess.run(
            [str(instrument), sys.executable, str(ROOT / "examples" / "support_agent.py")],
            env=env,
            cwd=ROOT,
            check=False,
        )
        if done.returncode != 0:
            print(f"demo: the agent exited with {done.returncode}", file=sys.stderr)
            return done.returncode
        received = standin.received
        spans = sink.wait_for_spans(
            lambda got: sum("replay.step.index" in s["attributes"] for s in got) >= len(received),
            timeout=10,
        )

    by_index = sorted(
        (s for s in spans if "replay.step.index" in s["attributes"]),
        key=lambda s: s["start_ns"],
    )
    matches = sum(
        span["attributes"]["replay.request.hash"]
        == "sha256:" + hashlib.sha256(request.body).hexdigest()
        for span, request in zip(by_index, received, strict=True)
    )
    run_id = by_index[0]["attributes"]["replay.run.id"]
    print(
        f"\n{len(by_index)} steps exported over OTLP in run {run_id}; {matches}/{len(received)} "
        "request hashes equal sha256 of the bytes the stand-in got."
    )
    if matches != len(received):
        return 1
    for args in (("runs", "--limit", "5"), ("show", run_id), ("verify",)):
        code = _cli(*args, "--store", store)
        if code != 0:
            return code
    return _replay(store, run_id)


def _replay(store: str, run_id: str) -> int:
    """Replay the run with the stand-in stopped: first as is (identical, exit 0), then with a
    changed system prompt (the divergence report, exit 1)."""
    agent = ["--", sys.executable, str(ROOT / "examples" / "support_agent.py")]
    print("\nThe stand-in is stopped: the replay has no provider, no network and no API key.")
    code = _cli("replay", run_id, "--store", store, *agent)
    if code != 0:
        print(f"demo: the replay should have been identical (exit {code})", file=sys.stderr)
        return code or 1
    print(f"\nNow with another system prompt ({CHANGED_PROMPT!r}):")
    code = _cli("replay", run_id, "--store", store, *agent, SUPPORT_SYSTEM_PROMPT=CHANGED_PROMPT)
    if code != 1:
        print(f"demo: the changed prompt should have diverged (exit {code})", file=sys.stderr)
        return 1
    print("\ndemo: recorded, replayed identically, and the changed prompt diverged as reported.")
    return _tools(store) or _what_if(store, run_id)


def _tools(store: str) -> int:
    """Record the order-desk agent (SQLite tools, clock, uuid), change the database, and
    replay it with the stand-in stopped: identical, and no write repeated."""
    agent = [sys.executable, str(ROOT / "examples" / "orders_agent.py")]
    with tempfile.TemporaryDirectory(prefix="otel-replay-demo-") as scratch:
        database = str(Path(scratch) / "orders.sqlite")
        run_id = "r_demo_orders_" + os.urandom(4).hex()
        print("\n$ opentelemetry-instrument python examples/orders_agent.py orders.sqlite\n")
        with StandIn() as standin:
            done = subprocess.run(
                [str(Path(sys.executable).with_name("opentelemetry-instrument")), *agent, database],
                env=os.environ
                | {
                    "STANDIN_URL": standin.base_url,
                    "OTEL_TRACES_EXPORTER": "replay",
                    "OTEL_METRICS_EXPORTER": "none",
                    "OTEL_LOGS_EXPORTER": "none",
                    "OTEL_REPLAY_STORE": store,
                    "OTEL_REPLAY_RUN_ID": run_id,
                },
                cwd=ROOT,
                check=False,
            )
        if done.returncode != 0:
            print(f"demo: the orders agent exited with {done.returncode}", file=sys.stderr)
            return done.returncode
        with closing(sqlite3.connect(database)) as db, db:
            db.execute("UPDATE orders SET status = 'delivered'")
            refunds = db.execute("SELECT count(*) FROM refunds").fetchone()[0]
        print(f"\nThe order is now delivered in the database, which holds {refunds} refund(s).")
        code = _cli("replay", run_id, "--store", store, "--", *agent, database)
        with closing(sqlite3.connect(database)) as db, db:
            after = db.execute("SELECT count(*) FROM refunds").fetchone()[0]
    if code != 0 or after != refunds:
        print(f"demo: the tools replay should be identical (exit {code})", file=sys.stderr)
        return code or 1
    print(f"\ndemo: the tools were served from the recording; still {after} refund(s).")
    return 0


def _what_if(store: str, run_id: str) -> int:
    """Fork the support agent's run with the provider rate-limiting its first model call (an
    injected 429): the SDK retries, the retry is served from the recording, and the agent
    answers as recorded. Then diff the recording against the fork."""
    shown = subprocess.run(
        [str(Path(sys.executable).with_name("otel-replay")), "show", run_id, "--json"],
        env=os.environ | {"OTEL_REPLAY_STORE": store},
        capture_output=True,
        text=True,
        check=True,
    )
    step = next(s["index"] for s in json.loads(shown.stdout)["steps"] if s["kind"] == "llm")
    agent = ["--", sys.executable, str(ROOT / "examples" / "support_agent.py")]
    print(f"\nWhat if the provider had rate-limited step {step}?")
    code = _cli("replay", run_id, "--store", store, "--inject", f"{step}=http:429", *agent)
    if code != 0:
        print(f"demo: the agent should have got over the 429 (exit {code})", file=sys.stderr)
        return code or 1
    listed = subprocess.run(
        [str(Path(sys.executable).with_name("otel-replay")), "runs", "--mode", "fork", "--json"],
        env=os.environ | {"OTEL_REPLAY_STORE": store},
        capture_output=True,
        text=True,
        check=True,
    )
    fork = next(r["run_id"] for r in json.loads(listed.stdout) if r["parent_run_id"] == run_id)
    _cli("diff", run_id, fork, "--store", store)  # exit 1: the fork has the 429 and the retry
    print(f"\ndemo: forked run {run_id} with a 429 at step {step}; the agent got over it.")
    return _reports(store, run_id, fork)


def _reports(store: str, run_id: str, fork: str) -> int:
    """Write the step-through HTML reports of the run and of the fork against it, beside the
    store."""
    where = Path(store).resolve().parent
    recorded, forked = where / "report.html", where / "report-fork.html"
    for args in ((run_id, "-o", str(recorded)), (run_id, "--diff", fork, "-o", str(forked))):
        code = _cli("report", *args, "--store", store)
        if code != 0:
            return code
    print(f"\ndemo: open in a browser: {recorded} (the run), {forked} (the fork against it).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
