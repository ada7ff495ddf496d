"""Runs: which run a step belongs to, a process's trace and how it ends, worker processes,
and the bounded hand-off of finished steps to the exporter."""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_replay._lazy import lazy_names as _lazy_names

if TYPE_CHECKING:
    from otel_replay.runs._failed import describe_with
    from otel_replay.runs._family import hand_over_runs, inherited_runs, stop_handing_over
    from otel_replay.runs._handoff import Consumer, DurableFlush, Handoff, handoff, register_flush
    from otel_replay.runs._open_steps import OpenSteps, cut_in_flight
    from otel_replay.runs._process_trace import (
        WORKER_EXIT_PRIORITY,
        StepTracer,
        adopt_root,
        cut_off,
        end_at_exit,
        exit_flush,
        exiting,
        unwatch,
        watch,
    )
    from otel_replay.runs._run import (
        RUN_FACTS,
        RunState,
        current_run,
        new_run_id,
        qualified_name,
        run,
        seed_process,
        start_process_run,
        use_fork,
        use_parent_run,
        use_recorded_seed,
        use_tracer,
    )

_LAZY = {
    "Consumer": "otel_replay.runs._handoff",
    "DurableFlush": "otel_replay.runs._handoff",
    "Handoff": "otel_replay.runs._handoff",
    "OpenSteps": "otel_replay.runs._open_steps",
    "RUN_FACTS": "otel_replay.runs._run",
    "RunState": "otel_replay.runs._run",
    "StepTracer": "otel_replay.runs._process_trace",
    "WORKER_EXIT_PRIORITY": "otel_replay.runs._process_trace",
    "adopt_root": "otel_replay.runs._process_trace",
    "current_run": "otel_replay.runs._run",
    "cut_in_flight": "otel_replay.runs._open_steps",
    "cut_off": "otel_replay.runs._process_trace",
    "describe_with": "otel_replay.runs._failed",
    "end_at_exit": "otel_replay.runs._process_trace",
    "exit_flush": "otel_replay.runs._process_trace",
    "exiting": "otel_replay.runs._process_trace",
    "hand_over_runs": "otel_replay.runs._family",
    "handoff": "otel_replay.runs._handoff",
    "inherited_runs": "otel_replay.runs._family",
    "new_run_id": "otel_replay.runs._run",
    "qualified_name": "otel_replay.runs._run",
    "register_flush": "otel_replay.runs._handoff",
    "run": "otel_replay.runs._run",
    "seed_process": "otel_replay.runs._run",
    "start_process_run": "otel_replay.runs._run",
    "stop_handing_over": "otel_replay.runs._family",
    "unwatch": "otel_replay.runs._process_trace",
    "use_fork": "otel_replay.runs._run",
    "use_parent_run": "otel_replay.runs._run",
    "use_recorded_seed": "otel_replay.runs._run",
    "use_tracer": "otel_replay.runs._run",
    "watch": "otel_replay.runs._process_trace",
}
"""Each public name and the module it comes from, imported on first use: a process that only
names runs (the CLI minting a replay's id) does not load the OpenTelemetry SDK, the process
trace or the worker hooks."""


__getattr__ = _lazy_names(__name__, _LAZY, globals())


__all__ = [
    "RUN_FACTS",
    "WORKER_EXIT_PRIORITY",
    "Consumer",
    "DurableFlush",
    "Handoff",
    "OpenSteps",
    "RunState",
    "StepTracer",
    "adopt_root",
    "current_run",
    "cut_in_flight",
    "cut_off",
    "describe_with",
    "end_at_exit",
    "exit_flush",
    "exiting",
    "hand_over_runs",
    "handoff",
    "inherited_runs",
    "new_run_id",
    "qualified_name",
    "register_flush",
    "run",
    "seed_process",
    "start_process_run",
    "stop_handing_over",
    "unwatch",
    "use_fork",
    "use_parent_run",
    "use_recorded_seed",
    "use_tracer",
    "watch",
]
