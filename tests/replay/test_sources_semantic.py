"""Steps without recorded bytes: synthesised (semantic) model calls, transport errors, and
what cannot be rebuilt at all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otel_replay.codecs.openai_chat import OPENAI_CHAT as CHAT
from otel_replay.errors import SourceError
from otel_replay.replay.sources import load_run, load_sources
from tests.replay.conftest import (
    ERRORS,
    LARGE,
    SUPPORT,
    Recorded,
    collector_json,
    protobuf_json,
    run_spans,
)


def output_of(body: bytes, streamed: bool) -> list[dict[str, Any]]:
    return CHAT.parse_response(200, body, streamed).output_messages


def test_trace_of_the_official_openai_instrumentation_replays_semantically(
    recorded: Recorded, tmp_path: Path
) -> None:
    path = tmp_path / "official.json"
    path.write_text(json.dumps(protobuf_json(recorded.official)))
    run = load_run(str(path))
    trace_id = f"{recorded.official[0].context.trace_id:032x}"
    assert run.run_id == trace_id
    assert (run.commit, run.seed, run.code_dirty) == (None, None, None)
    assert len(run.steps) == 2
    for semantic, exchange, streamed in zip(
        run.steps, recorded.exchanges["official"], (False, True), strict=True
    ):
        assert semantic.fidelity == "semantic"
        assert semantic.step.kind == "llm" and semantic.endpoint == "openai.chat_completions"
        assert semantic.request_body is None and semantic.step.request_hash == ""
        assert semantic.step.status_code == 200 and semantic.step.model == "gpt-4o-mini"
        # The answer the application read then is the answer it reads now.
        assert output_of(semantic.step.response_body, False) == output_of(
            bytes(exchange.response), streamed
        )


def test_steps_over_the_inline_limit_are_semantic_from_otlp_and_exact_from_the_store(
    recorded: Recorded, store: Path, tmp_path: Path
) -> None:
    path = tmp_path / "large.json"
    path.write_text(json.dumps(collector_json(run_spans(recorded, LARGE))))
    (exchange,) = recorded.exchanges[LARGE]
    (semantic,) = load_run(str(path)).steps
    assert semantic.fidelity == "semantic"
    assert semantic.request_body is None
    assert (
        semantic.step.request_hash == load_run(LARGE, store=str(store)).steps[0].step.request_hash
    )
    assert output_of(semantic.step.response_body, False) == output_of(
        bytes(exchange.response), False
    )
    (exact,) = load_run(LARGE, store=str(store)).steps
    assert exact.fidelity == "exact" and exact.step.response_body == bytes(exchange.response)


def test_errors_keep_their_type_and_a_transport_error_has_no_response(
    recorded: Recorded, store: Path, tmp_path: Path
) -> None:
    path = tmp_path / "errors.json"
    path.write_text(json.dumps(collector_json(run_spans(recorded, ERRORS))))
    for run in (load_run(str(path)), load_run(ERRORS, store=str(store))):
        rate_limited, cut, refused = run.steps
        assert rate_limited.step.status_code == 429 and rate_limited.step.error_type
        assert rate_limited.step.response_body == bytes(recorded.exchanges[ERRORS][0].response)
        assert cut.step.status_code == 200 and not cut.step.complete
        assert cut.step.response_body == bytes(recorded.exchanges[ERRORS][1].response)
        assert refused.step.kind == "http" and refused.step.status_code is None
        assert refused.step.error_type is not None and "ConnectError" in refused.step.error_type
        assert refused.step.response_body == b"" and refused.fidelity == "exact"


def _strip(document: Any, *keys: str) -> Any:
    if isinstance(document, list):
        return [_strip(item, *keys) for item in document]
    if isinstance(document, dict):
        if isinstance(document.get("attributes"), list):
            document = {
                **document,
                "attributes": [a for a in document["attributes"] if a["key"] not in keys],
            }
        return {key: _strip(value, *keys) for key, value in document.items()}
    return document


def test_a_plain_http_step_without_its_bytes_is_refused(recorded: Recorded, tmp_path: Path) -> None:
    document = _strip(
        collector_json(run_spans(recorded, SUPPORT)), "replay.request.body", "replay.response.body"
    )
    path = tmp_path / "bare.json"
    path.write_text(json.dumps(document))
    with pytest.raises(SourceError) as caught:
        load_run(str(path))
    message = str(caught.value)
    assert "\n" not in message
    assert str(path) in message and SUPPORT in message and "step 1 (GET)" in message


def _tamper(document: Any) -> Any:
    for resource_spans in document["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for attribute in span["attributes"]:
                    if attribute["key"] == "replay.response.body":
                        value = attribute["value"]["stringValue"]
                        attribute["value"]["stringValue"] = value.replace("A-1234", "B-9999")
    return document


def test_an_inline_body_that_does_not_match_its_hash_is_refused(
    recorded: Recorded, tmp_path: Path
) -> None:
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(_tamper(collector_json(run_spans(recorded, SUPPORT)))))
    with pytest.raises(SourceError, match=r"does not match replay\.response\.hash") as caught:
        load_sources(str(path))
    assert str(path) in str(caught.value) and "step 0 (chat gpt-4o-mini)" in str(caught.value)
