"""The fork plan: flags and keyword arguments parsed, checked against the run, handed on."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from otel_replay.errors import ConfigError
from otel_replay.replay._fork import Fault, ForkPlan, Override
from otel_replay.replay._model import RecordedStep, Run
from tests.replay._recorded import recorded_step


def _step(
    index: int, kind: str, endpoint: str, effect: str | None = None, within: int | None = None
) -> RecordedStep:
    return recorded_step(
        index=index,
        within=within,
        kind=kind,
        endpoint=endpoint,
        method="POST",
        url=None,
        request_body=b"{}",
        request_hash=None,
        status_code=200,
        response_headers=(),
        response_body=b"{}",
        fidelity="exact",
        attributes={} if effect is None else {"replay.tool.effect": effect},
    )


RUN = Run(
    "r_plan",
    "test",
    (
        _step(0, "value", "value:uuid4"),
        _step(1, "llm", "openai.chat_completions"),
        _step(2, "tool", "tool:lookup_order", "read"),
        _step(3, "http", "GET /tools/weather"),
        _step(4, "checkpoint", "checkpoint:after_search"),
        _step(5, "tool", "tool:refund_order", "write"),
    ),
)


def test_cli_strings_and_mappings_make_the_same_plan(tmp_path: Path) -> None:
    (tmp_path / "result.json").write_text('{"status": "lost"}')
    from_cli = ForkPlan.build(
        override=["2=@result.json", "1=text:All done.", '4={"docs": []}', "3=503:@result.json"],
        inject=["1=http:429"],
        state=['after_search={"docs": []}'],
        live_from=5,
        base=tmp_path,
    )
    assert from_cli.overrides[2] == Override(2, b'{"status": "lost"}', given="@result.json")
    assert from_cli.overrides[1] == Override(1, b"All done.", text=True, given="text:All done.")
    assert from_cli.overrides[3].status == 503
    assert from_cli.injections[1] == Fault(1, "http", status=429, given="http:429")
    assert from_cli.states["after_search"].body == b'{"docs": []}'
    from_python = ForkPlan.build(override={4: {"docs": []}}, state={"after_search": {"docs": []}})
    assert json.loads(from_python.overrides[4].body) == {"docs": []}
    assert from_python.states == {"after_search": from_python.states["after_search"]}
    # Handed to the replayed process and read back whole.
    assert ForkPlan.from_json(from_cli.to_json()) == from_cli


@pytest.mark.parametrize(
    ("spec", "kind", "fields"),
    [
        ("http:503:down", "http", {"status": 503, "body": b"down"}),
        ("timeout", "timeout", {}),
        ("disconnect", "disconnect", {}),
        ("stream-cut:120", "stream-cut", {"cut_at": 120}),
        ("tool:error", "tool-error", {}),
        ("tool:error:db is down", "tool-error", {"message": "db is down"}),
    ],
)
def test_every_fault_parses(spec: str, kind: str, fields: dict[str, object]) -> None:
    fault = ForkPlan.build(inject={2: spec}).injections[2]
    assert fault == Fault(2, kind, given=spec, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"override": ["2=1", "2=2"]}, "--override: step 2 is given twice"),
        ({"inject": ["1=timeout", "1=disconnect"]}, "--inject: step 1 is given twice"),
        ({"override": ["x=1"]}, "--override 'x': the step must be a number >= 0"),
        ({"override": ["3"]}, "--override '3': expected KEY=VALUE"),
        ({"inject": ["1=http:42"]}, "--inject 1=http:42: expected http:STATUS[:BODY]"),
        ({"inject": ["1=boom"]}, "--inject 1=boom: unknown fault"),
        ({"inject": ["1=stream-cut:x"]}, "expected stream-cut:BYTES"),
        ({"override": ["2=@missing.json"]}, "--override 2: cannot read"),
        # Once read for ever, the replay hanging with its memory growing.
        ({"override": ["2=@/dev/zero"]}, "--override 2: /dev/zero holds more than 268435456"),
        ({"state": ["s=@/dev/zero"]}, "--state s: /dev/zero holds more than 268435456 bytes"),
        ({"override": ["3=999:@error.json"]}, "--override 3=999:@error.json: expected STATUS:"),
        ({"state": ["s=not json"]}, "--state s=not json: not JSON"),
        ({"live_from": -1}, "--live-from -1: expected a step number >= 0"),
        ({"allow_writes": "yes"}, "allow_writes='yes' is not True or False"),
    ],
)
def test_bad_flags_are_one_line(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        ForkPlan.build(**options)  # type: ignore[arg-type]
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"override": ["9=1"]}, "--override 9: no such step (run r_plan has steps 0-5)"),
        ({"live_from": 6}, "--live-from 6: no such step"),
        ({"override": ["1=2"], "inject": ["1=timeout"]}, "step 1 is given to both"),
        ({"inject": ["2=http:429"]}, "step 2 is a tool step (tool:lookup_order), which a http"),
        ({"inject": ["1=tool:error"]}, "step 1 is a model step (openai.chat_completions)"),
        ({"inject": ["0=timeout"]}, "step 0 is a value step"),
        ({"inject": ["1=stream-cut:2"]}, "step 1's recorded answer is 2 bytes; a cut at or past"),
        ({"override": ["1=[1]"]}, "give a provider response body (a JSON object) or text:"),
        ({"override": ['1={"answer": "hi"}']}, "(it has no 'choices' list)"),
        ({"override": ["2=plain"]}, "whose answer is JSON"),
        ({"override": ["0=text:notauuid"]}, "--override 0=text:notauuid: step 0 is a value"),
        ({"override": ['0="x"']}, "(value:uuid4) whose answer is a UUID's text"),
        ({"override": ["2=503:{}"]}, "only an HTTP step takes a status"),
        ({"override": ["5=1"], "live_from": 4}, "--override 5: the step is not served"),
        ({"state": ["nowhere={}"]}, "no checkpoint of that name (its checkpoints: after_search)"),
        (
            {"state": ["after_search={}"], "live_from": 4},
            "--state after_search: its checkpoint (step 4) is not served from the recording",
        ),
    ],
)
def test_a_plan_that_does_not_fit_the_run_is_refused(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=None) as caught:
        ForkPlan.build(**options).check(RUN)  # type: ignore[arg-type]
    assert message in str(caught.value)


@pytest.mark.parametrize(
    "spec", ['"not a date"', '"2026-11-21T09:05:00"', "5", "text:tomorrow", "text:"]
)
def test_a_time_that_now_cannot_give_is_refused_before_the_program_runs(spec: str) -> None:
    """``now()`` gives an aware datetime: any other answer made the program fail at that
    step, blamed on the recording (``the recorded time has no UTC offset``), exit 2."""
    run = Run("r_clock", "test", (_step(0, "value", "value:now"),))
    with pytest.raises(ConfigError) as caught:
        ForkPlan.build(override={0: spec}).check(run)
    assert str(caught.value) == (
        f"--override 0={spec}: step 0 is a value (value:now) whose answer is an ISO 8601 time "
        "with a UTC offset (text:2026-11-21T09:05:00+00:00)"
    )
    for good in ('"2020-02-29T23:59:59+05:30"', "text:2020-01-01T00:00:00+00:00"):
        assert ForkPlan.build(override={0: good}).check(run)
    # A value of another name (a side effect), or a side effect named so, answers any JSON.
    other = Run("r_cfg", "test", (_step(0, "value", "value:read_config"),))
    assert ForkPlan.build(override={0: "5"}).check(other)
    effect = replace(
        _step(0, "value", "value:now"), step=replace(run.steps[0].step, request_body=b'{"args":[]}')
    )
    assert ForkPlan.build(override={0: "5"}).check(Run("r_effect", "test", (effect,)))


def test_a_step_made_inside_a_tool_is_changed_only_when_the_tool_runs() -> None:
    in_write = _step(6, "value", "value:uuid4", within=5)
    in_read = _step(7, "http", "GET /orders", within=2)
    run = Run("r_nested", "test", (*RUN.steps, in_write, in_read))
    for options in (
        {"override": {6: '"0b0e7c2a-6f3c-4f5e-9d1a-2c8e4b7a9f10"'}},
        {"inject": {6: "timeout"}},
    ):
        with pytest.raises(ConfigError, match=r"made inside step 5 \(tool:refund_order\)"):
            ForkPlan.build(**options).check(run)  # type: ignore[arg-type]
    assert ForkPlan.build(
        override={6: '"0b0e7c2a-6f3c-4f5e-9d1a-2c8e4b7a9f10"'}, allow_writes=True
    ).check(run)
    with pytest.raises(ConfigError, match=r"a read tool .* or add --live-tools read"):
        ForkPlan.build(inject={7: "timeout"}).check(run)
    assert ForkPlan.build(inject={7: "timeout"}).check(run, live_read_tools=True)


def test_the_fork_step_is_the_first_that_differs() -> None:
    assert ForkPlan().empty and ForkPlan().fork_step(RUN) is None
    assert ForkPlan.build(override={3: "{}"}, inject={1: "timeout"}).fork_step(RUN) == 1
    assert ForkPlan.build(state={"after_search": 1}).fork_step(RUN) == 4
    assert ForkPlan.build(allow_writes=True).fork_step(RUN) == 5
    assert ForkPlan.build(live_from=2, override={1: "{}"}).fork_step(RUN) == 1
