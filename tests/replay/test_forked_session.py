"""A replay session shared with forked worker processes: one account of what was served, one
numbering of the requests, one report file whose lines never interleave."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from otel_replay._canonical import sha256_tag
from otel_replay.replay import Run
from otel_replay.replay._session import ReplaySession
from tests.replay._recorded import recorded_step

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here"),
    # Python 3.12+ warns of fork() in a process with threads; these children only match.
    pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning"),
]

URL = "http://llm.test/v1/chat/completions"
SAME = b'{"model": "m", "messages": [{"role": "user", "content": "same question"}]}'


def _run(count: int, body: bytes = SAME) -> Run:
    steps = tuple(
        recorded_step(
            index=n,
            kind="llm",
            endpoint="openai.chat_completions",
            method="POST",
            url=URL,
            request_body=body,
            request_hash=sha256_tag(body),
            status_code=200,
            response_headers=(("content-type", "application/json"),),
            response_body=b'{"n": %d}' % n + b" " * 9000,  # longer than a pipe's atomic write
            fidelity="exact",
        )
        for n in range(count)
    )
    return Run(run_id="r_forked", source="test", steps=steps)


def _ask(session: ReplaySession) -> int:
    answer = session.answer("POST", URL, SAME)
    assert answer is not None
    return int(json.loads(b"".join(answer.chunks))["n"])


def _in_children(count: int, each: int, session: ReplaySession) -> list[int]:
    """Fork ``count`` children that each ask ``each`` times; the steps they were given."""
    reader, writer = os.pipe()
    children = []
    for _ in range(count):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's coverage is not collected
            try:
                got = [_ask(session) for _ in range(each)]
                os.write(writer, json.dumps(got).encode() + b"\n")
            finally:
                os._exit(0)
        children.append(pid)
    os.close(writer)
    for pid in children:
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    with os.fdopen(reader) as lines:
        return [n for line in lines for n in json.loads(line)]


@pytest.mark.subprocess
def test_no_step_is_served_twice_across_processes(tmp_path: Path) -> None:
    report = tmp_path / "events.jsonl"
    with open(report, "ab", buffering=0) as file:
        session = ReplaySession(_run(14), report=file)
        first = _ask(session)  # the parent asks before the fork, then along with the children
        served = _in_children(4, 3, session)
        served += [_ask(session)]
        session.close()
    # Identical requests take the recorded steps in order, whichever process asks: each once.
    assert first == 0
    assert sorted([first, *served]) == list(range(14))
    events = [json.loads(line) for line in report.read_bytes().splitlines()]
    steps = [e for e in events if e["type"] == "step"]
    assert sorted(e["order"] for e in steps) == list(range(14))  # numbered across processes
    assert sorted(e["recorded"] for e in steps) == list(range(14))
    assert not any(e["repeat"] for e in steps)
    (start,) = [e for e in events if e["type"] == "start"]
    assert start["pid"] == os.getpid()
    assert session.matcher.unused() == []


@pytest.mark.subprocess
def test_a_step_beyond_the_recording_is_a_repeat_in_whichever_process_asks() -> None:
    session = ReplaySession(_run(2))
    served = _in_children(3, 1, session)
    assert sorted(served) == [0, 1, 1]  # the last recorded answer, served again
    assert session.matcher.served_count(1) == 2
