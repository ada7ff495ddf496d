"""Make ``v3-store/`` and ``v3-store.json``: a format-version-3 store and what it held.

Run it with the code that wrote version 3 (main before format 4), from its worktree::

    cd /path/to/v3-worktree
    PYTHONPATH=$PWD python /path/to/tests/store/data/make_v3_store.py

It records the CLI tests' three runs (real openai and anthropic SDKs against the stand-in:
chat with tool calls, streamed answers, a 429, a cut stream, an Anthropic stream), pins one,
adds two spans to it that its steps do not derive (a foreign span, and a step's span whose
``gen_ai.input.messages`` was edited), and writes, beside the store, every step and span that
version 3's own reader gives back: what ``migrate`` must keep.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from otel_replay.store import Store
from otel_replay.store._format import FORMAT_VERSION
from tests.cli._recording import SUPPORT, record

HERE = Path(__file__).resolve().parent


def main() -> None:
    assert FORMAT_VERSION == 3, "run this with the code of format version 3 (see the docstring)"
    with tempfile.TemporaryDirectory() as scratch:
        recorded = record(Path(scratch))
        spans = recorded.spans[SUPPORT]
        model_call = next(s for s in spans if "gen_ai.input.messages" in s["attributes"])
        edited = {
            **model_call,
            "span_id": "00000000000000e1",
            "attributes": {
                **model_call["attributes"],
                "gen_ai.input.messages": '[{"role":"user","parts":[]}]',
            },
        }
        foreign = {
            **model_call,
            "name": "chat gpt-4o (another instrumentation)",
            "span_id": "00000000000000e2",
            "attributes": {
                "replay.run.id": SUPPORT,
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": '[{"role":"user","content":"' + "x" * 1500 + '"}]',
                "gen_ai.output.messages": '[{"role":"assistant","content":"hello"}]',
            },
        }
        with Store.open(recorded.store) as store:
            store.pin(SUPPORT)
            recording = store.recording_of(SUPPORT)
        with Store.open(recorded.store, recording=recording, inherited_runs=[SUPPORT]) as store:
            store.put(spans=[edited, foreign])
        target = HERE / "v3-store"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(recorded.store, target, ignore=shutil.ignore_patterns("LOCK"))
    runs = []
    with Store.open(target, create=False) as store:
        for run in store.runs():
            steps = [
                {
                    "index": info.index,
                    "request_hash": info.request_hash,
                    "response_hash": info.response_hash,
                    "headers": store.read_step(info).response_headers,
                }
                for info in store.steps(run.run_id)
            ]
            runs.append(
                {
                    "run_id": run.run_id,
                    "pinned": run.pinned,
                    "status": run.status,
                    "steps": steps,
                    "spans": store.spans(run.run_id),
                }
            )
    (HERE / "v3-store.json").write_text(json.dumps(runs, indent=1) + "\n")
    for path in [*target.glob("index.sqlite-*"), target / "LOCK"]:
        path.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
