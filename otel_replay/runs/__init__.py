"""Runs: which run a step belongs to, a process's trace and how it ends, worker processes,
and the bounded hand-off of finished steps to the exporter."""

from __future__ import annotations

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
    current_run,
    new_run_id,
    qualified_name,
    run,
    start_process_run,
    use_fork,
    use_parent_run,
    use_recorded_seed,
    use_tracer,
)

__all__ = [
    "RUN_FACTS",
    "WORKER_EXIT_PRIORITY",
    "Consumer",
    "DurableFlush",
    "Handoff",
    "OpenSteps",
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
    "start_process_run",
    "stop_handing_over",
    "unwatch",
    "use_fork",
    "use_parent_run",
    "use_recorded_seed",
    "use_tracer",
    "watch",
]
