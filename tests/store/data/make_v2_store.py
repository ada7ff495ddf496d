"""Make ``v2-store/`` and ``v2-store.json``: a format-version-2 store and what it held.

Run it with the code that wrote version 2 (commit eeb3b2e, the last one), from a worktree::

    git worktree add /tmp/v2src eeb3b2e
    PYTHONPATH=/tmp/v2src .venv/bin/python tests/store/data/make_v2_store.py

It records the CLI tests' three runs (a support agent's chat and tool calls, a flaky run with
a 429 and a cut stream, an Anthropic streamed run) against the stand-in provider, pins one,
adds a step to one from a second writer (a second stream), and writes, beside the store,
every step and span that version 2's own reader gives back: what ``migrate`` must carry over.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from otel_replay.store import Store
from otel_replay.store._format import FORMAT_VERSION
from tests.cli._recording import ERRORS, SUPPORT, record

HERE = Path(__file__).resolve().parent


def main() -> None:
    assert FORMAT_VERSION == 2, "run this with the code of format version 2 (see the docstring)"
    with tempfile.TemporaryDirectory() as scratch:
        recorded = record(Path(scratch))
        with Store.open(recorded.store) as store:
            store.pin(SUPPORT)
        with Store.open(recorded.store) as second:  # another writer: a stream of its own
            extra = recorded.steps[ERRORS][0]
            extra.index = 99
            second.put([extra])
        target = HERE / "v2-store"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(recorded.store, target)
    runs = []
    with Store.open(target, create=False) as store:
        for run in store.runs():
            steps = []
            for info in store.steps(run.run_id):
                step = store.read_step(info)
                steps.append(
                    {
                        "index": step.index,
                        "kind": step.kind,
                        "method": step.method,
                        "url": step.url,
                        "request_headers": step.request_headers,
                        "request_hash": step.request_hash,
                        "status_code": step.status_code,
                        "response_headers": step.response_headers,
                        "response_hash": step.response_hash,
                        "chunks": step.chunks,
                        "complete": step.complete,
                        "error_type": step.error_type,
                        "start_ns": step.start_ns,
                        "end_ns": step.end_ns,
                        "trace_id": step.trace_id,
                        "span_id": step.span_id,
                        "provider": info.provider,
                        "model": info.model,
                        "tokens_in": info.tokens_in,
                        "tokens_out": info.tokens_out,
                    }
                )
            runs.append(
                {
                    "run_id": run.run_id,
                    "pinned": run.pinned,
                    "seed": run.seed,
                    "commit": run.commit,
                    "steps": steps,
                    "spans": store.spans(run.run_id),
                }
            )
    (HERE / "v2-store.json").write_text(json.dumps(runs, indent=1, sort_keys=True) + "\n")
    for path in target.glob("index.sqlite-*"):
        path.unlink()


if __name__ == "__main__":
    main()
